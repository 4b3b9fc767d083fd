/* One frame of the DWARF walk over dwleak's compact unwind tables on
 * aarch64 (issue 26), the counterpart of unwind_step.h's x86_64 step:
 * the CFA from sp or x29, the caller's x29, the return address from the
 * link register (x30) in the innermost frame only, or from where the
 * prologue saved it, stripped of its pointer authentication code.  The
 * rule fields' aarch64 meanings are base/unwind_format.h's.  Header-only,
 * fixed-width types, no libc; reads go through the build's hook, as in
 * unwind_step.h.  Used by vm/walk_a64.c in the arm64 guest so far. */
#ifndef DWLEAK_UNWIND_STEP_A64_H
#define DWLEAK_UNWIND_STEP_A64_H

#include "dwleak.h"	   /* enum walk_end */
#include "unwind_format.h" /* base/: rules */

#define UNWIND_A64_INLINE inline __attribute__((always_inline))

/*
 * A frame's registers.  pc: the frame's pc; sp: its sp (the CFA of the
 * frame below); fp: x29, meaningful while fp_ok; lr: x30, meaningful only
 * while lr_ok, which is true of the innermost frame alone (a call
 * overwrites it, so in a caller it holds nothing of the caller's).
 * exact_pc: pc is not a return address (the first frame), so its rule is
 * looked up at pc, not at the call instruction 4 bytes before it.
 * pac_mask: the bits of a code address that hold a pointer authentication
 * code (ptrace's NT_ARM_PAC_MASK insn_mask; 0 without PAuth), cleared
 * from every return address recovered, whether or not the rule says it
 * was signed (a code where none is expected is still not an address).
 */
struct unwind_regs_a64 {
	__u64 pc;
	__u64 sp;
	__u64 fp;
	__u64 lr;
	__u64 pac_mask;
	__u32 fp_ok;
	__u32 lr_ok;
	__u32 exact_pc;
	__u32 pac_stripped; /* return addresses that carried a code, so far */
};

/* Where a frame's rule is looked up: a return address follows its bl. */
static UNWIND_A64_INLINE __u64 unwind_a64_lookup_pc(const struct unwind_regs_a64 *r)
{
	return r->exact_pc ? r->pc : r->pc - 4;
}

/* A code address with its pointer authentication code cleared: user
 * addresses have bit 55 clear, so the mask's bits are zero in the real
 * address (the kernel's ptrauth_strip_insn_pac does the same). */
static UNWIND_A64_INLINE __u64 unwind_a64_strip(__u64 addr, __u64 pac_mask)
{
	return addr & ~pac_mask;
}

/* read: stores the u64 at ADDR in *DST; returns 0 or an enum walk_end
 * (never WALK_END_OK) saying why the walk cannot go on. */
struct unwind_step_a64_ops {
	int (*read)(void *arg, __u64 *dst, __u64 addr);
};

/*
 * A signal handler returns into the kernel's sigreturn trampoline (the
 * vdso's __kernel_rt_sigreturn; glibc sets no restorer on aarch64), which
 * has no CFI in Debian's kernel: like libgcc and gdb, the walk knows it
 * by its two instructions, `mov x8, #139` (rt_sigreturn) and `svc #0`.
 * The interrupted context is then the rt_sigframe at sp: its siginfo (128
 * bytes), then the ucontext, whose uc_mcontext (at 176 in it) holds
 * fault_address, x0-x30, sp and pc.
 */
#define UNWIND_A64_SIGRETURN_INSNS 0xd4000001d2801168ull /* svc #0 << 32 | mov x8, #139 */
#define UNWIND_A64_SIGFRAME_X0 (128 + 176 + 8)
#define UNWIND_A64_SIGFRAME_X29 (UNWIND_A64_SIGFRAME_X0 + 29 * 8)
#define UNWIND_A64_SIGFRAME_X30 (UNWIND_A64_SIGFRAME_X0 + 30 * 8)
#define UNWIND_A64_SIGFRAME_SP (UNWIND_A64_SIGFRAME_X0 + 31 * 8)
#define UNWIND_A64_SIGFRAME_PC (UNWIND_A64_SIGFRAME_X0 + 32 * 8)

/*
 * When R's pc is the sigreturn trampoline (read through OPS), steps R to
 * the interrupted context, every register of which is known again (x30
 * too: the interrupted function may be a leaf), its pc not a return
 * address; returns 0.  Returns 1 with *END set when the context cannot
 * be read, and -1 (R unchanged) when pc is not the trampoline.
 */
static UNWIND_A64_INLINE int unwind_a64_signal(struct unwind_regs_a64 *r, __u32 *end,
					       const struct unwind_step_a64_ops *ops, void *arg)
{
	__u64 insns, pc, sp, fp, lr, frame = r->sp;
	int err;

	if (ops->read(arg, &insns, r->pc) || insns != UNWIND_A64_SIGRETURN_INSNS)
		return -1;
	err = ops->read(arg, &pc, frame + UNWIND_A64_SIGFRAME_PC);
	err = err ?: ops->read(arg, &sp, frame + UNWIND_A64_SIGFRAME_SP);
	err = err ?: ops->read(arg, &fp, frame + UNWIND_A64_SIGFRAME_X29);
	err = err ?: ops->read(arg, &lr, frame + UNWIND_A64_SIGFRAME_X30);
	if (err) {
		*end = (__u32)err;
		return 1;
	}
	r->pc = pc;
	r->sp = sp;
	r->fp = fp;
	r->fp_ok = 1;
	r->lr = unwind_a64_strip(lr, r->pac_mask);
	r->lr_ok = 1;
	r->exact_pc = 1;
	return 0;
}

/*
 * Steps R, the registers of a frame whose rule is RULE (looked up at
 * unwind_a64_lookup_pc(R) in an aarch64 table), to its caller's.
 * Returns 0 (R is the caller's frame) or 1 with *END set: the outermost
 * frame (WALK_END_OK), a return address of 0 (WALK_END_ZERO_RA), or why
 * the walk cannot go on (WALK_ERR_*).
 */
static UNWIND_A64_INLINE int unwind_step_a64(struct unwind_regs_a64 *r, const struct unwind_rule *rule, __u32 *end,
					     const struct unwind_step_a64_ops *ops, void *arg)
{
	__u64 cfa, ra, fp = r->fp;
	__u32 fp_ok = r->fp_ok;
	int err;

	switch (rule->cfa_type) {
	case UNWIND_CFA_RSP:
		cfa = r->sp + rule->cfa_off;
		break;
	case UNWIND_CFA_RBP:
		if (!r->fp_ok) {
			*end = WALK_ERR_RBP_UNKNOWN;
			return 1;
		}
		cfa = r->fp + rule->cfa_off;
		break;
	case UNWIND_CFA_END:
		*end = WALK_END_OK;
		return 1;
	case UNWIND_CFA_NONE:
		*end = WALK_ERR_NO_FDE;
		return 1;
	default:
		*end = WALK_ERR_UNSUPPORTED;
		return 1;
	}
	/* the return address: in x30 still (true of the innermost frame
	 * only), or saved at CFA + off */
	if (rule->rbx_type == UNWIND_RBP_SAME) {
		if (!r->lr_ok) {
			*end = WALK_ERR_UNSUPPORTED;
			return 1;
		}
		ra = r->lr;
	} else if (rule->rbx_type == UNWIND_RBP_CFA) {
		err = ops->read(arg, &ra, cfa + rule->rbx_off);
		if (err) {
			*end = (__u32)err;
			return 1;
		}
	} else {
		*end = WALK_ERR_UNSUPPORTED;
		return 1;
	}
	/* the caller's x29 */
	if (rule->rbp_type == UNWIND_RBP_CFA) {
		err = ops->read(arg, &fp, cfa + rule->rbp_off);
		if (err) {
			*end = (__u32)err;
			return 1;
		}
		fp_ok = 1;
	} else if (rule->rbp_type != UNWIND_RBP_SAME) {
		fp_ok = 0;
	}
	r->fp = fp;
	r->fp_ok = fp_ok;
	r->sp = cfa;
	r->pc = unwind_a64_strip(ra, r->pac_mask);
	if (r->pc != ra)
		r->pac_stripped++;
	r->lr_ok = 0;
	r->exact_pc = 0;
	if (!r->pc) {
		*end = WALK_END_ZERO_RA;
		return 1;
	}
	return 0;
}

/*
 * One step of the frame-pointer walk, for comparison with the DWARF walk
 * (what frame pointers lose on arm64): x29 points at the frame record
 * {the caller's x29, the return address} of the newest function that made
 * one; a function built without frame pointers makes none, so its caller
 * is skipped.  Steps R to the frame the record names and returns 0, or
 * returns 1 with *END set: x29 is 0 (the psABI's end of the chain,
 * WALK_END_OK), or does not point higher up the stack (WALK_ERR_READ: a
 * register used for something else), or the record cannot be read.
 */
static UNWIND_A64_INLINE int unwind_step_a64_fp(struct unwind_regs_a64 *r, __u32 *end,
						const struct unwind_step_a64_ops *ops, void *arg)
{
	__u64 fp, ra;
	int err;

	if (!r->fp_ok || !r->fp) {
		*end = WALK_END_OK;
		return 1;
	}
	if (r->fp < r->sp || (r->fp & 7)) {
		*end = WALK_ERR_READ;
		return 1;
	}
	err = ops->read(arg, &fp, r->fp);
	err = err ?: ops->read(arg, &ra, r->fp + 8);
	if (err) {
		*end = (__u32)err;
		return 1;
	}
	r->sp = r->fp + 16;
	r->fp = fp;
	r->pc = unwind_a64_strip(ra, r->pac_mask);
	r->lr_ok = 0;
	r->exact_pc = 0;
	if (!r->pc) {
		*end = WALK_END_ZERO_RA;
		return 1;
	}
	return 0;
}

#endif
