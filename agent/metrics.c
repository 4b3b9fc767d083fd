/* Prometheus text exposition (format 0.0.4) of the agent's series: one
 * family after another, HELP and TYPE first, label values escaped and made
 * valid UTF-8; and the agent's own resources from /proc/self. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"

void agent_histogram_observe(struct agent_histogram *h, double v)
{
	size_t i = 0;

	if (isnan(v))
		return;
	while (i < h->nbounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
}

/* The length of the valid UTF-8 sequence at S (N bytes left), or 0 when
 * the bytes there are not one: overlong forms, surrogates and code points
 * above U+10FFFF are invalid, as Go's utf8.ValidString (Prometheus's
 * check) says. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len, i;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

void agent_metrics_label_escape(FILE *f, const char *v, size_t len)
{
	const unsigned char *s = (const unsigned char *)v;
	size_t i = 0, n;

	while (i < len) {
		if (s[i] == '\\')
			fputs("\\\\", f);
		else if (s[i] == '"')
			fputs("\\\"", f);
		else if (s[i] == '\n')
			fputs("\\n", f);
		else if ((n = utf8_len(s + i, len - i)) > 0) {
			fwrite(s + i, 1, n, f);
			i += n;
			continue;
		} else
			fputs("\xef\xbf\xbd", f); /* U+FFFD for the byte */
		i++;
	}
}

/* V as Prometheus reads a float: the shortest decimal that reads back as
 * V, "NaN", "+Inf", "-Inf". */
static void value_write(FILE *f, double v)
{
	char buf[40];

	if (isnan(v)) {
		fputs("NaN", f);
		return;
	}
	if (isinf(v)) {
		fputs(v > 0 ? "+Inf" : "-Inf", f);
		return;
	}
	/* a whole number in full ("60", not %g's "6e+01") */
	if (v == floor(v) && fabs(v) < 1e15) {
		fprintf(f, "%.0f", v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* "NAME{pid="P",comm="C"" without the closing brace: EXTRA labels may follow. */
static void proc_series_open(FILE *f, const char *name, const struct agent_metrics_proc *p)
{
	const char *comm = p->comm ? p->comm : "";

	fprintf(f, "%s{pid=\"%d\",comm=\"", name, p->pid);
	agent_metrics_label_escape(f, comm, strlen(comm));
	fputc('"', f);
}

/* One family with one unsigned series per process: the uint64_t at OFFSET
 * of each struct agent_metrics_proc. */
static void proc_family_u64(FILE *f, const struct agent_metrics *m, const char *name, const char *type,
			    const char *help, size_t offset)
{
	family(f, name, type, help);
	for (size_t i = 0; i < m->nprocs; i++) {
		uint64_t v;

		memcpy(&v, (const char *)&m->procs[i] + offset, sizeof(v));
		proc_series_open(f, name, &m->procs[i]);
		fprintf(f, "} %" PRIu64 "\n", v);
	}
}

static void leak_check_families(FILE *f, const struct agent_metrics *m)
{
	static const char *const names[] = { "dwleak_leak_check_bytes", "dwleak_leak_check_allocations" };
	static const char *const helps[] = {
		"Outstanding bytes by leak kind at the process's last leak check.",
		"Outstanding allocations by leak kind at the process's last leak check.",
	};

	for (int which = 0; which < 2; which++) {
		family(f, names[which], "gauge", helps[which]);
		for (size_t i = 0; i < m->nprocs; i++) {
			const struct agent_metrics_proc *p = &m->procs[i];

			if (!p->has_leak_check)
				continue;
			for (int k = 0; k < REPORT_LEAK_KIND_COUNT; k++) {
				proc_series_open(f, names[which], p);
				fprintf(f, ",kind=\"%s\"} %" PRIu64 "\n", report_leak_kind_names[k],
					which ? p->leak_kinds[k].allocations : p->leak_kinds[k].bytes);
			}
		}
	}
	family(f, "dwleak_leak_check_timestamp_seconds", "gauge",
	       "Unix time the process's last leak check ended.");
	for (size_t i = 0; i < m->nprocs; i++) {
		if (!m->procs[i].has_leak_check)
			continue;
		proc_series_open(f, "dwleak_leak_check_timestamp_seconds", &m->procs[i]);
		fputs("} ", f);
		value_write(f, m->procs[i].leak_check_time_seconds);
		fputc('\n', f);
	}
}

static void histogram_family(FILE *f, const char *name, const char *help, const struct agent_histogram *h)
{
	uint64_t cum = 0;

	family(f, name, "histogram", help);
	for (size_t i = 0; i <= h->nbounds; i++) {
		cum += h->counts[i];
		fprintf(f, "%s_bucket{le=\"", name);
		value_write(f, i < h->nbounds ? h->bounds[i] : INFINITY);
		fprintf(f, "\"} %" PRIu64 "\n", cum);
	}
	fprintf(f, "%s_sum ", name);
	value_write(f, h->sum);
	fprintf(f, "\n%s_count %" PRIu64 "\n", name, cum);
}

int agent_metrics_write(const struct agent_metrics *m, char **out, size_t *len)
{
	const struct agent_self *s = &m->self;
	FILE *f;

	*out = NULL;
	*len = 0;
	f = open_memstream(out, len);
	if (!f)
		return -ENOMEM;
	family(f, "dwleak_traced_processes", "gauge", "Processes the agent traces now.");
	fprintf(f, "dwleak_traced_processes %zu\n", m->nprocs);
	family(f, "dwleak_skipped_processes", "gauge",
	       "Processes a target matched that the agent does not trace (the log says why).");
	fprintf(f, "dwleak_skipped_processes %" PRIu64 "\n", m->skipped_processes);
	proc_family_u64(f, m, "dwleak_outstanding_bytes", "gauge",
			"Bytes allocated and not freed, by process.",
			offsetof(struct agent_metrics_proc, outstanding_bytes));
	proc_family_u64(f, m, "dwleak_outstanding_allocations", "gauge",
			"Allocations not freed, by process.",
			offsetof(struct agent_metrics_proc, outstanding_allocations));
	proc_family_u64(f, m, "dwleak_outstanding_stacks", "gauge",
			"Distinct call stacks with outstanding allocations, by process.",
			offsetof(struct agent_metrics_proc, stacks));
	proc_family_u64(f, m, "dwleak_peak_outstanding_bytes", "gauge",
			"The highest outstanding bytes the agent saw, by process (?peak=1 serves that heap).",
			offsetof(struct agent_metrics_proc, peak_bytes));
	family(f, "dwleak_growth_bytes_per_second", "gauge",
	       "Growth rate of the outstanding bytes, by process.");
	for (size_t i = 0; i < m->nprocs; i++) {
		if (isnan(m->procs[i].growth_bytes_per_second))
			continue;
		proc_series_open(f, "dwleak_growth_bytes_per_second", &m->procs[i]);
		fputs("} ", f);
		value_write(f, m->procs[i].growth_bytes_per_second);
		fputc('\n', f);
	}
	leak_check_families(f, m);
	proc_family_u64(f, m, "dwleak_dropped_events_total", "counter",
			"Allocation records lost (ring buffer full, no memory), by process.",
			offsetof(struct agent_metrics_proc, dropped_events));
	proc_family_u64(f, m, "dwleak_unwind_errors_total", "counter",
			"Stack walks ended by a missing rule or unreadable memory, by process.",
			offsetof(struct agent_metrics_proc, unwind_errors));
	/* a gauge: a folded stack whose blocks are all freed leaves [evicted] */
	proc_family_u64(f, m, "dwleak_evicted_stacks", "gauge",
			"Stacks folded into the [evicted] entry by --max-stacks (the least recently grown), by process.",
			offsetof(struct agent_metrics_proc, evicted_stacks));
	if (m->leak_check_pause)
		histogram_family(f, "dwleak_leak_check_pause_seconds",
				 "How long leak checks kept their process stopped.", m->leak_check_pause);
	family(f, "dwleak_watch_events_lost_total", "counter",
	       "Process exec, exit and OOM events the agent's watcher lost.");
	fprintf(f, "dwleak_watch_events_lost_total %" PRIu64 "\n", m->watch_events_lost);
	family(f, "dwleak_agent_cpu_seconds_total", "counter", "CPU time the agent used, by mode.");
	fputs("dwleak_agent_cpu_seconds_total{mode=\"user\"} ", f);
	value_write(f, s->cpu_user_seconds);
	fputs("\ndwleak_agent_cpu_seconds_total{mode=\"system\"} ", f);
	value_write(f, s->cpu_system_seconds);
	fputc('\n', f);
	family(f, "dwleak_agent_resident_memory_bytes", "gauge", "The agent's resident set size.");
	fprintf(f, "dwleak_agent_resident_memory_bytes %" PRIu64 "\n", s->resident_bytes);
	family(f, "dwleak_agent_open_fds", "gauge", "File descriptors the agent has open.");
	fprintf(f, "dwleak_agent_open_fds %" PRIu64 "\n", s->open_fds);
	if (fclose(f)) {
		free(*out);
		*out = NULL;
		*len = 0;
		return -ENOMEM;
	}
	return 0;
}

/* ---- The agent's own resources ---- */

int agent_stat_parse(const char *text, size_t len, uint64_t *utime, uint64_t *stime)
{
	const char *end = text + len, *p = NULL;
	uint64_t v[2];
	int field;

	for (const char *q = text; q < end; q++)
		if (*q == ')')
			p = q;
	if (!p)
		return -EPROTO;
	/* after ")": field 3 (state) onwards; utime is field 14, stime 15 */
	p++;
	for (field = 3; field <= 15; field++) {
		const char *start;
		uint64_t x = 0;

		if (p >= end || *p != ' ')
			return -EPROTO;
		p++;
		start = p;
		while (p < end && *p != ' ' && *p != '\n') {
			if (field >= 14) {
				if (*p < '0' || *p > '9' || x > (UINT64_MAX - 9) / 10)
					return -EPROTO;
				x = x * 10 + (uint64_t)(*p - '0');
			}
			p++;
		}
		if (p == start)
			return -EPROTO;
		if (field >= 14)
			v[field - 14] = x;
	}
	*utime = v[0];
	*stime = v[1];
	return 0;
}

/* Reads at most SIZE - 1 bytes of DIR/NAME into BUF (NUL-terminated); the
 * /proc files read here are far smaller.  Returns the length or -errno. */
static ssize_t small_read(const char *dir, const char *name, char *buf, size_t size)
{
	char *path;
	ssize_t n, total = 0;
	int fd;

	if (asprintf(&path, "%s/self/%s", dir, name) < 0)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return -errno;
	while ((size_t)total < size - 1 && (n = read(fd, buf + total, size - 1 - (size_t)total)) > 0)
		total += n;
	n = n < 0 ? -errno : total;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	if ((size_t)total == size - 1)
		return -EPROTO; /* longer than any such file: not what the kernel writes */
	return n;
}

int agent_self_read(const char *proc, struct agent_self *out)
{
	char buf[1024], *path;
	unsigned long long size, resident;
	uint64_t ut, st;
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	struct dirent *de;
	ssize_t n;
	DIR *d;
	int err;

	n = small_read(proc, "stat", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if ((err = agent_stat_parse(buf, (size_t)n, &ut, &st)))
		return err;
	n = small_read(proc, "statm", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
		return -EPROTO;
	if (tick <= 0)
		tick = 100;
	out->cpu_user_seconds = (double)ut / (double)tick;
	out->cpu_system_seconds = (double)st / (double)tick;
	out->resident_bytes = (uint64_t)resident * (uint64_t)(page > 0 ? page : 4096);
	if (asprintf(&path, "%s/self/fd", proc) < 0)
		return -ENOMEM;
	d = opendir(path);
	free(path);
	if (!d)
		return -errno;
	/* the directory stream's own fd is not one the agent keeps */
	snprintf(buf, sizeof(buf), "%d", dirfd(d));
	out->open_fds = 0;
	while ((de = readdir(d)))
		out->open_fds += de->d_name[0] != '.' && strcmp(de->d_name, buf) != 0;
	closedir(d);
	return 0;
}
