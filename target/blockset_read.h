/* The preload library's index of live blocks (bpf/abi/blockset_abi.h), as
 * dwleak reads it out of a process's memory (a snapshot's copy): every
 * block the index holds, and the memory the index itself occupies, which
 * the leak check must not scan as roots (it holds every block's address).
 * The bytes are the process's, so untrusted: everything is checked and
 * bounded, and a corrupt index is an error, never a crash or a guess.
 * Pure apart from the read callback; fuzzed (fuzz_blockset). */
#ifndef DWLEAK_BLOCKSET_READ_H
#define DWLEAK_BLOCKSET_READ_H

#include <stddef.h>
#include <stdint.h>

#include "blockset_abi.h"

/* Reads LEN bytes of the process's memory at ADDR into BUF: 0, or a
 * negative errno (all of it or nothing). */
typedef int (*blockset_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

/* The most slots one index may have over all its levels: 2^32, 64 GiB of
 * slots for at most 4 billion blocks, more than a process can hold. */
#define BLOCKSET_READ_SLOTS_MAX (1ull << 32)

/* Slots read per call of the callback: 64 KiB. */
#define BLOCKSET_READ_CHUNK 4096

struct blockset_block {
	uint64_t addr;
	uint64_t size;
};

/* [start, end) of the process's memory. */
struct blockset_range {
	uint64_t start;
	uint64_t end;
};

/* What one level's slots held. */
struct blockset_level_count {
	uint64_t slots;	    /* 2^bits */
	uint64_t blocks;    /* holding a block */
	uint64_t tombs;	    /* removed blocks' (they lengthen lookups of absent addresses) */
	uint64_t busy;	    /* mid-insert (a stopped thread's), or stranded by a fork */
	uint32_t max_probe; /* as the library wrote it */
};

struct blockset_index {
	/* every block, sorted by address, no two overlapping (a block of size
	 * 0 counts as one byte); malloc'd, NULL when there are none */
	struct blockset_block *blocks;
	size_t n_blocks;
	/* the index's own memory: the header, then each level's slots */
	struct blockset_range ranges[1 + BLOCKSET_ABI_LEVELS];
	size_t n_ranges;
	uint32_t levels; /* mapped */
	struct blockset_level_count level[BLOCKSET_ABI_LEVELS];
	/* the header's counters: blocks the library could not insert (the
	 * index lacks them), removes of addresses it did not hold */
	uint64_t lost;
	uint64_t absent;
	uint32_t session; /* the header's: the control block's index_gen it was made for */
	/* why the read failed, for a message: "" on success */
	char why[128];
};

/*
 * Decodes the index whose header (struct blockset_abi_header) is at
 * HEADER in the memory READ_MEM (with CTX) reads.  Fills *OUT (free its
 * blocks with blockset_index_free, also after a failure).  Returns 0 or a
 * negative errno, OUT->why saying what was wrong:
 *   the callback's error  a read failed (the header or a level's slots)
 *   -EPROTO        not an index of this layout (magic, version, slot size)
 *   -EBADMSG       a corrupt index: a level count, bits, address or order
 *                  out of bounds, ranges that overlap, a slot holding a
 *                  marker that is none or a block out of the address space,
 *                  blocks that overlap each other or the index
 *   -EFBIG         more than BLOCKSET_READ_SLOTS_MAX slots
 *   -ENOMEM
 * Reads the header once and each mapped level's slots once, in chunks of
 * BLOCKSET_READ_CHUNK slots; allocates one chunk and the array of blocks,
 * grown by doubling as blocks are found (never beyond the slots read), and
 * qsort may take a copy of it.
 */
int blockset_read(blockset_read_fn read_mem, void *ctx, uint64_t header, struct blockset_index *out);

/* Frees IX's blocks (IX itself is the caller's); NULL is fine. */
void blockset_index_free(struct blockset_index *ix);

#endif
