/* Moving walked stacks out of the kernel's stacks map (a staging area of
 * fixed size) into the tracer's stack store, and letting an image's go
 * when its last process is gone: the steps of the invariant written in
 * cli/stack_store.c, in the order it needs them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trace_stacks.h"

static int stack_put(void *ctx, uint64_t id, const struct stack_trace *st)
{
	return stack_store_put(ctx, id, st);
}

int trace_stacks_move(struct tracer *tr)
{
	long n = probes_stacks_move(tr->probes, stack_put, tr->stacks);

	if (n < 0 && !tr->stacks_move_failed) {
		/* what stays in the kernel map is moved at the next try; a walk
		 * the store had no memory for is lost, and its allocations go
		 * without a stack (counted at the report) */
		fprintf(stderr, "dwleak: warning: moving walked stacks out of the BPF map failed: %s\n",
			strerror((int)-n));
		tr->stacks_move_failed = true;
	}
	return n < 0 ? (int)n : 0;
}

void trace_stacks_pressure(struct tracer *tr)
{
	uint64_t cap, held = probes_stacks_held(tr->probes, &cap, NULL);

	if (2 * held >= cap)
		trace_stacks_move(tr);
}

static void keep_id(void *ctx, uint64_t id)
{
	stack_store_keep(ctx, id);
}

void trace_stacks_leave(struct tracer *tr, struct proc *p)
{
	uint32_t img = p->image;
	size_t i;

	if (!stack_store_image_leave(tr->stacks, img))
		return;
	/* no walk of IMG is on its way any more: what it stored is all in
	 * the kernel map or the store */
	trace_stacks_move(tr);
	/* ids are seeded with the image: only its processes' ledgers name
	 * them (a process that exec'd since has a new ledger, of its new one) */
	for (i = 0; i < tr->procs.n; i++)
		if (tr->procs.v[i]->image == img)
			ledger_stack_ids(&tr->procs.v[i]->ledger, keep_id, tr->stacks);
	stack_store_image_end(tr->stacks, img);
}
