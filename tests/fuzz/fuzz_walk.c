/* libFuzzer target for the preload library's walks (preload/walk.c):
 * walk_image_check over arbitrary images, and both walks over what it
 * accepts and over arbitrary stacks.  The stack lies between guard pages,
 * [lo, hi) page-aligned, so a read past the bounds faults here even where
 * ASan does not look (the walk's reads are not instrumented); the image is
 * a malloc'd copy of exactly its length, under ASan.
 * The input: a control block, then an image (raw, or arrays the image
 * builder, tables/table_image.c, makes one of: what it builds must pass
 * the check), then (CTL_CACHE) the rule cache's slots, then the stack's
 * bytes.  Besides not crashing: a walk has 1 to DWLEAK_MAX_FRAMES frames
 * and ends with a known reason, truncated only when full; with a cache
 * emptied and then filled by the walk, the DWARF walk gives exactly the
 * frames it gives without one; with arbitrary slots, only the former (a
 * slot naming a rule inside the image is taken as it is). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "table_image.h"
#include "walk.h"

#define PAGE 4096u
#define STACK_PAGES_MAX 4

struct control {
	uint32_t flags;	    /* CTL_* */
	uint32_t image_len; /* raw: the image's bytes that follow */
	uint16_t npages;    /* build: the table's counts (bounded below) */
	uint16_t nrows;
	uint16_t nrules;
	uint16_t nmaps;	    /* build: mappings of the table, one after another */
	uint64_t first_page;
	uint64_t map_start;
	uint64_t pc;	    /* where the walk starts: in a mapping, an offset */
	uint64_t sp;	    /* an offset from lo (made to straddle both ends) */
	uint64_t bp;
};

#define CTL_BUILD 1u	 /* the image from arrays, through the builder */
#define CTL_HEADER 2u	 /* raw: the header made valid, so checks go deeper */
#define CTL_RELOCATE 4u	 /* stack words tagged 0xa.../0xb... made pcs in a mapping / stack addresses */
#define CTL_EXACT 8u	 /* the start's pc is exact */
#define CTL_BP_STACK 16u /* rbp an offset in the stack */
#define CTL_CACHE 32u	 /* the cache's slots from the input, 2^(4 + (flags >> 8) % 5) of them */

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_walk: %s\n", what);
	abort();
}

/* Takes N bytes from the input (zeros past its end). */
static void take(const uint8_t **data, size_t *size, void *dst, size_t n)
{
	size_t k = n < *size ? n : *size;

	memset(dst, 0, n);
	memcpy(dst, *data, k);
	*data += k;
	*size -= k;
}

/* An image from the table arrays in the input; NULL when the builder
 * refuses them (as it must refuse an unsound table). */
static void *image_built(const struct control *c, const uint8_t **data, size_t *size, size_t *len)
{
	struct table_image_mapping maps[4];
	struct unwind_table t = { 0 };
	uint32_t i, nmaps = 1 + c->nmaps % 4;
	void *blob = NULL;
	int err;

	t.first_page = c->first_page % (1ull << 40);
	t.npages = c->npages % 5;
	t.nrows = c->nrows % 300;
	t.nrules = c->nrules % 40;
	t.pages = calloc(t.npages + 1, sizeof(*t.pages));
	t.rows = calloc(t.nrows + 1, sizeof(*t.rows));
	t.rules = calloc(t.nrules + 1, sizeof(*t.rules));
	if (!t.pages || !t.rows || !t.rules)
		fail("out of memory");
	take(data, size, t.pages, t.npages * sizeof(*t.pages));
	take(data, size, t.rows, t.nrows * sizeof(*t.rows));
	take(data, size, t.rules, t.nrules * sizeof(*t.rules));
	for (i = 0; i < nmaps; i++) {
		uint64_t span = (uint64_t)(t.npages ? t.npages : 1) << UNWIND_PAGE_SHIFT;

		maps[i].table = &t;
		maps[i].start = (c->map_start % (1ull << 46) & ~(uint64_t)(PAGE - 1)) + i * span;
		maps[i].end = maps[i].start + span;
		maps[i].bias = maps[i].start - (t.first_page << UNWIND_PAGE_SHIFT);
	}
	err = table_image_build(maps, nmaps, &blob, len);
	if (err && err != -EINVAL)
		fail("the builder failed but for a bad table");
	free(t.pages);
	free(t.rows);
	free(t.rules);
	return err ? NULL : blob;
}

/* A raw image of the input's bytes, in a buffer of exactly its length. */
static void *image_raw(const struct control *c, const uint8_t **data, size_t *size, size_t *len)
{
	struct unwind_image_header *h;
	uint8_t *blob;

	*len = c->image_len % 8192;
	blob = malloc(*len ? *len : 1);
	if (!blob)
		fail("out of memory");
	take(data, size, blob, *len);
	if ((c->flags & CTL_HEADER) && *len >= sizeof(*h)) {
		h = (struct unwind_image_header *)blob;
		h->magic = UNWIND_IMAGE_MAGIC;
		h->version = UNWIND_IMAGE_VERSION;
		h->header_bytes = sizeof(*h);
		h->total_bytes = *len;
		h->mappings_off = sizeof(*h) + h->mappings_off % 64 * 8;
		h->nmappings %= 8;
		h->tables_off = sizeof(*h) + h->tables_off % 64 * 8;
		h->ntables %= 8;
	}
	return blob;
}

/* Whether two walks gave the same frames and end. */
static int frames_same(const struct walk_frames *a, const struct walk_frames *b)
{
	return a->n == b->n && a->end == b->end && !memcmp(a->pcs, b->pcs, a->n * sizeof(a->pcs[0]));
}

static void frames_sound(const struct walk_frames *f)
{
	if (f->n < 1 || f->n > DWLEAK_MAX_FRAMES || f->end >= WALK_END_COUNT ||
	    (f->end == WALK_END_TRUNCATED) != (f->n == DWLEAK_MAX_FRAMES))
		fail("a walk's frames or end out of range");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *guarded;
	struct control c;
	struct walk_image img;
	struct walk_bounds b;
	struct walk_regs regs;
	struct walk_frames f, fc;
	struct walk_image cimg;
	uint64_t *words, span, *cache, *slots = NULL;
	uint32_t cache_bits;
	size_t len, i, npages;
	void *blob;
	int err;

	if (!guarded) { /* STACK_PAGES_MAX pages between two guard pages, once */
		guarded = mmap(NULL, (STACK_PAGES_MAX + 2) * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (guarded == MAP_FAILED)
			fail("mmap");
	}
	take(&data, &size, &c, sizeof(c));
	blob = c.flags & CTL_BUILD ? image_built(&c, &data, &size, &len) : image_raw(&c, &data, &size, &len);
	if (!blob)
		return 0;
	err = walk_image_check(blob, len, &img);
	if (err && err != -EINVAL && err != -EPROTO && err != -EBADMSG)
		fail("walk_image_check: an error it does not document");
	if (err && (c.flags & CTL_BUILD))
		fail("walk_image_check refused what the builder built");
	if (!err && img.cache)
		fail("walk_image_check gave an image a cache");

	/* the cache: small, so that an input can fill it and its pcs collide;
	 * a buffer of exactly its size, under ASan */
	cache_bits = 4 + (c.flags >> 8) % 5;
	cache = malloc(8ul << cache_bits);
	if (!cache)
		fail("out of memory");
	if (c.flags & CTL_CACHE) {
		slots = malloc(8ul << cache_bits);
		if (!slots)
			fail("out of memory");
		take(&data, &size, slots, 8ul << cache_bits);
	}

	/* the stack: what is left of the input, on whole pages */
	npages = 1 + size / PAGE;
	if (npages > STACK_PAGES_MAX)
		npages = STACK_PAGES_MAX;
	b.lo = (uintptr_t)guarded + PAGE;
	b.hi = b.lo + npages * PAGE;
	if (mprotect((void *)(uintptr_t)b.lo, npages * PAGE, PROT_READ | PROT_WRITE))
		fail("mprotect");
	take(&data, &size, (void *)(uintptr_t)b.lo, npages * PAGE);
	words = (uint64_t *)(uintptr_t)b.lo;
	if (!err && (c.flags & CTL_RELOCATE) && img.nmappings) {
		for (i = 0; i < npages * PAGE / 8; i++) {
			const struct unwind_image_mapping *m = &img.maps[(words[i] >> 32) % img.nmappings];

			if (words[i] >> 60 == 0xa)
				words[i] = m->start + (words[i] & 0xffff) % (m->end - m->start);
			else if (words[i] >> 60 == 0xb)
				words[i] = b.lo + (words[i] & 0xffff) % (npages * PAGE);
		}
	}

	span = b.hi - b.lo;
	regs.sp = b.lo - 32 + c.sp % (span + 64); /* past both ends at times */
	regs.bp = c.flags & CTL_BP_STACK ? b.lo - 32 + c.bp % (span + 64) : c.bp;
	regs.exact_pc = !!(c.flags & CTL_EXACT);
	regs.pad = 0;
	regs.pc = c.pc;
	if (!err) {
		if (img.nmappings) {
			const struct unwind_image_mapping *m = &img.maps[c.pc % img.nmappings];

			regs.pc = m->start + (c.pc >> 8) % (m->end - m->start);
		}
		walk_dwarf(&img, &regs, &b, &f);
		frames_sound(&f);
		if (f.cache_misses != f.n)
			fail("a walk without a cache found rules in one");
		cimg = img;
		if (walk_image_cache(&cimg, cache, 8ul << cache_bits) != 1 << cache_bits)
			fail("walk_image_cache refused a cache");
		walk_dwarf(&cimg, &regs, &b, &fc);
		if (!frames_same(&fc, &f))
			fail("a walk with an emptied cache differs from one without");
		walk_dwarf(&cimg, &regs, &b, &fc);
		if (!frames_same(&fc, &f))
			fail("a walk with a filled cache differs from one without");
		if (slots) {
			memcpy(cache, slots, 8ul << cache_bits);
			walk_dwarf(&cimg, &regs, &b, &fc);
			frames_sound(&fc);
		}
	}
	walk_fp(&regs, &b, &f);
	frames_sound(&f);
	if (mprotect((void *)(uintptr_t)b.lo, npages * PAGE, PROT_NONE))
		fail("mprotect");
	free(slots);
	free(cache);
	free(blob);
	return 0;
}
