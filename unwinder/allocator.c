/* Allocator symbol lookup: which functions of an object to probe, and
 * where, read from its dynamic (or full) symbol table. */
#include <errno.h>
#include <string.h>

#include "allocator.h"
#include "elf_symbols.h"

static const char *const kind_names[ALLOC_KIND_COUNT] = {
	[ALLOC_MALLOC] = "malloc",
	[ALLOC_CALLOC] = "calloc",
	[ALLOC_REALLOC] = "realloc",
	[ALLOC_REALLOCARRAY] = "reallocarray",
	[ALLOC_POSIX_MEMALIGN] = "posix_memalign",
	[ALLOC_ALIGNED_ALLOC] = "aligned_alloc",
	[ALLOC_MEMALIGN] = "memalign",
	[ALLOC_VALLOC] = "valloc",
	[ALLOC_PVALLOC] = "pvalloc",
	[ALLOC_FREE] = "free",
};

const char *alloc_kind_name(uint32_t kind)
{
	return kind < ALLOC_KIND_COUNT ? kind_names[kind] : "unknown";
}

int allocator_find(int fd, struct alloc_func *out, size_t *n)
{
	struct elf_sym_want want[ALLOC_KIND_COUNT] = { { 0 } };
	size_t k, j, cnt = 0;
	int err;

	for (k = 0; k < ALLOC_KIND_COUNT; k++)
		want[k].name = kind_names[k];
	err = elf_symbols_find(fd, want, ALLOC_KIND_COUNT);
	if (err)
		return err;
	if (!want[ALLOC_MALLOC].found || !want[ALLOC_FREE].found)
		return -ENOENT;
	for (k = 0; k < ALLOC_KIND_COUNT; k++) {
		if (!want[k].found || !want[k].file_off)
			continue;
		for (j = 0; j < cnt && out[j].vaddr != want[k].vaddr; j++)
			;
		if (j < cnt)
			continue; /* an alias: one probe serves both names */
		out[cnt++] = (struct alloc_func){
			.name = kind_names[k],
			.kind = (uint32_t)k,
			.vaddr = want[k].vaddr,
			.size = want[k].size,
			.file_off = want[k].file_off,
		};
	}
	*n = cnt;
	return 0;
}
