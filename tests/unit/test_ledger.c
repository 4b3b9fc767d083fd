/* Unit test for cli/ledger.c, no BPF and no root: ring records as the
 * probes write them (allocations, frees, in-place resizes, realloc as a
 * free then an allocation, --mmap regions) applied in order, then the
 * aggregation by stack checked against sums computed here: bytes and
 * counts per stack, --unwind both pairs kept apart, min-age, the oldest
 * stamp, and the --sample-bytes weights against their formula. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "ledger.h"

static void alloc_rec(struct ledger *l, uint64_t addr, uint64_t size, uint64_t stack, uint64_t fp_stack,
		      uint32_t kind)
{
	struct alloc_event e = { .type = AEV_ALLOC, .kind = kind, .addr = addr, .size = size,
				 .stack_id = stack, .fp_stack_id = fp_stack };

	ledger_record(l, &e, sizeof(e));
}

static void free_rec(struct ledger *l, uint64_t addr)
{
	struct free_event e = { .type = AEV_FREE, .addr = addr };

	ledger_record(l, &e, sizeof(e));
}

static void resize_rec(struct ledger *l, uint64_t addr, uint64_t size)
{
	struct alloc_event e = { .type = AEV_RESIZE, .kind = ALLOC_XALLOCX, .addr = addr, .size = size };

	ledger_record(l, &e, sizeof(e));
}

static const struct ledger_stack *find(const struct ledger_stacks *t, uint64_t id, uint64_t fp_id)
{
	size_t i;

	for (i = 0; i < t->cap; i++)
		if (t->slots[i].count && t->slots[i].stack_id == id && t->slots[i].fp_stack_id == fp_id)
			return &t->slots[i];
	return NULL;
}

/* Records applied in order; the aggregate per stack. */
static void test_records(void)
{
	struct ledger l = { 0 };
	struct ledger_stacks t;
	const struct ledger_stack *g;
	struct free_event short_rec = { .type = AEV_FREE, .addr = 0x1000 };

	l.now_ns = 1000;
	alloc_rec(&l, 0x1000, 40, 7, 0, ALLOC_MALLOC);
	alloc_rec(&l, 0x2000, 40, 7, 0, ALLOC_MALLOC);
	alloc_rec(&l, 0x3000, 100, 9, 0, ALLOC_CALLOC);
	l.now_ns = 2000;
	alloc_rec(&l, 0x4000, 8, 7, 0, ALLOC_MALLOC);
	free_rec(&l, 0x2000);
	/* realloc: the old block is forgotten at entry, the new one recorded */
	free_rec(&l, 0x3000);
	alloc_rec(&l, 0x5000, 300, 11, 0, ALLOC_REALLOC);
	resize_rec(&l, 0x5000, 500);
	free_rec(&l, 0xdead);			       /* allocated before attach */
	alloc_rec(&l, 0x1000, 16, 7, 0, ALLOC_MALLOC); /* again, without a free seen */
	ledger_record(&l, &short_rec, sizeof(short_rec) - 1); /* short: ignored */
	EXPECT(l.allocs.free_unknown == 1, "frees of untracked %llu", (unsigned long long)l.allocs.free_unknown);
	EXPECT(l.allocs.replaced == 1, "replaced %llu", (unsigned long long)l.allocs.replaced);
	EXPECT(l.allocs.resized == 1, "resized %llu", (unsigned long long)l.allocs.resized);

	CHECK(ledger_aggregate(&l, 5000, 0, 0, &t) == 0);
	EXPECT(t.n == 2, "%zu stacks", t.n);
	g = find(&t, 7, 0);
	CHECK(g, "stack 7 missing");
	/* 0x1000 (16, replaced at 2000) and 0x4000 (8, at 2000) */
	EXPECT(g->bytes == 24 && g->count == 2, "stack 7: %llu B in %llu", (unsigned long long)g->bytes,
	       (unsigned long long)g->count);
	EXPECT(g->oldest_ts == 2000, "oldest %llu", (unsigned long long)g->oldest_ts);
	EXPECT(g->est_bytes == 24.0 && g->est_count == 2.0, "exact estimates");
	EXPECT(g->kind == ALLOC_MALLOC);
	g = find(&t, 11, 0);
	CHECK(g, "stack 11 missing");
	EXPECT(g->bytes == 500 && g->count == 1 && g->kind == ALLOC_REALLOC, "stack 11: %llu B",
	       (unsigned long long)g->bytes);
	EXPECT(!find(&t, 9, 0), "the realloc'd calloc block is gone");
	ledger_stacks_free(&t);

	/* min-age: only what is at least 3500 ns old at 5000 (made at 1000) */
	CHECK(ledger_aggregate(&l, 5000, 3500, 0, &t) == 0);
	EXPECT(t.n == 0, "%zu stacks old enough, want 0", t.n);
	ledger_stacks_free(&t);
	CHECK(ledger_aggregate(&l, 5000, 3000, 0, &t) == 0);
	EXPECT(t.n == 2, "%zu stacks at min-age 3000", t.n);
	ledger_stacks_free(&t);
	ledger_free(&l);
}

/* realloc(p, 0): the probes forget p at realloc's entry, then glibc's
 * realloc frees p itself; that free is not one of an untracked block. */
static void test_realloc_zero(void)
{
	struct free_event rf = { .type = AEV_REALLOC_FREE, .addr = 0x7000 };
	struct ledger l = { 0 };

	alloc_rec(&l, 0x7000, 32, 1, 0, ALLOC_MALLOC);
	ledger_record(&l, &rf, sizeof(rf));
	free_rec(&l, 0x7000);
	EXPECT(l.allocs.free_unknown == 0, "realloc(p, 0) then free(p): %llu untracked frees",
	       (unsigned long long)l.allocs.free_unknown);
	free_rec(&l, 0x7000); /* a second free of it is one of an unknown block */
	free_rec(&l, 0x8000);
	EXPECT(l.allocs.free_unknown == 2, "%llu untracked frees, want 2", (unsigned long long)l.allocs.free_unknown);
	/* realloc given a block not tracked: untracked (3); the address then
	 * reused: its free is an ordinary one, a second free untracked (4) */
	ledger_record(&l, &rf, sizeof(rf));
	alloc_rec(&l, 0x7000, 8, 1, 0, ALLOC_MALLOC);
	free_rec(&l, 0x7000);
	free_rec(&l, 0x7000);
	EXPECT(l.allocs.free_unknown == 4, "%llu untracked frees, want 4", (unsigned long long)l.allocs.free_unknown);
	ledger_free(&l);
}

/* --unwind both: the same DWARF stack with two FP walks is two stacks. */
static void test_pairs(void)
{
	struct ledger l = { 0 };
	struct ledger_stacks t;

	alloc_rec(&l, 0x10, 1, 5, 50, ALLOC_NEW);
	alloc_rec(&l, 0x20, 2, 5, 51, ALLOC_NEW);
	alloc_rec(&l, 0x30, 4, 5, 50, ALLOC_NEW);
	CHECK(ledger_aggregate(&l, 0, 0, 0, &t) == 0);
	EXPECT(t.n == 2);
	EXPECT(find(&t, 5, 50) && find(&t, 5, 50)->bytes == 5);
	EXPECT(find(&t, 5, 51) && find(&t, 5, 51)->bytes == 2);
	ledger_stacks_free(&t);
	ledger_free(&l);
}

/* --sample-bytes N: each allocation of size s weighs 1 / (1 - exp(-s/N)). */
static void test_weights(void)
{
	const uint64_t n = 65536, sizes[] = { 16, 4096, 65536, 1 << 20 };
	double want_bytes = 0, want_count = 0, w;
	struct ledger l = { 0 };
	struct ledger_stacks t;
	size_t i;

	for (i = 0; i < N(sizes); i++) {
		alloc_rec(&l, 0x1000 * (i + 1), sizes[i], 3, 0, ALLOC_MALLOC);
		w = 1.0 / (1.0 - exp(-(double)sizes[i] / (double)n));
		want_bytes += (double)sizes[i] * w;
		want_count += w;
	}
	CHECK(ledger_aggregate(&l, 0, 0, n, &t) == 0);
	CHECK(t.n == 1);
	EXPECT(fabs(find(&t, 3, 0)->est_bytes - want_bytes) < 1e-6 * want_bytes, "est bytes %f, want %f",
	       find(&t, 3, 0)->est_bytes, want_bytes);
	EXPECT(fabs(find(&t, 3, 0)->est_count - want_count) < 1e-9 * want_count, "est count %f, want %f",
	       find(&t, 3, 0)->est_count, want_count);
	ledger_stacks_free(&t);
	ledger_free(&l);
}

/* --mmap regions: partial munmap and mremap accounted to the byte. */
static void test_mmap(void)
{
	struct mmap_event map = { .type = EVENT_MMAP, .op = MMAP_OP_MAP, .addr = 0x100000, .len = 0x10000,
				  .stack_id = 21, .ts = 10 };
	struct mmap_event unmap = { .type = EVENT_MMAP, .op = MMAP_OP_UNMAP, .addr = 0x104000, .len = 0x1000 };
	struct mmap_event remap = { .type = EVENT_MMAP, .op = MMAP_OP_REMAP, .addr = 0x100000, .len = 0x4000,
				    .new_addr = 0x200000, .new_len = 0x8000 };
	struct ledger l = { 0 };
	struct ledger_stacks t;
	const struct ledger_stack *g;

	ledger_mmap(&l, &map);
	ledger_mmap(&l, &unmap);
	ledger_mmap(&l, &remap);
	CHECK(ledger_aggregate(&l, 100, 0, 0, &t) == 0);
	g = find(&t, 21, 0);
	CHECK(g, "the mmap stack is missing");
	/* 0x10000 - 0x1000 unmapped - 0x4000 moved + 0x8000 grown */
	EXPECT(g->bytes == 0x13000, "%#llx bytes mapped", (unsigned long long)g->bytes);
	EXPECT(g->count == 2 && g->kind == ALLOC_MMAP, "%llu regions", (unsigned long long)g->count);
	EXPECT(l.mmap_err == 0);
	ledger_stacks_free(&t);
	ledger_free(&l);
}

int main(void)
{
	test_records();
	test_realloc_zero();
	test_pairs();
	test_weights();
	test_mmap();
	return check_status();
}
