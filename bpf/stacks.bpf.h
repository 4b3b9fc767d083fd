/* A walked stack's way out to user space: the stacks map, behind a
 * per-CPU cache of the ids this CPU already stored.  Both walkers store
 * through it.  The map is a staging area: user space moves its entries
 * out (copies them, then deletes them) as images end and whenever it is
 * half full, so a cached id may name an entry user space holds by now;
 * it keeps every stack of an image that still has processes
 * (session/stack_store.c), and ids are seeded with the image.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_STACKS_BPF_H
#define DWLEAK_STACKS_BPF_H

#include "maps.bpf.h"

#define EEXIST 17

/* Stores stack ST under ID in the stacks map, unless this CPU already did.
 * Returns ID when the map holds it (or held it: user space has it then),
 * DWLEAK_STACK_NOT_STORED when the map was full (counted). */
static __u64 stack_store(__u64 id, struct stack_trace *st)
{
	__u32 i = cpu_slot((__u32)(id >> (64 - STACK_SEEN_BITS)), STACK_SEEN_BITS);
	__u64 *seen = bpf_map_lookup_elem(&stack_seen, &i);
	int err;

	if (seen && *seen == id)
		return id;
	/* -EEXIST: another CPU stored it, or this one before its cache
	 * forgot; an id user space moved out is stored again, and user space
	 * takes the second copy for the one it has */
	/* the low 32 bits: before Linux 6.4 (d7ba4cc900bf, "bpf: return long
	 * from bpf_map_ops funcs") the map's own update, which the verifier
	 * calls in the helper's place, returns an int, and on arm64 its upper
	 * half comes back unextended: -EEXIST read as 4294967279 made every
	 * stack another CPU had stored look like a full map (6.1, the guest) */
	err = (int)bpf_map_update_elem(&stacks, &id, st, BPF_NOEXIST);
	if (!err) {
		count(CNT_STACKS_STORED);
	} else if (err != -EEXIST) {
		count(CNT_STACKS_FULL);
		return DWLEAK_STACK_NOT_STORED;
	}
	if (seen)
		*seen = id;
	return id;
}

#endif
