/* Unit tests for the svg report: reports built in memory (the seed chain,
 * hostile names, a traced tree with a leak check, thousands of tiny stacks,
 * a top-N cut, nothing at all) go through report_write_svg() and back
 * through an independent XML parser (Python's minidom), which also checks
 * every box's geometry against its bytes. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "svg.h"
#include "report.h"

static char tmpdir[] = "/tmp/test_flamegraph.XXXXXX";

/* ---- The independent checker ---- */

/*
 * Parses the SVG (well-formedness), then checks every box: width and x are
 * bytes and offset times the scale (to the 2 decimals written), no box is
 * narrower than 0.1 px, every box but the root lies within one box of the
 * row below and children never add up to more than their parent, the label
 * follows the fit rule, the tooltip names the frame.  Each line of the
 * expectations file, "BYTES<TAB>KIND<TAB>INLINED<TAB>NAME", must match a box.
 * With "empty" it checks the no-allocations image instead.
 */
static const char checker_py[] =
	"import math, sys, xml.dom.minidom as md\n"
	"doc = md.parse(sys.argv[1])\n"
	"def fail(msg):\n"
	"    sys.exit('svg check: ' + msg)\n"
	"def text(node):\n"
	"    return ''.join(c.data for c in node.childNodes if c.nodeType == c.TEXT_NODE)\n"
	"svg = doc.documentElement\n"
	"if svg.tagName != 'svg': fail('root element is ' + svg.tagName)\n"
	"groups = {g.getAttribute('id'): g for g in doc.getElementsByTagName('g') if g.getAttribute('id')}\n"
	"if sys.argv[2] == 'empty':\n"
	"    if 'frames' in groups: fail('empty report has frames')\n"
	"    if 'No outstanding allocations' not in doc.toxml(): fail('no empty message')\n"
	"    sys.exit(0)\n"
	"root = groups['frames']\n"
	"total = int(root.getAttribute('data-total'))\n"
	"pad = float(root.getAttribute('data-pad'))\n"
	"width = float(root.getAttribute('data-width'))\n"
	"char_w = float(root.getAttribute('data-char-w'))\n"
	"label_pad = float(root.getAttribute('data-label-pad'))\n"
	"min_chars = int(root.getAttribute('data-min-chars'))\n"
	"boxes = []\n"
	"for g in root.getElementsByTagName('g'):\n"
	"    cls = g.getAttribute('class').split()\n"
	"    if cls[0] != 'f': fail('unexpected group ' + g.toxml()[:80])\n"
	"    rect = g.getElementsByTagName('rect')[0]\n"
	"    b = dict(name=g.getAttribute('data-n'), kind=g.getAttribute('data-k'),\n"
	"             inlined='inl' in cls, bytes=int(g.getAttribute('data-b')),\n"
	"             off=int(g.getAttribute('data-o')), depth=int(g.getAttribute('data-d')),\n"
	"             x=float(rect.getAttribute('x')), y=float(rect.getAttribute('y')),\n"
	"             w=float(rect.getAttribute('width')),\n"
	"             label=text(g.getElementsByTagName('text')[0]),\n"
	"             title=text(g.getElementsByTagName('title')[0]))\n"
	"    boxes.append(b)\n"
	"    want_w = b['bytes'] / total * width\n"
	"    want_x = pad + b['off'] / total * width\n"
	"    if abs(b['w'] - want_w) > 0.0051 or abs(b['x'] - want_x) > 0.0051:\n"
	"        fail('%r: x %s width %s, want %.4f %.4f' % (b['name'], b['x'], b['w'], want_x, want_w))\n"
	"    if want_w < 0.1: fail('%r is %.4f px wide' % (b['name'], want_w))\n"
	"    if not b['title'].startswith(b['name']): fail('title of %r: %r' % (b['name'], b['title']))\n"
	"    if ('%d bytes' % b['bytes']) not in b['title']: fail('title lacks bytes: %r' % b['title'])\n"
	"    n = (b['w'] - 2 * label_pad) / char_w\n"
	"    n = 0 if n < min_chars else math.floor(n)\n"
	"    want = b['name'] if len(b['name']) <= n else (b['name'][:n - 1] + '\\u2026' if n else '')\n"
	"    if b['label'] != want: fail('label of %r is %r, want %r' % (b['name'][:60], b['label'], want))\n"
	"roots = [b for b in boxes if b['depth'] == 0]\n"
	"if len(roots) != 1 or roots[0]['bytes'] != total or roots[0]['off'] != 0: fail('bad root')\n"
	"rows = {}\n"
	"for b in boxes:\n"
	"    rows.setdefault(b['depth'], set()).add(b['y'])\n"
	"for d in rows:\n"
	"    if len(rows[d]) != 1: fail('row %d at several heights' % d)\n"
	"    if d in rows and d - 1 in rows and not min(rows[d]) < min(rows[d - 1]):\n"
	"        fail('row %d not above row %d' % (d, d - 1))\n"
	"children = {}\n"
	"for b in boxes:\n"
	"    if b['depth'] == 0: continue\n"
	"    ps = [p for p in boxes if p['depth'] == b['depth'] - 1 and p['off'] <= b['off']\n"
	"          and b['off'] + b['bytes'] <= p['off'] + p['bytes']]\n"
	"    if len(ps) != 1: fail('%r has %d parents' % (b['name'], len(ps)))\n"
	"    children.setdefault(id(ps[0]), [ps[0], 0])[1] += b['bytes']\n"
	"for p, s in children.values():\n"
	"    if s > p['bytes']: fail('children of %r add up to %d > %d' % (p['name'], s, p['bytes']))\n"
	"for line in open(sys.argv[2], encoding='utf-8').read().splitlines():\n"
	"    nbytes, kind, inl, name = line.split('\\t', 3)\n"
	"    if not [b for b in boxes if b['name'] == name and b['bytes'] == int(nbytes)\n"
	"            and b['kind'] == kind and b['inlined'] == (inl == '1')]:\n"
	"        fail('no box %r with %s bytes, kind %s, inlined %s; have %r' % (name[:80], nbytes, kind, inl,\n"
	"             [(b['name'][:40], b['bytes'], b['kind'], b['inlined']) for b in boxes if b['name'] == name]))\n"
	"print('%d boxes, %d rows' % (len(boxes), len(rows)))\n";

static char *tmp_path(const char *name)
{
	char *path;

	CHECK(asprintf(&path, "%s/%s", tmpdir, name) > 0, "asprintf");
	return path;
}

/* Writes R as SVG to NAME in the temp dir; returns the path and the text. */
static char *write_svg(const struct report *r, unsigned int top, const char *name, char **text)
{
	char *path = tmp_path(name);
	FILE *f = fopen(path, "w+");
	long len;
	int err;

	CHECK(f, "cannot create %s", path);
	err = report_write_svg(f, r, top);
	CHECK(err == 0, "report_write_svg returned %d for %s", err, name);
	len = ftell(f);
	CHECK(len > 0, "%s is empty", name);
	*text = calloc(1, (size_t)len + 1);
	CHECK(*text, "calloc");
	rewind(f);
	CHECK(fread(*text, 1, (size_t)len, f) == (size_t)len, "short read of %s", path);
	fclose(f);
	return path;
}

struct expect {
	uint64_t bytes;
	const char *kind;
	bool inlined;
	const char *name;
};

/* Runs the checker on SVG with the expectations E[0..N) ("empty": none, and
 * the image must be the no-allocations one). */
static void check_svg(const char *svg, const struct expect *e, size_t n, bool empty)
{
	char *script = tmp_path("check.py"), *exp = tmp_path("expect.tsv"), *cmd;
	FILE *f;
	size_t i;
	int status;

	f = fopen(script, "w");
	CHECK(f && fputs(checker_py, f) >= 0 && fclose(f) == 0, "cannot write %s", script);
	f = fopen(exp, "w");
	CHECK(f, "cannot write %s", exp);
	for (i = 0; i < n; i++)
		fprintf(f, "%" PRIu64 "\t%s\t%d\t%s\n", e[i].bytes, e[i].kind, e[i].inlined, e[i].name);
	CHECK(fclose(f) == 0, "cannot write %s", exp);
	CHECK(asprintf(&cmd, "python3 %s %s %s", script, svg, empty ? "empty" : exp) > 0, "asprintf");
	status = system(cmd);
	CHECK(status == 0, "checker failed (status %d) on %s", status, svg);
	free(cmd);
	free(script);
	free(exp);
}

/* And a second, minimal well-formedness check, the one the brief names. */
static void check_minidom(const char *svg)
{
	char *cmd;

	CHECK(asprintf(&cmd, "python3 -c 'import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])' %s",
		       svg) > 0, "asprintf");
	CHECK(system(cmd) == 0, "%s is not well-formed XML", svg);
	free(cmd);
}

/* ---- The seed chain and a stack with names that need escaping ---- */

#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define LIBSTDCXX "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"
#define SEED "/home/u/dwleak/build/testdata/seed_O2"
#define OWN_LIB "/home/u/dwleak/build/testdata/libdlleak.so"
#define TEMPLATE_FN "std::vector<int, std::allocator<int> >::push_back(int const&)"
#define TEMPLATE_FN_XML "std::vector&lt;int, std::allocator&lt;int&gt; &gt;::push_back(int const&amp;)"
#define QUOTES_FN "say(\"hi\", 'there') && <done>"
#define QUOTES_FN_XML "say(&quot;hi&quot;, &apos;there&apos;) &amp;&amp; &lt;done&gt;"
#define QUOTES_MODULE "/opt/q\"&'<lib>.so"

static const struct report_frame seed_chain[] = {
	{ 0x7f3a1c2b4e10, 0x9ae10, LIBC, NULL, "malloc", 0, NULL, 0, false, NULL },
	{ 0x7f3a1c4ae21c, 0xae21c, LIBSTDCXX, NULL, "operator new(unsigned long)", 0x1c, NULL, 0, false, NULL },
	{ 0x401220, 0x1220, SEED, NULL, "LeakLib::slowMemoryLeak()", 0x20, "leak_lib.cpp", 7, false, NULL },
	{ 0x401331, 0x1331, SEED, NULL, "caller()", 0, "main.cpp", 9, true, NULL },
	{ 0x401331, 0x1331, SEED, NULL, "main", 0x31, "main.cpp", 14, false, NULL },
	{ 0x7f3a1c22a07a, 0x2a07a, LIBC, NULL, "__libc_start_call_main", 0x7a, NULL, 0, false, NULL },
	{ 0x401050, 0x1050, SEED, NULL, "_start", 0x20, NULL, 0, false, NULL },
};
static const char *const seed_names_xml[] = {
	"malloc", "operator new(unsigned long)", "LeakLib::slowMemoryLeak()", "caller()",
	"main", "__libc_start_call_main", "_start",
};
static const struct report_frame escaped_chain[] = {
	{ 0x7f3a1c2b4e10, 0x9ae10, LIBC, NULL, "malloc", 0, NULL, 0, false, NULL },
	{ 0x7f3a1c4ae21c, 0xae21c, LIBSTDCXX, NULL, "operator new(unsigned long)", 0x1c, NULL, 0, false, NULL },
	{ 0x7f3a1c4b0000, 0xb0000, LIBSTDCXX, NULL, TEMPLATE_FN, 0x10, NULL, 0, false, NULL },
	{ 0x7f0000002000, 0x2000, QUOTES_MODULE, NULL, QUOTES_FN, 0x8, NULL, 0, false, NULL },
	{ 0x7f0000003000, 0x3000, OWN_LIB, NULL, NULL, 0, NULL, 0, false, NULL },
	{ 0xdeadbeef, 0, NULL, NULL, NULL, 0, NULL, 0, false, NULL },
	{ 0x401331, 0x1331, SEED, NULL, "main", 0x31, "main.cpp", 14, false, NULL },
	{ 0x7f3a1c22a07a, 0x2a07a, LIBC, NULL, "__libc_start_call_main", 0x7a, NULL, 0, false, NULL },
	{ 0x401050, 0x1050, SEED, NULL, "_start", 0x20, NULL, 0, false, NULL },
};
/* Broken UTF-8 and control characters: must still give well-formed XML. */
static const struct report_frame broken_chain[] = {
	{ 0x7f3a1c2b5000, 0x9b000, LIBC, NULL, "calloc", 0, NULL, 0, false, NULL },
	{ 0x402200, 0x2200, SEED, NULL, "bad\xff\xc3(x\xed\xa0\x80y\x01\x7f\n\xef\xbf\xbe", 0x4, NULL, 0, false, NULL },
};

static struct report seed_report(struct report_stack *stacks)
{
	struct report r = {
		.pid = 4242, .command = SEED, .unwind = "dwarf", .duration_s = 1.5,
		.stacks = stacks, .nstacks = 4,
	};

	stacks[0] = (struct report_stack){ .bytes = 120, .allocations = 3, .allocator = "operator new",
		.frames = escaped_chain, .nframes = N(escaped_chain) };
	stacks[1] = (struct report_stack){ .bytes = 480, .allocations = 12, .allocator = "operator new",
		.frames = seed_chain, .nframes = N(seed_chain) };
	stacks[2] = (struct report_stack){ .bytes = 24, .allocations = 1, .allocator = "calloc",
		.frames = broken_chain, .nframes = N(broken_chain), .unwind_error = "no table" };
	stacks[3] = (struct report_stack){ .bytes = 16, .allocations = 1, .allocator = "malloc",
		.frames = seed_chain, .nframes = 2, .truncated = true };
	report_totals_from_stacks(&r);
	return r;
}

static void test_seed(void)
{
	struct report_stack stacks[4];
	struct report r = seed_report(stacks);
	static const struct expect e[] = {
		{ 640, "other", false, "all" },
		{ 600, "user", false, "_start" },
		{ 600, "system", false, "__libc_start_call_main" },
		{ 600, "user", false, "main" },
		{ 480, "user", true, "caller()" },
		{ 480, "user", false, "LeakLib::slowMemoryLeak()" },
		{ 480, "alloc", false, "operator new(unsigned long)" },
		{ 480, "alloc", false, "malloc" },
		{ 120, "other", false, "[unknown]+0xdeadbeef" },
		{ 120, "user", false, "[libdlleak.so]+0x3000" },
		{ 120, "user", false, QUOTES_FN },
		{ 120, "system", false, TEMPLATE_FN },
		{ 120, "alloc", false, "operator new(unsigned long)" },
		{ 120, "alloc", false, "malloc" },
		{ 24, "other", false, "[incomplete: no table]" },
		{ 24, "alloc", false, "calloc" },
		{ 16, "other", false, "[incomplete: depth limit]" },
		{ 16, "alloc", false, "operator new(unsigned long)" },
	};
	char *text, *svg = write_svg(&r, 0, "seed.svg", &text);
	size_t i;

	check_minidom(svg);
	check_svg(svg, e, N(e), false);
	for (i = 0; i < N(seed_names_xml); i++)
		CHECK(strstr(text, seed_names_xml[i]), "frame %s missing", seed_names_xml[i]);
	CHECK(strstr(text, TEMPLATE_FN_XML), "template name not escaped as %s", TEMPLATE_FN_XML);
	CHECK(strstr(text, QUOTES_FN_XML), "quotes not escaped as %s", QUOTES_FN_XML);
	CHECK(strstr(text, "/opt/q&quot;&amp;&apos;&lt;lib&gt;.so"), "module not escaped");
	CHECK(!strstr(text, "<done>") && !strstr(text, "int> >"), "raw markup characters leaked");
	CHECK(strstr(text, "pid 4242") && strstr(text, SEED), "title lacks pid or command");
	CHECK(strstr(text, "your code") && strstr(text, "system libraries") &&
	      strstr(text, "allocator"), "legend missing");
	CHECK(strstr(text, "<script") && !strstr(text, "http://www.w3.org/1999/xlink") &&
	      !strstr(text, "href"), "script missing or something external referenced");
	free(text);
	free(svg);
}

/* ---- A traced tree with a leak check ---- */

/* Two processes, the seed chain split into kinds: the process boxes sit on
 * the root, the kind boxes on them (coloured by kind), the frames above. */
static void test_tree_and_kinds(void)
{
	struct report_process procs[] = {
		{ .pid = 10, .command = "/bin/sh", .state = REPORT_PROCESS_ENDED },
		{ .pid = 11, .ppid = 10, .command = SEED, .state = REPORT_PROCESS_ENDED },
	};
	struct report_stack stacks[] = {
		{ .bytes = 480, .allocations = 12, .frames = seed_chain, .nframes = N(seed_chain),
		  .pid = 11, .command = SEED, .has_leak_kinds = true,
		  .leak_kinds = { [REPORT_LEAK_DEFINITELY_LOST] = { 400, 10 },
				  [REPORT_LEAK_REACHABLE] = { 40, 1 } } },
		{ .bytes = 120, .allocations = 3, .frames = seed_chain, .nframes = 2,
		  .pid = 10, .command = "/bin/sh", .has_leak_kinds = true,
		  .leak_kinds = { [REPORT_LEAK_POSSIBLY_LOST] = { 120, 3 } } },
	};
	struct report r = { .pid = 10, .command = "/bin/sh", .unwind = "dwarf", .stacks = stacks,
			    .nstacks = N(stacks), .processes = procs, .nprocesses = N(procs),
			    .leak_check = { .present = true } };
	static const struct expect e[] = {
		{ 600, "other", false, "all" },
		{ 480, "other", false, SEED " [11]" },
		{ 400, "definitely_lost", false, "[definitely_lost]" },
		{ 400, "user", false, "_start" },
		{ 400, "alloc", false, "malloc" },
		{ 40, "reachable", false, "[reachable]" },
		{ 40, "alloc", false, "malloc" },
		{ 40, "other", false, "[unclassified]" },
		{ 40, "user", true, "caller()" },
		{ 120, "other", false, "/bin/sh [10]" },
		{ 120, "possibly_lost", false, "[possibly_lost]" },
		{ 120, "alloc", false, "operator new(unsigned long)" },
	};
	char *text, *svg;

	report_totals_from_stacks(&r);
	svg = write_svg(&r, 0, "tree.svg", &text);
	check_svg(svg, e, N(e), false);
	CHECK(strstr(text, ">definitely lost</text>") && strstr(text, ">still reachable</text>"),
	      "no legend row for the leak kinds");
	free(text);
	free(svg);

	/* without a leak check there is no kind box and no legend row for kinds */
	r.leak_check.present = false;
	svg = write_svg(&r, 0, "tree_nokinds.svg", &text);
	check_svg(svg, e, 2, false);
	CHECK(!strstr(text, "[definitely_lost]") && !strstr(text, ">definitely lost</text>"),
	      "leak kinds drawn without a leak check");
	free(text);
	free(svg);
}

/* ---- Many stacks, a huge name, a top-N cut ---- */

#define TINY 3000
#define BIG_BYTES 10000000ULL

static void test_many(void)
{
	static struct report_frame tiny_frames[TINY][2];
	static char tiny_names[TINY][16];
	struct report_stack *stacks = calloc(TINY + 1, sizeof(*stacks));
	struct report_frame big[3];
	struct report r = { .pid = 7, .command = SEED, .unwind = "dwarf" };
	struct expect e[3];
	char *huge = malloc(5001), *text, *svg;
	size_t i;

	CHECK(stacks && huge, "calloc");
	memset(huge, 'x', 5000);
	memcpy(huge, "Huge<", 5);
	huge[5000] = '\0';
	big[0] = seed_chain[0];
	big[1] = (struct report_frame){ 0x401400, 0x1400, SEED, NULL, huge, 0, NULL, 0, false, NULL };
	big[2] = seed_chain[4];
	stacks[0] = (struct report_stack){ .bytes = BIG_BYTES, .allocations = 1, .frames = big, .nframes = 3 };
	for (i = 0; i < TINY; i++) {
		snprintf(tiny_names[i], sizeof(tiny_names[i]), "tiny_%zu", i);
		tiny_frames[i][0] = seed_chain[0];
		tiny_frames[i][1] = (struct report_frame){ 0x500000 + i, 0x1000 + i, SEED, NULL,
							   tiny_names[i], 0, NULL, 0, false, NULL };
		stacks[i + 1] = (struct report_stack){ .bytes = 1, .allocations = 1,
						       .frames = tiny_frames[i], .nframes = 2 };
	}
	r.stacks = stacks;
	r.nstacks = TINY + 1;
	report_totals_from_stacks(&r);

	/* All of them: the tiny ones fold into the root but keep their bytes. */
	e[0] = (struct expect){ BIG_BYTES + TINY, "other", false, "all" };
	e[1] = (struct expect){ BIG_BYTES, "user", false, huge };
	svg = write_svg(&r, 0, "many.svg", &text);
	check_svg(svg, e, 2, false);
	CHECK(!strstr(text, "tiny_"), "boxes under 0.1 px were drawn");
	CHECK(strstr(text, "<title>Huge&lt;xxxxxxxx"), "huge name not in its title");
	CHECK(strstr(text, ">Huge&lt;xxx") && strstr(text, "x\xe2\x80\xa6</text>"),
	      "huge name's label not cut with an ellipsis");
	free(text);
	free(svg);

	/* --top 2: the big stack, one tiny one, and the rest in one box. */
	e[1] = (struct expect){ TINY - 1, "other", false, "[2999 more stacks]" };
	e[2] = (struct expect){ BIG_BYTES, "user", false, "main" };
	svg = write_svg(&r, 2, "top.svg", &text);
	check_svg(svg, e, 3, false);
	free(text);
	free(svg);
	free(huge);
	free(stacks);
}

/* ---- Nothing outstanding ---- */

static void test_empty(void)
{
	struct report_stack zero = { .bytes = 0, .allocations = 0, .frames = seed_chain,
				     .nframes = N(seed_chain) };
	struct report r = { .pid = 1, .command = "/bin/a<b", .unwind = "dwarf" };
	char *text, *svg;

	svg = write_svg(&r, 0, "empty.svg", &text);
	check_svg(svg, NULL, 0, true);
	CHECK(strstr(text, "/bin/a&lt;b"), "command not escaped");
	free(text);
	free(svg);

	r.stacks = &zero; /* a stack whose allocations were all freed */
	r.nstacks = 1;
	svg = write_svg(&r, 0, "zero.svg", &text);
	check_svg(svg, NULL, 0, true);
	free(text);
	free(svg);
}

/* A stream error is -EIO. */
static void test_stream_error(void)
{
	struct report_stack stacks[4];
	struct report r = seed_report(stacks);
	FILE *f = fopen("/dev/full", "w");
	int err;

	if (!f)
		return;
	err = report_write_svg(f, &r, 0);
	CHECK(err == -EIO, "writing to /dev/full returned %d, want -EIO", err);
	fclose(f);
}

static void remove_tmpdir(void)
{
	char *cmd;

	CHECK(asprintf(&cmd, "rm -rf %s", tmpdir) > 0, "asprintf");
	CHECK(system(cmd) == 0, "cannot remove %s", tmpdir);
	free(cmd);
}

/* tests/flamegraph_render.sh draws this when dwleak cannot make a real one. */
static int write_seed(const char *path)
{
	struct report_stack stacks[4];
	struct report r = seed_report(stacks);
	FILE *f = fopen(path, "w");
	int err;

	if (!f) {
		perror(path);
		return 1;
	}
	err = report_write_svg(f, &r, 0);
	if (fclose(f) || err) {
		fprintf(stderr, "test_flamegraph: cannot write %s (%d)\n", path, err);
		return 1;
	}
	return 0;
}

/* usage: test_flamegraph                   run the tests
 *        test_flamegraph --write-seed FILE  only write the seed report's SVG */
int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-seed") == 0)
		return write_seed(argv[2]);
	check_python3("python3 -c 'import xml.dom.minidom'");
	CHECK(mkdtemp(tmpdir), "mkdtemp");
	check_tmpdir = tmpdir;
	test_seed();
	test_tree_and_kinds();
	test_many();
	test_empty();
	test_stream_error();
	remove_tmpdir();
	printf("test_flamegraph: ok\n");
	return 0;
}
