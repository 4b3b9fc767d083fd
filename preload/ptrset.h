/* The preload library's set of sampled pointers: with --sample-bytes only
 * the frees of sampled blocks may enter the kernel, so every free asks
 * whether its pointer was sampled.  Lock-free (threads, signal handlers
 * and forked children use it, none may block), in memory the caller
 * provides: an open-addressing table of tagged pointers, and in front of
 * it a small counting filter that answers "not sampled" for almost every
 * free without touching the table.
 *
 * Keys carry a 16-bit tag (the tracer's generation): entries of an older
 * tracing session are neither found nor counted, and their slots are
 * reused, so a session never reports the frees of another's samples. */
#ifndef DWLEAK_PRELOAD_PTRSET_H
#define DWLEAK_PRELOAD_PTRSET_H

#include <stdbool.h>
#include <stdint.h>

/* Counters of the filter: 16 KiB, which stays in the first cache levels. */
#define PTRSET_FILTER_BITS 12
/* Slots looked at by one insert before it gives up (the set is then
 * counted as full for that pointer). */
#define PTRSET_MAX_PROBE 256

/*
 * SLOTS: 2^BITS zeroed words; FILTER: 2^PTRSET_FILTER_BITS zeroed words.
 * An entry is a user-space pointer (below 2^48) with its tag in the top 16
 * bits; 0 is an empty slot, PTRSET_TOMB a removed one (never a key: no
 * pointer is 2^48 - 1).  Invariant: no empty slot lies between a key's
 * home slot and the slot holding it (removal leaves a tombstone), so a
 * lookup stops at the first empty slot; and none lies further than
 * MAX_PROBE slots from its home.  Filter word: tag << 16 | count of the
 * entries of that tag hashing there (saturating).
 */
struct ptrset {
	uint64_t *slots;
	uint32_t *filter;
	uint32_t bits;
	uint32_t max_probe; /* the longest distance from home any insert went */
};

#define PTRSET_TOMB (~0ull)

/* Sets S over the caller's zeroed memory: SLOTS (2^BITS words, BITS in
 * 4..30) and FILTER (2^PTRSET_FILTER_BITS words). */
void ptrset_init(struct ptrset *s, uint64_t *slots, uint32_t bits, uint32_t *filter);

/* Adds pointer P (not NULL, below 2^48) under TAG.  Returns 0, or -1 when
 * no slot was free within PTRSET_MAX_PROBE (nothing added). */
int ptrset_insert(struct ptrset *s, uint64_t p, uint16_t tag);

/* Removes P under TAG.  Returns true when it was there. */
bool ptrset_take(struct ptrset *s, uint64_t p, uint16_t tag);

static inline uint32_t ptrset_filter_slot(uint64_t p)
{
	return (uint32_t)(((p >> 4) * 0xff51afd7ed558ccdull) >> (64 - PTRSET_FILTER_BITS));
}

/* False when P is certainly not in S under TAG: one load, the common case
 * of a free in a sampled process.  True means "look in the table". */
static inline bool ptrset_maybe(const struct ptrset *s, uint64_t p, uint16_t tag)
{
	uint32_t w = __atomic_load_n(&s->filter[ptrset_filter_slot(p)], __ATOMIC_RELAXED);

	return (w >> 16) == tag && (w & 0xffff);
}

#endif
