/* The ledger of outstanding allocations: ring records applied in the
 * order the probes wrote them, aggregation by stack, and the fold of an
 * exited process's blocks into sums. */
#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"

/* Forgets ADDR in the ring of addresses realloc was given; true if there. */
static bool realloc_freed_take(struct ledger *l, uint64_t addr)
{
	unsigned int i;

	for (i = 0; i < LEDGER_REALLOC_RING; i++) {
		if (l->realloc_freed[i] == addr) {
			l->realloc_freed[i] = 0;
			return true;
		}
	}
	return false;
}

/* A partial ledger: the tracked block at ADDR, about to be forgotten, is
 * dead memory from now on (a block realloc moves is; one it resizes in
 * place is allocated again at once, which forgets it here). */
static void freed_remember(struct ledger *l, uint64_t addr)
{
	const struct alloc_rec *r = l->partial ? alloc_table_find(&l->allocs, addr) : NULL;
	struct alloc_rec dead;

	if (!r)
		return;
	dead = (struct alloc_rec){ .addr = r->addr, .size = r->size };
	if (alloc_table_add(&l->freed, &dead))
		l->oom++;
}

void ledger_record(struct ledger *l, const void *data, size_t size)
{
	const struct alloc_event *a = data;
	const struct free_event *f = data;

	if (size < sizeof(*f) || l->sealed)
		return;
	if (f->type == AEV_REALLOC_FREE) {
		freed_remember(l, f->addr);
		alloc_table_remove(&l->allocs, f->addr);
		l->realloc_freed[l->realloc_next++ % LEDGER_REALLOC_RING] = f->addr;
		return;
	}
	if (f->type == AEV_FREE) {
		if (!alloc_table_find(&l->allocs, f->addr) && realloc_freed_take(l, f->addr))
			return; /* realloc(p, 0) freeing p, already forgotten */
		freed_remember(l, f->addr);
		alloc_table_remove(&l->allocs, f->addr);
		return;
	}
	if (size < sizeof(*a))
		return;
	if (a->type == AEV_RESIZE) {
		alloc_table_resize(&l->allocs, a->addr, a->size);
	} else if (a->type == AEV_ALLOC) {
		struct alloc_rec r = {
			.addr = a->addr,
			.size = a->size,
			.stack_id = a->stack_id,
			.fp_stack_id = a->fp_stack_id,
			.ts = l->now_ns,
			.kind = a->kind,
		};

		realloc_freed_take(l, a->addr); /* the address is in use again */
		if (l->partial && alloc_table_find(&l->freed, a->addr))
			alloc_table_remove(&l->freed, a->addr);
		if (alloc_table_add(&l->allocs, &r))
			l->oom++;
	}
}

/* The program's own mapping (--mmap). */
static int program_mmap(struct ledger *l, const struct mmap_event *m)
{
	if (m->op == MMAP_OP_MAP)
		return mmap_regions_map(&l->regions, m->addr, m->len, m->stack_id, m->fp_stack_id, m->ts);
	if (m->op == MMAP_OP_UNMAP)
		return mmap_regions_unmap(&l->regions, m->addr, m->len);
	if (m->op == MMAP_OP_REMAP)
		return mmap_regions_remap(&l->regions, m->addr, m->len, m->new_addr, m->new_len);
	return 0;
}

/*
 * The allocator's memory after a memory syscall made BY_ALLOCATOR or
 * not.  What the allocator maps (or moves to, or adds to the break) is
 * its own; whatever anybody unmaps, or the program maps or moves to, is
 * not (the program's own mappings may sit where the allocator's were).
 * The break: the first one seen is only learnt (brk(0), which the
 * dynamic linker and glibc ask at start); a move up by the allocator
 * adds [old, new), a move down takes [new, old) out, and a move up by
 * the program adds nothing.
 */
static int allocator_mmap(struct ledger *l, const struct mmap_event *m, bool by_allocator)
{
	uint64_t old = l->brk;
	int err = 0;

	if (l->partial && (m->op == MMAP_OP_UNMAP || m->op == MMAP_OP_REMAP))
		err = mmap_regions_map(&l->unmapped, m->addr, m->len, 0, 0, m->ts);
	if (l->partial && m->op == MMAP_OP_BRK && old && m->addr < old)
		err = err ?: mmap_regions_map(&l->unmapped, m->addr, old - m->addr, 0, 0, m->ts);
	if (err)
		return err;

	switch (m->op) {
	case MMAP_OP_MAP:
		return by_allocator ? mmap_regions_map(&l->alloc_memory, m->addr, m->len, 0, 0, m->ts)
				    : mmap_regions_unmap(&l->alloc_memory, m->addr, m->len);
	case MMAP_OP_UNMAP:
		return mmap_regions_unmap(&l->alloc_memory, m->addr, m->len);
	case MMAP_OP_REMAP:
		err = mmap_regions_unmap(&l->alloc_memory, m->addr, m->len);
		return err ?: by_allocator ? mmap_regions_map(&l->alloc_memory, m->new_addr, m->new_len, 0, 0, m->ts)
					   : mmap_regions_unmap(&l->alloc_memory, m->new_addr, m->new_len);
	case MMAP_OP_BRK:
		l->brk = m->addr;
		if (old && m->addr > old && by_allocator)
			return mmap_regions_map(&l->alloc_memory, old, m->addr - old, 0, 0, m->ts);
		if (old && m->addr < old)
			return mmap_regions_unmap(&l->alloc_memory, m->addr, old - m->addr);
		return 0;
	}
	return 0;
}

void ledger_mmap(struct ledger *l, const struct mmap_event *m)
{
	int err = m->by == MMAP_BY_PROGRAM ? program_mmap(l, m) : 0;

	err = err ?: allocator_mmap(l, m, m->by == MMAP_BY_ALLOCATOR);
	if (err && !l->mmap_err)
		l->mmap_err = err;
}

void ledger_changes_start(struct ledger *l)
{
	alloc_table_log_start(&l->allocs);
}

void ledger_changes_stop(struct ledger *l)
{
	alloc_table_log_stop(&l->allocs);
}

/* The record of the block indexed as (ADDR, SIZE) at SNAP_NS, if it is
 * still that block: same address and size, recorded before SNAP_NS. */
static struct alloc_rec *judged_rec(struct ledger *l, uint64_t addr, uint64_t size, uint64_t snap_ns)
{
	struct alloc_rec *r = alloc_table_get(&l->allocs, addr);

	return r && r->size == size && r->ts <= snap_ns ? r : NULL;
}

void ledger_verdict(struct ledger *l, uint64_t addr, uint64_t size, uint64_t snap_ns, unsigned int kind, bool unsure)
{
	struct alloc_rec *r = judged_rec(l, addr, size, snap_ns);

	if (r) {
		r->leak = (uint16_t)(1 + kind);
		r->leak_unsure = unsure;
	}
}

void ledger_residency(struct ledger *l, uint64_t addr, uint64_t size, uint64_t snap_ns, uint64_t resident,
		      uint64_t swapped)
{
	struct alloc_rec *r = judged_rec(l, addr, size, snap_ns);

	if (r) {
		r->resident = resident;
		r->swapped = swapped;
	}
}

void ledger_free(struct ledger *l)
{
	alloc_table_free(&l->allocs);
	mmap_regions_free(&l->regions);
	mmap_regions_free(&l->alloc_memory);
	alloc_table_free(&l->freed);
	mmap_regions_free(&l->unmapped);
	ledger_stacks_free(&l->folded);
}

static size_t slot_of(uint64_t id, uint64_t fp_id, size_t cap)
{
	return (id ^ fp_id) & (cap - 1);
}

/* Rehashes T into CAP slots (a power of two, over twice T->n). */
static int stacks_resize(struct ledger_stacks *t, size_t cap)
{
	size_t i, j;
	struct ledger_stack *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (i = 0; i < t->cap; i++) {
		if (!t->slots[i].count)
			continue;
		for (j = slot_of(t->slots[i].stack_id, t->slots[i].fp_stack_id, cap); slots[j].count;
		     j = (j + 1) & (cap - 1))
			;
		slots[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

static int stacks_grow(struct ledger_stacks *t)
{
	return stacks_resize(t, t->cap ? t->cap * 2 : 1024);
}

/* The aggregate of stacks (ID, FP_ID) in T, made empty if new; NULL when
 * out of memory. */
static struct ledger_stack *stacks_get(struct ledger_stacks *t, uint64_t id, uint64_t fp_id)
{
	size_t j;

	if (2 * (t->n + 1) > t->cap && stacks_grow(t))
		return NULL;
	for (j = slot_of(id, fp_id, t->cap); t->slots[j].count; j = (j + 1) & (t->cap - 1))
		if (t->slots[j].stack_id == id && t->slots[j].fp_stack_id == fp_id)
			return &t->slots[j];
	t->slots[j].stack_id = id;
	t->slots[j].fp_stack_id = fp_id;
	t->n++;
	return &t->slots[j];
}

/* Counts one outstanding allocation of SIZE bytes of KIND, made at TS, into
 * the aggregate of its stacks (ID, FP_ID) in T.  W is its weight in the
 * --sample-bytes estimates.  Returns the aggregate, or NULL when out of
 * memory. */
static struct ledger_stack *stacks_count(struct ledger_stacks *t, uint64_t id, uint64_t fp_id, uint64_t ts,
					 uint64_t size, uint32_t kind, double w)
{
	struct ledger_stack *g = stacks_get(t, id, fp_id);

	if (!g)
		return NULL;
	if (!g->count || ts < g->oldest_ts)
		g->oldest_ts = ts;
	if (ts > g->newest_ts)
		g->newest_ts = ts;
	g->bytes += size;
	g->count++;
	g->kind = kind;
	g->est_bytes += (double)size * w;
	g->est_count += w;
	g->var_bytes += (w * w - w) * (double)size * (double)size;
	return g;
}

/* Adds allocation A's leak check verdict to its stack's aggregate G (W:
 * its weight in the estimates). */
static void leak_count(struct ledger_stack *g, const struct alloc_rec *a, double w)
{
	if (!a->leak || a->leak > LEAK_KIND_COUNT)
		return;
	g->checked = true;
	g->leak_bytes[a->leak - 1] += a->size;
	g->leak_count[a->leak - 1]++;
	g->est_leak_bytes[a->leak - 1] += w * (double)a->size;
	g->var_leak_bytes[a->leak - 1] += (w * w - w) * (double)a->size * (double)a->size;
	if (a->leak_unsure) {
		g->unsure_bytes += a->size;
		g->unsure_count++;
	}
	g->resident += a->resident;
	g->swapped += a->swapped;
	g->untouched += a->size - a->resident - a->swapped;
}

/* True when something made at TS is younger than MIN_AGE_NS at NOW. */
static int too_young(uint64_t now, uint64_t ts, uint64_t min_age_ns)
{
	return now > ts && now - ts < min_age_ns;
}

/* A's weight in the estimates: sampled with probability 1 - exp(-size/N),
 * it stands for the inverse of that many (1 without --sample-bytes). */
static double weight_of(const struct alloc_rec *a, uint64_t sample_bytes)
{
	return sample_bytes && a->size ? 1.0 / -expm1(-(double)a->size / (double)sample_bytes) : 1.0;
}

/* Adds the sums S (of another table) into T.  Returns 0 or -ENOMEM. */
static int stacks_add(struct ledger_stacks *t, const struct ledger_stack *s)
{
	struct ledger_stack *g = stacks_get(t, s->stack_id, s->fp_stack_id);
	size_t k;

	if (!g)
		return -ENOMEM;
	if (!g->count || s->oldest_ts < g->oldest_ts)
		g->oldest_ts = s->oldest_ts;
	if (s->newest_ts > g->newest_ts)
		g->newest_ts = s->newest_ts;
	g->bytes += s->bytes;
	g->count += s->count;
	g->kind = s->kind;
	g->est_bytes += s->est_bytes;
	g->est_count += s->est_count;
	g->var_bytes += s->var_bytes;
	g->checked |= s->checked;
	for (k = 0; k < LEAK_KIND_COUNT; k++) {
		g->leak_bytes[k] += s->leak_bytes[k];
		g->leak_count[k] += s->leak_count[k];
		g->est_leak_bytes[k] += s->est_leak_bytes[k];
		g->var_leak_bytes[k] += s->var_leak_bytes[k];
	}
	g->resident += s->resident;
	g->swapped += s->swapped;
	g->untouched += s->untouched;
	return 0;
}

int ledger_seal(struct ledger *l, uint64_t now_ns, uint64_t min_age_ns, uint64_t sample_bytes)
{
	struct ledger_stacks folded = { 0 };
	struct alloc_table young = { 0 };
	const struct alloc_rec *a;
	struct ledger_stack *g;
	double w;
	size_t i;

	if (l->sealed)
		return 0;
	for (i = 0; i < l->allocs.cap; i++) {
		a = &l->allocs.slots[i];
		if (!a->addr)
			continue;
		if (too_young(now_ns, a->ts, min_age_ns)) {
			if (alloc_table_add(&young, a))
				goto fail;
			continue;
		}
		w = weight_of(a, sample_bytes);
		g = stacks_count(&folded, a->stack_id, a->fp_stack_id, a->ts, a->size, a->kind, w);
		if (!g)
			goto fail;
		leak_count(g, a, w);
	}
	/* what the records said that the table could not apply stays counted */
	young.replaced = l->allocs.replaced;
	young.free_unknown = l->allocs.free_unknown;
	young.resized = l->allocs.resized;
	alloc_table_free(&l->allocs);
	l->allocs = young;
	l->folded = folded;
	l->sealed = true;
	return 0;
fail:
	alloc_table_free(&young);
	ledger_stacks_free(&folded);
	return -ENOMEM;
}

void ledger_stack_ids(const struct ledger *l, void (*each)(void *ctx, uint64_t id), void *ctx)
{
	size_t i;

	for (i = 0; i < l->folded.cap; i++) {
		if (!l->folded.slots[i].count)
			continue;
		each(ctx, l->folded.slots[i].stack_id);
		each(ctx, l->folded.slots[i].fp_stack_id);
	}
	for (i = 0; i < l->allocs.cap; i++) {
		if (!l->allocs.slots[i].addr)
			continue;
		each(ctx, l->allocs.slots[i].stack_id);
		each(ctx, l->allocs.slots[i].fp_stack_id);
	}
	for (i = 0; i < l->regions.n; i++) {
		each(ctx, l->regions.r[i].stack_id);
		each(ctx, l->regions.r[i].fp_stack_id);
	}
}

int ledger_aggregate(const struct ledger *l, uint64_t now_ns, uint64_t min_age_ns, uint64_t sample_bytes,
		     struct ledger_stacks *out)
{
	const struct alloc_rec *a;
	const struct mmap_region *r;
	struct ledger_stack *g;
	double w;
	size_t i;

	memset(out, 0, sizeof(*out));
	/* sized at once for as many stacks as there are blocks (at most),
	 * not doubled from 1,024 up through every size between */
	{
		size_t want = 1024, most = l->allocs.n + l->regions.n + l->folded.n;

		while (want < 2 * most && want < ((size_t)1 << 20))
			want *= 2;
		if (want > 1024 && stacks_resize(out, want)) /* few: as they come */
			return -ENOMEM;
	}
	/* an exited process's blocks, folded when it exited */
	for (i = 0; i < l->folded.cap; i++)
		if (l->folded.slots[i].count && stacks_add(out, &l->folded.slots[i]))
			goto fail;
	for (i = 0; i < l->allocs.cap; i++) {
		a = &l->allocs.slots[i];
		if (!a->addr || too_young(now_ns, a->ts, min_age_ns))
			continue;
		w = weight_of(a, sample_bytes);
		g = stacks_count(out, a->stack_id, a->fp_stack_id, a->ts, a->size, a->kind, w);
		if (!g)
			goto fail;
		leak_count(g, a, w);
	}
	/* --mmap regions: one "allocation" each, never sampled */
	for (i = 0; i < l->regions.n; i++) {
		r = &l->regions.r[i];
		if (too_young(now_ns, r->ts, min_age_ns))
			continue;
		if (!stacks_count(out, r->stack_id, r->fp_stack_id, r->ts, r->end - r->start, ALLOC_MMAP, 1.0))
			goto fail;
	}
	return 0;
fail:
	ledger_stacks_free(out);
	return -ENOMEM;
}

void ledger_stacks_free(struct ledger_stacks *s)
{
	free(s->slots);
	memset(s, 0, sizeof(*s));
}
