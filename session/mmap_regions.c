/* The region set behind --mmap: a sorted array of non-overlapping ranges.
 * Lengths are rounded up to pages, as the kernel maps and unmaps them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "constants.h"
#include "mmap_regions.h"

static uint64_t page_up(uint64_t v)
{
	return DWLEAK_PAGE_DOWN(v + DWLEAK_PAGE_SIZE - 1);
}

static int reserve(struct mmap_regions *m, size_t extra)
{
	struct mmap_region *grown;
	size_t cap;

	if (m->n + extra <= m->cap)
		return 0;
	cap = m->cap ? m->cap * 2 : 64;
	while (cap < m->n + extra)
		cap *= 2;
	grown = realloc(m->r, cap * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	m->r = grown;
	m->cap = cap;
	return 0;
}

/* Index of the first region ending after ADDR. */
static size_t first_after(const struct mmap_regions *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (m->r[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int mmap_regions_unmap(struct mmap_regions *m, uint64_t start, uint64_t len)
{
	uint64_t end = start + page_up(len);
	size_t i = first_after(m, start);
	struct mmap_region *r;

	while (i < m->n && m->r[i].start < end) {
		r = &m->r[i];
		if (r->start < start && r->end > end) {
			/* a hole in the middle: split in two */
			if (reserve(m, 1))
				return -ENOMEM;
			r = &m->r[i];
			memmove(&m->r[i + 1], &m->r[i], (m->n - i) * sizeof(*r));
			m->n++;
			m->r[i].end = start;
			m->r[i + 1].start = end;
			return 0;
		}
		if (r->start < start) {
			r->end = start;
			i++;
		} else if (r->end > end) {
			r->start = end;
			i++;
		} else {
			memmove(&m->r[i], &m->r[i + 1], (m->n - i - 1) * sizeof(*r));
			m->n--;
		}
	}
	return 0;
}

int mmap_regions_map(struct mmap_regions *m, uint64_t start, uint64_t len, uint64_t stack_id,
		     uint64_t fp_stack_id, uint64_t ts)
{
	size_t i;
	int err;

	if (!len)
		return 0;
	err = mmap_regions_unmap(m, start, len); /* MAP_FIXED over older regions */
	if (!err)
		err = reserve(m, 1);
	if (err)
		return err;
	i = first_after(m, start);
	memmove(&m->r[i + 1], &m->r[i], (m->n - i) * sizeof(m->r[0]));
	m->r[i] = (struct mmap_region){ start, start + page_up(len), stack_id, fp_stack_id, ts };
	m->n++;
	return 0;
}

int mmap_regions_remap(struct mmap_regions *m, uint64_t old, uint64_t old_len, uint64_t new_addr,
		       uint64_t new_len)
{
	size_t i = first_after(m, old);
	struct mmap_region from;
	int err;

	if (i == m->n || m->r[i].start > old) {
		m->untracked_remaps++;
		return 0;
	}
	from = m->r[i];
	err = mmap_regions_unmap(m, old, old_len);
	return err ?: mmap_regions_map(m, new_addr, new_len, from.stack_id, from.fp_stack_id, from.ts);
}

void mmap_regions_free(struct mmap_regions *m)
{
	free(m->r);
	memset(m, 0, sizeof(*m));
}
