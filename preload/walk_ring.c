/* The per-thread rings of walked records (see walk_ring.h and the contract
 * in bpf/abi/walk_ring_abi.h): a record reserved with a compare-exchange on
 * the ring's head, written, and published by the thread's outermost
 * record; a slot claimed with a compare-exchange on its tid. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dwleak.h" /* DWLEAK_MAX_FRAMES */
#include "walk_ring.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define BARRIER() __asm__ volatile("" ::: "memory")
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

struct walk_ring_dir walk_ring_directory __attribute__((aligned(64))) = {
	.magic = WALK_RING_DIR_MAGIC,
	.version = WALK_RING_VERSION,
	.nslots = WALK_RING_SLOTS,
	.slot_size = sizeof(struct walk_ring_slot),
	.header_size = sizeof(struct walk_ring_header),
	.record_size = sizeof(struct walk_ring_record),
	.data_bits = WALK_RING_BITS_DEFAULT,
};

/* Each slot's mapping's data bits, the library's own (not in the ABI):
 * a ring wiped by a fork reads 0 there, and its mapping is reused. */
static uint8_t slot_bits[WALK_RING_SLOTS];

/* The calling thread's ring.  32 bytes of the static TLS surplus
 * (initial-exec: an access is an offset from the thread pointer, never
 * __tls_get_addr). */
struct ring_tls {
	struct walk_ring_header *ring;
	uint32_t nest;	      /* records in progress: 2 in a handler that interrupted one */
	uint16_t slot;	      /* RING's slot */
	uint8_t claiming;     /* a claim is under way (a handler drops its record) */
	uint8_t pad;
	uint64_t gave_up;     /* 1 + dir.reclaimed when no ring could be had; 0: never */
	uint64_t stalled;     /* 1 + the ring's tail when a wait for room timed out; 0: none */
};

uint32_t walk_ring_wait_ms;

static __thread struct ring_tls ring_tls __attribute__((tls_model("initial-exec")));

#if defined(__x86_64__)
/*
 * Compare-exchange without the lock prefix: one instruction, so atomic
 * against a signal handler of this thread (a handler runs between two
 * instructions), which is all a word only this thread writes needs; a
 * fraction of a locked one's cost.  Readers in other processes see either
 * value whole (an aligned 8-byte store), and x86's stores become visible
 * in order: a record's before the PUBLISHED that covers it.
 */
static inline bool cas_local(__u64 *p, __u64 *expected, __u64 desired)
{
	__u64 prev = *expected;
	bool ok;

	__asm__ volatile("cmpxchgq %3, %1" : "=@ccz"(ok), "+m"(*p), "+a"(prev) : "r"(desired) : "memory");
	*expected = prev;
	return ok;
}

/* One instruction too: a handler's increment is not lost. */
static inline void inc_local(__u64 *p)
{
	__asm__ volatile("addq $1, %0" : "+m"(*p) : : "memory");
}

/* rdtscp waits for the instructions before it (the allocator's return,
 * the loads that found the block), not for the ones after, whose stores
 * (the free that follows a free's record) become visible after it
 * retired: walk_ring_abi.h's ordering rule. */
static inline uint64_t tsc_now(void)
{
	uint32_t lo, hi, aux;

	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	return (uint64_t)hi << 32 | lo;
}

/* A cancel's stamp: rdtsc, which may be read before the instructions
 * ahead of it are done, never after the free's stores (they become
 * visible after it retires): early is safe there (nothing happens to
 * the block between its allocation and its free), and it costs a free
 * a fraction of rdtscp's wait. */
static inline uint64_t tsc_early(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}
#elif defined(__aarch64__)
/*
 * aarch64: a compare-exchange is LSE's `cas` or an exclusive pair
 * (ldxr/stxr, which an exception between the two makes fail and retry):
 * atomic against a signal handler either way.  Release: the weak memory
 * model makes no store visible in order by itself, and a reader in
 * another process that sees PUBLISHED (or HEAD) moved must see the
 * records below it whole.
 */
static inline bool cas_local(__u64 *p, __u64 *expected, __u64 desired)
{
	return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static inline void inc_local(__u64 *p)
{
	__atomic_fetch_add(p, 1, __ATOMIC_RELAXED);
}

/* The virtual counter (CNTVCT_EL0), one clock for every CPU, after an isb
 * so that it is read after the instructions before it (as rdtscp): the
 * clock session/proc_rings.c reads for the same rule. */
static inline uint64_t tsc_now(void)
{
	uint64_t v;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}

/* A cancel's stamp (see x86_64's): the counter without the isb. */
static inline uint64_t tsc_early(void)
{
	uint64_t v;

	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}
#else
#error "the library's rings are written for x86_64 and aarch64"
#endif

/* Raises PUBLISHED to HEAD, never lowering it: a handler that published
 * more between the load and the exchange makes the exchange fail and the
 * loop look again.  Called at nest 0 only, when every reservation below
 * HEAD is whole (a handler's runs to its end before this thread goes on). */
static inline void publish(struct walk_ring_header *r)
{
	__u64 h, p;

	for (;;) {
		h = LOAD(r->head);
		p = LOAD(r->published);
		if (p >= h)
			return;
		cas_local(&r->published, &p, h);
	}
}

static inline uint32_t bits_wanted(void)
{
	uint32_t b = LOAD(walk_ring_directory.data_bits);

	return b < WALK_RING_BITS_MIN ? WALK_RING_BITS_MIN : b > WALK_RING_BITS_MAX ? WALK_RING_BITS_MAX : b;
}

/* Sets up slot I's ring R (BITS) for thread TID and makes the slot LIVE.
 * Positions go on from PUBLISHED (0 in a fresh or wiped mapping). */
static void ring_setup(uint32_t i, struct walk_ring_header *r, uint32_t bits, uint32_t tid)
{
	uint64_t pos = r->magic == WALK_RING_MAGIC ? r->published : 0;

	r->version = WALK_RING_VERSION;
	r->data_bits = bits;
	r->tid = tid;
	r->life++;
	r->mask = (1ull << bits) - 1;
	r->records = 0;
	r->dropped = 0;
	r->retracted = 0;
	r->remembered = 0;
	r->head = pos;
	r->published = pos;
	r->tail = pos; /* the slot is not LIVE: no reader writes it now */
	r->claimed = pos;
	__atomic_store_n(&r->magic, WALK_RING_MAGIC, __ATOMIC_RELEASE);
	__atomic_store_n(&walk_ring_directory.slot[i].state, WALK_RING_SLOT_LIVE, __ATOMIC_RELEASE);
}

/* No ring for this thread: counted in *COUNTER; looked for again when
 * dwleak hands a slot back. */
static struct walk_ring_header *give_up(struct ring_tls *t, uint64_t reclaimed, __u64 *counter)
{
	t->gave_up = reclaimed + 1;
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * The calling thread's ring, claimed (a FREE slot whose tid it swaps from
 * 0 to its own; the slot's ring reused, or one mapped) or set up again in
 * place (its mapping wiped by a fork made without the atfork handler: a
 * raw clone).  NULL when it has none, counted.  mmap and madvise are bare
 * system calls (no lock, no allocation): safe inside an allocation, in a
 * signal handler, in a fork's child.  errno kept.
 */
static __attribute__((noinline, cold)) struct walk_ring_header *ring_claim(struct ring_tls *t)
{
	struct walk_ring_dir *d = &walk_ring_directory;
	uint64_t reclaimed = LOAD(d->reclaimed), ring;
	struct walk_ring_header *r = t->ring;
	int saved = errno;
	uint32_t tid, i, bits;
	void *m;

	if (t->claiming) {
		__atomic_fetch_add(&d->no_claim, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	if (!r && t->gave_up == reclaimed + 1) {
		__atomic_fetch_add(&d->no_slot, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	t->claiming = 1;
	BARRIER();
	/* syscall(), not gettid(): an import the library already has (and
	 * tests/preload_no_hang.sh audits every one) */
	tid = (uint32_t)syscall(SYS_gettid);
	if (r) {
		/* wiped: this thread's slot still names it (a copy of the
		 * directory came with the clone), under the parent's tid */
		i = t->slot;
		__atomic_store_n(&d->slot[i].tid, tid, __ATOMIC_RELAXED);
		ring_setup(i, r, slot_bits[i], tid);
		goto done;
	}
	for (i = 0; i < WALK_RING_SLOTS; i++) {
		uint32_t zero = 0;

		if (!LOAD(d->slot[i].tid) &&
		    __atomic_compare_exchange_n(&d->slot[i].tid, &zero, tid, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			break;
	}
	if (i == WALK_RING_SLOTS) {
		r = give_up(t, reclaimed, &d->no_slot);
		goto done;
	}
	ring = LOAD(d->slot[i].ring);
	bits = slot_bits[i];
	if (!ring) {
		bits = bits_wanted();
		m = mmap(NULL, WALK_RING_MAP_BYTES(bits), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 0);
		if (m == MAP_FAILED) {
			__atomic_store_n(&d->slot[i].tid, 0, __ATOMIC_RELEASE);
			r = give_up(t, reclaimed, &d->no_map);
			goto done;
		}
		/* a kernel before 4.14 refuses: the atfork handler still gives
		 * a child rings of its own (only a raw clone's would be copies) */
		(void)madvise(m, WALK_RING_MAP_BYTES(bits), MADV_WIPEONFORK);
		ring = (uint64_t)(uintptr_t)m;
		slot_bits[i] = (uint8_t)bits;
		__atomic_store_n(&d->slot[i].ring, ring, __ATOMIC_RELEASE);
	}
	r = (struct walk_ring_header *)(uintptr_t)ring;
	ring_setup(i, r, bits, tid);
	t->slot = (uint16_t)i;
	t->ring = r;
done:
	BARRIER();
	t->claiming = 0;
	errno = saved;
	return r;
}

/*
 * The ring is full: waits, up to walk_ring_wait_ms, for dwleak to read
 * (TAIL to reach WANT), as a pipe's writer would, so that an exact trace
 * loses nothing to a burst.  Yields first, then sleeps 100 us at a time,
 * with bare system calls (not cancellation points, no errno kept by
 * them: restored).  After a wait that timed out (dwleak stopped, or far
 * behind), no record of this thread waits again until dwleak has read
 * something: one stall, then drops, counted.  Returns true when there is
 * room.
 */
static bool ring_wait(struct ring_tls *t, struct walk_ring_header *r, __u64 want)
{
	__u64 tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE), start = tail;
	uint32_t ms = LOAD(walk_ring_wait_ms), i;
	struct timespec nap = { 0, 100000 };
	int saved = errno;

	/* the traced paths record only while a tracer listens (the sites
	 * usable), so a full ring has a reader: waited for */
	if (!ms || t->stalled == start + 1)
		return false;
	for (i = 0; tail < want && i < 64 + 10 * ms; i++) {
		if (i < 64)
			syscall(SYS_sched_yield);
		else
			syscall(SYS_nanosleep, &nap, NULL);
		tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	}
	errno = saved;
	t->stalled = tail < want ? tail + 1 : 0;
	return tail >= want;
}

/* --- Cancelling (walk_ring_abi.h): where recent allocations' records are --- */

/* 2^RECENT_BITS words, process-wide, indexed by a hash of the block's
 * address: RECENT_REF(slot, position) of the last allocation recorded
 * there, 0 when none.  A collision forgets the older allocation, whose
 * free is then recorded as usual.  Mapped at the first allocation
 * recorded, MADV_WIPEONFORK (a fork's child finds it empty: its rings are
 * new). 512 KiB of address space, touched where blocks hash. */
#define RECENT_BITS 16
#define RECENT_REF(slot, pos) ((uint64_t)(slot) << 56 | (pos) | 1) /* positions are 8-byte aligned */
#define RECENT_SLOT(ref) ((uint32_t)((ref) >> 56))
#define RECENT_POS(ref) ((ref) & WALK_RING_POS_MASK & ~7ull)

static uint64_t *recent;
static bool recent_kept_at_fork; /* the madvise failed: the child forgets it */

static inline uint64_t *recent_word(uint64_t *tab, uint64_t addr)
{
	return &tab[((addr >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - RECENT_BITS)];
}

/* The table, mapped on first use (a bare mmap, as a ring's: safe inside
 * an allocator call); NULL when it cannot be (nothing is cancelled). */
static __attribute__((noinline, cold)) uint64_t *recent_map(void)
{
	size_t len = sizeof(uint64_t) << RECENT_BITS;
	uint64_t *none = NULL;
	int saved = errno;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED) {
		errno = saved;
		return NULL;
	}
	if (madvise(m, len, MADV_WIPEONFORK))
		recent_kept_at_fork = true;
	if (!__atomic_compare_exchange_n(&recent, &none, (uint64_t *)m, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		munmap(m, len); /* another thread mapped it first */
	errno = saved;
	return __atomic_load_n(&recent, __ATOMIC_ACQUIRE);
}

void walk_ring_prefetch(uint64_t addr)
{
	uint64_t *tab = __atomic_load_n(&recent, __ATOMIC_ACQUIRE);

	if (tab)
		__builtin_prefetch(recent_word(tab, addr), 1, 3);
}

/* The allocation of ADDR just recorded at POS of slot SLOT's ring. */
static inline void recent_note(uint64_t addr, uint32_t slot, uint64_t pos)
{
	uint64_t *tab = __atomic_load_n(&recent, __ATOMIC_ACQUIRE);

	if (unlikely(!tab) && !(tab = recent_map()))
		return;
	__atomic_store_n(recent_word(tab, addr), RECENT_REF(slot, pos), __ATOMIC_RELAXED);
}

/*
 * Takes back record REC at POS, this thread's last (walk_ring_abi.h's
 * Taking back), when dwleak has not claimed it: true, and the ring's head
 * is POS again.  False: the record stays (claimed, not the last one, a
 * record of this thread in progress), to be cancelled.  PUBLISHED, lowered
 * meanwhile, is raised to HEAD again before this returns.
 */
static bool take_back(struct ring_tls *t, struct walk_ring_header *r, uint64_t pos,
		      const struct walk_ring_record *rec)
{
	__u64 end = pos + WALK_RING_RECORD_BYTES(LOAD(rec->nframes));
	bool taken = false;

	/* a record that defines a stack name stays: later ones may name it */
	if (t->nest || t->claiming || LOAD(r->head) != end || LOAD(r->published) != end ||
	    (LOAD(rec->flags) & WALK_RING_FLAG_STACK_DEF))
		return false;
	/* a signal handler's record meanwhile goes after END (the head's
	 * compare-exchange below then fails) and is published below */
	t->nest++;
	BARRIER();
	/* PUBLISHED first, then CLAIMED read (both sequentially consistent:
	 * x86's xchg orders them): dwleak, which writes CLAIMED and then
	 * reads the header again, either made CLAIMED cover the record (it
	 * stays) or reads PUBLISHED at or below POS */
	__atomic_store_n(&r->published, pos, __ATOMIC_SEQ_CST);
	if (pos >= __atomic_load_n(&r->claimed, __ATOMIC_SEQ_CST) && cas_local(&r->head, &end, pos)) {
		inc_local(&r->retracted);
		taken = true;
	}
	BARRIER();
	if (--t->nest == 0)
		publish(r); /* nothing when taken: HEAD == PUBLISHED == POS */
	return taken;
}

bool walk_ring_cancel(uint64_t addr, bool may_take_back)
{
	uint64_t *tab = __atomic_load_n(&recent, __ATOMIC_ACQUIRE), *w, ref, ring, pos, want;
	struct walk_ring_header *r;
	struct walk_ring_record *rec;
	bool cancelled = false;

	if (!tab)
		return false;
	w = recent_word(tab, addr);
	ref = LOAD(*w);
	if (!ref)
		return false;
	pos = RECENT_POS(ref);
	ring = __atomic_load_n(&walk_ring_directory.slot[RECENT_SLOT(ref)].ring, __ATOMIC_ACQUIRE);
	r = (struct walk_ring_header *)(uintptr_t)ring;
	/* a ring stays mapped once made; its header is this library's (a
	 * wiped one reads magic 0), its CLAIMED dwleak's */
	if (!r || LOAD(r->magic) != WALK_RING_MAGIC || pos < __atomic_load_n(&r->claimed, __ATOMIC_ACQUIRE))
		goto out;
	rec = (struct walk_ring_record *)((uint8_t *)r + WALK_RING_DATA_OFFSET + (pos & LOAD(r->mask)));
	want = WALK_RING_CHECK(pos, WALK_RING_REC_ALLOC);
	/* the record is this block's allocation, still there: its check word
	 * names the position (a later lap's would not), its address the
	 * block (the word may name an allocation a collision replaced) */
	if (LOAD(rec->check) != want || LOAD(rec->addr) != addr)
		goto out;
	/* this thread's own last record: taken back, no trace left */
	if (may_take_back && r == ring_tls.ring && take_back(&ring_tls, r, pos, rec)) {
		cancelled = true;
		goto out;
	}
	if (!__atomic_compare_exchange_n(&rec->check, &want, WALK_RING_CHECK(pos, WALK_RING_REC_CANCELLING), false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		goto out;
	/* the record is this free's now: its time (taken before the block is
	 * released, as a free record's) after the allocation's, saturated
	 * (earlier is safe: nothing happens to the block in between), 0 when
	 * this CPU's clock lags the allocating one's; then CANCELLED
	 * (release: a reader that sees CANCELLED sees the time) */
	{
		uint64_t now = tsc_early(), then = LOAD(rec->tsc);

		__atomic_store_n(&rec->pad, now <= then ? 0 : now - then > UINT32_MAX ? UINT32_MAX : (uint32_t)(now - then),
				 __ATOMIC_RELAXED);
	}
	__atomic_store_n(&rec->check, WALK_RING_CHECK(pos, WALK_RING_REC_CANCELLED), __ATOMIC_SEQ_CST);
	/* the store before the load (dwleak fences its CLAIMED write before
	 * its reads the same way): claimed still at or below POS, dwleak
	 * reads the record cancelled; above it, it may have read it whole.
	 * Both sequentially consistent: the load cannot pass the exchange
	 * (x86's locked cmpxchg is a full barrier, arm64's ldar follows
	 * casal), and no separate fence is paid for */
	cancelled = pos >= __atomic_load_n(&r->claimed, __ATOMIC_SEQ_CST);
out:
	/* the block is freed either way: its word forgets it (unless another
	 * allocation took the word meanwhile) */
	if (LOAD(*w) == ref)
		__atomic_store_n(w, 0, __ATOMIC_RELAXED);
	return cancelled;
}

int walk_ring_put(uint32_t type, uint32_t kind, uint32_t end, uint32_t fp, uint64_t addr, uint64_t size,
		  const uint64_t *pcs, uint32_t n, struct walk_stack_name *name, uint32_t generation)
{
	struct ring_tls *t = &ring_tls;
	struct walk_ring_header *r = t->ring;
	struct walk_ring_record *rec;
	__u64 len, h, off, room, need, mask, epoch = 0;
	uint32_t flags = fp ? WALK_RING_FLAG_FP : 0;
	uint8_t *data;

	if (unlikely(n > DWLEAK_MAX_FRAMES || !addr || type == WALK_RING_REC_NONE || type >= WALK_RING_REC_PAD))
		return -EINVAL;
	/* a wiped magic: a fork's child (see ring_claim) */
	if (unlikely(!r || LOAD(r->magic) != WALK_RING_MAGIC)) {
		r = ring_claim(t);
		if (!r)
			return -ENOSPC;
	}
	/* the name, in this ring's stream: its frames once per owner and
	 * tracer (walk_ring_abi.h's Stacks named once) */
	if (name && type == WALK_RING_REC_ALLOC && n && name->slot < WALK_RING_STACK_SLOTS) {
		epoch = (uint64_t)generation << 32 | LOAD(r->life);
		flags |= name->slot << WALK_RING_STACK_SLOT_SHIFT;
		if (name->epoch == epoch && name->kind == kind) {
			flags |= WALK_RING_FLAG_STACK_REF;
			n = 0;
		} else {
			flags |= WALK_RING_FLAG_STACK_DEF;
		}
	}
	len = WALK_RING_RECORD_BYTES(n);
	t->nest++;
	BARRIER();
	mask = r->mask;
	h = LOAD(r->head);
	for (;;) {
		off = h & mask;
		room = mask + 1 - off;
		need = len <= room ? len : room + len;
		/* TAIL is dwleak's, written from outside */
		if (unlikely(h + need - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) > mask + 1)) {
			/* the outermost record may wait; a handler's, inside a
			 * record not yet published, never would get room */
			if (t->nest == 1 && ring_wait(t, r, h + need - (mask + 1))) {
				h = LOAD(r->head);
				continue;
			}
			inc_local(&r->dropped);
			BARRIER();
			if (--t->nest == 0)
				publish(r); /* a handler's record made meanwhile */
			return -ENOBUFS;
		}
		if (cas_local(&r->head, &h, h + need))
			break;
	}
	data = (uint8_t *)r + WALK_RING_DATA_OFFSET;
	if (need != len) {
		((struct walk_ring_record *)(data + off))->check = WALK_RING_CHECK(h & WALK_RING_POS_MASK, WALK_RING_REC_PAD);
		h += room;
		off = 0;
	}
	rec = (struct walk_ring_record *)(data + off);
	rec->nframes = (uint8_t)n;
	rec->kind = (uint8_t)kind;
	rec->end = (uint8_t)end;
	rec->flags = (uint8_t)flags;
	rec->pad = 0;
	rec->tsc = tsc_now();
	rec->addr = addr;
	rec->size = size;
	if (n) /* a free's PCS may be NULL, which memcpy must not be given */
		memcpy(rec->pcs, pcs, n * sizeof(*pcs));
	BARRIER();
	rec->check = WALK_RING_CHECK(h & WALK_RING_POS_MASK, type);
	inc_local(&r->records);
	/* the line after the next record's: written a lap ago and read by
	 * dwleak since, it is not this CPU's; fetched for writing now, the
	 * store that reaches it does not wait for it (a locked instruction
	 * the program makes next would wait for the store) */
	__builtin_prefetch(data + ((off + len + 64) & mask), 1, 3);
	if (type == WALK_RING_REC_ALLOC)
		recent_note(addr, t->slot, h & WALK_RING_POS_MASK);
	BARRIER();
	if (--t->nest == 0)
		publish(r);
	if (flags & WALK_RING_FLAG_STACK_DEF) {
		name->epoch = epoch;
		name->kind = kind;
	}
	return 0;
}

void *walk_ring_scratch(void)
{
	struct ring_tls *t = &ring_tls;
	struct walk_ring_header *r = t->ring;

	/* slot_bits is the library's own record of the mapping's size (the
	 * header is not trusted for it); a wiped ring is set up again by its
	 * next record, and its zeroed scratch is an empty memo meanwhile */
	if (!r || LOAD(r->magic) != WALK_RING_MAGIC)
		return NULL;
	return (uint8_t *)r + WALK_RING_DATA_OFFSET + (1ul << slot_bits[t->slot]);
}

void walk_ring_count_remembered(void)
{
	struct walk_ring_header *r = ring_tls.ring;

	if (r && LOAD(r->magic) == WALK_RING_MAGIC)
		inc_local(&r->remembered);
}

void walk_ring_fork_child(void)
{
	struct walk_ring_dir *d = &walk_ring_directory;
	uint32_t i;

	for (i = 0; i < WALK_RING_SLOTS; i++) {
		d->slot[i].state = WALK_RING_SLOT_FREE;
		d->slot[i].tid = 0;
	}
	d->no_slot = d->no_map = d->no_claim = d->reclaimed = 0;
	ring_tls = (struct ring_tls){ 0 };
	if (recent_kept_at_fork)
		recent = NULL; /* the parent's records: a new table when needed */
}
