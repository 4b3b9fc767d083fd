/* Following a process tree with ptrace: every process the traced command
 * forks, vforks or execs is stopped by the kernel at that moment, before
 * it runs a single instruction, until dwleak has its probes in place; and
 * a process can be stopped whole (all its threads) for a leak check.
 *
 * Why ptrace: its stops are invisible to the tracees' real parents (a
 * shell waiting for its child sees nothing), and a tracee is never left
 * stopped: when dwleak dies, even by SIGKILL, the kernel detaches it and
 * it runs on.  Seized (PTRACE_SEIZE), so no SIGSTOP is injected; the
 * tracer is the calling thread, which must make every later call. */
#ifndef DWLEAK_TRACEE_H
#define DWLEAK_TRACEE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum tracee_event_kind {
	TRACEE_NONE = 0,
	/* PID forked CHILD (a new process: its own memory, the same image);
	 * both stay stopped until resumed */
	TRACEE_FORK,
	/* PID replaced its image (execve); stays stopped until resumed */
	TRACEE_EXEC,
	/* PID stopped itself with the signal a BPF program sent (si_code
	 * SI_KERNEL): dwleak asked for the stop; resume with tracee_resume */
	TRACEE_STOP_ASKED,
	/* PID is about to exit (its memory is still intact); stays stopped
	 * until resumed; only with tracee_options.exit_stops */
	TRACEE_EXITING,
	/* PID is gone; STATUS is its wait status */
	TRACEE_EXIT,
};

struct tracee_event {
	enum tracee_event_kind kind;
	pid_t pid;   /* the process (thread group id) */
	pid_t tid;   /* the thread that stopped; resume this one */
	pid_t child; /* TRACEE_FORK: the new process */
	bool vfork;  /* TRACEE_FORK: CHILD shares PID's memory until it execs or exits */
	int status;  /* TRACEE_EXIT: wait status */
};

/* The processes and threads traced, each thread's state, and events not
 * yet handed out (a child's first stop may come before its parent's fork
 * event). */
struct tracee_set;

struct tracee_options {
	bool follow;	 /* follow forks and vforks (execs and threads always) */
	bool exit_stops; /* report TRACEE_EXITING (PTRACE_O_TRACEEXIT) */
};

/* An empty set; free with tracee_set_free (which detaches everything). */
int tracee_set_new(const struct tracee_options *o, struct tracee_set **out);

/*
 * Seizes thread TID, a thread of process PID that is held and not yet
 * running its program (a child of ours waiting before its execve).
 * Returns 0 or a negative errno (-EPERM: traced by someone else, or not
 * allowed).
 */
int tracee_seize_thread(struct tracee_set *s, pid_t pid, pid_t tid);

/*
 * Seizes every thread of running process PID (threads created meanwhile
 * too, until /proc/PID/task is stable).  Returns 0 or a negative errno
 * (-EPERM: already traced, e.g. by a debugger: TracerPid in
 * /proc/PID/status says by whom; -ESRCH: gone).
 */
int tracee_seize_process(struct tracee_set *s, pid_t pid);

/*
 * Collects what the tracees did, without blocking: handles thread-level
 * stops itself (a new thread, a signal to pass on, job control) and
 * returns the next process-level event in *EV (kind TRACEE_NONE when
 * there is none).  Returns 1 with an event, 0 without, or a negative
 * errno.
 */
int tracee_next(struct tracee_set *s, struct tracee_event *ev);

/* Resumes thread TID after an event (no signal delivered).  0 or -errno
 * (-ESRCH: it died meanwhile, not an error for callers to report). */
int tracee_resume(struct tracee_set *s, pid_t tid);

/*
 * Stops every thread of process PID (PTRACE_INTERRUPT) and waits until
 * all are stopped, handing events of other processes that come meanwhile
 * to later tracee_next calls.  Fills TIDS (malloc'd, *N) with the
 * threads.  Returns 0 or a negative errno.  tracee_resume_process undoes
 * it.
 */
int tracee_stop_process(struct tracee_set *s, pid_t pid, pid_t **tids, size_t *n);
int tracee_resume_process(struct tracee_set *s, pid_t pid);

/*
 * Stops one running thread of process PID (PTRACE_INTERRUPT; another if
 * it ends meanwhile), its id in *STOPPED, while the others run on.
 * Returns 0, -ESRCH (no thread of PID runs), or a negative errno.
 * tracee_resume_process undoes it.
 */
int tracee_stop_thread(struct tracee_set *s, pid_t pid, pid_t *stopped);

/* Detaches every thread of process PID (it runs on, untraced). */
void tracee_detach_process(struct tracee_set *s, pid_t pid);

/* How many processes are traced now. */
size_t tracee_count(const struct tracee_set *s);

/* Detaches everything still traced (they run on) and frees S.  NULL ok. */
void tracee_set_free(struct tracee_set *s);

/* The thread group id of thread TID (from /proc), or -errno. */
pid_t tracee_tgid_of(pid_t tid);

#endif
