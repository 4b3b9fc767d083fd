/* The compact unwind-table format shared by the table compiler (tables/),
 * the runtime that loads it (unwinder/), the in-kernel walker (bpf/) and
 * the walk's one step (bpf/abi/unwind_step.h), which the preload library
 * will compile too.  In base/ because tables/, a leaf, and bpf/abi/ must
 * both reach it.  Fixed-width types only, so the BPF program includes
 * this file unchanged. */
#ifndef DWLEAK_UNWIND_FORMAT_H
#define DWLEAK_UNWIND_FORMAT_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/*
 * An object's table maps ELF virtual addresses to unwind rules.
 *
 * The address space is cut into 64 KiB pages (addr >> UNWIND_PAGE_SHIFT).
 * A page holds a sorted run of rows; a row says "from this 16-bit offset in
 * the page on, until the next row, rule R applies".  Every page that code
 * covered by CFI crosses starts with a row at offset 0, so a lookup never
 * has to look at the page before.  Addresses no FDE covers carry the rule
 * with cfa_type UNWIND_CFA_NONE.  Rules are deduplicated per object, so a
 * row costs 4 bytes and the handful of distinct rules is paid once.
 * Offsets in rules are full 32-bit values: nothing is approximated.
 */
#define UNWIND_PAGE_SHIFT 16
#define UNWIND_PAGE_SIZE (1u << UNWIND_PAGE_SHIFT)
#define UNWIND_MAX_RULES 65536 /* rule index is 16 bits in a row */

/* How to compute the CFA (the caller's rsp) of a frame. */
enum unwind_cfa_type {
	UNWIND_CFA_NONE = 0,	 /* no FDE covers this pc: cannot unwind */
	UNWIND_CFA_RSP = 1,	 /* CFA = rsp + cfa_off */
	UNWIND_CFA_RBP = 2,	 /* CFA = rbp + cfa_off */
	UNWIND_CFA_PLT11 = 3,	 /* .plt: rsp + cfa_off + ((rip & 15) >= 11 ? 8 : 0) */
	UNWIND_CFA_PLT10 = 4,	 /* .plt.sec/IBT: same with 10 */
	UNWIND_CFA_DEREF_RBP = 5, /* realigned stack: CFA = *(u64 *)(rbp + cfa_off) */
	UNWIND_CFA_END = 6,	 /* return address undefined: outermost frame */
	UNWIND_CFA_SIGNAL = 7,	 /* signal trampoline: regs come from rt_sigframe at rsp */
	UNWIND_CFA_RBX = 8,	 /* CFA = rbx + cfa_off (glibc's _dl_runtime_resolve) */
	UNWIND_CFA_UNSUPPORTED = 9, /* any other rule: the walker stops and counts it */
};

/* Where the caller's rbp (and, with the same types, rbx) is.  The return
 * address is always at CFA - 8 (a row whose return address rule is
 * anything else is UNWIND_CFA_UNSUPPORTED).  rbx is tracked only because
 * a few hand-written functions compute their CFA from it. */
enum unwind_rbp_type {
	UNWIND_RBP_SAME = 0,	    /* unchanged (same value, or no rule) */
	UNWIND_RBP_CFA = 1,	    /* saved at *(u64 *)(CFA + rbp_off) */
	UNWIND_RBP_AT_RBP = 2,	    /* saved at *(u64 *)(rbp + rbp_off) (DW_CFA_expression breg6) */
	UNWIND_RBP_UNDEFINED = 3,   /* caller's rbp is lost (DW_CFA_undefined) */
	UNWIND_RBP_UNSUPPORTED = 4, /* any other rule: caller's rbp unknown */
};

/* Offsets into the kernel's rt_sigframe as seen at the trampoline's pc
 * (rsp points at the ucontext): uc_mcontext.gregs[REG_RBP/RSP/RIP].
 * These are the offsets glibc's __restore_rt CFI itself uses. */
#define UNWIND_SIGFRAME_RBP 120
#define UNWIND_SIGFRAME_RSP 160
#define UNWIND_SIGFRAME_RIP 168

/*
 * The architecture a table's rules are for: its object's ELF machine.  The
 * walker runs only tables of its own; a table of another is compiled and
 * verified as a file (dwleak tables --verify on arm64 objects, any host).
 *
 * On aarch64 the same fields name that architecture's registers:
 *   cfa_type UNWIND_CFA_RSP   CFA = sp + cfa_off
 *            UNWIND_CFA_RBP   CFA = x29 (the frame pointer) + cfa_off
 *            (no PLT, realigned, rbx or signal forms: UNSUPPORTED)
 *   rbp_type/rbp_off          the caller's x29, with the same types
 *   rbx_type/rbx_off          the return address (x30, the link register):
 *            UNWIND_RBP_SAME  still in x30 (a leaf, or before the prologue
 *                             stored it): true only of the innermost frame
 *            UNWIND_RBP_CFA   saved at CFA + rbx_off
 *            (undefined: the rule is UNWIND_CFA_END, the outermost frame)
 *   flags    UNWIND_RULE_RA_SIGNED: the return address carries a pointer
 *            authentication code (DW_CFA_AARCH64_negate_ra_state), which the
 *            walker strips from what it recovers
 * The previous pc is the return address - 4 there (- 1 on x86_64).
 */
enum unwind_arch {
	UNWIND_ARCH_X86_64 = 0,
	UNWIND_ARCH_AARCH64 = 1,
};

#define UNWIND_RULE_RA_SIGNED 0x01 /* flags, aarch64 only */

struct unwind_rule {
	__s32 cfa_off; /* bytes; meaning depends on cfa_type */
	__s32 rbp_off; /* bytes; meaning depends on rbp_type */
	__s32 rbx_off; /* bytes; meaning depends on rbx_type */
	__u8 cfa_type; /* enum unwind_cfa_type */
	__u8 rbp_type; /* enum unwind_rbp_type */
	__u8 rbx_type; /* enum unwind_rbp_type, for rbx (aarch64: the return address) */
	__u8 flags;    /* UNWIND_RULE_*; zero on x86_64 */
};

struct unwind_row {
	__u16 pc_low; /* offset of the row's first byte within its page */
	__u16 rule;   /* index into the object's rule array */
};

struct unwind_page {
	__u32 first_row; /* index of the page's first row in the object's rows */
	__u32 nrows;	 /* rows in this page; 0 = no CFI anywhere in the page */
};

_Static_assert(sizeof(struct unwind_rule) == 16, "unwind_rule layout");
_Static_assert(sizeof(struct unwind_row) == 4, "unwind_row layout");
_Static_assert(sizeof(struct unwind_page) == 8, "unwind_page layout");

#endif
