/* A test-only driver of the agent/ layer, for the shell tests (it prints;
 * the layer does not).  Subcommands:
 *
 *   agent_tool serve --listen ADDR [--token-file F] [--top N]
 *              --report PID:COMM:FILE.json [--report ...]
 *       the HTTP server with a fake data source: each JSON report (read
 *       with report/json_read.c) is process PID named COMM; /metrics from
 *       their totals, /debug/pprof/heap and /report from the reports,
 *       POST /leak-check answers what it would check.  Prints
 *       "agent_tool: listening on ADDR" on stderr, serves until SIGTERM.
 *   agent_tool watch [--disable exec,exit,victim,fork] [--exit-all]
 *              [--follow PID]... [--seconds N]
 *       prints how each kind is watched, then one line per event
 *       ("exec pid=.. ppid=.. comm=.. cgroup=.. t=NS", "exit pid=..
 *       status=.. t=NS", "victim pid=.. comm=.. rss=.. t=NS", "fork
 *       pid=.. ppid=.. comm=.. cgroup=.. t=NS").
 *   agent_tool bench PID:COMM:FILE.json [N]
 *       builds the /debug/pprof/heap and /metrics bodies of the report N
 *       times (default 10) and prints the median CPU time of each, ms:
 *       what a scrape costs the agent, apart from a busy machine's waits.
 *   agent_tool members [--root DIR] (--pid P|--comm N|--unit U|--cgroup C)...
 *       prints each current member pid on a line; with --match PID, prints
 *       "match PID TARGET" or "nomatch PID" instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "json_read.h"
#include "metrics.h"
#include "proc_watch.h"
#include "serve.h"
#include "targets.h"
#include "text_file.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("agent_tool: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* ---- serve ---- */

/* A string pool: one copy of each string, so that the frames of a report
 * read from JSON share their module and function names by pointer as a
 * live trace's do (report/frames.c names frames from one symbol table per
 * object).  Open addressing over the strings' FNV-1a hashes. */
struct pool {
	const char **slots;
	size_t cap, n;
};

static const char *pool_get(struct pool *p, const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	if (!s)
		return NULL;
	if ((p->n + 1) * 2 > p->cap) {
		struct pool bigger = { calloc(p->cap ? p->cap * 2 : 1024, sizeof(char *)), p->cap ? p->cap * 2 : 1024, 0 };

		if (!bigger.slots)
			die("out of memory");
		for (i = 0; i < p->cap; i++)
			if (p->slots[i])
				pool_get(&bigger, p->slots[i]);
		free(p->slots);
		*p = bigger;
	}
	for (const char *c = s; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	for (i = h & (p->cap - 1); p->slots[i]; i = (i + 1) & (p->cap - 1))
		if (!strcmp(p->slots[i], s))
			return p->slots[i];
	p->n++;
	return p->slots[i] = s;
}

/* Makes R's frames share equal strings (R's arrays are the reader's and
 * may be changed; the strings stay the reader's). */
static void report_share_strings(struct report *r, struct pool *pool)
{
	for (size_t i = 0; i < r->nstacks; i++) {
		struct report_frame *f = (struct report_frame *)r->stacks[i].frames;

		for (size_t j = 0; j < r->stacks[i].nframes; j++) {
			f[j].module = pool_get(pool, f[j].module);
			f[j].build_id = pool_get(pool, f[j].build_id);
			f[j].function = pool_get(pool, f[j].function);
			f[j].file = pool_get(pool, f[j].file);
		}
	}
}

struct source {
	struct report_json rj[16];
	struct agent_proc_report procs[16];
	size_t n;
	unsigned int top;
	struct pool pool;
};

/* The reports asked for: every one, or the one of PID (0 when none). */
static size_t select_reports(struct source *src, int pid, struct agent_proc_report *out)
{
	size_t n = 0;

	for (size_t i = 0; i < src->n; i++)
		if (!pid || src->procs[i].report->pid == pid)
			out[n++] = src->procs[i];
	return n;
}

static int on_heap(void *ctx, const struct agent_request *rq, struct agent_response *rs)
{
	struct source *src = ctx;
	struct agent_proc_report sel[16];
	size_t n = select_reports(src, rq->pid, sel);

	if (rq->pid && !n)
		return agent_response_text(rs, 404, "no traced process with pid %d\n", rq->pid);
	return agent_body_heap(sel, n, rs);
}

static int on_report(void *ctx, const struct agent_request *rq, struct agent_response *rs)
{
	struct source *src = ctx;
	struct agent_proc_report sel[16];

	if (!select_reports(src, rq->pid, sel))
		return agent_response_text(rs, 404, "no traced process with pid %d\n", rq->pid);
	return agent_body_report(sel[0].report, rq->format, src->top, rs);
}

static int on_metrics(void *ctx, const struct agent_request *rq, struct agent_response *rs)
{
	static const double bounds[] = AGENT_PAUSE_BOUNDS;
	uint64_t counts[AGENT_PAUSE_NBOUNDS + 1] = { 0 };
	struct agent_histogram pause = { bounds, AGENT_PAUSE_NBOUNDS, counts, 0 };
	struct source *src = ctx;
	struct agent_metrics_proc procs[16];
	struct agent_metrics m = { .procs = procs, .nprocs = src->n, .leak_check_pause = &pause };
	char *body;
	size_t len;
	int err;

	(void)rq;
	for (size_t i = 0; i < src->n; i++) {
		const struct report *r = src->procs[i].report;

		procs[i] = (struct agent_metrics_proc){
			.pid = r->pid, .comm = src->procs[i].comm,
			.outstanding_bytes = r->totals.outstanding_bytes,
			.outstanding_allocations = r->totals.outstanding_allocations,
			.stacks = r->totals.stacks, .growth_bytes_per_second = NAN,
			.dropped_events = r->totals.dropped_events, .unwind_errors = r->totals.unwind_errors,
			.has_leak_check = r->leak_check.present,
		};
		if (r->leak_check.present) {
			memcpy(procs[i].leak_kinds, r->leak_check.kinds, sizeof(procs[i].leak_kinds));
			if (isfinite(r->leak_check.pause_ms))
				agent_histogram_observe(&pause, r->leak_check.pause_ms / 1000);
		}
	}
	if ((err = agent_self_read("/proc", &m.self)))
		return err;
	if ((err = agent_metrics_write(&m, &body, &len)))
		return err;
	rs->body = body;
	rs->len = len;
	rs->content_type = AGENT_METRICS_CONTENT_TYPE;
	return 0;
}

static int on_leak_check(void *ctx, const struct agent_request *rq, struct agent_response *rs)
{
	struct source *src = ctx;
	struct agent_proc_report sel[16];

	if (!select_reports(src, rq->pid, sel))
		return agent_response_text(rs, 404, "no traced process with pid %d\n", rq->pid);
	return agent_response_text(rs, 200, "leak check of pid %d done (test source: nothing stopped)\n", rq->pid);
}

/* Reads serve's --report and --top arguments into SRC, the others into
 * C (NULL: none taken).  Returns 0, or dies. */
static int serve_args(int argc, char **argv, struct source *src, struct agent_http_config *c)
{
	int err;

	for (int i = 0; i < argc; i++) {
		if (c && !strcmp(argv[i], "--listen") && i + 1 < argc) {
			c->listen = argv[++i];
		} else if (c && !strcmp(argv[i], "--token-file") && i + 1 < argc) {
			c->token_file = argv[++i];
		} else if (!strcmp(argv[i], "--top") && i + 1 < argc) {
			src->top = (unsigned int)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--report") && i + 1 < argc && src->n < 16) {
			char *spec = argv[++i], *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
			const char *what = NULL;
			struct report *r;
			char *text;
			size_t len;

			if (!c2)
				die("--report PID:COMM:FILE, not %s", spec);
			*c1 = *c2 = '\0';
			err = text_file_read(c2 + 1, 1u << 30, &text, &len, &what);
			if (err)
				die("cannot read %s: %s", c2 + 1, strerror(-err));
			err = report_json_read(text, len, &src->rj[src->n]);
			free(text);
			if (err)
				die("%s is no JSON report: %s", c2 + 1,
				    src->rj[src->n].error.message ? src->rj[src->n].error.message : strerror(-err));
			r = &src->rj[src->n].report;
			r->pid = atoi(spec);
			/* the stacks and processes are this pid's now (one file may
			 * stand for two processes) */
			for (size_t k = 0; k < r->nstacks; k++)
				r->stacks[k].pid = r->pid;
			for (size_t k = 0; k < r->nprocesses; k++)
				r->processes[k].pid = k ? r->processes[k].pid : r->pid;
			report_share_strings(r, &src->pool);
			src->procs[src->n].report = r;
			src->procs[src->n].comm = c1 + 1;
			src->n++;
		} else {
			die("serve: unknown argument %s", argv[i]);
		}
	}
	return 0;
}

static int cmd_serve_load(int argc, char **argv, struct source *src)
{
	return serve_args(argc, argv, src, NULL);
}

static int cmd_serve(int argc, char **argv)
{
	static struct source src;
	struct agent_http_config c = { 0 };
	struct agent_http_handlers h = { .ctx = &src };
	struct agent_http *s;
	char why[512];
	int err;

	serve_args(argc, argv, &src, &c);
	h.route[AGENT_ROUTE_HEAP] = on_heap;
	h.route[AGENT_ROUTE_METRICS] = on_metrics;
	h.route[AGENT_ROUTE_REPORT] = on_report;
	h.route[AGENT_ROUTE_LEAK_CHECK] = on_leak_check;
	err = agent_http_open(&c, &h, &s, why, sizeof(why));
	if (err) {
		fprintf(stderr, "agent_tool: %s\n", why);
		return 1;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	fprintf(stderr, "agent_tool: listening on %s\n", agent_http_address(s));
	while (!stop) {
		struct pollfd p = { agent_http_fd(s), POLLIN, 0 };
		int t = agent_http_timeout_ms(s);

		if (poll(&p, 1, t < 0 || t > 500 ? 500 : t) < 0 && errno != EINTR)
			break;
		if (agent_http_run(s))
			die("the server broke");
	}
	agent_http_close(s);
	for (size_t i = 0; i < src.n; i++)
		report_json_free(&src.rj[i]);
	return 0;
}

/* ---- watch ---- */

static void on_exec(void *ctx, const struct agent_exec *e)
{
	(void)ctx;
	printf("exec pid=%d ppid=%d comm=%s cgroup=%" PRIu64 " t=%" PRIu64 "\n", (int)e->pid, (int)e->ppid, e->comm,
	       e->cgroup_id, e->time_ns);
	fflush(stdout);
}

static void on_fork(void *ctx, const struct agent_fork *f)
{
	(void)ctx;
	printf("fork pid=%d ppid=%d comm=%s cgroup=%" PRIu64 " t=%" PRIu64 "\n", (int)f->pid, (int)f->ppid, f->comm,
	       f->cgroup_id, f->time_ns);
	fflush(stdout);
}

static void on_exit_event(void *ctx, const struct agent_exit *e)
{
	(void)ctx;
	printf("exit pid=%d status=%d t=%" PRIu64 "\n", (int)e->pid, e->status, e->time_ns);
	fflush(stdout);
}

/* The state letter of PID in /proc/PID/stat ('Z' for a zombie), '-' when
 * it is gone. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return '-';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] ? p[2] : '-';
}

static void on_victim(void *ctx, const struct agent_victim *v)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* seen: when user space had it, next to when the kernel chose it;
	 * state: whether the victim still ran then (Z or -: it had ended) */
	printf("victim pid=%d comm=%s rss=%" PRIu64 " cgroup=%" PRIu64 " t=%" PRIu64 " seen=%" PRIu64 " state=%c\n",
	       (int)v->pid, v->comm, v->rss_bytes, v->cgroup_id, v->time_ns,
	       (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec, proc_state(v->pid));
	fflush(stdout);
}

static int cmd_watch(int argc, char **argv)
{
	struct agent_watch_callbacks cb = { .exec = on_exec, .exit = on_exit_event, .victim = on_victim,
					    .fork = on_fork };
	struct agent_watch_settings s = { 0 };
	struct agent_watch_info info;
	struct agent_watch *w;
	double seconds = 0;
	pid_t follow[64];
	size_t nfollow = 0;
	char why[512];
	struct timespec t0, t;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--disable") && i + 1 < argc) {
			const char *d = argv[++i];

			s.disable |= (strstr(d, "exec") ? 1u << WATCH_EVENT_EXEC : 0) |
				     (strstr(d, "exit") ? 1u << WATCH_EVENT_EXIT : 0) |
				     (strstr(d, "victim") ? 1u << WATCH_EVENT_VICTIM : 0) |
				     (strstr(d, "fork") ? 1u << WATCH_EVENT_FORK : 0);
		} else if (!strcmp(argv[i], "--exit-all")) {
			s.exit_all = true;
		} else if (!strcmp(argv[i], "--follow") && i + 1 < argc && nfollow < 64) {
			follow[nfollow++] = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--scan-ms") && i + 1 < argc) {
			s.scan_ms = (unsigned int)atoi(argv[++i]);
		} else {
			die("watch: unknown argument %s", argv[i]);
		}
	}
	if (agent_watch_open(&s, &cb, &w, why, sizeof(why)))
		die("%s", why);
	agent_watch_info_get(w, &info);
	printf("how exec: %s\nhow exit: %s\nhow victim: %s\nhow fork: %s\n", info.how[WATCH_EVENT_EXEC],
	       info.how[WATCH_EVENT_EXIT], info.how[WATCH_EVENT_VICTIM], info.how[WATCH_EVENT_FORK]);
	for (size_t i = 0; i < nfollow; i++) {
		int err = agent_watch_follow(w, follow[i]);

		if (err)
			printf("follow %d: %s\n", (int)follow[i], strerror(-err));
	}
	printf("ready\n");
	fflush(stdout);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!stop) {
		struct pollfd p = { agent_watch_fd(w), POLLIN, 0 };

		if (poll(&p, 1, 100) < 0 && errno != EINTR)
			break;
		if (agent_watch_run(w) < 0)
			die("agent_watch_run failed");
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (seconds > 0 && (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 > seconds)
			break;
	}
	printf("lost %" PRIu64 "\n", agent_watch_lost(w));
	agent_watch_close(w);
	return 0;
}

/* ---- members ---- */

static int cmd_members(int argc, char **argv)
{
	const char *root = NULL;
	struct agent_targets *t;
	char why[512];
	int err, match = 0;
	pid_t *pids;
	size_t n;

	for (int i = 0; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "--root"))
			root = argv[i + 1];
	if ((err = agent_targets_new(root, &t)))
		die("agent_targets_new: %s", strerror(-err));
	for (int i = 0; i < argc; i += 2) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			die("members: %s needs a value", o);
		why[0] = '\0';
		if (!strcmp(o, "--root"))
			continue;
		else if (!strcmp(o, "--pid"))
			err = agent_targets_add_pid(t, atoi(v), why, sizeof(why));
		else if (!strcmp(o, "--comm"))
			err = agent_targets_add_comm(t, v, why, sizeof(why));
		else if (!strcmp(o, "--unit"))
			err = agent_targets_add_unit(t, v, why, sizeof(why));
		else if (!strcmp(o, "--cgroup"))
			err = agent_targets_add_cgroup(t, v, why, sizeof(why));
		else if (!strcmp(o, "--match")) {
			match = atoi(v);
			continue;
		} else
			die("members: unknown argument %s", o);
		if (err)
			die("%s", why);
		if (why[0])
			fprintf(stderr, "agent_tool: %s\n", why);
	}
	if (match) {
		struct agent_match m;

		err = agent_targets_match_pid(t, match, &m);
		if (err < 0)
			die("match %d: %s", match, strerror(-err));
		if (err)
			printf("match %d %s %s\n", match, agent_target_options[m.kind], m.text);
		else
			printf("nomatch %d\n", match);
	} else {
		if ((err = agent_targets_members(t, &pids, &n)))
			die("members: %s", strerror(-err));
		for (size_t i = 0; i < n; i++)
			printf("%d\n", (int)pids[i]);
		free(pids);
	}
	agent_targets_free(t);
	return 0;
}

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int cmd_bench(int argc, char **argv)
{
	static struct source src;
	struct agent_request rq = { .route = AGENT_ROUTE_HEAP };
	double heap[101], metrics[101];
	size_t len = 0;
	int n = argc > 1 ? atoi(argv[1]) : 10;
	char *args[2];

	if (argc < 1 || n < 1 || n > 101)
		die("bench PID:COMM:FILE [N <= 101]");
	args[0] = "--report";
	args[1] = argv[0];
	/* read the report as serve does, without serving */
	if (cmd_serve_load(2, args, &src))
		return 2;
	for (int i = 0; i < n; i++) {
		struct agent_response rs = { 0 };
		double t0 = cpu_ms();

		if (on_heap(&src, &rq, &rs))
			die("heap body failed");
		heap[i] = cpu_ms() - t0;
		len = rs.len;
		free(rs.body);
		rs = (struct agent_response){ 0 };
		t0 = cpu_ms();
		if (on_metrics(&src, &rq, &rs))
			die("metrics body failed");
		metrics[i] = cpu_ms() - t0;
		free(rs.body);
	}
	qsort(heap, (size_t)n, sizeof(double), dbl_cmp);
	qsort(metrics, (size_t)n, sizeof(double), dbl_cmp);
	printf("heap %.1f ms (%zu bytes), metrics %.2f ms: CPU time, median of %d\n", heap[n / 2], len, metrics[n / 2],
	       n);
	for (size_t i = 0; i < src.n; i++)
		report_json_free(&src.rj[i]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "bench"))
		return cmd_bench(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return cmd_serve(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "watch"))
		return cmd_watch(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "members"))
		return cmd_members(argc - 2, argv + 2);
	fprintf(stderr, "usage: agent_tool serve|watch|members ...\n");
	return 2;
}
