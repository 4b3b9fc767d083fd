/* Unit tests for the libdw oracle (table_verify) and the debug file lookup:
 * real objects verify clean, and, as important, a table with one rule or
 * row corrupted in any of the ways a compiler bug would corrupt it fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "debug_file.h"
#include "table.h"
#include "table_verify.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static char tmpdir[] = "/tmp/dwleak-test-verify-XXXXXX";

/* What the mismatch callback saw. */
struct seen {
	uint64_t calls;
	uint64_t first_addr;
	char first[600];
};

static void on_mismatch(void *arg, uint64_t addr, const char *ours, const char *theirs)
{
	struct seen *s = arg;

	CHECK(ours && ours[0] && theirs && theirs[0], "empty mismatch text at %#lx",
	      (unsigned long)addr);
	if (s->calls++ == 0) {
		s->first_addr = addr;
		snprintf(s->first, sizeof(s->first), "ours %s, libdw %s", ours, theirs);
	}
}

static struct unwind_table *compile(const char *path, const char *debug_path)
{
	struct table_opts opts = { .debug_path = debug_path };
	struct unwind_table *t = NULL;
	int ret;

	ret = table_compile_path(path, &opts, &t);
	CHECK(ret == 0, "compiling %s: %s", path, table_last_error());
	return t;
}

/* Verifies T against PATH; returns the mismatch count, checked against the
 * callback's and the result's other counters. */
static uint64_t verify(const char *path, const char *debug_path, const struct unwind_table *t,
		       struct seen *s)
{
	struct table_opts opts = { .debug_path = debug_path };
	struct table_verify_result res;
	int fd, ret;

	memset(s, 0, sizeof(*s));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	ret = table_verify(fd, &opts, t, &res, on_mismatch, s);
	close(fd);
	CHECK(ret == 0, "verify %s: %s", path, table_verify_last_error());
	CHECK(res.mismatches == s->calls, "%lu mismatches, %lu callbacks",
	      (unsigned long)res.mismatches, (unsigned long)s->calls);
	CHECK(res.spans > 0 && res.fde_starts > 0 && res.addrs >= res.spans + res.fde_starts,
	      "spans %lu addrs %lu",
	      (unsigned long)res.spans, (unsigned long)res.addrs);
	CHECK(res.nrows == t->nrows && res.nfdes == t->nfdes &&
		      res.walker_bytes == table_walker_bytes(t),
	      "summary fields not passed through");
	return res.mismatches;
}

static void expect_clean(const char *path, const char *debug_path)
{
	struct unwind_table *t = compile(path, debug_path);
	struct seen s;
	uint64_t n = verify(path, debug_path, t, &s);

	CHECK(n == 0, "%s: %lu mismatches, first at %#lx: %s", path, (unsigned long)n,
	      (unsigned long)s.first_addr, s.first);
	table_free(t);
}

/* Page index and row index of every row, walked in order. */
struct row_ref {
	uint32_t page;
	uint32_t row;
};

typedef bool (*row_pick_fn)(struct unwind_table *t, const struct row_ref *ref);

/* True when ROW is neither the first nor the last row of its page. */
static bool row_inner(const struct unwind_table *t, const struct row_ref *ref)
{
	const struct unwind_page *pg = &t->pages[ref->page];

	return ref->row > pg->first_row && ref->row + 1 < pg->first_row + pg->nrows;
}

static const struct unwind_rule *row_rule(const struct unwind_table *t, uint32_t row)
{
	return &t->rules[t->rows[row].rule];
}

/* Calls PICK on rows until it corrupts one (returns true). */
static bool corrupt_one_row(struct unwind_table *t, row_pick_fn pick)
{
	struct row_ref ref;
	uint32_t i;

	for (ref.page = 0; ref.page < t->npages; ref.page++) {
		const struct unwind_page *pg = &t->pages[ref.page];

		for (i = 0; i < pg->nrows; i++) {
			ref.row = pg->first_row + i;
			if (row_inner(t, &ref) && pick(t, &ref))
				return true;
		}
	}
	return false;
}

static int64_t rule_find(const struct unwind_table *t, uint8_t cfa_type, int32_t not_off)
{
	uint32_t i;

	for (i = 0; i < t->nrules; i++)
		if (t->rules[i].cfa_type == cfa_type && t->rules[i].cfa_off != not_off)
			return i;
	return -1;
}

/* Moves the start of a row between two rsp rules one byte later. */
static bool pick_shift_row(struct unwind_table *t, const struct row_ref *ref)
{
	struct unwind_row *rows = t->rows;
	const struct unwind_rule *prev = row_rule(t, ref->row - 1), *cur = row_rule(t, ref->row);

	if (prev->cfa_type != UNWIND_CFA_RSP || cur->cfa_type != UNWIND_CFA_RSP ||
	    prev->cfa_off == cur->cfa_off || rows[ref->row + 1].pc_low - rows[ref->row].pc_low < 2)
		return false;
	rows[ref->row].pc_low++;
	return true;
}

/* Points one rsp row at another rsp rule with a different offset. */
static bool pick_swap_rule(struct unwind_table *t, const struct row_ref *ref)
{
	const struct unwind_rule *cur = row_rule(t, ref->row);
	int64_t other;

	if (cur->cfa_type != UNWIND_CFA_RSP)
		return false;
	other = rule_find(t, UNWIND_CFA_RSP, cur->cfa_off);
	if (other < 0)
		return false;
	t->rows[ref->row].rule = (uint16_t)other;
	return true;
}

/* Turns a covered row (between two covered rows) into a gap. */
static bool pick_drop_row(struct unwind_table *t, const struct row_ref *ref)
{
	int64_t none = rule_find(t, UNWIND_CFA_NONE, INT32_MIN);

	if (none < 0 || row_rule(t, ref->row)->cfa_type != UNWIND_CFA_RSP ||
	    row_rule(t, ref->row - 1)->cfa_type == UNWIND_CFA_NONE ||
	    row_rule(t, ref->row + 1)->cfa_type == UNWIND_CFA_NONE)
		return false;
	t->rows[ref->row].rule = (uint16_t)none;
	return true;
}

/* Gives a gap between two FDEs a rule libdw cannot know. */
static bool pick_fill_gap(struct unwind_table *t, const struct row_ref *ref)
{
	int64_t rsp = rule_find(t, UNWIND_CFA_RSP, INT32_MIN);

	if (rsp < 0 || row_rule(t, ref->row)->cfa_type != UNWIND_CFA_NONE ||
	    t->rows[ref->row - 1].rule == rsp || t->rows[ref->row + 1].rule == rsp)
		return false;
	t->rows[ref->row].rule = (uint16_t)rsp;
	return true;
}

/* Rule-array corruptions: change one field of the first rule of a kind. */
enum rule_edit { EDIT_CFA_OFF, EDIT_CFA_TYPE, EDIT_RBP_OFF };

static bool corrupt_one_rule(struct unwind_table *t, enum rule_edit edit)
{
	struct unwind_rule *r;
	uint32_t i;

	for (i = 0; i < t->nrules; i++) {
		r = &t->rules[i];
		if (edit == EDIT_CFA_OFF && r->cfa_type == UNWIND_CFA_RSP) {
			r->cfa_off += 8;
			return true;
		}
		if (edit == EDIT_CFA_TYPE && r->cfa_type == UNWIND_CFA_RSP) {
			r->cfa_type = UNWIND_CFA_RBP;
			return true;
		}
		if (edit == EDIT_RBP_OFF && r->rbp_type == UNWIND_RBP_CFA) {
			r->rbp_off -= 8;
			return true;
		}
	}
	return false;
}

static void expect_caught(const char *what, struct unwind_table *t, bool corrupted)
{
	struct seen s;
	uint64_t n;

	CHECK(corrupted, "%s: found nothing in libc to corrupt", what);
	n = verify(LIBC, NULL, t, &s);
	CHECK(n >= 1, "%s: the corrupted table verified clean", what);
	printf("  %s: %lu mismatches, first at %#lx: %s\n", what, (unsigned long)n,
	       (unsigned long)s.first_addr, s.first);
	table_free(t);
}

static void test_negative(void)
{
	struct unwind_table *t;

	t = compile(LIBC, NULL);
	expect_caught("cfa_off changed", t, corrupt_one_rule(t, EDIT_CFA_OFF));
	t = compile(LIBC, NULL);
	expect_caught("cfa_type changed", t, corrupt_one_rule(t, EDIT_CFA_TYPE));
	t = compile(LIBC, NULL);
	expect_caught("rbp_off changed", t, corrupt_one_rule(t, EDIT_RBP_OFF));
	t = compile(LIBC, NULL);
	expect_caught("row pc_low shifted", t, corrupt_one_row(t, pick_shift_row));
	t = compile(LIBC, NULL);
	expect_caught("row given another rule", t, corrupt_one_row(t, pick_swap_rule));
	t = compile(LIBC, NULL);
	expect_caught("row dropped", t, corrupt_one_row(t, pick_drop_row));
	t = compile(LIBC, NULL);
	expect_caught("gap filled", t, corrupt_one_row(t, pick_fill_gap));
}

static int run(const char *cmd)
{
	int ret = system(cmd);

	return WIFEXITED(ret) ? WEXITSTATUS(ret) : -1;
}

static const char split_source[] =
	"#include <stdio.h>\n"
	"#include <stdlib.h>\n"
	"__attribute__((noinline)) long leaf(long *p, int n)\n"
	"{ long s = 0; for (int i = 0; i < n; i++) s += p[i] * i; return s; }\n"
	"int main(int c, char **v)\n"
	"{ long a[64]; (void)v; for (int i = 0; i < 64; i++) a[i] = rand();\n"
	"  return (int)leaf(a, c) + printf(\"%d\\n\", c); }\n";

/* A program whose own code has only .debug_frame, split into a stripped
 * object with a debuglink and its debug file.  Returns false when the
 * toolchain is missing. */
static bool build_split(char *obj, char *dbg, size_t len)
{
	char *src, *cmd;
	FILE *f;
	bool ok;

	snprintf(obj, len, "%s/prog", tmpdir);
	snprintf(dbg, len, "%s/prog.debug", tmpdir);
	CHECK(asprintf(&src, "%s/p.c", tmpdir) >= 0, "asprintf");
	f = fopen(src, "w");
	CHECK(f && fputs(split_source, f) >= 0 && fclose(f) == 0, "writing %s", src);
	free(src);
	CHECK(asprintf(&cmd,
		       "cd %s && "
		       "gcc -O2 -g -fno-asynchronous-unwind-tables -fno-unwind-tables "
		       "p.c -o full && "
		       "objcopy --only-keep-debug full prog.debug && "
		       "objcopy --strip-debug --add-gnu-debuglink=prog.debug full prog",
		       tmpdir) >= 0, "asprintf");
	ok = run(cmd) == 0;
	free(cmd);
	return ok;
}

static void test_debug_file(void)
{
	char obj[256], dbg[256], *found = NULL, *cmd;
	struct unwind_table *t;
	struct seen s;
	int fd, ret;

	if (!build_split(obj, dbg, sizeof(obj))) {
		printf("  debug file: skipped (gcc/objcopy failed)\n");
		return;
	}
	fd = open(obj, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open %s", obj);
	ret = debug_file_find(fd, obj, NULL, &found);
	CHECK(ret == 0 && found && strcmp(found, dbg) == 0, "debuglink lookup: %d %s", ret,
	      found ? found : "(none)");
	free(found);

	/* The debug file's .debug_frame fills what .eh_frame leaves out. */
	expect_clean(obj, dbg);
	t = compile(obj, dbg);
	CHECK(t->nfdes_debug > 0, "no FDE came from the debug file");
	table_free(t);

	/* A table compiled without the debug file misses FDEs libdw knows. */
	t = compile(obj, NULL);
	CHECK(verify(obj, dbg, t, &s) >= 1, "missing debug-file FDEs not noticed");
	table_free(t);

	/* A debug file whose CRC no longer matches is not taken. */
	CHECK(asprintf(&cmd, "echo >> %s", dbg) >= 0, "asprintf");
	CHECK(run(cmd) == 0, "appending to %s", dbg);
	free(cmd);
	found = NULL;
	ret = debug_file_find(fd, obj, NULL, &found);
	CHECK(ret == -ENOENT && !found, "stale debug file accepted: %d %s", ret,
	      found ? found : "");
	close(fd);
}

static void test_libc_debug_file(void)
{
	char *found = NULL;
	int fd = open(LIBC, O_RDONLY | O_CLOEXEC);
	int ret;

	CHECK(fd >= 0, "open libc");
	ret = debug_file_find(fd, LIBC, NULL, &found);
	CHECK(ret == 0 || ret == -ENOENT, "libc debug lookup failed: %d", ret);
	if (ret == 0) {
		printf("  libc debug file: %s\n", found);
		expect_clean(LIBC, found);
	}
	free(found);
	close(fd);
}

static void cleanup(void)
{
	char *cmd;

	if (asprintf(&cmd, "rm -rf %s", tmpdir) >= 0 && run(cmd) != 0)
		fprintf(stderr, "test_table_verify: could not remove %s\n", tmpdir);
	free(cmd);
}

int main(void)
{
	CHECK(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
	atexit(cleanup);

	expect_clean(LIBC, NULL);
	printf("  libc verifies clean\n");
	expect_clean("/proc/self/exe", NULL);
	printf("  this test program verifies clean\n");
	test_negative();
	test_debug_file();
	test_libc_debug_file();
	printf("test_table_verify: all passed\n");
	return 0;
}
