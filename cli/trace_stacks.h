/* The walked stacks' way from the kernel's stacks map into the tracer's
 * stack store, and out of the store when their image ends (the invariant
 * is in cli/stack_store.c, which owns them). */
#ifndef DWLEAK_TRACE_STACKS_H
#define DWLEAK_TRACE_STACKS_H

#include "tracer.h"

/* Moves every walk in the kernel map into the store.  Returns 0 or a
 * negative errno (said on stderr). */
int trace_stacks_move(struct tracer *tr);

/* From the poll loop: moves them when the kernel map is half full. */
void trace_stacks_pressure(struct tracer *tr);

/* P left its image (it exited or exec'd; its records are applied and its
 * ledger sealed or emptied).  When it was the image's last process, ends
 * the image: every walk moved into the store, the ids the ledgers of the
 * image's processes name kept, the image's other stacks freed. */
void trace_stacks_leave(struct tracer *tr, struct proc *p);

#endif
