/* --mmap: the anonymous regions a program mapped itself and still has,
 * kept in user space from the BPF program's map/unmap/remap events, so
 * that partial munmaps and mremaps are accounted to the byte. */
#ifndef DWLEAK_MMAP_REGIONS_H
#define DWLEAK_MMAP_REGIONS_H

#include <stddef.h>
#include <stdint.h>

struct mmap_region {
	uint64_t start;
	uint64_t end; /* exclusive, page-aligned */
	uint64_t stack_id;
	uint64_t fp_stack_id;
	uint64_t ts;  /* when it was mapped (bpf_ktime_get_ns) */
};

/* Sorted by start, never overlapping. */
struct mmap_regions {
	struct mmap_region *r;
	size_t n;
	size_t cap;
	uint64_t untracked_remaps; /* mremaps of memory we never saw mapped */
};

/* [START, START+LEN) was mapped from STACK_ID (replacing anything there). */
int mmap_regions_map(struct mmap_regions *m, uint64_t start, uint64_t len, uint64_t stack_id,
		     uint64_t fp_stack_id, uint64_t ts);

/* [START, START+LEN) was unmapped: regions are trimmed or split. */
int mmap_regions_unmap(struct mmap_regions *m, uint64_t start, uint64_t len);

/* [OLD, OLD+OLD_LEN) moved or resized to [NEW, NEW+NEW_LEN); the bytes keep
 * the stack of the region that held OLD (ignored if we never saw it). */
int mmap_regions_remap(struct mmap_regions *m, uint64_t old, uint64_t old_len, uint64_t new_addr,
		       uint64_t new_len);

void mmap_regions_free(struct mmap_regions *m);

#endif
