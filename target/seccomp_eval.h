/* A classic-BPF evaluator for seccomp filters: what a process's filters
 * (read with PTRACE_SECCOMP_GET_FILTER) answer for one system call, so
 * that the injector (inject.c) can refuse before it makes a call that a
 * filter would kill, trap or fail half-way.  Pure: the program is the
 * target's data, read and bounded here, never trusted (fuzz_seccomp). */
#ifndef DWLEAK_SECCOMP_EVAL_H
#define DWLEAK_SECCOMP_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>

/* The kernel's limit on one filter's length (BPF_MAXINSNS). */
#define SECCOMP_EVAL_MAX_INSNS 4096

/* What a filter sees of a system call (struct seccomp_data, x86_64). */
struct seccomp_eval_data {
	int32_t nr;
	uint32_t arch;
	uint64_t ip;
	uint64_t args[6];
};

/*
 * Runs the filter PROG[0..N) on D the way the kernel does (its accepted
 * opcodes only: loads of seccomp_data's aligned words, the scratch
 * memory, ALU, forward jumps, RET), and sets *RET to the value returned.
 * Returns 0, or -EINVAL when the kernel would have refused the program
 * (empty or too long, an opcode it does not accept, a jump past the end,
 * a load outside seccomp_data, a constant division by zero), or when it
 * runs off its end.  A division by a zero X returns 0, as the kernel's
 * does (SECCOMP_RET_KILL_THREAD).
 */
int seccomp_eval(const struct sock_filter *prog, size_t n, const struct seccomp_eval_data *d, uint32_t *ret);

/* The action of several filters' returns: the one with the highest
 * precedence (the kernel compares (s32)(ret & SECCOMP_RET_ACTION_FULL),
 * lowest first), with its data (the errno of SECCOMP_RET_ERRNO). */
uint32_t seccomp_eval_combine(uint32_t a, uint32_t b);

/* How a call fares under a filter's verdict. */
enum seccomp_fate {
	SECCOMP_RUNS,	  /* SECCOMP_RET_ALLOW or SECCOMP_RET_LOG */
	SECCOMP_FAILS,	  /* ERRNO, TRACE (no tracer with PTRACE_O_TRACESECCOMP: ENOSYS) or USER_NOTIF */
	SECCOMP_SIGNALS,  /* TRAP: a SIGSYS to the thread */
	SECCOMP_KILLS,	  /* KILL_THREAD or KILL_PROCESS */
};

/* The fate of a call whose combined verdict is RET; *ERR (may be NULL)
 * gets the errno it fails with (SECCOMP_FAILS only; 0 for USER_NOTIF,
 * whose answer a supervisor gives). */
enum seccomp_fate seccomp_fate_of(uint32_t ret, int *err);

#endif
