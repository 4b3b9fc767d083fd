/* Interning byte strings to dense ids (intern.h): an open-addressing hash
 * table of ids over an array of owned copies of the keys. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "intern.h"

/* A hash of N bytes at P, eight at a time (keys are mostly packed ids,
 * addresses and pointers, tens of bytes): each word multiplied in, the
 * result mixed so that its low bits, which pick the slot, depend on all. */
static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;

	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	if (n) {
		w = 0;
		memcpy(&w, p, n);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
	}
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* The slot of KEY (LEN bytes, hash H), or the empty slot where it goes. */
static size_t intern_slot(const struct intern *t, const uint8_t *key, size_t len, uint32_t h)
{
	size_t mask = t->nslots - 1, i = h & mask;

	for (;; i = (i + 1) & mask) {
		const struct islot *s = &t->slots[i];

		if (!s->id)
			return i;
		if (s->hash == h && t->keys[s->id - 1].len == len && !memcmp(t->keys[s->id - 1].bytes, key, len))
			return i;
	}
}

static int intern_grow(struct intern *t)
{
	size_t nslots = t->nslots ? t->nslots * 2 : 64, i, j, mask = nslots - 1;
	struct islot *old = t->slots;
	size_t oldn = t->nslots;

	if (nslots > ((size_t)1 << 32))
		return -ENOMEM;
	t->slots = calloc(nslots, sizeof(*t->slots));
	if (!t->slots) {
		t->slots = old;
		return -ENOMEM;
	}
	t->nslots = nslots;
	/* every key is distinct: its place is the first empty slot from home */
	for (i = 0; i < oldn; i++) {
		if (!old[i].id)
			continue;
		for (j = old[i].hash & mask; t->slots[j].id; j = (j + 1) & mask)
			;
		t->slots[j] = old[i];
	}
	free(old);
	return 0;
}

/* Key copies, packed: a chunk's bytes never move, so KEYS keep pointers. */
struct intern_chunk {
	struct intern_chunk *next;
	uint8_t bytes[];
};

#define INTERN_CHUNK_SIZE ((size_t)64 << 10)

/* Room for LEN bytes (8-aligned) that live until intern_free, or NULL. */
static uint8_t *key_room(struct intern *t, size_t len)
{
	size_t need = (len + 7) & ~(size_t)7;
	uint8_t *p;

	if (need < len)
		return NULL;
	if (!t->chunks || t->chunk_size - t->chunk_used < need) {
		size_t size = need > INTERN_CHUNK_SIZE ? need : INTERN_CHUNK_SIZE;
		struct intern_chunk *c = malloc(sizeof(*c) + size);

		if (!c)
			return NULL;
		c->next = t->chunks;
		t->chunks = c;
		t->chunk_used = 0;
		t->chunk_size = size;
	}
	p = t->chunks->bytes + t->chunk_used;
	t->chunk_used += need;
	return p;
}

long intern_get(struct intern *t, const void *key, size_t len)
{
	size_t slot;
	uint8_t *copy;

	uint32_t h = (uint32_t)hash_bytes(key, len);

	if (!t->nslots && intern_grow(t))
		return -ENOMEM;
	slot = intern_slot(t, key, len, h);
	if (t->slots[slot].id)
		return t->slots[slot].id - 1;
	if ((t->n + 1) * 2 > t->nslots) {
		if (t->n >= UINT32_MAX / 2 || intern_grow(t))
			return -ENOMEM;
		slot = intern_slot(t, key, len, h);
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct ikey *keys = realloc(t->keys, cap * sizeof(*keys));

		if (!keys)
			return -ENOMEM;
		t->keys = keys;
		t->cap = cap;
	}
	copy = key_room(t, len ? len : 1);
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, key, len);
	t->keys[t->n] = (struct ikey){ copy, len };
	t->slots[slot] = (struct islot){ (uint32_t)++t->n, h };
	return (long)t->n - 1;
}

void intern_free(struct intern *t)
{
	while (t->chunks) {
		struct intern_chunk *c = t->chunks;

		t->chunks = c->next;
		free(c);
	}
	free(t->keys);
	free(t->slots);
	*t = (struct intern){ 0 };
}
