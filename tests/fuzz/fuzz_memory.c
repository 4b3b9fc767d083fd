/* libFuzzer target for what target/ reads of a traced process's memory
 * to tell the allocator's bookkeeping from the program's data: the shape
 * tests of glibc's arenas and of jemalloc's thread caches (alloc_state.c),
 * over bytes the process could have written anything into.  The base address comes from the input's
 * first 8 bytes (aligned or not).  Besides not crashing or reading past
 * the input: an arena found is one glibc_arena_at accepts, and its
 * offset leaves a whole arena in the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t base = 0, next;
	int64_t off;

	if (size < 8)
		return 0;
	memcpy(&base, data, 8);
	base &= 0x00007ffffffffff0ull | (base & 7);
	off = glibc_arena_find(data + 8, size - 8, base);
	if (off >= 0) {
		if ((uint64_t)off + GLIBC_ARENA_SIZE > size - 8)
			abort();
		if (!glibc_arena_at(data + 8 + off, size - 8 - (size_t)off, base + (uint64_t)off, &next))
			abort();
	}
	glibc_arena_at(data + 8, size - 8, base, &next);
	{
		uint64_t start = 0, end = 0;
		size_t bins = jemalloc_cache_bins_at(data + 8, size - 8, &start, &end);

		if (bins && (bins < JEMALLOC_CACHE_BINS_MIN || bins * JEMALLOC_CACHE_BIN_SIZE > size - 8 ||
			     end < start))
			abort();
	}
	return 0;
}
