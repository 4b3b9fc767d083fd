/* The allocator's own state in a traced process's memory, which the leak
 * check must not take for references the program holds: beside the
 * memory the allocator maps for itself (which the tracer learns as it is
 * mapped), its static state.  Where the allocator is an object of its
 * own (jemalloc, tcmalloc, mimalloc in their libraries), that is the
 * object's whole writable data and bss.  glibc's malloc lives in libc
 * beside the program's stdio and the like, so there it is its arenas
 * only (struct malloc_state: main_arena in libc's data, the others at
 * the start of their heaps), found by their shape, without symbols: every
 * arena pointer names a chunk's header, which for a block whose size
 * leaves 1 to 8 spare bytes in its chunk lies in its last 8 bytes, so the
 * top chunk's and the bins' pointers made such blocks "possibly lost".
 *
 * The shape test is pure (bytes in, a verdict out) and fuzzed; the rest
 * reads the process. */
#ifndef DWLEAK_ALLOC_STATE_H
#define DWLEAK_ALLOC_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator.h"
#include "proc_mem.h"

/* Bytes of glibc's struct malloc_state (glibc 2.26 and later, x86_64:
 * the layout Debian 12's 2.36 has). */
#define GLIBC_ARENA_SIZE 2200

/* The most arenas followed from main_arena (glibc makes at most 8 per
 * CPU): beyond, the rest are counted as not followed. */
#define GLIBC_ARENAS_MAX 4096

/*
 * Whether the LEN bytes BYTES, which the process holds at ADDR, start
 * with a glibc arena in use: each of its 127 bins empty (both its links
 * point at the bin itself) or linking chunks (16-byte aligned addresses
 * outside the arena), at least 16 of them empty, its top chunk and its
 * next arena set and aligned, its fast bins empty or aligned.  On true,
 * *NEXT (may be NULL) is the arena's next (itself when it is the only
 * one).  Never reads past BYTES + LEN.
 */
bool glibc_arena_at(const unsigned char *bytes, size_t len, uint64_t addr, uint64_t *next);

/* The offset of the first glibc arena in BYTES (LEN bytes the process
 * holds at BASE), at 8-byte aligned addresses, or -1. */
int64_t glibc_arena_find(const unsigned char *bytes, size_t len, uint64_t base);

/* jemalloc 5.3 (x86_64): a thread's cache (tcache_t, in its static TLS)
 * holds one cache_bin_t of 24 bytes per size class: a pointer to the top
 * of the bin's stack of cached blocks, a request count, then the low 16
 * bits of the stack's low-water mark, full end and empty end.  The stacks
 * lie one after the other in one allocation, whose part below each top
 * holds the blocks the thread took from it since, stale. */
#define JEMALLOC_CACHE_BIN_SIZE 24
#define JEMALLOC_CACHE_BINS_MIN 16 /* a thread's tcache has 36 or more */

/*
 * Whether the LEN bytes BYTES start with a run of at least
 * JEMALLOC_CACHE_BINS_MIN cache bins whose stacks follow each other;
 * returns how many, and the stacks' storage [*START, *END) (may be NULL).
 * Never reads past BYTES + LEN.
 */
size_t jemalloc_cache_bins_at(const unsigned char *bytes, size_t len, uint64_t *start, uint64_t *end);

/*
 * jemalloc's extent map (emap, an rtree of two levels of 2^18 entries,
 * keyed by page number: jemalloc's page, LG_PAGE, is the system's on
 * x86-64) and its extents' metadata (edata_t, 128 bytes, the extent's
 * address at 8, then its size with a serial number in the bits below the
 * page): a leaf entry is the edata's address in its low 48 bits (its low
 * 7 bits are flags) below a 16-bit size class.
 */
#define JEMALLOC_RTREE_BITS 18
#define JEMALLOC_EDATA_SIZE 128

/* The edata address in leaf entry E, or 0. */
static inline uint64_t jemalloc_leaf_edata(uint64_t e)
{
	return e & 0x0000ffffffffff80ull;
}

struct alloc_state {
	struct proc_mem_range *ranges; /* its bookkeeping: sorted by address, not overlapping */
	size_t n;
	/* the allocator object's writable data and bss (in address order),
	 * when it is an object of its own: not bookkeeping as a whole (its
	 * globals may hold blocks it allocated itself, as any library's do),
	 * but its static caches live there */
	struct proc_mem_range *object;
	size_t nobject;
	uint64_t object_bytes;	       /* their bytes */
	size_t arenas;		       /* glibc arenas found */
	size_t arenas_not_followed;    /* past GLIBC_ARENAS_MAX, or unreadable */
	bool arena_not_found;	       /* glibc, but no arena in its data (none yet?) */
	size_t tcaches;		       /* jemalloc: threads' caches found */
	size_t extents;		       /* jemalloc: extents' metadata found in its extent map */
	bool extent_map_not_found;     /* jemalloc, asked for, but not found */
};

/* What alloc_state_find may use to find more: the threads' TLS pointers
 * (fs_base; 0 = not known), some blocks the allocator handed out (their
 * addresses), and whether the extents' metadata is wanted (the allocator
 * held memory before the trace began: its metadata there is not known to
 * be its own otherwise). */
struct alloc_state_hints {
	const uint64_t *tls;
	size_t ntls;
	const uint64_t *blocks;
	size_t nblocks;
	bool extents;
};

/*
 * Finds the static state of allocator A (as allocator_detect described
 * it) in process PID, which should be stopped: the writable mappings and
 * bss of the object that provides malloc when A is jemalloc, tcmalloc or
 * mimalloc in an object other than the executable (OUT->object); as its
 * bookkeeping (OUT->ranges), glibc's arenas when A is glibc (in libc, or
 * in a static executable); jemalloc's threads'
 * caches (their stacks of cached blocks, through H->tls) and, with
 * H->extents, the metadata of every extent in its extent map (found
 * through H->blocks).  Other allocators have none that dwleak knows.
 * Fills *OUT (free with alloc_state_free).  Returns 0, or a negative
 * errno (-ESRCH: the process is gone; -ENOMEM).
 */
int alloc_state_find(int pid, const struct allocator *a, const struct alloc_state_hints *h, struct alloc_state *out);

/* NULL-safe; leaves *S empty. */
void alloc_state_free(struct alloc_state *s);

#endif
