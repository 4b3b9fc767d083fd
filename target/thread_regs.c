/* A stopped thread's registers, x86_64's and arm64's (see thread_regs.h):
 * the one place of target/'s reading code that knows the machine. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

#include "thread_regs.h"

/* OUT cleared, then the N words at W as its every register. */
static void regs_all_fill(struct thread_regs *out, const uint64_t *w, size_t n)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n && i < THREAD_REGS_MAX; i++)
		out->all[i] = w[i];
	out->nall = i;
}

#if defined(__x86_64__)

int thread_regs_read(pid_t tid, struct thread_regs *out)
{
	struct user_regs_struct r;

	if (ptrace(PTRACE_GETREGS, tid, 0, &r))
		return -errno;
	_Static_assert(sizeof(r) / sizeof(uint64_t) <= THREAD_REGS_MAX, "every register kept");
	regs_all_fill(out, (const uint64_t *)&r, sizeof(r) / sizeof(uint64_t));
	out->saved[0] = r.rbx;
	out->saved[1] = r.rbp;
	out->saved[2] = r.r12;
	out->saved[3] = r.r13;
	out->saved[4] = r.r14;
	out->saved[5] = r.r15;
	out->nsaved = 6;
	out->sp = r.rsp;
	out->tls = r.fs_base;
	out->syscall_nr = (int64_t)r.orig_rax;
	return 0;
}

int thread_regs_syscall(pid_t tid, int64_t *nr)
{
	long v;

	errno = 0;
	v = ptrace(PTRACE_PEEKUSER, tid, offsetof(struct user_regs_struct, orig_rax), 0);
	if (errno)
		return -errno;
	*nr = v;
	return 0;
}

#elif defined(__aarch64__)

/* NT_ARM_SYSTEM_CALL's value, an int: the system call number the thread
 * is stopped in, -1 in none. */
int thread_regs_syscall(pid_t tid, int64_t *nr)
{
	int v = -1;
	struct iovec io = { &v, sizeof(v) };

	if (ptrace(PTRACE_GETREGSET, tid, NT_ARM_SYSTEM_CALL, &io))
		return -errno;
	*nr = v;
	return 0;
}

int thread_regs_read(pid_t tid, struct thread_regs *out)
{
	struct user_regs_struct r; /* x0-x30, sp, pc, pstate */
	uint64_t tp = 0;
	struct iovec io = { &r, sizeof(r) }, tio = { &tp, sizeof(tp) };
	size_t i;

	if (ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, &io) || ptrace(PTRACE_GETREGSET, tid, NT_ARM_TLS, &tio))
		return -errno;
	_Static_assert(sizeof(r) / sizeof(uint64_t) <= THREAD_REGS_MAX, "every register kept");
	regs_all_fill(out, (const uint64_t *)&r, sizeof(r) / sizeof(uint64_t));
	/* AAPCS64: x19-x28 and the frame pointer x29 are the callee's to keep */
	for (i = 0; i < 11; i++)
		out->saved[i] = r.regs[19 + i];
	out->nsaved = 11;
	out->sp = r.sp;
	out->tls = tp;
	return thread_regs_syscall(tid, &out->syscall_nr);
}

#else
#error "dwleak reads registers of x86_64 and arm64 threads"
#endif
