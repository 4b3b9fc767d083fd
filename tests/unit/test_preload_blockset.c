/* Unit test for the preload library's index of live blocks
 * (preload/blockset.c) and dwleak's decoder of it (target/blockset_read.c,
 * included here: the preload tests' rule links the library's parts only,
 * and the round trip needs both sides).  A million random inserts and
 * removes against an oracle on small levels (long chains, tombstones
 * reused, growth); growth from 16 slots to thousands; inserts no level
 * can take are counted and nothing else is lost; four threads inserting
 * and removing their own blocks at once leave exactly what they hold;
 * signal handlers that use the set in the middle of an insert or remove;
 * forks while threads are inside it leave the child an index that
 * decodes; the decoder returns exactly the oracle's blocks and the
 * index's memory, and refuses each kind of corrupt index with its errno. */
#define _GNU_SOURCE /* process_vm_readv */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "blockset.h"
#include "check.h"

#include "../../target/blockset_read.c"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_rand(void)
{
	return check_xorshift64(&rng);
}

static int block_by_addr(const void *a, const void *b)
{
	uint64_t x = ((const struct blockset_block *)a)->addr, y = ((const struct blockset_block *)b)->addr;

	return x < y ? -1 : x > y;
}

/* Decodes S and checks that it holds exactly WANT's N blocks (any order;
 * sorted here), its ranges are its header and mapped levels, and no slot
 * is left mid-insert.  Returns the decoded index (the caller frees it). */
static struct blockset_index decode_equals(const struct blockset *s, struct blockset_block *want, size_t n,
					   const char *what)
{
	struct blockset_index ix;
	size_t i;
	int err = blockset_read(check_self_read, NULL, (uint64_t)(uintptr_t)s, &ix);

	CHECK(!err, "%s: blockset_read: %s: %s", what, strerror(-err), ix.why);
	if (n)
		qsort(want, n, sizeof(*want), block_by_addr);
	EXPECT(ix.n_blocks == n, "%s: %zu blocks decoded, %zu held", what, ix.n_blocks, n);
	for (i = 0; i < n && i < ix.n_blocks; i++)
		if (ix.blocks[i].addr != want[i].addr || ix.blocks[i].size != want[i].size) {
			EXPECT(0, "%s: block %zu: %#lx (%lu bytes) decoded, %#lx (%lu) held", what, i,
			       ix.blocks[i].addr, ix.blocks[i].size, want[i].addr, want[i].size);
			break;
		}
	EXPECT(ix.n_ranges == 1 + ix.levels, "%s: %zu ranges for %u levels", what, ix.n_ranges, ix.levels);
	EXPECT(ix.ranges[0].start == (uint64_t)(uintptr_t)s && ix.ranges[0].end - ix.ranges[0].start == 512);
	for (i = 0; i < ix.levels; i++) {
		EXPECT(ix.ranges[1 + i].start == s->abi.level[i].slots, "%s: level %zu's range", what, i);
		EXPECT(ix.ranges[1 + i].end - ix.ranges[1 + i].start == 16ull << s->abi.level[i].bits);
		EXPECT(ix.level[i].busy == 0, "%s: level %zu: %lu slots mid-insert", what, i, ix.level[i].busy);
	}
	return ix;
}

/* --- One thread against an oracle --- */

#define ADDRS 3000

/* The K-th of the test's blocks: a page each, so blocks of up to a page
 * do not overlap. */
static uint64_t page_addr(unsigned k)
{
	return 0x7f0000000000ull + (uint64_t)k * 4096;
}

static void test_oracle(void)
{
	static struct blockset s;
	static uint64_t size_of[ADDRS]; /* size + 1; 0: not in the set */
	struct blockset_block want[ADDRS];
	struct blockset_index ix;
	uint64_t absent = 0, size, got;
	unsigned step, k, live = 0, peak = 0;
	size_t n = 0;

	CHECK(!blockset_init(&s, 6, 10));
	for (step = 0; step < 1000000; step++) {
		k = (unsigned)(next_rand() % ADDRS);
		if (size_of[k]) {
			got = blockset_remove(&s, page_addr(k));
			CHECK(got == size_of[k] - 1, "step %u: %u removed with %lu bytes, inserted with %lu", step, k,
			      got, size_of[k] - 1);
			size_of[k] = 0;
			live--;
		} else if (next_rand() % 8 == 0) {
			CHECK(blockset_remove(&s, page_addr(k)) == 0, "step %u: %u found, not in", step, k);
			absent++;
		} else {
			/* malloc(0) too: its block holds an address */
			size = next_rand() % 5 == 0 ? 0 : next_rand() % 4096 + 1;
			CHECK(!blockset_insert(&s, page_addr(k), size), "step %u: %u refused", step, k);
			size_of[k] = size + 1;
			live++;
			peak = live > peak ? live : peak;
		}
	}
	EXPECT(s.abi.absent == absent, "%lu absent removes counted, %lu made", (unsigned long)s.abi.absent,
	       (unsigned long)absent);
	EXPECT(s.abi.lost == 0);
	for (k = 0; k < ADDRS; k++)
		if (size_of[k])
			want[n++] = (struct blockset_block){ page_addr(k), size_of[k] - 1 };
	ix = decode_equals(&s, want, n, "oracle");
	printf("oracle: %u live at the end (peak %u), %u levels from 64 slots, top %u, max probes:", live, peak,
	       ix.levels, s.abi.top);
	for (k = 0; k < ix.levels; k++) {
		printf(" %u", ix.level[k].max_probe);
		EXPECT(ix.level[k].max_probe < BLOCKSET_MAX_PROBE);
	}
	printf("; tombstones:");
	for (k = 0; k < ix.levels; k++)
		printf(" %lu/%lu", ix.level[k].tombs, ix.level[k].slots);
	printf("\n");
	EXPECT(ix.levels > 1, "%u live blocks at the peak fit in 64 slots", peak);
	blockset_index_free(&ix);
	blockset_reset(&s);
}

/* --- Growth across levels, and what no level can take --- */

static void test_growth(void)
{
	static struct blockset s;
	static struct blockset_block want[20000];
	struct blockset_index ix;
	unsigned i, lvl;

	CHECK(!blockset_init(&s, 4, 14));
	for (i = 0; i < N(want); i++) {
		/* half next to each other, half a page apart (+16: large blocks) */
		want[i].addr = i % 2 ? 0x7f1000000000ull + i * 32ull : 0x7f2000000010ull + i * 4096ull;
		want[i].size = i % 2 ? i % 33 : i % 4081;
		CHECK(!blockset_insert(&s, want[i].addr, want[i].size), "block %u refused", i);
	}
	EXPECT(s.abi.lost == 0);
	ix = decode_equals(&s, want, N(want), "growth");
	printf("growth: %zu blocks from 16 slots: %u levels, top %u\n", N(want), ix.levels, s.abi.top);
	EXPECT(ix.levels >= 11, "%zu blocks in %u levels from 16 slots", N(want), ix.levels);
	for (lvl = 0; lvl < ix.levels; lvl++)
		EXPECT(s.abi.level[lvl].bits == 4 + lvl && s.abi.level[lvl].slots % 4096 == 0);
	blockset_index_free(&ix);
	for (i = 0; i < N(want); i++)
		CHECK(blockset_remove(&s, want[i].addr) == want[i].size, "block %u", i);
	EXPECT(s.abi.absent == 0);
	ix = decode_equals(&s, want, 0, "growth, emptied");
	blockset_index_free(&ix);
	blockset_reset(&s);
	EXPECT(s.abi.level[0].slots == 0 && s.abi.top == 0 && s.abi.magic == BLOCKSET_ABI_MAGIC);
}

static void test_lost(void)
{
	static struct blockset s;
	struct blockset_block want[200];
	unsigned i, refused = 0;
	size_t n = 0;
	int r;

	/* two levels, 16 + 32 slots */
	CHECK(!blockset_init(&s, 4, 2));
	for (i = 0; i < 200; i++) {
		r = blockset_insert(&s, page_addr(i), i + 1);
		if (r) {
			refused++;
			continue;
		}
		want[n++] = (struct blockset_block){ page_addr(i), i + 1 };
	}
	EXPECT(n == 48, "two levels of 16 and 32 slots took %zu blocks", n);
	EXPECT(s.abi.lost == refused, "%u refused, %lu counted", refused, (unsigned long)s.abi.lost);
	{
		struct blockset_index ix = decode_equals(&s, want, n, "lost");

		EXPECT(ix.lost == refused);
		blockset_index_free(&ix);
	}
	/* the first blocks went to level 0, before level 1 was mapped: their
	 * slots, freed, take new blocks when the newest level is full */
	for (i = 0; i < 8; i++)
		EXPECT(blockset_remove(&s, want[i].addr) == want[i].size);
	for (i = 0; i < 8; i++)
		EXPECT(!blockset_insert(&s, page_addr(1000 + i), 1), "%u: level 0's free slots not used", i);
	EXPECT(s.abi.lost == refused && s.abi.top == 1);
	for (i = 0; i < 8; i++)
		EXPECT(blockset_remove(&s, page_addr(1000 + i)) == 1);
	for (i = 8; i < 200; i++)
		blockset_remove(&s, page_addr(i));
	EXPECT(s.abi.absent == refused, "%u refused, %lu removes found nothing", refused,
	       (unsigned long)s.abi.absent);
	EXPECT(blockset_init(&s, 3, 1) == -EINVAL && blockset_init(&s, 4, 0) == -EINVAL &&
	       blockset_init(&s, 4, BLOCKSET_ABI_LEVELS + 1) == -EINVAL && blockset_init(&s, 30, 12) == -EINVAL &&
	       blockset_init(&s, 41, 1) == -EINVAL);
	blockset_reset(&s);
}

/* --- Four threads at once --- */

#define THREADS 4
#define PER_THREAD 300000
#define HELD 512

static struct blockset shared;

struct worker {
	unsigned id;
	struct blockset_block held[HELD]; /* what it leaves in the set */
	unsigned n;
	unsigned bad;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	uint64_t r = 0x9e3779b97f4a7c15ull * (w->id + 1), base = 0x7e0000000000ull + (uint64_t)w->id * 0x10000000;
	unsigned i, k;

	for (i = 0; i < PER_THREAD; i++) {
		if (w->n < HELD && (check_xorshift64(&r) % 3 || !w->n)) {
			w->held[w->n].addr = base + (uint64_t)i * 16 * 7;
			w->held[w->n].size = check_xorshift64(&r) % 113;
			if (blockset_insert(&shared, w->held[w->n].addr, w->held[w->n].size))
				w->bad++;
			else
				w->n++;
		} else {
			/* any of those held, not the last: tombstones all over */
			k = (unsigned)(check_xorshift64(&r) % w->n);
			w->bad += blockset_remove(&shared, w->held[k].addr) != w->held[k].size;
			w->held[k] = w->held[--w->n];
		}
	}
	return NULL;
}

static void test_threads(void)
{
	static struct worker w[THREADS];
	static struct blockset_block want[THREADS * HELD];
	pthread_t t[THREADS];
	struct blockset_index ix;
	unsigned i, k;
	size_t n = 0;

	CHECK(!blockset_init(&shared, 6, 16));
	for (i = 0; i < THREADS; i++) {
		w[i].id = i;
		CHECK(!pthread_create(&t[i], NULL, worker_run, &w[i]));
	}
	for (i = 0; i < THREADS; i++) {
		CHECK(!pthread_join(t[i], NULL));
		EXPECT(!w[i].bad, "thread %u: %u blocks refused or removed with the wrong size", i, w[i].bad);
		for (k = 0; k < w[i].n; k++)
			want[n++] = w[i].held[k];
	}
	EXPECT(shared.abi.lost == 0 && shared.abi.absent == 0);
	ix = decode_equals(&shared, want, n, "threads");
	printf("threads: %zu blocks left by %u threads, %u levels from 64 slots\n", n, THREADS, ix.levels);
	blockset_index_free(&ix);
	for (i = 0; i < n; i++)
		EXPECT(blockset_remove(&shared, want[i].addr) == want[i].size, "block %#lx", want[i].addr);
	ix = decode_equals(&shared, want, 0, "threads, emptied");
	blockset_index_free(&ix);
	blockset_reset(&shared);
}

/* --- Signal handlers in the middle of an insert or a remove --- */

static struct blockset sig_set;
static volatile sig_atomic_t sig_bad, sig_runs;

/* Inserts and removes blocks of its own: the interrupted thread may be
 * between claiming a slot and writing it, or inside a removal. */
static void on_signal(int sig)
{
	uint64_t base = 0x7d0000000000ull + (uint64_t)sig_runs * 64;
	int saved = errno;
	unsigned i;

	(void)sig;
	for (i = 0; i < 4; i++)
		sig_bad += blockset_insert(&sig_set, base + i * 16, i + 7) != 0;
	for (i = 0; i < 4; i++)
		sig_bad += blockset_remove(&sig_set, base + i * 16) != i + 7;
	sig_runs++;
	errno = saved;
}

static volatile int signaller_stop;

static void *signaller(void *arg)
{
	pthread_t main_thread = *(pthread_t *)arg;

	while (!signaller_stop)
		pthread_kill(main_thread, SIGUSR1);
	return NULL;
}

static void test_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	pthread_t self = pthread_self(), t;
	uint64_t held[64];
	unsigned i, n = 0, bad = 0;

	CHECK(!blockset_init(&sig_set, 4, 16));
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	CHECK(!sigaction(SIGUSR1, &sa, NULL));
	CHECK(!pthread_create(&t, NULL, signaller, &self));
	for (i = 0; i < 400000 || sig_runs < 1000; i++) {
		if (n < 64 && (i % 3 || !n)) {
			held[n] = 0x7c0000000000ull + (uint64_t)(i % 100000) * 48;
			bad += blockset_insert(&sig_set, held[n], held[n] >> 4) != 0;
			n++;
		} else {
			n--;
			bad += blockset_remove(&sig_set, held[n]) != held[n] >> 4;
		}
	}
	signaller_stop = 1;
	CHECK(!pthread_join(t, NULL));
	signal(SIGUSR1, SIG_IGN);
	while (n--)
		bad += blockset_remove(&sig_set, held[n]) != held[n] >> 4;
	printf("signals: %d handlers ran inside the loop\n", (int)sig_runs);
	EXPECT(!bad && !sig_bad, "%u wrong in the loop, %d in handlers", bad, (int)sig_bad);
	EXPECT(sig_set.abi.lost == 0 && sig_set.abi.absent == 0);
	{
		struct blockset_index ix = decode_equals(&sig_set, NULL, 0, "signals");

		blockset_index_free(&ix);
	}
	blockset_reset(&sig_set);
}

/* --- Forks while other threads are inside the set --- */

static volatile int forkers_stop;

static void *churn(void *arg)
{
	uint64_t base = 0x7b0000000000ull + (uint64_t)(uintptr_t)arg * 0x10000000, held[256], r = base;
	unsigned i, n = 0, k;

	for (i = 0; !forkers_stop; i++) {
		if (n < 256 && (i % 3 || !n)) {
			/* addresses come round again after 2^24 blocks: long after
			 * the last one was removed, as removes pick at random */
			held[n] = base + (uint64_t)(i % (1u << 24)) * 16;
			if (!blockset_insert(&shared, held[n], i % 17))
				n++;
		} else {
			k = (unsigned)(check_xorshift64(&r) % n);
			blockset_remove(&shared, held[k]);
			held[k] = held[--n];
		}
	}
	return NULL;
}

/* In a child: its copy of the set decodes, with at most one slot mid-insert
 * per thread that was inside it, and every block decoded is removed with
 * the size decoded. */
static int child_check(void)
{
	struct blockset_index ix;
	uint64_t busy = 0;
	size_t i;
	int err = blockset_read(check_self_read, NULL, (uint64_t)(uintptr_t)&shared, &ix);

	if (err) {
		fprintf(stderr, "child: blockset_read: %s: %s\n", strerror(-err), ix.why);
		return 1;
	}
	for (i = 0; i < ix.levels; i++)
		busy += ix.level[i].busy;
	if (busy > 3) {
		fprintf(stderr, "child: %lu slots mid-insert, 3 threads\n", (unsigned long)busy);
		return 1;
	}
	for (i = 0; i < ix.n_blocks; i++)
		if (blockset_remove(&shared, ix.blocks[i].addr) != ix.blocks[i].size) {
			fprintf(stderr, "child: block %#lx not removed with its size\n", ix.blocks[i].addr);
			return 1;
		}
	blockset_index_free(&ix);
	return 0;
}

static void test_fork(void)
{
	pthread_t t[3];
	unsigned i, failed = 0;
	int status;
	pid_t pid;

	CHECK(!blockset_init(&shared, 6, 16));
	for (i = 0; i < 3; i++)
		CHECK(!pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)i));
	for (i = 0; i < 40; i++) {
		usleep(2000);
		pid = fork();
		CHECK(pid >= 0);
		if (!pid)
			_exit(child_check());
		CHECK(waitpid(pid, &status, 0) == pid);
		failed += !WIFEXITED(status) || WEXITSTATUS(status);
	}
	forkers_stop = 1;
	for (i = 0; i < 3; i++)
		CHECK(!pthread_join(t[i], NULL));
	EXPECT(!failed, "%u of 40 children found their copy of the set corrupt", failed);
	blockset_reset(&shared);
}

/* --- The decoder against corrupt indexes --- */

/* Decodes the header at H and expects error ERR, for the reason WHY
 * gives the start of (NULL: any). */
static void expect_refused(const void *h, int err, const char *why, const char *what)
{
	struct blockset_index ix;
	int r = blockset_read(check_self_read, NULL, (uint64_t)(uintptr_t)h, &ix);

	EXPECT(r == err, "%s: %d (%s) where %d was expected", what, r, ix.why, err);
	EXPECT(r == 0 || ix.why[0], "%s: no reason given", what);
	EXPECT(!why || !strncmp(ix.why, why, strlen(why)), "%s: refused for \"%s\"", what, ix.why);
	blockset_index_free(&ix);
}

/* H with level 0 only, as top. */
static void only_level0(struct blockset_abi_header *h)
{
	unsigned i;

	for (i = 1; i < BLOCKSET_ABI_LEVELS; i++)
		h->level[i].slots = 0;
	h->top = 0;
}

static void test_corrupt(void)
{
	static struct blockset s;
	struct blockset_abi_header h;
	struct blockset_abi_slot *slots;
	unsigned i;

	CHECK(!blockset_init(&s, 4, 4));
	for (i = 0; i < 40; i++)
		CHECK(!blockset_insert(&s, check_alloc_addr(i), 100));
	CHECK(s.abi.level[1].slots, "40 blocks in 16 slots and no second level");

#define VARIANT(err, why, what, change)                                                                 \
	do {                                                                                            \
		h = s.abi;                                                                              \
		change;                                                                                 \
		expect_refused(&h, err, why, what);                                                     \
	} while (0)
	VARIANT(-EPROTO, "no index", "magic", h.magic ^= 1);
	VARIANT(-EPROTO, "index version", "version", h.version++);
	VARIANT(-EPROTO, "index version", "slot size", h.slot_size = 24);
	VARIANT(-EBADMSG, NULL, "no levels", h.levels = 0);
	VARIANT(-EBADMSG, NULL, "too many levels", h.levels = BLOCKSET_ABI_LEVELS + 1);
	VARIANT(-EBADMSG, NULL, "first bits too few", h.first_bits = BLOCKSET_ABI_BITS_MIN - 1);
	VARIANT(-EBADMSG, NULL, "last level too large", (h.levels = 24, h.first_bits = 20));
	VARIANT(-EBADMSG, "level 1: 2^", "a level's bits", h.level[1].bits++);
	VARIANT(-EBADMSG, "level 1: slots", "a level misaligned", h.level[1].slots += 8);
	VARIANT(-EBADMSG, "level 1: slots", "a level in the first page", h.level[1].slots = 16);
	VARIANT(-EBADMSG, "level 1: slots", "a level past the address space",
		h.level[1].slots = BLOCKSET_ABI_ADDR_END - 256);
	VARIANT(-EBADMSG, "level 1 mapped after", "a gap in the levels", h.level[0].slots = 0);
	VARIANT(-EBADMSG, "level 23 mapped after", "a level past LEVELS",
		h.level[BLOCKSET_ABI_LEVELS - 1].slots = h.level[0].slots);
	VARIANT(-EBADMSG, "the index's memory overlaps", "levels overlap",
		h.level[1].slots = h.level[0].slots + 128);
	VARIANT(-EBADMSG, "the index's memory overlaps", "a level over the header",
		(h.level[1].slots = (uint64_t)(uintptr_t)&h & ~15ull, h.level[1].bits = 5));
	VARIANT(-EBADMSG, "top level", "top past the levels", h.top = 2 + (h.level[2].slots != 0));
	VARIANT(-EFBIG, "more than", "too many slots",
		(only_level0(&h), h.first_bits = 33, h.levels = 1, h.level[0].bits = 33, h.level[0].slots = 1ull << 40));
	VARIANT(-EFAULT, "reading level 0", "an unreadable level", (only_level0(&h), h.level[0].slots = 0x10000));
#undef VARIANT
	expect_refused((const void *)0x10000, -EFAULT, "reading the index's header", "an unreadable header");
	{
		/* a whole header, at an address no header of the library's has */
		uint64_t copy[65];

		memcpy((char *)copy + 4, &s.abi, sizeof(s.abi));
		expect_refused((char *)copy + 4, -EBADMSG, "header at", "a misaligned header");
	}

	/* slots the process wrote over: each refused, then put back */
	slots = (struct blockset_abi_slot *)(uintptr_t)s.abi.level[0].slots;
	for (i = 0; slots[i].addr < BLOCKSET_ABI_ADDR_MIN; i++)
		;
	{
		struct blockset_abi_slot keep = slots[i];
		uint64_t other = 0;
		unsigned j;

		for (j = 0; j < 16; j++)
			if (j != i && slots[j].addr >= BLOCKSET_ABI_ADDR_MIN)
				other = slots[j].addr;
		CHECK(other);
#define SLOT(err, what, a, sz)                                                                          \
	do {                                                                                            \
		slots[i].addr = (a);                                                                    \
		slots[i].size = (sz);                                                                   \
		expect_refused(&s, err, NULL, what);                                                    \
		slots[i] = keep;                                                                        \
	} while (0)
		SLOT(-EBADMSG, "a marker that is none", 3, 0);
		SLOT(-EBADMSG, "a block in the first page", 4088, 8);
		SLOT(-EBADMSG, "a block past the address space", BLOCKSET_ABI_ADDR_END, 0);
		SLOT(-EBADMSG, "a block that ends past it", BLOCKSET_ABI_ADDR_END - 16, 17);
		SLOT(-EBADMSG, "a size that wraps", keep.addr, ~0ull);
		SLOT(-EBADMSG, "one block twice", other, 100);
		SLOT(-EBADMSG, "blocks that overlap", other - 50, 100);
		SLOT(-EBADMSG, "a block inside the index", s.abi.level[1].slots + 64, 16);
		SLOT(-EBADMSG, "a block over the header", (uint64_t)(uintptr_t)&s - 16, 32);
		SLOT(0, "a block of size 0", keep.addr, 0);
#undef SLOT
	}
	{
		struct blockset_index ix;

		CHECK(!blockset_read(check_self_read, NULL, (uint64_t)(uintptr_t)&s, &ix));
		EXPECT(ix.n_blocks == 40 && !ix.why[0]);
		blockset_index_free(&ix);
	}
	blockset_reset(&s);
}

int main(void)
{
	test_oracle();
	test_growth();
	test_lost();
	test_threads();
	test_signals();
	test_fork();
	test_corrupt();
	return check_status();
}
