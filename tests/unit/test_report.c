/* Unit tests for the report writers: a report with hostile names, ties and a
 * top-N cut goes through the JSON writer and back through an independent
 * parser (Python's json), and through the text and folded writers. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "compare.h"
#include "report.h"

/* ---- The report under test ---- */

#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define LIBSTDCXX "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"
#define MAIN "/home/u/leak/main"
#define WEIRD_MODULE "/opt/x/lib\"weird\\name.so"
#define NASTY_FUNCTION "quote\"back\\slash\nnew\ttab\x01" "ctl\x7f;semi"
#define UTF8_FUNCTION "\xc3\xbcn\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9_\xe2\x82\xac_\xf0\x9d\x84\x9e"
/* 0xff is never UTF-8; 0xc3 must be followed by a continuation byte;
 * 0xed 0xa0 0x80 would encode a surrogate; 0xc0 0xaf is an overlong '/'. */
#define BAD_UTF8 "bad\xff\xc3(x\xed\xa0\x80y\xc0\xafz"
#define FFFD "\xef\xbf\xbd"
#define BAD_UTF8_DECODED "bad" FFFD FFFD "(x" FFFD FFFD FFFD "y" FFFD FFFD "z"

/* Stack A: the SPEC/brief example, 480 bytes. */
static const struct report_frame frames_a[] = {
	{ 0x7f3a1c2b4e10, 0x9ae10, LIBC, "3f1e00aa", "malloc", 0, NULL, 0, false, NULL },
	{ 0x7f3a1c4ae21c, 0xae21c, LIBSTDCXX, NULL, "operator new(unsigned long)", 0x1c, NULL, 0, false, NULL },
	{ 0x401220, 0x1220, MAIN, "abcdef", "LeakLib::slowMemoryLeak()", 0x20, "/src/leak_lib.cpp", 7, false, NULL },
	{ 0x401331, 0x1331, MAIN, "abcdef", "caller()", 0, "/src/main.cpp", 9, true, NULL },
	{ 0x401331, 0x1331, MAIN, "abcdef", "main", 0x31, "/src/main.cpp", 14, false, NULL },
	{ 0x7f3a1c22a07a, 0x2a07a, LIBC, "3f1e00aa", "__libc_start_call_main", 0x7a, NULL, 0, false, NULL },
};
static const struct report_frame fp_frames_a[] = {
	{ 0x7f3a1c2b4e10, 0x9ae10, LIBC, "3f1e00aa", "malloc", 0, NULL, 0, false, NULL },
	{ 0x401331, 0x1331, MAIN, "abcdef", "main", 0x31, NULL, 0, false, NULL },
};
/* Stack B: names that need escaping, unknown symbols and modules. */
static const struct report_frame frames_b[] = {
	{ 0x7f0000001234, 0x1234, WEIRD_MODULE, NULL, NULL, 0, NULL, 0, false, NULL },
	{ 0xdeadbeef, 0, NULL, NULL, NULL, 0, NULL, 0, false, NULL },
	{ 0x402000, 0x2000, MAIN, NULL, NASTY_FUNCTION, 0x10, "dir/\"q\".c", 3, false, NULL },
	{ 0x402100, 0x2100, MAIN, NULL, UTF8_FUNCTION, 0x8, NULL, 0, false, NULL },
	{ 0x402200, 0x2200, MAIN, NULL, BAD_UTF8, 0x4, NULL, 0, false, NULL },
};
/* Stacks C and D tie on bytes and allocations; D comes later and is cut. */
static const struct report_frame frames_c[] = {
	{ 0x7f3a1c2b5000, 0x9b000, LIBC, NULL, "calloc", 0, NULL, 0, false, NULL },
	{ 0x401500, 0x1500, MAIN, NULL, "c_site", 0x5, NULL, 0, false, NULL },
};
static const struct report_frame frames_d[] = {
	{ 0x7f3a1c2b4e10, 0x9ae10, LIBC, NULL, "malloc", 0, NULL, 0, false, NULL },
	{ 0x401600, 0x1600, MAIN, NULL, "d_inner", 0x6, NULL, 0, false, NULL },
	{ 0x401700, 0x1700, MAIN, NULL, "d_outer", 0x7, NULL, 0, false, NULL },
};
/* Stack E: the smallest, falls under --top 4. */
static const struct report_frame frames_e[] = {
	{ 0x7f3a1c2b4e10, 0x9ae10, LIBC, NULL, "malloc", 0, NULL, 0, false, NULL },
	{ 0x401800, 0x1800, MAIN, NULL, "e_site", 0x8, NULL, 0, false, NULL },
};

static const char *const counter_names[] = { "no_table", "weird\"counter" };
static const uint64_t counter_values[] = { 3, 0 };

/* Indices into the array below, and the order the writers must produce. */
enum { SE, SB, SA, SC, SD, NSTACKS };
static const int expected_order[] = { SC, SD, SB, SA, SE };
#define TOP 4

static void report_build(struct report *r, struct report_stack *stacks, const char *unwind)
{
	memset(stacks, 0, NSTACKS * sizeof(*stacks));
	stacks[SA] = (struct report_stack){
		.bytes = 480, .allocations = 12, .allocator = "malloc",
		.frames = frames_a, .nframes = N(frames_a),
		.fp_frames = fp_frames_a, .nfp_frames = N(fp_frames_a),
		.oldest_age_s = 11.94, .growth_bytes_per_s = 1228.8,
	};
	stacks[SB] = (struct report_stack){
		.bytes = 1000, .allocations = 1, .allocator = "operator new[]",
		.frames = frames_b, .nframes = N(frames_b),
		.unwind_error = "no unwind table for pc",
		.oldest_age_s = NAN, .growth_bytes_per_s = NAN,
	};
	stacks[SC] = (struct report_stack){
		.bytes = 1000, .allocations = 5, .allocator = "calloc",
		.frames = frames_c, .nframes = N(frames_c),
		.oldest_age_s = 2.0, .growth_bytes_per_s = -300,
	};
	stacks[SD] = (struct report_stack){
		.bytes = 1000, .allocations = 5, .allocator = NULL,
		.frames = frames_d, .nframes = N(frames_d), .truncated = true,
		.oldest_age_s = NAN, .growth_bytes_per_s = NAN,
	};
	stacks[SE] = (struct report_stack){
		.bytes = 10, .allocations = 1, .allocator = "malloc",
		.frames = frames_e, .nframes = N(frames_e),
		.oldest_age_s = 0.5, .growth_bytes_per_s = NAN,
	};
	*r = (struct report){
		.pid = 1234, .command = "/path/cmd \"x\"", .unwind = unwind,
		.duration_s = 5.016, .timestamp = 1700000000,
		.stacks = stacks, .nstacks = NSTACKS,
		.counter_names = counter_names, .counter_values = counter_values,
		.ncounters = N(counter_names),
	};
	report_totals_from_stacks(r);
	r->totals.dropped_events = 7;
}

/* Runs WRITER into a memory buffer; returns it (caller frees). */
static char *write_mem(int (*writer)(FILE *, const struct report *, unsigned int),
		       const struct report *r, unsigned int top)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int err;

	CHECK(f, "open_memstream");
	err = writer(f, r, top);
	CHECK(!err, "writer returned %d", err);
	CHECK(!fclose(f), "fclose");
	CHECK(strlen(buf) == len, "NUL byte in output");
	return buf;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f, "fopen %s", path);
	CHECK(fputs(text, f) >= 0 && !fclose(f), "write %s", path);
}

/* ---- JSON through Python ---- */

/*
 * Checks the shape of the report (field names and order, types, nulls,
 * top-level keys) and prints the content in a canonical line form with every
 * string as the hex of its UTF-8 bytes, which the C side rebuilds from the
 * report in memory: that proves escaping round-trips byte for byte.
 */
static const char checker_py[] =
	"import json, re, sys\n"
	"path, mode, top = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
	"def bad_const(c):\n"
	"    raise ValueError('non-standard constant ' + c)\n"
	"def pairs(kv):\n"
	"    keys = [k for k, _ in kv]\n"
	"    assert len(keys) == len(set(keys)), 'duplicate key in ' + repr(keys)\n"
	"    return dict(kv)\n"
	"with open(path, encoding='utf-8', errors='strict') as f:\n"
	"    text = f.read()\n"
	"d = json.loads(text, parse_constant=bad_const, object_pairs_hook=pairs)\n"
	"assert text.endswith('}\\n'), 'no final newline'\n"
	"assert list(d)[:6] == ['dwleak_report', 'pid', 'command', 'unwind', 'duration_s', 'totals'], list(d)\n"
	"assert 'stacks' in d\n"
	"assert d['dwleak_report'] == 1 and type(d['dwleak_report']) is int\n"
	"assert re.search(r'\"duration_s\": 5\\.02,', text), 'duration_s not 2 decimals'\n"
	"t = d['totals']\n"
	"assert list(t)[:6] == ['outstanding_bytes', 'outstanding_allocations', 'stacks',\n"
	"    'dropped_events', 'truncated_stacks', 'unwind_errors'], list(t)\n"
	"assert all(type(v) is int for v in t.values())\n"
	"FRAME = ['address', 'module', 'build_id', 'elf_address', 'function', 'offset', 'file', 'line', 'inlined']\n"
	"def h(s):\n"
	"    return '-' if s is None else s.encode('utf-8').hex()\n"
	"def real(v, decimals):\n"
	"    assert v is None or type(v) in (int, float), v\n"
	"    return '-' if v is None else '%.*f' % (decimals, v)\n"
	"def hexaddr(a):\n"
	"    assert type(a) is str and re.fullmatch(r'0x[0-9a-f]+', a), a\n"
	"    return a\n"
	"def frame(fr):\n"
	"    assert list(fr) == FRAME, list(fr)\n"
	"    assert type(fr['offset']) is int and type(fr['inlined']) is bool\n"
	"    assert fr['line'] is None or (type(fr['line']) is int and fr['line'] > 0)\n"
	"    return ' '.join([hexaddr(fr['address']), h(fr['module']), h(fr['build_id']),\n"
	"        hexaddr(fr['elf_address']), h(fr['function']), str(fr['offset']), h(fr['file']),\n"
	"        '-' if fr['line'] is None else str(fr['line']), str(fr['inlined']).lower()])\n"
	"print('R', d['pid'], h(d['command']), h(d['unwind']), *t.values())\n"
	"for k, v in d['counters'].items():\n"
	"    assert type(v) is int\n"
	"    print('C', h(k), v)\n"
	"ss = d['stacks']\n"
	"assert top == 0 or len(ss) <= top\n"
	"for s in ss:\n"
	"    assert list(s)[:4] == ['bytes', 'allocations', 'allocator', 'frames'], list(s)\n"
	"    assert ('fp_frames' in s) == (mode == 'both'), 'fp_frames vs mode ' + mode\n"
	"    assert all(type(s[k]) is int for k in ('bytes', 'allocations'))\n"
	"    print('S', s['bytes'], s['allocations'], h(s['allocator']), str(s['truncated']).lower(),\n"
	"        h(s['unwind_error']), real(s['oldest_age_s'], 3), real(s['growth_bytes_per_s'], 1))\n"
	"    for fr in s['frames']:\n"
	"        print('F', frame(fr))\n"
	"    for fr in s.get('fp_frames', []):\n"
	"        print('P', frame(fr))\n";

/* What Python decodes a string to: the text itself, except invalid UTF-8. */
static const char *decoded(const char *s)
{
	if (s && !strcmp(s, BAD_UTF8))
		return BAD_UTF8_DECODED;
	return s;
}

static void put_hex(FILE *f, const char *s)
{
	s = decoded(s);
	if (!s) {
		fputs("-", f);
		return;
	}
	for (; *s; s++)
		fprintf(f, "%02x", (unsigned char)*s);
}

/* A number the way the checker prints it: fixed decimals, "-" for null. */
static void put_real(FILE *f, double v, int decimals)
{
	if (isfinite(v))
		fprintf(f, "%.*f", decimals, v);
	else
		fputs("-", f);
}

static void put_frame(FILE *f, char tag, const struct report_frame *fr)
{
	fprintf(f, "%c 0x%" PRIx64 " ", tag, fr->address);
	put_hex(f, fr->module);
	fputc(' ', f);
	put_hex(f, fr->build_id);
	fprintf(f, " 0x%" PRIx64 " ", fr->elf_address);
	put_hex(f, fr->function);
	fprintf(f, " %" PRIu64 " ", fr->offset);
	put_hex(f, fr->file);
	if (fr->line > 0)
		fprintf(f, " %d", fr->line);
	else
		fputs(" -", f);
	fprintf(f, " %s\n", fr->inlined ? "true" : "false");
}

static char *expected_canonical(const struct report *r, unsigned int top, bool both)
{
	const struct report_totals *t = &r->totals;
	char *buf = NULL;
	size_t len = 0, i, j, n;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f, "open_memstream");
	fprintf(f, "R %d ", r->pid);
	put_hex(f, r->command);
	fputc(' ', f);
	put_hex(f, r->unwind);
	/* totals.untraced_processes last: the processes no process list names */
	fprintf(f, " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %zu\n",
		t->outstanding_bytes, t->outstanding_allocations, t->stacks,
		t->dropped_events, t->truncated_stacks, t->unwind_errors, report_untraced_count(r));
	for (i = 0; i < r->ncounters; i++) {
		fputs("C ", f);
		put_hex(f, r->counter_names[i]);
		fprintf(f, " %" PRIu64 "\n", r->counter_values[i]);
	}
	n = top && top < r->nstacks ? top : r->nstacks;
	for (i = 0; i < n; i++) {
		const struct report_stack *s = &r->stacks[expected_order[i]];

		fprintf(f, "S %" PRIu64 " %" PRIu64 " ", s->bytes, s->allocations);
		put_hex(f, s->allocator);
		fprintf(f, " %s ", s->truncated ? "true" : "false");
		put_hex(f, s->unwind_error);
		fputc(' ', f);
		put_real(f, s->oldest_age_s, 3);
		fputc(' ', f);
		put_real(f, s->growth_bytes_per_s, 1);
		fputc('\n', f);
		for (j = 0; j < s->nframes; j++)
			put_frame(f, 'F', &s->frames[j]);
		for (j = 0; both && j < s->nfp_frames; j++)
			put_frame(f, 'P', &s->fp_frames[j]);
	}
	CHECK(!fclose(f), "fclose");
	return buf;
}

static char tmpdir[] = "/tmp/dwleak-test-report-XXXXXX";

/* Runs the checker on JSON; returns its stdout (caller frees). */
static char *python_check(const char *json, const char *mode, unsigned int top)
{
	char *script, *data, *cmd, *out = NULL;
	size_t len = 0, cap = 0;
	FILE *p;
	int status;

	CHECK(asprintf(&script, "%s/check.py", tmpdir) > 0, "asprintf");
	CHECK(asprintf(&data, "%s/report.json", tmpdir) > 0, "asprintf");
	write_file(script, checker_py);
	write_file(data, json);
	CHECK(asprintf(&cmd, "python3 %s %s %s %u", script, data, mode, top) > 0, "asprintf");
	p = popen(cmd, "r");
	CHECK(p, "popen %s", cmd);
	for (;;) {
		size_t got;

		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 8192;
			out = realloc(out, cap);
			CHECK(out, "realloc");
		}
		got = fread(out + len, 1, cap - len - 1, p);
		len += got;
		if (!got)
			break;
	}
	out[len] = '\0';
	status = pclose(p);
	CHECK(status == 0, "python checker failed (status %d) on %s mode=%s top=%u; JSON kept in %s",
	      status, cmd, mode, top, data);
	unlink(script);
	unlink(data);
	free(script);
	free(data);
	free(cmd);
	return out;
}

/* Compares two multi-line texts and names the first line that differs. */
static void same_lines(const char *what, const char *got, const char *want)
{
	size_t line = check_first_diff_line(got, want);

	CHECK(!line, "%s differs at line %zu:\n--- got\n%s--- want\n%s", what, line, got, want);
}

static void test_json(const char *mode, unsigned int top)
{
	struct report_stack stacks[NSTACKS];
	struct report r;
	char *json, *got, *want;

	report_build(&r, stacks, mode);
	json = write_mem(report_write_json, &r, top);
	got = python_check(json, mode, top);
	want = expected_canonical(&r, top, !strcmp(mode, "both"));
	same_lines("JSON content", got, want);
	/* The writer does not reorder the caller's array. */
	CHECK(stacks[SE].bytes == 10 && stacks[SD].bytes == 1000, "report modified");
	free(json);
	free(got);
	free(want);
}

static void test_json_empty(void)
{
	struct report r = { .pid = 1, .command = NULL, .unwind = "fp", .duration_s = NAN };
	char *json, *data, *cmd;

	json = write_mem(report_write_json, &r, 0);
	CHECK(strstr(json, "\"stacks\": []") && strstr(json, "\"counters\": {}"), "%s", json);
	CHECK(strstr(json, "\"command\": null") && strstr(json, "\"duration_s\": null"), "%s", json);
	/* Not through the checker, which wants the full report's values. */
	CHECK(asprintf(&data, "%s/empty.json", tmpdir) > 0, "asprintf");
	write_file(data, json);
	CHECK(asprintf(&cmd, "python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));"
		       " assert d[\"stacks\"] == [] and d[\"pid\"] == 1' %s", data) > 0,
	      "asprintf");
	CHECK(system(cmd) == 0, "empty report does not parse: %s", json);
	unlink(data);
	free(data);
	free(cmd);
	free(json);
}

/* ---- Text ---- */

static const char *find(const char *hay, const char *needle)
{
	const char *p = strstr(hay, needle);

	CHECK(p, "text lacks %s\n--- text\n%s", needle, hay);
	return p;
}

static void test_text(void)
{
	struct report_stack stacks[NSTACKS];
	struct report_fp_summary sum;
	struct report r;
	const char *pc, *pd, *pb, *pa;
	char *text;
	size_t i;

	report_build(&r, stacks, "dwarf");
	text = write_mem(report_write_text, &r, TOP);

	CHECK(text[0] == '[' && text[3] == ':' && text[6] == ':' && text[9] == ']', "%s", text);
	CHECK(!strncmp(text + 10, " Top 4 stacks with outstanding allocations (pid 1234, "
		       "/path/cmd \"x\", unwind dwarf, 3.4 KiB in 24 allocations):\n", 94),
	      "header: %s", text);
	find(text, "\t480 bytes in 12 allocations from stack (malloc, oldest 11.9 s, +1.2 KiB/s)\n"
		   "\t\tmalloc+0x0 [libc.so.6]\n"
		   "\t\toperator new(unsigned long)+0x1c [libstdc++.so.6.0.30]\n"
		   "\t\tLeakLib::slowMemoryLeak()+0x20 [main] leak_lib.cpp:7\n"
		   "\t\tcaller() [main] main.cpp:9 (inlined)\n"
		   "\t\tmain+0x31 [main] main.cpp:14\n"
		   "\t\t__libc_start_call_main+0x7a [libc.so.6]\n");
	find(text, "\t1000 bytes in 1 allocations from stack (operator new[])\n"
		   "\t\t[lib\"weird\\name.so]+0x1234\n"
		   "\t\t0xdeadbeef [unknown]\n"
		   "\t\tquote\"back\\slash\\x0anew\\x09tab\\x01ctl\\x7f;semi+0x10 [main] \"q\".c:3\n"
		   "\t\t" UTF8_FUNCTION "+0x8 [main]\n"
		   "\t\tbad\\xff\\xc3(x\\xed\\xa0\\x80y\\xc0\\xafz+0x4 [main]\n");
	find(text, "\t\t(walk stopped: no unwind table for pc)\n");
	find(text, "\t1000 bytes in 5 allocations from stack (calloc, oldest 2.0 s, -300 B/s)\n");
	find(text, "\t1000 bytes in 5 allocations from stack\n"
		   "\t\tmalloc+0x0 [libc.so.6]\n"
		   "\t\td_inner+0x6 [main]\n"
		   "\t\td_outer+0x7 [main]\n"
		   "\t\t(truncated at 3 frames)\n");
	find(text, "Totals: 3490 bytes (3.4 KiB) in 24 allocations outstanding, "
		   "4 of 5 stacks shown, 5.02 s traced\n"
		   "Dropped events: 7, truncated stacks: 1, unwind errors: 1\n"
		   "Counters: no_table 3\n");
	CHECK(!strstr(text, "weird\"counter"), "zero counter shown");
	CHECK(!strstr(text, "e_site"), "stack beyond --top shown");
	CHECK(!strstr(text, "frame-pointer"), "fp walk shown without --unwind both");

	pc = find(text, "c_site");
	pd = find(text, "d_inner");
	pb = find(text, "0xdeadbeef");
	pa = find(text, "LeakLib::");
	CHECK(pc < pd && pd < pb && pb < pa, "text order");
	free(text);

	/* each loss on a line of its own, after the dropped events */
	{
		static const struct report_loss losses[] = {
			{ "events_lost", 0, 2, 0, "2 events were lost: the events ring buffer was full" },
			{ "stacks_map_full", 77, 3, 48, "3 allocations (48 bytes) of pid 77 (x) were recorded "
							"without a stack: the stacks map was full" },
		};

		r.losses = losses;
		r.nlosses = N(losses);
		text = write_mem(report_write_text, &r, TOP);
		find(text, "Dropped events: 7, truncated stacks: 1, unwind errors: 1\n"
			   "Lost: 2 events were lost: the events ring buffer was full\n"
			   "Lost: 3 allocations (48 bytes) of pid 77 (x) were recorded without a stack: the stacks "
			   "map was full\n"
			   "Counters: no_table 3\n");
		free(text);
		r.losses = NULL;
		r.nlosses = 0;
	}

	r.unwind = "both";
	CHECK(fp_compare(&r, &sum) == 0, "fp_compare");
	text = write_mem(report_write_text, &r, 0);
	/* the seed stack: FP has malloc then main, so operator new and
	 * LeakLib::slowMemoryLeak are lost, blamed on malloc's module */
	find(text, "\t\tDWARF walk");
	find(text, "\t\tmalloc+0x0 [libc.so.6]                                            | malloc+0x0 [libc.so.6]\n"
		   "\t>>\toperator new(unsigned long)+0x1c [libstdc++.so.6.0.30]            | (missing)\n"
		   "\t\tLeakLib::slowMemoryLeak()+0x20 [main] leak_lib.cpp:7              | (missing)\n"
		   "\t\tcaller() [main] main.cpp:9 (inlined)                              | main+0x31 [main]\n");
	find(text, "Frame pointers vs DWARF: 0 of 5 stacks agree (0.0%)");
	find(text, "\tlost at /usr/lib/x86_64-linux-gnu/libc.so.6: ");
	find(text, "e_site");
	find(text, "5 of 5 stacks shown");
	free(text);
	for (i = 0; i < r.nstacks; i++)
		if (r.stacks[i].bytes == 480)
			CHECK(r.stacks[i].fp_divergence == 1, "seed stack diverges at frame 1, not %ld",
			      r.stacks[i].fp_divergence);
	CHECK(sum.stacks == 5 && sum.agreeing == 0, "fp summary counts");
	text = write_mem(report_write_json, &r, 0);
	find(text, "\"fp_summary\": {");
	find(text, "\"fp_divergence\": 1,");
	free(text);
	fp_summary_free(&sum);
	r.fp = NULL;
}

/* ---- Folded ---- */

static void test_folded(void)
{
	struct report_stack stacks[NSTACKS];
	struct report r;
	char *got;

	report_build(&r, stacks, "dwarf");
	got = write_mem(report_write_folded, &r, TOP);
	same_lines("folded", got,
		   "c_site;calloc 1000\n"
		   "d_outer;d_inner;malloc 1000\n"
		   BAD_UTF8_DECODED ";" UTF8_FUNCTION ";quote\"back\\slash_new_tab_ctl__semi;"
		   "[unknown]+0xdeadbeef;[lib\"weird\\name.so]+0x1234 1000\n"
		   "__libc_start_call_main;main;caller();LeakLib::slowMemoryLeak();"
		   "operator new(unsigned long);malloc 480\n");
	free(got);

	got = write_mem(report_write_folded, &r, 0);
	CHECK(strstr(got, "\ne_site;malloc 10\n"), "%s", got);
	free(got);
}

/* ---- Sorting, totals, units ---- */

static void test_sort(void)
{
	struct report_stack stacks[NSTACKS];
	struct report r;
	size_t i;

	report_build(&r, stacks, "dwarf");
	CHECK(r.totals.outstanding_bytes == 3490 && r.totals.outstanding_allocations == 24 &&
	      r.totals.stacks == 5 && r.totals.truncated_stacks == 1 && r.totals.unwind_errors == 1,
	      "totals");
	CHECK(report_sort(&r) == 0, "report_sort");
	for (i = 0; i < NSTACKS; i++)
		CHECK(stacks[i].frames == (i == 0 ? frames_c : i == 1 ? frames_d :
					   i == 2 ? frames_b : i == 3 ? frames_a : frames_e),
		      "sorted position %zu", i);
	/* Sorting a sorted report changes nothing (stability). */
	CHECK(report_sort(&r) == 0 && stacks[0].frames == frames_c && stacks[1].frames == frames_d,
	      "resort");
}

static void test_human(void)
{
	static const struct {
		double v;
		const char *want;
	} cases[] = {
		{ 0, "0 B" }, { 480, "480 B" }, { 1023, "1023 B" }, { 1024, "1.0 KiB" },
		{ 12800, "12.5 KiB" }, { 3.0 * 1024 * 1024 * 1024, "3.0 GiB" },
		{ -300, "-300 B" }, { -1228.8, "-1.2 KiB" },
	};
	char buf[32];
	size_t i;

	for (i = 0; i < N(cases); i++)
		CHECK(!strcmp(report_human_bytes(buf, sizeof(buf), cases[i].v), cases[i].want),
		      "%g gave %s, want %s", cases[i].v, buf, cases[i].want);
}

int main(void)
{
	check_python3("command -v python3");
	CHECK(mkdtemp(tmpdir), "mkdtemp");

	test_human();
	test_sort();
	test_json("dwarf", TOP);
	test_json("both", TOP);
	test_json("fp", 0);
	test_json("dwarf", 1);
	test_json_empty();
	test_text();
	test_folded();

	rmdir(tmpdir);
	printf("test_report: ok\n");
	return 0;
}
