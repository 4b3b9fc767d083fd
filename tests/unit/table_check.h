/* What the table tests share: whether two compiled tables are the same in
 * every field a walk or a report reads, and the removal of a test's
 * scratch directory. */
#ifndef DWLEAK_TEST_TABLE_CHECK_H
#define DWLEAK_TEST_TABLE_CHECK_H

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "table.h"

static inline bool tables_equal(const struct unwind_table *a, const struct unwind_table *b)
{
	return a->first_page == b->first_page && a->npages == b->npages &&
	       a->nrows == b->nrows && a->nrules == b->nrules && a->nfdes == b->nfdes &&
	       a->nfdes_eh == b->nfdes_eh && a->nfdes_debug == b->nfdes_debug &&
	       a->nfdes_bad == b->nfdes_bad && a->covered_bytes == b->covered_bytes &&
	       a->supported_bytes == b->supported_bytes && a->build_id_len == b->build_id_len && a->arch == b->arch &&
	       memcmp(a->build_id, b->build_id, a->build_id_len) == 0 &&
	       memcmp(a->pages, b->pages, a->npages * sizeof(*a->pages)) == 0 &&
	       memcmp(a->rows, b->rows, a->nrows * sizeof(*a->rows)) == 0 &&
	       memcmp(a->rules, b->rules, a->nrules * sizeof(*a->rules)) == 0;
}

static inline int check_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

/* Removes directory DIR and everything below it (links not followed). */
static inline void check_rm_tree(const char *dir)
{
	nftw(dir, check_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
