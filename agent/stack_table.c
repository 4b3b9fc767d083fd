/* --max-stacks: a hash table of stacks (open addressing, linear probing,
 * backward-shift deletion) over a slab of entries whose indices never
 * move, so the recency list can link them by index; eviction takes the
 * list's head and folds it into [evicted]. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "stack_table.h"

#define NIL UINT32_MAX

/* A slab slot: an entry and its links in the recency list (least recently
 * grown at the head), or a free slot chained through NEXT. */
struct slot {
	struct stack_table_entry e;
	uint32_t prev, next;
};

/*
 * Invariants: every used slab slot is in the recency list and in the hash
 * index exactly once; HASH[i] is 0 (empty) or a slab index + 1; the index
 * is at most half full; N <= MAX when MAX is set; EVICTED holds what was
 * folded in and not yet taken away.
 */
struct stack_table {
	size_t max;
	void (*on_evict)(void *ctx, uint64_t key);
	void *ctx;
	struct slot *slab;
	uint32_t slab_cap, slab_used, free_head;
	uint32_t *hash;
	size_t hash_cap; /* a power of two */
	size_t n;
	uint32_t head, tail;
	struct stack_table_evicted evicted;
};

static size_t home(const struct stack_table *t, uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & (t->hash_cap - 1);
}

int stack_table_new(size_t max, void (*on_evict)(void *ctx, uint64_t key), void *ctx,
		    struct stack_table **out)
{
	struct stack_table *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->max = max;
	t->on_evict = on_evict;
	t->ctx = ctx;
	t->hash_cap = 64;
	t->hash = calloc(t->hash_cap, sizeof(*t->hash));
	if (!t->hash) {
		free(t);
		return -ENOMEM;
	}
	t->head = t->tail = t->free_head = NIL;
	*out = t;
	return 0;
}

void stack_table_free(struct stack_table *t)
{
	if (!t)
		return;
	free(t->slab);
	free(t->hash);
	free(t);
}

/* The hash slot holding KEY, or the empty slot where it would go. */
static size_t find(const struct stack_table *t, uint64_t key)
{
	size_t i = home(t, key);

	while (t->hash[i] && t->slab[t->hash[i] - 1].e.key != key)
		i = (i + 1) & (t->hash_cap - 1);
	return i;
}

static int hash_grow(struct stack_table *t)
{
	size_t cap = t->hash_cap * 2, old_cap = t->hash_cap;
	uint32_t *old = t->hash, *h = calloc(cap, sizeof(*h));

	if (!h)
		return -ENOMEM;
	t->hash = h;
	t->hash_cap = cap;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i])
			t->hash[find(t, t->slab[old[i] - 1].e.key)] = old[i];
	free(old);
	return 0;
}

/* Backward-shift deletion of hash slot I: later entries of the same probe
 * run move up so that no lookup meets a hole before its key. */
static void hash_remove(struct stack_table *t, size_t i)
{
	size_t mask = t->hash_cap - 1, j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & mask;
		if (!t->hash[j])
			break;
		k = home(t, t->slab[t->hash[j] - 1].e.key);
		/* the entry at J may fill I unless its home lies cyclically in (I, J] */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		t->hash[i] = t->hash[j];
		i = j;
	}
	t->hash[i] = 0;
}

static void list_unlink(struct stack_table *t, uint32_t s)
{
	struct slot *x = &t->slab[s];

	if (x->prev != NIL)
		t->slab[x->prev].next = x->next;
	else
		t->head = x->next;
	if (x->next != NIL)
		t->slab[x->next].prev = x->prev;
	else
		t->tail = x->prev;
}

static void list_append(struct stack_table *t, uint32_t s)
{
	struct slot *x = &t->slab[s];

	x->prev = t->tail;
	x->next = NIL;
	if (t->tail != NIL)
		t->slab[t->tail].next = s;
	else
		t->head = s;
	t->tail = s;
}

/* Removes the entry in hash slot I (slab slot S) from everything. */
static void entry_remove(struct stack_table *t, size_t i, uint32_t s)
{
	hash_remove(t, i);
	list_unlink(t, s);
	t->slab[s].next = t->free_head;
	t->free_head = s;
	t->n--;
}

/* Folds the least recently grown entry into [evicted]. */
static void evict_one(struct stack_table *t)
{
	uint32_t s = t->head;
	struct stack_table_entry e = t->slab[s].e;

	entry_remove(t, find(t, e.key), s);
	t->evicted.bytes += e.bytes;
	t->evicted.allocations += e.allocations;
	t->evicted.stacks++;
	if (t->on_evict)
		t->on_evict(t->ctx, e.key);
}

/* A free slab slot, or NIL on -ENOMEM. */
static uint32_t slot_take(struct stack_table *t)
{
	uint32_t s;

	if (t->free_head != NIL) {
		s = t->free_head;
		t->free_head = t->slab[s].next;
		return s;
	}
	if (t->slab_used == t->slab_cap) {
		uint32_t cap = t->slab_cap ? t->slab_cap * 2 : 64;
		struct slot *v;

		if (cap >= NIL || !(v = realloc(t->slab, (size_t)cap * sizeof(*v))))
			return NIL;
		t->slab = v;
		t->slab_cap = cap;
	}
	return t->slab_used++;
}

int stack_table_add(struct stack_table *t, uint64_t key, uint64_t bytes, uint64_t allocations)
{
	size_t i = find(t, key);
	uint32_t s;

	if (t->hash[i]) {
		s = t->hash[i] - 1;
		t->slab[s].e.bytes += bytes;
		t->slab[s].e.allocations += allocations;
		list_unlink(t, s);
		list_append(t, s);
		return 0;
	}
	if ((t->n + 1) * 2 > t->hash_cap) {
		if (hash_grow(t))
			return -ENOMEM;
	}
	s = slot_take(t);
	if (s == NIL)
		return -ENOMEM;
	/* room first, so that the new entry is not the one evicted */
	if (t->max && t->n == t->max)
		evict_one(t);
	t->slab[s].e = (struct stack_table_entry){ key, bytes, allocations };
	t->hash[find(t, key)] = s + 1;
	list_append(t, s);
	t->n++;
	return 0;
}

static uint64_t take(uint64_t *from, uint64_t *amount)
{
	uint64_t k = *from < *amount ? *from : *amount;

	*from -= k;
	*amount -= k;
	return k;
}

uint64_t stack_table_sub(struct stack_table *t, uint64_t key, uint64_t bytes, uint64_t allocations)
{
	size_t i = find(t, key);

	if (t->hash[i]) {
		uint32_t s = t->hash[i] - 1;
		struct stack_table_entry *e = &t->slab[s].e;

		take(&e->bytes, &bytes);
		take(&e->allocations, &allocations);
		if (!e->allocations && !e->bytes)
			entry_remove(t, i, s);
	}
	take(&t->evicted.bytes, &bytes);
	take(&t->evicted.allocations, &allocations);
	return bytes;
}

size_t stack_table_count(const struct stack_table *t)
{
	return t->n;
}

const struct stack_table_entry *stack_table_get(const struct stack_table *t, uint64_t key)
{
	size_t i = find(t, key);

	return t->hash[i] ? &t->slab[t->hash[i] - 1].e : NULL;
}

int stack_table_entries(const struct stack_table *t, struct stack_table_entry **out, size_t *n)
{
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!t->n)
		return 0;
	*out = malloc(t->n * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (uint32_t s = t->head; s != NIL; s = t->slab[s].next)
		(*out)[k++] = t->slab[s].e;
	*n = k;
	return 0;
}

void stack_table_evicted(const struct stack_table *t, struct stack_table_evicted *out)
{
	*out = t->evicted;
}

void stack_table_evicted_stack(const struct stack_table_evicted *e, int pid, struct report_stack *out)
{
	static const struct report_frame frame = { .function = STACK_TABLE_EVICTED_NAME };

	*out = (struct report_stack){
		.bytes = e->bytes, .allocations = e->allocations, .frames = &frame, .nframes = 1,
		.fp_divergence = -1, .oldest_age_s = NAN, .growth_bytes_per_s = NAN, .pid = pid,
	};
}
