/* Numbers that several layers, the kernel program and the preload library
 * all use, named once: the FNV-1a hash's parameters and the page size.
 * Macros only (no types, no functions, no includes), so that base/ sits
 * below every layer and any of them may include it, the BPF side too. */
#ifndef DWLEAK_BASE_CONSTANTS_H
#define DWLEAK_BASE_CONSTANTS_H

/* FNV-1a, 64 bits: h = FNV64_OFFSET, then h = (h ^ b) * FNV64_PRIME for
 * each byte (or word) b.  Cheap and well spread for what dwleak hashes:
 * stack ids (the walkers in bpf/), table slots (tables/, report/, cli/)
 * and the table cache's file names, which are on disk: changing either
 * value orphans every cached table (tables/table_cache.c). */
#define FNV64_OFFSET 0xcbf29ce484222325ull
#define FNV64_PRIME 0x100000001b3ull

/* The page: 4 KiB on x86-64, the one architecture dwleak supports (the
 * walker reads x86-64 registers).  The kernel's mapping offsets
 * (vm_pgoff), /proc/PID/pagemap, mincore, mmap lengths and the
 * allocators' own page-granular metadata count in it. */
#define DWLEAK_PAGE_SHIFT 12
#define DWLEAK_PAGE_SIZE (1ull << DWLEAK_PAGE_SHIFT)
/* ADDR rounded down to the start of its page. */
#define DWLEAK_PAGE_DOWN(addr) ((addr) & ~(DWLEAK_PAGE_SIZE - 1))

#endif
