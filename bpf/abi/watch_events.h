/* Layouts shared by the watcher's BPF program (bpf/watch.bpf.c) and user
 * space (bpf/watch.c): which processes start, end, and are chosen by the
 * OOM killer.  A program of its own beside dwleak.bpf.c, so the agent can
 * watch the system without loading the allocator probes.  Fixed-width
 * types only; every struct's size is asserted. */
#ifndef DWLEAK_WATCH_EVENTS_H
#define DWLEAK_WATCH_EVENTS_H

/* --- Limits ---------------------------------------------------------- */

/* Processes whose exit and forks are reported (the agent's traced ones)
 * unless the program is told to report every exit: the watch_pids map's
 * size, that of the procs map (DWLEAK_MAX_PROCS). */
#define WATCH_PIDS_MAX 4096
/* The event ring: 72-byte records, so ~3,600 events; a burst of execs
 * beyond that between two polls is counted (WATCH_LOST). */
#define WATCH_RING_BYTES (256u << 10)

/* --- Events ---------------------------------------------------------- */

/* X(ID, NAME): the enumerator WATCH_EVENT_<ID>, NAME for logs and --stats. */
#define WATCH_EVENT_TYPES(X)                                                      \
	/* a process's exec succeeded (tp_btf/sched_process_exec) */               \
	X(EXEC, "exec")                                                              \
	/* a process's last thread ended (tp_btf/sched_process_exit, group dead) */ \
	X(EXIT, "exit")                                                              \
	/* the OOM killer chose the process (tp_btf/mark_victim): it is killed */   \
	/* next, and is still alive when this is written */                         \
	X(VICTIM, "oom_victim")                                                      \
	/* a watched process forked a new process, not a thread */                  \
	/* (tp_btf/sched_process_fork): the child runs its parent's program */      \
	X(FORK, "fork")

enum watch_event_type {
#define WATCH_EVENT_ENUM(id, name) WATCH_EVENT_##id,
	WATCH_EVENT_TYPES(WATCH_EVENT_ENUM)
#undef WATCH_EVENT_ENUM
	WATCH_EVENT_COUNT /* not a type: how many there are */
};

#ifndef __bpf__
#include <stdint.h>
typedef uint32_t watch_u32;
typedef int32_t watch_s32;
typedef uint64_t watch_u64;
#else
typedef __u32 watch_u32;
typedef __s32 watch_s32;
typedef __u64 watch_u64;
#endif

/*
 * One event, whatever its type.  PID is the process (thread group) id,
 * TID the thread that ran the event (EXEC: the pid after exec, which is
 * PID; OLD_TID the thread that called execve).  TIME_NS is CLOCK_MONOTONIC
 * (bpf_ktime_get_ns).  CGROUP_ID is the process's cgroup v2 id (the inode
 * of its directory in the v2 tree; 1 is the root).
 */
struct watch_event {
	watch_u32 type;      /* enum watch_event_type */
	watch_u32 pid;
	watch_u32 tid;
	watch_u32 ppid;      /* its parent's pid (EXEC, VICTIM, FORK: the watched process) */
	watch_u64 time_ns;
	watch_u64 cgroup_id;
	watch_s32 exit_code; /* EXIT: the wait status (exit code << 8, or the signal) */
	watch_u32 old_tid;   /* EXEC */
	watch_u64 rss_pages; /* VICTIM: file + anon + shmem pages, the kernel's counters
			      * without their per-CPU deltas; 0 = unknown */
	watch_u32 uid;       /* VICTIM: the victim's uid (the tracepoint's); EXEC: real uid */
	watch_u32 flags;     /* WATCH_FLAG_* */
	char comm[16];       /* its comm (EXEC: the new program's), NUL-ended */
};
_Static_assert(sizeof(struct watch_event) == 72, "struct watch_event layout");

/* VICTIM: RSS_PAGES could not be read in this kernel's layout. */
#define WATCH_FLAG_RSS_UNKNOWN 1u

/* The per-CPU counters of events lost, one per type (index: enum
 * watch_event_type): the ring was full. */
#define WATCH_LOST_COUNT WATCH_EVENT_COUNT

#endif
