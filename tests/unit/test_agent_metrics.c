/* Unit tests for the agent's /metrics (agent/metrics.c): the exposition of
 * two processes and a histogram byte for byte, label values escaped and
 * made valid UTF-8, /proc/self/stat parsed with a hostile command, the
 * agent's own resources read from a fake /proc; and the same text checked
 * by Prometheus's own parser (`promtool check metrics`, Debian's
 * prometheus package) when it is installed. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "metrics.h"

static const char want_full[] =
	"# HELP dwleak_traced_processes Processes the agent traces now.\n"
	"# TYPE dwleak_traced_processes gauge\n"
	"dwleak_traced_processes 2\n"
	"# HELP dwleak_skipped_processes Processes a target matched that the agent does not trace (the log says why).\n"
	"# TYPE dwleak_skipped_processes gauge\n"
	"dwleak_skipped_processes 1\n"
	"# HELP dwleak_outstanding_bytes Bytes allocated and not freed, by process.\n"
	"# TYPE dwleak_outstanding_bytes gauge\n"
	"dwleak_outstanding_bytes{pid=\"42\",comm=\"nginx\"} 1048576\n"
	"dwleak_outstanding_bytes{pid=\"4194304\",comm=\"a\\\\b\\\"c\\nd\xef\xbf\xbd\xc3\xa9\"} 18446744073709551615\n"
	"# HELP dwleak_outstanding_allocations Allocations not freed, by process.\n"
	"# TYPE dwleak_outstanding_allocations gauge\n"
	"dwleak_outstanding_allocations{pid=\"42\",comm=\"nginx\"} 12\n"
	"dwleak_outstanding_allocations{pid=\"4194304\",comm=\"a\\\\b\\\"c\\nd\xef\xbf\xbd\xc3\xa9\"} 0\n"
	"# HELP dwleak_outstanding_stacks Distinct call stacks with outstanding allocations, by process.\n"
	"# TYPE dwleak_outstanding_stacks gauge\n"
	"dwleak_outstanding_stacks{pid=\"42\",comm=\"nginx\"} 3\n"
	"dwleak_outstanding_stacks{pid=\"4194304\",comm=\"a\\\\b\\\"c\\nd\xef\xbf\xbd\xc3\xa9\"} 0\n"
	"# HELP dwleak_peak_outstanding_bytes The highest outstanding bytes the agent saw, by process (?peak=1 serves that heap).\n"
	"# TYPE dwleak_peak_outstanding_bytes gauge\n"
	"dwleak_peak_outstanding_bytes{pid=\"42\",comm=\"nginx\"} 2097152\n"
	"dwleak_peak_outstanding_bytes{pid=\"4194304\",comm=\"a\\\\b\\\"c\\nd\xef\xbf\xbd\xc3\xa9\"} 0\n"
	"# HELP dwleak_growth_bytes_per_second Growth rate of the outstanding bytes, by process.\n"
	"# TYPE dwleak_growth_bytes_per_second gauge\n"
	"dwleak_growth_bytes_per_second{pid=\"42\",comm=\"nginx\"} -12.5\n"
	"# HELP dwleak_leak_check_bytes Outstanding bytes by leak kind at the process's last leak check.\n"
	"# TYPE dwleak_leak_check_bytes gauge\n"
	"dwleak_leak_check_bytes{pid=\"42\",comm=\"nginx\",kind=\"definitely_lost\"} 600\n"
	"dwleak_leak_check_bytes{pid=\"42\",comm=\"nginx\",kind=\"indirectly_lost\"} 0\n"
	"dwleak_leak_check_bytes{pid=\"42\",comm=\"nginx\",kind=\"possibly_lost\"} 24\n"
	"dwleak_leak_check_bytes{pid=\"42\",comm=\"nginx\",kind=\"reachable\"} 1047952\n"
	"# HELP dwleak_leak_check_allocations Outstanding allocations by leak kind at the process's last leak check.\n"
	"# TYPE dwleak_leak_check_allocations gauge\n"
	"dwleak_leak_check_allocations{pid=\"42\",comm=\"nginx\",kind=\"definitely_lost\"} 5\n"
	"dwleak_leak_check_allocations{pid=\"42\",comm=\"nginx\",kind=\"indirectly_lost\"} 0\n"
	"dwleak_leak_check_allocations{pid=\"42\",comm=\"nginx\",kind=\"possibly_lost\"} 1\n"
	"dwleak_leak_check_allocations{pid=\"42\",comm=\"nginx\",kind=\"reachable\"} 6\n"
	"# HELP dwleak_leak_check_timestamp_seconds Unix time the process's last leak check ended.\n"
	"# TYPE dwleak_leak_check_timestamp_seconds gauge\n"
	"dwleak_leak_check_timestamp_seconds{pid=\"42\",comm=\"nginx\"} 1700000000.25\n"
	"# HELP dwleak_dropped_events_total Allocation records lost (ring buffer full, no memory), by process.\n"
	"# TYPE dwleak_dropped_events_total counter\n"
	"dwleak_dropped_events_total{pid=\"42\",comm=\"nginx\"} 7\n"
	"dwleak_dropped_events_total{pid=\"4194304\",comm=\"a\\\\b\\\"c\\nd\xef\xbf\xbd\xc3\xa9\"} 0\n"
	"# HELP dwleak_unwind_errors_total Stack walks ended by a missing rule or unreadable memory, by process.\n"
	"# TYPE dwleak_unwind_errors_total counter\n"
	"dwleak_unwind_errors_total{pid=\"42\",comm=\"nginx\"} 2\n"
	"dwleak_unwind_errors_total{pid=\"4194304\",comm=\"a\\\\b\\\"c\\nd\xef\xbf\xbd\xc3\xa9\"} 0\n"
	"# HELP dwleak_evicted_stacks Stacks folded into the [evicted] entry by --max-stacks (the least recently grown), by process.\n"
	"# TYPE dwleak_evicted_stacks gauge\n"
	"dwleak_evicted_stacks{pid=\"42\",comm=\"nginx\"} 9\n"
	"dwleak_evicted_stacks{pid=\"4194304\",comm=\"a\\\\b\\\"c\\nd\xef\xbf\xbd\xc3\xa9\"} 0\n"
	"# HELP dwleak_leak_check_pause_seconds How long leak checks kept their process stopped.\n"
	"# TYPE dwleak_leak_check_pause_seconds histogram\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"0.001\"} 0\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"0.005\"} 1\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"0.01\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"0.025\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"0.05\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"0.1\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"0.25\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"0.5\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"1\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"2.5\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"5\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"10\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"60\"} 2\n"
	"dwleak_leak_check_pause_seconds_bucket{le=\"+Inf\"} 3\n"
	"dwleak_leak_check_pause_seconds_sum 120.0135\n"
	"dwleak_leak_check_pause_seconds_count 3\n"
	"# HELP dwleak_watch_events_lost_total Process exec, exit and OOM events the agent's watcher lost.\n"
	"# TYPE dwleak_watch_events_lost_total counter\n"
	"dwleak_watch_events_lost_total 4\n"
	"# HELP dwleak_agent_cpu_seconds_total CPU time the agent used, by mode.\n"
	"# TYPE dwleak_agent_cpu_seconds_total counter\n"
	"dwleak_agent_cpu_seconds_total{mode=\"user\"} 1.5\n"
	"dwleak_agent_cpu_seconds_total{mode=\"system\"} 0.25\n"
	"# HELP dwleak_agent_resident_memory_bytes The agent's resident set size.\n"
	"# TYPE dwleak_agent_resident_memory_bytes gauge\n"
	"dwleak_agent_resident_memory_bytes 8388608\n"
	"# HELP dwleak_agent_open_fds File descriptors the agent has open.\n"
	"# TYPE dwleak_agent_open_fds gauge\n"
	"dwleak_agent_open_fds 11\n";

static char *full_text(size_t *len)
{
	static const double bounds[] = AGENT_PAUSE_BOUNDS;
	static uint64_t counts[AGENT_PAUSE_NBOUNDS + 1];
	struct agent_histogram h = { bounds, AGENT_PAUSE_NBOUNDS, counts, 0 };
	struct agent_metrics_proc procs[2] = {
		{ .pid = 42, .comm = "nginx", .outstanding_bytes = 1048576, .outstanding_allocations = 12,
		  .stacks = 3, .growth_bytes_per_second = -12.5, .has_leak_check = true,
		  .leak_kinds = { { 600, 5 }, { 0, 0 }, { 24, 1 }, { 1047952, 6 } },
		  .leak_check_time_seconds = 1700000000.25, .dropped_events = 7, .unwind_errors = 2,
		  .evicted_stacks = 9, .peak_bytes = 2 << 20 },
		/* a comm with every character to escape and a byte that is no UTF-8 */
		{ .pid = 4194304, .comm = "a\\b\"c\nd\xff\xc3\xa9", .outstanding_bytes = UINT64_MAX,
		  .growth_bytes_per_second = NAN },
	};
	struct agent_metrics m = {
		.procs = procs, .nprocs = 2, .skipped_processes = 1, .watch_events_lost = 4,
		.self = { .cpu_user_seconds = 1.5, .cpu_system_seconds = 0.25, .resident_bytes = 8 << 20,
			  .open_fds = 11 },
		.leak_check_pause = &h,
	};
	char *out;

	agent_histogram_observe(&h, 0.0035);
	agent_histogram_observe(&h, 0.01); /* on a bound: in that bucket (le) */
	agent_histogram_observe(&h, 120);
	agent_histogram_observe(&h, NAN);  /* not counted */
	CHECK(agent_metrics_write(&m, &out, len) == 0, "agent_metrics_write");
	return out;
}

static void test_exposition(void)
{
	size_t len;
	char *out = full_text(&len);

	CHECK(len == strlen(out), "length %zu, text %zu", len, strlen(out));
	if (strcmp(out, want_full)) {
		size_t i = 0;

		while (out[i] && out[i] == want_full[i])
			i++;
		EXPECT(0, "exposition differs at byte %zu:\n--- got from there:\n%.200s\n--- want:\n%.200s", i,
		       out + i, want_full + i);
	}
	free(out);
}

static void test_empty(void)
{
	struct agent_metrics m = { 0 };
	char *out;
	size_t len;

	CHECK(agent_metrics_write(&m, &out, &len) == 0, "agent_metrics_write");
	EXPECT(strstr(out, "dwleak_traced_processes 0\n"), "%s", out);
	EXPECT(!strstr(out, "pid="), "a series of no process");
	EXPECT(!strstr(out, "pause_seconds"), "a histogram not asked for");
	free(out);
}

static char *escaped(const char *v, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	CHECK(f, "open_memstream");
	agent_metrics_label_escape(f, v, len);
	CHECK(fclose(f) == 0, "fclose");
	return buf;
}

static void test_utf8(void)
{
	static const struct {
		const char *in;
		size_t len;
		const char *want;
	} cases[] = {
		{ "plain", 5, "plain" },
		{ "\xe2\x82\xac", 3, "\xe2\x82\xac" },         /* euro sign */
		{ "\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80" }, /* U+1F600 */
		{ "\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd" }, /* overlong '/' */
		{ "\xe0\x80\xaf", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* overlong, 3 bytes */
		{ "\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* a surrogate */
		{ "\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* > U+10FFFF */
		{ "\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd" },  /* cut short */
		{ "a\0b", 3, "a\0b" },                          /* NUL is valid UTF-8 */
		{ "\\\"\n", 3, "\\\\\\\"\\n" },
	};

	for (size_t i = 0; i < N(cases); i++) {
		char *got = escaped(cases[i].in, cases[i].len);
		size_t want_len = cases[i].len == 3 && cases[i].in[1] == '\0' ? 3 : strlen(cases[i].want);

		EXPECT(!memcmp(got, cases[i].want, want_len) && got[want_len] == '\0', "case %zu", i);
		free(got);
	}
}

static void test_stat_parse(void)
{
	static const char good[] = "1234 (a) b) (c 5) R 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 9 9 9\n";
	uint64_t ut = 0, st = 0;

	EXPECT(agent_stat_parse(good, strlen(good), &ut, &st) == 0 && ut == 250 && st == 75, "%llu %llu",
	       (unsigned long long)ut, (unsigned long long)st);
	EXPECT(agent_stat_parse("1 (x R 1", 8, &ut, &st) == -EPROTO, "no ')'");
	EXPECT(agent_stat_parse("1 (x) R 1 2", 11, &ut, &st) == -EPROTO, "too few fields");
	EXPECT(agent_stat_parse("1 (x) R 1 1 1 0 -1 0 0 0 0 0 2x 3 0", 35, &ut, &st) == -EPROTO, "not a number");
	EXPECT(agent_stat_parse("1 (x) R 1 1 1 0 -1 0 0 0 0 0 99999999999999999999 3", 50, &ut, &st) == -EPROTO,
	       "overflow");
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

static void test_self_read(void)
{
	char dir[] = "/tmp/dwleak-test-agent-metrics-XXXXXX", path[256];
	struct agent_self s = { 0 };
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);

	CHECK(mkdtemp(dir), "mkdtemp");
	check_tmpdir = dir;
	snprintf(path, sizeof(path), "%s/self", dir);
	CHECK(mkdir(path, 0700) == 0, "mkdir");
	snprintf(path, sizeof(path), "%s/self/fd", dir);
	CHECK(mkdir(path, 0700) == 0, "mkdir");
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/self/fd/%d", dir, i + 100);
		write_file(path, "");
	}
	snprintf(path, sizeof(path), "%s/self/stat", dir);
	write_file(path, "7 (dwleak) S 1 7 7 0 -1 0 0 0 0 0 300 100 0 0 20 0 3 0 1 1 1\n");
	snprintf(path, sizeof(path), "%s/self/statm", dir);
	write_file(path, "5000 1200 300 10 0 900 0\n");
	CHECK(agent_self_read(dir, &s) == 0, "agent_self_read");
	EXPECT(s.cpu_user_seconds == 300.0 / (double)tick && s.cpu_system_seconds == 100.0 / (double)tick, "%g %g",
	       s.cpu_user_seconds, s.cpu_system_seconds);
	EXPECT(s.resident_bytes == 1200ull * (uint64_t)page, "%llu", (unsigned long long)s.resident_bytes);
	EXPECT(s.open_fds == 3, "open fds %llu", (unsigned long long)s.open_fds);
	CHECK(system(NULL), "no shell");
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	CHECK(system(path) == 0, "rm");
	check_tmpdir = NULL;
	/* the real one */
	CHECK(agent_self_read("/proc", &s) == 0, "agent_self_read /proc");
	EXPECT(s.resident_bytes > 0 && s.open_fds >= 3, "rss %llu fds %llu", (unsigned long long)s.resident_bytes,
	       (unsigned long long)s.open_fds);
}

/* Prometheus's parser and linter on the exposition, when installed. */
static void test_promtool(void)
{
	char path[] = "/tmp/dwleak-test-agent-metrics-XXXXXX", cmd[512];
	size_t len;
	char *out;
	int fd, status;

	if (system("command -v promtool > /dev/null 2>&1") != 0) {
		printf("promtool not installed (Debian package prometheus, .ci/deps.sh): not checked by it\n");
		return;
	}
	out = full_text(&len);
	fd = mkstemp(path);
	CHECK(fd >= 0 && write(fd, out, len) == (ssize_t)len && close(fd) == 0, "write %s", path);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
	fflush(stdout);
	status = system(cmd);
	EXPECT(status == 0, "promtool check metrics failed (status %d) on %s", status, path);
	if (status == 0)
		unlink(path);
	free(out);
}

int main(void)
{
	test_exposition();
	test_empty();
	test_utf8();
	test_stat_parse();
	test_self_read();
	test_promtool();
	if (check_failures)
		return 1;
	printf("test_agent_metrics: ok\n");
	return 0;
}
