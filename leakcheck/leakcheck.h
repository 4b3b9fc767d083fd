/* The leak check's algorithm, memcheck's classification on a live process:
 * given the tracked blocks, it is handed the target's memory chunk by
 * chunk while the target is stopped (leakcheck_scan only records which
 * words point into which blocks), and classifies every block after the
 * target runs again (leakcheck_classify).  A leaf: no process, no I/O, so
 * it is unit-tested on synthetic memory. */
#ifndef DWLEAK_LEAKCHECK_H
#define DWLEAK_LEAKCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The four kinds of SPEC.md's leak check, memcheck's names for them; one
 * list: X(enum, name in reports). */
#define LEAK_KIND_LIST(X)                                                                       \
	/* a pointer to its start from a root or from a reachable block */                     \
	X(LEAK_REACHABLE, "reachable")                                                          \
	/* reached, but some link of every chain to it is an interior pointer */               \
	X(LEAK_POSSIBLY_LOST, "possibly_lost")                                                  \
	/* not reached, pointed to only from lost blocks */                                     \
	X(LEAK_INDIRECTLY_LOST, "indirectly_lost")                                              \
	/* not reached, no pointer from another lost block (or the one block of a */          \
	/* lost cycle that memcheck's clique rule picks) */                                     \
	X(LEAK_DEFINITELY_LOST, "definitely_lost")

#define LEAK_KIND_ENUM(e, name) e,
enum leak_kind {
	LEAK_KIND_LIST(LEAK_KIND_ENUM)
	LEAK_KIND_COUNT,
};
#undef LEAK_KIND_ENUM

/* "reachable", ... as SPEC.md's JSON spells them; NULL for no kind. */
const char *leak_kind_name(enum leak_kind kind);

/* One tracked allocation: [addr, addr + size).  A zero-size block (malloc(0))
 * still has an address that a pointer can hold: it counts as one byte for
 * pointers into it, as memcheck's find_chunk_for does. */
struct leak_block {
	uint64_t addr;
	uint64_t size;
};

/* The most blocks one check takes: block numbers are 31 bits in the edges
 * (the 32nd tells start from interior pointers). */
#define LEAKCHECK_MAX_BLOCKS ((size_t)INT32_MAX)

/* What the scan saw, for the report's totals and for --stats. */
struct leakcheck_scan_stats {
	uint64_t scanned_bytes;	 /* whole aligned words handed to leakcheck_scan, x 8 */
	uint64_t edge_bytes;	 /* bytes of chunks too short to hold one whole aligned word
				    at their ends: not scanned (chunks split off 8-byte bounds) */
	uint64_t skipped_bytes;	 /* of scanned_bytes, outside every block in memory scanned
				    by leakcheck_scan_blocks: not roots */
	uint64_t unsure_bytes;	 /* of scanned_bytes, outside every block in memory scanned
				    by leakcheck_scan_unsure */
	uint64_t tail_bytes;	 /* of scanned_bytes, words across a block's end: its last
				    bytes and the allocator's slack after them, no pointer */
	uint64_t values;	 /* leakcheck_scan_value calls (registers) */
	uint64_t root_hits;	 /* words outside every block that point into one */
	uint64_t edges;		 /* block-to-block pointers kept (self and repeats dropped) */
	uint64_t overlapping;	 /* blocks that overlap the one below them: the tracer missed
				    a free; the lower one is cut at the upper one's start */
};

/* Totals per kind, indexed by enum leak_kind; of all, the unsure ones. */
struct leakcheck_totals {
	uint64_t bytes[LEAK_KIND_COUNT];
	uint64_t blocks[LEAK_KIND_COUNT];
	uint64_t unsure_bytes;
	uint64_t unsure_blocks;
};

/* One block's verdict after leakcheck_classify. */
struct leak_verdict {
	enum leak_kind kind;
	/* LEAK_DEFINITELY_LOST: bytes of the blocks indirectly lost through this
	 * one (its clique, memcheck's "N (D direct, I indirect) bytes"); else 0 */
	uint64_t indirect_bytes;
	/* LEAK_INDIRECTLY_LOST: the caller's index of the lost block whose
	 * pointer reached it first (its parent in the clique); else SIZE_MAX */
	size_t via;
	/* its kind comes from unsure roots only (leakcheck_scan_unsure): without
	 * them it would be lost, or only possibly reached */
	bool unsure;
};

struct leakcheck;

/*
 * Readies a check of the N blocks BLOCKS[0..N) (any order; copied, so the
 * caller may free BLOCKS at once).  Blocks are named by their index in
 * BLOCKS in every later call.  Blocks should not overlap; where they do
 * (a free the tracer missed), the lower one is cut at the upper one's
 * start and the overlap counted (leakcheck_stats).  Costs about 30 bytes a
 * block (48 more for a moment while sorting), the page index (at most 64
 * bytes a page with blocks), 8 bytes a pointer between blocks found by the
 * scan, and in classify about 30 bytes a block and 4 a pointer more.
 * Returns 0 and *OUT (free with leakcheck_free), or -ENOMEM, or -E2BIG
 * for more than LEAKCHECK_MAX_BLOCKS blocks.
 */
int leakcheck_new(const struct leak_block *blocks, size_t n, struct leakcheck **out);

/*
 * Scans LEN bytes of the target's memory, BYTES, which the target holds at
 * ADDR.  Any chunk, any order, chunks of the same memory at most once
 * (again only adds repeated pointers).  Every aligned 8-byte word whose
 * address is in [ADDR, ADDR + LEN) and whose 8 bytes are all in the chunk
 * is read as a pointer; bytes at a chunk's ends that do not make such a
 * word are counted in edge_bytes, not scanned.  A pointer at an unaligned
 * address is not seen, as in memcheck (lc_scan_memory rounds to words) and
 * LeakSanitizer (ScanRangeForPointers steps by the pointer size): compilers
 * align pointers, and reading every byte offset would cost eight lookups a
 * word and find more false pointers.
 *
 * A word is a root when no tracked block holds it (data, bss, stacks, TLS,
 * untracked heap memory: the chunk's caller decides which memory is a
 * root), and an edge of the block that holds it otherwise: a block holds
 * the whole words inside it; the word across its end (a size that is no
 * multiple of 8) is neither root nor edge, its last bytes being the
 * allocator's slack, as memcheck's scan rounds a block's end down.  A pointer to a block's first
 * byte is a start pointer, to any other of its bytes an interior pointer;
 * a pointer one past the end is not a pointer into it.
 *
 * Returns 0, -ENOMEM (the edges could not grow: the check is incomplete
 * and must not be classified), or -EINVAL after leakcheck_classify.
 */
int leakcheck_scan(struct leakcheck *lc, uint64_t addr, const void *bytes, size_t len);

/*
 * The same for memory whose words outside the blocks may be roots or not,
 * which the caller cannot tell: the memory an allocator held before the
 * trace began, where blocks allocated then (live, and roots) lie beside
 * its free lists and bookkeeping (not roots).  They are taken as roots,
 * but a block reached only through them (or reached further: a start
 * pointer where the sure roots have only interior ones) has its verdict
 * flagged unsure (leak_verdict.unsure), for the report to say.
 */
int leakcheck_scan_unsure(struct leakcheck *lc, uint64_t addr, const void *bytes, size_t len);

/*
 * The same for memory that holds no root, only blocks: the allocator's own
 * memory (its heap, arenas, extents), where what lies between the tracked
 * blocks is free memory (which still holds the pointers it had when it was
 * a block) or the allocator's bookkeeping (free lists, the addresses of
 * chunks and extents): neither is a reference the program holds.  The
 * words of blocks are scanned as leakcheck_scan scans them; the others
 * are counted in skipped_bytes.
 */
int leakcheck_scan_blocks(struct leakcheck *lc, uint64_t addr, const void *bytes, size_t len);

/* A value outside memory that is a root: a register of a stopped thread. */
void leakcheck_scan_value(struct leakcheck *lc, uint64_t value);

/*
 * The block that starts at ADDR is to be taken as reachable, whatever
 * points to it: memory the caller knows is live but can no longer vouch
 * for as that block (freed, reallocated or resized since the blocks were
 * handed to leakcheck_new).  Its contents then keep what they point to
 * alive, as untracked heap memory would.  Returns 0, or -ENOENT when no
 * block starts at ADDR.
 */
int leakcheck_keep(struct leakcheck *lc, uint64_t addr);

/*
 * Classifies every block once all memory was scanned (the target may run
 * again), following memcheck's mc_leakcheck.c: marking from the roots
 * (start pointers reach, interior ones only possibly), then the lost
 * blocks grouped into cliques.  memcheck's --leak-check-heuristics
 * (std::string, new[] and multiple-inheritance interior pointers taken
 * as start pointers) are not applied: such blocks are possibly lost here
 * where memcheck, by default, says reachable.  Fills TOTALS when not
 * NULL.  Returns 0, -ENOMEM, or -EINVAL when called twice.
 */
int leakcheck_classify(struct leakcheck *lc, struct leakcheck_totals *totals);

/* Block I's verdict (I: its index in leakcheck_new's BLOCKS).  Returns 0,
 * or -EINVAL before leakcheck_classify or for I out of range. */
int leakcheck_verdict(const struct leakcheck *lc, size_t i, struct leak_verdict *out);

/*
 * The holes of RANGES[0..N) (sorted by address, not overlapping): the
 * whole pages of PAGE bytes (a power of two) in them that no block's bytes
 * touch, as a malloc'd array *OUT of *NOUT ranges in address order (free
 * with free()): what need not be read of memory that holds blocks only
 * (leakcheck_scan_blocks).  Returns 0 or -ENOMEM.
 */
int leakcheck_holes(const struct leakcheck *lc, const struct leak_block *ranges, size_t n, uint64_t page,
		    struct leak_block **out, size_t *nout);

/* Whether any block's words lie in [LO, HI). */
bool leakcheck_holds_block(const struct leakcheck *lc, uint64_t lo, uint64_t hi);

/* The scan's counters so far. */
void leakcheck_stats(const struct leakcheck *lc, struct leakcheck_scan_stats *out);

/* Block number of the block holding ADDR (a pointer test, for callers and
 * tests): its index in leakcheck_new's BLOCKS, or -1 when no block holds it;
 * *START (may be NULL) tells whether ADDR is the block's first byte. */
int64_t leakcheck_find(const struct leakcheck *lc, uint64_t addr, int *start);

/* NULL-safe. */
void leakcheck_free(struct leakcheck *lc);

#endif
