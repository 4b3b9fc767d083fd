/* Which allocator a process really uses, and where its functions are.
 * Follows symbol interposition the way the dynamic linker does: the first
 * object in lookup order (executable, LD_PRELOAD'ed libraries, then the
 * rest in load order) that defines malloc provides it, and likewise for
 * C++ operator new.  Knows glibc, tcmalloc (gperftools, tc_* entry points)
 * and jemalloc (mallocx & co, je_-prefixed static builds).  C++ operators
 * are probed where the allocator has its own (tcmalloc, jemalloc); of
 * libstdc++'s, only the aligned ones, which round the size. */
#ifndef DWLEAK_ALLOCATOR_H
#define DWLEAK_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc_kind.h"

/* Functions probed in one object; aliases (one address, several names)
 * appear once, under the first name of dwleak's list. */
#define ALLOC_MAX_FUNCS 64

struct alloc_func {
	const char *name;  /* static string */
	uint32_t kind;	   /* enum alloc_kind */
	uint64_t vaddr;	   /* ELF address of the symbol */
	uint64_t size;	   /* st_size; 0 when unknown */
	uint64_t file_off; /* the symbol's file offset */
	uint64_t site_off; /* entry-only probes: where in the function (probe_site.h) */
	const char *site_why;
};

struct alloc_object {
	char *path;	/* where to open and attach it (may be /proc/PID/root/...) */
	char *name;	/* its path as the process sees it, for messages */
	struct alloc_func funcs[ALLOC_MAX_FUNCS];
	size_t nfuncs;
};

struct allocator {
	const char *family;	 /* "glibc", "tcmalloc", "jemalloc" or "unknown" */
	bool preloaded;		 /* the malloc provider came from LD_PRELOAD */
	bool in_executable;	 /* linked into the executable itself */
	struct alloc_object objs[2]; /* [0] provides malloc; [1] libstdc++'s aligned new */
	size_t nobjs;
};

/* Returns the public name of KIND ("malloc", "operator new", ...). */
const char *alloc_kind_name(uint32_t kind);

/* True for kinds whose call frees (free, delete, sdallocx, dallocx). */
bool alloc_kind_frees(uint32_t kind);

/*
 * Finds the allocator among the N objects PATHS (openable paths) named
 * NAMES (as the process sees them), given in symbol lookup order; the
 * first NPRELOAD of them after the executable (index 0) were LD_PRELOAD'ed.
 * Fills *A.  Returns 0, or -ENOENT when no object defines malloc.
 * Free with allocator_free().
 */
int allocator_detect(char *const *paths, char *const *names, size_t n, size_t npreload,
		     struct allocator *a);

void allocator_free(struct allocator *a);

#endif
