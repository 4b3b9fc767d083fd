/* The agent's bound on memory per process (--max-stacks): outstanding
 * bytes and allocations by stack, at most MAX stacks; when a new stack
 * would pass the bound, the least recently grown one is folded into one
 * counted [evicted] entry, so totals stay exact and nothing is silently
 * dropped.  Pure: keys are whatever identifies a stack to the caller. */
#ifndef DWLEAK_AGENT_STACK_TABLE_H
#define DWLEAK_AGENT_STACK_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"

/* One stack's outstanding allocations. */
struct stack_table_entry {
	uint64_t key;
	uint64_t bytes;
	uint64_t allocations;
};

/* What was folded into [evicted]: what is still outstanding there, and
 * how many stacks were folded in all. */
struct stack_table_evicted {
	uint64_t bytes;
	uint64_t allocations;
	uint64_t stacks;
};

struct stack_table;

/*
 * Makes an empty table of at most MAX stacks (0: no bound).  ON_EVICT,
 * when not NULL, is called with CTX and the key of each stack folded into
 * [evicted] (the caller may let go of that stack's frames).  Returns 0
 * and *OUT, or -ENOMEM.  Free with stack_table_free().
 */
int stack_table_new(size_t max, void (*on_evict)(void *ctx, uint64_t key), void *ctx,
		    struct stack_table **out);
void stack_table_free(struct stack_table *t);

/*
 * Adds ALLOCATIONS allocations of BYTES bytes in all to stack KEY, which
 * becomes the most recently grown; a stack not in the table is added,
 * evicting the least recently grown one when the table is full.
 * Returns 0 or -ENOMEM (T unchanged).
 */
int stack_table_add(struct stack_table *t, uint64_t key, uint64_t bytes, uint64_t allocations);

/*
 * Takes away what was freed of stack KEY: from its entry, and what the
 * entry does not hold (allocated before it was evicted) from [evicted].
 * An entry left with nothing is removed (not evicted).  No amount goes
 * below zero.  Returns the bytes that could be taken from nowhere: 0
 * unless the caller takes away more than it added.
 */
uint64_t stack_table_sub(struct stack_table *t, uint64_t key, uint64_t bytes, uint64_t allocations);

/* How many stacks T holds ([evicted] not counted). */
size_t stack_table_count(const struct stack_table *t);

/* The entry of KEY, NULL when T has none; valid until T next changes. */
const struct stack_table_entry *stack_table_get(const struct stack_table *t, uint64_t key);

/*
 * Copies every entry into *OUT (malloc'd, the caller frees; NULL when
 * empty), least recently grown first, and sets *N.  Returns 0 or -ENOMEM.
 */
int stack_table_entries(const struct stack_table *t, struct stack_table_entry **out, size_t *n);

/* What [evicted] holds. */
void stack_table_evicted(const struct stack_table *t, struct stack_table_evicted *out);

/* The name of the one frame of the [evicted] stack in reports. */
#define STACK_TABLE_EVICTED_NAME "[evicted]"

/*
 * Fills *OUT with the report stack of E: E's bytes and allocations under
 * one frame named [evicted] (static, no module), growth and age unknown,
 * for the caller's report beside the table's own stacks; PID is its
 * process.  A report shows it like any stack, so its bytes are in the
 * totals and its name says why its frames are not known.
 */
void stack_table_evicted_stack(const struct stack_table_evicted *e, int pid, struct report_stack *out);

#endif
