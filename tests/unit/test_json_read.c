/* Unit tests for report/json_read.c: a report written as JSON reads back into
 * the same report (written again byte for byte), and what is wrong with a
 * text comes back as data - the message, its line and column, and the
 * fields left out - with nothing printed. */
#define _GNU_SOURCE /* open_memstream */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json_read.h"
#include "report.h"
#include "write.h"

/* R written as JSON, malloc'd; *LEN gets its length. */
static char *json_of(const struct report *r, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	CHECK(f);
	CHECK(report_write(f, REPORT_FORMAT_JSON, r, 0) == 0);
	CHECK(fclose(f) == 0);
	return buf;
}

static void test_round_trip(void)
{
	static const struct report_frame frames[] = {
		{ 0x7f0000001000, 0x1000, "/usr/lib/libc.so.6", "ab12", "malloc", 0, NULL, 0, false, NULL },
		{ 0x401000, 0x1000, "/app", NULL, "inl\"ined", 0, "/src/a.c", 3, true, NULL },
		{ 0x401000, 0x1000, "/app", NULL, "leak", 0x10, "/src/a.c", 7, false, NULL },
		{ 0xdead, 0xdead, NULL, NULL, NULL, 0, NULL, 0, false, NULL },
	};
	static const char *const counter_names[] = { "walks", "zero" };
	static const uint64_t counter_values[] = { 9, 0 };
	struct report_fp_module mods[] = { { "/app", 1, 64, 2 } };
	struct report_fp_summary fp = { true, 2, 1, 2, mods, 1 };
	struct report_suppressed supp[] = { { "x.supp:2", "known", 1, 8, 1 } };
	struct report_loss losses[] = {
		{ "alloc_events_lost", 0, 3, 0, "3 allocator records were lost" },
		{ "stacks_map_full", 42, 2, 96, "2 allocations (96 bytes) of pid 42 (\"/app\") were recorded without a "
						 "stack: the stacks map was full" },
	};
	struct report_stack stacks[] = {
		{ .bytes = 64, .allocations = 1, .allocator = "malloc", .frames = frames, .nframes = 4,
		  .fp_frames = frames, .nfp_frames = 1, .fp_divergence = 1, .truncated = true,
		  .oldest_age_s = 1.5, .growth_bytes_per_s = NAN },
		{ .bytes = 8, .allocations = 2, .unwind_error = "no CFI", .fp_divergence = -1,
		  .oldest_age_s = NAN, .growth_bytes_per_s = -2.5 },
	};
	struct report r = { .pid = 42, .command = "/app", .unwind = "both", .duration_s = 2.5,
			    .stacks = stacks, .nstacks = 2, .counter_names = counter_names,
			    .counter_values = counter_values, .ncounters = 2, .fp = &fp,
			    .sample_bytes = 4096, .suppressed = supp, .nsuppressed = 1, .losses = losses,
			    .nlosses = 2 };
	struct report_json in;
	size_t len, len2;
	char *text, *again;

	report_totals_from_stacks(&r);
	r.totals.dropped_events = 3;
	text = json_of(&r, &len);
	CHECK(report_json_read(text, len, &in) == 0, "%s", in.error.message);
	EXPECT(in.nunknown_fields == 0 && !in.error.message);
	EXPECT(in.report.pid == 42 && in.report.nstacks == 2 && in.report.stacks[0].nframes == 4);
	EXPECT(in.report.stacks[0].frames[1].inlined && in.report.stacks[0].frames[2].line == 7);
	EXPECT(in.report.nlosses == 2 && in.report.losses[1].pid == 42 && in.report.losses[1].bytes == 96 &&
		       !strcmp(in.report.losses[1].what, "stacks_map_full") &&
		       !strcmp(in.report.losses[1].text, losses[1].text),
	       "losses read back");
	again = json_of(&in.report, &len2);
	EXPECT(len == len2 && memcmp(text, again, len) == 0, "written again:\n%s\nfirst:\n%s", again,
	       text);
	free(again);
	report_json_free(&in);
	report_json_free(&in); /* empty the second time */
	free(text);
}

/* A tree of three processes with a leak check, residency and the RSS
 * account: read back field by field, and written again byte for byte. */
static void test_round_trip_tree_and_kinds(void)
{
	static const struct report_frame frames[] = {
		{ 0x7f0000001000, 0x1000, "/usr/lib/libc.so.6", "ab12", "malloc", 0, NULL, 0, false, NULL },
		{ 0x401000, 0x1000, "/app", NULL, "leak", 0x10, "/src/a.c", 7, false, NULL },
	};
	struct report_process procs[] = {
		{ .pid = 100, .command = "/bin/sh", .state = REPORT_PROCESS_ENDED, .wait_status = 0 },
		{ .pid = 101, .ppid = 100, .command = "/app", .state = REPORT_PROCESS_ENDED,
		  .wait_status = 9 /* killed by SIGKILL */ },
		{ .pid = 102, .ppid = 100, .command = "/usr/bin/sudo",
		  .state = REPORT_PROCESS_NOT_FOLLOWED, .reason = "setuid exec" },
		{ .pid = 103, .ppid = 101, .state = REPORT_PROCESS_RUNNING },
	};
	struct report_stack stacks[] = {
		{ .bytes = 1464, .allocations = 9, .allocator = "malloc", .frames = frames,
		  .nframes = 2, .fp_divergence = -1, .oldest_age_s = 1.5, .growth_bytes_per_s = NAN,
		  .pid = 101, .command = "/app", .has_leak_kinds = true,
		  .leak_kinds = { { 1400, 7 }, { 32, 1 }, { 0, 0 }, { 32, 1 } },
		  .has_residency = true, .residency = { 4096, 0, 512 } },
		{ .bytes = 64, .allocations = 2, .frames = frames, .nframes = 1, .fp_divergence = -1,
		  .oldest_age_s = NAN, .growth_bytes_per_s = NAN, .has_leak_kinds = true,
		  .leak_kinds = { [REPORT_LEAK_POSSIBLY_LOST] = { 48, 1 } } },
	};
	struct report r = { .pid = 100, .command = "/bin/sh", .unwind = "dwarf", .duration_s = 2.5,
			    .stacks = stacks, .nstacks = 2, .processes = procs, .nprocesses = 4,
			    .leak_check = { .present = true, .scanned_bytes = 1 << 20, .pause_ms = 1.25 },
			    .rss = { .present = true, .rss_bytes = 10 << 20,
				     .parts = { 4 << 20, 2 << 20, 1 << 17, 3 << 20, 1 << 19 } } };
	const struct report *in_r;
	struct report_json in;
	size_t len, len2;
	char *text, *again;

	report_totals_from_stacks(&r);
	EXPECT(procs[1].bytes == 1464 && procs[0].bytes == 64 && procs[2].bytes == 0,
	       "process totals %" PRIu64 " %" PRIu64, procs[1].bytes, procs[0].bytes);
	EXPECT(r.leak_check.kinds[REPORT_LEAK_DEFINITELY_LOST].bytes == 1400 &&
	       r.leak_check.kinds[REPORT_LEAK_POSSIBLY_LOST].allocations == 1, "leak totals");
	text = json_of(&r, &len);
	CHECK(report_json_read(text, len, &in) == 0, "%s", in.error.message);
	EXPECT(in.nunknown_fields == 0, "unknown %s", in.nunknown_fields ? in.unknown_fields[0] : "");
	in_r = &in.report;
	EXPECT(in_r->nprocesses == 4 && in_r->processes[1].wait_status == 9 &&
	       in_r->processes[0].wait_status == 0 && in_r->processes[1].ppid == 100);
	EXPECT(in_r->processes[2].state == REPORT_PROCESS_NOT_FOLLOWED &&
	       strcmp(in_r->processes[2].reason, "setuid exec") == 0);
	EXPECT(in_r->processes[3].state == REPORT_PROCESS_RUNNING && !in_r->processes[3].command);
	EXPECT(in_r->stacks[0].pid == 101 && strcmp(in_r->stacks[0].command, "/app") == 0);
	EXPECT(in_r->stacks[1].pid == 100 && strcmp(in_r->stacks[1].command, "/bin/sh") == 0,
	       "a stack without a pid is the report's process");
	EXPECT(in_r->stacks[0].has_leak_kinds && in_r->stacks[0].leak_kinds[1].bytes == 32 &&
	       in_r->stacks[0].has_residency && in_r->stacks[0].residency.untouched == 512);
	EXPECT(!in_r->stacks[1].has_residency && in_r->stacks[1].leak_kinds[2].bytes == 48);
	EXPECT(in_r->leak_check.present && in_r->leak_check.scanned_bytes == 1 << 20 &&
	       in_r->leak_check.pause_ms == 1.25);
	EXPECT(in_r->rss.present && in_r->rss.rss_bytes == 10 << 20 &&
	       in_r->rss.parts[REPORT_RSS_CODE_AND_DATA] == 3 << 20);
	again = json_of(in_r, &len2);
	EXPECT(len == len2 && memcmp(text, again, len) == 0, "written again:\n%s\nfirst:\n%s", again,
	       text);
	free(again);
	report_json_free(&in);
	free(text);
}

/* A report written before processes and leak kinds existed still reads. */
static void test_old_report(void)
{
	static const char text[] =
		"{\"dwleak_report\": 1, \"pid\": 7, \"command\": \"/app\", \"stacks\": ["
		"{\"bytes\": 8, \"allocations\": 1, \"frames\": []}]}";
	struct report_json in;

	EXPECT(report_json_read(text, strlen(text), &in) == 0, "%s", in.error.message);
	EXPECT(in.report.nprocesses == 0 && !in.report.leak_check.present && !in.report.rss.present);
	EXPECT(in.report.stacks[0].pid == 0 && !in.report.stacks[0].has_leak_kinds &&
	       !in.report.stacks[0].has_residency);
	EXPECT(report_stack_pid(&in.report, &in.report.stacks[0]) == 7 &&
	       !report_is_multiprocess(&in.report));
	report_json_free(&in);
}

/* TEXT must fail with -EINVAL and MESSAGE at LINE:COLUMN (0:0 = nowhere). */
static void expect_error(const char *text, unsigned int line, unsigned int column,
			 const char *message)
{
	struct report_json in;
	int err = report_json_read(text, strlen(text), &in);

	EXPECT(err == -EINVAL, "%s: %d", text, err);
	EXPECT(in.error.message && strcmp(in.error.message, message) == 0, "%s: message '%s'", text,
	       in.error.message);
	EXPECT(in.error.line == line && in.error.column == column, "%s: at %u:%u", text,
	       in.error.line, in.error.column);
	report_json_free(&in);
}

static void test_errors(void)
{
	expect_error("{\"dwleak_report\": 1, \"stacks\": [", 1, 33,
		     "invalid JSON: unexpected end of input, expected a value");
	expect_error("[1]", 0, 0, "not a dwleak report (the JSON is an array, not an object)");
	expect_error("{\"stacks\": []}", 0, 0,
		     "not a dwleak report (no \"dwleak_report\": 1 in a top-level object)");
	expect_error("{\"dwleak_report\": 2}", 0, 0, "not a dwleak report (\"dwleak_report\" is not "
		     "1: a format this dwleak does not read)");
	expect_error("{\"dwleak_report\": 1}", 0, 0, "not a dwleak report (no \"stacks\" array)");
	expect_error("{\"dwleak_report\": 1, \"stacks\": [{\"frames\": [{}, {\"line\": 0}]}]}", 1, 58,
		     "stacks[0].frames[1].line: expected an integer in range, or null, not a number");
	expect_error("{\"dwleak_report\": 1, \"counters\": {\"c\": true}, \"stacks\": []}", 1, 40,
		     "counters.c: expected an integer from 0 to 2^64-1, not a boolean");
	expect_error("{\"dwleak_report\": 1, \"totals\": {\"stacks\": \"1\"}, \"stacks\": []}", 1, 43,
		     "totals.stacks: expected an integer from 0 to 2^64-1, not a string");
	expect_error("{\"dwleak_report\": 1, \"stacks\": [{\"leak_kinds\": {\"reachable\": "
		     "{\"bytes\": -1}}}]}", 1, 72,
		     "stacks[0].leak_kinds.reachable.bytes: expected an integer from 0 to 2^64-1, "
		     "not a number");
	expect_error("{\"dwleak_report\": 1, \"processes\": [{\"state\": \"zombie\"}], "
		     "\"stacks\": []}", 1, 46,
		     "processes[0].state: expected \"running\", \"ended\" or \"not_followed\", "
		     "not a string");
	expect_error("{\"dwleak_report\": 1, \"totals\": {\"leak_check\": {\"pause_ms\": \"1\"}}, "
		     "\"stacks\": []}", 1, 60,
		     "totals.leak_check.pause_ms: expected a number or null, not a string");
}

static void test_unknown_fields(void)
{
	static const char text[] =
		"{\"dwleak_report\": 1, \"new\": 1, \"stacks\": [{\"shade\": 1, \"frames\": "
		"[{\"color\": 1}, {\"color\": 2}]}, {\"shade\": 2, \"bytes\": -1}]}";
	static const char *const want[] = { "new", "stacks[].shade", "stacks[].frames[].color" };
	struct report_json in;
	size_t i;

	/* the second stack is wrong: what was noted before still comes back */
	EXPECT(report_json_read(text, strlen(text), &in) == -EINVAL);
	EXPECT(in.nunknown_fields == N(want), "%zu unknown fields", in.nunknown_fields);
	for (i = 0; i < in.nunknown_fields && i < N(want); i++)
		EXPECT(strcmp(in.unknown_fields[i], want[i]) == 0, "[%zu] %s", i, in.unknown_fields[i]);
	report_json_free(&in);
	report_json_free(NULL);
}

int main(void)
{
	test_round_trip();
	test_round_trip_tree_and_kinds();
	test_old_report();
	test_errors();
	test_unknown_fields();
	if (check_failures)
		return check_status();
	printf("test_json_read: ok\n");
	return 0;
}
