/* The report at an OOM kill.  When the kernel picks a traced process, the
 * victim has milliseconds left (4-15 ms here) and its memory is reaped
 * meanwhile: what can only be read from it (its RSS, its cgroup) is read
 * first, and what it held comes from the agent's own books, which stay
 * after it is gone.  Two files in --report-dir, written beside their
 * names and renamed (cli/output.c):
 *
 *   oom-PID-TIME.json  the process's JSON report (SPEC.md) with one more
 *                      member, "oom": when, the RSS, the cgroup and its
 *                      limit, what could not be read, and what grew most
 *                      over the last minutes (the growth history);
 *   oom-PID-TIME.txt   the same for people: the stacks that grew most,
 *                      then the text report. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "output.h"
#include "text_file.h"

/* The stacks that grew most, listed. */
#define GREW_MOST 10
/* Frames of each named in the JSON's list (the report has them all). */
#define GREW_FRAMES 12

/* --- Cgroups --- */

struct memcg_find {
	const char *want;     /* "memory": the v1 controller; "": the v2 line */
	char *path;	      /* its path in that hierarchy */
};

static int memcg_line(void *ctx, const struct agent_cgroup_line *l)
{
	struct memcg_find *f = ctx;
	size_t wl = strlen(f->want);
	const char *c = l->controllers, *end = c + l->controllers_len;

	if (!wl ? l->id != 0 : l->id == 0)
		return 0;
	/* the controller among the comma-separated ones */
	while (wl && c < end) {
		const char *comma = memchr(c, ',', (size_t)(end - c));
		size_t n = comma ? (size_t)(comma - c) : (size_t)(end - c);

		if (n == wl && !memcmp(c, f->want, wl))
			break;
		c = comma ? comma + 1 : end;
	}
	if (wl && c >= end)
		return 0;
	f->path = strndup(l->path, l->path_len);
	return 1;
}

/* The mount of the hierarchy WANT ("memory" v1, "" v2) in MOUNTS. */
static const struct agent_cgroup_mount *mount_of(const struct agent_cgroup_mount *m, size_t n, const char *want)
{
	for (size_t i = 0; i < n; i++) {
		const char *o = m[i].options;

		if (!*want ? m[i].v2 : (!m[i].v2 && o && (strstr(o, ",memory") || !strncmp(o, "memory", 6))))
			return &m[i];
	}
	return NULL;
}

char *agent_memcg_of(pid_t pid, bool *at_root)
{
	static const char *const wants[] = { "memory", "" }; /* v1 first: hybrid hosts limit there */
	struct agent_cgroup_mount *mounts = NULL;
	char path[64], *cg = NULL, *mi = NULL, *dir = NULL;
	size_t cglen, milen, nmounts = 0;
	const char *what = NULL;

	if (at_root)
		*at_root = false;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (text_file_read(path, 1 << 20, &cg, &cglen, &what) ||
	    text_file_read("/proc/self/mountinfo", 4 << 20, &mi, &milen, &what) ||
	    agent_mountinfo_parse(mi, milen, &mounts, &nmounts))
		goto out;
	for (size_t w = 0; w < 2 && !dir; w++) {
		struct memcg_find f = { wants[w], NULL };
		const struct agent_cgroup_mount *m = mount_of(mounts, nmounts, wants[w]);
		const char *rel;

		if (!m || agent_cgroup_lines(cg, cglen, memcg_line, &f) != 1 || !f.path) {
			free(f.path);
			continue;
		}
		/* the path is relative to the hierarchy's root; the mount may
		 * show a subtree of it */
		rel = f.path;
		if (strcmp(m->root, "/") && !strncmp(rel, m->root, strlen(m->root)))
			rel += strlen(m->root);
		if (asprintf(&dir, "%s%s", m->point, strcmp(rel, "/") ? rel : "") < 0)
			dir = NULL;
		if (dir && at_root)
			*at_root = !strcmp(rel, "/");
		free(f.path);
	}
out:
	agent_cgroup_mounts_free(mounts, nmounts);
	free(cg);
	free(mi);
	return dir;
}

/* A number from file DIR/NAME ("max" is UINT64_MAX): 0 or -errno. */
static int cg_number(const char *dir, const char *name, uint64_t *out)
{
	char path[4096], *text = NULL;
	const char *what = NULL;
	size_t len;
	int err;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	err = text_file_read(path, 4096, &text, &len, &what);
	if (err)
		return err;
	if (!strncmp(text, "max", 3))
		*out = UINT64_MAX;
	else if (sscanf(text, "%" SCNu64, out) != 1)
		err = -EPROTO;
	free(text);
	return err;
}

/* What is known of the victim's memory and its cgroup. */
struct oom_facts {
	uint64_t rss_event;	  /* the kernel's counters when it was picked; 0 unknown */
	uint64_t rss_now;	  /* /proc/PID/status VmRSS when the agent looked; 0 unknown */
	char *memcg;		  /* its memory cgroup directory */
	bool memcg_at_attach;	  /* read when it was attached (it was gone by now) */
	uint64_t limit, usage;	  /* bytes; UINT64_MAX: no limit; 0 unknown */
	char unread[512];	  /* what could not be read, in words */
};

static void unread_add(struct oom_facts *f, const char *what)
{
	size_t n = strlen(f->unread);

	snprintf(f->unread + n, sizeof(f->unread) - n, "%s%s", n ? "; " : "", what);
}

/* Reads, in that order, what goes first: the RSS, the cgroup, its limit. */
static void facts_read(struct agent_proc *p, const struct agent_victim *v, struct oom_facts *f)
{
	char path[64], *status = NULL, *line, *dir, *slash;
	const char *what = NULL;
	size_t len;
	uint64_t lim;
	bool v1, at_root = false;

	memset(f, 0, sizeof(*f));
	f->rss_event = v->rss_bytes;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)p->pid);
	if (!text_file_read(path, 1 << 16, &status, &len, &what) && (line = strstr(status, "\nVmRSS:")))
		f->rss_now = strtoull(line + 7, NULL, 10) << 10;
	free(status);
	if (!f->rss_event)
		unread_add(f, "its RSS at the kill (the kernel's tracepoint did not give it)");
	if (!f->rss_now)
		unread_add(f, "its RSS when the agent looked (it was gone or reaped)");
	f->memcg = agent_memcg_of(p->pid, &at_root);
	/* a victim already gone, or (v1) already exiting, shows its
	 * hierarchy's root, its RSS still readable in the second case: the
	 * cgroup read when it was attached says more */
	if (f->memcg && (!f->rss_now || at_root) && p->memcg && strcmp(f->memcg, p->memcg)) {
		free(f->memcg);
		f->memcg = NULL;
	}
	if (!f->memcg && p->memcg) {
		f->memcg = strdup(p->memcg);
		f->memcg_at_attach = true;
	}
	if (!f->memcg) {
		unread_add(f, "its memory cgroup (no memory controller, or it was gone)");
		return;
	}
	/* v1 memory.limit_in_bytes or v2 memory.max, here and in each
	 * ancestor up to the hierarchy's root: the smallest is what held */
	v1 = !cg_number(f->memcg, "memory.limit_in_bytes", &f->limit);
	if (!v1 && cg_number(f->memcg, "memory.max", &f->limit)) {
		unread_add(f, "its cgroup's memory limit (neither memory.limit_in_bytes nor memory.max could be read)");
		return;
	}
	cg_number(f->memcg, v1 ? "memory.max_usage_in_bytes" : "memory.peak", &f->usage);
	dir = strdup(f->memcg);
	while (dir && (slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		if (cg_number(dir, v1 ? "memory.limit_in_bytes" : "memory.max", &lim))
			break; /* past the hierarchy's root */
		if (lim < f->limit)
			f->limit = lim;
	}
	free(dir);
	/* v1's "no limit" is LONG_MAX rounded down to a page */
	if (v1 && f->limit >= (uint64_t)INT64_MAX - (1u << 16))
		f->limit = UINT64_MAX;
}

/* --- Writing --- */

/* S as a JSON string (bytes outside printable ASCII escaped, so any
 * comm or path gives valid JSON). */
static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(f, "\\%c", *c);
		else if (*c < 0x20 || *c >= 0x7f)
			fprintf(f, "\\u%04x", *c);
		else
			fputc(*c, f);
	}
	fputc('"', f);
}

static void json_u64_or_null(FILE *f, uint64_t v)
{
	if (v && v != UINT64_MAX)
		fprintf(f, "%" PRIu64, v);
	else
		fputs("null", f);
}

/* What grew most, each named by its own one-stack report. */
struct grew {
	struct agent_history_growth g[GREW_MOST];
	struct agent_report r[GREW_MOST];
	int n;
	double since; /* CLOCK_MONOTONIC s of the snapshot compared with; NAN: attach */
};

static void grew_find(struct agent *a, struct agent_proc *p, struct grew *gr)
{
	struct ledger_stacks agg;
	struct agent_history_stack *st;
	size_t n = 0;

	memset(gr, 0, sizeof(*gr));
	if (session_aggregate(a->s, p->pid, &agg))
		return;
	st = calloc(agg.n + 1, sizeof(*st));
	for (size_t i = 0; st && i < agg.cap; i++)
		if (agg.slots[i].count)
			st[n++] = (struct agent_history_stack){ agg.slots[i].stack_id,
								a->set.sample_bytes ? (uint64_t)llround(agg.slots[i].est_bytes)
										    : agg.slots[i].bytes };
	gr->n = st ? agent_history_grew_most(p->hist, st, n, GREW_MOST, gr->g, &gr->since) : 0;
	if (gr->n < 0)
		gr->n = 0;
	/* each grower named alone: a report of that one stack */
	for (int k = 0; k < gr->n; k++) {
		struct ledger_stack *one = NULL;
		struct ledger_stacks given;
		struct session_report_opts o = { .pid = p->pid, .stacks = &given };

		for (size_t i = 0; i < agg.cap && !one; i++)
			if (agg.slots[i].count && agg.slots[i].stack_id == gr->g[k].key)
				one = &agg.slots[i];
		given = (struct ledger_stacks){ one, 1, 1 };
		gr->r[k].r = &gr->r[k].sr.b.r;
		if (!one || session_report(a->s, &o, &gr->r[k].sr) || !gr->r[k].r->nstacks) {
			agent_report_free(&gr->r[k]);
			gr->r[k].r = NULL;
		}
	}
	free(st);
	ledger_stacks_free(&agg);
}

static void grew_free(struct grew *gr)
{
	for (int k = 0; k < gr->n; k++)
		if (gr->r[k].r)
			agent_report_free(&gr->r[k]);
}

/* The "oom" member's body. */
static void oom_json(FILE *f, const struct agent_proc *p, const struct oom_facts *x, const struct grew *gr,
		     double window_s, time_t wall)
{
	char when[64];

	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&wall));
	fprintf(f, "{\n    \"pid\": %d,\n    \"comm\": ", (int)p->pid);
	json_string(f, p->comm);
	fprintf(f, ",\n    \"time\": \"%s\",\n    \"rss_bytes_at_kill\": ", when);
	json_u64_or_null(f, x->rss_event);
	fputs(",\n    \"rss_bytes_seen\": ", f);
	json_u64_or_null(f, x->rss_now);
	fputs(",\n    \"cgroup\": ", f);
	json_string(f, x->memcg);
	fprintf(f, ",\n    \"cgroup_read_at_attach\": %s,\n    \"cgroup_limit_bytes\": ", x->memcg_at_attach ? "true" : "false");
	json_u64_or_null(f, x->limit);
	fputs(",\n    \"cgroup_max_usage_bytes\": ", f);
	json_u64_or_null(f, x->usage);
	fputs(",\n    \"not_read\": ", f);
	json_string(f, x->unread);
	fprintf(f, ",\n    \"peak_bytes\": %" PRIu64 ",\n    \"grew_over_s\": %.1f,\n    \"grew_most\": [", p->peak,
		window_s);
	for (int k = 0; k < gr->n; k++) {
		const struct report_stack *s = gr->r[k].r ? &gr->r[k].r->stacks[0] : NULL;

		fprintf(f, "%s\n      {\"growth_bytes\": %" PRIu64 ", \"bytes_then\": %" PRIu64 ", \"bytes_now\": %" PRIu64
			   ", \"frames\": [", k ? "," : "", gr->g[k].now - gr->g[k].then, gr->g[k].then, gr->g[k].now);
		for (size_t i = 0; s && i < s->nframes && i < GREW_FRAMES; i++) {
			fputs(i ? ", " : "", f);
			json_string(f, s->frames[i].function ? s->frames[i].function : s->frames[i].module);
		}
		fputs("]}", f);
	}
	fputs(gr->n ? "\n    ]\n  }" : "]\n  }", f);
}

/* Writes NAME in --report-dir: TEXT's bytes.  Returns 0 or -1 (said). */
static int file_write(const char *dir, const char *name, const char *text, size_t len)
{
	struct output o = { 0 };
	char *path = NULL;
	int err = -1;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return -1;
	if (!output_open(path, NULL, &o)) {
		err = fwrite(text, 1, len, o.f) == len ? output_commit(&o) : -EIO;
		if (err)
			agent_say("warning: cannot write %s: %s", path, strerror(-err));
	}
	output_discard(&o);
	free(path);
	return err ? -1 : 0;
}

void agent_oom_report(struct agent *a, struct agent_proc *p, const struct agent_victim *v)
{
	double t0 = agent_now(), window;
	time_t wall = time(NULL);
	struct oom_facts x;
	struct grew gr;
	struct agent_report r;
	struct growth g = { 0 };
	const struct agent_history_stack *old;
	uint64_t old_total;
	char stamp[32], name[96], *json = NULL, *text = NULL, *body = NULL;
	size_t jlen = 0, tlen = 0, blen = 0, n;
	FILE *f;
	int err;

	facts_read(p, v, &x);
	/* each stack's growth since the oldest snapshot, in the report */
	old = agent_history_oldest(p->hist, &g.t_prev, &old_total, &n);
	window = old || agent_history_count(p->hist) ? t0 - g.t_prev : NAN;
	g.ids = calloc(n + 1, sizeof(*g.ids));
	g.pids = calloc(n + 1, sizeof(*g.pids));
	g.bytes = calloc(n + 1, sizeof(*g.bytes));
	for (size_t i = 0; g.ids && g.pids && g.bytes && i < n; i++, g.n++) {
		g.ids[i] = old[i].key;
		g.pids[i] = p->pid;
		g.bytes[i] = (int64_t)old[i].bytes;
	}
	err = agent_report_build(a, p, false, &g, &r);
	growth_free(&g);
	grew_find(a, p, &gr);
	if (err) {
		agent_say("the OOM killer picked pid %d (%s): no report: %s", (int)p->pid, p->comm, strerror(-err));
		goto out;
	}
	/* its heap now may be past the peak the ticks saw */
	if (r.r->totals.outstanding_bytes > p->peak)
		p->peak = r.r->totals.outstanding_bytes;
	/* JSON: the report, and "oom" before its closing brace */
	f = open_memstream(&body, &blen);
	if (f) {
		err = report_write_json(f, r.r, 0);
		if (fclose(f))
			err = -ENOMEM;
	}
	while (body && !err && blen && (body[blen - 1] == '\n' || body[blen - 1] == '}'))
		blen--;
	f = body && !err ? open_memstream(&json, &jlen) : NULL;
	if (f) {
		fwrite(body, 1, blen, f);
		fputs(",\n  \"oom\": ", f);
		oom_json(f, p, &x, &gr, window, wall);
		fputs("\n}\n", f);
		fclose(f);
	}
	free(body);
	/* text: what grew most first, then the report */
	f = open_memstream(&text, &tlen);
	if (f) {
		fprintf(f, "OOM kill of pid %d (%s): RSS %" PRIu64 " bytes at the kill, cgroup %s, limit ", (int)p->pid,
			p->comm, x.rss_event, x.memcg ? x.memcg : "unknown");
		if (x.limit == UINT64_MAX || !x.limit)
			fputs(x.limit ? "none" : "unknown", f);
		else
			fprintf(f, "%" PRIu64 " bytes", x.limit);
		fprintf(f, "%s\n", x.memcg_at_attach ? " (the cgroup as read when it was attached)" : "");
		if (x.unread[0])
			fprintf(f, "Not read: %s\n", x.unread);
		fprintf(f, "\nWhat grew most over the last %.0f s (since %s):\n", isnan(window) ? 0 : window,
			agent_history_count(p->hist) > 1 ? "the oldest snapshot kept" : "the agent attached");
		for (int k = 0; k < gr.n; k++) {
			fprintf(f, "+%" PRIu64 " bytes (%" PRIu64 " -> %" PRIu64 ")\n", gr.g[k].now - gr.g[k].then,
				gr.g[k].then, gr.g[k].now);
			if (gr.r[k].r)
				report_write_folded(f, gr.r[k].r, 1);
		}
		fputc('\n', f);
		report_write_text(f, r.r, 0);
		fclose(f);
	}
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", gmtime(&wall));
	if (!a->env->report_dir) {
		agent_say("the OOM killer picked pid %d (%s), RSS %" PRIu64 " bytes; no --report-dir: no report written",
			  (int)p->pid, p->comm, x.rss_event);
	} else if (json && text) {
		snprintf(name, sizeof(name), "oom-%d-%s.json", (int)p->pid, stamp);
		err = file_write(a->env->report_dir, name, json, jlen);
		snprintf(name, sizeof(name), "oom-%d-%s.txt", (int)p->pid, stamp);
		err |= file_write(a->env->report_dir, name, text, tlen);
		if (!err)
			agent_say("the OOM killer picked pid %d (%s): report in %s/oom-%d-%s.json and .txt (%.0f ms)",
				  (int)p->pid, p->comm, a->env->report_dir, (int)p->pid, stamp, (agent_now() - t0) * 1e3);
	}
	agent_report_free(&r);
out:
	grew_free(&gr);
	free(json);
	free(text);
	free(x.memcg);
}
