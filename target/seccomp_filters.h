/* A stopped thread's seccomp filters, read with ptrace, and the question
 * both the injector (inject.c) and the leak check's snapshot (snapshot.c)
 * ask of them: would these system calls run?  Reading needs the thread
 * ptrace-stopped by the caller and CAP_SYS_ADMIN; judging is
 * seccomp_eval.c's (pure, fuzzed). */
#ifndef DWLEAK_SECCOMP_FILTERS_H
#define DWLEAK_SECCOMP_FILTERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>

/* The kernel's limit on filters a thread may stack is far above this;
 * more are refused (-E2BIG), never cut. */
#define SECCOMP_FILTERS_MAX 64

struct seccomp_filters {
	int mode;			/* /proc status "Seccomp:": 0 none, 1 strict, 2 filter */
	size_t n;			/* filters, innermost first */
	struct sock_filter *prog[SECCOMP_FILTERS_MAX]; /* each malloc'd */
	size_t len[SECCOMP_FILTERS_MAX];		/* instructions of each */
};

/* Thread TID of process PID's seccomp mode ("Seccomp:" of
 * /proc/PID/task/TID/status: 0 none, 1 strict, 2 filter; 0 on a kernel
 * without seccomp), or a negative errno.  Needs no ptrace. */
int seccomp_mode(pid_t pid, pid_t tid);

/* Reads the filters of thread TID of process PID (stopped by the
 * caller's ptrace) into *OUT (free with seccomp_filters_free).  Returns 0
 * (mode 0: none), or -errno: -ENOTSUP strict mode, -E2BIG more than
 * SECCOMP_FILTERS_MAX, -EACCES/-EPERM/-EINVAL from ptrace, -ENOMEM. */
int seccomp_filters_read(pid_t pid, pid_t tid, struct seccomp_filters *out);

/* Whether system call NR with ARGS, made at IP, runs under F: 0 yes;
 * -EPERM a filter fails, traps or kills it (*WHAT, may be NULL, says
 * which: "fails", "raises SIGSYS", "kills the thread"); -EINVAL a filter
 * the evaluator cannot run. */
int seccomp_filters_allow(const struct seccomp_filters *f, int nr, const uint64_t args[6], uint64_t ip,
			  const char **what);

void seccomp_filters_free(struct seccomp_filters *f);

#endif
