/* The preload library's index of every live heap block, address and
 * size, kept inside the traced process so that dwleak's leak check can
 * read it out of a snapshot and know each block exactly, even when only a
 * sample of the allocations reached dwleak with a stack.  Every malloc and
 * free passes through it: lock-free (threads, signal handlers and forked
 * children use it, none may block), no allocation (the library is the
 * allocator's caller), memory by mmap only, a few nanoseconds per call.
 *
 * The whole state is the header dwleak reads (bpf/abi/blockset_abi.h):
 * levels of open-addressing tables of (address, size) slots, linear
 * probing from a hash of the address, growing by levels twice as large,
 * mapped on first use, so that no fixed capacity drops a block silently;
 * only a level that cannot be mapped loses one, counted. */
#ifndef DWLEAK_PRELOAD_BLOCKSET_H
#define DWLEAK_PRELOAD_BLOCKSET_H

#include <stdint.h>

#include "blockset_abi.h"

/* Slots an insert looks at in one level before it tries another, and so
 * the most a lookup looks at there: 8 cache lines, what a remove costs at
 * worst per level.  Tombstones do not lengthen inserts (they are reused),
 * only lookups of an address a level does not hold, which stop at an
 * EMPTY slot or at the farthest any insert went in that level. */
#define BLOCKSET_MAX_PROBE 32

/* Level 0's slot count in the library: 2^16 slots, 1 MiB. */
#define BLOCKSET_FIRST_BITS 16

/*
 * The set.  Invariants: in each level, no EMPTY slot lies between a
 * block's home slot and the slot holding it (a removal leaves a
 * tombstone, never EMPTY), so a lookup stops at the first EMPTY slot; no
 * block lies farther than level[i].max_probe slots from its home, and
 * max_probe is raised before the insert returns; every block is in a
 * level at most TOP, which is raised before an insert uses a new level;
 * an address is in the set once at most (the allocator hands it out
 * again only after it was removed).
 */
struct blockset {
	struct blockset_abi_header abi;
} __attribute__((aligned(64)));

/* A set of no level yet, for a static variable (the library's: it must
 * be usable before any constructor runs).  FIRST_BITS and LEVELS as for
 * blockset_init. */
#define BLOCKSET_INITIALIZER(first_bits_, levels_)                                                      \
	{                                                                                               \
		.abi = {                                                                                \
			.magic = BLOCKSET_ABI_MAGIC,                                                    \
			.version = BLOCKSET_ABI_VERSION,                                                \
			.slot_size = sizeof(struct blockset_abi_slot),                                  \
			.levels = (levels_),                                                            \
			.first_bits = (first_bits_),                                                    \
		}                                                                                       \
	}

/*
 * Sets S up with no level mapped: level 0 will have 2^FIRST_BITS slots,
 * level I 2^(FIRST_BITS + I), and at most LEVELS levels are mapped.
 * Returns 0, or -EINVAL when FIRST_BITS is below BLOCKSET_ABI_BITS_MIN,
 * LEVELS not in 1..BLOCKSET_ABI_LEVELS, or the last level would have more
 * than 2^BLOCKSET_ABI_BITS_MAX slots.  S must not be in use.
 */
int blockset_init(struct blockset *s, uint32_t first_bits, uint32_t levels);

/*
 * Adds block ADDR (at least BLOCKSET_ABI_ADDR_MIN, not in S) of SIZE
 * bytes.  Returns 0, or -1 when no level had a free slot near ADDR's
 * home and none more could be mapped (counted in S->abi.lost; nothing
 * added).  May map a level (mmap, errno kept).
 */
int blockset_insert(struct blockset *s, uint64_t addr, uint64_t size);

/*
 * Removes block ADDR and returns the size it was inserted with; 0 when
 * ADDR was not in S (counted in S->abi.absent), which a block of size 0
 * also returns: a caller that must tell them apart looks at the count.
 */
uint64_t blockset_remove(struct blockset *s, uint64_t addr);

/*
 * Unmaps every level of S and leaves it as blockset_init did (for tests:
 * the library never destroys its set, which outlives every thread).  S
 * must not be in use.
 */
void blockset_reset(struct blockset *s);

#endif
