/* The agent's HTTP routes on its live session: the heap of every traced
 * process (or one) as one pprof profile, one process's report in any
 * format, /metrics from each process's aggregate (no frame is named for
 * a scrape of numbers), and a leak check on demand.  They run in the
 * agent's one thread (agent/http.c calls them from the poll loop), so
 * they read the session without locks. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "serve.h"

/* A 404 for PID that says why it is not traced, when the agent knows. */
static int not_traced(const struct agent *a, pid_t pid, struct agent_response *rs)
{
	const struct agent_skip *sk = agent_skip_find(a, pid);

	if (sk)
		return agent_response_text(rs, 404, "pid %d (%s) is not traced: %s\n", (int)pid, sk->comm, sk->why);
	return agent_response_text(rs, 404, "no traced process with pid %d\n", (int)pid);
}

static int on_heap(void *ctx, const struct agent_request *rq, struct agent_response *rs)
{
	struct agent *a = ctx;
	struct agent_report *reps = calloc(a->nprocs + 1, sizeof(*reps));
	struct agent_proc_report *in = calloc(a->nprocs + 1, sizeof(*in));
	size_t n = 0;
	int err = reps && in ? 0 : -ENOMEM;

	if (!err && rq->pid && !agent_proc_find(a, rq->pid))
		err = not_traced(a, rq->pid, rs);
	else {
		for (size_t i = 0; !err && i < a->nprocs; i++) {
			struct agent_proc *p = a->procs[i];

			if (rq->pid && p->pid != rq->pid)
				continue;
			err = agent_report_build(a, p, rq->peak, NULL, &reps[n]);
			if (!err) {
				in[n] = (struct agent_proc_report){ reps[n].r, p->comm };
				n++;
			}
		}
		err = err ?: agent_body_heap(in, n, rs);
	}
	for (size_t i = 0; i < n; i++)
		agent_report_free(&reps[i]);
	free(reps);
	free(in);
	return err;
}

static int on_report(void *ctx, const struct agent_request *rq, struct agent_response *rs)
{
	struct agent *a = ctx;
	struct agent_proc *p = agent_proc_find(a, rq->pid);
	struct agent_report r;
	int err;

	if (!p)
		return not_traced(a, rq->pid, rs);
	err = agent_report_build(a, p, rq->peak, NULL, &r);
	if (err)
		return err;
	/* every stack: --max-stacks bounds them already */
	err = agent_body_report(r.r, rq->format, 0, rs);
	agent_report_free(&r);
	return err;
}

static int on_metrics(void *ctx, const struct agent_request *rq, struct agent_response *rs)
{
	struct agent *a = ctx;
	struct agent_metrics_proc *procs = calloc(a->nprocs + 1, sizeof(*procs));
	struct agent_metrics m = { .procs = procs, .skipped_processes = a->nskipped,
				   .watch_events_lost = agent_watch_lost(a->watch), .leak_check_pause = &a->pause };
	char *body;
	size_t len;
	int err = procs ? 0 : -ENOMEM;

	(void)rq;
	session_sync(a->s); /* the walks in the store: their ends are counted */
	for (size_t i = 0; !err && i < a->nprocs; i++) {
		struct agent_proc *p = a->procs[i];

		if (agent_books_metrics(a, p, &procs[m.nprocs]))
			continue; /* forgotten meanwhile */
		m.nprocs++;
		/* an ended process's last numbers are out: it may go */
		if (p->exited)
			p->final_scraped = true;
	}
	err = err ?: agent_self_read("/proc", &m.self);
	err = err ?: agent_metrics_write(&m, &body, &len);
	free(procs);
	if (err)
		return err;
	rs->body = body;
	rs->len = len;
	rs->content_type = AGENT_METRICS_CONTENT_TYPE;
	return 0;
}

static int on_leak_check(void *ctx, const struct agent_request *rq, struct agent_response *rs)
{
	struct agent *a = ctx;
	struct agent_proc *p = agent_proc_find(a, rq->pid);
	struct agent_report r;
	int err;

	if (!p)
		return not_traced(a, rq->pid, rs);
	/* a sampled block may be reachable only through blocks never sampled,
	 * which no scan can tell from free memory: a sampled check needs the
	 * library's index of every block, kept only when asked for */
	if (a->set.sample_bytes && !a->set.leak_check)
		return agent_response_text(rs, 409, "pid %d (%s) is sampled (--sample-bytes %llu): a leak check must see "
						    "every block, and the agent keeps no index of them unless it runs "
						    "with --leak-check-every SEC; or run it with --sample-bytes 0 to "
						    "trace every allocation\n", (int)p->pid, p->comm,
					   (unsigned long long)a->set.sample_bytes);
	if (p->exited)
		return agent_response_text(rs, 409, "pid %d (%s) has ended: nothing left to scan\n", (int)p->pid,
					   p->comm);
	err = agent_books_leak_check(a, p);
	if (err)
		return agent_response_text(rs, 500, "the leak check of pid %d (%s) failed: %s\n", (int)p->pid, p->comm,
					   strerror(-err));
	/* the verdict, as the JSON report says it */
	err = agent_report_build(a, p, false, NULL, &r);
	err = err ?: agent_body_report(r.r, REPORT_FORMAT_JSON, 0, rs);
	agent_report_free(&r);
	return err;
}

void agent_routes_init(struct agent *a, struct agent_http_handlers *h)
{
	memset(h, 0, sizeof(*h));
	h->ctx = a;
	h->route[AGENT_ROUTE_HEAP] = on_heap;
	h->route[AGENT_ROUTE_METRICS] = on_metrics;
	h->route[AGENT_ROUTE_REPORT] = on_report;
	h->route[AGENT_ROUTE_LEAK_CHECK] = on_leak_check;
}
