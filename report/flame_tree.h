/* The flame graph's tree: a report's stacks merged into boxes, callers
 * below callees, with byte and allocation sums; the svg writer draws it. */
#ifndef DWLEAK_FLAME_TREE_H
#define DWLEAK_FLAME_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report.h"

/*
 * Which kind a frame is, and so which colours svg.c gives it; the first rule
 * that matches:
 *  1. allocator: the function is an allocation entry point (malloc, calloc,
 *     realloc, reallocarray, free, cfree, posix_memalign, aligned_alloc,
 *     memalign, valloc, pvalloc, malloc_usable_size, mmap, mmap64, munmap,
 *     mremap), any "operator new..." or "operator delete...", the tcmalloc
 *     (tc_*) and jemalloc (je_*, *allocx) entry points; or the frame is in
 *     libc and its name is a glibc malloc internal (_int_*, __libc_malloc...,
 *     sysmalloc, tcache_*, malloc_*, __malloc_*, _mid_memalign); or the
 *     module is tcmalloc or jemalloc itself (everything in there is the
 *     allocator's business).
 *  2. user: the main executable (the module is the report's command), or any
 *     module outside the system library directories of rule 3, which makes
 *     the program's own shared libraries (./libfoo.so, /opt/app/lib) user
 *     code too.
 *  3. system: a module under /lib, /lib32, /lib64, /usr/lib, /usr/lib32,
 *     /usr/lib64 or /usr/libexec, or the kernel's [vdso] and [vsyscall].
 *  4. other: no module known, and the boxes dwleak adds itself ("all",
 *     "[incomplete: why]", "[N more stacks]", a process's "COMMAND [PID]",
 *     "[unclassified]").
 * A leak check's kind box ("[definitely_lost]", ...) has a kind of its own
 * each, FLAME_FIRST_LEAK + enum report_leak_kind, so the graph is coloured
 * by kind where it splits by kind.
 * Within a kind the shade is a hash of the name, so neighbours differ and a
 * function keeps its colour from one report to the next.
 */
enum flame_kind {
	FLAME_USER,
	FLAME_SYSTEM,
	FLAME_ALLOC,
	FLAME_OTHER,
#define FLAME_LEAK_KIND(id, name, phrase) FLAME_##id,
	REPORT_LEAK_KINDS(FLAME_LEAK_KIND)
#undef FLAME_LEAK_KIND
	FLAME_NKINDS
};

#define FLAME_FIRST_LEAK FLAME_DEFINITELY_LOST

#define FLAME_NO_NODE SIZE_MAX /* no parent, child or sibling */

/*
 * One box of the graph: a frame reached through one chain of callers.  Node 0
 * is the root.  A node's BYTES and ALLOCATIONS are at least the sums over its
 * children (a stack ending at the node adds to it alone); siblings differ in
 * (NAME, MODULE, INLINED).  Children form a list through SIBLING, sorted by
 * bytes, largest first, then by name, module and inlined, once
 * flame_tree_build() has returned.
 */
struct flame_node {
	const char *name;     /* the report's string, or OWNED */
	char *owned;          /* a name the tree formatted, else NULL */
	const char *module;   /* borrowed from the report; NULL = none */
	enum flame_kind kind;
	bool inlined;
	uint64_t bytes;
	uint64_t allocations;
	uint64_t hash;        /* of (parent, name, module, inlined) */
	size_t parent, child, sibling;
};

/* Whether K is a leak check's kind box. */
#define FLAME_IS_LEAK(k) ((k) >= FLAME_FIRST_LEAK && (k) < FLAME_NKINDS)

/*
 * The nodes in one growing array, and an open-addressing index over them by
 * their hash so that merging a stack costs a lookup per frame, not a scan of
 * the siblings.  NSLOTS is a power of two kept above twice N.
 */
struct flame_tree {
	struct flame_node *nodes;
	size_t n, cap;
	size_t *slots;        /* node indices; FLAME_NO_NODE = empty */
	size_t nslots;
};

/*
 * Builds in T the tree of R's stacks that have bytes: the first TOP of them
 * in report_sort() order (0 = all) frame by frame, the rest as one
 * "[N more stacks]" box under the root.  A report of several processes has
 * a box per process ("COMMAND [PID]") under the root; a report with a leak
 * check a box per kind (report_part_label()) under that, each stack split
 * into its kinds' bytes.  Child lists come sorted (see
 * struct flame_node).  Names and modules are borrowed from R, which must
 * outlive T.  The caller frees T with flame_tree_free(), also on error.
 * Returns 0 or -ENOMEM.
 */
int flame_tree_build(struct flame_tree *t, const struct report *r, unsigned int top);

/* Frees what T holds (not T itself). */
void flame_tree_free(struct flame_tree *t);

/* A hash of NAME (NULL = ""), the same from one report to the next: the
 * shade of a box within its kind's colours. */
uint64_t flame_name_hash(const char *name);

#endif
