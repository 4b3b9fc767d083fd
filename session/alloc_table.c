/* Outstanding allocations by address: linear probing, kept at most 3/4
 * full, and removal by shifting later entries back (no tombstones), so a
 * long trace of malloc/free churn never slows lookups down. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_table.h"

static size_t slot_of(const struct alloc_table *t, uint64_t addr)
{
	/* allocator addresses share their low bits: mix before masking */
	addr ^= addr >> 33;
	addr *= 0xff51afd7ed558ccdull;
	addr ^= addr >> 33;
	return (size_t)addr & (t->cap - 1);
}

static int table_grow(struct alloc_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024, i, j;
	struct alloc_rec *old = t->slots, *slots;

	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	t->slots = slots;
	for (i = 0, j = t->cap, t->cap = cap; i < j; i++) {
		size_t k;

		if (!old[i].addr)
			continue;
		for (k = slot_of(t, old[i].addr); slots[k].addr; k = (k + 1) & (cap - 1))
			;
		slots[k] = old[i];
	}
	free(old);
	return 0;
}

/* The slot holding ADDR, or the empty slot where it would go. */
static size_t slot_find(const struct alloc_table *t, uint64_t addr)
{
	size_t k;

	for (k = slot_of(t, addr); t->slots[k].addr && t->slots[k].addr != addr; k = (k + 1) & (t->cap - 1))
		;
	return k;
}

static void log_change(struct alloc_table *t, uint64_t addr)
{
	struct alloc_table_log *l = &t->log;

	if (!l->on || l->lost)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		uint64_t *a = realloc(l->addrs, cap * sizeof(*a));

		if (!a) {
			l->lost = true;
			return;
		}
		l->addrs = a;
		l->cap = cap;
	}
	l->addrs[l->n++] = addr;
}

void alloc_table_log_start(struct alloc_table *t)
{
	t->log.n = 0;
	t->log.lost = false;
	t->log.on = true;
}

void alloc_table_log_stop(struct alloc_table *t)
{
	t->log.on = false;
}

int alloc_table_add(struct alloc_table *t, const struct alloc_rec *rec)
{
	size_t k;

	if ((t->n + 1) * 4 > t->cap * 3 && table_grow(t))
		return -ENOMEM;
	k = slot_find(t, rec->addr);
	if (t->slots[k].addr) {
		t->replaced++; /* its free went by a path we do not see */
		log_change(t, rec->addr);
	} else
		t->n++;
	t->slots[k] = *rec;
	return 0;
}

struct alloc_rec *alloc_table_get(struct alloc_table *t, uint64_t addr)
{
	return (struct alloc_rec *)alloc_table_find(t, addr);
}

const struct alloc_rec *alloc_table_find(const struct alloc_table *t, uint64_t addr)
{
	size_t k;

	if (!t->cap || !addr)
		return NULL;
	k = slot_find(t, addr);
	return t->slots[k].addr ? &t->slots[k] : NULL;
}

int alloc_table_remove(struct alloc_table *t, uint64_t addr)
{
	size_t k, j, home, mask = t->cap - 1;

	if (!alloc_table_find(t, addr)) {
		t->free_unknown++;
		return -ENOENT;
	}
	log_change(t, addr);
	k = slot_find(t, addr);
	/* shift back every later entry of the run that may sit in k's place */
	for (j = (k + 1) & mask; t->slots[j].addr; j = (j + 1) & mask) {
		home = slot_of(t, t->slots[j].addr);
		/* entry j may move to k unless its home lies cyclically in (k, j] */
		if (((j - home) & mask) >= ((j - k) & mask)) {
			t->slots[k] = t->slots[j];
			k = j;
		}
	}
	memset(&t->slots[k], 0, sizeof(t->slots[k]));
	t->n--;
	return 0;
}

int alloc_table_resize(struct alloc_table *t, uint64_t addr, uint64_t size)
{
	struct alloc_rec *r = (struct alloc_rec *)alloc_table_find(t, addr);

	if (!r)
		return -ENOENT;
	log_change(t, addr);
	r->size = size;
	t->resized++;
	return 0;
}

void alloc_table_free(struct alloc_table *t)
{
	free(t->log.addrs);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
