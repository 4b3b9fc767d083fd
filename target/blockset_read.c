/* Decoding the preload library's index of live blocks out of a process's
 * memory (see blockset_read.h): the header checked field by field before
 * anything it names is read, each mapped level read in chunks, every slot
 * checked, the blocks sorted and checked against each other and against
 * the index's own memory. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockset_read.h"

static int __attribute__((format(printf, 3, 4))) fail(struct blockset_index *ix, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ix->why, sizeof(ix->why), fmt, ap);
	va_end(ap);
	return err;
}

/* The callback's result as a negative errno: anything but 0 is a failure. */
static int read_bytes(blockset_read_fn read_mem, void *ctx, uint64_t addr, void *buf, size_t len)
{
	int r = read_mem(ctx, addr, buf, len);

	return r < 0 ? r : r > 0 ? -EIO : 0;
}

static bool ranges_meet(const struct blockset_range *a, const struct blockset_range *b)
{
	return a->start < b->end && b->start < a->end;
}

/*
 * Checks header H (read from ADDR) and fills IX's levels, ranges and
 * counters from it.  Everything it names is then in bounds: the levels
 * mapped a prefix, each 2^bits slots, 16-byte aligned, inside the
 * address space, apart from each other and from the header.
 */
static int header_check(const struct blockset_abi_header *h, uint64_t addr, struct blockset_index *ix)
{
	uint64_t total = 0, bytes;
	uint32_t i;
	size_t r, q;

	if (h->magic != BLOCKSET_ABI_MAGIC)
		return fail(ix, -EPROTO, "no index at %#llx (magic %#llx)", (unsigned long long)addr,
			    (unsigned long long)h->magic);
	if (h->version != BLOCKSET_ABI_VERSION || h->slot_size != sizeof(struct blockset_abi_slot))
		return fail(ix, -EPROTO, "index version %u, slots of %u bytes (dwleak reads version %u, %zu)",
			    h->version, h->slot_size, BLOCKSET_ABI_VERSION, sizeof(struct blockset_abi_slot));
	if (h->levels < 1 || h->levels > BLOCKSET_ABI_LEVELS || h->first_bits < BLOCKSET_ABI_BITS_MIN ||
	    h->first_bits > BLOCKSET_ABI_BITS_MAX || h->first_bits + h->levels - 1 > BLOCKSET_ABI_BITS_MAX)
		return fail(ix, -EBADMSG, "%u levels from 2^%u slots", h->levels, h->first_bits);
	if (addr % 8 || addr < BLOCKSET_ABI_ADDR_MIN || addr > BLOCKSET_ABI_ADDR_END - sizeof(*h))
		return fail(ix, -EBADMSG, "header at %#llx", (unsigned long long)addr);
	ix->ranges[0] = (struct blockset_range){ addr, addr + sizeof(*h) };
	ix->n_ranges = 1;
	for (i = 0; i < h->levels && h->level[i].slots; i++) {
		const struct blockset_abi_level *lv = &h->level[i];

		if (lv->bits != h->first_bits + i)
			return fail(ix, -EBADMSG, "level %u: 2^%u slots (2^%u expected)", i, lv->bits,
				    h->first_bits + i);
		bytes = sizeof(struct blockset_abi_slot) << lv->bits; /* at most 2^44 */
		if (lv->slots % sizeof(struct blockset_abi_slot) || lv->slots < BLOCKSET_ABI_ADDR_MIN ||
		    lv->slots > BLOCKSET_ABI_ADDR_END - bytes)
			return fail(ix, -EBADMSG, "level %u: slots at %#llx", i, (unsigned long long)lv->slots);
		total += 1ull << lv->bits;
		if (total > BLOCKSET_READ_SLOTS_MAX)
			return fail(ix, -EFBIG, "more than %llu slots by level %u",
				    (unsigned long long)BLOCKSET_READ_SLOTS_MAX, i);
		ix->ranges[ix->n_ranges++] = (struct blockset_range){ lv->slots, lv->slots + bytes };
		ix->level[i].slots = 1ull << lv->bits;
		ix->level[i].max_probe = lv->max_probe;
	}
	ix->levels = i;
	/* levels are mapped in order: the rest, and the entries past LEVELS,
	 * hold nothing */
	for (; i < BLOCKSET_ABI_LEVELS; i++)
		if (h->level[i].slots)
			return fail(ix, -EBADMSG, "level %u mapped after the last, %u", i, ix->levels);
	if (ix->levels ? h->top >= ix->levels : h->top != 0)
		return fail(ix, -EBADMSG, "top level %u of %u mapped", h->top, ix->levels);
	for (r = 0; r < ix->n_ranges; r++)
		for (q = r + 1; q < ix->n_ranges; q++)
			if (ranges_meet(&ix->ranges[r], &ix->ranges[q]))
				return fail(ix, -EBADMSG, "the index's memory overlaps itself (%#llx, %#llx)",
					    (unsigned long long)ix->ranges[r].start,
					    (unsigned long long)ix->ranges[q].start);
	ix->lost = h->lost;
	ix->absent = h->absent;
	ix->session = h->session;
	return 0;
}

/* Appends block B to IX, growing its array by doubling up to CAP blocks
 * (the slots of the index: no more can be found). */
static int block_add(struct blockset_index *ix, size_t *cap, size_t max, struct blockset_block b)
{
	struct blockset_block *grown;
	size_t want;

	if (ix->n_blocks == *cap) {
		want = *cap ? *cap * 2 : 1024;
		want = want < max ? want : max;
		if (want <= *cap)
			return -EFBIG; /* cannot happen: a slot holds one block */
		grown = realloc(ix->blocks, want * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		ix->blocks = grown;
		*cap = want;
	}
	ix->blocks[ix->n_blocks++] = b;
	return 0;
}

/* Reads level I's slots (2^bits at ADDR) in chunks through BUF and adds
 * their blocks to IX. */
static int level_read(blockset_read_fn read_mem, void *ctx, uint32_t i, uint64_t addr, struct blockset_abi_slot *buf,
		      struct blockset_index *ix, size_t *cap, size_t max)
{
	struct blockset_level_count *c = &ix->level[i];
	uint64_t done, n, k, a, s;
	int err;

	for (done = 0; done < c->slots; done += n) {
		n = c->slots - done < BLOCKSET_READ_CHUNK ? c->slots - done : BLOCKSET_READ_CHUNK;
		err = read_bytes(read_mem, ctx, addr + done * sizeof(*buf), buf, n * sizeof(*buf));
		if (err)
			return fail(ix, err, "reading level %u's slots at %#llx", i,
				    (unsigned long long)(addr + done * sizeof(*buf)));
		for (k = 0; k < n; k++) {
			a = buf[k].addr;
			s = buf[k].size;
			if (a == BLOCKSET_ABI_EMPTY)
				continue;
			if (a == BLOCKSET_ABI_TOMB) {
				c->tombs++;
				continue;
			}
			if (a == BLOCKSET_ABI_BUSY) {
				c->busy++;
				continue;
			}
			if (a < BLOCKSET_ABI_ADDR_MIN || a >= BLOCKSET_ABI_ADDR_END || s > BLOCKSET_ABI_ADDR_END - a)
				return fail(ix, -EBADMSG, "level %u slot %llu: block %#llx of %llu bytes", i,
					    (unsigned long long)(done + k), (unsigned long long)a,
					    (unsigned long long)s);
			err = block_add(ix, cap, max, (struct blockset_block){ a, s });
			if (err)
				return fail(ix, err, "%zu blocks", ix->n_blocks);
			c->blocks++;
		}
	}
	return 0;
}

static int block_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct blockset_block *)a)->addr, y = ((const struct blockset_block *)b)->addr;

	return x < y ? -1 : x > y;
}

/* The end of block B for overlaps: a block of size 0 is one byte (its
 * address is a block's, which no other block may hold). */
static uint64_t block_end(const struct blockset_block *b)
{
	return b->addr + (b->size ? b->size : 1);
}

/* Checks sorted blocks against each other and against the index's own
 * memory. */
static int blocks_check(struct blockset_index *ix)
{
	size_t i, r, lo, hi, mid;

	for (i = 1; i < ix->n_blocks; i++)
		if (block_end(&ix->blocks[i - 1]) > ix->blocks[i].addr)
			return fail(ix, -EBADMSG, "blocks %#llx (%llu bytes) and %#llx overlap",
				    (unsigned long long)ix->blocks[i - 1].addr,
				    (unsigned long long)ix->blocks[i - 1].size,
				    (unsigned long long)ix->blocks[i].addr);
	for (r = 0; r < ix->n_ranges; r++) {
		/* the first block that ends after the range starts */
		for (lo = 0, hi = ix->n_blocks; lo < hi;) {
			mid = lo + (hi - lo) / 2;
			if (block_end(&ix->blocks[mid]) <= ix->ranges[r].start)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < ix->n_blocks && ix->blocks[lo].addr < ix->ranges[r].end)
			return fail(ix, -EBADMSG, "block %#llx lies in the index's memory at %#llx",
				    (unsigned long long)ix->blocks[lo].addr,
				    (unsigned long long)ix->ranges[r].start);
	}
	return 0;
}

int blockset_read(blockset_read_fn read_mem, void *ctx, uint64_t header, struct blockset_index *out)
{
	struct blockset_abi_header h;
	struct blockset_abi_slot *buf = NULL;
	size_t cap = 0, max = 0;
	uint32_t i;
	int err;

	memset(out, 0, sizeof(*out));
	err = read_bytes(read_mem, ctx, header, &h, sizeof(h));
	if (err)
		return fail(out, err, "reading the index's header at %#llx", (unsigned long long)header);
	err = header_check(&h, header, out);
	if (err)
		return err;
	for (i = 0; i < out->levels; i++)
		max += out->level[i].slots; /* at most BLOCKSET_READ_SLOTS_MAX */
	if (max) {
		buf = malloc(BLOCKSET_READ_CHUNK * sizeof(*buf));
		if (!buf)
			return fail(out, -ENOMEM, "a chunk of slots");
	}
	for (i = 0; i < out->levels && !err; i++)
		err = level_read(read_mem, ctx, i, h.level[i].slots, buf, out, &cap, max);
	free(buf);
	if (err)
		return err;
	if (out->n_blocks > 1)
		qsort(out->blocks, out->n_blocks, sizeof(*out->blocks), block_cmp);
	return blocks_check(out);
}

void blockset_index_free(struct blockset_index *ix)
{
	if (!ix)
		return;
	free(ix->blocks);
	ix->blocks = NULL;
	ix->n_blocks = 0;
}
