/* The unwind image: one process's code mappings and their compact unwind
 * tables (unwind_format.h) in one position-independent blob, which the
 * preload library walks its own process's stacks with (preload/walk.c).
 * tables/table_image.c writes it; base/ because tables/, a leaf, writes it
 * and preload/, which may not reach tables/, reads it.  Types and layouts
 * only, fixed-width, as unwind_format.h. */
#ifndef DWLEAK_UNWIND_IMAGE_H
#define DWLEAK_UNWIND_IMAGE_H

#include "unwind_format.h"

/*
 * Layout.  Every position in the image is a byte offset from its first
 * byte, never a pointer, so the blob may be copied, mapped anywhere or
 * shared between processes.  Every offset is a multiple of 8 and every
 * part starts at one, so each struct is read in place, aligned:
 *
 *   struct unwind_image_header            at 0
 *   struct unwind_image_mapping[nmappings] at mappings_off
 *   struct unwind_image_table[ntables]     at tables_off
 *   for each table: struct unwind_page[npages] at pages_off,
 *                   struct unwind_row[nrows]   at rows_off,
 *                   struct unwind_rule[nrules] at rules_off
 *   (each array padded with zeros to a multiple of 8 bytes)
 *
 * The contract a valid image keeps, which the reader checks once before
 * it walks with the image (walk_image_check) so that a lookup needs no
 * bound but those of the step's own hooks:
 *  - magic, version and header_bytes as below; total_bytes is the blob's
 *    length; every part lies inside [header_bytes, total_bytes);
 *  - mappings are sorted by start and do not overlap: start < end and
 *    end <= the next one's start; each names a table < ntables;
 *  - a table's arrays are as its unwind_table was (tables/table.h): each
 *    page's rows [first_row, first_row + nrows) lie inside the rows, each
 *    row's rule is < nrules, first_page + npages does not wrap.
 * Several mappings may share a table (one object mapped twice).
 */
#define UNWIND_IMAGE_MAGIC 0x31474d494b4c5744ull /* "DWLKIMG1", little-endian */
#define UNWIND_IMAGE_VERSION 1
#define UNWIND_IMAGE_ALIGN 8

struct unwind_image_header {
	__u64 magic;	      /* UNWIND_IMAGE_MAGIC */
	__u32 version;	      /* UNWIND_IMAGE_VERSION */
	__u32 header_bytes;   /* sizeof(struct unwind_image_header) */
	__u64 total_bytes;    /* the whole blob, this header included */
	__u32 nmappings;      /* entries at mappings_off */
	__u32 ntables;	      /* entries at tables_off */
	__u64 mappings_off;   /* struct unwind_image_mapping[nmappings] */
	__u64 tables_off;     /* struct unwind_image_table[ntables] */
};

/* One mapping of code: the runtime addresses [start, end) whose pcs are
 * looked up in table TABLE at ELF address pc - bias (the load bias of the
 * object's executable segment: start minus the ELF address it maps). */
struct unwind_image_mapping {
	__u64 start;
	__u64 end;
	__u64 bias; /* u64 arithmetic: pc - bias wraps as the loader's does */
	__u32 table; /* index into the tables */
	__u32 pad;   /* zero */
};

/* One object's table: pages[i] is ELF page first_page + i (struct
 * unwind_table's fields, its arrays as offsets into the image). */
struct unwind_image_table {
	__u64 first_page;
	__u32 npages;
	__u32 nrows;
	__u32 nrules;
	__u32 pad; /* zero */
	__u64 pages_off; /* struct unwind_page[npages] */
	__u64 rows_off;	 /* struct unwind_row[nrows] */
	__u64 rules_off; /* struct unwind_rule[nrules] */
};

_Static_assert(sizeof(struct unwind_image_header) == 48, "unwind_image_header layout");
_Static_assert(sizeof(struct unwind_image_mapping) == 32, "unwind_image_mapping layout");
_Static_assert(sizeof(struct unwind_image_table) == 48, "unwind_image_table layout");
_Static_assert(sizeof(struct unwind_image_header) % UNWIND_IMAGE_ALIGN == 0 &&
		       sizeof(struct unwind_image_mapping) % UNWIND_IMAGE_ALIGN == 0 &&
		       sizeof(struct unwind_image_table) % UNWIND_IMAGE_ALIGN == 0,
	       "every part of the image keeps the next one aligned");

#endif
