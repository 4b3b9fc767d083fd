/* Which allocator a process really uses, and where its functions are.
 * Each allocator function is probed where the dynamic linker binds it
 * for this process: the first object in lookup order (executable,
 * LD_PRELOAD'ed libraries, then the rest in load order) that exports it,
 * or the executable's own definition in a static program.  So an
 * allocator dwleak has never heard of is traced all the same, and named
 * for what it is ("custom allocator in libfoo.so").  Known families and
 * their own entry points: glibc, tcmalloc (tc_*), jemalloc (mallocx & co,
 * je_ and Rust's _rjem_ prefixes), mimalloc (mi_*).  C++ operators are
 * probed where they are bound, except libstdc++'s and libc++'s plain ones,
 * which only call malloc and free (probed already: the walk shows operator
 * new as malloc's caller); their aligned ones round the size, so they are
 * probed.  Allocator functions the program imports that dwleak does not
 * probe are listed, never silently missed. */
#ifndef DWLEAK_ALLOCATOR_H
#define DWLEAK_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc_kind.h"

struct alloc_func {
	const char *name;  /* static string: the first of its aliases in dwleak's lists */
	uint32_t kind;	   /* enum alloc_kind: how its arguments are read */
	uint64_t vaddr;	   /* ELF address of the symbol */
	uint64_t size;	   /* st_size; 0 when unknown */
	uint64_t file_off; /* the symbol's file offset */
	uint64_t site_off; /* entry-only probes: where in the function (probe_site.h) */
	const char *site_why;
};

/* One object's probed functions; aliases (one address, several names)
 * appear once. */
struct alloc_object {
	char *path; /* where to open and attach it (may be /proc/PID/...) */
	char *name; /* its path as the process sees it, for messages */
	struct alloc_func *funcs;
	size_t nfuncs, cap;
};

struct allocator {
	const char *family;	     /* "glibc", "tcmalloc", "jemalloc", "mimalloc", "custom" */
	char *description;	     /* "mimalloc in /usr/lib/.../libmimalloc.so.2 (LD_PRELOAD)",
				      * "custom allocator in /opt/lib/libfoo.so" */
	bool preloaded;		     /* malloc's provider came from LD_PRELOAD */
	bool in_executable;	     /* malloc is the executable's own */
	struct alloc_object *objs;   /* objs[0] provides malloc */
	size_t nobjs;
	char **not_covered;	     /* "mi_heap_malloc (imported by /usr/bin/app)": allocator
				      * functions the program calls that are not probed */
	size_t nnot_covered;
};

/* Returns the public name of KIND ("malloc", "operator new", ...). */
const char *alloc_kind_name(uint32_t kind);

/* True for kinds whose call frees (free, delete, sdallocx, dallocx). */
bool alloc_kind_frees(uint32_t kind);

/*
 * Finds the allocator among the N objects PATHS (openable paths) named
 * NAMES (as the process sees them), given in symbol lookup order; the
 * first NPRELOAD of them after the executable (index 0) were LD_PRELOAD'ed.
 * Fills *A.  Returns 0, or -ENOENT when no object defines malloc (a
 * stripped static executable names none), -ENOMEM.  Free with
 * allocator_free().
 */
int allocator_detect(char *const *paths, char *const *names, size_t n, size_t npreload,
		     struct allocator *a);

/* True when SYM is one of the allocator functions dwleak knows (with
 * the prefixes it looks for: je_, _rjem_; tc_*, mi_*, C++ operators). */
bool allocator_name_known(const char *sym);

/* A deep copy of SRC into *DST (a forked child uses its parent's).
 * Returns 0 or -ENOMEM (DST then empty). */
int allocator_copy(struct allocator *dst, const struct allocator *src);

void allocator_free(struct allocator *a);

#endif
