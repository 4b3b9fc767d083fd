/* libFuzzer target for dwleak's decoder of the preload library's index of
 * live blocks (target/blockset_read.c), over "process memory" that is the
 * fuzzer's bytes: a process writes anything it likes into its own index.
 * The input: a control word (8 bytes), then the memory, at FUZZ_MEMORY_BASE.  The
 * control word places the header in the memory and may make parts of it
 * valid first (magic, version, slot size; then the level count and bits,
 * and each mapped level's address into the memory), so that most inputs
 * reach the slots instead of stopping at the magic.  Besides not crashing
 * or reading past the memory: an error is one the decoder documents, with
 * a reason; a success gives blocks sorted, apart, inside the address
 * space and outside the index's ranges, as many as its levels count. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockset_read.h"
#include "fuzz_memory_image.h"

/* Makes the header at H (in memory of LEN bytes) valid in part: FIX 1,
 * its identity; FIX 2 and 3, its levels too, each mapped one moved into
 * the memory. */
static void fix_header(struct blockset_abi_header *h, unsigned fix, size_t len)
{
	uint32_t i;

	h->magic = BLOCKSET_ABI_MAGIC;
	h->version = BLOCKSET_ABI_VERSION;
	h->slot_size = sizeof(struct blockset_abi_slot);
	if (fix < 2)
		return;
	h->levels = 1 + h->levels % BLOCKSET_ABI_LEVELS;
	h->first_bits = BLOCKSET_ABI_BITS_MIN + h->first_bits % 4; /* levels of 16 to 128 slots */
	h->top %= h->levels;
	for (i = 0; i < h->levels; i++) {
		h->level[i].bits = h->first_bits + i;
		if (h->level[i].slots)
			h->level[i].slots = (FUZZ_MEMORY_BASE + h->level[i].slots % len) & ~15ull;
	}
}

static int known_error(int err)
{
	return err == -EPROTO || err == -EBADMSG || err == -EFBIG || err == -EFAULT || err == -ENOMEM;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct blockset_index ix;
	struct fuzz_memory m;
	uint64_t control, header, slots = 0, counted = 0;
	uint8_t *bytes;
	size_t i, r;
	unsigned fix;
	int err;

	if (size < 8)
		return 0;
	memcpy(&control, data, 8);
	m.len = size - 8;
	bytes = malloc(m.len ? m.len : 1);
	if (!bytes)
		abort();
	memcpy(bytes, data + 8, m.len);
	m.bytes = bytes;
	fix = control & 3;
	/* the header's place: anywhere in the memory, 8-byte aligned but
	 * in one input of 8 */
	header = FUZZ_MEMORY_BASE + ((m.len ? (control >> 8) % m.len : 0) & ~7ull) + (((control >> 2) & 7) == 7);
	if (fix && header - FUZZ_MEMORY_BASE + sizeof(struct blockset_abi_header) <= m.len) {
		struct blockset_abi_header h;

		memcpy(&h, bytes + (header - FUZZ_MEMORY_BASE), sizeof(h));
		fix_header(&h, fix, m.len);
		memcpy(bytes + (header - FUZZ_MEMORY_BASE), &h, sizeof(h));
	}
	err = blockset_read(fuzz_memory_read, &m, header, &ix);
	if (err) {
		if (!known_error(err) || !ix.why[0])
			abort();
	} else {
		if (ix.why[0] || ix.n_ranges != 1 + ix.levels || ix.ranges[0].start != header)
			abort();
		for (i = 0; i < ix.levels; i++) {
			slots += ix.level[i].slots;
			counted += ix.level[i].blocks;
			if (ix.level[i].blocks + ix.level[i].tombs + ix.level[i].busy > ix.level[i].slots)
				abort();
		}
		if (counted != ix.n_blocks || ix.n_blocks > slots)
			abort();
		for (i = 0; i < ix.n_blocks; i++) {
			const struct blockset_block *b = &ix.blocks[i];

			if (b->addr < BLOCKSET_ABI_ADDR_MIN || b->addr >= BLOCKSET_ABI_ADDR_END ||
			    b->size > BLOCKSET_ABI_ADDR_END - b->addr)
				abort();
			if (i && ix.blocks[i - 1].addr + (ix.blocks[i - 1].size ? ix.blocks[i - 1].size : 1) > b->addr)
				abort();
			for (r = 0; r < ix.n_ranges; r++)
				if (b->addr < ix.ranges[r].end && ix.ranges[r].start < b->addr + (b->size ? b->size : 1))
					abort();
		}
	}
	blockset_index_free(&ix);
	free(bytes);
	return 0;
}
