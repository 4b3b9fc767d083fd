/* Unit test for session/build.c, the report builder, with fake walks (no BPF,
 * no root): a stack_source that serves stored walks from a table here and
 * names each pc after itself.  Checks that frames come innermost first
 * with the right "return address" flag, how each kind of walk end is
 * said, the C++ allocator name, --sample-bytes estimates, --interval
 * growth, suppressions, --unwind both's FP frames and summary, each loss
 * on its own line, and merged stacks keeping their leak check kinds. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "build.h"
#include "check.h"

struct fake_walk {
	uint64_t id;
	uint32_t end;
	uint32_t n;
	uint64_t pcs[8];
};

/* Names: 0x100 -> "malloc", 0x200 -> "operator new(unsigned long)", 0x900
 * -> "_dl_start_user", any other pc -> "fn_<hex>"; frames of pcs at or
 * above 0xf000 have no symbol, those in [0xe000, 0xf000) no symbol and no
 * module (anonymous code). */
static const struct fake_walk walks[] = {
	{ 11, WALK_END_OK, 4, { 0x100, 0x200, 0x300, 0x400 } },
	{ 12, WALK_ERR_NO_FDE, 3, { 0x100, 0x500, 0x900 } },
	{ 13, WALK_ERR_NO_FDE, 2, { 0x100, 0x600 } },
	{ 14, WALK_END_TRUNCATED, 2, { 0x100, 0x700 | DWLEAK_FRAME_EXACT } },
	{ 15, WALK_ERR_READ, 2, { 0x100, 0xf100 } },
	{ 21, WALK_END_OK, 3, { 0x100, 0x200, 0x400 } }, /* an FP walk of 11 */
	{ 16, WALK_END_OK, 1, { 0x100 } },		   /* "complete" in malloc */
	{ 17, WALK_ERR_NO_MAPPING, 2, { 0x100, 0xa00 } },  /* the walker knew no mapping: /app's */
	{ 18, WALK_ERR_NO_MAPPING, 2, { 0x100, 0xe100 } }, /* ... nor does anyone: JIT code */
};

static char names[64][32];
static int return_flags[64]; /* per call of name_of: the flag it got */
static size_t ncalls;

static int walk_of(void *ctx, uint64_t id, struct stack_trace *out)
{
	size_t i;

	(void)ctx;
	for (i = 0; i < N(walks); i++) {
		if (walks[i].id != id)
			continue;
		memset(out, 0, sizeof(*out));
		out->nframes = walks[i].n;
		out->end = (uint8_t)walks[i].end;
		memcpy(out->pcs, walks[i].pcs, walks[i].n * sizeof(uint64_t));
		return 0;
	}
	return -ENOENT;
}

static int name_of(void *ctx, struct frame_arena *a, uint64_t pc, bool return_addr)
{
	struct report_frame frame = { 0 }, *f = &frame;
	size_t k = ncalls++ % N(names);

	(void)ctx;
	return_flags[k] = return_addr;
	f->address = pc;
	f->elf_address = pc;
	f->module = pc < 0x300 ? "/lib/libc.so.6" : "/app";
	if (pc >= 0xe000 && pc < 0xf000)
		f->module = NULL;
	if (pc == 0x100)
		snprintf(names[k], sizeof(names[k]), "malloc");
	else if (pc == 0x200)
		snprintf(names[k], sizeof(names[k]), "operator new(unsigned long)");
	else if (pc == 0x900)
		snprintf(names[k], sizeof(names[k]), "_dl_start_user");
	else
		snprintf(names[k], sizeof(names[k]), "fn_%llx", (unsigned long long)pc);
	f->function = pc >= 0xe000 ? NULL : names[k];
	return frame_arena_add_copies(a, f, 1);
}

static const struct stack_source src = { NULL, walk_of, name_of };

/* A report of one process's stacks T. */
static int build_one(const struct ledger_stacks *t, const struct build_opts *o, struct built *b)
{
	struct build_proc bp = { .pid = 42, .command = "./app", .stacks = t, .src = &src,
				 .state = REPORT_PROCESS_RUNNING };

	return build_report(&bp, 1, o, b);
}

static void stacks_add(struct ledger_stacks *t, uint64_t id, uint64_t fp_id, uint64_t bytes, uint64_t count,
		       uint32_t kind)
{
	size_t i;

	for (i = 0; i < t->cap && t->slots[i].count; i++)
		;
	CHECK(i < t->cap, "fake aggregate full");
	t->slots[i] = (struct ledger_stack){ .stack_id = id, .fp_stack_id = fp_id, .bytes = bytes, .count = count,
					     .est_bytes = (double)bytes * 1.5, .est_count = (double)count * 1.5,
					     .oldest_ts = 1000000000, .kind = kind };
	t->n++;
}

static const struct report_stack *stack_with(const struct report *r, const char *inner2)
{
	size_t i;

	for (i = 0; i < r->nstacks; i++)
		if (r->stacks[i].nframes > 1 && r->stacks[i].frames[1].function &&
		    !strcmp(r->stacks[i].frames[1].function, inner2))
			return &r->stacks[i];
	return NULL;
}

static struct build_opts opts_at(double now_s)
{
	return (struct build_opts){ .pid = 42, .command = "./app", .unwind_mode = UNWIND_MODE_DWARF,
				    .unwind_name = "dwarf", .now_s = now_s, .now_ns = (uint64_t)(now_s * 1e9),
				    .duration_s = 3 };
}

static void test_frames_and_ends(void)
{
	struct ledger_stack slot[16] = { 0 };
	struct ledger_stacks t = { slot, 16, 0 };
	struct build_opts o = opts_at(3.0);
	const struct report_stack *s;
	struct built b;

	stacks_add(&t, 11, 0, 400, 10, ALLOC_MALLOC);
	stacks_add(&t, 12, 0, 10, 1, ALLOC_MALLOC);
	stacks_add(&t, 13, 0, 20, 2, ALLOC_CALLOC);
	stacks_add(&t, 14, 0, 30, 3, ALLOC_MALLOC);
	stacks_add(&t, 15, 0, 50, 5, ALLOC_MALLOC);
	stacks_add(&t, DWLEAK_STACK_WALKER_BUSY, 0, 60, 6, ALLOC_MALLOC);
	stacks_add(&t, 99, 0, 70, 7, ALLOC_MALLOC); /* not in the source: lost by dwleak */
	stacks_add(&t, 16, 0, 80, 8, ALLOC_MALLOC);
	stacks_add(&t, DWLEAK_STACK_NOT_STORED, 0, 90, 9, ALLOC_MALLOC);
	ncalls = 0;
	CHECK(build_one(&t, &o, &b) == 0);
	EXPECT(b.r.nstacks == 9, "%zu stacks", b.r.nstacks);
	EXPECT(b.r.pid == 42 && !strcmp(b.r.command, "./app") && !strcmp(b.r.unwind, "dwarf"));
	EXPECT(b.r.totals.outstanding_bytes == 810, "%llu bytes", (unsigned long long)b.r.totals.outstanding_bytes);
	EXPECT(b.r.totals.outstanding_allocations == 51);
	/* each on a line of its own, with its process and its bytes */
	CHECK(b.r.nlosses == 2, "%zu loss lines", b.r.nlosses);
	EXPECT(!strcmp(b.r.losses[0].what, "stacks_map_full") && b.r.losses[0].pid == 42 &&
		       b.r.losses[0].count == 9 && b.r.losses[0].bytes == 90 &&
		       strstr(b.r.losses[0].text, "9 allocations (90 bytes) of pid 42 (./app) were recorded without a "
						  "stack: the stacks map was full"),
	       "%s", b.r.losses[0].text);
	EXPECT(!strcmp(b.r.losses[1].what, "stack_missing") && b.r.losses[1].count == 7 &&
		       b.r.losses[1].bytes == 70, "%s", b.r.losses[1].text);
	EXPECT(b.r.totals.dropped_events == 0, "an unstored stack is no dropped event");

	s = stack_with(&b.r, "operator new(unsigned long)");
	CHECK(s, "the C++ stack is missing");
	EXPECT(s->nframes == 4 && !strcmp(s->frames[0].function, "malloc") &&
	       !strcmp(s->frames[3].function, "fn_400"), "frames innermost first");
	EXPECT(!strcmp(s->allocator, "operator new"), "malloc under operator new is C++'s: %s", s->allocator);
	EXPECT(!s->unwind_error && !s->truncated, "complete walk");
	EXPECT(fabs(s->oldest_age_s - 2.0) < 1e-9, "oldest %f s", s->oldest_age_s);
	EXPECT(isnan(s->growth_bytes_per_s), "no growth without --interval");
	/* the first frame is the allocator's entry, the rest return addresses */
	EXPECT(!return_flags[0] && return_flags[1] && return_flags[3]);

	s = stack_with(&b.r, "fn_500");
	CHECK(s);
	EXPECT(!s->unwind_error, "a walk ending in _dl_start_user (no CFI) is complete: %s",
	       s->unwind_error ? s->unwind_error : "");
	s = stack_with(&b.r, "fn_600");
	CHECK(s);
	EXPECT(s->unwind_error && strstr(s->unwind_error, "no CFI"), "no FDE: %s",
	       s->unwind_error ? s->unwind_error : "(none)");
	EXPECT(!strcmp(s->allocator, "calloc"));
	s = stack_with(&b.r, "fn_700");
	CHECK(s);
	EXPECT(s->truncated && !s->unwind_error, "truncated");
	EXPECT(b.r.totals.truncated_stacks == 1, "%llu truncated", (unsigned long long)b.r.totals.truncated_stacks);
	/* a walk a table ended in the allocator's frame is an error (issue 13:
	 * a planted table must not pass for complete stacks) */
	s = NULL;
	for (size_t i = 0; i < b.r.nstacks; i++)
		if (b.r.stacks[i].bytes == 80)
			s = &b.r.stacks[i];
	CHECK(s);
	EXPECT(s->nframes == 1 && s->unwind_error && strstr(s->unwind_error, "allocator's own frame"),
	       "a walk complete in malloc: %s", s->unwind_error ? s->unwind_error : "(no error)");
	/* read error, walker busy, lost, ended in malloc, not stored */
	EXPECT(b.r.totals.unwind_errors == 6, "%llu unwind errors", (unsigned long long)b.r.totals.unwind_errors);
	build_free(&b);
}

/* A walk that found no mapping at a pc the report places in an object
 * (mapped after the walker's view of the process was made: the preload
 * library's image is handed over a moment after a dlopen) lacked that
 * object's table; only a pc in no object is JIT or anonymous code. */
static void test_no_mapping_ends(void)
{
	struct ledger_stack slot[4] = { 0 };
	struct ledger_stacks t = { slot, 4, 0 };
	struct build_opts o = opts_at(3.0);
	const struct report_stack *s;
	struct built b;

	stacks_add(&t, 17, 0, 24, 1, ALLOC_MALLOC);
	stacks_add(&t, 18, 0, 48, 2, ALLOC_MALLOC);
	ncalls = 0;
	CHECK(build_one(&t, &o, &b) == 0);
	s = stack_with(&b.r, "fn_a00");
	CHECK(s, "the stack into /app is missing");
	EXPECT(s->unwind_error && !strcmp(s->unwind_error, "no unwind table for this object"),
	       "a pc in /app the walker had no mapping for: %s", s->unwind_error ? s->unwind_error : "(none)");
	s = NULL;
	for (size_t i = 0; i < b.r.nstacks; i++)
		if (b.r.stacks[i].bytes == 48)
			s = &b.r.stacks[i];
	CHECK(s);
	EXPECT(s->unwind_error && strstr(s->unwind_error, "no file-backed mapping"),
	       "a pc in no object: %s", s->unwind_error ? s->unwind_error : "(none)");
	build_free(&b);
}

/* An exact frame (signal trampoline, code a signal interrupted) is named
 * as is, not as a return address. */
static void test_exact_frames(void)
{
	struct ledger_stack slot[4] = { 0 };
	struct ledger_stacks t = { slot, 4, 0 };
	struct build_opts o = opts_at(1.0);
	struct built b;

	stacks_add(&t, 14, 0, 30, 3, ALLOC_MALLOC);
	ncalls = 0;
	CHECK(build_one(&t, &o, &b) == 0);
	EXPECT(ncalls == 2 && !return_flags[1], "the exact pc named as is");
	EXPECT(b.r.stacks[0].frames[1].address == 0x700, "the exact bit is not part of the address");
	build_free(&b);
}

static void test_estimates_growth_suppressions(void)
{
	struct ledger_stack slot[8] = { 0 };
	struct ledger_stacks t = { slot, 8, 0 };
	struct build_opts o = opts_at(10.0);
	struct suppressions supp = { 0 };
	struct growth g = { 0 };
	const struct report_stack *s;
	struct built b;
	char *err = NULL;

	stacks_add(&t, 11, 0, 400, 10, ALLOC_MALLOC);
	stacks_add(&t, 13, 0, 20, 2, ALLOC_CALLOC);
	CHECK(suppressions_parse(&supp, "# the fn_600 cache\nfun:malloc\nfun:fn_600\n", "test.supp", &err) == 0,
	      "%s", err ? err : "");
	o.supp = &supp;
	o.growth = &g;
	o.sample_bytes = 4096;
	CHECK(build_one(&t, &o, &b) == 0);
	EXPECT(b.r.nstacks == 1, "one stack suppressed: %zu left", b.r.nstacks);
	EXPECT(b.r.nsuppressed == 1 && b.r.suppressed[0].bytes == 30 && b.r.suppressed[0].stacks == 1,
	       "the rule counts the estimate of what it left out");
	s = &b.r.stacks[0];
	EXPECT(s->bytes == 600 && s->allocations == 15, "estimates %llu B in %llu", (unsigned long long)s->bytes,
	       (unsigned long long)s->allocations);
	EXPECT(b.r.sample_bytes == 4096);
	EXPECT(isnan(s->growth_bytes_per_s), "no growth at the first report");
	build_free(&b);

	/* two seconds later stack 11 has 1000 bytes, estimated 1500: its
	 * growth is in the report's bytes, the estimates, 600 -> 1500: 450 B/s
	 * (the sampled bytes would say 300) */
	slot[0].bytes = 1000;
	slot[0].est_bytes = 1500;
	o = opts_at(12.0);
	o.growth = &g;
	o.sample_bytes = 4096;
	CHECK(build_one(&t, &o, &b) == 0);
	s = stack_with(&b.r, "operator new(unsigned long)");
	CHECK(s);
	EXPECT(fabs(s->growth_bytes_per_s - 450.0) < 1e-9, "growth %f B/s", s->growth_bytes_per_s);
	build_free(&b);
	growth_free(&g);
	suppressions_free(&supp);
}

static void test_fp_both(void)
{
	struct ledger_stack slot[4] = { 0 };
	struct ledger_stacks t = { slot, 4, 0 };
	struct build_opts o = opts_at(1.0);
	uint64_t counters[CNT_COUNT] = { 0 };
	const struct report_stack *s;
	struct built b;

	o.unwind_mode = UNWIND_MODE_BOTH;
	o.unwind_name = "both";
	o.counters = counters;
	o.lost_records = 2;
	counters[CNT_RING_FULL] = 3;
	counters[CNT_STACKS_FULL] = 5;
	stacks_add(&t, 11, 21, 400, 10, ALLOC_MALLOC);
	CHECK(build_one(&t, &o, &b) == 0);
	s = &b.r.stacks[0];
	EXPECT(s->nframes == 4 && s->nfp_frames == 3, "%zu DWARF and %zu FP frames", s->nframes, s->nfp_frames);
	EXPECT(s->fp_complete);
	EXPECT(s->fp_divergence == 2, "the FP walk lacks frame 2 (fn_300): %ld", s->fp_divergence);
	EXPECT(b.r.fp && b.r.fp->stacks == 1 && b.r.fp->agreeing == 0 && b.r.fp->frames_lost == 1);
	/* records lost are dropped events (3 + 2); unstored walks are not */
	EXPECT(b.r.totals.dropped_events == 5, "dropped %llu", (unsigned long long)b.r.totals.dropped_events);
	CHECK(b.r.nlosses == 2, "%zu loss lines", b.r.nlosses);
	EXPECT(!strcmp(b.r.losses[0].what, "alloc_events_lost") && b.r.losses[0].count == 3 && !b.r.losses[0].pid);
	EXPECT(!strcmp(b.r.losses[1].what, "stacks_map_full") && b.r.losses[1].count == 5 && !b.r.losses[1].pid &&
		       strstr(b.r.losses[1].text, "5 walks could not store their stack: the stacks map was full"), "%s",
	       b.r.losses[1].text);
	build_free(&b);
}

/* Stacks that read the same once built (two walks with no frames, both
 * lost) are merged, and so are their leak check kinds and residency: left
 * out, the second's blocks read as "not classified". */
static void test_merge_kinds(void)
{
	struct ledger_stack slot[4] = { 0 };
	struct ledger_stacks t = { slot, 4, 0 };
	struct build_opts o = opts_at(1.0);
	const struct report_stack *s;
	uint64_t counters[CNT_COUNT] = { 0 };
	struct built b;
	size_t i, k;

	o.leak_check = true;
	o.counters = counters;
	o.tables_dropped = 2;
	o.procs_without_table = 3;
	o.mappings_unrecorded = 4;
	counters[CNT_MAPPINGS_FULL] = 1;
	stacks_add(&t, 98, 0, 48, 1, ALLOC_MALLOC);
	stacks_add(&t, 99, 0, 96, 2, ALLOC_MALLOC);
	for (i = 0; i < 2; i++) {
		slot[i].checked = true;
		slot[i].leak_bytes[LEAK_DEFINITELY_LOST] = 48;
		slot[i].leak_count[LEAK_DEFINITELY_LOST] = 1;
		slot[i].resident = 48;
	}
	slot[1].leak_bytes[LEAK_REACHABLE] = 48;
	slot[1].leak_count[LEAK_REACHABLE] = 1;
	slot[1].resident = 96;
	CHECK(build_one(&t, &o, &b) == 0);
	CHECK(b.r.nstacks == 1, "%zu stacks: the two should merge", b.r.nstacks);
	s = &b.r.stacks[0];
	EXPECT(s->bytes == 144 && s->allocations == 3 && s->has_residency && s->residency.resident == 144);
	for (k = 0; k < REPORT_LEAK_KIND_COUNT; k++) {
		const char *name = report_leak_kind_names[k];
		uint64_t want = !strcmp(name, "definitely_lost") ? 96 : !strcmp(name, "reachable") ? 48 : 0;

		EXPECT(s->leak_kinds[k].bytes == want, "%s: %llu bytes, want %llu", name,
		       (unsigned long long)s->leak_kinds[k].bytes, (unsigned long long)want);
	}
	/* the user side's limits, each a line */
	CHECK(b.r.nlosses == 4, "%zu loss lines", b.r.nlosses);
	EXPECT(!strcmp(b.r.losses[0].what, "mappings_map_full") && b.r.losses[0].count == 5);
	EXPECT(!strcmp(b.r.losses[1].what, "tables_dropped") && b.r.losses[1].count == 2);
	EXPECT(!strcmp(b.r.losses[2].what, "proc_slots_full") && b.r.losses[2].count == 3);
	EXPECT(!strcmp(b.r.losses[3].what, "stack_missing") && b.r.losses[3].pid == 42 && b.r.losses[3].count == 3);
	build_free(&b);
}

int main(void)
{
	test_frames_and_ends();
	test_no_mapping_ends();
	test_exact_frames();
	test_estimates_growth_suppressions();
	test_fp_both();
	test_merge_kinds();
	return check_status();
}
