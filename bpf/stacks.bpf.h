/* A walked stack's way out to user space: the stacks map, behind a
 * per-CPU cache of the ids this CPU already stored.  Both walkers store
 * through it.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_STACKS_BPF_H
#define DWLEAK_STACKS_BPF_H

#include "maps.bpf.h"

/* Stores stack ST under ID in the stacks map, unless this CPU already did.
 * Returns 0 when the map holds it. */
static int stack_store(__u64 id, struct stack_trace *st)
{
	__u32 i = (__u32)(id >> (64 - STACK_SEEN_BITS));
	__u64 *seen = bpf_map_lookup_elem(&stack_seen, &i);

	if (seen && *seen == id)
		return 0;
	if (bpf_map_update_elem(&stacks, &id, st, BPF_NOEXIST) && !bpf_map_lookup_elem(&stacks, &id)) {
		count(CNT_STACKS_FULL);
		return -1;
	}
	if (seen)
		*seen = id;
	return 0;
}

#endif
