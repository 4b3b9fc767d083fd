/* A seccomp filter the program installs while the library walks in the
 * process (issue 24): the walk makes system calls inside the program's
 * allocator calls (a new thread's ring, its stack's bounds from
 * /proc/self/maps, a wait for room in a full ring), and a filter that
 * traps or kills one of them would end the program there (a SIGSYS inside
 * malloc: tests/sig_in_malloc.sh's filter does exactly that).  So the
 * library sees each filter go in, through the two ways glibc and
 * libseccomp install one, prctl(PR_SET_SECCOMP) and the seccomp system
 * call made with syscall(), and before it lets it in goes back to its
 * sites for good (rings.c's rings_stop): dwleak's kernel program walks
 * from then on, and it makes no system call in the process.  A program
 * that installs its filter with an inline `syscall` instruction is not
 * seen (dwleak checks the seccomp mode when it asks for the walk, so only
 * a filter installed later, that way, is missed).
 *
 * Both are the same system calls glibc makes, errno set the same way;
 * syscall() is written in assembly as glibc's is (a child of a clone made
 * through it returns on whatever stack it was given, touching none). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "interpose.h"
#include "raw_syscall.h"

#if defined(__x86_64__)
_Static_assert(SYS_seccomp == 317, "syscall's entry below compares with the x86_64 number");
#else
_Static_assert(SYS_seccomp == 277, "syscall's entry below compares with the generic (aarch64) number");
#endif

/* A system call's result as glibc's wrappers give it: -1 and errno for
 * the kernel's -4095..-1. */
__attribute__((used)) long seccomp_guard_result(long ret)
{
	if ((unsigned long)ret > -4096ul) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

int seccomp_guard_prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;
	int i;

	/* glibc's prctl reads its four further arguments whatever OPTION is */
	va_start(ap, option);
	for (i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_SECCOMP)
		rings_stop(DWLEAK_PRELOAD_RINGS_STOPPED_SECCOMP);
	return (int)seccomp_guard_result(
		raw_syscall6(SYS_prctl, option, (long)a[0], (long)a[1], (long)a[2], (long)a[3], 0));
}

/* syscall(SYS_seccomp, ...), from the entry below: NR is SYS_seccomp. */
__attribute__((used)) long seccomp_guard_seccomp(long nr, long op, long flags, long args, long d, long e, long f)
{
	if (op == SECCOMP_SET_MODE_STRICT || op == SECCOMP_SET_MODE_FILTER)
		rings_stop(DWLEAK_PRELOAD_RINGS_STOPPED_SECCOMP);
	return seccomp_guard_result(raw_syscall6(nr, op, flags, args, d, e, f));
}

#if defined(__x86_64__)
/* long syscall(long nr, ...): glibc's sysdeps/unix/sysv/linux/x86_64/syscall.S
 * in behaviour (the seventh argument on the stack); the seccomp system
 * call goes through seccomp_guard_seccomp first. */
__asm__(".text\n"
	".globl seccomp_guard_syscall\n"
	".hidden seccomp_guard_syscall\n"
	".p2align 4\n"
	".type seccomp_guard_syscall, @function\n"
	".globl syscall\n" /* exported under glibc's name, for LD_PRELOAD */
	".type syscall, @function\n"
	"seccomp_guard_syscall:\n"
	"syscall:\n"
	".cfi_startproc\n"
	"endbr64\n"
	"cmp $317, %rdi\n"
	"je seccomp_guard_seccomp\n" /* a tail call: the same arguments, the same stack */
	"mov %rdi, %rax\n"
	"mov %rsi, %rdi\n"
	"mov %rdx, %rsi\n"
	"mov %rcx, %rdx\n"
	"mov %r8, %r10\n"
	"mov %r9, %r8\n"
	"mov 8(%rsp), %r9\n"
	"syscall\n"
	"cmp $-4095, %rax\n"
	"jae 1f\n"
	"ret\n"
	"1: mov %rax, %rdi\n"
	"jmp seccomp_guard_result\n"
	".cfi_endproc\n"
	".size seccomp_guard_syscall, . - seccomp_guard_syscall\n"
	".size syscall, . - syscall\n");
#else
/* long syscall(long nr, ...): glibc's sysdeps/unix/sysv/linux/aarch64/syscall.S
 * in behaviour (the number in w0, up to seven arguments in x1-x7); the
 * seccomp system call goes through seccomp_guard_seccomp first. */
__asm__(".text\n"
	".globl seccomp_guard_syscall\n"
	".hidden seccomp_guard_syscall\n"
	".p2align 4\n"
	".type seccomp_guard_syscall, %function\n"
	".globl syscall\n" /* exported under glibc's name, for LD_PRELOAD */
	".type syscall, %function\n"
	"seccomp_guard_syscall:\n"
	"syscall:\n"
	".cfi_startproc\n"
	"uxtw x8, w0\n"
	"cmp x8, #277\n"
	"b.eq seccomp_guard_seccomp\n" /* a tail call: the same arguments, the same stack */
	"mov x0, x1\n"
	"mov x1, x2\n"
	"mov x2, x3\n"
	"mov x3, x4\n"
	"mov x4, x5\n"
	"mov x5, x6\n"
	"mov x6, x7\n"
	"svc #0\n"
	"cmn x0, #4095\n"
	"b.cs 1f\n"
	"ret\n"
	"1: b seccomp_guard_result\n"
	".cfi_endproc\n"
	".size seccomp_guard_syscall, . - seccomp_guard_syscall\n"
	".size syscall, . - syscall\n");
#endif

/* Exported under glibc's name, for LD_PRELOAD. */
VISIBLE int prctl(int option, ...) __attribute__((alias("seccomp_guard_prctl")));
