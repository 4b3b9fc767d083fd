/* The preload library's walks (preload/walk.c) on this very process: at
 * points deep in -O2 code without frame pointers
 * (preload_walk_subject.c), under libc's qsort, in a signal handler
 * above libc and on a second thread, the test captures its registers,
 * walks with the unwind image of its own objects (tables compiled by
 * unwinder/ and tables/, put together by tables/table_image.c) and
 * compares frame by frame with glibc's backtrace(), which unwinds with
 * libgcc from the objects' .eh_frame: an independent oracle.  A rule
 * perturbed in the image must make them differ (or the comparison
 * proves nothing); corrupt images must be refused by walk_image_check;
 * reads past the stack's bounds end a walk with WALK_ERR_READ and never
 * fault (a fake stack between guard pages). */
#define _GNU_SOURCE
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "preload_walk_subject.h"
#include "proc_maps.h"
#include "table.h"
#include "table_image.h"
#include "unwinder.h"
#include "walk.h"

#define MAX_FRAMES DWLEAK_MAX_FRAMES

/* --- This process's image -------------------------------------------------- */

static struct unwinder *self_u;
static struct table_image_mapping *self_maps;
static size_t self_nmaps;
static void *self_blob;
static size_t self_len;
static struct walk_image self_img;

/* Compiles the tables of every object this process maps code of and puts
 * them into one image. */
static void image_build(void)
{
	struct proc_map *maps;
	size_t n, i;

	CHECK(unwinder_new(NULL, NULL, &self_u) == 0);
	CHECK(unwinder_add_process(self_u, getpid()) == 0);
	CHECK(proc_maps_read(getpid(), true, &maps, &n) == 0);
	self_maps = calloc(n, sizeof(*self_maps));
	CHECK(self_maps);
	for (i = 0; i < n; i++) {
		struct file_key key = { .dev = maps[i].dev, .ino = maps[i].ino };
		struct unwind_object *o = maps[i].ino ? unwinder_find(self_u, &key) : NULL;

		if (!o || o->error || !o->table)
			continue; /* the vdso, the vsyscall page */
		self_maps[self_nmaps++] = (struct table_image_mapping){
			.table = o->table,
			.start = maps[i].start,
			.end = maps[i].end,
			.bias = maps[i].start - unwind_object_elf_addr(o, maps[i].start, maps[i].offset, maps[i].start),
		};
	}
	proc_maps_free(maps, n);
	CHECK(table_image_build(self_maps, self_nmaps, &self_blob, &self_len) == 0);
	CHECK(walk_image_check(self_blob, self_len, &self_img) == 0);
	printf("image: %zu mappings, %u tables, %zu bytes\n", self_nmaps, self_img.ntables, self_len);
}

/* The rule the image gives runtime address LOOKUP, found through the
 * tables it was built from (the image copies their rules in order), for
 * the test to perturb; NULL when there is none. */
static struct unwind_rule *image_rule_at(uint64_t lookup)
{
	const struct table_image_mapping *in = NULL;
	const struct unwind_rule *r;
	uint32_t i;

	for (i = 0; i < self_nmaps && !in; i++)
		if (lookup >= self_maps[i].start && lookup < self_maps[i].end)
			in = &self_maps[i];
	if (!in || !(r = table_lookup(in->table, lookup - in->bias, NULL, NULL)))
		return NULL;
	for (i = 0; i < self_img.nmappings; i++)
		if (self_img.maps[i].start == in->start)
			return (struct unwind_rule *)(self_img.base + self_img.tables[self_img.maps[i].table].rules_off) +
			       (r - in->table->rules);
	return NULL;
}

/* --- A point: the registers, the oracle, the walks ------------------------- */

struct point {
	const char *what;
	int perturb; /* frame whose rule to perturb, -1: none */
	struct walk_regs regs;
	struct walk_bounds b;
	int bounds_err;
	void *bt[MAX_FRAMES];
	int nbt;
	struct walk_frames dw, fp, bad, cut;
};

static uint64_t pc_of(uint64_t pc)
{
	return pc & ~DWLEAK_FRAME_EXACT;
}

/* Captures, asks the oracle, walks: all while the frames above are live.
 * Not inlined, and with a frame pointer (the ASan build's flags): its
 * caller's frames are the ones compared. */
static __attribute__((noinline)) void point_here(void *arg)
{
	struct point *p = arg;

	walk_regs_capture(&p->regs);
	p->nbt = backtrace(p->bt, MAX_FRAMES);
	p->bounds_err = walk_stack_bounds(p->regs.sp, &p->b);
	if (p->bounds_err)
		return;
	walk_dwarf(&self_img, &p->regs, &p->b, &p->dw);
	walk_fp(&p->regs, &p->b, &p->fp);
	/* the stack cut 64 bytes above the start: a read past it ends the walk */
	walk_dwarf(&self_img, &p->regs, &(struct walk_bounds){ p->b.lo, p->regs.sp + 64 }, &p->cut);
	if (p->perturb >= 0 && (uint32_t)p->perturb < p->dw.n) {
		uint64_t pc = p->dw.pcs[p->perturb];
		struct unwind_rule *rule = image_rule_at(pc & DWLEAK_FRAME_EXACT ? pc_of(pc) : pc - 1);

		p->bad.n = 0;
		if (rule && (rule->cfa_type == UNWIND_CFA_RSP || rule->cfa_type == UNWIND_CFA_RBP)) {
			rule->cfa_off += 8;
			walk_dwarf(&self_img, &p->regs, &p->b, &p->bad);
			rule->cfa_off -= 8;
		}
	}
	asm volatile("" ::: "memory"); /* no tail call: the frame stays */
}

/* Where backtrace()'s frame 0, point_here, is in P->bt: past the frames
 * of backtrace() itself that it reports (ASan's interceptor calls the
 * real one), which are outside the test's own executable. */
static unsigned oracle_start(const struct point *p)
{
	uint64_t self = (uintptr_t)point_here;
	unsigned j;
	size_t i;

	for (i = 0; i < self_nmaps && !(self >= self_maps[i].start && self < self_maps[i].end); i++)
		;
	CHECK(i < self_nmaps, "the test's code is in no mapping of the image");
	for (j = 0; j < (unsigned)p->nbt; j++)
		if ((uintptr_t)p->bt[j] >= self_maps[i].start && (uintptr_t)p->bt[j] < self_maps[i].end)
			return j;
	CHECK(0, "%s: backtrace() has no frame in the test", p->what);
	return 0;
}

/* Frames where the walk and backtrace() differ, from frame 1 on (frame 0
 * is point_here itself, at two different calls), counting a frame only
 * one of them has (up to UPTO frames, 0: all); printed unless QUIET. */
static unsigned frames_differ(const struct walk_frames *f, const struct point *p, unsigned upto, bool quiet)
{
	unsigned i, j = oracle_start(p), nbt = (unsigned)p->nbt - j, n = f->n > nbt ? f->n : nbt, bad = 0;

	if (upto && n > upto)
		n = upto;
	for (i = 1; i < n; i++) {
		uint64_t ours = i < f->n ? pc_of(f->pcs[i]) : 0, theirs = i < nbt ? (uintptr_t)p->bt[j + i] : 0;
		bool same = ours == theirs;

		bad += !same;
		if (!quiet && (!same || getenv("VERBOSE")))
			printf("  #%-3u %c ours %#-14llx%s backtrace %#llx\n", i, same ? ' ' : '!', (unsigned long long)ours,
			       i < f->n && f->pcs[i] & DWLEAK_FRAME_EXACT ? "*" : " ", (unsigned long long)theirs);
	}
	return bad;
}

/* The checks of one point: the DWARF walk is backtrace()'s, frame by
 * frame, to the outermost frame; perturbed, it differs; cut short, it
 * ends reading. */
static void point_check(struct point *p, unsigned min_frames)
{
	CHECK(p->bounds_err == 0, "%s: stack bounds: %s", p->what, strerror(-p->bounds_err));
	EXPECT(p->regs.sp >= p->b.lo && p->regs.sp < p->b.hi, "%s: sp outside its stack", p->what);
	printf("%s: %u frames (end %u), backtrace %d; stack [%#llx, %#llx)\n", p->what, p->dw.n, p->dw.end, p->nbt,
	       (unsigned long long)p->b.lo, (unsigned long long)p->b.hi);
	EXPECT(frames_differ(&p->dw, p, 0, false) == 0, "%s: the walk and backtrace() differ", p->what);
	EXPECT(p->dw.end == WALK_END_OK, "%s: the walk ended %u", p->what, p->dw.end);
	EXPECT(p->dw.n >= min_frames, "%s: %u frames, want %u", p->what, p->dw.n, min_frames);
	EXPECT(p->cut.end == WALK_ERR_READ && p->cut.n < p->dw.n, "%s: cut short, the walk ended %u after %u frames",
	       p->what, p->cut.end, p->cut.n);
	if (p->perturb >= 0) {
		unsigned differ = frames_differ(&p->bad, p, 0, true);

		printf("%s: frame %d's rule perturbed: %u frames differ\n", p->what, p->perturb, differ);
		EXPECT(p->bad.n && differ > 0, "%s: a perturbed rule went unnoticed", p->what);
	}
}

/* --- The points ------------------------------------------------------------- */

static struct point sig_point;

static void on_usr1(int sig)
{
	(void)sig;
	point_here(&sig_point);
	asm volatile("" ::: "memory"); /* a frame of its own, not a jump */
}

/* Frame-pointer frames of the test's own build, for the FP walk. */
static __attribute__((noinline)) void fp_chain(int depth, struct point *p)
{
	if (depth > 0)
		fp_chain(depth - 1, p);
	else
		point_here(p);
	asm volatile("" ::: "memory");
}

static void *thread_main(void *arg)
{
	subject_recurse(30, point_here, arg);
	return NULL;
}

static void check_points(void)
{
	struct point deep = { .what = "-O2 recursion, 50 deep", .perturb = 10 };
	struct point qs = { .what = "qsort's comparator", .perturb = 2 };
	struct point th = { .what = "a thread, 30 deep", .perturb = 5 };
	struct point fp = { .what = "frame pointers", .perturb = -1 };
	struct sigaction sa = { .sa_handler = on_usr1 };
	pthread_t t;
	unsigned i;

	subject_recurse(50, point_here, &deep);
	point_check(&deep, 53);
	subject_qsort(5, point_here, &qs);
	point_check(&qs, 8);
	sig_point = (struct point){ .what = "a signal handler above raise()", .perturb = 8 };
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	subject_raise(20, SIGUSR1);
	point_check(&sig_point, 25);
	for (i = 0; i < sig_point.dw.n && !(sig_point.dw.pcs[i] & DWLEAK_FRAME_EXACT); i++)
		;
	EXPECT(i < sig_point.dw.n, "the walk crossed no signal frame");
	CHECK(pthread_create(&t, NULL, thread_main, &th) == 0 && pthread_join(t, NULL) == 0);
	point_check(&th, 33);
	EXPECT(th.b.lo != deep.b.lo, "the thread's stack is the main one's");

	/* the FP walk: as far as the chain of frame pointers goes */
	fp_chain(10, &fp);
	point_check(&fp, 12);
	printf("frame pointers: the FP walk %u frames (end %u)\n", fp.fp.n, fp.fp.end);
	EXPECT(fp.fp.n >= 12 && frames_differ(&fp.fp, &fp, 12, false) == 0,
	       "the FP walk differs from backtrace() in the frame-pointer frames");
}

/* --- Corrupt images ---------------------------------------------------------- */

/* A copy of the image with one change made by FN, checked; returns what
 * walk_image_check said. */
static int corrupt_check(void (*fn)(uint8_t *blob, size_t *len), size_t *len_out)
{
	uint8_t *copy = malloc(self_len);
	struct walk_image img;
	size_t len = self_len;
	int err;

	CHECK(copy);
	memcpy(copy, self_blob, self_len);
	fn(copy, &len);
	err = walk_image_check(copy, len, &img);
	if (len_out)
		*len_out = len;
	free(copy);
	return err;
}

#define HDR(b) ((struct unwind_image_header *)(b))
#define MAPS(b) ((struct unwind_image_mapping *)((b) + HDR(b)->mappings_off))
#define TABLES(b) ((struct unwind_image_table *)((b) + HDR(b)->tables_off))

static void bad_magic(uint8_t *b, size_t *len) { (void)len; HDR(b)->magic ^= 1; }
static void bad_version(uint8_t *b, size_t *len) { (void)len; HDR(b)->version++; }
static void bad_total(uint8_t *b, size_t *len) { (void)len; HDR(b)->total_bytes += 8; }
static void truncated(uint8_t *b, size_t *len) { (void)b; *len -= 8; }
static void maps_past(uint8_t *b, size_t *len) { HDR(b)->nmappings = (uint32_t)(*len / 32); }
static void maps_unaligned(uint8_t *b, size_t *len) { (void)len; HDR(b)->mappings_off += 4; }
static void maps_order(uint8_t *b, size_t *len) { (void)len; MAPS(b)[1].start = MAPS(b)[0].start; }
static void maps_table(uint8_t *b, size_t *len) { (void)len; MAPS(b)[0].table = HDR(b)->ntables; }
static void rows_past(uint8_t *b, size_t *len) { (void)len; TABLES(b)[0].rows_off = *len - 8; }
static void rules_huge(uint8_t *b, size_t *len) { (void)len; TABLES(b)[0].nrules = 0xffffffffu; }
static void page_rows(uint8_t *b, size_t *len)
{
	struct unwind_image_table *t = &TABLES(b)[0];
	struct unwind_page *pg = (struct unwind_page *)(b + t->pages_off);
	uint32_t i;

	(void)len;
	for (i = 0; i < t->npages && !pg[i].nrows; i++)
		;
	CHECK(i < t->npages);
	pg[i].nrows = t->nrows - pg[i].first_row + 1;
}
static void row_rule(uint8_t *b, size_t *len)
{
	struct unwind_image_table *t = &TABLES(b)[0];

	(void)len;
	CHECK(t->nrows);
	((struct unwind_row *)(b + t->rows_off))[t->nrows - 1].rule = (uint16_t)t->nrules;
}

static void check_corrupt(void)
{
	static const struct {
		const char *what;
		void (*fn)(uint8_t *, size_t *);
		int err;
	} cases[] = {
		{ "magic", bad_magic, -EPROTO },
		{ "version", bad_version, -EPROTO },
		{ "total bytes", bad_total, -EBADMSG },
		{ "truncated", truncated, -EBADMSG },
		{ "mappings past the end", maps_past, -EBADMSG },
		{ "mappings misaligned", maps_unaligned, -EBADMSG },
		{ "mappings out of order", maps_order, -EBADMSG },
		{ "a mapping's table", maps_table, -EBADMSG },
		{ "rows past the end", rows_past, -EBADMSG },
		{ "rules beyond counting", rules_huge, -EBADMSG },
		{ "a page's rows", page_rows, -EBADMSG },
		{ "a row's rule", row_rule, -EBADMSG },
	};
	struct walk_image img;
	struct table_image_mapping two[2];
	void *blob;
	size_t i, len;
	int err;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err = corrupt_check(cases[i].fn, &len);
		EXPECT(err == cases[i].err, "corrupt %s: walk_image_check gave %d, want %d", cases[i].what, err,
		       cases[i].err);
	}
	EXPECT(walk_image_check((uint8_t *)self_blob + 4, self_len - 4, &img) == -EINVAL, "a misaligned image");
	EXPECT(walk_image_check(self_blob, 16, &img) == -EINVAL, "an image shorter than its header");
	/* the builder refuses what the image could not say */
	two[0] = self_maps[0];
	two[1] = self_maps[0];
	two[1].start = two[0].end - 1;
	two[1].end = two[0].end + 4096;
	EXPECT(table_image_build(two, 2, &blob, &len) == -EINVAL, "overlapping mappings built");
	two[1].start = two[1].end;
	EXPECT(table_image_build(two, 2, &blob, &len) == -EINVAL, "an empty mapping built");
	two[1] = (struct table_image_mapping){ NULL, two[0].end, two[0].end + 4096, 0 };
	EXPECT(table_image_build(two, 2, &blob, &len) == -EINVAL, "a mapping without a table built");
	printf("corrupt images: %zu cases refused\n", sizeof(cases) / sizeof(cases[0]));
}

/* --- Reads past the bounds, on a fake stack between guard pages ---------- */

/* One table of one page whose code all has RULE, mapped at CODE. */
static void *fake_image(struct unwind_rule rule, uint64_t code, size_t *len)
{
	struct unwind_page page = { 0, 1 };
	struct unwind_row row = { 0, 0 };
	struct unwind_table t = { .first_page = 0, .npages = 1, .nrows = 1, .nrules = 1,
				  .pages = &page, .rows = &row, .rules = &rule };
	struct table_image_mapping m = { &t, code, code + UNWIND_PAGE_SIZE, code };
	void *blob;

	CHECK(table_image_build(&m, 1, &blob, len) == 0);
	return blob;
}

static void check_bounds(void)
{
	const uint64_t code = 0x400000;
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *m = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct walk_bounds b;
	struct walk_frames f;
	struct walk_image img;
	struct walk_regs regs;
	uint64_t *words, i;
	size_t len;
	void *blob;

	CHECK(m != MAP_FAILED);
	CHECK(mprotect(m, page, PROT_NONE) == 0 && mprotect(m + 2 * page, page, PROT_NONE) == 0);
	b = (struct walk_bounds){ (uintptr_t)(m + page), (uintptr_t)(m + 2 * page) };
	words = (uint64_t *)(m + page);
	for (i = 0; i < (uint64_t)page / 8; i++)
		words[i] = code + 16 + i; /* every word a return address into the code */

	/* CFA = rsp + 8 everywhere: the walk climbs a word a frame, off the top */
	blob = fake_image((struct unwind_rule){ .cfa_off = 8, .cfa_type = UNWIND_CFA_RSP }, code, &len);
	CHECK(walk_image_check(blob, len, &img) == 0);
	regs = (struct walk_regs){ .pc = code + 1, .sp = b.hi - 16 * 8, .exact_pc = 1 };
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ && f.n == 17, "off the top: end %u after %u frames", f.end, f.n);
	/* a start below the bounds reads nothing */
	regs.sp = b.lo - 8;
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ && f.n == 1, "below the bounds: end %u after %u frames", f.end, f.n);
	/* a last word straddling the top: 4 bytes in, 4 out */
	regs.sp = b.hi - 4;
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ && f.n == 1, "straddling the top: end %u", f.end);
	free(blob);

	/* a signal frame near the top: its saved registers lie past it */
	blob = fake_image((struct unwind_rule){ .cfa_type = UNWIND_CFA_SIGNAL }, code, &len);
	CHECK(walk_image_check(blob, len, &img) == 0);
	regs = (struct walk_regs){ .pc = code + 1, .sp = b.hi - 64, .exact_pc = 1 };
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ && f.n == 1, "a signal frame past the top: end %u", f.end);
	free(blob);

	/* CFA from a wild rbp */
	blob = fake_image((struct unwind_rule){ .cfa_off = 16, .cfa_type = UNWIND_CFA_DEREF_RBP }, code, &len);
	CHECK(walk_image_check(blob, len, &img) == 0);
	regs = (struct walk_regs){ .pc = code + 1, .sp = b.lo, .bp = 0xdead0000, .exact_pc = 1 };
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ, "a wild rbp: end %u", f.end);
	free(blob);

	/* the FP walk: a chain that leaves the bounds, and one that loops */
	words[0] = b.lo + 16;
	words[1] = code + 1;
	words[2] = b.hi + 4096; /* saved rbp past the top */
	words[3] = code + 2;
	regs = (struct walk_regs){ .pc = code, .sp = b.lo, .bp = b.lo };
	walk_fp(&regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ && f.n == 3, "FP walk out of bounds: end %u after %u", f.end, f.n);
	words[2] = b.lo;
	walk_fp(&regs, &b, &f);
	EXPECT(f.end == WALK_ERR_RBP_UNKNOWN && f.n == 3, "FP walk looping: end %u after %u", f.end, f.n);
	munmap(m, 3 * page);
	printf("bounds: every read past them ended the walk, none faulted\n");
}

int main(void)
{
	image_build();
	check_points();
	check_corrupt();
	check_bounds();
	free(self_blob);
	free(self_maps);
	unwinder_free(self_u);
	return check_failures ? 1 : 0;
}
