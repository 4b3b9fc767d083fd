// SPDX-License-Identifier: GPL-2.0
/* The agent's watcher: four BTF tracepoints, which need no tracefs and no
 * kprobes.  New programs (sched_process_exec), processes that end
 * (sched_process_exit, reported once its last thread ends and only for
 * the pids user space asks about), the OOM killer's victim (mark_victim,
 * raised before the victim is killed), and new processes those pids fork
 * (sched_process_fork: a pre-forking server's workers run their parent's
 * program and never exec).  Each writes one struct watch_event into one
 * ring buffer; a full ring is counted. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "watch_events.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space before load: report every exit, not only the
 * watch_pids ones (tests, and a caller that follows every process). */
const volatile bool exit_all = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, WATCH_RING_BYTES);
} watch_events SEC(".maps");

/* The pids whose exit and forks user space wants (value unused). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WATCH_PIDS_MAX);
	__type(key, __u32);
	__type(value, __u8);
} watch_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WATCH_LOST_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} watch_lost SEC(".maps");

/* A zeroed event of TYPE in the ring, or NULL (counted) when it is full. */
static __always_inline struct watch_event *event_reserve(__u32 type)
{
	struct watch_event *e = bpf_ringbuf_reserve(&watch_events, sizeof(*e), 0);
	__u64 *lost;

	if (!e) {
		lost = bpf_map_lookup_elem(&watch_lost, &type);
		if (lost)
			(*lost)++;
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = type;
	e->time_ns = bpf_ktime_get_ns();
	return e;
}

/* The task's cgroup v2 id: its default hierarchy cgroup's kernfs id. */
static __always_inline __u64 task_cgroup_id(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(watch_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct watch_event *e = event_reserve(WATCH_EVENT_EXEC);

	if (!e)
		return 0;
	e->pid = BPF_CORE_READ(p, tgid);
	e->tid = BPF_CORE_READ(p, pid);
	e->old_tid = old_pid;
	e->ppid = BPF_CORE_READ(p, real_parent, tgid);
	/* p is current: its comm is the new program's already (begin_new_exec) */
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->uid = (__u32)bpf_get_current_uid_gid();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/*
 * Every thread's end runs this; the process ends with its last thread,
 * which do_exit() has counted out of signal->live before the tracepoint
 * (atomic_dec_and_test, then trace_sched_process_exit: Linux 3.x to 6.18
 * alike).  Two threads ending at once may both see 0, so user space may
 * get one exit twice.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(watch_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct watch_event *e;

	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	if (!exit_all && !bpf_map_lookup_elem(&watch_pids, &tgid))
		return 0;
	e = event_reserve(WATCH_EVENT_EXIT);
	if (!e)
		return 0;
	e->pid = tgid;
	e->tid = BPF_CORE_READ(p, pid);
	e->exit_code = BPF_CORE_READ(p, exit_code);
	e->cgroup_id = task_cgroup_id(p);
	BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/*
 * A clone: a new process when the child leads its own thread group (a
 * thread's clone shares its parent's).  Only the children of watched pids
 * (or of any, with exit_all), which the agent decides on before the child
 * may have run much: it is runnable once this returns.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(watch_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	struct watch_event *e;

	if (ctgid == ptgid || BPF_CORE_READ(child, pid) != ctgid)
		return 0;
	if (!exit_all && !bpf_map_lookup_elem(&watch_pids, &ptgid))
		return 0;
	e = event_reserve(WATCH_EVENT_FORK);
	if (!e)
		return 0;
	e->pid = ctgid;
	e->tid = ctgid;
	e->ppid = ptgid;
	e->cgroup_id = task_cgroup_id(child);
	BPF_CORE_READ_STR_INTO(&e->comm, child, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* mm->rss_stat as Linux 6.2+ lays it out: an array of percpu_counter,
 * whose count is the sum without the CPUs' pending deltas.  Older
 * kernels (an atomic_long_t array inside struct mm_rss_stat) do not
 * match, and the RSS is left unknown. */
struct percpu_counter___rss {
	s64 count;
} __attribute__((preserve_access_index));

struct mm_struct___rss {
	struct percpu_counter___rss rss_stat[4];
} __attribute__((preserve_access_index));

/* enum mm counters: file, anon, swap entries, shmem */
#define RSS_FILE 0
#define RSS_ANON 1
#define RSS_SHMEM 3

static __always_inline void victim_fill(struct watch_event *e, struct task_struct *t)
{
	struct mm_struct___rss *mm = (void *)BPF_CORE_READ(t, mm);
	s64 pages = 0;

	e->pid = BPF_CORE_READ(t, tgid);
	e->tid = BPF_CORE_READ(t, pid);
	e->ppid = BPF_CORE_READ(t, real_parent, tgid);
	e->cgroup_id = task_cgroup_id(t);
	BPF_CORE_READ_STR_INTO(&e->comm, t, comm);
	if (mm && bpf_core_field_exists(mm->rss_stat)) {
		pages = BPF_CORE_READ(mm, rss_stat[RSS_FILE].count) + BPF_CORE_READ(mm, rss_stat[RSS_ANON].count) +
			BPF_CORE_READ(mm, rss_stat[RSS_SHMEM].count);
		e->rss_pages = pages > 0 ? (__u64)pages : 0;
	} else {
		e->flags |= WATCH_FLAG_RSS_UNKNOWN;
	}
}

/* Linux 6.8+: mark_victim(struct task_struct *task, uid_t uid).  The
 * victim is alive: it gets SIGKILL after this. */
SEC("tp_btf/mark_victim")
int BPF_PROG(watch_victim, struct task_struct *task, uid_t uid)
{
	struct watch_event *e = event_reserve(WATCH_EVENT_VICTIM);

	if (!e)
		return 0;
	victim_fill(e, task);
	e->uid = uid;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* Before Linux 6.8: mark_victim(int pid); the rest comes from user space. */
SEC("tp_btf/mark_victim")
int BPF_PROG(watch_victim_pid, int pid)
{
	struct watch_event *e = event_reserve(WATCH_EVENT_VICTIM);

	if (!e)
		return 0;
	e->pid = pid;
	e->tid = pid;
	e->flags |= WATCH_FLAG_RSS_UNKNOWN;
	bpf_ringbuf_submit(e, 0);
	return 0;
}
