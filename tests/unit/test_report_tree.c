/* Unit tests for the report writers on a traced tree and a leak check: a
 * report of four processes (one not followed, one killed) with memcheck's
 * kinds, residency and the RSS account, built in memory, through the text
 * writer (exact output), the JSON writer (parsed back by Python's json),
 * and the folded writer (exact lines); and a report of one process that
 * lists its tree writes exactly what it wrote before trees existed; and a
 * process followed but not traced, said in every format. */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "json_read.h"
#include "report.h"
#include "write.h"

/* ---- The report under test: sh, which ran a leaking program twice ---- */

#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define APP "/app/leak"

static const struct report_frame frames_leak[] = {
	{ 0x7f0000098930, 0x98930, LIBC, NULL, "malloc", 0, NULL, 0, false, NULL },
	{ 0x555555555150, 0x1150, APP, NULL, "make", 0x10, "/src/leak.c", 6, false, NULL },
	{ 0x55555555516d, 0x116d, APP, NULL, "lose", 0x1d, "/src/leak.c", 8, false, NULL },
	{ 0x5555555551b0, 0x11b0, APP, NULL, "main", 0x20, "/src/leak.c", 12, false, NULL },
};
static const struct report_frame frames_sh[] = {
	{ 0x7f0000098930, 0x98930, LIBC, NULL, "malloc", 0, NULL, 0, false, NULL },
	{ 0x555555560000, 0x20000, "/usr/bin/dash", NULL, "stalloc", 0x30, NULL, 0, false, NULL },
	{ 0x555555561000, 0x21000, "/usr/bin/dash", NULL, "main", 0x40, NULL, 0, false, NULL },
};

enum { PROCESSES = 1, LEAK_CHECK = 2 };
#define NSTACKS 4

/* Fills R (its arrays in STACKS and PROCS) with what WHAT asks for: the
 * tree (PROCESSES), the leak check (LEAK_CHECK), both or neither. */
static void report_build(struct report *r, struct report_stack *st, struct report_process *pr,
			 int what)
{
	static const struct report_process procs[] = {
		{ .pid = 100, .command = "/bin/sh", .state = REPORT_PROCESS_ENDED,
		  .wait_status = 1 << 8 /* exit(1) */ },
		{ .pid = 101, .ppid = 100, .command = APP, .state = REPORT_PROCESS_ENDED },
		{ .pid = 102, .ppid = 100, .command = "/usr/bin/sudo",
		  .state = REPORT_PROCESS_NOT_FOLLOWED, .reason = "setuid exec" },
		{ .pid = 103, .ppid = 101, .command = APP, .state = REPORT_PROCESS_ENDED,
		  .wait_status = 9 /* SIGKILL */ },
	};
	const struct report_stack stacks[NSTACKS] = {
		{ .bytes = 1432, .allocations = 8, .allocator = "malloc", .frames = frames_leak,
		  .nframes = 4, .fp_divergence = -1, .oldest_age_s = 2.0, .growth_bytes_per_s = NAN,
		  .pid = 101, .command = APP, .has_leak_kinds = true,
		  .leak_kinds = { { 1400, 7 }, { 32, 1 }, { 0, 0 }, { 0, 0 } },
		  .has_residency = true, .residency = { 1024, 0, 408 } },
		{ .bytes = 164, .allocations = 2, .allocator = "malloc", .frames = frames_leak,
		  .nframes = 2, .fp_divergence = -1, .oldest_age_s = NAN, .growth_bytes_per_s = NAN,
		  .pid = 101, .command = APP, .has_leak_kinds = true,
		  .leak_kinds = { { 0, 0 }, { 0, 0 }, { 64, 1 }, { 100, 1 } },
		  .has_residency = true, .residency = { 164, 0, 0 } },
		{ .bytes = 200, .allocations = 2, .allocator = "malloc", .frames = frames_sh,
		  .nframes = 3, .fp_divergence = -1, .oldest_age_s = NAN, .growth_bytes_per_s = NAN,
		  .pid = 100, .command = "/bin/sh", .has_leak_kinds = true,
		  .leak_kinds = { [REPORT_LEAK_REACHABLE] = { 200, 2 } } },
		{ .bytes = 48, .allocations = 1, .allocator = "malloc", .frames = frames_leak,
		  .nframes = 4, .fp_divergence = -1, .oldest_age_s = NAN, .growth_bytes_per_s = NAN,
		  .pid = 103, .command = APP, .has_leak_kinds = true, .leak_kinds = { { 48, 1 } } },
	};
	size_t i;

	memcpy(st, stacks, sizeof(stacks));
	memcpy(pr, procs, sizeof(procs));
	*r = (struct report){ .pid = 100, .command = "/bin/sh", .unwind = "dwarf",
			      .duration_s = 1.5, .timestamp = 1700000000, .stacks = st,
			      .nstacks = NSTACKS };
	if (what & PROCESSES) {
		r->processes = pr;
		r->nprocesses = N(procs);
	} else {
		for (i = 0; i < NSTACKS; i++) {
			st[i].pid = 0;
			st[i].command = NULL;
		}
	}
	if (what & LEAK_CHECK) {
		r->leak_check = (struct report_leak_check){ .present = true,
							    .scanned_bytes = 3 << 20,
							    .pause_ms = 1.234,
							    .scan_ms = 5.678,
							    .snapshot = true };
		r->rss = (struct report_rss){ .present = true, .rss_bytes = 6 << 20,
					      .parts = { 1188, 1 << 20, 132 << 10, 3 << 20, 1 << 20 } };
	} else {
		for (i = 0; i < NSTACKS; i++)
			st[i].has_leak_kinds = st[i].has_residency = false;
	}
	report_totals_from_stacks(r);
}

/* R written in FMT with --top TOP, malloc'd. */
static char *written(const struct report *r, enum report_format fmt, unsigned int top)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f, "open_memstream");
	CHECK(report_write(f, fmt, r, top) == 0, "report_write");
	CHECK(fclose(f) == 0 && strlen(buf) == len, "NUL in output");
	return buf;
}

/* Compares two multi-line texts and names the first line that differs. */
static void same_lines(const char *what, const char *got, const char *want)
{
	size_t line = check_first_diff_line(got, want);

	EXPECT(!line, "%s differs at line %zu:\n--- got\n%s--- want\n%s", what, line, got, want);
}

/* The text after its "[HH:MM:SS]" clock, which is local time. */
static void same_text(const char *what, const char *got, const char *want)
{
	CHECK(got[0] == '[' && got[9] == ']', "%s: no clock: %s", what, got);
	same_lines(what, got + 10, want);
}

/* ---- Text ---- */

static const char text_processes[] =
	" Top 4 stacks with outstanding allocations (pid 100, /bin/sh, unwind dwarf, 1.8 KiB in 13 allocations, 4 processes):\n"
	"Process 101 /app/leak (parent 100): exited with status 0; 1596 bytes in 10 allocations outstanding\n"
	"\t1432 bytes in 8 allocations from stack (malloc, oldest 2.0 s)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t\tlose+0x1d [leak] leak.c:8\n"
	"\t\tmain+0x20 [leak] leak.c:12\n"
	"\t164 bytes in 2 allocations from stack (malloc)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"Process 100 /bin/sh: exited with status 1; 200 bytes in 2 allocations outstanding\n"
	"\t200 bytes in 2 allocations from stack (malloc)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tstalloc+0x30 [dash]\n"
	"\t\tmain+0x40 [dash]\n"
	"Process 103 /app/leak (parent 101): killed by signal 9 (SIGKILL); 48 bytes in 1 allocations outstanding\n"
	"\t48 bytes in 1 allocations from stack (malloc)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t\tlose+0x1d [leak] leak.c:8\n"
	"\t\tmain+0x20 [leak] leak.c:12\n"
	"Process 102 /usr/bin/sudo (parent 100): not followed (setuid exec)\n"
	"Totals: 1844 bytes (1.8 KiB) in 13 allocations outstanding, 4 of 4 stacks shown, 1.50 s traced\n"
	"Dropped events: 0, truncated stacks: 0, unwind errors: 0\n"
	"Not traced: 1 process, what it allocated is not in this report:\n"
	"\tpid 102 /usr/bin/sudo: setuid exec\n";

static const char text_leak_check[] =
	" Top 4 stacks with outstanding allocations (pid 100, /bin/sh, unwind dwarf, 1.8 KiB in 13 allocations):\n"
	"\t1,400 bytes in 7 blocks are definitely lost in loss record 1 of 6 (of its stack's 1,432 bytes: 1,024 resident, 0 swapped, 408 never touched)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t\tlose+0x1d [leak] leak.c:8\n"
	"\t\tmain+0x20 [leak] leak.c:12\n"
	"\t48 bytes in 1 blocks are definitely lost in loss record 2 of 6\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t\tlose+0x1d [leak] leak.c:8\n"
	"\t\tmain+0x20 [leak] leak.c:12\n"
	"\t32 bytes in 1 blocks are indirectly lost in loss record 3 of 6 (of its stack's 1,432 bytes: 1,024 resident, 0 swapped, 408 never touched)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t\tlose+0x1d [leak] leak.c:8\n"
	"\t\tmain+0x20 [leak] leak.c:12\n"
	"\t64 bytes in 1 blocks are possibly lost in loss record 4 of 6 (of its stack's 164 bytes: 164 resident, 0 swapped, 0 never touched)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t100 bytes in 1 blocks are still reachable in loss record 5 of 6 (of its stack's 164 bytes: 164 resident, 0 swapped, 0 never touched)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t200 bytes in 2 blocks are still reachable in loss record 6 of 6\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tstalloc+0x30 [dash]\n"
	"\t\tmain+0x40 [dash]\n"
	"LEAK SUMMARY:\n"
	"\tdefinitely lost: 1,448 bytes in 8 blocks\n"
	"\tindirectly lost: 32 bytes in 1 blocks\n"
	"\t  possibly lost: 64 bytes in 1 blocks\n"
	"\tstill reachable: 300 bytes in 3 blocks\n"
	"\t     suppressed: 0 bytes in 0 blocks\n"
	"\t(3,145,728 bytes scanned in 5.678 ms; the target was stopped for 1.234 ms, the scan reading a "
	"copy-on-write snapshot while it ran on)\n"
	"RSS explained: 6,291,456 bytes (6.0 MiB) resident\n"
	"\tlive tracked blocks                          1,188 bytes   0.0%\n"
	"\tallocator memory, no tracked block       1,048,576 bytes  16.7%\n"
	"\tstacks                                     135,168 bytes   2.1%\n"
	"\tcode and data                            3,145,728 bytes  50.0%\n"
	"\tother mappings                           1,048,576 bytes  16.7%\n"
	"\tunaccounted                                912,220 bytes  14.5%\n"
	"Totals: 1844 bytes (1.8 KiB) in 13 allocations outstanding, 4 of 4 stacks shown, 1.50 s traced\n"
	"Dropped events: 0, truncated stacks: 0, unwind errors: 0\n";

/* Both, --top 2: after a leak check the two stacks with the most lost
 * bytes (the 200 B reachable one is bigger than the 48 B lost one, and
 * left out), every process line. */
static const char text_both_top2[] =
	" Top 2 stacks with outstanding allocations (pid 100, /bin/sh, unwind dwarf, 1.8 KiB in 13 allocations, 4 processes):\n"
	"Process 101 /app/leak (parent 100): exited with status 0; 1596 bytes in 10 allocations outstanding\n"
	"\t1,400 bytes in 7 blocks are definitely lost in loss record 1 of 3 (of its stack's 1,432 bytes: 1,024 resident, 0 swapped, 408 never touched)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t\tlose+0x1d [leak] leak.c:8\n"
	"\t\tmain+0x20 [leak] leak.c:12\n"
	"\t32 bytes in 1 blocks are indirectly lost in loss record 2 of 3 (of its stack's 1,432 bytes: 1,024 resident, 0 swapped, 408 never touched)\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t\tlose+0x1d [leak] leak.c:8\n"
	"\t\tmain+0x20 [leak] leak.c:12\n"
	"Process 100 /bin/sh: exited with status 1; 200 bytes in 2 allocations outstanding\n"
	"Process 103 /app/leak (parent 101): killed by signal 9 (SIGKILL); 48 bytes in 1 allocations outstanding\n"
	"\t48 bytes in 1 blocks are definitely lost in loss record 3 of 3\n"
	"\t\tmalloc+0x0 [libc.so.6]\n"
	"\t\tmake+0x10 [leak] leak.c:6\n"
	"\t\tlose+0x1d [leak] leak.c:8\n"
	"\t\tmain+0x20 [leak] leak.c:12\n"
	"Process 102 /usr/bin/sudo (parent 100): not followed (setuid exec)\n"
	"LEAK SUMMARY:\n"
	"\tdefinitely lost: 1,448 bytes in 8 blocks\n"
	"\tindirectly lost: 32 bytes in 1 blocks\n"
	"\t  possibly lost: 64 bytes in 1 blocks\n"
	"\tstill reachable: 300 bytes in 3 blocks\n"
	"\t     suppressed: 0 bytes in 0 blocks\n"
	"\t(3,145,728 bytes scanned in 5.678 ms; the target was stopped for 1.234 ms, the scan reading a "
	"copy-on-write snapshot while it ran on)\n"
	"RSS explained: 6,291,456 bytes (6.0 MiB) resident\n"
	"\tlive tracked blocks                          1,188 bytes   0.0%\n"
	"\tallocator memory, no tracked block       1,048,576 bytes  16.7%\n"
	"\tstacks                                     135,168 bytes   2.1%\n"
	"\tcode and data                            3,145,728 bytes  50.0%\n"
	"\tother mappings                           1,048,576 bytes  16.7%\n"
	"\tunaccounted                                912,220 bytes  14.5%\n"
	"Totals: 1844 bytes (1.8 KiB) in 13 allocations outstanding, 2 of 4 stacks shown, 1.50 s traced\n"
	"Dropped events: 0, truncated stacks: 0, unwind errors: 0\n"
	"Not traced: 1 process, what it allocated is not in this report:\n"
	"\tpid 102 /usr/bin/sudo: setuid exec\n";

static void test_text(void)
{
	struct report_stack st[NSTACKS];
	struct report_process pr[4];
	struct report r;
	char *got;

	report_build(&r, st, pr, PROCESSES);
	got = written(&r, REPORT_FORMAT_TEXT, 0);
	same_text("text of the tree", got, text_processes);
	free(got);

	report_build(&r, st, pr, LEAK_CHECK);
	got = written(&r, REPORT_FORMAT_TEXT, 0);
	same_text("text of the leak check", got, text_leak_check);
	free(got);

	report_build(&r, st, pr, PROCESSES | LEAK_CHECK);
	got = written(&r, REPORT_FORMAT_TEXT, 2);
	same_text("text of both, --top 2", got, text_both_top2);
	free(got);
}

/* A report of one process that lists it (and stacks naming it) writes what
 * a report without a tree writes, in every text format. */
static void test_one_process_unchanged(void)
{
	static const enum report_format fmts[] = { REPORT_FORMAT_TEXT, REPORT_FORMAT_FOLDED,
						   REPORT_FORMAT_SVG };
	struct report_stack st[NSTACKS], st1[NSTACKS];
	struct report_process pr[4], pr1[4];
	struct report r, r1;
	size_t i;

	report_build(&r, st, pr, 0);
	report_build(&r1, st1, pr1, PROCESSES);
	r1.nprocesses = 1; /* sh alone */
	for (i = 0; i < NSTACKS; i++) {
		st1[i].pid = 100;
		st1[i].command = "/bin/sh";
	}
	report_totals_from_stacks(&r1);
	for (i = 0; i < N(fmts); i++) {
		char *want = written(&r, fmts[i], 0), *got = written(&r1, fmts[i], 0);

		same_lines(report_format_name(fmts[i]), got, want);
		free(want);
		free(got);
	}
}

/* ---- JSON through Python ---- */

static const char checker_py[] =
	"import json, sys\n"
	"d = json.load(open(sys.argv[1]))\n"
	"KINDS = ['definitely_lost', 'indirectly_lost', 'possibly_lost', 'reachable']\n"
	"def kinds(o):\n"
	"    assert list(o)[:4] == KINDS, list(o)\n"
	"    for k in KINDS:\n"
	"        assert list(o[k]) == ['bytes', 'allocations'] and all(type(v) is int for v in o[k].values()), o[k]\n"
	"    return ' '.join('%d/%d' % (o[k]['bytes'], o[k]['allocations']) for k in KINDS)\n"
	"lc = d['totals']['leak_check']\n"
	"assert list(lc) == KINDS + ['unclassified', 'unsure', 'scanned_bytes', 'pause_ms', 'scan_ms', 'snapshot', 'kinds_exact'], list(lc)\n"
	"print('L', kinds(lc), lc['scanned_bytes'], lc['pause_ms'], lc['scan_ms'], lc['snapshot'])\n"
	"for s in d['stacks']:\n"
	"    assert type(s['pid']) is int and type(s['command']) is str, s\n"
	"    r = s.get('residency')\n"
	"    print('S', s['bytes'], s['pid'], s['command'], kinds(s['leak_kinds']),\n"
	"          '-' if r is None else '%d/%d/%d' % (r['resident_bytes'], r['swapped_bytes'], r['untouched_bytes']))\n"
	"for p in d['processes']:\n"
	"    assert type(p['traced']) is bool, p\n"
	"    print('P', p['pid'], p['ppid'], p['command'], p['state'], p['exit_code'], p['signal'], p['reason'],\n"
	"          p['traced'], p['outstanding_bytes'], p['outstanding_allocations'])\n"
	"print('U', d['totals']['untraced_processes'])\n"
	"rss = d['rss']\n"
	"print('R', rss['rss_bytes'], ' '.join('%s=%d' % (k, v['bytes']) for k, v in rss.items() if k != 'rss_bytes'))\n"
	"assert abs(sum(v['share'] for k, v in rss.items() if k != 'rss_bytes') - 1) < 0.001\n";

static const char json_expected[] =
	"L 1448/8 32/1 64/1 300/3 3145728 1.234 5.678 True\n"
	"S 1432 101 /app/leak 1400/7 32/1 0/0 0/0 1024/0/408\n"
	"S 200 100 /bin/sh 0/0 0/0 0/0 200/2 -\n"
	"S 164 101 /app/leak 0/0 0/0 64/1 100/1 164/0/0\n"
	"S 48 103 /app/leak 48/1 0/0 0/0 0/0 -\n"
	"P 100 0 /bin/sh ended 1 None None True 200 2\n"
	"P 101 100 /app/leak ended 0 None None True 1596 10\n"
	"P 102 100 /usr/bin/sudo not_followed None None setuid exec False 0 0\n"
	"P 103 101 /app/leak ended None 9 None True 48 1\n"
	"U 1\n"
	"R 6291456 tracked_blocks=1188 allocator_untracked=1048576 stacks=135168 "
	"code_and_data=3145728 other_mappings=1048576 unaccounted=912220\n";

static void test_json(void)
{
	char path[] = "/tmp/dwleak-test-tree-XXXXXX.json", script[] = "/tmp/dwleak-test-tree-XXXXXX.py";
	struct report_stack st[NSTACKS];
	struct report_process pr[4];
	char *json, *cmd, out[4096];
	struct report r;
	size_t len;
	FILE *f;
	int fd;

	report_build(&r, st, pr, PROCESSES | LEAK_CHECK);
	json = written(&r, REPORT_FORMAT_JSON, 0);
	fd = mkstemps(path, 5);
	CHECK(fd >= 0 && write(fd, json, strlen(json)) == (ssize_t)strlen(json) && close(fd) == 0);
	fd = mkstemps(script, 3);
	CHECK(fd >= 0 && write(fd, checker_py, strlen(checker_py)) == (ssize_t)strlen(checker_py) &&
	      close(fd) == 0);
	CHECK(asprintf(&cmd, "python3 %s %s", script, path) > 0);
	f = popen(cmd, "r");
	CHECK(f, "popen");
	len = fread(out, 1, sizeof(out) - 1, f);
	out[len] = '\0';
	CHECK(pclose(f) == 0, "checker failed on %s", path);
	same_lines("JSON as Python reads it", out, json_expected);
	unlink(path);
	unlink(script);
	free(cmd);
	free(json);
}

/* ---- Folded ---- */

static void test_folded(void)
{
	struct report_stack st[NSTACKS];
	struct report_process pr[4];
	struct report r;
	char *got;

	report_build(&r, st, pr, PROCESSES);
	got = written(&r, REPORT_FORMAT_FOLDED, 0);
	same_lines("folded, processes", got,
		   "/app/leak [101];main;lose;make;malloc 1432\n"
		   "/bin/sh [100];main;stalloc;malloc 200\n"
		   "/app/leak [101];make;malloc 164\n"
		   "/app/leak [103];main;lose;make;malloc 48\n");
	free(got);

	report_build(&r, st, pr, LEAK_CHECK);
	st[3].leak_kinds[0].bytes = 40; /* 8 bytes allocated after the check */
	got = written(&r, REPORT_FORMAT_FOLDED, 0);
	same_lines("folded, kinds", got,
		   "[definitely_lost];main;lose;make;malloc 1400\n"
		   "[indirectly_lost];main;lose;make;malloc 32\n"
		   "[reachable];main;stalloc;malloc 200\n"
		   "[possibly_lost];make;malloc 64\n"
		   "[reachable];make;malloc 100\n"
		   "[definitely_lost];main;lose;make;malloc 40\n"
		   "[unclassified];main;lose;make;malloc 8\n");
	free(got);

	report_build(&r, st, pr, PROCESSES | LEAK_CHECK);
	got = written(&r, REPORT_FORMAT_FOLDED, 1);
	same_lines("folded, both, --top 1", got,
		   "/app/leak [101];[definitely_lost];main;lose;make;malloc 1400\n"
		   "/app/leak [101];[indirectly_lost];main;lose;make;malloc 32\n");
	free(got);
}

/* ---- A process dwleak followed but could not trace ---- */

/* A static shell (no malloc symbol: untraced, exited 7) that ran a traced
 * program: every format says what is missing, and JSON reads back the
 * same. */
static void test_untraced(void)
{
	static const char why[] = "no object it maps defines malloc (a static program without symbols?)";
	struct report_process pr[] = {
		{ .pid = 200, .command = "/bin/busybox sh -c x", .state = REPORT_PROCESS_ENDED,
		  .wait_status = 7 << 8, .reason = why },
		{ .pid = 201, .ppid = 200, .command = APP, .state = REPORT_PROCESS_ENDED },
	};
	struct report_stack st[] = {
		{ .bytes = 40, .allocations = 1, .allocator = "malloc", .frames = frames_leak, .nframes = 4,
		  .fp_divergence = -1, .oldest_age_s = NAN, .growth_bytes_per_s = NAN, .pid = 201,
		  .command = APP },
	};
	struct report r = { .pid = 200, .command = "/bin/busybox sh -c x", .unwind = "dwarf",
			    .duration_s = 1.0, .timestamp = 1700000000, .stacks = st, .nstacks = 1,
			    .processes = pr, .nprocesses = N(pr) };
	struct report_json in;
	char *got, *again;

	report_totals_from_stacks(&r);
	EXPECT(!report_process_traced(&pr[0]) && report_process_traced(&pr[1]) &&
	       report_untraced_count(&r) == 1);
	got = written(&r, REPORT_FORMAT_TEXT, 0);
	EXPECT(strstr(got, "Process 200 /bin/busybox sh -c x: exited with status 7; not traced (no object it "
			   "maps defines malloc (a static program without symbols?))\n"), "%s", got);
	EXPECT(strstr(got, "\nNot traced: 1 process, what it allocated is not in this report:\n"
			   "\tpid 200 /bin/busybox sh -c x: no object it maps"), "%s", got);
	free(got);
	got = written(&r, REPORT_FORMAT_JSON, 0);
	EXPECT(strstr(got, "\"untraced_processes\": 1\n"), "%s", got);
	EXPECT(strstr(got, "\"state\": \"ended\", \"exit_code\": 7, \"signal\": null, \"reason\": \"no object"),
	       "%s", got);
	EXPECT(strstr(got, "symbols?)\", \"traced\": false"), "%s", got);
	CHECK(report_json_read(got, strlen(got), &in) == 0, "%s", in.error.message);
	EXPECT(in.nunknown_fields == 0 && in.report.nprocesses == 2 &&
	       in.report.processes[0].state == REPORT_PROCESS_ENDED &&
	       in.report.processes[0].wait_status == 7 << 8 && in.report.processes[0].reason &&
	       !strcmp(in.report.processes[0].reason, why) && !in.report.processes[1].reason);
	again = written(&in.report, REPORT_FORMAT_JSON, 0);
	same_lines("JSON of an untraced process, read and written again", again, got);
	free(again);
	report_json_free(&in);
	free(got);
	/* a report written by hand (or by an older dwleak) that says traced:
	 * false without a reason stays untraced */
	got = strdup("{\"dwleak_report\": 1, \"pid\": 1, \"stacks\": [], \"processes\": [{\"pid\": 1, "
		     "\"ppid\": 0, \"state\": \"ended\", \"exit_code\": 0, \"traced\": false}]}");
	CHECK(got && report_json_read(got, strlen(got), &in) == 0, "%s", in.error.message);
	EXPECT(in.report.nprocesses == 1 && !report_process_traced(&in.report.processes[0]));
	report_json_free(&in);
	free(got);
	got = written(&r, REPORT_FORMAT_SVG, 0);
	EXPECT(strstr(got, "1 process NOT TRACED, not in this graph; "), "svg subtitle");
	free(got);
}

int main(void)
{
	check_python3("command -v python3");
	test_text();
	test_one_process_unchanged();
	test_json();
	test_folded();
	test_untraced();
	if (check_failures)
		return check_status();
	printf("test_report_tree: ok\n");
	return 0;
}
