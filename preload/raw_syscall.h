/* A system call made by the instruction itself, for the preload library's
 * parts that must not go through libc (no errno written, nothing a
 * program may interpose or a seccomp guard of ours may see): the
 * kernel's result, -4095..-1 an error. */
#ifndef DWLEAK_PRELOAD_RAW_SYSCALL_H
#define DWLEAK_PRELOAD_RAW_SYSCALL_H

/* System call NR with up to six arguments (unused ones 0). */
static inline long raw_syscall6(long nr, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
	return x0;
#else
#error "the preload library's system calls are written for x86_64 and aarch64"
#endif
}

#endif
