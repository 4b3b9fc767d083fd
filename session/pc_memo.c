/* The pcs a report has named for one process (pc_memo.h): open
 * addressing, linear probing, doubled at half full; a key is the pc and
 * whether it was named as a return address, 0 an empty slot. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pc_memo.h"

struct pc_named {
	uint64_t key;
	size_t first;
	size_t n;
};

struct pc_memo {
	struct pc_named *slots;
	size_t cap, len;
};

static uint64_t key_of(uint64_t pc, bool return_addr)
{
	return (pc << 1 | return_addr) + 1;
}

/* The slot of KEY, or the empty one where it goes; NULL without slots. */
static struct pc_named *slot_of(const struct pc_memo *m, uint64_t key)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & (m->cap - 1); m->slots[i].key && m->slots[i].key != key;
	     i = (i + 1) & (m->cap - 1))
		;
	return &m->slots[i];
}

int pc_memo_new(struct pc_memo **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void pc_memo_free(struct pc_memo *m)
{
	if (!m)
		return;
	free(m->slots);
	free(m);
}

void pc_memo_reset(struct pc_memo *m)
{
	if (m->cap)
		memset(m->slots, 0, m->cap * sizeof(*m->slots));
	m->len = 0;
}

bool pc_memo_get(const struct pc_memo *m, uint64_t pc, bool return_addr, size_t *first, size_t *n)
{
	const struct pc_named *s = slot_of(m, key_of(pc, return_addr));

	if (!s || !s->key)
		return false;
	*first = s->first;
	*n = s->n;
	return true;
}

void pc_memo_put(struct pc_memo *m, uint64_t pc, bool return_addr, size_t first, size_t n)
{
	uint64_t key = key_of(pc, return_addr);
	struct pc_named *s;

	if ((m->len + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256, old = m->cap;
		struct pc_named *v = calloc(cap, sizeof(*v)), *o = m->slots;

		if (!v)
			return;
		m->slots = v;
		m->cap = cap;
		for (size_t i = 0; i < old; i++)
			if (o[i].key)
				*slot_of(m, o[i].key) = o[i];
		free(o);
	}
	s = slot_of(m, key);
	if (!s->key)
		m->len++;
	*s = (struct pc_named){ key, first, n };
}
