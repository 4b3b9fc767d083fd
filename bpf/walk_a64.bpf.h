/* The DWARF walk on aarch64 (issue 26): frame by frame from the probe's
 * registers with bpf/abi/unwind_step_a64.h's step (the one vm/walk_a64.c
 * walks stopped processes with in the arm64 guest, against gdb), each
 * frame's rule from the rule cache and tables x86_64's walk uses
 * (walk_rule.bpf.h), the words from the stack snapshot.  The kernel's
 * sigreturn trampoline, which has no CFI there, is known by its
 * instructions.  No walk_memo yet: every walk is made.
 * Included by walk.bpf.h when built for arm64; part of dwleak.bpf.c's one
 * translation unit (see there). */
#ifndef DWLEAK_WALK_A64_BPF_H
#define DWLEAK_WALK_A64_BPF_H

#include "arch.bpf.h"
#include "constants.h"
#include "maps.bpf.h"
#include "snap.bpf.h"
#include "stacks.bpf.h"
#include "walk_ctx.bpf.h"
#include "walk_rule.bpf.h"

/* The step's reads: stack words from the snapshot (else a new one); the
 * only other address it reads is the frame's pc, for the sigreturn
 * trampoline's instructions, which are code, never in the snapshot. */
static __always_inline int walk_a64_read(void *arg, __u64 *dst, __u64 addr)
{
	struct walk_ctx *w = arg;

	if (addr == w->r.pc)
		return read_u64(dst, addr) ? WALK_ERR_READ : 0;
	return snap_read(&w->snap, dst, addr) ? WALK_ERR_READ : 0;
}

static const struct unwind_step_a64_ops walk_a64_ops = { walk_a64_read };

/*
 * A return address the walk recovered that is the uretprobe trampoline:
 * arm64's uretprobes replace x30 at the probed call's entry, so the callee
 * saved the trampoline where its caller's return address would be, at a
 * place the entry could not know.  The pending calls (thread_state.calls,
 * outermost first) each hid one, and the walk meets them innermost first:
 * the K-th trampoline met is the (depth - 1 - K)-th pending call's.
 */
static __noinline int walk_a64_unhide(struct walk_ctx *w)
{
	struct thread_state *ts;
	__u32 k;

	if (!w)
		return WALK_ERR_TRAMPOLINE;
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (!ts || w->tramps >= ts->depth || ts->depth > DWLEAK_MAX_PENDING)
		return WALK_ERR_TRAMPOLINE;
	k = (ts->depth - 1 - w->tramps) & (DWLEAK_MAX_PENDING - 1);
	w->r.pc = ts->calls[k].ra;
	w->tramps++;
	count(CNT_TRAMPOLINE_FIXED);
	return w->r.pc ? 0 : WALK_END_ZERO_RA;
}

/* Steps the walk by RULE, or through a signal frame when RULE is NULL (no
 * rule at pc: the sigreturn trampoline, or the walk ends with the reason
 * rule_search gave).  Returns 1 to stop.  Global: verified once. */
__noinline int walk_a64_apply(struct walk_ctx *w, struct unwind_rule *rule)
{
	__u32 why;
	int ret;

	if (!w)
		return 1;
	if (!rule) {
		why = w->end;
		ret = unwind_a64_signal(&w->r, &w->end, &walk_a64_ops, w);
		if (ret < 0)
			w->end = why; /* not a signal frame: rule_search's reason */
		return ret != 0;
	}
	if (unwind_step_a64(&w->r, rule, &w->end, &walk_a64_ops, w))
		return 1;
	if (w->tramp && w->r.pc == w->tramp) {
		ret = walk_a64_unhide(w);
		if (ret) {
			w->end = (__u32)ret;
			return 1;
		}
	}
	return 0;
}

/* One frame: record pc, find its rule (the cache, else the tables), step
 * to the caller.  bpf_loop's callback: returns 0 (go on) or 1 (stop), and
 * nothing else (Linux 6.1's verifier checks the range: a global
 * function's int is not known to be in it).  LOOP_CTX holds the walk's
 * state: bpf_loop's context must be on the stack there, the state is in
 * walk_a64_state. */
static long walk_a64_frame(__u64 i, struct walk_ctx **loop_ctx)
{
	struct walk_ctx *w = *loop_ctx;
	struct unwind_rule rule;
	__u32 n;

	if (!walk_frame_record(w, &n))
		return 1;
	if (walk_rule_get(w, unwind_a64_lookup_pc(&w->r), &rule))
		return walk_a64_apply(w, NULL) ? 1 : 0;
	return walk_a64_apply(w, &rule) ? 1 : 0;
}

/* The walk's state, one per CPU (walker_enter lets one walk run on a CPU
 * at a time): BPF's 512 bytes of stack are shared by a program and the
 * functions it calls, and the walk's state with its mapping cache is most
 * of them (Linux 6.1 refused the allocator's entry program with it on the
 * stack: 576 bytes). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk_ctx);
} walk_a64_state SEC(".maps");

/* Walks the user stack from the registers CTX and stores it: WHO is the
 * process's tgid << 32 | its proc_maps slot.  Returns the stack id, or
 * DWLEAK_STACK_NOT_STORED. */
static __noinline __u64 stack_walk_a64(struct pt_regs *ctx, __u32 kind, __u64 who, __u32 image,
				       struct snap_ctx *sn)
{
	struct stack_trace *st;
	struct walk_ctx *w;
	__u32 zero = 0;

	if (!ctx || !sn)
		return 0;
	w = bpf_map_lookup_elem(&walk_a64_state, &zero);
	if (!w)
		return 0;
	__builtin_memset(w, 0, sizeof(*w));
	w->r.pc = PT_REGS_IP(ctx);
	w->r.sp = PT_REGS_SP(ctx);
	w->r.fp = ARCH_FP(ctx);
	w->r.fp_ok = 1;
	w->r.lr = ARCH_CODE_ADDR(ARCH_LR(ctx));
	w->r.lr_ok = 1;
	w->r.pac_mask = pac_mask;
	w->r.exact_pc = 1;
	w->sp0 = w->r.sp;
	w->tgid = (__u32)(who >> 32);
	w->pslot = (__u32)who;
	w->hash = FNV64_OFFSET ^ kind ^ ((__u64)image << 32);
	w->tramp = uretprobe_trampoline();
	w->end = WALK_END_TRUNCATED;
	w->snap = *sn;
	bpf_loop(DWLEAK_MAX_FRAMES + 1, walk_a64_frame, &w, 0);
	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 0;
	walk_finish(w, st, kind, image);
	*sn = w->snap;
	sn->want = w->r.sp - w->sp0; /* the last frame's CFA: as far as the walk read, about */
	return stack_store(w->hash, st);
}

/* Walks the user stack at a probe (an allocator's entry, a memory system
 * call) and stores it.  Returns the stack id (a hash of its frames, kind
 * and end, seeded with the process's IMAGE), or DWLEAK_STACK_NOT_STORED. */
static __always_inline __u64 stack_walk(struct pt_regs *ctx, __u32 kind, __u32 tgid, __u32 pslot,
					__u32 image, struct snap_ctx *sn)
{
	return stack_walk_a64(ctx, kind, (__u64)tgid << 32 | pslot, image, sn);
}

#endif
