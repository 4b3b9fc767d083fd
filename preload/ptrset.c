/* The lock-free set of sampled pointers (see ptrset.h): compare-and-swap
 * on 8-byte slots and 4-byte filter words, nothing else; no allocation,
 * no system call, safe in signal handlers and forked children. */
#include "ptrset.h"

#define KEY_MASK ((1ull << 48) - 1)

static inline uint64_t key_of(uint64_t p, uint16_t tag)
{
	return (p & KEY_MASK) | (uint64_t)tag << 48;
}

static inline uint64_t home_of(const struct ptrset *s, uint64_t p)
{
	return ((p >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - s->bits);
}

void ptrset_init(struct ptrset *s, uint64_t *slots, uint32_t bits, uint32_t *filter)
{
	s->slots = slots;
	s->filter = filter;
	s->bits = bits;
	s->max_probe = 0;
}

/* Adds D (+1 or -1) to the filter count of P's word under TAG.  A word
 * of another tag is stale: an increment starts it over at 1 for TAG, a
 * decrement leaves it (its entries are not TAG's).  A count saturated at
 * 0xffff is never decremented again: it stays "maybe". */
static void filter_add(struct ptrset *s, uint64_t p, uint16_t tag, int d)
{
	uint32_t *w = &s->filter[ptrset_filter_slot(p)];
	uint32_t old = __atomic_load_n(w, __ATOMIC_RELAXED), want;

	do {
		if ((old >> 16) != tag)
			want = d > 0 ? (uint32_t)tag << 16 | 1 : old;
		else if ((old & 0xffff) == 0xffff || (d < 0 && !(old & 0xffff)))
			want = old;
		else
			want = old + (uint32_t)d;
		if (want == old)
			return;
	} while (!__atomic_compare_exchange_n(w, &old, want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

static void max_probe_raise(struct ptrset *s, uint32_t d)
{
	uint32_t old = __atomic_load_n(&s->max_probe, __ATOMIC_RELAXED);

	while (d > old &&
	       !__atomic_compare_exchange_n(&s->max_probe, &old, d, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

int ptrset_insert(struct ptrset *s, uint64_t p, uint16_t tag)
{
	uint64_t mask = (1ull << s->bits) - 1, i = home_of(s, p), key = key_of(p, tag), cur;
	uint32_t d;

	/* the filter first: a free of P, which can only follow this insert,
	 * then never misses it */
	filter_add(s, p, tag, 1);
	for (d = 0; d < PTRSET_MAX_PROBE && d <= mask; d++, i = (i + 1) & mask) {
		cur = __atomic_load_n(&s->slots[i], __ATOMIC_RELAXED);
		/* free: empty, removed, or an older session's entry */
		while (cur == 0 || cur == PTRSET_TOMB || (cur >> 48) != tag) {
			if (__atomic_compare_exchange_n(&s->slots[i], &cur, key, false, __ATOMIC_RELEASE,
							__ATOMIC_RELAXED)) {
				max_probe_raise(s, d);
				return 0;
			}
		}
	}
	filter_add(s, p, tag, -1);
	return -1;
}

bool ptrset_take(struct ptrset *s, uint64_t p, uint16_t tag)
{
	uint64_t mask = (1ull << s->bits) - 1, i = home_of(s, p), key = key_of(p, tag), cur;
	uint32_t d, limit = __atomic_load_n(&s->max_probe, __ATOMIC_RELAXED);

	for (d = 0; d <= limit && d <= mask; d++, i = (i + 1) & mask) {
		cur = __atomic_load_n(&s->slots[i], __ATOMIC_ACQUIRE);
		if (cur == 0)
			return false; /* the end of every chain through here */
		if (cur != key)
			continue;
		/* P is live once at most (the allocator hands it out again only
		 * after this free), so no other thread removes it meanwhile */
		if (__atomic_compare_exchange_n(&s->slots[i], &cur, PTRSET_TOMB, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED)) {
			filter_add(s, p, tag, -1);
			return true;
		}
	}
	return false;
}
