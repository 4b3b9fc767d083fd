/* unwinder_image_build (unwinder/unwinder.c): the unwind image of a live
 * process made from the tables dwleak holds for it, walked by the preload
 * library's walk (preload/walk.c's walk_dwarf, the walk the library will
 * take of its own stacks) and compared frame by frame with libdw's unwind
 * of the same stopped thread.  The children are test_unwind_step's
 * (stopped_child.h): deep in an -O2 recursion, asleep and in malloc under
 * a stripped -O2 C++ program, under -O0 frame pointers, in malloc in a
 * signal handler.  walk_dwarf reads the stack it walks in place, so the
 * child's stack, [sp, its mapping's end), is copied with process_vm_readv
 * to the same addresses here (MAP_FIXED_NOREPLACE; a range this process
 * has in use skips that case, said so).  Each walk is made without the
 * rule cache, cold and warm with it; a rule perturbed in the image must
 * make the walk differ from libdw, or the comparison proves nothing.
 * With root, the tables are also loaded into BPF maps of the walker's
 * shapes: freed then (counted as released), kept with
 * unwinder_keep_tables (the same image as from tables never loaded). */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "check.h"
#include "stopped_child.h"
#include "table.h"
#include "unwinder.h"
#include "walk.h"

#define PAGE 4096ull

/* Cases walked, and skipped because the child's stack collides with a
 * mapping of this process. */
static unsigned walked, skipped;

static uint64_t cache_mem[1u << 12];

/* The image of the stopped child, checked, and the stats of its build. */
struct image {
	void *blob;
	size_t len;
	struct walk_image img;
	struct unwinder_image_stats st;
};

static void image_build(struct child *c, const char *what, struct image *im)
{
	int err = unwinder_image_build(c->u, c->pid, &im->blob, &im->len, &im->st);

	CHECK(err == 0, "%s: unwinder_image_build: %s", what, strerror(-err));
	CHECK(walk_image_check(im->blob, im->len, &im->img) == 0, "%s: the image is refused", what);
	printf("%s: image of %u mappings (%u file mappings, %u not a file's), %u tables, %zu bytes\n", what,
	       im->st.in_image, im->st.mappings, im->st.no_file, im->st.tables, im->len);
	/* every object of these programs has a table, and the child's maps
	 * were read into the unwinder at its stop (child_maps) */
	EXPECT(im->st.in_image == im->st.mappings && im->st.in_image == im->img.nmappings,
	       "%s: %u of %u file mappings in the image (unknown %u, no table %u, released %u, outside %u)", what,
	       im->st.in_image, im->st.mappings, im->st.unknown, im->st.no_table, im->st.released,
	       im->st.outside);
	EXPECT(im->st.tables == im->img.ntables && im->st.tables >= 2, "%s: %u tables", what, im->st.tables);
}

/* The child's stack, from the page of SP to its mapping's end, copied to
 * the same addresses here into *B (the walk's bounds); false when this
 * process uses some of that range (the case is skipped). */
static bool stack_copy(const struct child *c, const char *what, uint64_t sp, struct walk_bounds *b)
{
	struct iovec local, remote;
	struct proc_map *maps;
	size_t n;
	ssize_t i;
	void *at;

	CHECK(proc_maps_read(c->pid, false, &maps, &n) == 0);
	i = proc_maps_find(maps, n, sp);
	CHECK(i >= 0, "%s: sp %#llx in no mapping", what, (unsigned long long)sp);
	b->lo = sp & ~(PAGE - 1);
	b->hi = maps[i].end;
	proc_maps_free(maps, n);
	at = mmap((void *)(uintptr_t)b->lo, b->hi - b->lo, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (at == MAP_FAILED || at != (void *)(uintptr_t)b->lo) {
		/* a kernel before 4.17 takes the flag as a hint: another address */
		if (at != MAP_FAILED)
			munmap(at, b->hi - b->lo);
		printf("SKIP %s: the child's stack [%#llx, %#llx) is in use here (%s)\n", what,
		       (unsigned long long)b->lo, (unsigned long long)b->hi,
		       at == MAP_FAILED ? strerror(errno) : "mapped elsewhere");
		return false;
	}
	local = remote = (struct iovec){ at, b->hi - b->lo };
	CHECK(process_vm_readv(c->pid, &local, 1, &remote, 1, 0) == (ssize_t)(b->hi - b->lo),
	      "%s: the child's stack not read", what);
	return true;
}

/* Frames where walk F and libdw differ (pc, or whether it is an
 * activation), counting a frame only one of them has; printed unless
 * QUIET. */
static unsigned frames_differ(const struct walk_frames *f, const struct oracle *o, uint32_t exact_pc, bool quiet)
{
	unsigned i, n = f->n > o->n ? f->n : o->n, bad = 0;

	for (i = 0; i < n; i++) {
		uint64_t pc = i < f->n ? f->pcs[i] & ~DWLEAK_FRAME_EXACT : 0;
		/* the first frame's pc is exact as its registers say */
		bool exact = i < f->n && (i ? !!(f->pcs[i] & DWLEAK_FRAME_EXACT) : exact_pc);
		bool same = i < f->n && i < o->n && pc == o->pc[i] && exact == o->activation[i];

		bad += !same;
		if (!quiet && (!same || getenv("VERBOSE")))
			printf("  #%-3u %c image %#-14llx libdw %#-14llx %s\n", i, same ? ' ' : '!',
			       (unsigned long long)pc, i < o->n ? (unsigned long long)o->pc[i] : 0ull,
			       i < o->n ? oracle_name(o, o->pc[i], o->activation[i]) : "");
	}
	return bad;
}

static bool frames_same(const struct walk_frames *a, const struct walk_frames *b)
{
	return a->n == b->n && a->end == b->end && !memcmp(a->pcs, b->pcs, a->n * sizeof(a->pcs[0]));
}

/* The rule the image gives the lookup pc of frame K of F, found through
 * the object's own table (the image copies a table's rules in order), for
 * the test to perturb in the image. */
static struct unwind_rule *image_rule_of(const struct child *c, const struct image *im,
					 const struct walk_frames *f, unsigned k)
{
	uint64_t lookup = k && !(f->pcs[k] & DWLEAK_FRAME_EXACT) ? f->pcs[k] - 1 : f->pcs[k] & ~DWLEAK_FRAME_EXACT;
	const struct unwind_image_mapping *m = NULL;
	const struct unwind_rule *r;
	struct unwind_object *o;
	struct file_key key;
	ssize_t i;
	uint32_t j;

	i = proc_maps_find(c->maps, c->nmaps, lookup);
	CHECK(i >= 0);
	key = (struct file_key){ .dev = c->maps[i].dev, .ino = c->maps[i].ino };
	o = unwinder_find(c->u, &key);
	CHECK(o && o->table);
	for (j = 0; j < im->img.nmappings && !m; j++)
		if (lookup >= im->img.maps[j].start && lookup < im->img.maps[j].end)
			m = &im->img.maps[j];
	CHECK(m, "frame %u's pc in no mapping of the image", k);
	r = table_lookup(o->table, lookup - m->bias, NULL, NULL);
	CHECK(r && r - o->table->rules < (ptrdiff_t)im->img.tables[m->table].nrules);
	return (struct unwind_rule *)(im->img.base + im->img.tables[m->table].rules_off) + (r - o->table->rules);
}

/* Builds the stopped child's image, walks its stack over it every way,
 * compares with libdw; perturbs frame PERTURB's rule (-1: none). */
static void check_stop(struct child *c, const char *what, const struct user_regs_struct *g, unsigned min_frames,
		       int perturb)
{
	struct walk_regs regs = { .pc = g->rip, .sp = g->rsp, .bp = g->rbp, .exact_pc = 1 };
	struct walk_frames f, cold, warm, bad;
	struct walk_image cached;
	struct walk_bounds b;
	struct oracle o;
	struct image im;

	image_build(c, what, &im);
	if (!stack_copy(c, what, g->rsp, &b)) {
		skipped++;
		free(im.blob);
		return;
	}
	walked++;
	oracle_walk(c->pid, &o);
	walk_dwarf(&im.img, &regs, &b, &f);
	printf("%s: %u frames (%s), libdw %u (%s)\n", what, f.n, f.end == WALK_END_OK ? "to the outermost" : "cut short",
	       o.n, o.rc ? o.err : "to the outermost");
	EXPECT(frames_differ(&f, &o, regs.exact_pc, false) == 0, "%s: the image's walk and libdw differ", what);
	EXPECT(f.end == WALK_END_OK && o.rc == 0, "%s: walk end %u, libdw %d", what, f.end, o.rc);
	EXPECT(f.n >= min_frames, "%s: %u frames, want %u at least", what, f.n, min_frames);

	/* the rule cache: emptied, then filled by the walk before */
	cached = im.img;
	CHECK(walk_image_cache(&cached, cache_mem, sizeof(cache_mem)) > 0);
	walk_dwarf(&cached, &regs, &b, &cold);
	walk_dwarf(&cached, &regs, &b, &warm);
	EXPECT(frames_same(&cold, &f) && frames_same(&warm, &f), "%s: the cached walks differ", what);
	/* not 0 warm: two pcs of a walk may share a slot */
	EXPECT(cold.cache_misses > 0 && warm.cache_misses < cold.cache_misses, "%s: %u misses cold, %u warm, of %u",
	       what, cold.cache_misses, warm.cache_misses, f.n);

	if (perturb >= 0) {
		struct unwind_rule *r;
		unsigned differ;

		CHECK((unsigned)perturb + 1 < f.n);
		r = image_rule_of(c, &im, &f, (unsigned)perturb);
		CHECK(r->cfa_type == UNWIND_CFA_RSP || r->cfa_type == UNWIND_CFA_RBP);
		r->cfa_off += 8;
		walk_dwarf(&im.img, &regs, &b, &bad);
		differ = frames_differ(&bad, &o, regs.exact_pc, true);
		r->cfa_off -= 8;
		printf("%s: frame %u's rule perturbed in the image: %u frames differ from libdw\n", what, perturb,
		       differ);
		EXPECT(differ > 0, "%s: a perturbed rule went unnoticed", what);
	}
	dwfl_end(o.dwfl);
	munmap((void *)(uintptr_t)b.lo, b.hi - b.lo);
	free(im.blob);
}

/* An unwinder that knows none of the child's objects: every file mapping
 * counted as unknown, none silently gone, and an empty image still one
 * walk_image_check takes. */
static void check_unknown(const struct child *c)
{
	struct unwinder_image_stats st;
	struct walk_image img;
	struct unwinder *u;
	size_t len;
	void *blob;

	CHECK(unwinder_new(NULL, NULL, &u) == 0);
	CHECK(unwinder_image_build(u, c->pid, &blob, &len, &st) == 0);
	EXPECT(st.in_image == 0 && st.mappings > 0 && st.unknown == st.mappings && st.tables == 0,
	       "no object known: %u of %u in the image, %u unknown", st.in_image, st.mappings, st.unknown);
	EXPECT(walk_image_check(blob, len, &img) == 0 && img.nmappings == 0, "the empty image");
	free(blob);
	unwinder_free(u);
	EXPECT(unwinder_image_build(c->u, -1, &blob, &len, &st) < 0 && !blob, "no such process");
}

/* An unwinder of the child's objects whose tables went into BPF maps of
 * the walker's shapes, kept or not (KEEP); NULL when no map can be made
 * here (not root). */
static struct unwinder *loaded_unwinder(const struct child *c, bool keep)
{
	struct unwinder_maps m = { .proc_maps = -1, .proc_maps_cur = -1, .mappings = -1 };
	struct unwinder *u;
	uint64_t rows, rules;

	CHECK(unwinder_new(NULL, NULL, &u) == 0);
	unwinder_keep_tables(u, keep);
	CHECK(unwinder_add_process(u, c->pid) == 0);
	unwinder_needs(u, &rows, &rules);
	CHECK(rows && rules);
	m.rows_cap = (uint32_t)rows;
	m.rules_cap = (uint32_t)rules;
	m.pages_cap = (uint32_t)rows; /* a page holds a row at least */
	m.tables = bpf_map_create(BPF_MAP_TYPE_HASH, "img_tables", sizeof(struct file_key),
				  sizeof(struct table_info), 64, NULL);
	m.pages = bpf_map_create(BPF_MAP_TYPE_HASH, "img_pages", sizeof(struct page_key), sizeof(struct unwind_page),
				 m.pages_cap, NULL);
	m.rows = bpf_map_create(BPF_MAP_TYPE_ARRAY, "img_rows", 4, sizeof(struct unwind_row), m.rows_cap, NULL);
	m.rules = bpf_map_create(BPF_MAP_TYPE_ARRAY, "img_rules", 4, sizeof(struct unwind_rule), m.rules_cap, NULL);
	if (m.tables < 0 || m.pages < 0 || m.rows < 0 || m.rules < 0) {
		printf("SKIP loaded tables: no BPF map (%s)\n", strerror(errno));
		unwinder_free(u);
		u = NULL;
	} else {
		unwinder_set_maps(u, &m);
		CHECK(unwinder_load_pending(u) > 0, "no table loaded");
	}
	/* the caller's fds, which the unwinder writes only while it loads:
	 * closed now, as no image build reads the maps */
	close(m.tables);
	close(m.pages);
	close(m.rows);
	close(m.rules);
	return u;
}

/* Tables loaded into the walker's maps: freed, every mapping counted as
 * released; kept, the image is byte for byte the one from tables never
 * loaded (C's unwinder). */
static void check_loaded(const struct child *c)
{
	struct unwinder_image_stats st;
	struct unwinder *u;
	size_t len, len0;
	void *blob, *blob0;

	if (!(u = loaded_unwinder(c, false)))
		return;
	CHECK(unwinder_image_build(u, c->pid, &blob, &len, &st) == 0);
	EXPECT(st.in_image == 0 && st.mappings > 0 && st.released == st.mappings,
	       "tables freed once loaded: %u of %u in the image, %u released", st.in_image, st.mappings, st.released);
	free(blob);
	unwinder_free(u);

	CHECK(u = loaded_unwinder(c, true));
	CHECK(unwinder_image_build(u, c->pid, &blob, &len, &st) == 0);
	CHECK(unwinder_image_build(c->u, c->pid, &blob0, &len0, NULL) == 0);
	EXPECT(st.in_image == st.mappings && len == len0 && !memcmp(blob, blob0, len),
	       "tables kept once loaded: %u of %u in the image, %zu bytes, %zu never loaded", st.in_image,
	       st.mappings, len, len0);
	printf("loaded tables: freed, %u mappings released; kept, the same image\n", st.mappings);
	free(blob);
	free(blob0);
	unwinder_free(u);
}

int main(void)
{
	struct user_regs_struct g;
	struct child c;
	char *path;

	path = testdata_path("deep_recursion");
	child_start(&c, path, (char *[]){ path, "--depth", "40", "--iterations", "1", NULL });
	run_to(&c, "/deep_recursion", "leak_at_bottom", &g);
	check_stop(&c, "deep_recursion at leak_at_bottom", &g, 44, -1);
	check_unknown(&c);
	check_loaded(&c);
	run_to(&c, "/libc.so.6", "malloc", &g);
	check_stop(&c, "deep_recursion at malloc", &g, 45, 10);
	child_end(&c);
	free(path);

	path = testdata_path("seed_O2_stripped");
	child_start(&c, path,
		    (char *[]){ path, "--delay-ms", "1000", "--interval-ms", "1000", "--iterations", "0", NULL });
	run_to_sleep(&c, &g);
	check_stop(&c, "seed_O2_stripped asleep", &g, 6, -1);
	run_to(&c, "/libc.so.6", "malloc", &g);
	check_stop(&c, "seed_O2_stripped at malloc", &g, 7, 2);
	child_end(&c);
	free(path);

	path = testdata_path("seed_O0_fp");
	child_start(&c, path, (char *[]){ path, "--iterations", "0", NULL });
	run_to(&c, "/seed_O0_fp", "_ZN7LeakLib14slowMemoryLeakEv", &g);
	run_to(&c, "/libc.so.6", "malloc", &g);
	check_stop(&c, "seed_O0_fp at malloc", &g, 8, 4);
	child_end(&c);
	free(path);

	/* the walk crosses the signal frame: its words are on the copied stack */
	path = testdata_path("sig_in_malloc");
	child_start(&c, path, (char *[]){ path, "--iterations", "1", NULL });
	run_to(&c, "/sig_in_malloc", "on_sigsys", &g);
	run_to(&c, "/libc.so.6", "malloc", &g);
	check_stop(&c, "sig_in_malloc at malloc in its handler", &g, 10, 1);
	child_end(&c);
	free(path);

	printf("%u stops walked over the image, %u skipped\n", walked, skipped);
	if (!walked && !check_failures) {
		printf("every child's stack collided with this process's mappings\n");
		return 77;
	}
	return check_failures ? 1 : 0;
}
