/* The agent's /metrics body: Prometheus text exposition (format 0.0.4)
 * written from plain input structs, so the series are unit-tested byte for
 * byte and the agent only fills numbers in.  Also the agent's own CPU
 * time, RSS and open files, read from /proc/self. */
#ifndef DWLEAK_AGENT_METRICS_H
#define DWLEAK_AGENT_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"

/* The Content-Type of what agent_metrics_write() gives. */
#define AGENT_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/*
 * One traced process's series, each labelled pid and comm.  Every count is
 * since the agent began tracing the process; the leak check's are those of
 * its last check.
 */
struct agent_metrics_proc {
	int pid;
	const char *comm;                /* /proc/PID/comm, any bytes; NULL = "" */
	uint64_t outstanding_bytes;      /* dwleak_outstanding_bytes (SPEC.md) */
	uint64_t outstanding_allocations;
	uint64_t stacks;                 /* distinct stacks with outstanding allocations */
	double growth_bytes_per_second;  /* outstanding bytes' growth rate; NAN = not known
					  * yet: the series is left out */
	bool has_leak_check;             /* a check ran: the kind series and its time */
	struct report_leak_count leak_kinds[REPORT_LEAK_KIND_COUNT];
	double leak_check_time_seconds;  /* Unix time the last check ended */
	uint64_t dropped_events;         /* records lost (report_totals.dropped_events) */
	uint64_t unwind_errors;          /* walks ended early (report_totals.unwind_errors) */
	uint64_t evicted_stacks;         /* stacks folded into [evicted] by --max-stacks now */
	uint64_t peak_bytes;             /* the highest outstanding bytes the agent saw */
};

/*
 * A histogram as Prometheus counts one.  BOUNDS are the NBOUNDS upper bounds
 * in increasing order (+Inf is implicit); COUNTS[i] is how many
 * observations fell in (BOUNDS[i-1], BOUNDS[i]] (not cumulative: the writer
 * adds them up), and COUNTS[NBOUNDS] those above the last bound.  SUM is
 * the sum of every observation.  agent_histogram_observe() keeps one.
 */
struct agent_histogram {
	const double *bounds;
	size_t nbounds;
	uint64_t *counts; /* NBOUNDS + 1 */
	double sum;
};

/* Adds observation V to H.  A NaN is not counted anywhere (the caller
 * should not have one). */
void agent_histogram_observe(struct agent_histogram *h, double v);

/* The leak check's pause, seconds: from a millisecond to a minute. */
#define AGENT_PAUSE_BOUNDS {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60}
#define AGENT_PAUSE_NBOUNDS 13

/* The agent process itself (agent_self_read()). */
struct agent_self {
	double cpu_user_seconds, cpu_system_seconds;
	uint64_t resident_bytes;
	uint64_t open_fds;
};

/* Everything /metrics shows. */
struct agent_metrics {
	const struct agent_metrics_proc *procs; /* in the order given */
	size_t nprocs;                          /* also dwleak_traced_processes */
	uint64_t skipped_processes;             /* targets matched but not traced (no preload
						 * library and no --uprobes, attach failed) */
	uint64_t watch_events_lost;             /* exec/exit/OOM events the watcher lost */
	struct agent_self self;
	const struct agent_histogram *leak_check_pause; /* seconds; NULL: no series */
};

/*
 * Writes M as Prometheus text exposition format 0.0.4 into *OUT (malloc'd,
 * NUL-terminated, *LEN bytes without the NUL; the caller frees).  Each
 * family has its HELP and TYPE lines, then its series in the order of
 * M->procs.  A comm is escaped (backslash, double quote, newline) and any
 * byte that is not valid UTF-8 is written as U+FFFD, which Prometheus
 * requires of label values.  Returns 0 or -ENOMEM (*OUT NULL).
 */
int agent_metrics_write(const struct agent_metrics *m, char **out, size_t *len);

/*
 * Appends to the memory stream F the label value V (LEN bytes, any bytes)
 * escaped as format 0.0.4 wants it between its double quotes (see
 * agent_metrics_write).  Exposed for the unit test.
 */
void agent_metrics_label_escape(FILE *f, const char *v, size_t len);

/*
 * Reads the agent's own CPU time (/proc/self/stat's utime and stime), RSS
 * (/proc/self/statm's resident pages) and open files (/proc/self/fd) under
 * PROC (normally "/proc"; tests pass a fake tree whose "self" is a
 * directory).  Returns 0 or a negative errno (-EPROTO: a file is not as the
 * kernel writes it).
 */
int agent_self_read(const char *proc, struct agent_self *out);

/*
 * Parses the text of a /proc/PID/stat file (LEN bytes, no NUL needed) into
 * its utime and stime fields, clock ticks.  The command in parentheses may
 * hold any bytes, ')' and spaces too: the fields are counted from the last
 * ')'.  Returns 0 or -EPROTO.
 */
int agent_stat_parse(const char *text, size_t len, uint64_t *utime, uint64_t *stime);

#endif
