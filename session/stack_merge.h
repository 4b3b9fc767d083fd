/* Merging the report stacks that read the same (session/build.c). */
#ifndef DWLEAK_SESSION_STACK_MERGE_H
#define DWLEAK_SESSION_STACK_MERGE_H

#include <stddef.h>

#include "report.h"

/*
 * Different walks can end as the same report stack once cut (a Go stack
 * switch: what lay past it differed): they are merged, so a report never
 * shows one stack twice.  S holds *NSTACKS stacks, PROC[i] the process of
 * stack i (stacks of different processes never merge).  Two that read the
 * same (allocator, frames, fp frames, how the walk ended) become the first
 * of them, with the other's bytes, allocations, leak kinds, residency, age
 * and growth added; S is compacted in place, its order kept, and
 * *NSTACKS set to what is left.  The frames are not freed (they live in
 * the caller's arena).  Returns 0 or -ENOMEM (S untouched).
 */
int stacks_merge(struct report_stack *s, size_t *nstacks, const size_t *proc);

#endif
