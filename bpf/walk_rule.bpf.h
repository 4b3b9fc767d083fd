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

/* A frame's pc into the stack being stored (scratch) and the walk's hash:
 * both walks' first part of a frame.  Returns the stack, its *N-th pc
 * written, or NULL to stop (no scratch; or the stack is full: W->end). */
static __always_inline struct stack_trace *walk_frame_record(struct walk_ctx *w, __u32 *n_out)
{
	struct stack_trace *st;
	__u32 zero = 0, n = w->n;

	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return NULL;
	if (n >= DWLEAK_MAX_FRAMES) {
		w->end = WALK_END_TRUNCATED;
		return NULL;
	}
	st->pcs[n] = w->r.pc | (n && w->r.exact_pc ? DWLEAK_FRAME_EXACT : 0);
	w->n = n + 1;
	w->hash = (w->hash ^ w->r.pc) * FNV64_PRIME;
	*n_out = n;
	return st;
}

/* The rule for runtime address LOOKUP into *RULE: from the per-CPU rule
 * cache, else searched in the tables (and cached).  Returns 0, or -1 with
 * w->end set (rule_search's reason). */
static __always_inline int walk_rule_get(struct walk_ctx *w, __u64 lookup, struct unwind_rule *rule)
{
	__u32 gen = rule_gen;
	struct rule_cache_slot *cs = rule_cache_get(lookup);

	if (cs && cs->pc == lookup && cs->gen == gen && cs->tgid == w->tgid) {
		*rule = cs->rule;
		return 0;
	}
	w->misses++;
	if (rule_search(w, lookup, rule))
		return -1;
	if (cs) {
		cs->pc = lookup;
		cs->gen = gen;
		cs->tgid = w->tgid;
		cs->rule = *rule;
	}
	return 0;
}

/* A finished walk W into the stack ST being stored (its KIND, the
 * process's IMAGE): the frames' count, its end, the walk counters; its
 * hash made final in W->hash, the stack's id.  Both walks' last part. */
static __always_inline void walk_finish(struct walk_ctx *w, struct stack_trace *st, __u32 kind, __u32 image)
{
	st->nframes = w->n;
	st->end = w->end;
	st->kind = kind;
	st->fp = 0;
	st->image = image;
	w->hash = (w->hash ^ w->end) * FNV64_PRIME;
	w->hash ^= w->hash >> 29;
	count(CNT_WALKS);
	count_n(CNT_FRAMES, w->n); /* once a walk, not a map lookup per frame */
	if (w->misses)
		count_n(CNT_RULE_CACHE_MISSES, w->misses);
	count(CNT_WALK_END_BASE + (w->end < WALK_END_COUNT ? w->end : WALK_ERR_READ));
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
