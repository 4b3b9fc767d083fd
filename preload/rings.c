/* The walk in the process (issue 24), wired into the traced paths: a call
 * the library would fire a site for is walked here instead (walk.c) and
 * written into its thread's ring (walk_ring.c) while dwleak asks for it
 * (control.rings_request); and the unwind image the DWARF walk needs,
 * handed over through an arena this library maps and dwleak writes,
 * checked and given a rule cache of its own before any walk uses it.
 * bpf/abi/preload.h says who writes which field.  Everything here runs
 * inside the program's allocator calls: no lock, no allocation, errno
 * kept; mmap is the one system call of the handover (a bare one in glibc,
 * as traced.c's map_zeroed says), and a failure of it only falls back to
 * the sites or counts. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "constants.h"
#include "interpose.h"
#include "walk.h"
#include "walk_ring.h"

/* --- The image handover --------------------------------------------------

 * One thread at a time hands over (the others, and a signal handler of the
 * same thread, find HANDOVER_BUSY set and go on with what is installed:
 * nobody waits), so the arena's address and size below are read together.
 * They are the library's own record of its newest arena: the control
 * block's copy is there for dwleak to read, and an image's bounds are
 * checked against this one, so no value dwleak writes makes the library
 * read outside memory it mapped itself. */
static uint32_t handover_busy;
static uint8_t *arena_base;
static uint64_t arena_size;	/* read without the lock too: only to see that a request is new */
/* the arena before the newest (NULL: none): dwleak may have written an
 * image there before it saw the newest one published */
static uint8_t *arena_prev_base;
static uint64_t arena_prev_size;
static uint64_t arena_refused;	/* the largest request a mapping failed for (retried only above it) */
static uint32_t image_tried;	/* the control block's image_gen last looked at */

/* The image walks use: NULL until one was installed; then each one a new
 * mapping (the image's checked pointers and its rule cache), published with
 * release and never unmapped or reused, since a thread may still walk with
 * the one before.  A thread loads it once per walk. */
static const struct walk_image *image_cur;

/* The rule cache each image gets: 2^16 slots, 512 KiB (walk.h: a warm frame
 * is one slot load; 65,536 distinct return addresses is far more than a
 * program's allocation sites reach).  Mapped after the image's own struct. */
#define IMAGE_CACHE_BYTES (8ul << 16)
#define IMAGE_CACHE_OFFSET 64
_Static_assert(sizeof(struct walk_image) <= IMAGE_CACHE_OFFSET, "the image's struct before its cache");

/* An arena past this is refused without asking the kernel (its rounding to
 * pages cannot wrap): 1 TiB, far above any image (a few MiB). */
#define ARENA_MAX (1ull << 40)

/* LEN bytes of new memory, read-write, zeroed; NULL with *ERR the negative
 * errno when the kernel refused (no memory, a seccomp filter). */
static void *map_new(uint64_t len, int extra, int *err)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);

	if (m == MAP_FAILED) {
		*err = errno ? -errno : -ENOMEM;
		return NULL;
	}
	return m;
}

/* dwleak asked for a larger arena: maps one and publishes it, its length
 * then its address (dwleak reads the address last).  Under the lock. */
static void arena_grow(void)
{
	uint64_t req = __atomic_load_n(&ctl.image_arena_request, __ATOMIC_RELAXED), len;
	int err = -ENOMEM;
	void *m = NULL;

	if (req <= arena_size || req <= arena_refused)
		return;
	len = (req + DWLEAK_PAGE_SIZE - 1) & ~(DWLEAK_PAGE_SIZE - 1);
	if (req <= ARENA_MAX)
		m = map_new(len, MAP_NORESERVE, &err);
	if (!m) {
		__atomic_store_n(&arena_refused, req, __ATOMIC_RELAXED);
		__atomic_store_n(&ctl.image_error, err, __ATOMIC_RELAXED);
		return;
	}
	arena_prev_base = arena_base;
	arena_prev_size = arena_size;
	arena_base = m;
	__atomic_store_n(&arena_size, len, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl.image_arena_len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl.image_arena_addr, (uint64_t)(uintptr_t)m, __ATOMIC_RELEASE);
}

/* dwleak published an image (a new image_gen): checked where it says it
 * is, inside the newest arena, and installed with a cache of its own; or
 * image_error says why not and the image in use stays.  Under the lock. */
static void image_install(void)
{
	uint32_t gen = __atomic_load_n(&ctl.image_gen, __ATOMIC_ACQUIRE);
	uint64_t off, len;
	struct walk_image check, *img;
	int err = 0;

	if (gen == image_tried)
		return;
	__atomic_store_n(&image_tried, gen, __ATOMIC_RELAXED);
	off = __atomic_load_n(&ctl.image_off, __ATOMIC_RELAXED);
	len = __atomic_load_n(&ctl.image_len, __ATOMIC_RELAXED);
	if (!arena_base || off % UNWIND_IMAGE_ALIGN || off > arena_size || len > arena_size - off)
		err = -EINVAL;
	else
		err = walk_image_check(arena_base + off, len, &check);
	/* written into the arena before the newest one: dwleak asks for a new
	 * arena while the one in use still holds the image it writes (so that
	 * the next image need not wait for it), and reads the arena's address
	 * before it writes; an image that is not whole where it was looked for
	 * fails the check, so trying both reads nothing of the wrong one */
	if (err && arena_prev_base && !(off % UNWIND_IMAGE_ALIGN) && off <= arena_prev_size &&
	    len <= arena_prev_size - off && !walk_image_check(arena_prev_base + off, len, &check))
		err = 0;
	img = err ? NULL : map_new(IMAGE_CACHE_OFFSET + IMAGE_CACHE_BYTES, 0, &err);
	if (!img) {
		__atomic_store_n(&ctl.image_error, err, __ATOMIC_RELAXED);
		return;
	}
	*img = check;
	/* cannot fail: the memory is aligned and large enough */
	(void)walk_image_cache(img, (uint8_t *)img + IMAGE_CACHE_OFFSET, IMAGE_CACHE_BYTES);
	__atomic_store_n(&image_cur, img, __ATOMIC_RELEASE);
	__atomic_store_n(&ctl.image_error, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl.image_installed, gen, __ATOMIC_RELEASE);
}

/* Whether dwleak asked for something the handover has not looked at yet:
 * four relaxed loads, made only while rings are requested. */
static inline bool handover_wanted(void)
{
	uint64_t req = __atomic_load_n(&ctl.image_arena_request, __ATOMIC_RELAXED);

	return (req > __atomic_load_n(&arena_size, __ATOMIC_RELAXED) &&
		req > __atomic_load_n(&arena_refused, __ATOMIC_RELAXED)) ||
	       __atomic_load_n(&ctl.image_gen, __ATOMIC_RELAXED) != __atomic_load_n(&image_tried, __ATOMIC_RELAXED);
}

static __attribute__((noinline, cold)) void handover(void)
{
	uint32_t idle = 0;
	int saved = errno;

	if (!__atomic_compare_exchange_n(&handover_busy, &idle, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	alloc_depth++; /* the arena and the cache are the library's memory, not the program's */
	arena_grow();
	image_install();
	alloc_depth--;
	__atomic_store_n(&handover_busy, 0, __ATOMIC_RELEASE);
	errno = saved;
}

/* How long a record waits for room in its thread's full ring. */
#define RINGS_WAIT_MS 500

/* Set once the library went back to its sites for good (rings_stop):
 * its own copy, so that no value dwleak writes turns the walk back on. */
static uint32_t rings_stopped;

uint32_t rings_mode_slow(uint32_t request)
{
	if (request != DWLEAK_PRELOAD_WALK_DWARF && request != DWLEAK_PRELOAD_WALK_FP)
		return DWLEAK_PRELOAD_WALK_NONE; /* a mode this library does not know: the sites */
	if (unlikely(__atomic_load_n(&rings_stopped, __ATOMIC_ACQUIRE)))
		return DWLEAK_PRELOAD_WALK_NONE;
	if (unlikely(handover_wanted()))
		handover();
	/* an exact trace loses nothing to a burst: a full ring waits for
	 * dwleak, as heaptrack's pipe does (stored once: the line is shared) */
	if (unlikely(__atomic_load_n(&walk_ring_wait_ms, __ATOMIC_RELAXED) != RINGS_WAIT_MS))
		__atomic_store_n(&walk_ring_wait_ms, RINGS_WAIT_MS, __ATOMIC_RELAXED);
	if (request == DWLEAK_PRELOAD_WALK_FP)
		return DWLEAK_PRELOAD_WALK_FP;
	return __atomic_load_n(&image_cur, __ATOMIC_ACQUIRE) ? DWLEAK_PRELOAD_WALK_DWARF : DWLEAK_PRELOAD_WALK_NONE;
}

void rings_fork_child(void)
{
	/* a thread that no longer exists may have held it at the fork */
	handover_busy = 0;
}

/* --- Recording --------------------------------------------------------------- */

/* One record written (its mode in the control block, stored only when it
 * changes: the line is shared with every thread). */
static void rings_put(uint32_t mode, uint32_t type, uint32_t kind, const struct walk_frames *f, void *p,
		      uint64_t size)
{
	int err;

	alloc_depth++; /* a thread's first record maps its ring: the library's memory */
	err = walk_ring_put(type, kind, f ? f->end : WALK_END_OK, mode == DWLEAK_PRELOAD_WALK_FP,
			    (uint64_t)(uintptr_t)p, size, f ? f->pcs : NULL, f ? f->n : 0, f ? f->name : NULL,
			    __atomic_load_n(&ctl.generation, __ATOMIC_RELAXED));
	alloc_depth--;
	if (unlikely(err)) {
		CTL_COUNT(ring_failed);
		return;
	}
	/* not counted in the control block (ring_records): a locked add on
	 * the line every thread reads the control block from cost two
	 * threads 1.6x one thread's time a call; each ring counts its own */
	if (unlikely(__atomic_load_n(&ctl.rings_active, __ATOMIC_RELAXED) != mode))
		__atomic_store_n(&ctl.rings_active, mode, __ATOMIC_RELAXED);
}

/* Set while the thread walks with its memo and writes the walk's record:
 * a signal handler's walk in the middle of it walks without (the memo is
 * the thread's, no lock), so that the entry a record names still holds
 * its frames when the record is written. */
static __thread uint32_t memo_busy __attribute__((tls_model("initial-exec")));

_Static_assert(sizeof(struct walk_memo) <= WALK_RING_SCRATCH_BYTES, "the walk memo in its ring's scratch");
_Static_assert(WALK_MEMO_ENTRIES <= WALK_RING_STACK_SLOTS, "a memo entry's index names its stack in the ring");

/* The DWARF walk, with the thread's memo of whole walks (walk.h) when it
 * has one: in its ring's scratch memory, so that it goes with the ring to
 * the next thread when this one ends, not mapped for each thread.
 * Returns whether it took the memo (the caller releases it with
 * memo_release once the walk's record is written). */
static bool walk_dwarf_thread(const struct walk_image *img, const struct walk_regs *regs,
			      const struct walk_bounds *b, struct walk_frames *f)
{
	struct walk_memo *m = memo_busy ? NULL : walk_ring_scratch();

	if (m) {
		memo_busy = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
	walk_dwarf_memo(img, regs, b, m, f);
	if (f->remembered)
		walk_ring_count_remembered();
	return m != NULL;
}

static void memo_release(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	memo_busy = 0;
}

/*
 * The walk starts where dwleak's kernel program starts it at dwleak:alloc
 * (bpf/usdt.bpf.h, site_alloc): at the entry of the real function the
 * library forwarded to (pc = REAL, an exact pc), with the stack pointer at
 * the library's entry (CALLER_SP: on x86_64 CFA - 8, where the return
 * address into the caller is; on aarch64 the CFA, the return address in
 * LR) and the frame pointer as the caller left it (the library never
 * changes rbp or x29: built -ffixed-rbp, -ffixed-x29).  So pcs[0] is REAL,
 * pcs[1] the return address into the caller, and no frame of the library
 * is walked: the kernel's frames.
 * Out of line: the frames take a kilobyte of stack, on this path only.
 */
__attribute__((noinline)) void rings_alloc(const struct call *c, void *p)
{
	const struct walk_image *img = NULL;
	struct walk_frames f;
	struct walk_bounds b;
	struct walk_regs regs;
	bool memo = false;

	/* the block's word in the table of recent allocations, written once
	 * the record is: a random line, fetched while the stack is walked */
	walk_ring_prefetch((uint64_t)(uintptr_t)p);
	/* rbp (x29) through walk_regs_capture, the library's one reader of it
	 * (tests/preload_transparency.sh and tests/arm64_build.sh check that
	 * no other touches it) */
	walk_regs_capture(&regs);
	regs.pc = (uint64_t)(uintptr_t)next[c->f].fn;
	regs.sp = CALLER_SP(c->cfa);
	regs.lr = c->ra; /* aarch64: what x30 held at the library's entry */
	regs.exact_pc = 1;
	if (c->walk == DWLEAK_PRELOAD_WALK_DWARF)
		img = __atomic_load_n(&image_cur, __ATOMIC_ACQUIRE);
	if (walk_stack_bounds(regs.sp, &b) || (!img && c->walk == DWLEAK_PRELOAD_WALK_DWARF)) {
		/* no stack to read (its mapping not found: /proc unreadable,
		 * a seccomp filter): the call is recorded all the same, with
		 * the one frame known */
		f.pcs[0] = regs.pc;
		f.n = 1;
		f.end = WALK_ERR_READ;
		f.name = NULL;
	} else if (c->walk == DWLEAK_PRELOAD_WALK_FP) {
		walk_fp(&regs, &b, &f);
	} else {
		memo = walk_dwarf_thread(img, &regs, &b, &f);
	}
	rings_put(c->walk, WALK_RING_REC_ALLOC, fns[c->f].kind, &f, p, c->size);
	if (memo)
		memo_release();
}

void rings_free(void *p, uint32_t kind, uint64_t how, uint32_t mode)
{
	/* an allocation dwleak has not read yet goes with its free: neither
	 * reaches dwleak (most blocks live that short) */
	uint32_t cancel = __atomic_load_n(&ctl.rings_cancel, __ATOMIC_RELAXED);

	if ((cancel == DWLEAK_PRELOAD_CANCEL_STAMPED || cancel == DWLEAK_PRELOAD_CANCEL_RETRACT) &&
	    walk_ring_cancel((uint64_t)(uintptr_t)p, cancel == DWLEAK_PRELOAD_CANCEL_RETRACT))
		return;
	rings_put(mode, how == DWLEAK_PRELOAD_REALLOC_FREE ? WALK_RING_REC_REALLOC_FREE : WALK_RING_REC_FREE, kind,
		  NULL, p, 0);
}

/*
 * At the process's exit (the library's destructor, the last to run: it
 * was the first object initialised), while a tracer listens and rings
 * were asked for: waits, up to RINGS_FLUSH_MS, until dwleak has read
 * every record published, so that `dwleak -p` (which has no stop at the
 * exit) loses none of the last calls' records when the memory goes
 * away; heaptrack's library flushes its pipe the same way.  dwleak reads
 * every few ms, so the wait is that long at most when it is there.  A
 * process that ends without exit() (a signal, _exit) does not wait.
 */
#define RINGS_FLUSH_MS 200

static bool rings_unread(void)
{
	uint32_t i;

	for (i = 0; i < WALK_RING_SLOTS; i++) {
		const struct walk_ring_slot *s = &walk_ring_directory.slot[i];
		const struct walk_ring_header *r;

		if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != WALK_RING_SLOT_LIVE)
			continue;
		r = (const struct walk_ring_header *)(uintptr_t)__atomic_load_n(&s->ring, __ATOMIC_ACQUIRE);
		/* a ring not read to its end, whether dwleak read from it yet
		 * or not (a thread that lived between two drains: its records
		 * would be lost without a word, the process gone) */
		if (r && __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) < __atomic_load_n(&r->published, __ATOMIC_ACQUIRE))
			return true;
	}
	return false;
}

__attribute__((destructor)) static void rings_flush_at_exit(void)
{
	struct timespec ms = { 0, 1000000 };
	int saved = errno, i;

	if (__atomic_load_n(&ctl.rings_request, __ATOMIC_RELAXED) == DWLEAK_PRELOAD_WALK_NONE ||
	    !dwleak_alloc_semaphore)
		return;
	for (i = 0; i < RINGS_FLUSH_MS && rings_unread(); i++)
		syscall(SYS_nanosleep, &ms, NULL); /* bare: no cancellation point */
	errno = saved;
}

void rings_stop(uint32_t why)
{
	struct timespec ms = { 0, 1000000 };
	uint32_t running = 0;
	int saved = errno, i;

	if (!__atomic_compare_exchange_n(&rings_stopped, &running, why, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&walk_ring_directory.stopped, why, __ATOMIC_RELEASE);
	if (__atomic_load_n(&ctl.rings_request, __ATOMIC_RELAXED) == DWLEAK_PRELOAD_WALK_NONE ||
	    !dwleak_alloc_semaphore)
		return;
	/* until a drain that began after the store has read and applied every
	 * record (dwleak acknowledges in the directory), so that none is
	 * applied after the sites' records that follow; one millisecond
	 * first: a call of another thread that chose its ring just before
	 * the flag publishes its record meanwhile, and is read with the rest */
	i = 0;
	do
		syscall(SYS_nanosleep, &ms, NULL);
	while (++i < RINGS_FLUSH_MS && !__atomic_load_n(&walk_ring_directory.stopped_acked, __ATOMIC_ACQUIRE));
	errno = saved;
}
