/* The agent's view of processes coming and going: exec (new programs, to
 * match against the targets), exit and forks of the processes it follows,
 * and the OOM killer's victims, through the watcher's BTF tracepoints
 * (bpf/watch.c) where the kernel has them, and where it has not: a scan
 * of /proc every second for new programs, a pidfd per followed process
 * for exits, and no OOM event (agent_watch_info says which is used).
 * One descriptor for the caller's poll loop; callbacks from
 * agent_watch_run() in the caller's thread. */
#ifndef DWLEAK_AGENT_PROC_WATCH_H
#define DWLEAK_AGENT_PROC_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "watch_events.h"

/* A process that exec'd (or, from the /proc scan, appeared or changed
 * its comm). */
struct agent_exec {
	pid_t pid, ppid;       /* PPID 0: unknown (the scan) */
	char comm[16];         /* its new comm, NUL-ended */
	uint64_t cgroup_id;    /* its cgroup v2 id; 0: unknown (the scan) */
	uint64_t time_ns;      /* CLOCK_MONOTONIC when it happened (the scan: when seen) */
};

/* A followed process forked a new process (not a thread), which runs its
 * parent's program without an exec: a pre-forking server's workers. */
struct agent_fork {
	pid_t pid, ppid;       /* the child, and the followed process that forked it */
	char comm[16];         /* the child's comm (its parent's), NUL-ended */
	uint64_t cgroup_id;    /* its cgroup v2 id */
	uint64_t time_ns;      /* CLOCK_MONOTONIC */
};

/* A followed process that ended. */
struct agent_exit {
	pid_t pid;
	int status;            /* as waitpid() gives it; -1: unknown (the pidfd fallback) */
	uint64_t time_ns;      /* CLOCK_MONOTONIC */
};

/*
 * The OOM killer chose PID (any process, followed or not).  It is still
 * alive when the callback runs, but is killed right after and its memory
 * is reaped by the kernel's oom_reaper within milliseconds: what the
 * caller reports must come from its own books, not from the victim's
 * memory.  Its exit follows this event, never precedes it (one ring
 * buffer, in the order the kernel wrote them).
 */
struct agent_victim {
	pid_t pid;
	char comm[16];         /* "" when the kernel's tracepoint gives only the pid */
	uint64_t cgroup_id;    /* its cgroup v2 id; 0: unknown */
	uint64_t rss_bytes;    /* file + anon + shmem resident bytes when chosen; 0: unknown */
	uid_t uid;
	uint64_t time_ns;      /* CLOCK_MONOTONIC when chosen */
};

/* Callbacks, each may be NULL; CTX is passed back. */
struct agent_watch_callbacks {
	void *ctx;
	void (*exec)(void *ctx, const struct agent_exec *e);
	void (*exit)(void *ctx, const struct agent_exit *e);
	void (*victim)(void *ctx, const struct agent_victim *v);
	/* without the fork tracepoint none come: where exec falls back to the
	 * /proc scan, a new child is an exec event like any new process */
	void (*fork)(void *ctx, const struct agent_fork *f);
};

struct agent_watch_settings {
	unsigned int disable;   /* 1 << enum watch_event_type: use the fallback even where
				 * the tracepoint exists (tests) */
	unsigned int scan_ms;   /* the /proc scan's period; 0 = 1000 */
	const char *proc;       /* where /proc is (tests); NULL = "/proc" */
	bool exit_all;          /* the tracepoint reports every process's exit, not only
				 * the followed ones' (tests: a victim's exit, which may
				 * come before the victim callback could follow it); an
				 * exit may then come twice */
};

/* How each kind of event is watched, in words for the log ("BTF tracepoint
 * sched_process_exec", "a scan of /proc every 1000 ms (no BTF tracepoint
 * sched_process_exec in this kernel)", "none: no OOM reports (...)"). */
struct agent_watch_info {
	char how[WATCH_EVENT_COUNT][160];
	bool tracepoint[WATCH_EVENT_COUNT];
};

struct agent_watch;

/*
 * Starts watching as S says, calling CB's callbacks from agent_watch_run().
 * The BPF watcher failing as a whole (no privilege, no BTF) is no error:
 * every kind falls back and agent_watch_info says why.  Returns 0 and
 * *OUT, or a negative errno with WHY (WHYLEN bytes) (no memory, no
 * epoll, no /proc).  Free with agent_watch_close().
 */
int agent_watch_open(const struct agent_watch_settings *s, const struct agent_watch_callbacks *cb,
		     struct agent_watch **out, char *why, size_t whylen);

/* The descriptor to poll for input (an epoll set of the ring buffer, the
 * scan's timer and the pidfds); W's. */
int agent_watch_fd(const struct agent_watch *w);

/* Delivers what is ready, without blocking.  Returns the number of events
 * delivered or a negative errno. */
int agent_watch_run(struct agent_watch *w);

/*
 * Reports the exit of process PID from now on (once; then it is
 * forgotten), and the processes it forks meanwhile.  Returns 0, -ESRCH when it has ended already (a zombie
 * too: the caller handles it as ended now, and should ignore an exit
 * event for a pid it no longer knows), or a negative errno (-E2BIG: too
 * many followed).
 */
int agent_watch_follow(struct agent_watch *w, pid_t pid);

/* Stops reporting PID's exit.  Returns 0 or a negative errno. */
int agent_watch_unfollow(struct agent_watch *w, pid_t pid);

/* How W watches each kind. */
void agent_watch_info_get(const struct agent_watch *w, struct agent_watch_info *out);

/* Events lost so far (the kernel's ring full), all kinds. */
uint64_t agent_watch_lost(const struct agent_watch *w);

/* Stops watching and frees W.  NULL is ok. */
void agent_watch_close(struct agent_watch *w);

#endif
