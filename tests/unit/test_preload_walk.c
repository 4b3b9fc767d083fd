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
 * fault (a fake stack between guard pages).  Every DWARF walk is made
 * again with the image's rule cache, emptied (cold) and filled (warm),
 * and must give exactly the same frames; two threads share one cache at
 * once; poisoned cache slots must be passed over, not used. */
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

/* The rule cache's memory: 4096 slots, as the library would give one;
 * the two-thread test takes the smallest cache too, for evictions. */
#define CACHE_BITS 12
static uint64_t cache_mem[1u << CACHE_BITS];
static struct walk_image self_cached; /* self_img with the cache */

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
	CHECK(self_img.cache == NULL, "a checked image came with a cache");
	self_cached = self_img;
	CHECK(walk_image_cache(&self_cached, cache_mem, sizeof(cache_mem)) == 1 << CACHE_BITS);
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
	/* the same walks with the cache: emptied, then filled by them */
	struct walk_frames cold, warm, bad_warm, cut_warm;
	/* with the memo: walked, then remembered; a return address it read
	 * changed (M_RA_AT: its word, -1: none found), and the start's rbp
	 * changed, each against walk_dwarf in the same state */
	struct walk_frames m_first, m_again, m_changed, m_changed_ref, m_bp, m_bp_ref;
	int m_ra_at;
};

/* One thread's memo at a time (points are taken one after another). */
static struct walk_memo memo;

/* Stores V in the stack word at ADDR, returning what it held: a live
 * frame's return address, put back before anything returns through it
 * (ASan's checks off: a stack word like the walk's reads). */
__attribute__((no_sanitize_address, noinline)) static uint64_t stack_poke(uint64_t addr, uint64_t v)
{
	volatile uint64_t *w = (volatile uint64_t *)(uintptr_t)addr;
	uint64_t old = *w;

	*w = v;
	return old;
}

/* The memo's walks of P (see struct point), made where P's frames are live. */
static void point_memo(struct point *p)
{
	const struct walk_memo_entry *e = NULL;
	struct walk_regs bp_regs = p->regs;
	uint32_t i, k;

	memset(&memo, 0, sizeof(memo));
	walk_dwarf_memo(&self_img, &p->regs, &p->b, &memo, &p->m_first);
	walk_dwarf_memo(&self_img, &p->regs, &p->b, &memo, &p->m_again);
	for (i = 0; i < WALK_MEMO_ENTRIES; i++)
		if (memo.e[i].pc0 == p->regs.pc && memo.e[i].sp0 == p->regs.sp)
			e = &memo.e[i];
	p->m_ra_at = -1;
	/* a word the walk read that holds one of its return addresses, in the
	 * middle of the stack: changed, the walk must be made again */
	for (k = e ? e->nwords / 2 : 0; e && k < e->nwords && p->m_ra_at < 0; k++)
		for (i = 1; i < p->dw.n; i++)
			if (e->val[k] == p->dw.pcs[i]) {
				uint64_t addr = p->regs.sp + e->off[k], old = stack_poke(addr, e->val[k] + 0x10);

				walk_dwarf(&self_img, &p->regs, &p->b, &p->m_changed_ref);
				walk_dwarf_memo(&self_img, &p->regs, &p->b, &memo, &p->m_changed);
				stack_poke(addr, old);
				p->m_ra_at = (int)k;
				break;
			}
	bp_regs.bp ^= 0x1000;
	walk_dwarf(&self_img, &bp_regs, &p->b, &p->m_bp_ref);
	walk_dwarf_memo(&self_img, &bp_regs, &p->b, &memo, &p->m_bp);
}

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
	CHECK(walk_image_cache(&self_cached, cache_mem, sizeof(cache_mem)) > 0); /* cold */
	walk_dwarf(&self_cached, &p->regs, &p->b, &p->cold);
	walk_dwarf(&self_cached, &p->regs, &p->b, &p->warm);
	walk_fp(&p->regs, &p->b, &p->fp);
	point_memo(p);
	/* the stack cut 64 bytes above the start: a read past it ends the walk */
	walk_dwarf(&self_img, &p->regs, &(struct walk_bounds){ p->b.lo, p->regs.sp + 64 }, &p->cut);
	walk_dwarf(&self_cached, &p->regs, &(struct walk_bounds){ p->b.lo, p->regs.sp + 64 }, &p->cut_warm);
	if (p->perturb >= 0 && (uint32_t)p->perturb < p->dw.n) {
		uint64_t pc = p->dw.pcs[p->perturb];
		struct unwind_rule *rule = image_rule_at(pc & DWLEAK_FRAME_EXACT ? pc_of(pc) : pc - 1);

		p->bad.n = 0;
		if (rule && (rule->cfa_type == UNWIND_CFA_RSP || rule->cfa_type == UNWIND_CFA_RBP)) {
			rule->cfa_off += 8;
			walk_dwarf(&self_img, &p->regs, &p->b, &p->bad);
			/* a slot names the rule, not a copy: the change is seen */
			walk_dwarf(&self_cached, &p->regs, &p->b, &p->bad_warm);
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

/* Whether two walks gave the same frames and end. */
static bool frames_same(const struct walk_frames *a, const struct walk_frames *b)
{
	return a->n == b->n && a->end == b->end && !memcmp(a->pcs, b->pcs, a->n * sizeof(a->pcs[0]));
}

/* The cached walks of a point are the uncached ones, the cold walk
 * searched and the warm one found (nearly) everything in the cache. */
static void point_check_cached(const struct point *p)
{
	EXPECT(frames_same(&p->cold, &p->dw), "%s: the cold cached walk differs", p->what);
	EXPECT(frames_same(&p->warm, &p->dw), "%s: the warm cached walk differs", p->what);
	EXPECT(frames_same(&p->cut_warm, &p->cut), "%s: the cut cached walk differs", p->what);
	EXPECT(p->dw.cache_misses == p->dw.n, "%s: without a cache %u of %u frames searched", p->what,
	       p->dw.cache_misses, p->dw.n);
	EXPECT(p->cold.cache_misses > 0 && p->warm.cache_misses < p->cold.cache_misses,
	       "%s: searched %u cold, %u warm", p->what, p->cold.cache_misses, p->warm.cache_misses);
	if (p->perturb >= 0 && p->bad.n)
		EXPECT(frames_same(&p->bad_warm, &p->bad), "%s: the perturbed cached walk differs", p->what);
	printf("%s: cached walks the same; rules searched: %u uncached, %u cold, %u warm\n", p->what,
	       p->dw.cache_misses, p->cold.cache_misses, p->warm.cache_misses);
}

/* The memo's walks of a point are walk_dwarf's in the same state: the
 * first made, the second remembered (when it can be), one whose return
 * address changed made again, one whose rbp changed the same frames. */
static void point_check_memo(const struct point *p)
{
	bool fits = p->dw.n <= WALK_MEMO_FRAMES;

	EXPECT(frames_same(&p->m_first, &p->dw) && !p->m_first.remembered, "%s: the memo's first walk", p->what);
	EXPECT(frames_same(&p->m_again, &p->dw), "%s: the remembered walk differs", p->what);
	EXPECT(p->m_again.remembered == fits, "%s: %u frames, remembered %u", p->what, p->dw.n, p->m_again.remembered);
	if (fits) {
		EXPECT(p->m_ra_at >= 0, "%s: no return address among the words the walk read", p->what);
		EXPECT(frames_same(&p->m_changed, &p->m_changed_ref) && !p->m_changed.remembered,
		       "%s: a return address changed: remembered %u, %u frames against %u", p->what,
		       p->m_changed.remembered, p->m_changed.n, p->m_changed_ref.n);
		EXPECT(!frames_same(&p->m_changed_ref, &p->dw), "%s: the changed word changed nothing", p->what);
	}
	EXPECT(frames_same(&p->m_bp, &p->m_bp_ref), "%s: rbp changed: the memo's walk differs", p->what);
	printf("%s: memo: walked, remembered %u, made again when word %d changed; rbp changed: remembered %u\n",
	       p->what, p->m_again.remembered, p->m_ra_at, p->m_bp.remembered);
}

/* The checks of one point: the DWARF walk is backtrace()'s, frame by
 * frame, to the outermost frame; perturbed, it differs; cut short, it
 * ends reading; with the cache, nothing changes. */
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
	point_check_cached(p);
	point_check_memo(p);
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

/* walk_dwarf over IMG into *F, and again with a cache given to a copy of
 * IMG, cold and warm: both must give *F's frames. */
static void walk_all(const struct walk_image *img, const struct walk_regs *regs, const struct walk_bounds *b,
		     struct walk_frames *f)
{
	struct walk_image c = *img;
	struct walk_frames cold, warm;

	walk_dwarf(img, regs, b, f);
	CHECK(walk_image_cache(&c, cache_mem, sizeof(cache_mem)) > 0);
	walk_dwarf(&c, regs, b, &cold);
	walk_dwarf(&c, regs, b, &warm);
	EXPECT(frames_same(&cold, f) && frames_same(&warm, f),
	       "a cached walk differs: %u frames end %u uncached, %u end %u cold, %u end %u warm", f->n, f->end, cold.n,
	       cold.end, warm.n, warm.end);
}

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
	walk_all(&img, &regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ && f.n == 17, "off the top: end %u after %u frames", f.end, f.n);
	/* a start below the bounds reads nothing */
	regs.sp = b.lo - 8;
	walk_all(&img, &regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ && f.n == 1, "below the bounds: end %u after %u frames", f.end, f.n);
	/* a last word straddling the top: 4 bytes in, 4 out */
	regs.sp = b.hi - 4;
	walk_all(&img, &regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ && f.n == 1, "straddling the top: end %u", f.end);
	free(blob);

	/* a signal frame near the top: its saved registers lie past it */
	blob = fake_image((struct unwind_rule){ .cfa_type = UNWIND_CFA_SIGNAL }, code, &len);
	CHECK(walk_image_check(blob, len, &img) == 0);
	regs = (struct walk_regs){ .pc = code + 1, .sp = b.hi - 64, .exact_pc = 1 };
	walk_all(&img, &regs, &b, &f);
	EXPECT(f.end == WALK_ERR_READ && f.n == 1, "a signal frame past the top: end %u", f.end);
	free(blob);

	/* CFA from a wild rbp */
	blob = fake_image((struct unwind_rule){ .cfa_off = 16, .cfa_type = UNWIND_CFA_DEREF_RBP }, code, &len);
	CHECK(walk_image_check(blob, len, &img) == 0);
	regs = (struct walk_regs){ .pc = code + 1, .sp = b.lo, .bp = 0xdead0000, .exact_pc = 1 };
	walk_all(&img, &regs, &b, &f);
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

/* --- The cache shared by threads, and poisoned ---------------------------- */

#define RACE_ROUNDS 20000

/* One thread of the race: at the top of its stack (a recursion or
 * qsort's comparator), the walk without a cache as the reference, then,
 * once both threads are there, RACE_ROUNDS walks with the shared cache,
 * each compared with it. */
struct racer {
	int qsort; /* the stack: qsort's comparator, or a recursion */
	int depth;
	const struct walk_image *img; /* with the shared cache */
	pthread_barrier_t *start;
	struct walk_frames ref;
	unsigned mismatches, misses;
	int err;
};

static void race_here(void *arg)
{
	struct racer *r = arg;
	struct walk_regs regs;
	struct walk_bounds b;
	struct walk_frames f;
	unsigned i;

	walk_regs_capture(&regs);
	r->err = walk_stack_bounds(regs.sp, &b);
	pthread_barrier_wait(r->start);
	if (r->err)
		return;
	walk_dwarf(&self_img, &regs, &b, &r->ref);
	for (i = 0; i < RACE_ROUNDS; i++) {
		walk_dwarf(r->img, &regs, &b, &f);
		r->mismatches += !frames_same(&f, &r->ref);
		r->misses += f.cache_misses;
	}
	asm volatile("" ::: "memory");
}

static void *race_main(void *arg)
{
	struct racer *r = arg;

	if (r->qsort)
		subject_qsort(r->depth, race_here, r);
	else
		subject_recurse(r->depth, race_here, r);
	return NULL;
}

/* Two threads walking at once with one cache of 2^BITS slots, the same
 * stack (SAME) or two different ones: no walk may differ from the
 * reference. */
static void race(uint32_t bits, bool same)
{
	struct walk_image img = self_img;
	struct racer r[2] = {
		{ .qsort = 0, .depth = 30 },
		{ .qsort = !same, .depth = same ? 30 : 7 },
	};
	pthread_barrier_t start;
	pthread_t t[2];
	int i;

	CHECK(walk_image_cache(&img, cache_mem, (size_t)8 << bits) == 1 << bits);
	CHECK(pthread_barrier_init(&start, NULL, 2) == 0);
	for (i = 0; i < 2; i++) {
		r[i].img = &img;
		r[i].start = &start;
		CHECK(pthread_create(&t[i], NULL, race_main, &r[i]) == 0);
	}
	for (i = 0; i < 2; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	pthread_barrier_destroy(&start);
	for (i = 0; i < 2; i++) {
		CHECK(r[i].err == 0, "stack bounds: %s", strerror(-r[i].err));
		EXPECT(r[i].ref.end == WALK_END_OK, "race: the reference walk ended %u", r[i].ref.end);
		EXPECT(r[i].mismatches == 0, "race, %u slots, %s stacks: thread %d's walk differed %u times of %u",
		       1u << bits, same ? "the same" : "different", i, r[i].mismatches, RACE_ROUNDS);
	}
	printf("race, %u slots, %s stacks (%u and %u frames): %u walks each, none differed; rules searched a walk: "
	       "%.2f, %.2f\n",
	       1u << bits, same ? "the same" : "different", r[0].ref.n, r[1].ref.n, RACE_ROUNDS,
	       (double)r[0].misses / RACE_ROUNDS, (double)r[1].misses / RACE_ROUNDS);
}

/* Each slot in use given table TABLE (-1: its own) and rule RULE (-1:
 * its own), in walk.h's layout. */
static void cache_poison(const struct walk_image *img, long table, long rule)
{
	uint32_t bits = img->cache_bits, i;

	for (i = 0; i < 1u << bits; i++) {
		uint64_t w = img->cache[i];

		if (!w)
			continue;
		if (table >= 0)
			w = (w & ~(((1ull << bits) - 1) << 16)) | (uint64_t)table << 16;
		if (rule >= 0)
			w = (w & ~0xffffull) | (uint64_t)rule;
		img->cache[i] = w;
	}
}

/* At the top of a recursion: a filled cache poisoned three ways (rule
 * and table indices out of range, every slot garbage) must give the
 * frames of the walk without it, searching them, and be written again. */
static void poison_here(void *arg)
{
	struct walk_image img = self_img;
	struct walk_regs regs;
	struct walk_bounds b;
	struct walk_frames ref, f;
	uint32_t i, maxrules = 0, cold;

	(void)arg;
	walk_regs_capture(&regs);
	CHECK(walk_stack_bounds(regs.sp, &b) == 0);
	walk_dwarf(&self_img, &regs, &b, &ref);
	CHECK(ref.end == WALK_END_OK);
	for (i = 0; i < self_img.ntables; i++)
		if (self_img.tables[i].nrules > maxrules)
			maxrules = self_img.tables[i].nrules;
	CHECK(maxrules <= 0xffff && self_img.ntables < 1u << CACHE_BITS, "no index out of range to poison with");
	CHECK(walk_image_cache(&img, cache_mem, sizeof(cache_mem)) > 0);
	walk_dwarf(&img, &regs, &b, &f);
	cold = f.cache_misses; /* each pc once: a recursion repeats its pcs */
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(frames_same(&f, &ref) && f.cache_misses < ref.n, "poison: the warm walk (%u searched)", f.cache_misses);

	cache_poison(&img, -1, 0xffff);
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(frames_same(&f, &ref) && f.cache_misses == cold, "poison: rule indices past nrules (%u searched, %u cold)",
	       f.cache_misses, cold);
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(frames_same(&f, &ref) && f.cache_misses < ref.n, "poison: not written again (%u searched)",
	       f.cache_misses);

	cache_poison(&img, (1l << CACHE_BITS) - 1, -1);
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(frames_same(&f, &ref) && f.cache_misses == cold, "poison: table indices past ntables (%u searched)",
	       f.cache_misses);

	/* garbage: a tag matches a pc by chance once in 2^35 */
	for (i = 0; i < 1u << CACHE_BITS; i++)
		img.cache[i] = (0x9e3779b97f4a7c15ull * (i + 1)) ^ 0xa5a5a5a5a5a5a5a5ull;
	walk_dwarf(&img, &regs, &b, &f);
	EXPECT(frames_same(&f, &ref), "poison: a cache of garbage changed the walk");
	printf("poisoned cache: %u frames (%u pcs), each out-of-range slot searched instead, then written again\n",
	       ref.n, cold);
	asm volatile("" ::: "memory");
}

static void check_cache(void)
{
	struct walk_image img = self_img;

	EXPECT(walk_image_cache(&img, (uint8_t *)cache_mem + 4, sizeof(cache_mem) - 8) == -EINVAL, "misaligned");
	EXPECT(walk_image_cache(&img, cache_mem, (8 << WALK_CACHE_MIN_BITS) - 8) == -EINVAL, "too small");
	EXPECT(walk_image_cache(&img, cache_mem, sizeof(cache_mem) - 8) == 1 << (CACHE_BITS - 1), "rounded down");
	EXPECT(walk_image_cache(&img, NULL, 0) == 0 && img.cache == NULL, "taken away");
	subject_recurse(20, poison_here, NULL);
	race(CACHE_BITS, true);
	race(CACHE_BITS, false);
	race(WALK_CACHE_MIN_BITS, true);
	race(WALK_CACHE_MIN_BITS, false);
}

int main(void)
{
	image_build();
	check_points();
	check_corrupt();
	check_bounds();
	check_cache();
	free(self_blob);
	free(self_maps);
	unwinder_free(self_u);
	return check_failures ? 1 : 0;
}
