/* Unit test for session/ledger.c, no BPF and no root: ring records as the
 * probes write them (allocations, frees, in-place resizes, realloc as a
 * free then an allocation, --mmap regions) applied in order, then the
 * aggregation by stack checked against sums computed here: bytes and
 * counts per stack, --unwind both pairs kept apart, min-age, the oldest
 * stamp, and the --sample-bytes weights against their formula; and an
 * exited process's ledger sealed into sums that aggregate as its blocks
 * did, the ones too young for --min-age kept as records. */
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
	EXPECT(g->newest_ts == 2000, "newest %llu", (unsigned long long)g->newest_ts);
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

/* Two aggregates agree on every stack's sums. */
static void expect_same(const struct ledger_stacks *a, const struct ledger_stacks *b, const char *when)
{
	size_t i, k;

	EXPECT(a->n == b->n, "%s: %zu stacks, %zu before the seal", when, b->n, a->n);
	for (i = 0; i < a->cap; i++) {
		const struct ledger_stack *x = &a->slots[i], *y;

		if (!x->count)
			continue;
		y = find(b, x->stack_id, x->fp_stack_id);
		if (!y) {
			EXPECT(0, "%s: stack %llu gone", when, (unsigned long long)x->stack_id);
			continue;
		}
		EXPECT(x->bytes == y->bytes && x->count == y->count && x->oldest_ts == y->oldest_ts &&
			       x->newest_ts == y->newest_ts &&
			       x->kind == y->kind && x->checked == y->checked && fabs(x->est_bytes - y->est_bytes) < 1e-6 &&
			       x->resident == y->resident && x->untouched == y->untouched,
		       "%s: stack %llu: %llu B in %llu, was %llu B in %llu", when, (unsigned long long)x->stack_id,
		       (unsigned long long)y->bytes, (unsigned long long)y->count, (unsigned long long)x->bytes,
		       (unsigned long long)x->count);
		for (k = 0; k < LEAK_KIND_COUNT; k++)
			EXPECT(x->leak_bytes[k] == y->leak_bytes[k] && x->leak_count[k] == y->leak_count[k],
			       "%s: stack %llu, kind %zu", when, (unsigned long long)x->stack_id, k);
	}
}

static void id_seen(void *ctx, uint64_t id)
{
	uint64_t *mask = ctx;

	if (id < 64)
		*mask |= 1ull << id;
}

/* An exited process's ledger sealed: every later aggregate is what it
 * would have been, with or without --min-age, and the ids it names. */
static void test_seal(void)
{
	const uint64_t min_age = 500;
	struct ledger l = { 0 };
	struct ledger_stacks before, after;
	struct alloc_rec *r;
	uint64_t ids = 0;

	l.now_ns = 1000;
	alloc_rec(&l, 0x1000, 40, 7, 8, ALLOC_MALLOC);
	alloc_rec(&l, 0x2000, 60, 7, 8, ALLOC_MALLOC);
	alloc_rec(&l, 0x3000, 100, 9, 0, ALLOC_CALLOC);
	alloc_rec(&l, 0x6000, 30, 12, 0, ALLOC_MALLOC);
	free_rec(&l, 0x6000);
	free_rec(&l, 0x9999); /* never seen: counted */
	l.now_ns = 1800;      /* young at the seal (2000), old by 2400 */
	alloc_rec(&l, 0x4000, 8, 7, 8, ALLOC_MALLOC);
	alloc_rec(&l, 0x5000, 16, 11, 0, ALLOC_MALLOC);
	/* the leak check's verdicts and residency */
	r = alloc_table_get(&l.allocs, 0x1000);
	r->leak = 1 + LEAK_DEFINITELY_LOST;
	r->resident = 40;
	r = alloc_table_get(&l.allocs, 0x3000);
	r->leak = 1 + LEAK_REACHABLE;
	r->swapped = 4096;

	CHECK(ledger_aggregate(&l, 2400, min_age, 0, &before) == 0);
	CHECK(ledger_seal(&l, 2000, min_age, 0) == 0);
	EXPECT(l.sealed && l.allocs.n == 2, "%zu records kept, want the 2 too young at the seal", l.allocs.n);
	EXPECT(l.allocs.free_unknown == 1, "the unmatched free is still counted");
	CHECK(ledger_aggregate(&l, 2400, min_age, 0, &after) == 0);
	expect_same(&before, &after, "at 2400");
	ledger_stacks_free(&before);
	ledger_stacks_free(&after);
	/* at 2100 the young ones are left out, before and after alike */
	CHECK(ledger_aggregate(&l, 2100, min_age, 0, &after) == 0);
	EXPECT(after.n == 2 && find(&after, 7, 8)->count == 2 && !find(&after, 11, 0),
	       "at 2100: %zu stacks", after.n);
	ledger_stacks_free(&after);
	/* records after the seal change nothing */
	free_rec(&l, 0x2000);
	alloc_rec(&l, 0x7000, 1, 13, 0, ALLOC_MALLOC);
	CHECK(ledger_aggregate(&l, 2400, min_age, 0, &after) == 0);
	EXPECT(after.n == 3 && find(&after, 7, 8)->bytes == 108 && !find(&after, 13, 0));
	ledger_stacks_free(&after);
	ledger_stack_ids(&l, id_seen, &ids);
	EXPECT(ids == ((1ull << 7) | (1ull << 8) | (1ull << 9) | (1ull << 11) | 1ull),
	       "ids named: %#llx", (unsigned long long)ids);
	ledger_free(&l);
}

int main(void)
{
	test_records();
	test_realloc_zero();
	test_pairs();
	test_weights();
	test_mmap();
	test_seal();
	return check_status();
}
