/* The watcher's BPF program as user space drives it (bpf/watch.c, the
 * only includer of its skeleton): which of its BTF tracepoints this kernel
 * has, load and attach those, the pids whose exit is wanted, and the
 * events delivered to a callback. */
#ifndef DWLEAK_BPF_WATCH_H
#define DWLEAK_BPF_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "watch_events.h"

/* Which tracepoints to leave out even where the kernel has them (tests
 * of the fallbacks): bits 1 << enum watch_event_type. */
struct watch_settings {
	unsigned int disable;
	bool exit_all; /* report every process's exit, not only watch_pid_add()'s */
};

/* What the kernel gave: per event type, whether its tracepoint is
 * attached, and in words how (or why not). */
struct watch_info {
	bool live[WATCH_EVENT_COUNT];
	const char *how[WATCH_EVENT_COUNT]; /* "tp_btf/mark_victim (task, uid)", "no BTF
					     * tracepoint mark_victim in this kernel", ... */
};

struct watch;

/*
 * Loads and attaches the tracepoints S leaves in that this kernel has
 * (probed in its BTF first: one that is missing is left out, and INFO
 * says so, not an error).  EVENT(CTX, E) gets each event from
 * watch_consume().  Returns 0 and *OUT, or a negative errno with WHY
 * (WHYLEN bytes): no BTF, the kernel refused the program (DWLEAK_DEBUG=1
 * shows libbpf's messages), no privilege.  With no tracepoint at all
 * *OUT is still made (every INFO.live false).  Free with watch_close().
 */
int watch_open(const struct watch_settings *s, void (*event)(void *ctx, const struct watch_event *e), void *ctx,
	       struct watch **out, char *why, size_t whylen);

/* What W attached. */
void watch_info_get(const struct watch *w, struct watch_info *out);

/* The descriptor to poll for input when events wait; -1 when nothing is
 * attached. */
int watch_fd(const struct watch *w);

/* Delivers every event waiting, without blocking.  Returns how many, or a
 * negative errno. */
int watch_consume(struct watch *w);

/* Reports (or stops reporting) the exit of process PID.  Return 0 or a
 * negative errno: -E2BIG, WATCH_PIDS_MAX pids are watched already
 * (watch_pid_add); -ENOENT, PID was not watched (watch_pid_remove). */
int watch_pid_add(struct watch *w, pid_t pid);
int watch_pid_remove(struct watch *w, pid_t pid);

/* Events lost so far (the ring was full), by type, summed over CPUs. */
int watch_lost_read(const struct watch *w, uint64_t lost[WATCH_EVENT_COUNT]);

/* Detaches and frees W.  NULL is ok. */
void watch_close(struct watch *w);

#endif
