/* The DWARF walk: frame by frame from the probe's registers, each frame's
 * rule from a per-CPU cache in front of the table search, the common rules
 * stepped inline; whole walks remembered per CPU (walk_memo) and checked
 * instead of made again.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_WALK_BPF_H
#define DWLEAK_WALK_BPF_H

#include "constants.h"
#include "maps.bpf.h"
#include "snap.bpf.h"
#include "walk_ctx.bpf.h"
#include "mappings.bpf.h"
#include "stacks.bpf.h"

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

/* A walk's user-memory read, recorded for walk_memo. */
static __always_inline int walk_read(struct walk_ctx *w, __u64 *dst, __u64 addr)
{
	if (snap_read(&w->snap, dst, addr))
		return -1;
	if (w->rec && (addr < w->sp0 || memo_note(w->memo_idx, w->nrec, addr - w->sp0, *dst)))
		w->rec = 0;
	w->nrec++;
	return 0;
}

/*
 * The frame's rbp is about to be used by a rule: the stack word it was
 * restored from becomes one of the walk's inputs, so it is recorded for
 * walk_memo now.  Restored values no rule uses (rbp is a general register
 * in code built without frame pointers: python's interpreter saves a
 * different object pointer there at every call) are never recorded, so
 * they do not keep an identical walk from being remembered.
 */
static __always_inline void bp_use(struct walk_ctx *w)
{
	struct walk_memo *m;
	__u32 k = w->nrec;

	w->use_bp0 |= w->bp_reg;
	if (!w->bp_unrec)
		return;
	w->bp_unrec = 0;
	w->nrec = k + 1;
	if (!w->rec)
		return;
	m = bpf_map_lookup_elem(&walk_memo, &w->memo_idx);
	if (!m || k >= WALK_MEMO_WORDS || w->bp_addr < w->sp0 || w->bp_addr - w->sp0 > 0xffffffffull) {
		w->rec = 0;
		return;
	}
	m->off[k & (WALK_MEMO_WORDS - 1)] = (__u32)(w->bp_addr - w->sp0);
	m->val[k & (WALK_MEMO_WORDS - 1)] = w->bp;
}

/* The return address stored at ADDR.  While one of our uretprobes is
 * pending the stack holds the kernel's trampoline there instead; the real
 * address was saved at the probed call's entry. */
static int read_ra(struct walk_ctx *w, __u64 addr, __u64 *ra)
{
	struct thread_state *ts;
	int i;

	if (walk_read(w, ra, addr)) {
		w->end = WALK_ERR_READ;
		return -1;
	}
	if (!w->tramp || *ra != w->tramp)
		return 0;
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
	w->end = WALK_ERR_TRAMPOLINE;
	return -1;
}

/* The interrupted context saved by the kernel in the rt_sigframe. */
static int walk_signal(struct walk_ctx *w)
{
	__u64 sp = w->sp;

	if (walk_read(w, &w->pc, sp + UNWIND_SIGFRAME_RIP) || walk_read(w, &w->sp, sp + UNWIND_SIGFRAME_RSP) ||
	    walk_read(w, &w->bp, sp + UNWIND_SIGFRAME_RBP)) {
		w->end = WALK_ERR_READ;
		return -1;
	}
	w->bp_ok = 1;
	w->bp_reg = 0;
	w->bp_unrec = 0; /* read through walk_read: recorded */
	w->exact_pc = 1;
	return 0;
}

/* Computes the caller's frame from RULE.  Returns 1 to stop the walk.
 * Global, verified once: inlined into the walker's loop its branches
 * multiplied the walker's verification time several times over. */
__noinline int walk_apply(struct walk_ctx *w, struct unwind_rule *rule)
{
	__u64 cfa, ra, bp;

	if (!w || !rule)
		return 1;
	switch (rule->cfa_type) {
	case UNWIND_CFA_RSP:
		cfa = w->sp + rule->cfa_off;
		break;
	case UNWIND_CFA_RBP:
		if (!w->bp_ok)
			goto no_rbp;
		bp_use(w);
		cfa = w->bp + rule->cfa_off;
		break;
	case UNWIND_CFA_PLT11:
	case UNWIND_CFA_PLT10:
		cfa = w->sp + rule->cfa_off;
		if ((w->pc & 15) >= (rule->cfa_type == UNWIND_CFA_PLT11 ? 11 : 10))
			cfa += 8;
		break;
	case UNWIND_CFA_DEREF_RBP:
		if (!w->bp_ok)
			goto no_rbp;
		bp_use(w);
		if (walk_read(w, &cfa, w->bp + rule->cfa_off))
			goto bad_read;
		break;
	case UNWIND_CFA_END:
		w->end = WALK_END_OK;
		return 1;
	case UNWIND_CFA_SIGNAL:
		return walk_signal(w) ? 1 : 0;
	case UNWIND_CFA_NONE:
		w->end = WALK_ERR_NO_FDE;
		return 1;
	default:
		w->end = WALK_ERR_UNSUPPORTED;
		return 1;
	}
	if (read_ra(w, cfa - 8, &ra))
		return 1;
	switch (rule->rbp_type) {
	case UNWIND_RBP_SAME:
		break;
	case UNWIND_RBP_CFA:
		/* recorded only if a rule uses it (bp_use) */
		if (snap_read(&w->snap, &bp, cfa + rule->rbp_off))
			goto bad_read;
		w->bp = bp;
		w->bp_reg = 0;
		w->bp_addr = cfa + rule->rbp_off;
		w->bp_unrec = 1;
		break;
	case UNWIND_RBP_AT_RBP:
		bp_use(w);
		if (!w->bp_ok || walk_read(w, &bp, w->bp + rule->rbp_off)) {
			w->bp_ok = 0;
		} else {
			w->bp = bp;
			w->bp_reg = 0;
		}
		break;
	default:
		w->bp_ok = 0;
	}
	w->sp = cfa;
	w->pc = ra;
	w->exact_pc = 0;
	if (!ra) {
		w->end = WALK_END_ZERO_RA;
		return 1;
	}
	return 0;
no_rbp:
	w->end = WALK_ERR_RBP_UNKNOWN;
	return 1;
bad_read:
	w->end = WALK_ERR_READ;
	return 1;
}

static __always_inline struct rule_cache_slot *rule_cache_get(__u64 pc)
{
	__u32 i = (__u32)((pc * 0x9e3779b97f4a7c15ull) >> (64 - RULE_CACHE_BITS));

	return bpf_map_lookup_elem(&rule_cache, &i);
}

/* Copies the rule for runtime address LOOKUP, searched in the tables (a
 * miss in rule_cache), to OUT; returns -1 with w->end set when there is
 * none.  Global: verified once on its own, which keeps the walker's own
 * verification small. */
__noinline int rule_search(struct walk_ctx *w, __u64 lookup, struct unwind_rule *out)
{
	struct unwind_rule *rule;
	int s;

	if (!w || !out)
		return -1;
	s = slot_find(w, lookup);
	if (s < 0)
		return -1;
	s &= DWLEAK_VMA_CACHE - 1;
	if (w->slot[s].state == SLOT_ANON) {
		w->end = w->tramp && w->pc == w->tramp ? WALK_ERR_TRAMPOLINE : WALK_ERR_NO_MAPPING;
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

/*
 * walk_apply's common cases, inline: CFA = rsp or rbp + offset, rbp kept
 * or restored from the frame, both words in the snapshot.  Each function
 * call costs a return thunk on these CPUs (SRSO mitigation: ~10-20 ns a
 * return), and walk_apply with the snapshot read and the memo record
 * inside made five of them a frame.  Returns 0 when it stepped (w->pc 0:
 * the end of the stack, w->end set), -1 to leave the frame to walk_apply
 * (nothing changed but use_bp0).
 */
static __always_inline int walk_fast(struct walk_ctx *w, struct unwind_rule *rule)
{
	__u64 cfa, ra, bp = 0;
	struct walk_memo *m;
	__u32 k;

	if (rule->rbp_type != UNWIND_RBP_SAME && rule->rbp_type != UNWIND_RBP_CFA)
		return -1;
	if (rule->cfa_type == UNWIND_CFA_RSP) {
		cfa = w->sp + rule->cfa_off;
	} else if (rule->cfa_type == UNWIND_CFA_RBP && w->bp_ok) {
		bp_use(w);
		cfa = w->bp + rule->cfa_off;
	} else {
		return -1;
	}
	if (snap_copy(&w->snap, &ra, cfa - 8) || (w->tramp && ra == w->tramp))
		return -1;
	if (rule->rbp_type == UNWIND_RBP_CFA && snap_copy(&w->snap, &bp, cfa + rule->rbp_off))
		return -1;
	if (w->rec) {
		k = w->nrec;
		m = bpf_map_lookup_elem(&walk_memo, &w->memo_idx);
		if (!m || k >= WALK_MEMO_WORDS || cfa - 8 < w->sp0 || cfa - w->sp0 > 0xffff0000ull) {
			w->rec = 0;
		} else {
			m->off[k & (WALK_MEMO_WORDS - 1)] = (__u32)(cfa - 8 - w->sp0);
			m->val[k & (WALK_MEMO_WORDS - 1)] = ra;
			w->nrec = k + 1;
		}
	}
	if (rule->rbp_type == UNWIND_RBP_CFA) {
		/* recorded only if a rule uses it (bp_use) */
		w->bp = bp;
		w->bp_reg = 0;
		w->bp_addr = cfa + rule->rbp_off;
		w->bp_unrec = 1;
	}
	w->sp = cfa;
	w->pc = ra;
	w->exact_pc = 0;
	if (!ra)
		w->end = WALK_END_ZERO_RA;
	return 0;
}

/* One frame: record pc, find its rule, step to the caller. */
static long walk_step(__u64 i, struct walk_ctx *w)
{
	struct rule_cache_slot *cs;
	struct unwind_rule rule;
	struct stack_trace *st;
	__u32 zero = 0, n = w->n, gen = rule_gen;
	__u64 lookup;

	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 1;
	if (n >= DWLEAK_MAX_FRAMES) {
		w->end = WALK_END_TRUNCATED;
		return 1;
	}
	st->pcs[n] = w->pc | (n && w->exact_pc ? DWLEAK_FRAME_EXACT : 0);
	w->n = n + 1;
	w->hash = (w->hash ^ w->pc) * FNV64_PRIME;
	lookup = w->exact_pc ? w->pc : w->pc - 1;
	cs = rule_cache_get(lookup);
	if (cs && cs->pc == lookup && cs->gen == gen && cs->tgid == w->tgid) {
		rule = cs->rule;
	} else {
		w->misses++;
		if (rule_search(w, lookup, &rule))
			return 1;
		if (cs) {
			cs->pc = lookup;
			cs->gen = gen;
			cs->tgid = w->tgid;
			cs->rule = rule;
		}
	}
	if (rule.cfa_type == UNWIND_CFA_SIGNAL)
		st->pcs[n] |= DWLEAK_FRAME_EXACT; /* the trampoline's first byte, not a return */
	if (walk_fast(w, &rule) == 0)
		return w->pc ? 0 : 1;
	return walk_apply(w, &rule) ? 1 : 0;
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

static __always_inline __u32 walk_memo_idx(__u64 pc, __u64 sp)
{
	return (__u32)(((pc ^ (sp * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull) >> (64 - WALK_MEMO_BITS));
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
	w.pc = s->pc;
	w.sp = s->sp;
	w.bp = s->bp;
	w.memo_idx = memo_idx;
	m = bpf_map_lookup_elem(&walk_memo, &w.memo_idx);
	if (m)
		m->pc0 = 0; /* refilled below, if this walk can be remembered */
	w.sp0 = w.sp;
	w.rec = 1;
	w.bp_reg = 1;
	w.bp_ok = 1;
	w.exact_pc = 1;
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
	st->nframes = w.n;
	st->end = w.end;
	st->kind = kind;
	st->fp = 0;
	st->image = s->image;
	w.hash = (w.hash ^ w.end) * FNV64_PRIME;
	w.hash ^= w.hash >> 29;
	count(CNT_WALKS);
	count_n(CNT_FRAMES, w.n); /* once a walk, not a map lookup per frame */
	if (w.misses)
		count_n(CNT_RULE_CACHE_MISSES, w.misses);
	count(CNT_WALK_END_BASE + (w.end < WALK_END_COUNT ? w.end : WALK_ERR_READ));
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
		m->span = (__u32)(w.sp - w.sp0);
		m->pc0 = s->pc;
	}
	*sn = w.snap; /* it may have moved up the stack */
	sn->want = w.sp - w.sp0; /* the last frame's CFA: as far as the walk read, about */
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

#endif
