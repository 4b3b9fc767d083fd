/* Unit test for leakcheck/: memcheck's classification on synthetic memory
 * (no root, no process).  Hand-made cases for each rule (chains, cycles,
 * interior pointers, self pointers, lost trees, one-past-the-end, zero-size
 * blocks, unaligned pointers and chunk ends, large blocks, overlaps), then
 * random heaps checked against a naive oracle written straight from
 * memcheck's description, scanned whole and in shuffled chunks, and a
 * million-block sanity run that prints its rate (timed for real by
 * `make bench`). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "leakcheck.h"

#define BASE 0x7f1200000000ull /* where the synthetic memory "is" */

/* The synthetic memory: WORDS words at BASE. */
struct arena {
	uint64_t *w;
	size_t words;
};

static void arena_init(struct arena *a, size_t bytes)
{
	a->words = bytes / 8;
	a->w = calloc(a->words, 8);
	CHECK(a->w, "out of memory");
}

/* Stores VALUE at address AT (any alignment). */
static void poke(struct arena *a, uint64_t at, uint64_t value)
{
	CHECK(at >= BASE && at + 8 <= BASE + a->words * 8, "poke %#llx outside", (unsigned long long)at);
	memcpy((char *)a->w + (at - BASE), &value, 8);
}

static int scan_all(struct leakcheck *lc, const struct arena *a)
{
	return leakcheck_scan(lc, BASE, a->w, a->words * 8);
}

/* Builds, scans A whole, classifies; returns the check (caller frees). */
static struct leakcheck *check_of(const struct leak_block *b, size_t n, const struct arena *a,
				  struct leakcheck_totals *t)
{
	struct leakcheck *lc;

	CHECK(leakcheck_new(b, n, &lc) == 0);
	CHECK(scan_all(lc, a) == 0);
	CHECK(leakcheck_classify(lc, t) == 0);
	return lc;
}

static enum leak_kind kind(const struct leakcheck *lc, size_t i)
{
	struct leak_verdict v;

	CHECK(leakcheck_verdict(lc, i, &v) == 0, "verdict %zu", i);
	return v.kind;
}

#define EXPECT_KIND(lc, i, k)                                                                        \
	EXPECT(kind(lc, i) == (k), "block %d is %s, want %s", (int)(i), leak_kind_name(kind(lc, i)), \
	       leak_kind_name(k))

/* Blocks at BASE + 0x1000 * (i + 1), SIZE bytes each. */
static uint64_t at(int i)
{
	return BASE + 0x1000ull * (uint64_t)(i + 1);
}

static void blocks_spaced(struct leak_block *b, int n, uint64_t size)
{
	int i;

	for (i = 0; i < n; i++)
		b[i] = (struct leak_block){ .addr = at(i), .size = size };
}

/* Root words live at BASE..BASE+0x1000, outside every block. */
#define ROOT(k) (BASE + 8ull * (k))

static void test_chains(void)
{
	struct leak_block b[4];
	struct leakcheck_totals t;
	struct leakcheck *lc;
	struct leak_verdict v;
	struct arena a;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 4, 64);
	/* root -> 0 -> 1 -> 2; 3 unreferenced */
	poke(&a, ROOT(0), at(0));
	poke(&a, at(0) + 8, at(1));
	poke(&a, at(1) + 56, at(2));
	lc = check_of(b, 4, &a, &t);
	EXPECT_KIND(lc, 0, LEAK_REACHABLE);
	EXPECT_KIND(lc, 1, LEAK_REACHABLE);
	EXPECT_KIND(lc, 2, LEAK_REACHABLE);
	EXPECT_KIND(lc, 3, LEAK_DEFINITELY_LOST);
	EXPECT(t.blocks[LEAK_REACHABLE] == 3 && t.bytes[LEAK_REACHABLE] == 192);
	EXPECT(t.blocks[LEAK_DEFINITELY_LOST] == 1 && t.bytes[LEAK_DEFINITELY_LOST] == 64);
	leakcheck_free(lc);

	/* the same chain without its root: a lost chain, its head definitely
	 * lost carrying the rest as indirect bytes */
	poke(&a, ROOT(0), 0);
	lc = check_of(b, 4, &a, &t);
	EXPECT_KIND(lc, 0, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 1, LEAK_INDIRECTLY_LOST);
	EXPECT_KIND(lc, 2, LEAK_INDIRECTLY_LOST);
	CHECK(leakcheck_verdict(lc, 0, &v) == 0);
	EXPECT(v.indirect_bytes == 128 && v.via == SIZE_MAX, "indirect %llu", (unsigned long long)v.indirect_bytes);
	CHECK(leakcheck_verdict(lc, 2, &v) == 0);
	EXPECT(v.via == 1 && v.indirect_bytes == 0, "block 2 reached via %zu", v.via);
	EXPECT(t.blocks[LEAK_INDIRECTLY_LOST] == 2 && t.blocks[LEAK_DEFINITELY_LOST] == 2);
	leakcheck_free(lc);
	free(a.w);
}

static void test_cycles(void)
{
	struct leak_block b[5];
	struct leak_verdict v;
	struct leakcheck *lc;
	struct arena a;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 5, 32);
	/* 0 <-> 1, and 2 -> 3 -> 4 -> 2: no pointer from outside either */
	poke(&a, at(0), at(1));
	poke(&a, at(1), at(0));
	poke(&a, at(2) + 16, at(3));
	poke(&a, at(3) + 16, at(4));
	poke(&a, at(4) + 16, at(2));
	lc = check_of(b, 5, &a, NULL);
	/* memcheck: one block of a lost cycle leads its clique (the lowest:
	 * leaders are tried in address order), the rest are indirect */
	EXPECT_KIND(lc, 0, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 1, LEAK_INDIRECTLY_LOST);
	EXPECT_KIND(lc, 2, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 3, LEAK_INDIRECTLY_LOST);
	EXPECT_KIND(lc, 4, LEAK_INDIRECTLY_LOST);
	CHECK(leakcheck_verdict(lc, 2, &v) == 0);
	EXPECT(v.indirect_bytes == 64);
	leakcheck_free(lc);

	/* a cycle with a root pointer into it is reachable all round */
	poke(&a, ROOT(3), at(3));
	lc = check_of(b, 5, &a, NULL);
	EXPECT_KIND(lc, 2, LEAK_REACHABLE);
	EXPECT_KIND(lc, 3, LEAK_REACHABLE);
	EXPECT_KIND(lc, 4, LEAK_REACHABLE);
	leakcheck_free(lc);
	free(a.w);
}

/* Cliques never overlap (mc_leakcheck.c): a block that led a clique and
 * is reached from a later leader joins it; one reached only through
 * another clique's member stays a leader. */
static void test_clique_merging(void)
{
	struct leak_block b[3];
	struct leak_verdict v;
	struct leakcheck *lc;
	struct arena a;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 3, 32);
	/* 0 <-> 1 and 2 -> 1: leader 0 takes 1; 2 finds 1 taken */
	poke(&a, at(0), at(1));
	poke(&a, at(1), at(0));
	poke(&a, at(2), at(1));
	lc = check_of(b, 3, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 1, LEAK_INDIRECTLY_LOST);
	EXPECT_KIND(lc, 2, LEAK_DEFINITELY_LOST);
	leakcheck_free(lc);

	/* 0 -> 1 and 2 -> 0: leader 0 takes 1, then leader 2 takes 0 and its
	 * clique's bytes */
	memset(a.w, 0, a.words * 8);
	poke(&a, at(0), at(1));
	poke(&a, at(2), at(0));
	lc = check_of(b, 3, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_INDIRECTLY_LOST);
	EXPECT_KIND(lc, 1, LEAK_INDIRECTLY_LOST);
	EXPECT_KIND(lc, 2, LEAK_DEFINITELY_LOST);
	CHECK(leakcheck_verdict(lc, 2, &v) == 0);
	EXPECT(v.indirect_bytes == 64, "indirect %llu", (unsigned long long)v.indirect_bytes);
	CHECK(leakcheck_verdict(lc, 0, &v) == 0);
	EXPECT(v.indirect_bytes == 0 && v.via == 2);
	leakcheck_free(lc);
	free(a.w);
}

static void test_interior(void)
{
	struct leak_block b[6];
	struct leakcheck *lc;
	struct arena a;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 6, 64);
	/* root -?-> 0 ---> 1 -?-> 2 (memcheck's cases 5 and 7) */
	poke(&a, ROOT(0), at(0) + 8);
	poke(&a, at(0), at(1));
	poke(&a, at(1), at(2) + 63);
	/* root ---> 3 -?-> 4 ---> 5, and a later root start pointer to 1
	 * upgrades it and what it points to by start pointers only */
	poke(&a, ROOT(1), at(3));
	poke(&a, at(3) + 8, at(4) + 32);
	poke(&a, at(4) + 8, at(5));
	lc = check_of(b, 6, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_POSSIBLY_LOST);
	EXPECT_KIND(lc, 1, LEAK_POSSIBLY_LOST);
	EXPECT_KIND(lc, 2, LEAK_POSSIBLY_LOST);
	EXPECT_KIND(lc, 3, LEAK_REACHABLE);
	EXPECT_KIND(lc, 4, LEAK_POSSIBLY_LOST);
	EXPECT_KIND(lc, 5, LEAK_POSSIBLY_LOST);
	leakcheck_free(lc);

	poke(&a, ROOT(2), at(1));
	lc = check_of(b, 6, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_POSSIBLY_LOST);
	EXPECT_KIND(lc, 1, LEAK_REACHABLE);
	EXPECT_KIND(lc, 2, LEAK_POSSIBLY_LOST); /* reached by an interior pointer only */
	leakcheck_free(lc);

	/* the same upgrade with the block pointing on to a start pointer:
	 * 4 -> 5 becomes reachable once 4 is (scan order must not matter) */
	poke(&a, ROOT(4), at(4));
	lc = check_of(b, 6, &a, NULL);
	EXPECT_KIND(lc, 4, LEAK_REACHABLE);
	EXPECT_KIND(lc, 5, LEAK_REACHABLE);
	leakcheck_free(lc);
	free(a.w);
}

static void test_self_pointer(void)
{
	struct leak_block b[2];
	struct leakcheck_scan_stats st;
	struct leakcheck *lc;
	struct arena a;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 2, 48);
	poke(&a, at(0), at(0));	     /* a list head pointing at itself */
	poke(&a, at(1) + 8, at(1) + 8); /* and an interior self pointer */
	lc = check_of(b, 2, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 1, LEAK_DEFINITELY_LOST);
	leakcheck_stats(lc, &st);
	EXPECT(st.edges == 0, "self pointers kept as %llu edges", (unsigned long long)st.edges);
	leakcheck_free(lc);

	poke(&a, ROOT(0), at(0));
	lc = check_of(b, 2, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_REACHABLE);
	leakcheck_free(lc);
	free(a.w);
}

static void test_lost_tree(void)
{
	struct leak_block b[6];
	struct leakcheck_totals t;
	struct leak_verdict v;
	struct leakcheck *lc;
	struct arena a;
	int i;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 6, 64);
	/* 2 is the root of a lost tree: 2 -> 0, 2 -> 4, 0 -> 1, 0 -> 3 (interior),
	 * 4 -> 5; the children lie on both sides of it */
	poke(&a, at(2), at(0));
	poke(&a, at(2) + 8, at(4));
	poke(&a, at(0), at(1));
	poke(&a, at(0) + 8, at(3) + 24);
	poke(&a, at(4), at(5));
	lc = check_of(b, 6, &a, &t);
	for (i = 0; i < 6; i++)
		EXPECT_KIND(lc, i, i == 2 ? LEAK_DEFINITELY_LOST : LEAK_INDIRECTLY_LOST);
	CHECK(leakcheck_verdict(lc, 2, &v) == 0);
	EXPECT(v.indirect_bytes == 5 * 64);
	CHECK(leakcheck_verdict(lc, 3, &v) == 0);
	EXPECT(v.via == 0, "3 via %zu", v.via);
	EXPECT(t.bytes[LEAK_INDIRECTLY_LOST] == 5 * 64 && t.bytes[LEAK_DEFINITELY_LOST] == 64);
	leakcheck_free(lc);
	free(a.w);
}

static void test_block_end(void)
{
	struct leak_block b[4];
	struct leakcheck *lc;
	struct arena a;
	int start;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 3, 40);
	/* one past the end of 0 is not a pointer into it; the last byte is */
	poke(&a, ROOT(0), at(0) + 40);
	poke(&a, ROOT(1), at(1) + 39);
	/* a block right after another: one past 2's end is 3's start */
	b[3] = (struct leak_block){ .addr = at(2) + 40, .size = 8 };
	poke(&a, ROOT(2), at(2) + 40);
	lc = check_of(b, 4, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 1, LEAK_POSSIBLY_LOST);
	EXPECT_KIND(lc, 2, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 3, LEAK_REACHABLE);
	EXPECT(leakcheck_find(lc, at(0) + 40, NULL) == -1);
	EXPECT(leakcheck_find(lc, at(0), &start) == 0 && start);
	EXPECT(leakcheck_find(lc, at(2) + 40, &start) == 3 && start);
	EXPECT(leakcheck_find(lc, at(2) + 39, &start) == 2 && !start);
	leakcheck_free(lc);
	free(a.w);
}

static void test_zero_size(void)
{
	struct leak_block b[4];
	struct leakcheck *lc;
	struct arena a;
	int start;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 4, 0);
	/* malloc(0): a start pointer reaches it (memcheck counts it as one
	 * byte), one past its address does not */
	poke(&a, ROOT(0), at(0));
	poke(&a, ROOT(1), at(1) + 1);
	poke(&a, at(0), at(2)); /* holds no words: this is root memory */
	lc = check_of(b, 4, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_REACHABLE);
	EXPECT_KIND(lc, 1, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 2, LEAK_REACHABLE);
	EXPECT_KIND(lc, 3, LEAK_DEFINITELY_LOST);
	EXPECT(leakcheck_find(lc, at(3), &start) == 3 && start);
	EXPECT(leakcheck_find(lc, at(3) + 1, NULL) == -1);
	leakcheck_free(lc);
	free(a.w);
}

/* The documented choice: aligned words only, like memcheck and LSan. */
static void test_unaligned(void)
{
	struct leak_block b[4];
	struct leakcheck_scan_stats st;
	struct leakcheck *lc;
	struct arena a;
	int i;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 4, 64);
	poke(&a, ROOT(0) + 4, at(0));	   /* root pointer at an unaligned offset */
	poke(&a, at(1) + 3, at(2));	   /* and inside a reachable block */
	poke(&a, ROOT(8), at(1));
	poke(&a, at(3) + 16, at(3) + 1);   /* an unaligned value is fine: interior */
	poke(&a, ROOT(9), at(3) + 1);
	lc = check_of(b, 4, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 1, LEAK_REACHABLE);
	EXPECT_KIND(lc, 2, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 3, LEAK_POSSIBLY_LOST);
	leakcheck_free(lc);

	/* chunks that start and end off word bounds: only whole aligned
	 * words inside a chunk are read, the rest is counted */
	memset(a.w, 0, a.words * 8);
	poke(&a, ROOT(1), at(0));
	poke(&a, ROOT(3), at(1));
	CHECK(leakcheck_new(b, 4, &lc) == 0);
	CHECK(leakcheck_scan(lc, ROOT(1) + 3, (char *)a.w + 8 + 3, 8) == 0); /* no whole word */
	CHECK(leakcheck_scan(lc, ROOT(2) + 5, (char *)a.w + 16 + 5, 16) == 0); /* ROOT(3) whole */
	leakcheck_stats(lc, &st);
	EXPECT(st.scanned_bytes == 8 && st.edge_bytes == 16, "scanned %llu, edges %llu",
	       (unsigned long long)st.scanned_bytes, (unsigned long long)st.edge_bytes);
	CHECK(leakcheck_classify(lc, NULL) == 0);
	EXPECT_KIND(lc, 0, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 1, LEAK_REACHABLE);
	EXPECT(leakcheck_scan(lc, BASE, a.w, 64) == -EINVAL);
	EXPECT(leakcheck_classify(lc, NULL) == -EINVAL);
	leakcheck_free(lc);

	/* a block at an odd address: it holds the whole words inside it; the
	 * word across its end is nobody's (its last bytes are the allocator's
	 * slack, as memcheck's scan rounds a block's end down), neither its
	 * pointer nor a root */
	b[0] = (struct leak_block){ .addr = at(0) + 3, .size = 10 }; /* [3, 13): no whole word */
	memset(a.w, 0, a.words * 8);
	poke(&a, at(0) + 8, at(1));
	poke(&a, ROOT(0), at(0) + 3);
	lc = check_of(b, 4, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_REACHABLE);
	EXPECT_KIND(lc, 1, LEAK_DEFINITELY_LOST);
	leakcheck_stats(lc, &st);
	EXPECT(st.tail_bytes == 8 && st.root_hits == 1, "tail %llu, root hits %llu",
	       (unsigned long long)st.tail_bytes, (unsigned long long)st.root_hits);
	leakcheck_free(lc);
	b[0].size = 13; /* [3, 16): the word at +8 is whole inside */
	lc = check_of(b, 4, &a, NULL);
	EXPECT_KIND(lc, 0, LEAK_REACHABLE);
	EXPECT_KIND(lc, 1, LEAK_REACHABLE);
	for (i = 2; i < 4; i++)
		EXPECT_KIND(lc, i, LEAK_DEFINITELY_LOST);
	leakcheck_free(lc);
	free(a.w);
}

static void test_registers_and_overlap(void)
{
	struct leak_block b[3] = {
		{ .addr = at(0), .size = 64 },
		{ .addr = at(0) + 32, .size = 64 }, /* overlaps 0: a free the tracer missed */
		{ .addr = at(2), .size = 64 },
	};
	struct leakcheck_scan_stats st;
	struct leakcheck *lc;

	CHECK(leakcheck_new(b, 3, &lc) == 0);
	leakcheck_scan_value(lc, at(2) + 8);
	leakcheck_scan_value(lc, at(0));
	leakcheck_scan_value(lc, 42);
	leakcheck_stats(lc, &st);
	EXPECT(st.overlapping == 1 && st.values == 3 && st.root_hits == 2);
	EXPECT(leakcheck_find(lc, at(0) + 40, NULL) == 1, "the overlap belongs to the upper block");
	CHECK(leakcheck_classify(lc, NULL) == 0);
	EXPECT_KIND(lc, 0, LEAK_REACHABLE);
	EXPECT_KIND(lc, 1, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 2, LEAK_POSSIBLY_LOST);
	leakcheck_free(lc);

	CHECK(leakcheck_new(NULL, 0, &lc) == 0); /* nothing tracked */
	leakcheck_scan_value(lc, at(0));
	CHECK(leakcheck_classify(lc, NULL) == 0);
	leakcheck_free(lc);
}

/* Large blocks are found through the region table, in their middle too. */
static void test_large_blocks(void)
{
	const uint64_t mib = 1 << 20;
	struct leak_block b[5] = {
		{ .addr = BASE + 0x1000, .size = 24 },
		{ .addr = BASE + 0x1020, .size = 3 * mib }, /* starts in 0's page */
		{ .addr = BASE + 0x1020 + 3 * mib, .size = 16 }, /* right after its end */
		{ .addr = BASE + 8 * mib, .size = 40 * mib },
		{ .addr = BASE + 64 * mib, .size = 100000000000ull }, /* 100 GB --mmap region */
	};
	uint64_t probes[][2] = {
		{ BASE + 0x1000, 0 },
		{ BASE + 0x1018, (uint64_t)-1 },
		{ BASE + 0x1020, 1 },
		{ BASE + 0x1020 + mib + 5, 1 },
		{ BASE + 0x1020 + 3 * mib - 1, 1 },
		{ BASE + 0x1020 + 3 * mib, 2 },
		{ BASE + 0x1020 + 3 * mib + 16, (uint64_t)-1 },
		{ BASE + 8 * mib - 1, (uint64_t)-1 },
		{ BASE + 30 * mib, 3 },
		{ BASE + 48 * mib, (uint64_t)-1 },
		{ BASE + 64 * mib + 77777777777ull, 4 },
		{ BASE + 64 * mib + 100000000000ull, (uint64_t)-1 },
	};
	struct leakcheck *lc;
	size_t i;

	CHECK(leakcheck_new(b, 5, &lc) == 0);
	for (i = 0; i < N(probes); i++) {
		int64_t got = leakcheck_find(lc, probes[i][0], NULL);

		EXPECT(got == (int64_t)probes[i][1], "probe %zu (%#llx): block %lld, want %lld", i,
		       (unsigned long long)probes[i][0], (long long)got, (long long)probes[i][1]);
	}
	leakcheck_free(lc);
}

/* ---------------------------------------------------------------------
 * Random heaps against a naive oracle
 * ------------------------------------------------------------------ */

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	return check_xorshift64(&rng);
}

/* The last of the blocks B[0..N) (in address order, not overlapping) that
 * starts at or below V, or -1: the oracle's plain binary search. */
static int naive_below(const struct leak_block *b, size_t n, uint64_t v)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (b[mid].addr <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int)lo - 1;
}

/* The block a pointer V points into (a zero-size block counts as one byte). */
static int naive_find(const struct leak_block *b, size_t n, uint64_t v)
{
	int i = naive_below(b, n, v);

	return i >= 0 && v < b[i].addr + (b[i].size ? b[i].size : 1) ? i : -1;
}

/* The block whose contents hold the word at W. */
static int naive_owner(const struct leak_block *b, size_t n, uint64_t w)
{
	int i = naive_below(b, n, w);

	return i >= 0 && w < b[i].addr + b[i].size ? i : -1;
}

/* memcheck's rules the slow way: every aligned word of A, a fixpoint for
 * the marking, and cliques from each unreached block in address order
 * (the blocks are made in address order here). */
static void oracle(const struct leak_block *b, size_t n, const struct arena *a, enum leak_kind *out)
{
	int *from = malloc(a->words * sizeof(int)), *to = malloc(a->words * sizeof(int));
	bool *start = malloc(a->words * sizeof(bool)), changed = true;
	int *st = calloc(n, sizeof(int)), *queue = malloc(n * sizeof(int)); /* 0 U, 1 P, 2 R, 3 I */
	size_t w, ne = 0, i;

	CHECK(from && to && start && st && queue);
	for (w = 0; w < a->words; w++) {
		uint64_t addr = BASE + 8 * w, v = a->w[w];
		int t = naive_find(b, n, v), o;

		if (t < 0)
			continue;
		o = naive_owner(b, n, addr);
		/* the word across a block's end is nobody's */
		if (o == t || (o >= 0 && addr + 8 > b[o].addr + b[o].size))
			continue;
		from[ne] = o;
		to[ne] = t;
		start[ne++] = v == b[t].addr;
	}
	while (changed) {
		changed = false;
		for (i = 0; i < ne; i++) {
			int src = from[i] < 0 ? 2 : st[from[i]], t = to[i];

			if (src != 1 && src != 2)
				continue;
			if (start[i] && src == 2 && st[t] != 2) {
				st[t] = 2;
				changed = true;
			} else if (st[t] == 0) {
				st[t] = 1;
				changed = true;
			}
		}
	}
	for (i = 0; i < n; i++) {
		size_t head = 0, tail = 0;

		if (st[i] != 0)
			continue;
		queue[tail++] = (int)i;
		while (head < tail) {
			int cur = queue[head++];
			size_t k;

			for (k = 0; k < ne; k++)
				if (from[k] == cur && st[to[k]] == 0 && to[k] != (int)i) {
					st[to[k]] = 3;
					queue[tail++] = to[k];
				}
		}
	}
	for (i = 0; i < n; i++)
		out[i] = st[i] == 2 ? LEAK_REACHABLE :
			 st[i] == 1 ? LEAK_POSSIBLY_LOST :
			 st[i] == 3 ? LEAK_INDIRECTLY_LOST :
				      LEAK_DEFINITELY_LOST;
	free(from);
	free(to);
	free(start);
	free(st);
	free(queue);
}

/* N blocks in address order in A with gaps of root memory between them,
 * sparse pointers (start, interior, one past the end, junk), few roots;
 * with BIG, one block in 8 spans 1 to 19 pages (some of them large). */
static void random_heap(struct arena *a, struct leak_block *b, size_t n, bool big)
{
	uint64_t addr = BASE + 256;
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t size = rnd() % 10 == 0 ? 0 :
				big && rnd() % 8 == 0 ? 4096 + rnd() % 70000 :
							8 + rnd() % 200;

		addr += 16 * (rnd() % 4); /* gaps: root memory, sometimes none */
		b[i] = (struct leak_block){ .addr = addr, .size = size };
		addr += (size + 15) & ~15ull;
		if (!size)
			addr += 16;
	}
	arena_init(a, addr - BASE + 256);
	for (i = 0; i < a->words; i++) {
		uint64_t r = rnd() % 1000, v;
		size_t t = rnd() % n;

		if (r < 970) /* junk: zeros, small numbers, a random high value */
			v = r < 900 ? 0 : r < 960 ? rnd() % 100000 : rnd();
		else if (r < 985)
			v = b[t].addr;
		else if (r < 995)
			v = b[t].addr + (b[t].size ? rnd() % b[t].size : 0);
		else
			v = b[t].addr + b[t].size;
		a->w[i] = v;
	}
}

static void test_random_vs_oracle(void)
{
	static const size_t sizes[] = { 1, 2, 7, 60, 400, 1500 };
	size_t s;

	for (s = 0; s < N(sizes); s++) {
		size_t n = sizes[s], i;
		struct leak_block *b = malloc(n * sizeof(*b)), *shuffled = malloc(n * sizeof(*b));
		size_t *perm = malloc(n * sizeof(*perm));
		enum leak_kind *want = malloc(n * sizeof(*want));
		struct leakcheck *whole, *pieces;
		struct arena a;
		uint64_t off;

		CHECK(b && shuffled && perm && want);
		random_heap(&a, b, n, true);
		oracle(b, n, &a, want);
		whole = check_of(b, n, &a, NULL);
		for (i = 0; i < n; i++)
			EXPECT(kind(whole, i) == want[i], "n=%zu block %zu: %s, oracle %s", n, i,
			       leak_kind_name(kind(whole, i)), leak_kind_name(want[i]));

		/* the same memory as chunks of random word-aligned lengths, in
		 * reverse order, and the blocks handed over shuffled */
		for (i = 0; i < n; i++)
			perm[i] = i;
		for (i = n; i > 1; i--) {
			size_t j = rnd() % i, tmp = perm[i - 1];

			perm[i - 1] = perm[j];
			perm[j] = tmp;
		}
		for (i = 0; i < n; i++)
			shuffled[i] = b[perm[i]];
		CHECK(leakcheck_new(shuffled, n, &pieces) == 0);
		for (off = a.words * 8; off > 0;) {
			uint64_t len = 8 * (1 + rnd() % 700);

			len = len > off ? off : len;
			off -= len;
			CHECK(leakcheck_scan(pieces, BASE + off, (char *)a.w + off, len) == 0);
		}
		CHECK(leakcheck_classify(pieces, NULL) == 0);
		for (i = 0; i < n; i++)
			EXPECT(kind(pieces, i) == want[perm[i]], "n=%zu chunked block %zu: %s, oracle %s", n, perm[i],
			       leak_kind_name(kind(pieces, i)), leak_kind_name(want[perm[i]]));
		leakcheck_free(whole);
		leakcheck_free(pieces);
		free(a.w);
		free(b);
		free(shuffled);
		free(perm);
		free(want);
	}
}

/* A pointer test against the oracle's, on random values near the blocks. */
static void test_find_random(void)
{
	size_t n = 3000, i;
	struct leak_block *b = malloc(n * sizeof(*b));
	struct leakcheck *lc;
	struct arena a;

	CHECK(b);
	random_heap(&a, b, n, true);
	CHECK(leakcheck_new(b, n, &lc) == 0);
	for (i = 0; i < 200000; i++) {
		size_t t = rnd() % n;
		uint64_t v = b[t].addr + rnd() % (b[t].size + 64) - 32;

		EXPECT(leakcheck_find(lc, v, NULL) == naive_find(b, n, v), "find %#llx", (unsigned long long)v);
		if (check_failures > 10)
			break;
	}
	leakcheck_free(lc);
	free(a.w);
	free(b);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A million blocks: a sanity run of size and speed (no timing asserted;
 * bench/leakcheck_bench times it against LSan and memcheck). */
static void test_million_blocks(void)
{
	size_t n = 1000000;
	struct leak_block *b = malloc(n * sizeof(*b));
	struct leakcheck_totals t;
	struct leakcheck_scan_stats st;
	struct leakcheck *lc;
	struct arena a;
	double t0, t1, t2, t3;
	uint64_t blocks = 0;
	int k;

	CHECK(b);
	random_heap(&a, b, n, false);
	t0 = now_s();
	CHECK(leakcheck_new(b, n, &lc) == 0);
	t1 = now_s();
	CHECK(scan_all(lc, &a) == 0);
	t2 = now_s();
	CHECK(leakcheck_classify(lc, &t) == 0);
	t3 = now_s();
	leakcheck_stats(lc, &st);
	for (k = 0; k < LEAK_KIND_COUNT; k++)
		blocks += t.blocks[k];
	EXPECT(blocks == n);
	EXPECT(st.scanned_bytes == a.words * 8);
	printf("1e6 blocks, %.0f MiB scanned (sanitizer build): build %.0f ms, scan %.0f ms (%.0f Mwords/s), "
	       "classify %.0f ms; %llu edges, %llu root hits; reachable %llu, possibly %llu, indirectly %llu, "
	       "definitely %llu\n",
	       (double)st.scanned_bytes / 1048576, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
	       (double)st.scanned_bytes / 8 / (t2 - t1) / 1e6, (t3 - t2) * 1e3, (unsigned long long)st.edges,
	       (unsigned long long)st.root_hits, (unsigned long long)t.blocks[LEAK_REACHABLE],
	       (unsigned long long)t.blocks[LEAK_POSSIBLY_LOST], (unsigned long long)t.blocks[LEAK_INDIRECTLY_LOST],
	       (unsigned long long)t.blocks[LEAK_DEFINITELY_LOST]);
	leakcheck_free(lc);
	free(a.w);
	free(b);
}

/* leakcheck_keep: a block that changed after the index was built is
 * taken as reachable, and what it points to with it; an address where no
 * block starts is refused. */
static void test_keep(void)
{
	struct leak_block b[3];
	struct leakcheck_totals t;
	struct leakcheck *lc;
	struct arena a;

	arena_init(&a, 0x10000);
	blocks_spaced(b, 3, 64);
	/* nothing points to 0; 0 -> 1; 2 alone */
	poke(&a, at(0) + 16, at(1));
	CHECK(leakcheck_new(b, 3, &lc) == 0);
	EXPECT(leakcheck_keep(lc, at(0)) == 0);
	EXPECT(leakcheck_keep(lc, at(2) + 8) == -ENOENT, "an interior address is not a block's start");
	EXPECT(leakcheck_keep(lc, BASE + 8) == -ENOENT, "no block there");
	CHECK(scan_all(lc, &a) == 0);
	CHECK(leakcheck_classify(lc, &t) == 0);
	EXPECT_KIND(lc, 0, LEAK_REACHABLE);
	EXPECT_KIND(lc, 1, LEAK_REACHABLE);
	EXPECT_KIND(lc, 2, LEAK_DEFINITELY_LOST);
	leakcheck_free(lc);
	free(a.w);
}

static bool unsure(const struct leakcheck *lc, size_t i)
{
	struct leak_verdict v;

	CHECK(leakcheck_verdict(lc, i, &v) == 0, "verdict %zu", i);
	return v.unsure;
}

/* The allocator's memory (blocks only: its words outside blocks are no
 * roots) and unsure roots (memory it held before the trace): a block
 * reached only through them, or reached further by them, is flagged. */
static void test_blocks_only_and_unsure(void)
{
	struct leak_block b[6];
	struct leakcheck_totals t;
	struct leakcheck *lc;
	struct arena a;

	arena_init(&a, 0x8000);
	blocks_spaced(b, 6, 64);
	poke(&a, ROOT(0), at(4));		  /* sure: 4 */
	poke(&a, ROOT(1), at(2) + 8);		  /* sure, interior: 2 possibly */
	poke(&a, BASE + 0x800, at(1));		  /* unsure: 1 */
	poke(&a, BASE + 0x808, at(2));		  /* unsure: 2 reachable, not possibly */
	poke(&a, BASE + 0x810, at(4));		  /* unsure too: 4 stays sure */
	poke(&a, at(1) + 8, at(3));		  /* 1 -> 3: unsure as 1 */
	poke(&a, at(5) - 0x100, at(5));		  /* the allocator's: no root for 5 */
	poke(&a, at(5) + 8, at(0));		  /* a lost block's pointer: 0 indirectly lost */
	CHECK(leakcheck_new(b, 6, &lc) == 0);
	/* any order: the allocator's page first, then the roots */
	CHECK(leakcheck_scan_blocks(lc, at(4) + 0x1000 - 0x1000, (char *)a.w + (at(4) - BASE), 0x2000) == 0);
	CHECK(leakcheck_scan(lc, BASE, a.w, 0x800) == 0);
	CHECK(leakcheck_scan_unsure(lc, BASE + 0x800, (char *)a.w + 0x800, 0x800) == 0);
	CHECK(leakcheck_scan(lc, at(0), (char *)a.w + (at(0) - BASE), at(4) - at(0)) == 0);
	CHECK(leakcheck_classify(lc, &t) == 0);
	EXPECT_KIND(lc, 0, LEAK_INDIRECTLY_LOST);
	EXPECT_KIND(lc, 1, LEAK_REACHABLE);
	EXPECT_KIND(lc, 2, LEAK_REACHABLE);
	EXPECT_KIND(lc, 3, LEAK_REACHABLE);
	EXPECT_KIND(lc, 4, LEAK_REACHABLE);
	EXPECT_KIND(lc, 5, LEAK_DEFINITELY_LOST);
	EXPECT(!unsure(lc, 0) && unsure(lc, 1) && unsure(lc, 2) && unsure(lc, 3) && !unsure(lc, 4) && !unsure(lc, 5),
	       "unsure: %d%d%d%d%d%d", unsure(lc, 0), unsure(lc, 1), unsure(lc, 2), unsure(lc, 3), unsure(lc, 4),
	       unsure(lc, 5));
	EXPECT(t.unsure_blocks == 3 && t.unsure_bytes == 3 * 64, "%llu unsure blocks",
	       (unsigned long long)t.unsure_blocks);
	leakcheck_free(lc);
	free(a.w);
}

/* The pages of the allocator's memory no block touches: never read. */
static void test_holes(void)
{
	struct leak_block b[3] = { { at(0), 64 }, { at(1) + 0xff0, 0x20 }, { at(4), 0 } };
	const struct leak_block mem[] = { { BASE, at(5) + 0x2000 - BASE }, { at(9), 0x800 } };
	struct leak_block *h;
	struct leakcheck *lc;
	size_t n;

	CHECK(leakcheck_new(b, 3, &lc) == 0);
	CHECK(leakcheck_holes(lc, mem, 2, 0x1000, &h, &n) == 0);
	/* [BASE, at(0)); at(0)'s page has block 0, at(1) and at(2) block 1
	 * (across their boundary); at(3); at(4)'s page has the empty block 2;
	 * then from at(5) on; the second range has no whole page */
	EXPECT(n == 3, "%zu holes", n);
	EXPECT(n > 0 && h[0].addr == BASE && h[0].size == 0x1000, "hole 0");
	EXPECT(n > 1 && h[1].addr == at(3) && h[1].size == 0x1000, "hole 1 %#llx+%#llx",
	       n > 1 ? (unsigned long long)h[1].addr : 0ull, n > 1 ? (unsigned long long)h[1].size : 0ull);
	EXPECT(n > 2 && h[2].addr == at(5) && h[2].size == 0x2000, "hole 2");
	free(h);
	leakcheck_free(lc);
}

int main(void)
{
	EXPECT(leak_kind_name(LEAK_DEFINITELY_LOST) && !strcmp(leak_kind_name(LEAK_DEFINITELY_LOST), "definitely_lost"));
	EXPECT(leak_kind_name(LEAK_KIND_COUNT) == NULL);
	test_chains();
	test_cycles();
	test_clique_merging();
	test_interior();
	test_self_pointer();
	test_lost_tree();
	test_block_end();
	test_zero_size();
	test_unaligned();
	test_registers_and_overlap();
	test_large_blocks();
	test_find_random();
	test_random_vs_oracle();
	test_keep();
	test_blocks_only_and_unsure();
	test_holes();
	test_million_blocks();
	return check_status();
}
