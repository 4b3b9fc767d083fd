/* What of the kernel program depends on the CPU, x86_64 or aarch64 (told
 * by -D__TARGET_ARCH_x86 or _arm64, as libbpf's bpf_tracing.h is): the
 * frame register, where an allocator's entry finds its return address and
 * where sp is once it returned, the memory system calls' numbers and
 * arguments, the thread pointer, and the walk's starting registers.
 * Everything else of the program is the same on both (issue 26).
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_ARCH_BPF_H
#define DWLEAK_ARCH_BPF_H

#include "snap.bpf.h"

#if defined(__TARGET_ARCH_x86)

/* rbp: the frame pointer, when code keeps one */
#define ARCH_FP(regs) ((regs)->bp)
/* The call pushed the return address at rsp; the return pops that slot,
 * so a call whose entry saw rsp = S returns with rsp = S + 8. */
#define ARCH_RETURN_SP(entry_sp) ((entry_sp) + 8)
/* The memory system calls (x86_64 numbers) and their arguments at
 * sys_enter: di, si, dx, r10 (the syscall ABI's fourth is r10, not rcx). */
#define NR_MMAP 9
#define NR_MUNMAP 11
#define NR_BRK 12
#define NR_MREMAP 25
#define ARCH_SYSCALL_ARG1(regs) ((regs)->di)
#define ARCH_SYSCALL_ARG2(regs) ((regs)->si)
#define ARCH_SYSCALL_ARG3(regs) ((regs)->dx)
#define ARCH_SYSCALL_ARG4(regs) ((regs)->r10)
/* Thread-local storage is addressed from fs's base. */
#define ARCH_THREAD_POINTER(task) ((task)->thread.fsbase)

/* The return address at an allocator's entry, into *RA: the word at rsp,
 * read from the stack snapshot when this call walks (OWN: taken here),
 * else on its own; 0 when it cannot be read. */
static __always_inline void arch_entry_ra(struct pt_regs *ctx, struct snap_ctx *sn, bool own, __u64 *ra)
{
	__u64 sp = PT_REGS_SP(ctx);

	if (own ? snap_take(sn, sp) || snap_copy(sn, ra, sp) : read_u64(ra, sp))
		*ra = 0;
}

/* A code address read from the stack, as it is (no pointer codes here). */
#define ARCH_CODE_ADDR(a) (a)

/* The frame-pointer walk's first return address, at a probe on a
 * function's entry (as perf takes it since 6.11): the word at rsp. */
static __always_inline __u64 arch_fp_entry_ra(struct pt_regs *ctx, struct snap_ctx *sn)
{
	__u64 ra = 0;

	snap_read(sn, &ra, PT_REGS_SP(ctx));
	return ra;
}

/* A preload library site's registers as the real allocator's entry would
 * have them: pc the function REAL, sp the caller's SP (its return address
 * at [sp]), the frame register unchanged. */
static __always_inline void arch_site_regs(struct pt_regs *regs, const struct pt_regs *ctx, __u64 real, __u64 sp)
{
	regs->ip = real;
	regs->sp = sp;
	regs->bp = ctx->bp;
}

#elif defined(__TARGET_ARCH_arm64)

/* x29: the frame pointer (the frame record's address) */
#define ARCH_FP(r) ((r)->regs[29])
/* x30, the link register: the return address at a function's entry */
#define ARCH_LR(r) ((r)->regs[30])
/* bl puts the return address in x30, nothing on the stack: a call returns
 * with the sp its entry saw. */
#define ARCH_RETURN_SP(entry_sp) (entry_sp)
/* The generic system call numbers (asm-generic/unistd.h), arguments in
 * x0-x5 (sys_enter sees them before x0 is overwritten by the result). */
#define NR_MMAP 222
#define NR_MUNMAP 215
#define NR_BRK 214
#define NR_MREMAP 216
#define ARCH_SYSCALL_ARG1(r) ((r)->regs[0])
#define ARCH_SYSCALL_ARG2(r) ((r)->regs[1])
#define ARCH_SYSCALL_ARG3(r) ((r)->regs[2])
#define ARCH_SYSCALL_ARG4(r) ((r)->regs[3])
/* TPIDR_EL0, as the kernel keeps it for the task */
#define ARCH_THREAD_POINTER(task) ((task)->thread.uw.tp_value)

/* The bits of a code address that hold a pointer authentication code.
 * The kernel's user instruction mask is bits 54 down to the number of
 * virtual address bits: 48 in Debian's arm64 kernels (user space sets it
 * from ptrace's NT_ARM_PAC_MASK where that says otherwise).  Clearing it
 * from an address without a code changes nothing: user addresses are
 * below 2^48. */
const volatile __u64 pac_mask = 0x007f000000000000ull;

/* A code address read from the stack or x30, its pointer code cleared. */
#define ARCH_CODE_ADDR(a) ((a) & ~pac_mask)

/* The return address at an allocator's entry, into *RA: x30 (no code on
 * it yet: the callee signs it in its prologue).  The snapshot is taken
 * for the walk (OWN). */
static __always_inline void arch_entry_ra(struct pt_regs *ctx, struct snap_ctx *sn, bool own, __u64 *ra)
{
	if (own)
		snap_take(sn, PT_REGS_SP(ctx));
	*ra = ARCH_CODE_ADDR(ARCH_LR(ctx));
}

/* The frame-pointer walk's first return address at a function's entry:
 * x30. */
static __always_inline __u64 arch_fp_entry_ra(struct pt_regs *ctx, struct snap_ctx *sn)
{
	(void)sn;
	return ARCH_CODE_ADDR(ARCH_LR(ctx));
}

/* A preload library site's registers as the real allocator's entry would
 * have them: pc REAL, sp the caller's, the frame register unchanged, x30
 * the return address into the caller, which the site's sixth argument
 * (x5) carries: the library's own calls have overwritten x30 since. */
static __always_inline void arch_site_regs(struct pt_regs *regs, const struct pt_regs *ctx, __u64 real, __u64 sp)
{
	regs->pc = real;
	regs->sp = sp;
	regs->regs[29] = ctx->regs[29];
	regs->regs[30] = ctx->regs[5];
}

#else
#error "dwleak's kernel program is built for x86_64 or arm64: -D__TARGET_ARCH_x86 or -D__TARGET_ARCH_arm64"
#endif

#endif
