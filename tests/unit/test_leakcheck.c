/* Unit test for leakcheck/: memcheck's classification on synthetic memory
 * (no root, no process).  A table of hand-made cases for each rule (chains,
 * cycles, interior pointers, self pointers, lost trees, one-past-the-end,
 * zero-size blocks, unaligned pointers, odd block ends), then cases the
 * table cannot say (chunk ends, registers, overlaps, large blocks, kept
 * blocks, unsure roots, holes), random heaps checked against a naive oracle
 * written straight from memcheck's description, scanned whole and in
 * shuffled chunks, and a million-block sanity run that prints its rate
 * (timed for real by `make bench`). */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
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

/* Block I of the hand-made cases is at BASE + 0x1000 * (I + 1). */
#define AT(i) (BASE + 0x1000ull * (uint64_t)((i) + 1))

/* The blocks most of them have: N of SIZE bytes each, at AT(0) on. */
#define SPACED2(size) { AT(0), size }, { AT(1), size }
#define SPACED3(size) SPACED2(size), { AT(2), size }
#define SPACED4(size) SPACED3(size), { AT(3), size }
#define SPACED5(size) SPACED4(size), { AT(4), size }
#define SPACED6(size) SPACED5(size), { AT(5), size }

/* Root words live at BASE..BASE+0x1000, outside every block. */
#define ROOT(k) (BASE + 8ull * (k))

static void oracle(const struct leak_block *b, size_t n, const struct arena *a, enum leak_kind *out);

/* ---------------------------------------------------------------------
 * Hand-made cases: blocks, the pointers in memory, the kinds memcheck
 * gives the blocks (and, where a case is about them, a verdict's
 * details, pointer tests and scan statistics).  Each case's memory is
 * scanned whole; its kinds are checked as written, against the naive
 * oracle below, and in the totals.
 * ------------------------------------------------------------------ */

#define CASE_BLOCKS 6 /* blocks a case may have */
#define CASE_WORDS 8  /* words it may store */

/* What leakcheck_verdict must say of a block beyond its kind. */
struct verdict_want {
	bool checked;
	uint64_t indirect_bytes; /* 0 unless definitely lost */
	size_t via;		 /* SIZE_MAX unless indirectly lost */
};
#define VERDICT(indirect, via_block) { .checked = true, .indirect_bytes = (indirect), .via = (via_block) }

/* What leakcheck_find must answer for ADDR: BLOCK (-1: none), reached at
 * its START or not. */
struct find_want {
	uint64_t addr;
	int64_t block;
	bool start;
};

/* A field of struct leakcheck_scan_stats and the value it must have. */
struct stat_want {
	const char *name;
	size_t offset;
	uint64_t value;
};
#define STAT(field, v) { #field, offsetof(struct leakcheck_scan_stats, field), (v) }

struct kind_case {
	const char *what; /* what the case shows: failures name it */
	/* in address order, one per letter of KINDS; 0x10000 bytes of zeros
	 * from BASE hold them, and the words of MEMORY (up to one whose AT is
	 * 0), stored at any alignment */
	struct leak_block blocks[CASE_BLOCKS];
	struct {
		uint64_t at, value;
	} memory[CASE_WORDS];
	/* each block's kind: R reachable, P possibly lost, I indirectly lost,
	 * D definitely lost */
	const char *kinds;
	struct verdict_want verdicts[CASE_BLOCKS]; /* by block, where checked */
	struct find_want finds[4];		   /* up to one whose ADDR is 0 */
	struct stat_want stats[2];		   /* up to one whose NAME is NULL */
};

/* The memory of the chain, the cycles and the interior pointers that
 * several cases start from. */
#define CHAIN { AT(0) + 8, AT(1) }, { AT(1) + 56, AT(2) }
#define CYCLES { AT(0), AT(1) }, { AT(1), AT(0) }, { AT(2) + 16, AT(3) }, { AT(3) + 16, AT(4) }, { AT(4) + 16, AT(2) }
/* root -?-> 0 ---> 1 -?-> 2 (memcheck's cases 5 and 7), and
 * root ---> 3 -?-> 4 ---> 5 */
#define INTERIOR                                                                                   \
	{ ROOT(0), AT(0) + 8 }, { AT(0), AT(1) }, { AT(1), AT(2) + 63 }, { ROOT(1), AT(3) },      \
		{ AT(3) + 8, AT(4) + 32 }, { AT(4) + 8, AT(5) }
#define SELF_POINTERS { AT(0), AT(0) }, { AT(1) + 8, AT(1) + 8 }

static const struct kind_case kind_cases[] = {
	{ "a chain from a root is reachable, a block nothing points to lost",
	  .blocks = { SPACED4(64) },
	  .memory = { { ROOT(0), AT(0) }, CHAIN },
	  .kinds = "RRRD" },
	{ "the chain without its root: its head definitely lost, carrying the rest as indirect bytes",
	  .blocks = { SPACED4(64) },
	  .memory = { CHAIN },
	  .kinds = "DIID",
	  .verdicts = { [0] = VERDICT(128, SIZE_MAX), [2] = VERDICT(0, 1) } },
	/* memcheck: one block of a lost cycle leads its clique (the lowest:
	 * leaders are tried in address order), the rest are indirect */
	{ "lost cycles 0 <-> 1 and 2 -> 3 -> 4 -> 2",
	  .blocks = { SPACED5(32) },
	  .memory = { CYCLES },
	  .kinds = "DIDII",
	  .verdicts = { [2] = VERDICT(64, SIZE_MAX) } },
	{ "a cycle with a root pointer into it is reachable all round",
	  .blocks = { SPACED5(32) },
	  .memory = { CYCLES, { ROOT(3), AT(3) } },
	  .kinds = "DIRRR" },
	/* Cliques never overlap (mc_leakcheck.c): a block that led a clique
	 * and is reached from a later leader joins it; one reached only
	 * through another clique's member stays a leader. */
	{ "0 <-> 1 and 2 -> 1: leader 0 takes 1, 2 finds 1 taken",
	  .blocks = { SPACED3(32) },
	  .memory = { { AT(0), AT(1) }, { AT(1), AT(0) }, { AT(2), AT(1) } },
	  .kinds = "DID" },
	{ "0 -> 1 and 2 -> 0: leader 0 takes 1, then leader 2 takes 0 and its clique's bytes",
	  .blocks = { SPACED3(32) },
	  .memory = { { AT(0), AT(1) }, { AT(2), AT(0) } },
	  .kinds = "IID",
	  .verdicts = { [0] = VERDICT(0, 2), [2] = VERDICT(64, SIZE_MAX) } },
	{ "interior pointers: the blocks they reach possibly lost, and what those point to",
	  .blocks = { SPACED6(64) },
	  .memory = { INTERIOR },
	  .kinds = "PPPRPP" },
	/* a later root start pointer to 1 upgrades it and what it points
	 * to by start pointers only: 2 is reached by an interior pointer */
	{ "a root start pointer to 1 as well",
	  .blocks = { SPACED6(64) },
	  .memory = { INTERIOR, { ROOT(2), AT(1) } },
	  .kinds = "PRPRPP" },
	/* the same upgrade with the block pointing on to a start pointer:
	 * 4 -> 5 becomes reachable once 4 is (scan order must not matter) */
	{ "root start pointers to 1 and 4 as well",
	  .blocks = { SPACED6(64) },
	  .memory = { INTERIOR, { ROOT(2), AT(1) }, { ROOT(4), AT(4) } },
	  .kinds = "PRPRRR" },
	{ "a list head pointing at itself and an interior self pointer are no edges",
	  .blocks = { SPACED2(48) },
	  .memory = { SELF_POINTERS },
	  .kinds = "DD",
	  .stats = { STAT(edges, 0) } },
	{ "a self-pointing block reached from a root",
	  .blocks = { SPACED2(48) },
	  .memory = { SELF_POINTERS, { ROOT(0), AT(0) } },
	  .kinds = "RD" },
	/* 2 -> 0, 2 -> 4, 0 -> 1, 0 -> 3 (interior), 4 -> 5 */
	{ "a lost tree rooted at 2, its children on both sides of it",
	  .blocks = { SPACED6(64) },
	  .memory = { { AT(2), AT(0) }, { AT(2) + 8, AT(4) }, { AT(0), AT(1) }, { AT(0) + 8, AT(3) + 24 },
		      { AT(4), AT(5) } },
	  .kinds = "IIDIII",
	  .verdicts = { [2] = VERDICT(5 * 64, SIZE_MAX), [3] = VERDICT(0, 0) } },
	/* one past the end of 0 is not a pointer into it; the last byte of
	 * 1 is; one past 2's end is the start of 3, right after it */
	{ "block ends",
	  .blocks = { SPACED3(40), { AT(2) + 40, 8 } },
	  .memory = { { ROOT(0), AT(0) + 40 }, { ROOT(1), AT(1) + 39 }, { ROOT(2), AT(2) + 40 } },
	  .kinds = "DPDR",
	  .finds = { { AT(0) + 40, -1, false }, { AT(0), 0, true }, { AT(2) + 40, 3, true },
		     { AT(2) + 39, 2, false } } },
	/* malloc(0): a start pointer reaches it (memcheck counts it as one
	 * byte), one past its address does not; it holds no words, so what
	 * is stored at its address is root memory */
	{ "zero-size blocks",
	  .blocks = { SPACED4(0) },
	  .memory = { { ROOT(0), AT(0) }, { ROOT(1), AT(1) + 1 }, { AT(0), AT(2) } },
	  .kinds = "RDRD",
	  .finds = { { AT(3), 3, true }, { AT(3) + 1, -1, false } } },
	/* The documented choice: aligned words only, like memcheck and LSan. */
	{ "pointers at unaligned addresses are not seen; an unaligned value is an interior pointer",
	  .blocks = { SPACED4(64) },
	  .memory = { { ROOT(0) + 4, AT(0) }, /* a root pointer at an unaligned offset */
		      { AT(1) + 3, AT(2) },   /* and one inside a reachable block */
		      { ROOT(8), AT(1) },
		      { AT(3) + 16, AT(3) + 1 },
		      { ROOT(9), AT(3) + 1 } },
	  .kinds = "DRDP" },
	/* a block at an odd address holds the whole words inside it; the
	 * word across its end is nobody's (its last bytes are the
	 * allocator's slack, as memcheck's scan rounds a block's end down),
	 * neither its pointer nor a root */
	{ "a block at [3, 13) of its page: no whole word",
	  .blocks = { { AT(0) + 3, 10 }, { AT(1), 64 }, { AT(2), 64 }, { AT(3), 64 } },
	  .memory = { { AT(0) + 8, AT(1) }, { ROOT(0), AT(0) + 3 } },
	  .kinds = "RDDD",
	  .stats = { STAT(tail_bytes, 8), STAT(root_hits, 1) } },
	{ "a block at [3, 16) of its page: the word at 8 is whole inside it",
	  .blocks = { { AT(0) + 3, 13 }, { AT(1), 64 }, { AT(2), 64 }, { AT(3), 64 } },
	  .memory = { { AT(0) + 8, AT(1) }, { ROOT(0), AT(0) + 3 } },
	  .kinds = "RRDD" },
};

static enum leak_kind kind_of_letter(char c)
{
	switch (c) {
	case 'R':
		return LEAK_REACHABLE;
	case 'P':
		return LEAK_POSSIBLY_LOST;
	case 'I':
		return LEAK_INDIRECTLY_LOST;
	case 'D':
		return LEAK_DEFINITELY_LOST;
	}
	CHECK(0, "kind letter '%c'", c);
	return LEAK_KIND_COUNT;
}

static void kind_case_run(const struct kind_case *c)
{
	size_t n = strlen(c->kinds), i;
	uint64_t want_blocks[LEAK_KIND_COUNT] = { 0 }, want_bytes[LEAK_KIND_COUNT] = { 0 };
	enum leak_kind oracle_kinds[CASE_BLOCKS];
	struct leakcheck_scan_stats st;
	struct leakcheck_totals t;
	const struct find_want *f;
	const struct stat_want *s;
	struct leakcheck *lc;
	struct arena a;
	int k;

	CHECK(n >= 1 && n <= CASE_BLOCKS && (n == CASE_BLOCKS || !c->blocks[n].addr), "%s: %zu kinds for its blocks",
	      c->what, n);
	arena_init(&a, 0x10000);
	for (i = 0; i < CASE_WORDS && c->memory[i].at; i++)
		poke(&a, c->memory[i].at, c->memory[i].value);
	lc = check_of(c->blocks, n, &a, &t);
	oracle(c->blocks, n, &a, oracle_kinds);
	for (i = 0; i < n; i++) {
		enum leak_kind want = kind_of_letter(c->kinds[i]), got = kind(lc, i);
		const struct verdict_want *vw = &c->verdicts[i];
		struct leak_verdict v;

		EXPECT(got == want, "%s: block %zu is %s, want %s", c->what, i, leak_kind_name(got),
		       leak_kind_name(want));
		EXPECT(oracle_kinds[i] == want, "%s: the oracle makes block %zu %s, the case %s", c->what, i,
		       leak_kind_name(oracle_kinds[i]), leak_kind_name(want));
		want_blocks[want]++;
		want_bytes[want] += c->blocks[i].size;
		if (!vw->checked)
			continue;
		CHECK(leakcheck_verdict(lc, i, &v) == 0);
		EXPECT(v.indirect_bytes == vw->indirect_bytes && v.via == vw->via,
		       "%s: block %zu carries %llu indirect bytes (want %llu), reached via %zu (want %zu)", c->what,
		       i, (unsigned long long)v.indirect_bytes, (unsigned long long)vw->indirect_bytes, v.via, vw->via);
	}
	for (k = 0; k < LEAK_KIND_COUNT; k++)
		EXPECT(t.blocks[k] == want_blocks[k] && t.bytes[k] == want_bytes[k],
		       "%s: %s totals %llu blocks, %llu bytes; want %llu, %llu", c->what, leak_kind_name(k),
		       (unsigned long long)t.blocks[k], (unsigned long long)t.bytes[k],
		       (unsigned long long)want_blocks[k], (unsigned long long)want_bytes[k]);
	for (f = c->finds; f < c->finds + N(c->finds) && f->addr; f++) {
		int start = -1;
		int64_t got = leakcheck_find(lc, f->addr, f->block >= 0 ? &start : NULL);

		EXPECT(got == f->block && (f->block < 0 || start == f->start),
		       "%s: leakcheck_find(%#llx) is %lld (start %d), want %lld (start %d)", c->what,
		       (unsigned long long)f->addr, (long long)got, start, (long long)f->block, f->start);
	}
	leakcheck_stats(lc, &st);
	for (s = c->stats; s < c->stats + N(c->stats) && s->name; s++) {
		uint64_t got;

		memcpy(&got, (const char *)&st + s->offset, sizeof(got));
		EXPECT(got == s->value, "%s: %s %llu, want %llu", c->what, s->name, (unsigned long long)got,
		       (unsigned long long)s->value);
	}
	leakcheck_free(lc);
	free(a.w);
}

static void test_kind_cases(void)
{
	size_t i;

	for (i = 0; i < N(kind_cases); i++)
		kind_case_run(&kind_cases[i]);
}

/* Chunks that start and end off word bounds: only whole aligned words
 * inside a chunk are read, the rest is counted. */
static void test_unaligned_chunks(void)
{
	struct leak_block b[4] = { SPACED4(64) };
	struct leakcheck_scan_stats st;
	struct leakcheck *lc;
	struct arena a;

	arena_init(&a, 0x10000);
	poke(&a, ROOT(1), AT(0));
	poke(&a, ROOT(3), AT(1));
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
	free(a.w);
}

static void test_registers_and_overlap(void)
{
	struct leak_block b[3] = {
		{ .addr = AT(0), .size = 64 },
		{ .addr = AT(0) + 32, .size = 64 }, /* overlaps 0: a free the tracer missed */
		{ .addr = AT(2), .size = 64 },
	};
	struct leakcheck_scan_stats st;
	struct leakcheck *lc;

	CHECK(leakcheck_new(b, 3, &lc) == 0);
	leakcheck_scan_value(lc, AT(2) + 8);
	leakcheck_scan_value(lc, AT(0));
	leakcheck_scan_value(lc, 42);
	leakcheck_stats(lc, &st);
	EXPECT(st.overlapping == 1 && st.values == 3 && st.root_hits == 2);
	EXPECT(leakcheck_find(lc, AT(0) + 40, NULL) == 1, "the overlap belongs to the upper block");
	CHECK(leakcheck_classify(lc, NULL) == 0);
	EXPECT_KIND(lc, 0, LEAK_REACHABLE);
	EXPECT_KIND(lc, 1, LEAK_DEFINITELY_LOST);
	EXPECT_KIND(lc, 2, LEAK_POSSIBLY_LOST);
	leakcheck_free(lc);

	CHECK(leakcheck_new(NULL, 0, &lc) == 0); /* nothing tracked */
	leakcheck_scan_value(lc, AT(0));
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
	struct leak_block b[3] = { SPACED3(64) };
	struct leakcheck_totals t;
	struct leakcheck *lc;
	struct arena a;

	arena_init(&a, 0x10000);
	/* nothing points to 0; 0 -> 1; 2 alone */
	poke(&a, AT(0) + 16, AT(1));
	CHECK(leakcheck_new(b, 3, &lc) == 0);
	EXPECT(leakcheck_keep(lc, AT(0)) == 0);
	EXPECT(leakcheck_keep(lc, AT(2) + 8) == -ENOENT, "an interior address is not a block's start");
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
	struct leak_block b[6] = { SPACED6(64) };
	struct leakcheck_totals t;
	struct leakcheck *lc;
	struct arena a;

	arena_init(&a, 0x8000);
	poke(&a, ROOT(0), AT(4));		  /* sure: 4 */
	poke(&a, ROOT(1), AT(2) + 8);		  /* sure, interior: 2 possibly */
	poke(&a, BASE + 0x800, AT(1));		  /* unsure: 1 */
	poke(&a, BASE + 0x808, AT(2));		  /* unsure: 2 reachable, not possibly */
	poke(&a, BASE + 0x810, AT(4));		  /* unsure too: 4 stays sure */
	poke(&a, AT(1) + 8, AT(3));		  /* 1 -> 3: unsure as 1 */
	poke(&a, AT(5) - 0x100, AT(5));		  /* the allocator's: no root for 5 */
	poke(&a, AT(5) + 8, AT(0));		  /* a lost block's pointer: 0 indirectly lost */
	CHECK(leakcheck_new(b, 6, &lc) == 0);
	/* any order: the allocator's page first, then the roots */
	CHECK(leakcheck_scan_blocks(lc, AT(4) + 0x1000 - 0x1000, (char *)a.w + (AT(4) - BASE), 0x2000) == 0);
	CHECK(leakcheck_scan(lc, BASE, a.w, 0x800) == 0);
	CHECK(leakcheck_scan_unsure(lc, BASE + 0x800, (char *)a.w + 0x800, 0x800) == 0);
	CHECK(leakcheck_scan(lc, AT(0), (char *)a.w + (AT(0) - BASE), AT(4) - AT(0)) == 0);
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
	struct leak_block b[3] = { { AT(0), 64 }, { AT(1) + 0xff0, 0x20 }, { AT(4), 0 } };
	const struct leak_block mem[] = { { BASE, AT(5) + 0x2000 - BASE }, { AT(9), 0x800 } };
	struct leak_block *h;
	struct leakcheck *lc;
	size_t n;

	CHECK(leakcheck_new(b, 3, &lc) == 0);
	CHECK(leakcheck_holes(lc, mem, 2, 0x1000, &h, &n) == 0);
	/* [BASE, AT(0)); AT(0)'s page has block 0, AT(1) and AT(2) block 1
	 * (across their boundary); AT(3); AT(4)'s page has the empty block 2;
	 * then from AT(5) on; the second range has no whole page */
	EXPECT(n == 3, "%zu holes", n);
	EXPECT(n > 0 && h[0].addr == BASE && h[0].size == 0x1000, "hole 0");
	EXPECT(n > 1 && h[1].addr == AT(3) && h[1].size == 0x1000, "hole 1 %#llx+%#llx",
	       n > 1 ? (unsigned long long)h[1].addr : 0ull, n > 1 ? (unsigned long long)h[1].size : 0ull);
	EXPECT(n > 2 && h[2].addr == AT(5) && h[2].size == 0x2000, "hole 2");
	free(h);
	leakcheck_free(lc);
}

int main(void)
{
	EXPECT(leak_kind_name(LEAK_DEFINITELY_LOST) && !strcmp(leak_kind_name(LEAK_DEFINITELY_LOST), "definitely_lost"));
	EXPECT(leak_kind_name(LEAK_KIND_COUNT) == NULL);
	test_kind_cases();
	test_unaligned_chunks();
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
