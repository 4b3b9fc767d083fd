/* A stopped thread's registers as the leak check and the tracer need them,
 * on x86_64 and arm64 alike (issue 26): every general register (each may
 * hold a pointer: a root), those a callee must keep (all that is live at
 * exit()'s entry), the stack pointer, the thread pointer, and the system
 * call the thread is stopped in.  Reads through ptrace: the caller traces
 * TID and has it stopped. */
#ifndef DWLEAK_THREAD_REGS_H
#define DWLEAK_THREAD_REGS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* More than either machine has: x86_64's user_regs_struct is 27 words,
 * arm64's 34 (x0-x30, sp, pc, pstate). */
#define THREAD_REGS_MAX 40
/* rbx, rbp, r12-r15; or x19-x29 */
#define THREAD_REGS_SAVED_MAX 12

struct thread_regs {
	uint64_t all[THREAD_REGS_MAX]; /* every general register, NALL of them */
	size_t nall;
	uint64_t saved[THREAD_REGS_SAVED_MAX]; /* the callee-saved ones, NSAVED */
	size_t nsaved;
	uint64_t sp;
	uint64_t tls;	    /* the thread pointer: fs's base, or TPIDR_EL0 */
	int64_t syscall_nr; /* the system call it is stopped in (orig_rax; arm64's
			     * NT_ARM_SYSTEM_CALL), -1 when in none */
};

/* Fills *OUT with stopped thread TID's registers.  Returns 0 or -errno
 * (ptrace's: -ESRCH when TID is not stopped under our ptrace). */
int thread_regs_read(pid_t tid, struct thread_regs *out);

/* The system call stopped thread TID is in, into *NR (-1: none): one
 * ptrace request.  Returns 0 or -errno. */
int thread_regs_syscall(pid_t tid, int64_t *nr);

#endif
