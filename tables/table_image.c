/* Builds the unwind image (base/unwind_image.h): a process's code mappings
 * sorted by address, each naming one copy of its object's table, every
 * array at an 8-byte-aligned offset in one malloc'd blob. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "table_image.h"

/* BYTES rounded up to the image's alignment. */
static uint64_t image_align(uint64_t bytes)
{
	return (bytes + UNWIND_IMAGE_ALIGN - 1) & ~(uint64_t)(UNWIND_IMAGE_ALIGN - 1);
}

static int mapping_cmp(const void *a, const void *b)
{
	const struct table_image_mapping *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Whether T's own arrays keep the image's contract: checked here so that
 * a bad table is refused by its builder, not only by the walker. */
static int table_sound(const struct unwind_table *t)
{
	uint32_t i;

	if ((t->npages && !t->pages) || (t->nrows && !t->rows) || (t->nrules && !t->rules) ||
	    t->first_page + t->npages < t->first_page)
		return -EINVAL;
	for (i = 0; i < t->npages; i++)
		if (t->pages[i].first_row > t->nrows || t->pages[i].nrows > t->nrows - t->pages[i].first_row)
			return -EINVAL;
	for (i = 0; i < t->nrows; i++)
		if (t->rows[i].rule >= t->nrules)
			return -EINVAL;
	return 0;
}

/* The index of T in the N tables of UNIQ, or N when it is not there (a
 * linear search: a process maps hundreds of objects, not millions). */
static size_t table_index(const struct unwind_table *const *uniq, size_t n, const struct unwind_table *t)
{
	size_t i;

	for (i = 0; i < n && uniq[i] != t; i++)
		;
	return i;
}

int table_image_build(const struct table_image_mapping *maps, size_t n, void **out, size_t *len)
{
	struct table_image_mapping *sorted = NULL;
	const struct unwind_table **uniq = NULL;
	struct unwind_image_header *h;
	size_t i, ntables = 0;
	uint64_t bytes, off;
	uint8_t *blob;
	int err = -ENOMEM;

	*out = NULL;
	*len = 0;
	if (n > UINT32_MAX)
		return -EFBIG;
	sorted = malloc((n ? n : 1) * sizeof(*sorted));
	uniq = malloc((n ? n : 1) * sizeof(*uniq));
	if (!sorted || !uniq)
		goto out;
	if (n)
		memcpy(sorted, maps, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), mapping_cmp);
	err = -EINVAL;
	for (i = 0; i < n; i++) {
		if (!sorted[i].table || sorted[i].start >= sorted[i].end ||
		    (i + 1 < n && sorted[i].end > sorted[i + 1].start))
			goto out;
		if (table_index(uniq, ntables, sorted[i].table) == ntables) {
			if (table_sound(sorted[i].table))
				goto out;
			uniq[ntables++] = sorted[i].table;
		}
	}

	/* the size first: the header, the mappings, the tables, their arrays */
	bytes = sizeof(*h) + n * sizeof(struct unwind_image_mapping) + ntables * sizeof(struct unwind_image_table);
	for (i = 0; i < ntables; i++)
		bytes += image_align((uint64_t)uniq[i]->npages * sizeof(struct unwind_page)) +
			 image_align((uint64_t)uniq[i]->nrows * sizeof(struct unwind_row)) +
			 image_align((uint64_t)uniq[i]->nrules * sizeof(struct unwind_rule));
	err = -EFBIG;
	if (bytes > SIZE_MAX / 2)
		goto out;
	err = -ENOMEM;
	blob = calloc(1, bytes); /* the padding and the pads zero */
	if (!blob)
		goto out;

	h = (struct unwind_image_header *)blob;
	h->magic = UNWIND_IMAGE_MAGIC;
	h->version = UNWIND_IMAGE_VERSION;
	h->header_bytes = sizeof(*h);
	h->total_bytes = bytes;
	h->nmappings = (uint32_t)n;
	h->ntables = (uint32_t)ntables;
	h->mappings_off = sizeof(*h);
	h->tables_off = h->mappings_off + n * sizeof(struct unwind_image_mapping);
	for (i = 0; i < n; i++) {
		struct unwind_image_mapping *m = (struct unwind_image_mapping *)(blob + h->mappings_off) + i;

		m->start = sorted[i].start;
		m->end = sorted[i].end;
		m->bias = sorted[i].bias;
		m->table = (uint32_t)table_index(uniq, ntables, sorted[i].table);
	}
	off = h->tables_off + ntables * sizeof(struct unwind_image_table);
	for (i = 0; i < ntables; i++) {
		struct unwind_image_table *it = (struct unwind_image_table *)(blob + h->tables_off) + i;
		const struct unwind_table *t = uniq[i];

		it->first_page = t->first_page;
		it->npages = t->npages;
		it->nrows = t->nrows;
		it->nrules = t->nrules;
		it->pages_off = off;
		if (t->npages)
			memcpy(blob + off, t->pages, t->npages * sizeof(*t->pages));
		off += image_align((uint64_t)t->npages * sizeof(*t->pages));
		it->rows_off = off;
		if (t->nrows)
			memcpy(blob + off, t->rows, t->nrows * sizeof(*t->rows));
		off += image_align((uint64_t)t->nrows * sizeof(*t->rows));
		it->rules_off = off;
		if (t->nrules)
			memcpy(blob + off, t->rules, t->nrules * sizeof(*t->rules));
		off += image_align((uint64_t)t->nrules * sizeof(*t->rules));
	}
	*out = blob;
	*len = bytes;
	err = 0;
out:
	free(sorted);
	free(uniq);
	return err;
}
