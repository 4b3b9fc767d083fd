/* The preload library's walk in the process (issue 24), end to end in one
 * process: with the library LD_PRELOAD'ed (the test runs itself again
 * with it), the test does what dwleak does to a traced process: turns the
 * traced paths on (the USDT semaphores, found in the library's notes),
 * asks for the rings through the control block, has the library map an
 * arena, writes an unwind image of its own objects into it (tables/
 * table_image.c, as test_preload_walk) and publishes it; then it allocates
 * from known call chains (two threads, a fork child) and drains its own
 * rings with dwleak's reader (target/walk_ring_read.c).  Every allocation
 * and free must be there with its address, size, kind and type; each
 * allocation's frames must be the kernel program's: pcs[0] the real
 * allocator function, pcs[1] the return address into the function that
 * called it, then exactly the frames glibc's backtrace() (libgcc, from
 * .eh_frame: an independent oracle) gives in that function.  A corrupt
 * image must be refused (image_error) with the old one kept in use; the
 * frame-pointer walk needs no image.  Built without sanitizers (the
 * library becomes this process's malloc) and with frame pointers (for the
 * FP walk).  With --bench N: ns per malloc(64)+free pair, each mode. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <libgen.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "dwleak.h"
#include "preload.h"
#include "proc_maps.h"
#include "table_image.h"
#include "unwind_image.h"
#include "unwinder.h"
#include "usdt.h"
#include "walk_ring_abi.h"
#include "walk_ring_read.h"

#define BT_MAX 64

int main(int argc, char **argv);

static struct dwleak_preload_control *ctl;

/* --- Starting with the library ---------------------------------------------- */

/* Runs this program again with the library preloaded, unless it is: the
 * library next to the build's test directory (BUILD/asan/tests/ ->
 * BUILD/libdwleak-preload.so), or $BUILD's. */
static void preload_self(char **argv)
{
	char exe[4096], lib[4200];
	const char *build = getenv("BUILD");
	ssize_t n;

	if (dlsym(RTLD_DEFAULT, DWLEAK_PRELOAD_CONTROL_SYM))
		return;
	CHECK(!getenv("TEST_PRELOAD_RINGS_AGAIN"), "started with the library, which defines no %s",
	      DWLEAK_PRELOAD_CONTROL_SYM);
	if (build) {
		snprintf(lib, sizeof(lib), "%s/%s", build, "libdwleak-preload.so");
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		CHECK(n > 0);
		exe[n] = 0;
		snprintf(lib, sizeof(lib), "%s/../../%s", dirname(exe), "libdwleak-preload.so");
	}
	if (access(lib, R_OK)) {
		printf("skip: no preload library at %s\n", lib);
		exit(EXIT_SKIP);
	}
	setenv("LD_PRELOAD", lib, 1);
	setenv("TEST_PRELOAD_RINGS_AGAIN", "1", 1);
	execv("/proc/self/exe", argv);
	CHECK(0, "execv: %s", strerror(errno));
}

/* The library's base and file, for its notes. */
struct lib_find {
	uintptr_t base;
	char path[4096];
};

static int lib_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lib_find *f = arg;

	(void)size;
	if (!strstr(info->dlpi_name, DWLEAK_PRELOAD_NAME))
		return 0;
	f->base = info->dlpi_addr;
	snprintf(f->path, sizeof(f->path), "%s", info->dlpi_name);
	return 1;
}

/* The traced paths on, as a tracer's uprobes would turn them on: each
 * site's semaphore raised (dwleak, attaching no uprobe for the rings,
 * writes them through /proc/PID/mem). */
static uint16_t *sem_alloc, *sem_free;

static void semaphores_raise(void)
{
	struct lib_find f = { 0 };
	struct usdt_note *notes;
	const struct usdt_note *a, *fr;
	size_t n;
	int fd;

	CHECK(dl_iterate_phdr(lib_cb, &f) == 1, "the library is not loaded");
	fd = open(f.path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "%s: %s", f.path, strerror(errno));
	CHECK(usdt_notes_read(fd, &notes, &n) == 0);
	close(fd);
	a = usdt_note_find(notes, n, DWLEAK_PRELOAD_PROVIDER, DWLEAK_PRELOAD_SITE_ALLOC);
	fr = usdt_note_find(notes, n, DWLEAK_PRELOAD_PROVIDER, DWLEAK_PRELOAD_SITE_FREE);
	CHECK(a && a->sem && fr && fr->sem, "the library's sites have no semaphores");
	sem_alloc = (uint16_t *)(f.base + a->sem);
	sem_free = (uint16_t *)(f.base + fr->sem);
	__atomic_fetch_add(sem_alloc, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(sem_free, 1, __ATOMIC_RELAXED);
	usdt_notes_free(notes, n);
}

/* --- This process's unwind image --------------------------------------------- */

static void *self_blob;
static size_t self_len;

/* Compiles the tables of every object this process maps code of and puts
 * them into one image (as test_preload_walk). */
static void image_build(void)
{
	struct table_image_mapping *maps_out;
	struct unwinder *u;
	struct proc_map *maps;
	size_t n, i, nout = 0;

	CHECK(unwinder_new(NULL, NULL, &u) == 0);
	CHECK(unwinder_add_process(u, getpid()) == 0);
	CHECK(proc_maps_read(getpid(), true, &maps, &n) == 0);
	maps_out = calloc(n, sizeof(*maps_out));
	CHECK(maps_out);
	for (i = 0; i < n; i++) {
		struct file_key key = { .dev = maps[i].dev, .ino = maps[i].ino };
		struct unwind_object *o = maps[i].ino ? unwinder_find(u, &key) : NULL;

		if (!o || o->error || !o->table)
			continue;
		maps_out[nout++] = (struct table_image_mapping){
			.table = o->table,
			.start = maps[i].start,
			.end = maps[i].end,
			.bias = maps[i].start - unwind_object_elf_addr(o, maps[i].start, maps[i].offset, maps[i].start),
		};
	}
	proc_maps_free(maps, n);
	CHECK(table_image_build(maps_out, nout, &self_blob, &self_len) == 0);
	printf("image: %zu mappings, %zu bytes\n", nout, self_len);
	/* the blob copies what it needs of the tables */
	free(maps_out);
	unwinder_free(u);
}

/* --- The rings, drained as dwleak drains them ------------------------------- */

#define KEEP_FRAMES 48
#define GOT_MAX 40000

struct got {
	uint32_t tid, type, kind, end, fp, nframes;
	uint64_t tsc, addr, size;
	uint64_t pcs[KEEP_FRAMES];
};

static struct got got[GOT_MAX];
static uint32_t ngot;
static bool got_keep = true; /* false: records only counted (the cost) */
static struct walk_ring_drain drain_buf;

static struct walk_ring_names *names; /* the rings' stack names, as dwleak keeps them */

static int on_record(void *ctx, const struct walk_ring_rec *r0)
{
	struct walk_ring_rec x = *r0;
	const struct walk_ring_rec *r = &x;
	struct got *g;

	(void)ctx;
	if (!names)
		names = walk_ring_names_new();
	CHECK(names && walk_ring_names_resolve(names, &x) == 0, "a record names a stack no record defined");
	if (!got_keep)
		return 0;
	CHECK(ngot < GOT_MAX, "more records than the test keeps");
	g = &got[ngot++];
	*g = (struct got){ r->tid, r->type, r->kind, r->end, r->fp, r->nframes, r->tsc, r->addr, r->size, { 0 } };
	memcpy(g->pcs, r->pcs, (r->nframes < KEEP_FRAMES ? r->nframes : KEEP_FRAMES) * sizeof(uint64_t));
	return 0;
}

/* Everything recorded so far, appended to GOT (the drain's own allocations
 * not recorded: the rings turned off while it runs, as if dwleak, another
 * process, drained them).  Returns the records read. */
static uint32_t drain(void)
{
	uint32_t request = __atomic_load_n(&ctl->rings_request, __ATOMIC_RELAXED), before = ngot, i;
	uint64_t addr, value;
	int err;

	__atomic_store_n(&ctl->rings_request, DWLEAK_PRELOAD_WALK_NONE, __ATOMIC_RELAXED);
	err = walk_ring_drain(check_self_read, check_self_write, NULL, ctl->rings_addr, on_record, NULL, &drain_buf);
	CHECK(!err, "drain: %s: %s", strerror(-err), drain_buf.why);
	for (i = 0; i < drain_buf.n; i++) {
		CHECK(!drain_buf.ring[i].err, "slot %u: %s", drain_buf.ring[i].slot, drain_buf.ring[i].why);
		EXPECT(!drain_buf.ring[i].dropped, "slot %u dropped %llu records", drain_buf.ring[i].slot,
		       (unsigned long long)drain_buf.ring[i].dropped);
		if (walk_ring_tail_write(&drain_buf.ring[i], &addr, &value))
			__atomic_store_n((uint64_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&ctl->rings_request, request, __ATOMIC_RELAXED);
	return ngot - before;
}

/* --- Allocations from known places ------------------------------------------- */

enum how { H_MALLOC, H_CALLOC, H_REALLOC, H_POSIX_MEMALIGN, H_ALIGNED_ALLOC };

/* One allocation the test made, and what it expects of its records. */
struct made {
	enum how how;
	void *p;
	size_t size;
	uint32_t kind;	 /* enum alloc_kind */
	uint64_t real;	 /* the allocator function it reaches */
	uint32_t tid;
	void *bt[BT_MAX]; /* backtrace() in the function that allocated */
	int nbt;
	void *old;	 /* H_REALLOC: the block it was given */
};

static void *libc_fn(const char *sym)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), *fn;

	CHECK(h, "libc.so.6: %s", dlerror());
	fn = dlsym(h, sym);
	CHECK(fn, "%s: %s", sym, dlerror());
	return fn;
}

/* The allocating function: backtrace() first, then the call, with the
 * return addresses above it the same for both. */
void alloc_here(struct made *m);

__attribute__((noinline)) void alloc_here(struct made *m)
{
	void *p = NULL;

	m->nbt = backtrace(m->bt, BT_MAX);
	m->tid = (uint32_t)syscall(SYS_gettid);
	switch (m->how) {
	case H_MALLOC:
		p = malloc(m->size);
		break;
	case H_CALLOC:
		p = calloc(1, m->size);
		break;
	case H_REALLOC:
		p = realloc(m->old, m->size);
		break;
	case H_POSIX_MEMALIGN:
		CHECK(posix_memalign(&p, 64, m->size) == 0);
		break;
	case H_ALIGNED_ALLOC:
		p = aligned_alloc(256, m->size);
		break;
	}
	m->p = p;
	asm volatile("" ::: "memory"); /* no tail call: the frame stays */
}

static __attribute__((noinline)) void chain_a2(struct made *m)
{
	alloc_here(m);
	asm volatile("" ::: "memory");
}

static __attribute__((noinline)) void chain_a1(struct made *m)
{
	chain_a2(m);
	asm volatile("" ::: "memory");
}

static __attribute__((noinline)) void chain_b(int depth, struct made *m)
{
	if (depth > 0)
		chain_b(depth - 1, m);
	else
		alloc_here(m);
	asm volatile("" ::: "memory");
}

static void made_set(struct made *m, enum how how, size_t size, void *old)
{
	static const struct {
		const char *sym;
		uint32_t kind;
	} fn[] = {
		[H_MALLOC] = { "malloc", ALLOC_MALLOC },
		[H_CALLOC] = { "calloc", ALLOC_CALLOC },
		[H_REALLOC] = { "realloc", ALLOC_REALLOC },
		[H_POSIX_MEMALIGN] = { "posix_memalign", ALLOC_POSIX_MEMALIGN },
		[H_ALIGNED_ALLOC] = { "aligned_alloc", ALLOC_ALIGNED_ALLOC },
	};

	*m = (struct made){ .how = how, .size = size, .kind = fn[how].kind, .old = old };
	m->real = (uint64_t)(uintptr_t)libc_fn(fn[how].sym);
}

/* The phase's allocations: the first four through chain_a, then chain_b
 * at two depths, then a realloc of the first one; their number. */
#define PHASE_MADE 7

static uint32_t drain(void);

/* CLAIM: the records drained before the realloc, so that the old block's
 * free is recorded (else its allocation is cancelled by it). */
static void phase_allocate(struct made m[PHASE_MADE], size_t salt, bool claim)
{
	made_set(&m[0], H_MALLOC, 100 + salt, NULL);
	chain_a1(&m[0]);
	made_set(&m[1], H_CALLOC, 200 + salt, NULL);
	chain_a1(&m[1]);
	made_set(&m[2], H_POSIX_MEMALIGN, 300 + salt, NULL);
	chain_b(3, &m[2]);
	made_set(&m[3], H_ALIGNED_ALLOC, 512, NULL);
	chain_b(7, &m[3]);
	made_set(&m[4], H_MALLOC, 40 + salt, NULL);
	chain_b(12, &m[4]);
	made_set(&m[5], H_MALLOC, 24, NULL);
	chain_a1(&m[5]);
	if (claim)
		drain();
	/* far larger than what it was given: moved, or grown in place */
	made_set(&m[6], H_REALLOC, 1 << 20, m[5].p);
	chain_b(2, &m[6]);
}

/* Frees every block left (the realloc'ed one's old block went with it). */
static void phase_free(struct made m[PHASE_MADE])
{
	for (int i = 0; i < PHASE_MADE; i++)
		if (i != 5)
			free(m[i].p);
}

/* The records of [FROM, ngot) of TYPE at ADDR, the first one after tsc
 * AFTER; NULL when none. */
static const struct got *got_find(uint32_t from, uint32_t type, uint64_t addr, uint64_t after)
{
	const struct got *best = NULL;

	for (uint32_t i = from; i < ngot; i++)
		if (got[i].type == type && got[i].addr == addr && got[i].tsc > after &&
		    (!best || got[i].tsc < best->tsc))
			best = &got[i];
	return best;
}

/* Whether PC lies in the function FN (a return address into it). */
static bool in_function(uint64_t pc, void *fn)
{
	Dl_info info;

	return dladdr((void *)(uintptr_t)(pc - 1), &info) && info.dli_saddr == fn;
}

/* Whether PC lies in the test's executable. */
static bool in_exe(uint64_t pc)
{
	Dl_info self, info;

	return dladdr((void *)main, &self) && dladdr((void *)(uintptr_t)(pc - 1), &info) &&
	       info.dli_fbase == self.dli_fbase;
}

/* The frames of allocation M's record G against backtrace(): pcs[0] the
 * real function, pcs[1] a return address into alloc_here, then
 * backtrace()'s frames from its frame 1 on: all of them (DWARF), or those
 * in the test's executable (FP: the frame-pointer chain ends in libc). */
static void frames_check(const char *what, const struct made *m, const struct got *g, bool fp)
{
	int upto = m->nbt, i, bad = 0;

	EXPECT(g->fp == fp, "%s: fp %u", what, g->fp);
	EXPECT(g->nframes >= 2 && g->pcs[0] == m->real, "%s: pcs[0] %#llx, the real function is %#llx", what,
	       (unsigned long long)g->pcs[0], (unsigned long long)m->real);
	EXPECT(g->nframes >= 2 && in_function(g->pcs[1], (void *)alloc_here),
	       "%s: pcs[1] %#llx is no return address into alloc_here", what, (unsigned long long)g->pcs[1]);
	EXPECT(in_function((uint64_t)(uintptr_t)m->bt[0], (void *)alloc_here), "%s: backtrace() frame 0 not here",
	       what);
	if (fp) {
		/* the chain of frame pointers: through the test's own frames
		 * (built with them), up to main or a thread's start */
		for (upto = 1; upto < m->nbt && in_exe((uint64_t)(uintptr_t)m->bt[upto]); upto++)
			;
		EXPECT(upto >= 3, "%s: backtrace() has %d frames in the test", what, upto);
		EXPECT(g->nframes >= (uint32_t)upto + 1, "%s: the FP walk has %u frames, the test's end at backtrace()'s #%d",
		       what, g->nframes, upto - 1);
	} else {
		EXPECT(g->end == WALK_END_OK, "%s: the walk ended %u", what, g->end);
		EXPECT(g->nframes == (uint32_t)m->nbt + 1, "%s: %u frames, backtrace() %d + 1", what, g->nframes, m->nbt);
	}
	for (i = 1; i < upto && (uint32_t)i + 1 < g->nframes && i + 1 < KEEP_FRAMES; i++)
		if (g->pcs[i + 1] != (uint64_t)(uintptr_t)m->bt[i]) {
			bad++;
			printf("  %s: #%d ours %#llx backtrace %#llx\n", what, i + 1, (unsigned long long)g->pcs[i + 1],
			       (unsigned long long)(uintptr_t)m->bt[i]);
		}
	EXPECT(!bad, "%s: %d frames differ from backtrace()", what, bad);
}

/* Every allocation of M (N of them) and its free in the records from
 * FROM on: the right address, size, kind, type and thread; frames as
 * backtrace() says.  FREE_TID: the thread that freed them (0: the one that
 * allocated).  CANCELLED: the blocks were freed before a drain claimed
 * their records, so each allocation's record must be there cancelled (its
 * frames whole) and no free of it recorded. */
static void made_check(const char *phase, const struct made *m, int n, uint32_t from, bool fp, uint32_t free_tid,
		       bool cancelled)
{
	uint32_t alloc_type = cancelled ? WALK_RING_REC_CANCELLED : WALK_RING_REC_ALLOC;

	char what[128];

	for (int i = 0; i < n; i++) {
		const struct got *a, *f, *moved;

		snprintf(what, sizeof(what), "%s: block %d (%s)", phase, i,
			 m[i].how == H_REALLOC ? "realloc" : m[i].kind == ALLOC_MALLOC ? "malloc" : "other");
		/* a realloc's block: after the old one's realloc-free (it may
		 * have grown in place: the same address) */
		moved = m[i].how == H_REALLOC ? got_find(from, WALK_RING_REC_REALLOC_FREE, (uintptr_t)m[i].old, 0) : NULL;
		if (cancelled) {
			EXPECT(m[i].how != H_REALLOC || (!moved && got_find(from, WALK_RING_REC_CANCELLED,
									    (uintptr_t)m[i].old, 0)),
			       "%s: the old block's allocation not cancelled by the realloc", what);
			moved = m[i].how == H_REALLOC ? got_find(from, WALK_RING_REC_CANCELLED, (uintptr_t)m[i].old, 0)
						      : NULL;
		} else {
			EXPECT(m[i].how != H_REALLOC || (moved && moved->kind == ALLOC_REALLOC && moved->nframes == 0 &&
							 moved->tid == m[i].tid),
			       "%s: the old block's realloc-free not recorded", what);
		}
		a = got_find(from, alloc_type, (uintptr_t)m[i].p, moved ? moved->tsc : 0);
		CHECK(m[i].p, "%s: the allocation failed", what);
		EXPECT(a, "%s: no allocation recorded at %p%s", what, m[i].p, cancelled ? " (cancelled)" : "");
		if (!a)
			continue;
		EXPECT(a->size == m[i].size && a->kind == m[i].kind && a->tid == m[i].tid,
		       "%s: size %llu kind %u tid %u, want %zu %u %u", what, (unsigned long long)a->size, a->kind, a->tid,
		       m[i].size, m[i].kind, m[i].tid);
		frames_check(what, &m[i], a, fp);
		if (i == 5)
			continue; /* given to realloc: freed there */
		f = got_find(from, WALK_RING_REC_FREE, (uintptr_t)m[i].p, a->tsc);
		if (cancelled) {
			EXPECT(!f, "%s: a free recorded for a cancelled allocation", what);
			continue;
		}
		EXPECT(f && f->kind == ALLOC_FREE && f->nframes == 0 && f->size == 0 &&
			       f->tid == (free_tid ? free_tid : m[i].tid),
		       "%s: its free not recorded (or wrong: kind %u, tid %u)", what, f ? f->kind : 0, f ? f->tid : 0);
	}
}

/* --- The phases ---------------------------------------------------------------- */

static void ctl_show(const char *when)
{
	printf("%s: rings_active %u image_installed %u image_error %d arena %#llx+%llu ring_records %llu "
	       "ring_failed %llu fired_alloc %llu\n",
	       when, ctl->rings_active, ctl->image_installed, ctl->image_error,
	       (unsigned long long)ctl->image_arena_addr, (unsigned long long)ctl->image_arena_len,
	       (unsigned long long)ctl->ring_records, (unsigned long long)ctl->ring_failed,
	       (unsigned long long)ctl->fired_alloc);
}

/* One allocator call that fires (and so honours the control block). */
static void poke(void)
{
	void *volatile p = malloc(8);

	free(p);
}

static struct made thread_made[PHASE_MADE];

static void *thread_main(void *arg)
{
	(void)arg;
	phase_allocate(thread_made, 5, false);
	return NULL;
}

/* Allocations on this thread and another, in MODE; the other thread's
 * blocks freed here. */
static void phase_run(const char *phase, uint32_t mode)
{
	struct made m[PHASE_MADE];
	uint32_t from;
	pthread_t t;

	drain();
	from = ngot;
	__atomic_store_n(&ctl->rings_request, mode, __ATOMIC_RELAXED);
	/* this thread's blocks read before they are freed (their frees
	 * recorded); the other thread's freed here before any drain (each
	 * allocation cancelled, by another thread than the one that made it) */
	phase_allocate(m, 0, true);
	drain();
	phase_free(m);
	CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0 && pthread_join(t, NULL) == 0);
	phase_free(thread_made);
	drain();
	printf("%s: %u records\n", phase, ngot - from);
	made_check(phase, m, PHASE_MADE, from, mode == DWLEAK_PRELOAD_WALK_FP, 0, false);
	made_check(phase, thread_made, PHASE_MADE, from, mode == DWLEAK_PRELOAD_WALK_FP, (uint32_t)getpid(), true);
	EXPECT(ctl->rings_active == mode, "%s: rings_active %u", phase, ctl->rings_active);
}

/* The image at OFF in the arena, published as generation GEN. */
static void image_publish(uint64_t off, const void *blob, size_t len, uint32_t gen)
{
	CHECK(off + len <= ctl->image_arena_len, "the arena is too small");
	memcpy((uint8_t *)(uintptr_t)ctl->image_arena_addr + off, blob, len);
	__atomic_store_n(&ctl->image_off, off, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl->image_len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl->image_gen, gen, __ATOMIC_RELEASE);
	poke();
}

/* A fork child records into rings of its own: its allocation is in a ring
 * with its own tid, and no ring of the parent is LIVE there. */
static void fork_check(void)
{
	pid_t child;
	int status;

	drain();
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		struct made m;
		const struct got *a;
		uint32_t i, from = ngot;

		check_failures = 0; /* the child's own */
		made_set(&m, H_MALLOC, 4321, NULL);
		chain_b(4, &m);
		drain();
		for (i = 0; i < drain_buf.n; i++)
			if (drain_buf.ring[i].tid != (uint32_t)getpid())
				_exit(10);
		a = got_find(from, WALK_RING_REC_ALLOC, (uintptr_t)m.p, 0);
		if (!a || a->tid != (uint32_t)getpid() || a->size != 4321)
			_exit(11);
		frames_check("fork child", &m, a, false);
		_exit(check_failures ? 12 : 0);
	}
	CHECK(waitpid(child, &status, 0) == child);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the fork child: status %#x", status);
	printf("fork child: its allocation in a ring of its own\n");
}

/* Sampled (sample_bytes set, a new generation): only sampled allocations
 * recorded, and the frees of exactly those. */
static void sampled_check(void)
{
	enum { N = 4000 };
	static void *blocks[N], *blocks_big;
	uint32_t from, allocs = 0, frees = 0, i, j;
	uintptr_t big;

	drain();
	from = ngot;
	__atomic_store_n(&ctl->sample_bytes, 16384, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl->generation, ctl->generation + 1, __ATOMIC_RELEASE);
	for (i = 0; i < N; i++)
		blocks[i] = malloc(64);
	blocks_big = malloc(1 << 22); /* 256 times the mean: sampled but for 1 in e^256 */
	big = (uintptr_t)blocks_big;
	for (i = 0; i < N; i++)
		free(blocks[i]);
	free(blocks_big);
	drain();
	__atomic_store_n(&ctl->sample_bytes, 0, __ATOMIC_RELAXED);
	/* freed before the drain: a sampled block's allocation is there
	 * cancelled (its free with it), or, read meanwhile, with its free */
	for (i = from; i < ngot; i++)
		for (j = 0; j < N; j++)
			if (got[i].addr == (uintptr_t)blocks[j]) {
				allocs += got[i].type == WALK_RING_REC_ALLOC || got[i].type == WALK_RING_REC_CANCELLED;
				frees += got[i].type == WALK_RING_REC_FREE || got[i].type == WALK_RING_REC_CANCELLED;
				break;
			}
	printf("sampled: %u of %u blocks of 64 bytes recorded (about %u expected), %u frees\n", allocs, N,
	       N * 64 / 16384, frees);
	EXPECT(allocs > 0 && allocs < N / 4, "sampled: %u of %u recorded", allocs, N);
	EXPECT(frees == allocs, "sampled: %u allocations and %u frees recorded", allocs, frees);
	EXPECT((got_find(from, WALK_RING_REC_ALLOC, big, 0) && got_find(from, WALK_RING_REC_FREE, big, 0)) ||
		       got_find(from, WALK_RING_REC_CANCELLED, big, 0),
	       "sampled: the 4 MiB block or its free not recorded");
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Signal handlers that allocate, on an alternate stack, interrupting the
 * thread's own recorded calls (a record in the middle of another, a stack
 * other than the one the thread's bounds remember): nothing fails, every
 * ring drains cleanly, and the handlers' allocations are recorded. */
static volatile uint32_t handler_calls;
static void *volatile handler_last;

static void on_prof(int sig)
{
	void *p = malloc(48);

	(void)sig;
	handler_last = p;
	free(p);
	handler_calls++;
}

static void signals_check(void)
{
	struct sigaction sa = { .sa_handler = on_prof, .sa_flags = SA_ONSTACK | SA_RESTART };
	struct itimerval tv = { { 0, 200 }, { 0, 200 } }, off = { { 0, 0 }, { 0, 0 } };
	size_t alt_len = 256 << 10;
	void *alt = mmap(NULL, alt_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	stack_t ss = { .ss_sp = alt, .ss_size = alt_len };
	uint64_t failed = ctl->ring_failed;
	uint32_t from, i, frees = 0, calls;
	double t0;
	struct made m;

	CHECK(alt != MAP_FAILED && sigaltstack(&ss, NULL) == 0 && sigaction(SIGPROF, &sa, NULL) == 0);
	drain();
	from = ngot;
	got_keep = false; /* only the last batch is kept: far more records than the test holds */
	CHECK(setitimer(ITIMER_PROF, &tv, NULL) == 0);
	t0 = now_ns();
	for (i = 0; now_ns() - t0 < 300e6; i++) {
		made_set(&m, H_MALLOC, 16 + i % 512, NULL);
		chain_b((int)(i % 9), &m);
		free(m.p);
		if (i % 2000 == 1999)
			drain();
	}
	CHECK(setitimer(ITIMER_PROF, &off, NULL) == 0);
	calls = handler_calls;
	got_keep = true;
	/* a last handler's call, kept */
	on_prof(0);
	drain();
	for (uint32_t j = from; j < ngot; j++)
		frees += (got[j].type == WALK_RING_REC_FREE || got[j].type == WALK_RING_REC_CANCELLED) &&
			 got[j].addr == (uintptr_t)handler_last;
	printf("signals: %u handler calls on an alternate stack during %u recorded calls\n", calls, i);
	EXPECT(calls > 10, "signals: only %u handler calls", calls);
	EXPECT(ctl->ring_failed == failed, "signals: %llu records failed", (unsigned long long)(ctl->ring_failed - failed));
	EXPECT(frees >= 1, "signals: the handler's free not recorded");
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	signal(SIGPROF, SIG_DFL);
}

/* --- The cost --------------------------------------------------------------- */

static __attribute__((noinline)) void bench_loop(long pairs)
{
	for (long i = 0; i < pairs; i++) {
		void *p = malloc(64);

		asm volatile("" : : "r"(p) : "memory");
		free(p);
	}
}

/* ns per pair in MODE: batches of pairs that fit the ring (1 MiB: 128
 * bytes a pair here), the rings drained between them, untimed; the fastest
 * of 5 runs. */
static double bench_mode(uint32_t mode, long pairs)
{
	const long batch = 5000;
	double best = 0;

	for (int rep = 0; rep < 5; rep++) {
		double t = 0;

		for (long done = 0; done < pairs; done += batch) {
			double t0;

			drain();
			__atomic_store_n(&ctl->rings_request, mode, __ATOMIC_RELAXED);
			t0 = now_ns();
			bench_loop(batch);
			t += now_ns() - t0;
		}
		if (!best || t < best)
			best = t;
	}
	return best / pairs;
}

static void bench(long pairs)
{
	double idle, sites, dwarf, fp;

	got_keep = false;
	__atomic_store_n(sem_alloc, 0, __ATOMIC_RELAXED);
	__atomic_store_n(sem_free, 0, __ATOMIC_RELAXED);
	idle = bench_mode(DWLEAK_PRELOAD_WALK_NONE, pairs);
	__atomic_store_n(sem_alloc, 1, __ATOMIC_RELAXED);
	__atomic_store_n(sem_free, 1, __ATOMIC_RELAXED);
	sites = bench_mode(DWLEAK_PRELOAD_WALK_NONE, pairs);
	dwarf = bench_mode(DWLEAK_PRELOAD_WALK_DWARF, pairs);
	fp = bench_mode(DWLEAK_PRELOAD_WALK_FP, pairs);
	printf("bench: malloc(64)+free, ns per pair: library idle %.1f, sites fired (NOPs: no uprobe) %.1f, "
	       "rings DWARF %.1f, rings FP %.1f; ring_failed %llu\n",
	       idle, sites, dwarf, fp, (unsigned long long)ctl->ring_failed);
}

int main(int argc, char **argv)
{
	uint64_t before;
	size_t third;
	uint8_t *bad;
	int saved;

	preload_self(argv);
	ctl = dlsym(RTLD_DEFAULT, DWLEAK_PRELOAD_CONTROL_SYM);
	CHECK(ctl && ctl->magic == DWLEAK_PRELOAD_MAGIC && ctl->version == DWLEAK_PRELOAD_VERSION,
	      "no control block of version %d", DWLEAK_PRELOAD_VERSION);
	CHECK(ctl->rings_addr, "the rings' directory is not published");
	{
		void *bt[4];

		backtrace(bt, 4); /* libgcc loaded now: in the image */
	}
	image_build();
	semaphores_raise();

	/* 1. the sites, as before: no rings asked for */
	before = ctl->fired_alloc;
	poke();
	EXPECT(ctl->fired_alloc > before && ctl->ring_records == 0, "no rings asked: the site fires");

	/* 2. the frame-pointer walk: no image needed (frees cancel the
	 * records not drained yet, as dwleak asks) */
	__atomic_store_n(&ctl->rings_cancel, DWLEAK_PRELOAD_CANCEL_STAMPED, __ATOMIC_RELAXED);
	phase_run("fp", DWLEAK_PRELOAD_WALK_FP);
	ctl_show("after fp");

	/* 3. DWARF asked for, no image yet: the sites still fire */
	__atomic_store_n(&ctl->rings_request, DWLEAK_PRELOAD_WALK_DWARF, __ATOMIC_RELAXED);
	before = ctl->fired_alloc;
	poke();
	EXPECT(ctl->fired_alloc > before, "DWARF without an image: the site did not fire");

	/* 4. the arena: three images' room, asked for and mapped in the next
	 * call (errno the program's, though the library mapped memory) */
	third = (self_len + 4095) & ~(size_t)4095;
	__atomic_store_n(&ctl->image_arena_request, 3 * third, __ATOMIC_RELAXED);
	errno = 4321;
	poke();
	saved = errno;
	EXPECT(saved == 4321, "errno %d after the handover", saved);
	CHECK(ctl->image_arena_addr && ctl->image_arena_len >= 3 * third && ctl->image_arena_len % 4096 == 0,
	      "no arena: addr %#llx len %llu error %d", (unsigned long long)ctl->image_arena_addr,
	      (unsigned long long)ctl->image_arena_len, ctl->image_error);

	/* 5. the image, installed: DWARF walks recorded */
	image_publish(0, self_blob, self_len, 1);
	EXPECT(ctl->image_installed == 1 && ctl->image_error == 0, "image 1: installed %u error %d",
	       ctl->image_installed, ctl->image_error);
	phase_run("dwarf", DWLEAK_PRELOAD_WALK_DWARF);
	ctl_show("after dwarf");

	/* 6. a corrupt image (its magic), then one out of the arena: refused,
	 * the first one still walked with */
	bad = malloc(self_len);
	CHECK(bad);
	memcpy(bad, self_blob, self_len);
	bad[0] ^= 0xff;
	image_publish(third, bad, self_len, 2);
	EXPECT(ctl->image_installed == 1 && ctl->image_error == -EPROTO, "image 2 (bad magic): installed %u error %d",
	       ctl->image_installed, ctl->image_error);
	free(bad);
	__atomic_store_n(&ctl->image_off, ctl->image_arena_len - 64, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl->image_gen, 3, __ATOMIC_RELEASE);
	poke();
	EXPECT(ctl->image_installed == 1 && ctl->image_error == -EINVAL, "image 3 (out of the arena): installed %u "
	       "error %d", ctl->image_installed, ctl->image_error);
	phase_run("dwarf, after two bad images", DWLEAK_PRELOAD_WALK_DWARF);

	/* 7. a good one again, at a new offset */
	image_publish(2 * third, self_blob, self_len, 4);
	EXPECT(ctl->image_installed == 4 && ctl->image_error == 0, "image 4: installed %u error %d",
	       ctl->image_installed, ctl->image_error);
	phase_run("dwarf, image 4", DWLEAK_PRELOAD_WALK_DWARF);

	/* 8. a fork child; sampling */
	fork_check();
	sampled_check();
	signals_check();
	ctl_show("end");
	EXPECT(ctl->ring_failed == 0, "%llu records failed", (unsigned long long)ctl->ring_failed);

	if (argc == 3 && !strcmp(argv[1], "--bench"))
		bench(atol(argv[2]));
	if (check_failures)
		return 1;
	printf("ok\n");
	return 0;
}
