/* Report bodies for the agent's routes: a report written to memory in the
 * format asked, and many processes' reports merged into one for the pprof
 * endpoint, each stack labelled with its process. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof.h"
#include "serve.h"

const char *agent_format_content_type(enum report_format fmt)
{
	switch (fmt) {
	case REPORT_FORMAT_JSON:
		return "application/json";
	case REPORT_FORMAT_PPROF:
		/* what Go's net/http/pprof sends for a profile */
		return "application/octet-stream";
	case REPORT_FORMAT_SVG:
		return "image/svg+xml";
	default:
		return "text/plain; charset=utf-8";
	}
}

int agent_body_report(const struct report *r, enum report_format fmt, unsigned int top,
		      struct agent_response *rs)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int err;

	if (!f)
		return -ENOMEM;
	err = report_write(f, fmt, r, top);
	if (fclose(f) && !err)
		err = -ENOMEM;
	if (err) {
		free(buf);
		return err;
	}
	free(rs->body);
	rs->body = buf;
	rs->len = len;
	rs->content_type = agent_format_content_type(fmt);
	return 0;
}

void agent_reports_merged_free(struct report *r)
{
	if (!r)
		return;
	free(r->stacks);
	free(r->processes);
	free((void *)r->losses);
	r->stacks = NULL;
	r->processes = NULL;
	r->losses = NULL;
}

int agent_reports_merge(const struct agent_proc_report *in, size_t n, struct report *out)
{
	size_t nstacks = 0, nprocs = 0, nlosses = 0, i, j;
	struct report_loss *losses;

	memset(out, 0, sizeof(*out));
	out->duration_s = NAN;
	for (i = 0; i < n; i++) {
		nstacks += in[i].report->nstacks;
		nprocs += in[i].report->nprocesses ? in[i].report->nprocesses : 1;
		nlosses += in[i].report->nlosses;
	}
	out->stacks = calloc(nstacks ? nstacks : 1, sizeof(*out->stacks));
	out->processes = calloc(nprocs ? nprocs : 1, sizeof(*out->processes));
	losses = calloc(nlosses ? nlosses : 1, sizeof(*losses));
	out->losses = losses;
	if (!out->stacks || !out->processes || !losses) {
		agent_reports_merged_free(out);
		return -ENOMEM;
	}
	if (n == 1) {
		out->pid = in[0].report->pid;
		out->command = in[0].report->command;
	}
	out->unwind = n ? in[0].report->unwind : NULL;
	for (i = 0; i < n; i++) {
		const struct report *r = in[i].report;
		struct report_totals *t = &out->totals;
		bool own = false;

		for (j = 0; j < r->nstacks; j++) {
			struct report_stack *s = &out->stacks[out->nstacks++];

			*s = r->stacks[j];
			/* every stack names its process, so each sample has its labels */
			s->pid = report_stack_pid(r, &r->stacks[j]);
			s->command = report_stack_command(r, &r->stacks[j]);
		}
		for (j = 0; j < r->nprocesses; j++) {
			struct report_process *p = &out->processes[out->nprocesses++];

			*p = r->processes[j];
			if (p->pid == r->pid) {
				own = true;
				if (!p->comm)
					p->comm = in[i].comm;
			}
		}
		if (!own && !r->nprocesses)
			out->processes[out->nprocesses++] = (struct report_process){
				.pid = r->pid, .command = r->command, .comm = in[i].comm,
				.state = REPORT_PROCESS_RUNNING };
		for (j = 0; j < r->nlosses; j++)
			losses[out->nlosses++] = r->losses[j];
		t->outstanding_bytes += r->totals.outstanding_bytes;
		t->outstanding_allocations += r->totals.outstanding_allocations;
		t->stacks += r->totals.stacks;
		t->dropped_events += r->totals.dropped_events;
		t->truncated_stacks += r->totals.truncated_stacks;
		t->unwind_errors += r->totals.unwind_errors;
		if (r->leak_check.present) {
			struct report_leak_check *lc = &out->leak_check;

			if (!lc->present)
				lc->pause_ms = 0;
			lc->present = true;
			for (int k = 0; k < REPORT_LEAK_KIND_COUNT; k++) {
				lc->kinds[k].bytes += r->leak_check.kinds[k].bytes;
				lc->kinds[k].allocations += r->leak_check.kinds[k].allocations;
			}
			lc->unclassified.bytes += r->leak_check.unclassified.bytes;
			lc->unclassified.allocations += r->leak_check.unclassified.allocations;
			lc->unsure.bytes += r->leak_check.unsure.bytes;
			lc->unsure.allocations += r->leak_check.unsure.allocations;
			lc->scanned_bytes += r->leak_check.scanned_bytes;
			if (isfinite(r->leak_check.pause_ms))
				lc->pause_ms += r->leak_check.pause_ms;
		}
		if (!out->sample_bytes)
			out->sample_bytes = r->sample_bytes;
		if (isfinite(r->duration_s) && !(r->duration_s <= out->duration_s))
			out->duration_s = r->duration_s;
		if (r->timestamp > out->timestamp)
			out->timestamp = r->timestamp;
	}
	return 0;
}

int agent_body_heap(const struct agent_proc_report *in, size_t n, struct agent_response *rs)
{
	struct report merged;
	uint8_t *gz;
	size_t len;
	int err;

	err = agent_reports_merge(in, n, &merged);
	if (err)
		return err;
	err = report_pprof_encode(&merged, 0, &gz, &len);
	agent_reports_merged_free(&merged);
	if (err)
		return err;
	free(rs->body);
	rs->body = gz;
	rs->len = len;
	rs->content_type = agent_format_content_type(REPORT_FORMAT_PPROF);
	return 0;
}
