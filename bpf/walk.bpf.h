/* The DWARF walk: frame by frame from the probe's registers, each frame's
 * rule from a per-CPU cache in front of the table search, the common rules
 * stepped inline; whole walks remembered per CPU (walk_memo) and checked
 * instead of made again.  The step itself is bpf/abi/unwind_step.h's,
 * which user space compiles too: this file gives it its reads (the stack
 * snapshot, the uretprobe trampoline's real return address) and records
 * what it read for walk_memo.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_WALK_BPF_H
#define DWLEAK_WALK_BPF_H

#include "constants.h"
#include "maps.bpf.h"
#include "snap.bpf.h"
#include "walk_ctx.bpf.h"
#include "mappings.bpf.h"
#include "stacks.bpf.h"
#include "walk_rule.bpf.h"

#if defined(__TARGET_ARCH_arm64)
#include "walk_a64.bpf.h"
#else

/* Records in walk_memo slot IDX that word N, OFF bytes above the start's
 * rsp, held VAL.  Returns -1 when the walk cannot be remembered. */
__noinline int memo_note(__u32 idx, __u32 n, __u64 off, __u64 val)
{
	struct walk_memo *m = bpf_map_lookup_elem(&walk_memo, &idx);

	if (!m || n >= WALK_MEMO_WORDS || off > 0xffffffffull)
		return -1;
	/* hide the check from clang, which would drop the mask the verifier needs */
	asm volatile("" : "+r"(n));
	n &= WALK_MEMO_WORDS - 1;
	m->off[n] = (__u32)off;
	m->val[n] = val;
	return 0;
}

/* Records that the stack word at ADDR held VAL, for walk_memo: through
 * memo_note (a call) in walk_apply, which is verified once and should
 * stay small; memo_record_inline, the same without the call, in
 * walk_step's try and in bp_use. */
static __always_inline void memo_record(struct walk_ctx *w, __u64 addr, __u64 val)
{
	if (w->rec && (addr < w->sp0 || memo_note(w->memo_idx, w->nrec, addr - w->sp0, val)))
		w->rec = 0;
	w->nrec++;
}

static __always_inline void memo_record_inline(struct walk_ctx *w, __u64 addr, __u64 val)
{
	__u64 off = addr - w->sp0;
	struct walk_memo *m;
	__u32 k = w->nrec;

	w->nrec = k + 1;
	if (!w->rec)
		return;
	m = bpf_map_lookup_elem(&walk_memo, &w->memo_idx);
	/* an address below sp0 wraps OFF far above 4 GiB */
	if (!m || k >= WALK_MEMO_WORDS || off > 0xffffffffull) {
		w->rec = 0;
		return;
	}
	/* hide the check from clang, which would drop the mask the verifier
	 * needs (clang 14: walk_apply failed to load on Linux 6.18) */
	asm volatile("" : "+r"(k));
	k &= WALK_MEMO_WORDS - 1;
	m->off[k] = (__u32)off;
	m->val[k] = val;
}

/*
 * The step's bp_use: the frame's rbp is about to be used by a rule, so
 * the stack word it was restored from becomes one of the walk's inputs,
 * recorded for walk_memo now.  Restored values no rule uses (rbp is a
 * general register in code built without frame pointers: python's
 * interpreter saves a different object pointer there at every call) are
 * never recorded, so they do not keep an identical walk from being
 * remembered.
 */
static __always_inline void bp_use(struct unwind_regs *r)
{
	struct walk_ctx *w = walk_of(r);

	w->use_bp0 |= w->bp_reg;
	if (!w->bp_unrec)
		return;
	w->bp_unrec = 0;
	memo_record_inline(w, w->bp_addr, r->bp);
}

/* The caller's rbp is the word at ADDR: recorded only if a rule uses it
 * (bp_use). */
static __always_inline void bp_restored(struct walk_ctx *w, __u64 addr)
{
	w->bp_reg = 0;
	w->bp_addr = addr;
	w->bp_unrec = 1;
}

/* While one of our uretprobes is pending the stack holds the kernel's
 * trampoline where the return address was; the real address was saved at
 * the probed call's entry.  Stores it for the slot at ADDR in *RA. */
static int ra_unhide(struct walk_ctx *w, __u64 addr, __u64 *ra)
{
	struct thread_state *ts;
	int i;

	w->rec = 0; /* the recovered address comes from thread state, not the stack */
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (ts) {
		for (i = 0; i < DWLEAK_MAX_PENDING; i++) {
			if (i < ts->depth && ts->calls[i].ra_addr == addr) {
				*ra = ts->calls[i].ra;
				count(CNT_TRAMPOLINE_FIXED);
				return 0;
			}
		}
	}
	return WALK_ERR_TRAMPOLINE;
}

/* The step's reads: from the stack snapshot, else a new one (snap_read). */
static __always_inline int walk_read(struct unwind_regs *r, __u64 *dst, __u64 addr, enum unwind_word what)
{
	struct walk_ctx *w = walk_of(r);

	if (snap_read(&w->snap, dst, addr))
		return WALK_ERR_READ;
	if (what == UNWIND_WORD_RA && w->tramp && *dst == w->tramp)
		return ra_unhide(w, addr, dst);
	return 0;
}

/* The words the caller's frame came from, recorded for walk_memo. */
static __always_inline void walk_note(struct unwind_regs *r, __u64 addr, __u64 val, enum unwind_word what)
{
	struct walk_ctx *w = walk_of(r);

	if (what == UNWIND_WORD_BP_AT_CFA) {
		bp_restored(w, addr);
		return;
	}
	memo_record(w, addr, val);
	if (what == UNWIND_WORD_BP_AT_BP || what == UNWIND_WORD_SIG_BP) {
		w->bp_reg = 0;
		w->bp_unrec = 0; /* recorded */
	}
}

/* The inline try's reads: from the snapshot only, and never a
 * trampoline (walk_apply takes those frames). */
static __always_inline int walk_try_read(struct unwind_regs *r, __u64 *dst, __u64 addr, enum unwind_word what)
{
	struct walk_ctx *w = walk_of(r);

	if (snap_copy(&w->snap, dst, addr))
		return WALK_ERR_READ;
	if (what == UNWIND_WORD_RA && w->tramp && *dst == w->tramp)
		return WALK_ERR_TRAMPOLINE;
	return 0;
}

static __always_inline void walk_try_note(struct unwind_regs *r, __u64 addr, __u64 val, enum unwind_word what)
{
	struct walk_ctx *w = walk_of(r);

	if (what == UNWIND_WORD_BP_AT_CFA)
		bp_restored(w, addr);
	else
		memo_record_inline(w, addr, val);
}

/* Constant tables: each call of the step below inlines its hooks. */
static const struct unwind_step_ops walk_ops = { walk_read, walk_note, bp_use };
static const struct unwind_step_ops walk_try_ops = { walk_try_read, walk_try_note, bp_use };

/* Computes the caller's frame from RULE (bpf/abi/unwind_step.h).  Returns
 * 1 to stop the walk.  Global, verified once: inlined into the walker's
 * loop its branches multiplied the walker's verification time several
 * times over. */
__noinline int walk_apply(struct walk_ctx *w, struct unwind_rule *rule)
{
	if (!w || !rule)
		return 1;
	return unwind_step(&w->r, rule, &w->end, &walk_ops) != UNWIND_STEP_NEXT;
}

/* One frame: record pc, find its rule, step to the caller: the common
 * rules inline (unwind_step_try: CFA = rsp or rbp + offset, rbp kept or
 * restored from the frame, both words in the snapshot), since each
 * function call costs a return thunk on these CPUs (SRSO mitigation:
 * ~10-20 ns a return), and walk_apply with the snapshot read and the memo
 * record inside made five of them a frame; the others in walk_apply. */
static long walk_step(__u64 i, struct walk_ctx *w)
{
	struct unwind_rule rule;
	struct stack_trace *st;
	__u32 n;
	int ret;

	st = walk_frame_record(w, &n);
	if (!st)
		return 1;
	if (walk_rule_get(w, unwind_lookup_pc(&w->r), &rule))
		return 1;
	if (rule.cfa_type == UNWIND_CFA_SIGNAL)
		st->pcs[n] |= DWLEAK_FRAME_EXACT; /* the trampoline's first byte, not a return */
	ret = unwind_step_try(&w->r, &rule, &w->end, &walk_try_ops);
	if (ret == UNWIND_STEP_DECLINED)
		return walk_apply(w, &rule) ? 1 : 0;
	return ret == UNWIND_STEP_NEXT ? 0 : 1;
}

static __always_inline __u32 walk_memo_idx(__u64 pc, __u64 sp)
{
	return cpu_slot((__u32)(((pc ^ (sp * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull) >> (64 - WALK_MEMO_BITS)),
			WALK_MEMO_BITS);
}

/* True when the walk remembered in slot IDX started where S does (pc, sp,
 * rbp if a rule used it, the process) under the rules in force now and
 * every word it read still holds its value. */
__noinline int memo_match(__u32 idx, const struct walk_start *s, struct snap_ctx *sn)
{
	struct walk_memo *m = bpf_map_lookup_elem(&walk_memo, &idx);
	struct stack_snap *snap;
	__u32 i, zero = 0;
	__u64 v, sp;

	if (!m || !s || !sn || m->pc0 != s->pc || m->sp0 != s->sp || m->gen != rule_gen ||
	    m->tgid != s->tgid || m->image != s->image || (m->use_bp0 && m->bp0 != s->bp))
		return 0;
	sp = s->sp;
	/* one lookup of the snapshot, not one a word: ~4 ns each */
	snap = bpf_map_lookup_elem(&stack_snap, &zero);
	if (!snap)
		return 0;
	for (i = 0; i < WALK_MEMO_WORDS; i++) {
		if (i >= m->nwords)
			return 1;
		/* a word past the snapshot: snap_read takes a new one */
		if (snap_word(snap, sn, &v, sp + m->off[i]) && snap_read(sn, &v, sp + m->off[i]))
			return 0;
		if (v != m->val[i])
			return 0;
	}
	return 1;
}

/* Walks the user stack from S (a walk_memo miss, slot MEMO_IDX), stores
 * it and remembers it in that slot when it can.  Returns the stack id, or
 * DWLEAK_STACK_NOT_STORED when the stacks map had no room for it. */
static __noinline __u64 stack_walk_full(const struct walk_start *s, __u32 kind, struct snap_ctx *sn,
					__u32 memo_idx)
{
	struct walk_ctx w = {};
	struct walk_memo *m;
	struct stack_trace *st;
	__u32 zero = 0, gen = rule_gen;
	__u64 id;

	if (!s || !sn)
		return 0;
	w.r.pc = s->pc;
	w.r.sp = s->sp;
	w.r.bp = s->bp;
	w.memo_idx = memo_idx;
	m = bpf_map_lookup_elem(&walk_memo, &w.memo_idx);
	if (m)
		m->pc0 = 0; /* refilled below, if this walk can be remembered */
	w.sp0 = w.r.sp;
	w.rec = 1;
	w.bp_reg = 1;
	w.r.bp_ok = 1;
	w.r.exact_pc = 1;
	w.tgid = s->tgid;
	w.pslot = s->pslot;
	w.hash = FNV64_OFFSET ^ kind ^ ((__u64)s->image << 32);
	w.tramp = uretprobe_trampoline();
	w.end = WALK_END_TRUNCATED;
	w.snap = *sn;
	bpf_loop(DWLEAK_MAX_FRAMES + 1, walk_step, &w, 0);
	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 0;
	walk_finish(&w, st, kind, s->image);
	id = stack_store(w.hash, st);
	if (id == w.hash && w.rec && w.nrec <= WALK_MEMO_WORDS && m &&
	    (w.end == WALK_END_OK || w.end == WALK_END_ZERO_RA || w.end == WALK_END_TRUNCATED)) {
		m->sp0 = w.sp0;
		m->bp0 = s->bp;
		m->tgid = s->tgid;
		m->image = s->image;
		m->use_bp0 = w.use_bp0;
		m->gen = gen;
		m->nwords = w.nrec;
		m->nframes = w.n;
		m->end = w.end;
		m->stack_id = w.hash;
		m->span = (__u32)(w.r.sp - w.sp0);
		m->pc0 = s->pc;
	}
	*sn = w.snap; /* it may have moved up the stack */
	sn->want = w.r.sp - w.sp0; /* the last frame's CFA: as far as the walk read, about */
	return id;
}

/* Walks the user stack at an allocator's entry and stores it.  Returns the
 * stack id (a hash of its frames, kind and end, seeded with the process's
 * IMAGE), or DWLEAK_STACK_NOT_STORED.  The remembered walk's
 * check is inline: it is the common case, and a call costs a return
 * thunk here. */
static __always_inline __u64 stack_walk(struct pt_regs *ctx, __u32 kind, __u32 tgid, __u32 pslot,
					__u32 image, struct snap_ctx *sn)
{
	struct walk_start s = { PT_REGS_IP(ctx), PT_REGS_SP(ctx), ctx->bp, tgid, pslot, image };
	__u32 idx = walk_memo_idx(s.pc, s.sp);
	struct walk_memo *m;

	if (memo_match(idx, &s, sn)) {
		m = bpf_map_lookup_elem(&walk_memo, &idx);
		if (m) {
			count(CNT_WALKS);
			count(CNT_WALKS_MEMO);
			count_n(CNT_FRAMES, m->nframes);
			count(CNT_WALK_END_BASE + (m->end < WALK_END_COUNT ? m->end : WALK_ERR_READ));
			sn->want = m->span; /* the next read's size, as after the walk */
			return m->stack_id;
		}
	}
	return stack_walk_full(&s, kind, sn, idx);
}

#endif /* x86_64 */

#endif
