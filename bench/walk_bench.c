/* What a stack walk made in the process costs (issue 24: the preload
 * library walking at a traced allocation, preload/walk.c compiled with
 * the library's flags): ns per walk and per frame, DWARF (over the unwind
 * image of this process's own objects, tables compiled by unwinder/) and
 * frame pointers, at stacks of typical depths, next to malloc(64)+free
 * in the same run.  Each walk is what the library would do at a site:
 * the registers captured, the thread's stack bounds (cached per thread),
 * the walk.  The DWARF walk three ways: without the image's rule cache
 * (dwarf: every rule searched), with it emptied of the walk's entries
 * before each walk (dwarf-cold: searched and written; the emptying, a
 * store a frame, is timed too) and with it holding them (dwarf-warm: a
 * process's usual case, its allocation sites walked again and again);
 * and behind the thread's memo of whole walks (dwarf-memo: the walk
 * repeated, each word it read loaded and compared).
 *
 *   fp D       D frames of recursion built with frame pointers, then the
 *              program's own outer frames (main, libc's start)
 *   nofp D     the same built -fomit-frame-pointer (CFA = rsp + offset:
 *              most distributions' code)
 *   qsort D    D frames, then libc's qsort calling a comparator that walks
 *
 * Usage: walk_bench [--walks N] [--reps N] [--only WALK]
 *   (defaults 200000, 7, every walk; --only names one, for perf record)
 * Times are CPU time of the thread, the fastest of REPS runs of N walks,
 * so that other work on the machine weighs least. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc_maps.h"
#include "table_image.h"
#include "unwinder.h"
#include "walk.h"

static long walks = 200000, reps = 7; /* see Usage */
static struct walk_image img, img_cached;

#define CACHE_BITS 12 /* 32 KiB */
static uint64_t cache_mem[1u << CACHE_BITS];

static double thread_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* The image of every object this process maps code of. */
static void *image_of_self(size_t *len, size_t *nmaps_out)
{
	struct table_image_mapping *in;
	struct proc_map *maps;
	struct unwinder *u;
	size_t n, i, k = 0;
	void *blob;

	if (unwinder_new(NULL, NULL, &u) || unwinder_add_process(u, getpid()) ||
	    proc_maps_read(getpid(), true, &maps, &n) || !(in = calloc(n, sizeof(*in)))) {
		fprintf(stderr, "walk_bench: cannot compile this process's tables\n");
		exit(1);
	}
	for (i = 0; i < n; i++) {
		struct file_key key = { .dev = maps[i].dev, .ino = maps[i].ino };
		struct unwind_object *o = maps[i].ino ? unwinder_find(u, &key) : NULL;

		if (o && !o->error && o->table)
			in[k++] = (struct table_image_mapping){
				o->table, maps[i].start, maps[i].end,
				maps[i].start - unwind_object_elf_addr(o, maps[i].start, maps[i].offset, maps[i].start)
			};
	}
	if (table_image_build(in, k, &blob, len) || walk_image_check(blob, *len, &img)) {
		fprintf(stderr, "walk_bench: no image\n");
		exit(1);
	}
	*nmaps_out = k;
	proc_maps_free(maps, n);
	free(in);
	/* the image copied the tables: the unwinder may go */
	unwinder_free(u);
	return blob;
}

enum mode { DWARF, DWARF_COLD, DWARF_WARM, DWARF_MEMO, FP, MODES };
static const char *const mode_names[MODES] = { "dwarf", "dwarf-cold", "dwarf-warm", "dwarf-memo", "fp" };

/* dwarf-memo: the warm walk behind the thread's memo of whole walks, as
 * the library walks (every walk here starts where the last one did and
 * reads the same words: the memo's best case, its cost per word read) */
static struct walk_memo bench_memo;

struct result {
	double best_ns; /* per walk */
	uint32_t frames;
	uint32_t end;
	double misses; /* rules searched a walk, on average */
};

/* Empties the cache slots F's frames were looked up in (walk.h gives the
 * slot's hash): the next walk is a cold one, without clearing the whole
 * cache. */
static inline void cache_forget(const struct walk_frames *f, uint64_t first_exact)
{
	uint32_t i;

	for (i = 0; i < f->n; i++) {
		uint64_t pc = f->pcs[i] & ~DWLEAK_FRAME_EXACT;
		uint64_t exact = i ? f->pcs[i] & DWLEAK_FRAME_EXACT : first_exact;
		uint64_t lookup = exact ? pc : pc - 1;

		__atomic_store_n(&cache_mem[WALK_CACHE_SLOT(lookup, CACHE_BITS)], 0, __ATOMIC_RELAXED);
	}
}

/* Walks REPS x WALKS times from here; keeps the fastest rep. */
static __attribute__((noinline)) void measure(enum mode mode, struct result *r)
{
	struct walk_frames f;
	struct walk_regs regs;
	struct walk_bounds b;
	long rep, i;

	r->best_ns = 1e30;
	r->misses = 0;
	for (rep = 0; rep < reps; rep++) {
		double t0 = thread_cpu_ns(), ns;

		for (i = 0; i < walks; i++) {
			walk_regs_capture(&regs);
			if (walk_stack_bounds(regs.sp, &b))
				abort();
			if (mode == DWARF)
				walk_dwarf(&img, &regs, &b, &f);
			else if (mode == FP)
				walk_fp(&regs, &b, &f);
			else if (mode == DWARF_MEMO)
				walk_dwarf_memo(&img_cached, &regs, &b, &bench_memo, &f);
			else
				walk_dwarf(&img_cached, &regs, &b, &f);
			if (mode == DWARF_COLD)
				cache_forget(&f, regs.exact_pc);
			asm volatile("" : : "r"(&f) : "memory");
			r->misses += f.cache_misses;
		}
		ns = (thread_cpu_ns() - t0) / walks;
		if (ns < r->best_ns)
			r->best_ns = ns;
	}
	r->frames = f.n;
	r->end = f.end;
	r->misses /= (double)walks * reps;
}

/* The call chains: each level a real call (the sum after it). */
static __attribute__((noinline)) int chain_fp(int depth, enum mode mode, struct result *r)
{
	volatile int pad = depth;

	if (depth <= 1) {
		measure(mode, r);
		return pad;
	}
	return chain_fp(depth - 1, mode, r) + pad;
}

static __attribute__((noinline, optimize("omit-frame-pointer"))) int chain_nofp(int depth, enum mode mode,
										 struct result *r)
{
	volatile int pad = depth;

	if (depth <= 1) {
		measure(mode, r);
		return pad;
	}
	return chain_nofp(depth - 1, mode, r) + pad;
}

static enum mode qsort_mode;
static struct result *qsort_result;
static int qsort_calls;

static int compare_and_measure(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	if (qsort_calls++ == 0)
		measure(qsort_mode, qsort_result);
	return (x > y) - (x < y);
}

static __attribute__((noinline, optimize("omit-frame-pointer"))) int chain_qsort(int depth, enum mode mode,
										  struct result *r)
{
	int v[8] = { 5, 3, 7, 1, 8, 2, 6, 4 };

	if (depth > 1)
		return chain_qsort(depth - 1, mode, r) + 1;
	qsort_mode = mode;
	qsort_result = r;
	qsort_calls = 0;
	qsort(v, 8, sizeof(v[0]), compare_and_measure);
	return v[0];
}

/* malloc(64)+free, as the micro-benchmark measures a pair. */
static double malloc_pair_ns(void)
{
	double best = 1e30;
	long rep, i;

	for (rep = 0; rep < reps; rep++) {
		double t0 = thread_cpu_ns(), ns;

		for (i = 0; i < walks * 10; i++) {
			void *p = malloc(64);

			asm volatile("" : : "r"(p) : "memory");
			free(p);
		}
		ns = (thread_cpu_ns() - t0) / (walks * 10);
		if (ns < best)
			best = ns;
	}
	return best;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*chain)(int, enum mode, struct result *);
		int depth;
	} rows[] = {
		{ "fp", chain_fp, 10 },	    { "fp", chain_fp, 20 },	  { "nofp", chain_nofp, 10 },
		{ "nofp", chain_nofp, 20 }, { "qsort", chain_qsort, 10 },
	};
	size_t len, nmaps, i;
	void *blob;
	const char *only = NULL;
	int m, a;

	for (a = 1; a + 1 < argc; a += 2) {
		if (!strcmp(argv[a], "--walks"))
			walks = atol(argv[a + 1]);
		else if (!strcmp(argv[a], "--reps"))
			reps = atol(argv[a + 1]);
		else if (!strcmp(argv[a], "--only"))
			only = argv[a + 1];
		else
			break;
	}
	if (walks <= 0 || reps <= 0 || a != argc) {
		fprintf(stderr, "usage: walk_bench [--walks N] [--reps N] [--only WALK]\n");
		return 2;
	}
	blob = image_of_self(&len, &nmaps);
	img_cached = img;
	if (walk_image_cache(&img_cached, cache_mem, sizeof(cache_mem)) != 1 << CACHE_BITS) {
		fprintf(stderr, "walk_bench: no cache\n");
		return 1;
	}
	printf("image: %zu mappings, %u tables, %zu KiB, rule cache %u KiB; %ld walks x %ld reps, the fastest\n", nmaps,
	       img.ntables, len >> 10, (unsigned)(sizeof(cache_mem) >> 10), walks, reps);
	printf("malloc(64)+free: %.1f ns/pair\n", malloc_pair_ns());
	printf("%-6s %5s  %-10s %7s %9s %9s %8s  %s\n", "stack", "depth", "walk", "frames", "ns/walk", "ns/frame",
	       "searched", "end");
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		for (m = 0; m < MODES; m++) {
			struct result r;

			if (only && strcmp(only, mode_names[m]))
				continue;
			rows[i].chain(rows[i].depth, (enum mode)m, &r);
			printf("%-6s %5d  %-10s %7u %9.1f %9.2f %8.1f  %u\n", rows[i].name, rows[i].depth, mode_names[m],
			       r.frames, r.best_ns, r.best_ns / r.frames, r.misses, r.end);
		}
	}
	free(blob);
	return 0;
}
