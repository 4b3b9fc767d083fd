/* A copy-on-write snapshot of a stopped process for the leak check: one
 * of its threads, stopped by the caller with the rest, makes one clone()
 * system call, and the copy (the kernel's fork: the same memory, shared
 * page by page until either side writes) is read while the process runs
 * again.  The process pauses for the stop and the clone only, as Android's
 * libmemunreachable pauses for its fork.
 *
 * The copy never runs an instruction of the program: it is created
 * traced by the caller (CLONE_PTRACE: it stops before its first return to
 * user space), with no exit signal (its end raises no SIGCHLD in the
 * process), and is killed and reaped at the end; the process then reaps
 * its zombie in one more injected system call (wait4 on that pid only), so
 * nothing of it is left in the process's children.  Each call is made
 * from code placed in a cave (cave.h, snapshot_cave.S) that restores the
 * thread by itself should dwleak die at any moment (SIGKILL included), and
 * a copy that ever returns to user space exits there at once.  The copy shares the
 * process's memory until either writes a page: while it lives, each page
 * the process writes first is copied (a page fault and 4 KiB).
 *
 * Contract: the caller ptrace-stopped every thread of PID (it is their
 * tracer, in this thread), seized with PTRACE_O_TRACESYSGOOD (tracee.c
 * does: a thread whose tracer dies at a syscall stop sends itself the
 * stop's code, and SIGTRAP would kill it), and resumes them itself. */
#ifndef DWLEAK_SNAPSHOT_H
#define DWLEAK_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A writable mapping a copy lacks (MADV_DONTFORK) or sees zeroed
 * (MADV_WIPEONFORK): read from the process itself, in the pause. */
struct proc_snapshot_gap {
	uint64_t start, end;
};

struct proc_snapshot {
	pid_t pid;	     /* the process */
	uint64_t cave;	     /* where the code the thread runs is placed (cave.h) */
	struct proc_snapshot_gap *gaps; /* malloc'd, sorted */
	size_t ngaps;
	pid_t copy;	     /* its copy: stopped, traced by the caller; 0 none */
	pid_t zombie;	     /* the copy, killed and reaped by the caller, left for the process */
	double clone_ms;     /* the clone() in the process: in the pause */
	double reap_ms;	     /* the process's wait4 (proc_snapshot_reap) */
};

/*
 * Before the stop: checks that a copy's pages cannot get the process
 * OOM-killed (the memory free in its memory cgroup and its ancestors, and
 * in the system, must be at least a quarter of its anonymous memory: each
 * page it writes while the copy lives is copied), finds where the code
 * goes in process PID (a cave, its own from an earlier check if there is
 * one) and the writable mappings a copy would lack or see zeroed (VmFlags
 * "dc" or "wf" in /proc/PID/smaps; the kernel's [uprobes] page aside:
 * S->gaps, to be read from the process itself).  Fills *S (free with
 * proc_snapshot_free).  Returns 0, or -ENOMEM (too little memory free),
 * -ENOTSUP (no cave) or -errno, WHY (WHYLEN bytes) saying why.
 */
int proc_snapshot_prepare(pid_t pid, struct proc_snapshot *s, char *why, size_t whylen);

/*
 * Makes thread TID of the process (stopped, see the contract) clone it,
 * from the cave; S->copy is then the copy, stopped.  The thread's
 * registers and signal mask are put back as they were (the system call it
 * was interrupted in is made again when it resumes).  Returns 0, or a
 * negative errno with WHY (WHYLEN bytes) saying why, and the process as
 * it was:
 *   -ENOTSUP  a seccomp filter would deny clone, wait4, rt_sigprocmask or
 *             exit_group (or the filters cannot be read);
 *   -EAGAIN, -ENOMEM  the clone failed in the process (its return);
 *   -ETIMEDOUT, -ESRCH, -EIO as usual.
 */
int proc_snapshot_take(struct proc_snapshot *s, pid_t tid, char *why, size_t whylen);

/*
 * Kills the copy of S and reaps it as its tracer (the process may run):
 * it is then a zombie child of the process, raising no signal there
 * (S->zombie), until proc_snapshot_reap.  Call it before any waitpid(-1)
 * of the caller's (tracee_stop_process), which must not see the copy.
 * Returns 0 or -errno; S->copy is 0 after.
 */
int proc_snapshot_drop(struct proc_snapshot *s);

/*
 * Has thread TID of the process (stopped again by the caller, see the
 * contract) reap the zombie S->zombie with wait4 on that pid.  Returns 0
 * or -errno; S->zombie is 0 after.
 */
int proc_snapshot_reap(struct proc_snapshot *s, pid_t tid);

/* The gaps freed; a copy left is dropped.  NULL-safe. */
void proc_snapshot_free(struct proc_snapshot *s);

#endif
