/* Interning byte strings to dense ids (intern.h): an open-addressing hash
 * table of ids over an array of owned copies of the keys. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constants.h"
#include "intern.h"

/* FNV-1a. */
static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = FNV64_OFFSET;

	while (n--) {
		h ^= *p++;
		h *= FNV64_PRIME;
	}
	return h;
}

static size_t intern_slot(const struct intern *t, const uint8_t *key, size_t len)
{
	size_t mask = t->nslots - 1, i = hash_bytes(key, len) & mask;

	for (;; i = (i + 1) & mask) {
		uint32_t s = t->slots[i];

		if (!s)
			return i;
		if (t->keys[s - 1].len == len && !memcmp(t->keys[s - 1].bytes, key, len))
			return i;
	}
}

static int intern_grow(struct intern *t)
{
	size_t nslots = t->nslots ? t->nslots * 2 : 64, i;
	uint32_t *old = t->slots;
	size_t oldn = t->nslots;

	t->slots = calloc(nslots, sizeof(*t->slots));
	if (!t->slots) {
		t->slots = old;
		return -ENOMEM;
	}
	t->nslots = nslots;
	for (i = 0; i < oldn; i++) {
		if (old[i]) {
			const struct ikey *k = &t->keys[old[i] - 1];

			t->slots[intern_slot(t, k->bytes, k->len)] = old[i];
		}
	}
	free(old);
	return 0;
}

long intern_get(struct intern *t, const void *key, size_t len)
{
	size_t slot;
	uint8_t *copy;

	if (!t->nslots && intern_grow(t))
		return -ENOMEM;
	slot = intern_slot(t, key, len);
	if (t->slots[slot])
		return t->slots[slot] - 1;
	if ((t->n + 1) * 2 > t->nslots) {
		if (t->n >= UINT32_MAX / 2 || intern_grow(t))
			return -ENOMEM;
		slot = intern_slot(t, key, len);
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct ikey *keys = realloc(t->keys, cap * sizeof(*keys));

		if (!keys)
			return -ENOMEM;
		t->keys = keys;
		t->cap = cap;
	}
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, key, len);
	t->keys[t->n] = (struct ikey){ copy, len };
	t->slots[slot] = (uint32_t)++t->n;
	return (long)t->n - 1;
}

void intern_free(struct intern *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->keys[i].bytes);
	free(t->keys);
	free(t->slots);
	*t = (struct intern){ 0 };
}
