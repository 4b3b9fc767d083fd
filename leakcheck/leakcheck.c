/* memcheck's leak classification over blocks and memory it is handed: a
 * pointer test fast enough for every word of a large process (a range
 * check, a page index -- direct arrays for dense 2 MiB regions, a hash for
 * the rest -- and a branchless search among the sorted blocks of that
 * page), a scan that keeps only root hits and block-to-block edges (so
 * the target's pause holds no marking), and the marking and clique passes
 * of valgrind's memcheck/mc_leakcheck.c run over those edges afterwards. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "constants.h"
#include "leakcheck.h"

#define NONE UINT32_MAX
/* Edge targets carry this bit for an interior pointer (LEAKCHECK_MAX_BLOCKS
 * keeps block numbers below it). */
#define INTERIOR 0x80000000u
#define WORD 8u
/* A block spanning more pages than this is "large": the page index gets
 * only its first and last page, the region table covers the rest, so a
 * 1 GiB block costs a few hundred entries, not 262144. */
#define LARGE_PAGES 16
/* The page index: a 2 MiB region holding at least DENSE_PAGES pages with
 * blocks gets a direct array of its 512 pages (pointers to nearby blocks
 * then read nearby entries: a hash scattered them, and its cache misses
 * were half the scan of a 1 GiB heap); the pages of sparser regions go to
 * a hash, so memory stays within 64 bytes a page either way. */
#define DENSE_SHIFT 9
#define DENSE_PAGES 64
/* The region table's granule starts at 2 MiB and doubles while the
 * regions of all large blocks would need more entries than this plus a
 * few per block (a 100 GiB mapping tracked with --mmap). */
#define REGION_SHIFT_MIN 21
#define REGION_ENTRIES_BASE 65536

/* Where a block was pointed at from a root (leakcheck_scan outside every
 * block, or leakcheck_scan_value), and from an unsure one
 * (leakcheck_scan_unsure) as another pair. */
#define ROOT_START 1u
#define ROOT_INTERIOR 2u
#define ROOT_UNSURE_SHIFT 2
#define ROOT_SURE (ROOT_START | ROOT_INTERIOR)

/* The marking states of memcheck's LC_Extra, plus the pending bit of its
 * mark stack (a block is on the stack at most once). */
enum mark_state {
	MARK_UNREACHED,
	MARK_POSSIBLE,
	MARK_REACHABLE,
	MARK_INDIRECT,
};
#define MARK_PENDING 0x80u
#define MARK_UNSURE 0x40u /* reached only through unsure roots */
#define MARK_MASK 0x3fu

/* A hash slot for one key (addr >> the table's shift: a page, a dense
 * region, a large-block region): for pages, the blocks that overlap it
 * are the consecutive sorted blocks FIRST..LAST; for large-block regions
 * FIRST..LAST index the large[] array; for dense regions FIRST numbers the
 * region's page array.  KEY is the key + 1, so a calloc'd table is empty. */
struct range_slot {
	uint64_t key;
	uint32_t first;
	uint32_t last;
};

/* The blocks touching one page of a dense region: FIRST..LAST (sorted
 * positions); FIRST is NONE for a page none touches. */
struct page_entry {
	uint32_t first;
	uint32_t last;
};

struct range_table {
	struct range_slot *slots;
	uint64_t mask;	 /* capacity - 1, capacity a power of two */
	unsigned bits;	 /* log2(capacity) */
	unsigned shift;	 /* keys are addr >> shift */
	struct range_slot *tail; /* the slot filled last: keys arrive in order */
};

/* A pointer from block FROM to block TO & ~INTERIOR. */
struct edge {
	uint32_t from;
	uint32_t to;
};

/*
 * Blocks are kept sorted by address in parallel arrays (the pointer test
 * touches only start[] and lend[]).  Invariants: start[] ascends;
 * start[i] <= lend[i] <= start[i + 1] (overlaps cut), so at most one block
 * holds any address and a search for the last start at or below it finds
 * that block.  A block's contents end at start + size, cut at the next
 * block's start (contents_end).
 */
struct leakcheck {
	size_t n;
	uint64_t *start;
	uint64_t *lend;	 /* end for pointers into it: start + max(size, 1), cut */
	uint64_t *size;	 /* as given */
	uint32_t *orig;	 /* sorted position -> the caller's index */
	uint32_t *pos;	 /* the caller's index -> sorted position (made by classify,
			    after the target runs again) */
	uint8_t *root;	 /* ROOT_* bits */
	uint64_t lo;	 /* every block lies in [lo, lo + span) */
	uint64_t span;

	struct range_table dense;	  /* dense regions: slot.first = their page array */
	struct page_entry *dense_pages;	  /* 512 entries a dense region */
	struct range_table pages;	  /* the pages of other regions */
	struct range_table regions;	  /* the middles of large blocks, over large[] */
	uint32_t *large;	    /* sorted positions of the large blocks */
	size_t nlarge;

	struct edge *edges;
	size_t nedges, edge_cap;
	int scan_err; /* the first failure of a scan: classify refuses */

	/* The scan's cursor: where the last chunk ended, and the first block
	 * whose words end after it, so consecutive chunks need no search. */
	uint64_t next_addr;
	size_t next_block;

	struct leakcheck_scan_stats stats;

	bool classified;
	uint8_t *state;	   /* enum mark_state (+ MARK_PENDING while stacked, MARK_UNSURE) */
	bool unsure_pass;  /* marking from the unsure roots: state_set flags */
	uint64_t *indirect; /* definitely lost: the bytes of its clique */
	uint32_t *via;	   /* indirectly lost: the block that reached it */
};

static const char *const kind_names[] = {
#define LEAK_KIND_NAME(e, name) [e] = name,
	LEAK_KIND_LIST(LEAK_KIND_NAME)
#undef LEAK_KIND_NAME
};

const char *leak_kind_name(enum leak_kind kind)
{
	return (unsigned)kind < LEAK_KIND_COUNT ? kind_names[kind] : NULL;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Rounded up to a word; the top word of the address space stays itself. */
static uint64_t word_up(uint64_t a)
{
	return a > UINT64_MAX - (WORD - 1) ? a & ~(uint64_t)(WORD - 1) : (a + WORD - 1) & ~(uint64_t)(WORD - 1);
}

/* ---------------------------------------------------------------------
 * Arrays of a million blocks
 *
 * They are tens of MiB of fresh memory, faulted in while the target is
 * stopped.  4 KiB faults cost three times what 2 MiB ones do (measured:
 * 48 MiB in 16.6 ms against 5.8 ms), and the scan's random reads of them
 * miss the TLB less with huge pages, so big arrays are their own mapping
 * with MADV_HUGEPAGE (a hint: the kernel may not have huge pages to give).
 * Smaller ones come from malloc.  A header in front says which.
 * ------------------------------------------------------------------ */

#define ARRAY_HUGE_MIN (4u << 20)

struct array_header {
	size_t bytes; /* of the mapping, header included; 0: from malloc */
	char pad[56]; /* keeps the array 64-byte aligned */
};

/* COUNT elements of SIZE bytes (at least one), zeroed with ZERO; NULL
 * when out of memory.  Free with array_free. */
static void *array_alloc(size_t count, size_t size, bool zero)
{
	struct array_header *h;
	size_t bytes;

	if (__builtin_mul_overflow(count ? count : 1, size, &bytes) ||
	    __builtin_add_overflow(bytes, sizeof(*h), &bytes))
		return NULL;
	if (bytes >= ARRAY_HUGE_MIN) {
		h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (h == MAP_FAILED)
			return NULL;
		madvise(h, bytes, MADV_HUGEPAGE); /* zeroed by the kernel either way */
		h->bytes = bytes;
	} else {
		h = zero ? calloc(1, bytes) : malloc(bytes);
		if (!h)
			return NULL;
		h->bytes = 0;
	}
	return h + 1;
}

/* NULL-safe. */
static void array_free(void *p)
{
	struct array_header *h = p ? (struct array_header *)p - 1 : NULL;

	if (h && h->bytes)
		munmap(h, h->bytes);
	else
		free(h);
}

/* ---------------------------------------------------------------------
 * The pointer test
 * ------------------------------------------------------------------ */

/* Fibonacci hashing: heap pages are consecutive numbers, which this
 * spreads over the table instead of piling them into one probe run. */
static inline uint64_t slot_of(const struct range_table *t, uint64_t key)
{
	return (key * 0x9e3779b97f4a7c15ull) >> (64 - t->bits);
}

static inline const struct range_slot *range_find(const struct range_table *t, uint64_t key)
{
	uint64_t h;

	for (h = slot_of(t, key);; h = (h + 1) & t->mask) {
		const struct range_slot *s = &t->slots[h];

		if (s->key == key)
			return s;
		if (!s->key)
			return NULL;
	}
}

/* The block of start[] positions IDX[LO..HI] (IDX NULL: LO..HI
 * themselves) holding V, or NONE: the last one starting at or below V, if
 * V is below its end.  Branchless: a page of small blocks holds dozens,
 * and the branches of a plain binary search over them mispredict on
 * every step (they were most of the scan's time). */
static inline uint32_t range_search(const struct leakcheck *lc, const uint32_t *idx, uint32_t lo, uint32_t hi,
				    uint64_t v)
{
	uint32_t base = lo, len = hi - lo + 1, b;

#define AT(k) (idx ? idx[k] : (k))
	if (v < lc->start[AT(lo)])
		return NONE;
	while (len > 1) {
		uint32_t half = len / 2;

		base += (lc->start[AT(base + half)] <= v) * half;
		len -= half;
	}
	b = AT(base);
#undef AT
	return v < lc->lend[b] ? b : NONE;
}

/* The sorted position of the block holding V, or NONE. */
static inline __attribute__((always_inline)) uint32_t block_of(const struct leakcheck *lc, uint64_t v)
{
	const struct range_slot *s;

	if (v - lc->lo >= lc->span)
		return NONE;
	s = range_find(&lc->dense, (v >> (DWLEAK_PAGE_SHIFT + DENSE_SHIFT)) + 1);
	if (s) {
		const struct page_entry *e = &lc->dense_pages[((size_t)s->first << DENSE_SHIFT) +
							      ((v >> DWLEAK_PAGE_SHIFT) & ((1u << DENSE_SHIFT) - 1))];

		if (e->first != NONE)
			return range_search(lc, NULL, e->first, e->last, v);
	} else {
		s = range_find(&lc->pages, (v >> DWLEAK_PAGE_SHIFT) + 1);
		if (s)
			return range_search(lc, NULL, s->first, s->last, v);
	}
	/* no block starts, ends or lies whole in V's page: only the middle of
	 * a large block can hold it */
	if (!lc->nlarge)
		return NONE;
	s = range_find(&lc->regions, (v >> lc->regions.shift) + 1);
	return s ? range_search(lc, lc->large, s->first, s->last, v) : NONE;
}

int64_t leakcheck_find(const struct leakcheck *lc, uint64_t addr, int *start)
{
	uint32_t b = block_of(lc, addr);

	if (start)
		*start = b != NONE && addr == lc->start[b];
	return b == NONE ? -1 : (int64_t)lc->orig[b];
}

/* ---------------------------------------------------------------------
 * Building
 * ------------------------------------------------------------------ */

/* A block as sorted: the size travels with it, since fetching it by
 * index afterwards is a cache miss a block in the ledger's hash order. */
struct sort_rec {
	uint64_t addr;
	uint64_t size;
	uint32_t idx;
	uint32_t pad;
};

/* Radix digits of at most 14 bits, the passes splitting the differing
 * bits evenly: a heap of 128 MiB differs in ~27 bits, two passes of 14
 * (measured on 10^6 blocks: 15 ms, against 20 ms for three of 11; wider
 * digits scatter to too many places at once). */
#define DIGIT_BITS_MAX 14

/* Sorts RECS[0..N) by address, stably (equal addresses keep the caller's
 * order): an LSD radix sort over only the bits in which some address
 * differs (heap addresses share their top bits and their low alignment
 * bits), so a million blocks cost two to four passes, not the twenty
 * million comparisons of qsort: the index is built while the target is
 * stopped.  TMP holds N records.  Returns the array holding the result
 * (RECS or TMP), or NULL when out of memory. */
static struct sort_rec *sort_by_addr(struct sort_rec *recs, struct sort_rec *tmp, size_t n)
{
	unsigned shift, low, top, passes, bits;
	uint64_t differ = 0, digits;
	size_t *count, i;

	for (i = 1; i < n; i++)
		differ |= recs[i].addr ^ recs[0].addr;
	if (!differ)
		return recs;
	low = (unsigned)__builtin_ctzll(differ);
	top = 64 - (unsigned)__builtin_clzll(differ);
	passes = (top - low + DIGIT_BITS_MAX - 1) / DIGIT_BITS_MAX;
	bits = (top - low + passes - 1) / passes;
	digits = (uint64_t)1 << bits;
	count = malloc(digits * sizeof(*count));
	if (!count)
		return NULL;
	for (shift = low; shift < top; shift += bits) {
		size_t sum = 0;
		struct sort_rec *swap;

		memset(count, 0, digits * sizeof(*count));
		for (i = 0; i < n; i++)
			count[(recs[i].addr >> shift) & (digits - 1)]++;
		for (i = 0; i < digits; i++) {
			size_t c = count[i];

			count[i] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			tmp[count[(recs[i].addr >> shift) & (digits - 1)]++] = recs[i];
		swap = recs;
		recs = tmp;
		tmp = swap;
	}
	free(count);
	return recs;
}

static bool is_large(const struct leakcheck *lc, size_t i)
{
	return ((lc->lend[i] - 1) >> DWLEAK_PAGE_SHIFT) - (lc->start[i] >> DWLEAK_PAGE_SHIFT) >= LARGE_PAGES;
}

static int range_table_init(struct range_table *t, size_t entries, unsigned shift)
{
	unsigned bits = 4;

	while (((uint64_t)1 << bits) < (uint64_t)entries * 2) /* at most half full */
		bits++;
	t->slots = array_alloc((size_t)1 << bits, sizeof(*t->slots), true);
	if (!t->slots)
		return -ENOMEM;
	t->bits = bits;
	t->mask = ((uint64_t)1 << bits) - 1;
	t->shift = shift;
	t->tail = NULL;
	return 0;
}

/* Adds item ITEM to the slot of KEY.  Keys arrive in ascending order, so a
 * key already present is the one filled last. */
static void range_add(struct range_table *t, uint64_t key, uint32_t item)
{
	uint64_t h;

	if (t->tail && t->tail->key == key) {
		t->tail->last = item;
		return;
	}
	for (h = slot_of(t, key); t->slots[h].key; h = (h + 1) & t->mask)
		;
	t->slots[h] = (struct range_slot){ .key = key, .first = item, .last = item };
	t->tail = &t->slots[h];
}

/* Calls FN(CTX, page, block) for the pages each block puts in the page
 * index, in ascending order: every page of a small block, the first and
 * last page of a large one (the region table covers its middle). */
static void keyed_pages(const struct leakcheck *lc, void (*fn)(void *ctx, uint64_t page, uint32_t block), void *ctx)
{
	size_t i;

	for (i = 0; i < lc->n; i++) {
		uint64_t p0 = lc->start[i] >> DWLEAK_PAGE_SHIFT, p1 = (lc->lend[i] - 1) >> DWLEAK_PAGE_SHIFT, p;

		if (lc->lend[i] == lc->start[i])
			continue; /* cut to nothing by an overlap */
		if (is_large(lc, i)) {
			fn(ctx, p0, (uint32_t)i);
			fn(ctx, p1, (uint32_t)i);
			continue;
		}
		for (p = p0; p <= p1; p++)
			fn(ctx, p, (uint32_t)i);
	}
}

/* The first pass: how many pages each region has, which regions are dense. */
struct page_census {
	uint64_t page, region; /* the last seen */
	size_t in_region;      /* its distinct pages so far */
	size_t sparse_pages;   /* pages of regions found sparse */
	uint64_t *dense;       /* the dense regions (NULL: only count them) */
	size_t ndense;
};

static void census_close_region(struct page_census *c)
{
	if (c->in_region >= DENSE_PAGES) {
		if (c->dense)
			c->dense[c->ndense] = c->region;
		c->ndense++;
	} else {
		c->sparse_pages += c->in_region;
	}
	c->in_region = 0;
}

static void census_page(void *ctx, uint64_t page, uint32_t block)
{
	struct page_census *c = ctx;

	(void)block;
	if (page == c->page)
		return;
	if ((page >> DENSE_SHIFT) != c->region) {
		if (c->in_region)
			census_close_region(c);
		c->region = page >> DENSE_SHIFT;
	}
	c->page = page;
	c->in_region++;
}

static void census_run(const struct leakcheck *lc, struct page_census *c)
{
	c->page = c->region = UINT64_MAX;
	c->in_region = c->sparse_pages = c->ndense = 0;
	keyed_pages(lc, census_page, c);
	if (c->in_region)
		census_close_region(c);
}

/* The second pass: each page into its dense region's array or the hash. */
struct page_fill {
	struct leakcheck *lc;
	uint64_t region;	  /* the last seen */
	struct page_entry *array; /* its page array, or NULL: sparse */
};

static void fill_page(void *ctx, uint64_t page, uint32_t block)
{
	struct page_fill *f = ctx;
	struct page_entry *e;

	if ((page >> DENSE_SHIFT) != f->region) {
		const struct range_slot *s = range_find(&f->lc->dense, (page >> DENSE_SHIFT) + 1);

		f->region = page >> DENSE_SHIFT;
		f->array = s ? &f->lc->dense_pages[(size_t)s->first << DENSE_SHIFT] : NULL;
	}
	if (!f->array) {
		range_add(&f->lc->pages, page + 1, block);
		return;
	}
	e = &f->array[page & ((1u << DENSE_SHIFT) - 1)];
	if (e->first == NONE)
		e->first = block;
	e->last = block;
}

static int build_pages(struct leakcheck *lc)
{
	struct page_census census = { 0 };
	struct page_fill fill = { .lc = lc, .region = UINT64_MAX };
	size_t k, entries;
	int err;

	census_run(lc, &census);
	entries = (census.ndense ? census.ndense : 1) << DENSE_SHIFT;
	census.dense = malloc((census.ndense ? census.ndense : 1) * sizeof(*census.dense));
	lc->dense_pages = array_alloc(entries, sizeof(*lc->dense_pages), false);
	if (!census.dense || !lc->dense_pages) {
		free(census.dense);
		return -ENOMEM;
	}
	census_run(lc, &census); /* again, keeping the dense regions */
	memset(lc->dense_pages, 0xff, entries * sizeof(*lc->dense_pages));
	err = range_table_init(&lc->dense, census.ndense, DWLEAK_PAGE_SHIFT + DENSE_SHIFT);
	if (!err)
		err = range_table_init(&lc->pages, census.sparse_pages, DWLEAK_PAGE_SHIFT);
	if (err) {
		free(census.dense);
		return err;
	}
	for (k = 0; k < census.ndense; k++)
		range_add(&lc->dense, census.dense[k] + 1, (uint32_t)k);
	free(census.dense);
	keyed_pages(lc, fill_page, &fill);
	return 0;
}

/* The region keys of the large blocks at SHIFT; adds them to T unless NULL. */
static size_t large_regions(const struct leakcheck *lc, unsigned shift, struct range_table *t)
{
	uint64_t prev = UINT64_MAX;
	size_t k, count = 0;

	for (k = 0; k < lc->nlarge; k++) {
		uint32_t b = lc->large[k];
		uint64_t r;

		for (r = lc->start[b] >> shift; r <= (lc->lend[b] - 1) >> shift; r++) {
			count += r != prev;
			prev = r;
			if (t)
				range_add(t, r + 1, (uint32_t)k);
		}
	}
	return count;
}

static int build_regions(struct leakcheck *lc)
{
	unsigned shift = REGION_SHIFT_MIN;
	size_t i, count;
	int err;

	for (i = 0; i < lc->n; i++)
		if (lc->lend[i] > lc->start[i] && is_large(lc, i))
			lc->nlarge++;
	if (!lc->nlarge)
		return 0;
	lc->large = malloc(lc->nlarge * sizeof(*lc->large));
	if (!lc->large)
		return -ENOMEM;
	for (i = 0, lc->nlarge = 0; i < lc->n; i++)
		if (lc->lend[i] > lc->start[i] && is_large(lc, i))
			lc->large[lc->nlarge++] = (uint32_t)i;
	while ((count = large_regions(lc, shift, NULL)) > REGION_ENTRIES_BASE + 4 * lc->nlarge && shift < 63)
		shift++;
	err = range_table_init(&lc->regions, count, shift);
	if (err)
		return err;
	large_regions(lc, shift, &lc->regions);
	return 0;
}

/* Sorted arrays from RECS[0..N) (sorted), overlaps cut and counted. */
static void fill_blocks(struct leakcheck *lc, const struct sort_rec *recs)
{
	size_t i, n = lc->n;

	for (i = 0; i < n; i++) {
		uint64_t next = i + 1 < n ? recs[i + 1].addr : UINT64_MAX;
		uint64_t s = recs[i].addr, sz = recs[i].size;
		uint64_t lend = add_sat(s, sz ? sz : 1);

		lc->start[i] = s;
		lc->size[i] = sz;
		lc->orig[i] = recs[i].idx;
		if (lend > next)
			lc->stats.overlapping++;
		lc->lend[i] = min_u64(lend, next);
	}
	if (n) {
		lc->lo = lc->start[0];
		lc->span = lc->lend[n - 1] - lc->lo;
	}
}

int leakcheck_new(const struct leak_block *blocks, size_t n, struct leakcheck **out)
{
	struct leakcheck *lc;
	struct sort_rec *recs, *tmp, *sorted;
	size_t i;
	int err = -ENOMEM;

	if (n > LEAKCHECK_MAX_BLOCKS)
		return -E2BIG;
	lc = calloc(1, sizeof(*lc));
	recs = array_alloc(n, sizeof(*recs), false);
	tmp = array_alloc(n, sizeof(*tmp), false);
	if (!lc || !recs || !tmp)
		goto fail;
	lc->n = n;
	for (i = 0; i < n; i++)
		recs[i] = (struct sort_rec){ .addr = blocks[i].addr, .size = blocks[i].size, .idx = (uint32_t)i };
	sorted = sort_by_addr(recs, tmp, n);
	lc->start = array_alloc(n, sizeof(*lc->start), false);
	lc->lend = array_alloc(n, sizeof(*lc->lend), false);
	lc->size = array_alloc(n, sizeof(*lc->size), false);
	lc->orig = array_alloc(n, sizeof(*lc->orig), false);
	lc->root = array_alloc(n, sizeof(*lc->root), true);
	if (!sorted || !lc->start || !lc->lend || !lc->size || !lc->orig || !lc->root)
		goto fail;
	fill_blocks(lc, sorted);
	array_free(recs);
	array_free(tmp);
	recs = tmp = NULL;
	err = build_pages(lc);
	if (!err)
		err = build_regions(lc);
	if (err)
		goto fail;
	lc->next_addr = UINT64_MAX;
	*out = lc;
	return 0;
fail:
	array_free(recs);
	array_free(tmp);
	leakcheck_free(lc);
	return err;
}

/* ---------------------------------------------------------------------
 * The scan
 * ------------------------------------------------------------------ */

/* Where block I's contents end: start + size, cut at the next block. */
static inline uint64_t contents_end(const struct leakcheck *lc, size_t i)
{
	uint64_t end = add_sat(lc->start[i], lc->size[i]);

	return i + 1 < lc->n ? min_u64(end, lc->start[i + 1]) : end;
}

/* The memory of block I, [word_up(start), word_up(contents_end)): its
 * words, the whole ones inside its contents, up to full_end; then (when
 * its size is no multiple of a word) the word across its end, which is
 * nobody's: its first bytes are the block's, the rest the allocator's
 * slack, stale, so no pointer the program stored can be there (memcheck's
 * lc_scan_memory rounds a block's end down too). */
static inline uint64_t words_start(const struct leakcheck *lc, size_t i)
{
	return word_up(lc->start[i]);
}

static inline uint64_t words_end(const struct leakcheck *lc, size_t i)
{
	return word_up(contents_end(lc, i));
}

static inline uint64_t full_end(const struct leakcheck *lc, size_t i)
{
	uint64_t e = contents_end(lc, i) & ~(uint64_t)(WORD - 1);

	return e > words_start(lc, i) ? e : words_start(lc, i);
}

/* The first block whose words end after A (words_end ascends). */
static size_t first_block_after(const struct leakcheck *lc, uint64_t a)
{
	size_t lo = 0, hi = lc->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (words_end(lc, mid) > a)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static inline uint64_t load_word(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v)); /* the caller's buffer need not be aligned */
	return v;
}

/* The root words P[0..NWORDS); SHIFT: 0 for sure roots, ROOT_UNSURE_SHIFT
 * for unsure ones. */
static void scan_root_words(struct leakcheck *lc, const unsigned char *p, size_t nwords, unsigned int shift)
{
	const uint64_t lo = lc->lo, span = lc->span;
	size_t k;

	for (k = 0; k < nwords; k++) {
		uint64_t v = load_word(p + k * WORD);
		uint32_t b;

		if (v - lo >= span) /* most words: zero, small numbers, code */
			continue;
		b = block_of(lc, v);
		if (b == NONE)
			continue;
		lc->root[b] |= (v == lc->start[b] ? ROOT_START : ROOT_INTERIOR) << shift;
		lc->stats.root_hits++;
	}
}

static int edge_add(struct leakcheck *lc, uint32_t from, uint32_t to)
{
	if (lc->nedges == lc->edge_cap) {
		size_t cap = lc->edge_cap ? lc->edge_cap * 2 : 4096;
		struct edge *grown = realloc(lc->edges, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		lc->edges = grown;
		lc->edge_cap = cap;
	}
	lc->edges[lc->nedges++] = (struct edge){ .from = from, .to = to };
	return 0;
}

/* The words of block FROM: each pointer to another block is an edge.  A
 * pointer to the block itself changes nothing in either pass (memcheck
 * skips it: the block is already in the state it would give), and a
 * repeat of the block's previous edge adds nothing: both are dropped. */
static int scan_block_words(struct leakcheck *lc, uint32_t from, const unsigned char *p, size_t nwords)
{
	const uint64_t lo = lc->lo, span = lc->span;
	uint32_t last = NONE;
	size_t k;

	for (k = 0; k < nwords; k++) {
		uint64_t v = load_word(p + k * WORD);
		uint32_t b, to;

		if (v - lo >= span)
			continue;
		b = block_of(lc, v);
		if (b == NONE || b == from)
			continue;
		to = v == lc->start[b] ? b : b | INTERIOR;
		if (to == last)
			continue;
		last = to;
		if (edge_add(lc, from, to))
			return -ENOMEM;
		lc->stats.edges++;
	}
	return 0;
}

/* What the words outside every block are in a chunk. */
enum chunk_roots {
	CHUNK_ROOTS,	    /* roots */
	CHUNK_UNSURE_ROOTS, /* roots the check cannot vouch for */
	CHUNK_NO_ROOTS,	    /* nothing: the allocator's own memory */
};

static int scan_chunk(struct leakcheck *lc, uint64_t addr, const void *bytes, size_t len, enum chunk_roots roots)
{
	uint64_t end = add_sat(addr, len), a = word_up(addr), e = end & ~(uint64_t)(WORD - 1);
	const unsigned char *p;
	size_t i;
	int err;

	if (lc->classified)
		return -EINVAL;
	if (lc->scan_err)
		return lc->scan_err;
	if (a >= e) {
		lc->stats.edge_bytes += len;
		return 0;
	}
	lc->stats.edge_bytes += (a - addr) + (end - e);
	lc->stats.scanned_bytes += e - a;
	p = (const unsigned char *)bytes + (a - addr);
	i = a == lc->next_addr ? lc->next_block : first_block_after(lc, a);
	/* invariant: block i is the first whose words end after a */
	while (a < e) {
		uint64_t stop;

		if (i < lc->n && words_start(lc, i) <= a && a < full_end(lc, i)) {
			stop = min_u64(full_end(lc, i), e);
			err = scan_block_words(lc, (uint32_t)i, p, (stop - a) / WORD);
			if (err) {
				lc->scan_err = err;
				return err;
			}
		} else if (i < lc->n && words_start(lc, i) <= a) {
			stop = min_u64(words_end(lc, i), e); /* the word across its end */
			lc->stats.tail_bytes += stop - a;
		} else {
			stop = i < lc->n ? min_u64(words_start(lc, i), e) : e;
			if (roots == CHUNK_NO_ROOTS)
				lc->stats.skipped_bytes += stop - a;
			else
				scan_root_words(lc, p, (stop - a) / WORD, roots == CHUNK_UNSURE_ROOTS ? ROOT_UNSURE_SHIFT : 0);
			if (roots == CHUNK_UNSURE_ROOTS)
				lc->stats.unsure_bytes += stop - a;
		}
		p += stop - a;
		a = stop;
		while (i < lc->n && words_end(lc, i) <= a)
			i++;
	}
	lc->next_addr = e;
	lc->next_block = i;
	return 0;
}

int leakcheck_scan(struct leakcheck *lc, uint64_t addr, const void *bytes, size_t len)
{
	return scan_chunk(lc, addr, bytes, len, CHUNK_ROOTS);
}

int leakcheck_scan_unsure(struct leakcheck *lc, uint64_t addr, const void *bytes, size_t len)
{
	return scan_chunk(lc, addr, bytes, len, CHUNK_UNSURE_ROOTS);
}

int leakcheck_scan_blocks(struct leakcheck *lc, uint64_t addr, const void *bytes, size_t len)
{
	return scan_chunk(lc, addr, bytes, len, CHUNK_NO_ROOTS);
}

void leakcheck_scan_value(struct leakcheck *lc, uint64_t value)
{
	uint32_t b = block_of(lc, value);

	lc->stats.values++;
	if (b == NONE)
		return;
	lc->root[b] |= value == lc->start[b] ? ROOT_START : ROOT_INTERIOR;
	lc->stats.root_hits++;
}

int leakcheck_keep(struct leakcheck *lc, uint64_t addr)
{
	uint32_t b = block_of(lc, addr);

	if (b == NONE || lc->start[b] != addr)
		return -ENOENT;
	lc->root[b] |= ROOT_START;
	return 0;
}

int leakcheck_holes(const struct leakcheck *lc, const struct leak_block *ranges, size_t n, uint64_t page,
		    struct leak_block **out, size_t *nout)
{
	size_t cap = 64, k = 0, r, i;
	struct leak_block *v = malloc(cap * sizeof(*v));

	*out = NULL;
	*nout = 0;
	if (!v)
		return -ENOMEM;
	for (r = 0; r < n; r++) {
		uint64_t a = ranges[r].addr, end = add_sat(ranges[r].addr, ranges[r].size);

		/* every hole of [a, end): up to the next block's first page,
		 * then on from its last */
		for (i = first_block_after(lc, a); a < end; i++) {
			uint64_t stop = i < lc->n ? min_u64(lc->start[i], end) : end;
			uint64_t lo = add_sat(a, page - 1) & ~(page - 1), hi = stop & ~(page - 1);

			if (lo < hi) {
				if (k == cap) {
					struct leak_block *grown = realloc(v, 2 * cap * sizeof(*v));

					if (!grown) {
						free(v);
						return -ENOMEM;
					}
					v = grown;
					cap *= 2;
				}
				v[k++] = (struct leak_block){ lo, hi - lo };
			}
			if (i >= lc->n)
				break;
			a = add_sat(lc->start[i], lc->size[i] ? lc->size[i] : 1);
		}
	}
	*out = v;
	*nout = k;
	return 0;
}

bool leakcheck_holds_block(const struct leakcheck *lc, uint64_t lo, uint64_t hi)
{
	size_t i = first_block_after(lc, lo);

	return i < lc->n && lc->start[i] < hi;
}

void leakcheck_stats(const struct leakcheck *lc, struct leakcheck_scan_stats *out)
{
	*out = lc->stats;
}

/* ---------------------------------------------------------------------
 * Classification
 * ------------------------------------------------------------------ */

/* The edges by source block (compressed rows): block b's targets are
 * to[off[b]..off[b + 1]). */
struct out_edges {
	size_t *off;
	uint32_t *to;
};

static int out_edges_build(struct leakcheck *lc, struct out_edges *g)
{
	size_t i, n = lc->n;

	g->off = array_alloc(n + 1, sizeof(*g->off), true);
	g->to = array_alloc(lc->nedges, sizeof(*g->to), false);
	if (!g->off || !g->to)
		return -ENOMEM;
	for (i = 0; i < lc->nedges; i++)
		g->off[lc->edges[i].from + 1]++;
	for (i = 0; i < n; i++)
		g->off[i + 1] += g->off[i];
	/* place each edge at its row's cursor, kept in off[from] and shifted
	 * back after */
	for (i = 0; i < lc->nedges; i++)
		g->to[g->off[lc->edges[i].from]++] = lc->edges[i].to;
	for (i = n; i > 0; i--)
		g->off[i] = g->off[i - 1];
	g->off[0] = 0;
	free(lc->edges);
	lc->edges = NULL;
	lc->nedges = lc->edge_cap = 0;
	return 0;
}

/* memcheck's mark stack: a block is pushed only when not already on it
 * (lc_push's 'pending'), so N entries always suffice. */
struct mark_stack {
	uint32_t *items;
	size_t top;
};

static void mark_push(struct leakcheck *lc, struct mark_stack *s, uint32_t b)
{
	if (lc->state[b] & MARK_PENDING)
		return;
	lc->state[b] |= MARK_PENDING;
	s->items[s->top++] = b;
}

static bool mark_pop(struct leakcheck *lc, struct mark_stack *s, uint32_t *b)
{
	if (!s->top)
		return false;
	*b = s->items[--s->top];
	lc->state[*b] &= ~MARK_PENDING;
	return true;
}

static enum mark_state state_of(const struct leakcheck *lc, uint32_t b)
{
	return (enum mark_state)(lc->state[b] & MARK_MASK);
}

static void state_set(struct leakcheck *lc, uint32_t b, enum mark_state st)
{
	lc->state[b] = (uint8_t)((lc->state[b] & (MARK_PENDING | MARK_UNSURE)) | st |
				 (lc->unsure_pass ? MARK_UNSURE : 0));
}

/* memcheck's lc_push_without_clique_if_a_chunk_ptr (no heuristics): a
 * start pointer from a definite node (a root, or a block reached by start
 * pointers only) makes B reachable; anything else makes an unreached B
 * possibly reached.  Each upgrade pushes B to (re)scan its pointers, so a
 * block first reached possibly and later reachably passes reachability on
 * to what it points to. */
static void reach(struct leakcheck *lc, struct mark_stack *s, uint32_t b, bool start_ptr, bool prior_definite)
{
	enum mark_state st = state_of(lc, b);

	if (st == MARK_REACHABLE)
		return;
	if (start_ptr && prior_definite) {
		state_set(lc, b, MARK_REACHABLE);
		mark_push(lc, s, b);
	} else if (st == MARK_UNREACHED) {
		state_set(lc, b, MARK_POSSIBLE);
		mark_push(lc, s, b);
	}
}

/* memcheck's lc_process_markstack(-1): is_prior_definite is "not
 * Possible" for the block being scanned. */
static void mark_from(struct leakcheck *lc, const struct out_edges *g, struct mark_stack *s, unsigned int shift)
{
	uint32_t b;
	size_t i;

	/* the roots: memory outside every block (scan_memory_root_set) and
	 * registers (lc_push_if_a_chunk_ptr_register), both definite */
	for (i = 0; i < lc->n; i++)
		if ((lc->root[i] >> shift) & ROOT_SURE)
			reach(lc, s, (uint32_t)i, (lc->root[i] >> shift) & ROOT_START, true);
	while (mark_pop(lc, s, &b)) {
		bool definite = state_of(lc, b) != MARK_POSSIBLE;
		size_t k;

		for (k = g->off[b]; k < g->off[b + 1]; k++)
			reach(lc, s, g->to[k] & ~INTERIOR, !(g->to[k] & INTERIOR), definite);
	}
}

/* The marking from the sure roots, then from the unsure ones: what only
 * the second reaches (or reaches further: possibly to reachable) is
 * flagged as depending on memory the check cannot vouch for. */
static void mark_from_roots(struct leakcheck *lc, const struct out_edges *g, struct mark_stack *s)
{
	mark_from(lc, g, s, 0);
	lc->unsure_pass = true;
	mark_from(lc, g, s, ROOT_UNSURE_SHIFT);
	lc->unsure_pass = false;
}

/* memcheck's clique pass (MC_(detect_memory_leaks) after the marking, and
 * lc_push_with_clique_if_a_chunk_ptr): each block still unreached, in
 * address order, leads a clique; every unreached block it reaches, by
 * start or interior pointer alike, joins the clique as indirectly lost
 * and adds its bytes (and those of the clique it led, if it led one) to
 * the leader's.  The leader stays unreached: definitely lost.  So in a
 * lost cycle the lowest block is definitely lost and the rest indirectly;
 * a block that led a clique and is reached later from another leader
 * joins that one (cliques never overlap). */
static void gather_cliques(struct leakcheck *lc, const struct out_edges *g, struct mark_stack *s)
{
	uint32_t leader, b;

	for (leader = 0; leader < lc->n; leader++) {
		if (state_of(lc, leader) != MARK_UNREACHED)
			continue;
		mark_push(lc, s, leader);
		while (mark_pop(lc, s, &b)) {
			size_t k;

			for (k = g->off[b]; k < g->off[b + 1]; k++) {
				uint32_t t = g->to[k] & ~INTERIOR;

				if (state_of(lc, t) != MARK_UNREACHED || t == leader)
					continue;
				mark_push(lc, s, t);
				lc->indirect[leader] += lc->size[t] + lc->indirect[t];
				lc->indirect[t] = 0;
				lc->via[t] = b;
				state_set(lc, t, MARK_INDIRECT);
			}
		}
	}
}

static enum leak_kind kind_of(enum mark_state st)
{
	switch (st) {
	case MARK_REACHABLE:
		return LEAK_REACHABLE;
	case MARK_POSSIBLE:
		return LEAK_POSSIBLY_LOST;
	case MARK_INDIRECT:
		return LEAK_INDIRECTLY_LOST;
	case MARK_UNREACHED:
		break;
	}
	return LEAK_DEFINITELY_LOST;
}

int leakcheck_classify(struct leakcheck *lc, struct leakcheck_totals *totals)
{
	struct out_edges g = { 0 };
	struct mark_stack s = { 0 };
	size_t i, n = lc->n;
	int err = -ENOMEM;

	if (lc->classified)
		return -EINVAL;
	if (lc->scan_err)
		return lc->scan_err;
	lc->state = array_alloc(n, sizeof(*lc->state), true);
	lc->indirect = array_alloc(n, sizeof(*lc->indirect), true);
	lc->via = array_alloc(n, sizeof(*lc->via), false);
	lc->pos = array_alloc(n, sizeof(*lc->pos), false);
	s.items = array_alloc(n, sizeof(*s.items), false);
	if (!lc->state || !lc->indirect || !lc->via || !lc->pos || !s.items || out_edges_build(lc, &g))
		goto out;
	for (i = 0; i < n; i++) {
		lc->via[i] = NONE;
		lc->pos[lc->orig[i]] = (uint32_t)i;
	}
	mark_from_roots(lc, &g, &s);
	gather_cliques(lc, &g, &s);
	lc->classified = true;
	if (totals) {
		memset(totals, 0, sizeof(*totals));
		for (i = 0; i < n; i++) {
			enum leak_kind k = kind_of(state_of(lc, (uint32_t)i));

			totals->bytes[k] += lc->size[i];
			totals->blocks[k]++;
			if (lc->state[i] & MARK_UNSURE) {
				totals->unsure_bytes += lc->size[i];
				totals->unsure_blocks++;
			}
		}
	}
	err = 0;
out:
	array_free(g.off);
	array_free(g.to);
	array_free(s.items);
	if (err) {
		array_free(lc->state);
		array_free(lc->indirect);
		array_free(lc->via);
		array_free(lc->pos);
		lc->state = NULL;
		lc->indirect = NULL;
		lc->via = NULL;
		lc->pos = NULL;
	}
	return err;
}

int leakcheck_verdict(const struct leakcheck *lc, size_t i, struct leak_verdict *out)
{
	uint32_t b;

	if (!lc->classified || i >= lc->n)
		return -EINVAL;
	b = lc->pos[i];
	out->kind = kind_of(state_of(lc, b));
	out->indirect_bytes = out->kind == LEAK_DEFINITELY_LOST ? lc->indirect[b] : 0;
	out->via = out->kind == LEAK_INDIRECTLY_LOST ? lc->orig[lc->via[b]] : SIZE_MAX;
	out->unsure = (lc->state[b] & MARK_UNSURE) != 0;
	return 0;
}

void leakcheck_free(struct leakcheck *lc)
{
	if (!lc)
		return;
	array_free(lc->start);
	array_free(lc->lend);
	array_free(lc->size);
	array_free(lc->orig);
	array_free(lc->pos);
	array_free(lc->root);
	array_free(lc->dense.slots);
	array_free(lc->dense_pages);
	array_free(lc->pages.slots);
	array_free(lc->regions.slots);
	free(lc->large);
	free(lc->edges);
	array_free(lc->state);
	array_free(lc->indirect);
	array_free(lc->via);
	free(lc);
}
