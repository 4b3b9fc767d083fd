/* Finding the allocator functions dwleak probes inside an object (glibc's
 * malloc family in libc.so.6): their ELF addresses, sizes and file
 * offsets, one entry per distinct address (aliases share one probe). */
#ifndef DWLEAK_ALLOCATOR_H
#define DWLEAK_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#include "dwleak.h"

struct alloc_func {
	const char *name;  /* the public name (static string) */
	uint32_t kind;	   /* enum alloc_kind */
	uint64_t vaddr;	   /* ELF address of the symbol */
	uint64_t size;	   /* st_size; 0 when unknown */
	uint64_t file_off; /* where uprobes attach */
};

/* Returns the public name of KIND ("malloc", ...). */
const char *alloc_kind_name(uint32_t kind);

/*
 * Looks up the glibc malloc family in the ELF object open at FD (its
 * .dynsym, then .symtab).  Fills OUT (room for ALLOC_KIND_COUNT entries)
 * and *N with the functions found, skipping a name whose address another
 * already has (memalign/aligned_alloc).  Returns 0, -ENOENT when malloc or
 * free is missing (not an allocator), -ENOEXEC for a non-ELF.
 */
int allocator_find(int fd, struct alloc_func *out, size_t *n);

#endif
