/* The bodies of the agent's report routes, made from struct reports: one
 * process's report in any format (/report), and the heap of one or many
 * processes as one pprof profile (/debug/pprof/heap) whose samples carry
 * pid and comm labels. */
#ifndef DWLEAK_AGENT_SERVE_H
#define DWLEAK_AGENT_SERVE_H

#include <stddef.h>

#include "http.h"
#include "report.h"
#include "write.h"

/* One traced process's report and its name. */
struct agent_proc_report {
	const struct report *report; /* borrowed; its stacks are R's pid's, or name their own */
	const char *comm;            /* /proc/PID/comm; NULL = unknown (no comm label) */
};

/* The Content-Type of format FMT ("application/json", ...); static. */
const char *agent_format_content_type(enum report_format fmt);

/*
 * Writes R in format FMT (top TOP stacks, 0 = all) as RS's body, with its
 * Content-Type.  Returns 0 or what report_write() returns.
 */
int agent_body_report(const struct report *r, enum report_format fmt, unsigned int top,
		      struct agent_response *rs);

/*
 * Makes *OUT one report of the N reports IN: every stack, each naming its
 * process (pid and command); every process, with its comm; the totals,
 * leak check kinds and losses added up.  *OUT borrows everything but its
 * own arrays: free them with agent_reports_merged_free() while IN lives.
 * Returns 0 or -ENOMEM.
 */
int agent_reports_merge(const struct agent_proc_report *in, size_t n, struct report *out);

/* Frees the arrays agent_reports_merge() made in R (not R).  NULL is ok. */
void agent_reports_merged_free(struct report *r);

/*
 * The /debug/pprof/heap body of the N reports IN (N 0: an empty profile):
 * what `--format pprof` writes (report_pprof_encode) for their merge,
 * every stack, as application/octet-stream.  Returns 0, -ENOMEM or
 * -EPROTO.
 */
int agent_body_heap(const struct agent_proc_report *in, size_t n, struct agent_response *rs);

#endif
