/* One frame of the DWARF walk over dwleak's compact unwind tables, and the
 * lookup of a frame's rule in one object's table: written once, compiled
 * into the kernel program (bpf/walk.bpf.h) and into user space (the
 * preload library next; tests/unit/test_unwind_step.c checks it against
 * libdw), each build giving the memory reads and its own extras through
 * the tables of hooks below.  Header-only, fixed-width types, no libc. */
#ifndef DWLEAK_UNWIND_STEP_H
#define DWLEAK_UNWIND_STEP_H

#include "dwleak.h"	   /* enum walk_end, DWLEAK_ROW_SEARCH_STEPS */
#include "unwind_format.h" /* base/: pages, rows, rules */

/* Everything here is inlined into its caller, and each hook through a
 * constant table becomes a direct, inlined call (the BPF target has no
 * indirect calls: a table that did not fold would fail the build).  Where
 * a function boundary goes (a global function the verifier checks once)
 * is the kernel program's choice, not this header's. */
#define UNWIND_INLINE inline __attribute__((always_inline))

/*
 * The registers a frame's rule may need.  pc is the frame's pc, sp its rsp
 * (the CFA of the frame below it), bp its rbp, which means something only
 * while bp_ok.  exact_pc: pc is not a return address (the walk's first
 * frame, or the interrupted pc a signal frame gave), so its rule is looked
 * up at pc itself, not in the call instruction before it.
 */
struct unwind_regs {
	__u64 pc;
	__u64 sp;
	__u64 bp;
	__u32 bp_ok;
	__u32 exact_pc;
};

/* Where a frame's rule is looked up: a return address belongs to the
 * call before it, which may be the last instruction of its function. */
static UNWIND_INLINE __u64 unwind_lookup_pc(const struct unwind_regs *r)
{
	return r->exact_pc ? r->pc : r->pc - 1;
}

/* The stack words a step reads, named so that each build can treat each
 * its own way (the kernel program remembers most of them for walk_memo,
 * not the rbp saved at the CFA until a rule uses it, and finds the real
 * return address under its own uretprobes). */
enum unwind_word {
	UNWIND_WORD_CFA,	/* a realigned frame's CFA, at rbp + cfa_off */
	UNWIND_WORD_RA,		/* the return address, at CFA - 8 */
	UNWIND_WORD_BP_AT_CFA,	/* the caller's rbp, saved at CFA + rbp_off */
	UNWIND_WORD_BP_AT_BP,	/* the caller's rbp, saved at rbp + rbp_off */
	UNWIND_WORD_SIG_PC,	/* an interrupted context's rip, rsp and rbp, */
	UNWIND_WORD_SIG_SP,	/* in the kernel's rt_sigframe at rsp */
	UNWIND_WORD_SIG_BP,
};

/*
 * What a build gives the step.  R is the step's registers, inside the
 * build's own walk state (which the hooks find from R).
 *
 * read: stores the u64 at ADDR, a word of kind WHAT, in *DST.  Returns 0,
 * or why the walk cannot go on (an enum walk_end, never WALK_END_OK:
 * WALK_ERR_READ, or a reason of the build's own).  In a try
 * (unwind_step_try) any refusal declines the try, so a build may refuse
 * there what it cannot read cheaply.
 * note: the word WHAT at ADDR, read as VAL, is part of the caller's frame:
 * called after its read succeeded, before R changes.  A try declined on
 * its second read has noted the return address, which the step that then
 * takes the frame notes again: a build must bear a word noted twice.
 * bp_use: R's rbp is about to be an input of the rule; may be called
 * more than once for one frame (a declined try, then the step).
 */
struct unwind_step_ops {
	int (*read)(struct unwind_regs *r, __u64 *dst, __u64 addr, enum unwind_word what);
	void (*note)(struct unwind_regs *r, __u64 addr, __u64 val, enum unwind_word what);
	void (*bp_use)(struct unwind_regs *r);
};

/* What a step did: R is now the caller's frame, or the walk ends here
 * (*END says why), or (a try only) R is unchanged, for unwind_step to
 * take the frame (bp_use and the note of the return address may have
 * run). */
enum unwind_step_result {
	UNWIND_STEP_DECLINED = -1,
	UNWIND_STEP_NEXT = 0,
	UNWIND_STEP_END = 1,
};

static UNWIND_INLINE int unwind_stop(__u32 *end, __u32 why, const int trying)
{
	if (trying)
		return UNWIND_STEP_DECLINED;
	*end = why;
	return UNWIND_STEP_END;
}

/* The interrupted context the kernel saved in the rt_sigframe at rsp:
 * every register is known again, and its pc is not a return address. */
static UNWIND_INLINE int unwind_signal(struct unwind_regs *r, __u32 *end, const struct unwind_step_ops *ops)
{
	__u64 frame = r->sp, pc, sp, bp;
	int err;

	err = ops->read(r, &pc, frame + UNWIND_SIGFRAME_RIP, UNWIND_WORD_SIG_PC);
	if (err)
		return unwind_stop(end, err, 0);
	ops->note(r, frame + UNWIND_SIGFRAME_RIP, pc, UNWIND_WORD_SIG_PC);
	err = ops->read(r, &sp, frame + UNWIND_SIGFRAME_RSP, UNWIND_WORD_SIG_SP);
	if (err)
		return unwind_stop(end, err, 0);
	ops->note(r, frame + UNWIND_SIGFRAME_RSP, sp, UNWIND_WORD_SIG_SP);
	err = ops->read(r, &bp, frame + UNWIND_SIGFRAME_RBP, UNWIND_WORD_SIG_BP);
	if (err)
		return unwind_stop(end, err, 0);
	ops->note(r, frame + UNWIND_SIGFRAME_RBP, bp, UNWIND_WORD_SIG_BP);
	r->pc = pc;
	r->sp = sp;
	r->bp = bp;
	r->bp_ok = 1;
	r->exact_pc = 1;
	return UNWIND_STEP_NEXT;
}

/* From the frame's CFA to its caller: the return address at CFA - 8 and
 * the caller's rbp by the rule's RBP_TYPE and RBP_OFF.  A try's reads
 * (the return address, an rbp saved at the CFA) all come before R
 * changes.  (Noting the return address before the second read, not
 * after, keeps the note in one copy: the compiler copied it into both
 * ways of the rbp test that followed, 30 instructions in the kernel
 * walker's loop.) */
static UNWIND_INLINE int unwind_caller(struct unwind_regs *r, __u64 cfa, __u32 rbp_type, __s32 rbp_off,
				       __u32 *end, const struct unwind_step_ops *ops, const int trying)
{
	__u64 ra, bp;
	int err;

	err = ops->read(r, &ra, cfa - 8, UNWIND_WORD_RA);
	if (err)
		return unwind_stop(end, err, trying);
	ops->note(r, cfa - 8, ra, UNWIND_WORD_RA);
	if (rbp_type == UNWIND_RBP_CFA) {
		err = ops->read(r, &bp, cfa + rbp_off, UNWIND_WORD_BP_AT_CFA);
		if (err)
			return unwind_stop(end, err, trying);
		ops->note(r, cfa + rbp_off, bp, UNWIND_WORD_BP_AT_CFA);
		r->bp = bp;
		r->bp_ok = 1; /* known again, even if an inner frame had lost it */
	} else if (rbp_type == UNWIND_RBP_AT_RBP) {
		/* lost, not fatal, when rbp is unknown or its slot unreadable */
		if (r->bp_ok) {
			ops->bp_use(r);
			if (!ops->read(r, &bp, r->bp + rbp_off, UNWIND_WORD_BP_AT_BP)) {
				ops->note(r, r->bp + rbp_off, bp, UNWIND_WORD_BP_AT_BP);
				r->bp = bp;
			} else {
				r->bp_ok = 0;
			}
		}
	} else if (rbp_type != UNWIND_RBP_SAME) {
		r->bp_ok = 0; /* undefined, or a rule the tables do not express */
	}
	r->sp = cfa;
	r->pc = ra;
	r->exact_pc = 0;
	if (!ra) {
		*end = WALK_END_ZERO_RA; /* the outermost frame of some threads */
		return UNWIND_STEP_END;
	}
	return UNWIND_STEP_NEXT;
}

/* The rule's fields are read once, into locals: the hooks write the
 * build's walk state, which the compiler must otherwise assume RULE
 * may be part of. */
static UNWIND_INLINE int unwind_step_as(struct unwind_regs *r, const struct unwind_rule *rule, __u32 *end,
					const struct unwind_step_ops *ops, const int trying)
{
	const __u32 cfa_type = rule->cfa_type, rbp_type = rule->rbp_type;
	const __s32 cfa_off = rule->cfa_off, rbp_off = rule->rbp_off;
	__u64 cfa, at;
	int err;

	if (trying && rbp_type != UNWIND_RBP_SAME && rbp_type != UNWIND_RBP_CFA)
		return UNWIND_STEP_DECLINED;
	switch (cfa_type) {
	case UNWIND_CFA_RSP:
		cfa = r->sp + cfa_off;
		break;
	case UNWIND_CFA_RBP:
	case UNWIND_CFA_DEREF_RBP:
		if (trying && cfa_type == UNWIND_CFA_DEREF_RBP)
			return UNWIND_STEP_DECLINED;
		if (!r->bp_ok)
			return unwind_stop(end, WALK_ERR_RBP_UNKNOWN, trying);
		ops->bp_use(r);
		cfa = r->bp + cfa_off;
		if (cfa_type == UNWIND_CFA_RBP)
			break;
		/* a realigned stack: the CFA is the word there */
		at = cfa;
		err = ops->read(r, &cfa, at, UNWIND_WORD_CFA);
		if (err)
			return unwind_stop(end, err, 0);
		ops->note(r, at, cfa, UNWIND_WORD_CFA);
		break;
	case UNWIND_CFA_PLT11:
	case UNWIND_CFA_PLT10:
		if (trying)
			return UNWIND_STEP_DECLINED;
		/* the PLT entry's push moved rsp by 8 from its 11th (10th) byte on */
		cfa = r->sp + cfa_off;
		if ((r->pc & 15) >= (cfa_type == UNWIND_CFA_PLT11 ? 11 : 10))
			cfa += 8;
		break;
	case UNWIND_CFA_END:
		return unwind_stop(end, WALK_END_OK, trying);
	case UNWIND_CFA_SIGNAL:
		if (trying)
			return UNWIND_STEP_DECLINED;
		return unwind_signal(r, end, ops);
	case UNWIND_CFA_NONE:
		return unwind_stop(end, WALK_ERR_NO_FDE, trying);
	default:
		/* UNWIND_CFA_RBX (glibc's _dl_runtime_resolve) included: the
		 * walk does not track rbx */
		return unwind_stop(end, WALK_ERR_UNSUPPORTED, trying);
	}
	return unwind_caller(r, cfa, rbp_type, rbp_off, end, ops, trying);
}

/*
 * Steps R, the registers of a frame whose rule is RULE, to its caller's.
 * Returns UNWIND_STEP_NEXT, or UNWIND_STEP_END with *END set: the
 * outermost frame (WALK_END_OK), a return address of 0
 * (WALK_END_ZERO_RA), or why the walk cannot go on.
 */
static UNWIND_INLINE int unwind_step(struct unwind_regs *r, const struct unwind_rule *rule, __u32 *end,
				     const struct unwind_step_ops *ops)
{
	return unwind_step_as(r, rule, end, ops, 0);
}

/*
 * The same for the rules most frames have (CFA = rsp or a known rbp +
 * offset, the caller's rbp kept or saved at the CFA), small enough to be
 * inlined where a call costs more than the step; every other rule, and a
 * read OPS refuses, give UNWIND_STEP_DECLINED, R unchanged, for
 * unwind_step to take the frame.  The rbp rule is tested first: a decline
 * on it after bp_use made the verifier work eight times as long on the
 * kernel walker (Linux 6.18).
 */
static UNWIND_INLINE int unwind_step_try(struct unwind_regs *r, const struct unwind_rule *rule, __u32 *end,
					 const struct unwind_step_ops *ops)
{
	return unwind_step_as(r, rule, end, ops, 1);
}

/* --- The rule in force at an address, in one object's table ----------- */

/* How a build finds one object's table: each build completes this type
 * (the kernel program with map keys, user space with the table itself). */
struct unwind_table_ref;

/*
 * page: the entry of page PAGE (ELF address >> UNWIND_PAGE_SHIFT), or
 * NULL when the table has none there.
 * row: row IDX, an index counted the way the page's first_row is; NULL
 * when there is none.
 * rule: the rule a row names (its rule field), or NULL.
 */
struct unwind_table_ops {
	const struct unwind_page *(*page)(const struct unwind_table_ref *t, __u64 page);
	const struct unwind_row *(*row)(const struct unwind_table_ref *t, __u32 idx);
	const struct unwind_rule *(*rule)(const struct unwind_table_ref *t, __u32 idx);
};

_Static_assert((1u << (DWLEAK_ROW_SEARCH_STEPS - 1)) >= UNWIND_PAGE_SIZE,
	       "the row search must cover a full page of rows");

/* The index of the row in force at ELF address ADDR in table T (the last
 * row of its page that starts at or before it), or -1: none, the page
 * has no rows, or ADDR is before the page's first. */
static UNWIND_INLINE long unwind_row_find(const struct unwind_table_ref *t, const struct unwind_table_ops *ops,
					  __u64 addr)
{
	const struct unwind_page *pg = ops->page(t, addr >> UNWIND_PAGE_SHIFT);
	const struct unwind_row *row;
	__u32 key = (__u32)(addr & (UNWIND_PAGE_SIZE - 1)), lo = 0, hi, mid, first;
	int i;

	if (!pg)
		return -1;
	hi = pg->nrows;
	first = pg->first_row;
	/* a binary search, bounded for the verifier */
	for (i = 0; i < DWLEAK_ROW_SEARCH_STEPS && lo < hi; i++) {
		mid = lo + (hi - lo) / 2;
		row = ops->row(t, first + mid);
		if (!row)
			return -1;
		if (row->pc_low <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? (long)(first + lo - 1) : -1;
}

/* The rule row IDX names, or NULL. */
static UNWIND_INLINE const struct unwind_rule *unwind_rule_of_row(const struct unwind_table_ref *t,
								  const struct unwind_table_ops *ops, __u32 idx)
{
	const struct unwind_row *row = ops->row(t, idx);

	return row ? ops->rule(t, row->rule) : 0;
}

/* The rule in force at ELF address ADDR in table T, or NULL: no row
 * there.  (A row may give UNWIND_CFA_NONE: no FDE covers ADDR.) */
static UNWIND_INLINE const struct unwind_rule *unwind_rule_find(const struct unwind_table_ref *t,
								const struct unwind_table_ops *ops, __u64 addr)
{
	long idx = unwind_row_find(t, ops, addr);

	return idx < 0 ? 0 : unwind_rule_of_row(t, ops, (__u32)idx);
}

#endif
