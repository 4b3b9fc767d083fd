/* The unwind image (base/unwind_image.h) from compiled tables: a process's
 * code mappings and their objects' tables put into one blob, for a walker
 * that reads no table of its own (the preload library's, preload/walk.c). */
#ifndef DWLEAK_TABLE_IMAGE_H
#define DWLEAK_TABLE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"
#include "unwind_image.h"

/* One mapping of code: runtime [start, end), whose pc has ELF address
 * pc - bias in TABLE (only read; the image copies what it needs). */
struct table_image_mapping {
	const struct unwind_table *table;
	uint64_t start;
	uint64_t end;
	uint64_t bias;
};

/*
 * Builds the image of the N mappings at MAPS (in any order; mappings with
 * the same TABLE pointer share one copy of it) into a new malloc'd blob
 * stored at *OUT, its length at *LEN; the caller frees *OUT.  The blob
 * keeps unwind_image.h's contract.  Returns 0, or -EINVAL: a NULL table,
 * an empty mapping (start >= end), two that overlap, a table whose own
 * arrays break the contract (a page's rows or a row's rule out of range);
 * -EFBIG: more mappings, tables or bytes than the format counts; -ENOMEM.
 */
int table_image_build(const struct table_image_mapping *maps, size_t n, void **out, size_t *len);

#endif
