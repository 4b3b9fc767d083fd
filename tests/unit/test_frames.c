/* Unit tests for report/frames.c: the frames of one pc of the real seed_O2
 * (built by make testdata) against addr2line as the oracle, for an address
 * inside an inlined call and a plain one; the nameless frames of an object
 * without the symbol or that cannot be read and of a pc in no object; and
 * the spans that point stacks into the arena after it grew. */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "frames.h"
#include "symbolize.h"

#define LOAD_BIAS 0x555555554000ull /* where the tests pretend the object is mapped */
#define MAX_CHAIN 8                  /* longer inline chains than seed_O2 has */

static const char *testdata;

/* What `addr2line -f -i -C -e OBJ ADDR` says: one row a frame. */
struct oracle {
	char *function[MAX_CHAIN]; /* NULL for "??" */
	char *file[MAX_CHAIN];     /* base name, NULL for "??" */
	int line[MAX_CHAIN];       /* 0 for "?" */
	size_t n;
};

static void oracle_free(struct oracle *o)
{
	for (size_t i = 0; i < o->n; i++) {
		free(o->function[i]);
		free(o->file[i]);
	}
	o->n = 0;
}

/* Asks addr2line about ADDR of OBJ; its output comes in pairs of lines,
 * the function then "file:line" (maybe with " (discriminator N)"). */
static void oracle_ask(const char *obj, uint64_t addr, struct oracle *o)
{
	char *cmd, fn[4096], pos[4096];
	FILE *p;

	memset(o, 0, sizeof(*o));
	CHECK(asprintf(&cmd, "addr2line -f -i -C -e '%s' 0x%" PRIx64, obj, addr) > 0);
	p = popen(cmd, "r");
	CHECK(p, "%s", cmd);
	while (o->n < MAX_CHAIN && fgets(fn, sizeof(fn), p) && fgets(pos, sizeof(pos), p)) {
		char *colon, *slash;

		fn[strcspn(fn, "\n")] = 0;
		pos[strcspn(pos, " \n")] = 0;
		colon = strrchr(pos, ':');
		CHECK(colon, "addr2line said '%s'", pos);
		*colon = 0;
		slash = strrchr(pos, '/');
		o->function[o->n] = strcmp(fn, "??") ? strdup(fn) : NULL;
		o->file[o->n] = strcmp(pos, "??") ? strdup(slash ? slash + 1 : pos) : NULL;
		o->line[o->n++] = atoi(colon + 1);
	}
	CHECK(pclose(p) == 0, "%s", cmd);
	free(cmd);
}

static bool str_same(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static const char *base_of(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

/* The first address in [START, END) of OBJ whose chain addr2line gives
 * INLINED (two or more frames, the inner one named other than the physical
 * function: see binutils_quirk() in test_symbolize.c) or plain (one named
 * frame with a line). */
static uint64_t address_find(const char *obj, uint64_t start, uint64_t end, bool inlined,
			     struct oracle *o)
{
	for (uint64_t addr = start; addr < end; addr++) {
		oracle_ask(obj, addr, o);
		if (inlined && o->n >= 2 && o->function[0] &&
		    !str_same(o->function[0], o->function[o->n - 1]))
			return addr;
		if (!inlined && o->n == 1 && o->function[0] && o->line[0] > 0)
			return addr;
		oracle_free(o);
	}
	CHECK(0, "no %s address in %s [0x%" PRIx64 ", 0x%" PRIx64 ")", inlined ? "inlined" : "plain",
	      obj, start, end);
	return 0;
}

/* The start and end of function NAME in OBJ, from nm. */
static void function_range(const char *obj, const char *name, uint64_t *start, uint64_t *end)
{
	char *cmd, line[4096];
	unsigned long long a = 0, size = 0;
	FILE *p;

	CHECK(asprintf(&cmd, "nm -S --defined-only '%s' | awk '$4 == \"%s\" { print $1, $2 }'", obj,
		       name) > 0);
	p = popen(cmd, "r");
	CHECK(p && fgets(line, sizeof(line), p) && sscanf(line, "%llx %llx", &a, &size) == 2,
	      "%s", cmd);
	pclose(p);
	free(cmd);
	*start = a;
	*end = a + size;
}

/* The frames SPAN of A for one pc must be what the oracle O says, each with
 * the pc's addresses, module and build id (the very pointers given). */
static void expect_frames(const struct frame_arena *a, struct frame_span span, const struct oracle *o,
			  uint64_t elf, const char *module, const char *build_id, uint64_t offset)
{
	const struct report_frame *f = frame_span_frames(a, span);

	EXPECT(span.n == o->n, "0x%" PRIx64 ": %zu frames, addr2line %zu", elf, span.n, o->n);
	for (size_t i = 0; f && i < span.n && i < o->n; i++) {
		EXPECT(str_same(f[i].function, o->function[i]), "0x%" PRIx64 "[%zu]: %s, addr2line %s",
		       elf, i, f[i].function, o->function[i]);
		EXPECT(str_same(base_of(f[i].file), o->file[i]), "0x%" PRIx64 "[%zu]: %s, addr2line %s",
		       elf, i, f[i].file, o->file[i]);
		EXPECT(f[i].line == o->line[i], "0x%" PRIx64 "[%zu]: line %d, addr2line %d", elf, i,
		       f[i].line, o->line[i]);
		EXPECT(f[i].inlined == (i + 1 < span.n), "0x%" PRIx64 "[%zu]: inlined %d", elf, i,
		       f[i].inlined);
		EXPECT(f[i].address == elf + LOAD_BIAS && f[i].elf_address == elf);
		EXPECT(f[i].module == module && f[i].build_id == build_id, "borrowed, not copied");
		EXPECT(f[i].offset == offset, "0x%" PRIx64 "[%zu]: offset 0x%" PRIx64 ", want 0x%" PRIx64,
		       elf, i, f[i].offset, offset);
	}
}

/* One pc after another into one arena: inlined, plain, a return address,
 * through the path and through an fd under another name. */
static void test_named(struct symbolizer *sym)
{
	static const char build_id[] = "0123abcd"; /* any string: the arena only borrows it */
	struct frame_arena a = { 0 };
	struct frame_span inl, plain, ret, by_fd;
	struct oracle oi, op;
	uint64_t main_start, main_end, ai, ap;
	char *obj;
	int fd;

	CHECK(asprintf(&obj, "%s/seed_O2", testdata) > 0);
	function_range(obj, "main", &main_start, &main_end);
	ai = address_find(obj, main_start, main_end, true, &oi);
	ap = address_find(obj, main_start, main_end, false, &op);
	printf("seed_O2 main: inlined chain of %zu at 0x%" PRIx64 " (%s in %s), plain 0x%" PRIx64 "\n",
	       oi.n, ai, oi.function[0], oi.function[oi.n - 1], ap);

	inl = frame_span_start(&a);
	CHECK(frame_arena_add_pc(&a, sym, obj, -1, build_id, ai + LOAD_BIAS, ai, false) == 0);
	frame_span_end(&a, &inl);
	plain = frame_span_start(&a);
	CHECK(frame_arena_add_pc(&a, sym, obj, -1, NULL, ap + LOAD_BIAS, ap, false) == 0);
	frame_span_end(&a, &plain);
	/* a return address one past AP is named as the call at AP, its offset its own */
	ret = frame_span_start(&a);
	CHECK(frame_arena_add_pc(&a, sym, obj, -1, NULL, ap + 1 + LOAD_BIAS, ap + 1, true) == 0);
	frame_span_end(&a, &ret);
	/* the trace's case: the bytes through an fd, the name a path that is gone */
	fd = open(obj, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	by_fd = frame_span_start(&a);
	CHECK(frame_arena_add_pc(&a, sym, "/gone/seed_O2", fd, build_id, ai + LOAD_BIAS, ai, false) == 0);
	frame_span_end(&a, &by_fd);
	close(fd);

	expect_frames(&a, inl, &oi, ai, obj, build_id, ai - main_start);
	expect_frames(&a, plain, &op, ap, obj, NULL, ap - main_start);
	EXPECT(ret.n == op.n && ret.n == 1, "return address: %zu frames", ret.n);
	if (ret.n == 1) {
		const struct report_frame *f = frame_span_frames(&a, ret);

		EXPECT(str_same(f->function, op.function[0]) && f->line == op.line[0],
		       "return address named %s:%d, want %s:%d", f->function, f->line, op.function[0],
		       op.line[0]);
		EXPECT(f->offset == ap + 1 - main_start && f->elf_address == ap + 1);
	}
	expect_frames(&a, by_fd, &oi, ai, "/gone/seed_O2", build_id, ai - main_start);
	EXPECT(frame_span_frames(&a, by_fd)->module != obj);
	oracle_free(&oi);
	oracle_free(&op);
	frame_arena_free(&a);
	free(obj);
}

/* Frames without a name: an object that lacks the symbol, one that cannot
 * be read, and a pc in no object. */
static void test_nameless(struct symbolizer *sym)
{
	struct frame_arena a = { 0 };
	const struct report_frame *f;
	uint64_t main_start, main_end;
	char *full, *stripped;

	CHECK(asprintf(&full, "%s/seed_O2", testdata) > 0);
	CHECK(asprintf(&stripped, "%s/seed_O2_nodebug", testdata) > 0);
	function_range(full, "main", &main_start, &main_end);
	CHECK(frame_arena_add_pc(&a, sym, stripped, -1, "bid", main_start + 4 + LOAD_BIAS,
				 main_start + 4, false) == 0);
	CHECK(frame_arena_add_pc(&a, sym, "/nonexistent/libgone.so", -1, NULL, 0x7f0000001234,
				 0x1234, true) == 0);
	CHECK(frame_arena_add_pc(&a, sym, NULL, -1, "ignored", 0x7ffd0000beef, 0x42, true) == 0);
	CHECK(a.nframes == 3, "%zu frames", a.nframes);
	f = a.frames;
	EXPECT(!f[0].function && !f[0].file && !f[0].line && !f[0].inlined, "%s", f[0].function);
	EXPECT(f[0].module == stripped && !strcmp(f[0].build_id, "bid") &&
	       f[0].elf_address == main_start + 4 && f[0].address == main_start + 4 + LOAD_BIAS);
	EXPECT(!f[1].function && !strcmp(f[1].module, "/nonexistent/libgone.so") &&
	       f[1].elf_address == 0x1234 && f[1].address == 0x7f0000001234 && !f[1].build_id);
	EXPECT(!f[2].function && !f[2].module && !f[2].build_id && !f[2].file,
	       "no module: only the address");
	EXPECT(f[2].address == 0x7ffd0000beef && f[2].elf_address == 0x7ffd0000beef,
	       "no module: elf_address 0x%" PRIx64 " is the address", f[2].elf_address);
	frame_arena_free(&a);
	frame_arena_free(&a); /* freed twice: empty the second time */
	frame_arena_free(NULL);
	free(full);
	free(stripped);
}

/* Spans keep pointing at the right frames after the array moved, and copies
 * and taken-over names land where they should. */
static void test_spans(void)
{
	struct frame_arena a = { 0 };
	struct frame_span first, empty, last;
	struct report_frame src[3] = {
		{ .address = 1, .function = "one" },
		{ .address = 2, .function = "two", .inlined = true },
		{ .address = 2, .function = "three" },
	};
	struct sym_frame *names = calloc(2, sizeof(*names));

	CHECK(names);
	names[0] = (struct sym_frame){ strdup("inner()"), 5, strdup("a.c"), 3, true, strdup("_Z5innerv") };
	names[1] = (struct sym_frame){ strdup("outer"), 5, NULL, 0, false, NULL };
	first = frame_span_start(&a);
	CHECK(frame_arena_add_copies(&a, src, 3) == 0);
	frame_span_end(&a, &first);
	empty = frame_span_start(&a);
	frame_span_end(&a, &empty);
	for (int i = 0; i < 1000; i++) /* grows the array many times over */
		CHECK(frame_arena_add_copies(&a, src, 1) == 0);
	last = frame_span_start(&a);
	CHECK(frame_arena_add_names(&a, "/m", "id", 0x10, 0x20, names, 2) == 0);
	frame_span_end(&a, &last);

	EXPECT(first.first == 0 && first.n == 3 && empty.n == 0 && last.first == 1003 && last.n == 2);
	EXPECT(frame_span_frames(&a, empty) == NULL);
	EXPECT(!strcmp(frame_span_frames(&a, first)[1].function, "two") &&
	       frame_span_frames(&a, first)[1].inlined);
	EXPECT(frame_span_frames(&a, last)[0].function == names[0].function &&
	       !strcmp(frame_span_frames(&a, last)[0].file, "a.c") &&
	       frame_span_frames(&a, last)[1].line == 0 && !frame_span_frames(&a, last)[1].inlined);
	/* the raw name when it differs, else the function's own */
	EXPECT(frame_span_frames(&a, last)[0].symbol == names[0].symbol &&
	       frame_span_frames(&a, last)[1].symbol == names[1].function);
	EXPECT(frame_span_frames(&a, last)[1].address == 0x10 &&
	       frame_span_frames(&a, last)[1].elf_address == 0x20);
	CHECK(frame_arena_add_names(&a, "/m", NULL, 0x30, 0x40, NULL, 0) == 0);
	EXPECT(a.nframes == 1006 && !a.frames[1005].function && a.frames[1005].elf_address == 0x40);
	frame_arena_free(&a); /* frees NAMES: LeakSanitizer checks */
}

int main(void)
{
	struct symbolizer *sym;
	char *probe;

	testdata = getenv("TESTDATA");
	if (!testdata)
		testdata = "build/testdata";
	CHECK(asprintf(&probe, "%s/seed_O2", testdata) > 0);
	CHECK(access(probe, R_OK) == 0, "%s: run make testdata", probe);
	free(probe);
	CHECK(system("addr2line --version >/dev/null 2>&1") == 0, "addr2line (binutils) is needed");
	CHECK(symbolizer_new(NULL, &sym) == 0);
	test_named(sym);
	test_nameless(sym);
	test_spans();
	symbolizer_free(sym);
	if (check_failures)
		return check_status();
	printf("test_frames: ok\n");
	return 0;
}
