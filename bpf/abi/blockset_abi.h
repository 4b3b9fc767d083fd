/* The layout of the preload library's index of live blocks (preload/blockset.c),
 * which dwleak decodes out of a snapshot of the process (target/blockset_read.c):
 * a contract between the library, which writes it, and dwleak, which reads
 * it as untrusted bytes.  Fixed-width types only; every struct's size is
 * asserted.  Include-only, a leaf. */
#ifndef DWLEAK_BLOCKSET_ABI_H
#define DWLEAK_BLOCKSET_ABI_H

#include <linux/types.h>

/*
 * How dwleak finds it: the control block's index_addr (preload.h) holds
 * the address of the library's struct blockset_abi_header, and its
 * index_request says whether the library keeps it.  dwleak reads the
 * header at that address, then each level's slots, out of the
 * copy-on-write snapshot of the process (target/snapshot.c), never from
 * the running process, whose threads change it as they allocate.
 *
 * The index: levels of open-addressing tables of slots, each level twice
 * the size of the one before, mapped (private anonymous memory of its
 * own, page-aligned, neither MADV_DONTFORK nor MADV_WIPEONFORK, so a
 * snapshot and a fork's child hold it) the first time an insert finds
 * every level crowded around its block.  Levels are mapped in order:
 * level I + 1 only after level I, so the mapped ones are a prefix of
 * level[].
 */
#define BLOCKSET_ABI_MAGIC 0x736b6c626b6c7764ull /* "dwlkblks", little-endian */
#define BLOCKSET_ABI_VERSION 1

/* The most levels a set has: 2^(first_bits + 23) slots in the last,
 * which no process maps. */
#define BLOCKSET_ABI_LEVELS 24
/* Bounds of a level's slot count, 2^bits. */
#define BLOCKSET_ABI_BITS_MIN 4
#define BLOCKSET_ABI_BITS_MAX 40

/*
 * A slot's ADDR: a block's address, or one of three markers, all below
 * BLOCKSET_ABI_ADDR_MIN (the first page, which no block lies in):
 *   EMPTY  never used since the level was mapped (its memory's zero)
 *   TOMB   held a block that was removed; reused by later inserts
 *   BUSY   taken by an insert that has not yet written the block: a
 *          thread stopped (or forked away from) between the two writes;
 *          in a fork's child, left so for good
 * A block's end (ADDR + SIZE) is at most BLOCKSET_ABI_ADDR_END, the end
 * of x86-64's user address space with 5-level paging.
 */
#define BLOCKSET_ABI_EMPTY 0ull
#define BLOCKSET_ABI_TOMB 1ull
#define BLOCKSET_ABI_BUSY 2ull
#define BLOCKSET_ABI_ADDR_MIN 4096ull
#define BLOCKSET_ABI_ADDR_END (1ull << 56)

/*
 * One slot.  The library writes SIZE before ADDR (a release store), so
 * whoever sees a block's address sees its size.  It inserts a block after
 * the allocator returned it and removes it before handing it back, so the
 * index holds each live block at most once and no two blocks in it
 * overlap; a block whose insert failed is counted (header.lost), and
 * blocks allocated before the library was loaded are not in it.  SIZE is
 * the size asked for (0 for malloc(0), whose address is still a block).
 */
struct blockset_abi_slot {
	__u64 addr;
	__u64 size;
};

_Static_assert(sizeof(struct blockset_abi_slot) == 16, "blockset_abi_slot layout");

/* One level: 2^BITS slots at SLOTS (16-byte aligned; page-aligned as the
 * library maps them), or SLOTS 0 while not mapped.  The library writes
 * BITS (first_bits + the level's index) before it publishes SLOTS. */
struct blockset_abi_level {
	__u64 slots;
	__u32 bits;
	__u32 max_probe; /* the farthest from its home slot an insert put a block (the
			  * library's bound for lookups; not needed to decode) */
};

_Static_assert(sizeof(struct blockset_abi_level) == 16, "blockset_abi_level layout");

/*
 * The header: the library's own variable (in its writable data, aligned
 * to 64 bytes), so it exists before the first allocation.  The first
 * cache line is read by every insert and written once; level[] changes
 * when a level is mapped; the counters have a line of their own, written
 * by any thread, rarely.
 */
struct blockset_abi_header {
	__u64 magic;	  /* BLOCKSET_ABI_MAGIC */
	__u32 version;	  /* BLOCKSET_ABI_VERSION */
	__u32 slot_size;  /* sizeof(struct blockset_abi_slot) */
	__u32 levels;	  /* entries of level[] the set may map, 1..BLOCKSET_ABI_LEVELS */
	__u32 first_bits; /* level 0 has 2^first_bits slots; first_bits + levels - 1
			   * is at most BLOCKSET_ABI_BITS_MAX */
	__u32 top;	  /* the newest level mapped, where inserts go (0 before any) */
	__u32 session;	  /* the control block's index_gen (preload.h) this index was made
			   * for: dwleak takes an index of another session as empty */
	__u64 pad1[4];
	struct blockset_abi_level level[BLOCKSET_ABI_LEVELS];
	/* counters (relaxed) */
	__u64 lost;	  /* inserts no level could take: blocks the index lacks */
	__u64 absent;	  /* removes of an address the index did not hold (a block
			   * from before the library, or one lost) */
	__u64 pad2[6];
};

_Static_assert(sizeof(struct blockset_abi_header) == 512, "blockset_abi_header layout");
_Static_assert(__builtin_offsetof(struct blockset_abi_header, level) == 64, "level[] on its own lines");
_Static_assert(__builtin_offsetof(struct blockset_abi_header, lost) == 448, "counters on their own line");

#endif
