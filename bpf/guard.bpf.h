/* The guard that keeps two programs on one CPU out of the walker's
 * per-CPU buffers at once, on kernels that preempt BPF programs.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_GUARD_BPF_H
#define DWLEAK_GUARD_BPF_H

#include "maps.bpf.h"

/*
 * The walker's per-CPU buffers (stack_snap, scratch) and caches
 * (rule_cache, walk_memo, stack_seen) assume one program at a time per
 * CPU.  Uprobe programs run with migration disabled, not preemption: on a
 * kernel that preempts kernel code (preempt=full or lazy, PREEMPT_RT), a
 * thread preempted inside the walker and another thread's probe on the
 * same CPU would share them, and a stack could come out wrong without a
 * sign.  There user space sets guard_preempt and the programs count
 * themselves in and out; one that finds the buffers in use skips its walk
 * (the allocation is kept, under DWLEAK_STACK_WALKER_BUSY, and counted).
 * Elsewhere the verifier drops the guard as dead code.
 */

/* True when this program may use the walker's buffers; it must then call
 * walker_leave.  A caller that skips a walk for it counts CNT_WALKER_BUSY. */
static __always_inline bool walker_enter(void)
{
	__u32 zero = 0;
	__u64 *n;

	if (guard_preempt == PREEMPT_GUARD_OFF)
		return true;
	n = bpf_map_lookup_elem(&walker_users, &zero);
	if (guard_preempt == PREEMPT_GUARD_ON && n && __sync_fetch_and_add(n, 1) == 0)
		return true;
	if (guard_preempt == PREEMPT_GUARD_ON && n)
		__sync_fetch_and_add(n, -1);
	return false;
}

static __always_inline void walker_leave(void)
{
	__u32 zero = 0;
	__u64 *n;

	if (guard_preempt != PREEMPT_GUARD_ON)
		return;
	n = bpf_map_lookup_elem(&walker_users, &zero);
	if (n)
		__sync_fetch_and_add(n, -1);
}

#endif
