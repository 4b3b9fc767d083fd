/* A frame's rule, for both walks (walk.bpf.h's x86_64 one, walk_a64.bpf.h's
 * aarch64 one): the per-CPU rule cache in front of the table search, and
 * the uretprobe trampoline a return address may have been replaced by.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_WALK_RULE_BPF_H
#define DWLEAK_WALK_RULE_BPF_H

#include "constants.h"
#include "maps.bpf.h"
#include "walk_ctx.bpf.h"
#include "mappings.bpf.h"

static __always_inline struct rule_cache_slot *rule_cache_get(__u64 pc)
{
	__u32 i = cpu_slot((__u32)((pc * 0x9e3779b97f4a7c15ull) >> (64 - RULE_CACHE_BITS)), RULE_CACHE_BITS);

	return bpf_map_lookup_elem(&rule_cache, &i);
}

/* Copies the rule for runtime address LOOKUP, searched in the tables (a
 * miss in rule_cache), to OUT; returns -1 with w->end set when there is
 * none.  Global: verified once on its own, which keeps the walker's own
 * verification small. */
__noinline int rule_search(struct walk_ctx *w, __u64 lookup, struct unwind_rule *out)
{
	const struct unwind_rule *rule;
	int s;

	if (!w || !out)
		return -1;
	s = slot_find(w, lookup);
	if (s < 0)
		return -1;
	s &= DWLEAK_VMA_CACHE - 1;
	if (w->slot[s].state == SLOT_ANON) {
		w->end = w->tramp && w->r.pc == w->tramp ? WALK_ERR_TRAMPOLINE : WALK_ERR_NO_MAPPING;
		return -1;
	}
	if (w->slot[s].state != SLOT_TABLE) {
		w->end = WALK_ERR_NO_TABLE;
		return -1;
	}
	rule = rule_find(w->slot[s].table_id, w->slot[s].rule_base, lookup - w->slot[s].bias);
	if (!rule) {
		w->end = WALK_ERR_NO_FDE;
		return -1;
	}
	*out = *rule;
	return 0;
}

/* Direct loads through the task's BTF pointers (the verifier guards them),
 * not BPF_CORE_READ: each of its bpf_probe_read_kernel calls costs ~40 ns. */
static __always_inline __u64 uretprobe_trampoline(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct xol_area *xol;
	struct mm_struct *mm;

	mm = task->mm;
	if (!mm)
		return 0;
	xol = mm->uprobes_state.xol_area;
	return xol ? xol->vaddr : 0;
}

#endif
