/* The svg report: the stacks of a report merged into a tree and drawn as an
 * interactive flame graph of outstanding bytes, one self-contained file (inline
 * CSS and script, generic fonts) that any browser opens without a network. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "svg.h"

/* ---- Layout ---- */

/*
 * In SVG user units (px at 100%).  The flame grows upwards: the root ("all")
 * is the bottom row and each frame's callees sit on top of it.  Text uses the
 * generic monospace family, whose advance is 0.6 em in the fonts Linux
 * systems ship (DejaVu Sans Mono, Liberation Mono), so this writer and the
 * script fit a label into a box by counting characters, with one rule.
 */
#define FG_IMAGE_W 1200.0
#define FG_PAD 10.0                       /* left and right margin */
#define FG_GRAPH_W (FG_IMAGE_W - 2 * FG_PAD)
#define FG_ROW_H 16.0                     /* one frame row; boxes are 1 px lower */
#define FG_FONT_PX 12.0
#define FG_TITLE_PX 17.0
#define FG_CHAR_W (0.6 * FG_FONT_PX)      /* monospace advance */
#define FG_TITLE_CHARS 90                 /* keeps the title clear of the buttons */
#define FG_SUBTITLE_CHARS 160             /* FG_GRAPH_W / FG_CHAR_W */
#define FG_LABEL_PAD 3.0                  /* label inset on each side of its box */
#define FG_MIN_LABEL_CHARS 3              /* fewer fit: the box has no label */
#define FG_MIN_BOX_W 0.1                  /* narrower boxes fold into their parent */
#define FG_HEAD_H 80.0                    /* title, subtitle and legend above the graph */
#define FG_FOOT_H 30.0                    /* the details line below it */
#define FG_EMPTY_H 120.0                  /* height of the "nothing outstanding" image */
#define FG_MATCH_FILL "rgb(230,0,230)"    /* search hits; in no palette below */

#define ELLIPSIS "\xe2\x80\xa6"

/* ---- Frame kinds and colours ---- */

/*
 * Which colour a frame gets, first rule that matches:
 *  1. allocator: the function is an allocation entry point (malloc, calloc,
 *     realloc, reallocarray, free, cfree, posix_memalign, aligned_alloc,
 *     memalign, valloc, pvalloc, malloc_usable_size, mmap, mmap64, munmap,
 *     mremap), any "operator new..." or "operator delete...", the tcmalloc
 *     (tc_*) and jemalloc (je_*, *allocx) entry points; or the frame is in
 *     libc and its name is a glibc malloc internal (_int_*, __libc_malloc...,
 *     sysmalloc, tcache_*, malloc_*, __malloc_*, _mid_memalign); or the
 *     module is tcmalloc or jemalloc itself (everything in there is the
 *     allocator's business).
 *  2. user: the main executable (the module is the report's command), or any
 *     module outside the system library directories of rule 3, which makes
 *     the program's own shared libraries (./libfoo.so, /opt/app/lib) user
 *     code too.
 *  3. system: a module under /lib, /lib32, /lib64, /usr/lib, /usr/lib32,
 *     /usr/lib64 or /usr/libexec, or the kernel's [vdso] and [vsyscall].
 *  4. other: no module known, and the boxes dwleak adds itself ("all",
 *     "[incomplete: why]", "[N more stacks]").
 * Within a kind the shade is a hash of the name, so neighbours differ and a
 * function keeps its colour from one report to the next.
 */
enum fg_kind {
	FG_USER,
	FG_SYSTEM,
	FG_ALLOC,
	FG_OTHER,
	FG_NKINDS
};

/* Channel c of a kind's colour is base[c] + span[c] * v, v in [0, 1). */
static const struct fg_palette {
	const char *name;   /* data-k attribute, for scripts and tests */
	const char *legend;
	unsigned char base[3], span[3];
} fg_palettes[FG_NKINDS] = {
	[FG_USER] = { "user", "your code (executable and its own libraries)",
		      { 205, 70, 20 }, { 50, 90, 40 } },
	[FG_SYSTEM] = { "system", "system libraries (/lib, /usr/lib)",
			{ 70, 140, 205 }, { 50, 60, 50 } },
	[FG_ALLOC] = { "alloc", "allocator", { 70, 175, 70 }, { 60, 55, 50 } },
	[FG_OTHER] = { "other", "unknown / added by dwleak",
		       { 165, 165, 165 }, { 35, 35, 35 } },
};

static const char *const alloc_functions[] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "cfree",
	"posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
	"malloc_usable_size", "mmap", "mmap64", "munmap", "mremap",
	"mallocx", "rallocx", "xallocx", "dallocx", "sdallocx", "nallocx",
};
static const char *const alloc_prefixes[] = { "operator new", "operator delete", "tc_", "je_" };
static const char *const libc_alloc_prefixes[] = {
	"_int_", "__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_free",
	"__libc_memalign", "__libc_valloc", "__libc_pvalloc", "_mid_memalign",
	"sysmalloc", "tcache_", "malloc_", "__malloc_",
};
static const char *const allocator_modules[] = { "libtcmalloc", "libjemalloc" };
static const char *const system_dirs[] = {
	"/lib/", "/lib32/", "/lib64/", "/usr/lib/", "/usr/lib32/", "/usr/lib64/", "/usr/libexec/",
};
static const char *const kernel_modules[] = { "[vdso]", "[vsyscall]" };

#define N(a) (sizeof(a) / sizeof((a)[0]))

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool in_list(const char *s, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

static bool prefix_in_list(const char *s, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (has_prefix(s, list[i]))
			return true;
	return false;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

/* The rule in the comment above enum fg_kind; COMMAND may be NULL. */
static enum fg_kind frame_kind(const struct report_frame *fr, const char *command)
{
	const char *fn = fr->function, *mod = fr->module;
	const char *base = mod ? base_name(mod) : NULL;
	bool libc = base && (has_prefix(base, "libc.so") || has_prefix(base, "libc-"));

	if (fn && (in_list(fn, alloc_functions, N(alloc_functions)) ||
		   prefix_in_list(fn, alloc_prefixes, N(alloc_prefixes)) ||
		   (libc && prefix_in_list(fn, libc_alloc_prefixes, N(libc_alloc_prefixes)))))
		return FG_ALLOC;
	if (base && prefix_in_list(base, allocator_modules, N(allocator_modules)))
		return FG_ALLOC;
	if (!mod)
		return FG_OTHER;
	if (command && strcmp(mod, command) == 0)
		return FG_USER;
	if (prefix_in_list(mod, system_dirs, N(system_dirs)) ||
	    in_list(mod, kernel_modules, N(kernel_modules)))
		return FG_SYSTEM;
	return FG_USER;
}

/* FNV-1a, 64 bits. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

#define HASH_SEED 0xcbf29ce484222325ULL

static uint64_t hash_str(uint64_t h, const char *s)
{
	/* The NUL goes in too, so ("ab", "c") and ("a", "bc") differ. */
	return hash_bytes(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

/* Writes the "rgb(r,g,b)" of kind K for NAME into BUF (24 bytes suffice). */
static void kind_colour(char *buf, size_t size, enum fg_kind k, const char *name)
{
	const struct fg_palette *p = &fg_palettes[k];
	uint64_t h = name ? hash_str(HASH_SEED, name) : 0x8000800080008000ULL;
	double v[3];
	int c, rgb[3];

	for (c = 0; c < 3; c++)
		v[c] = (double)((h >> (16 * c)) & 0xffff) / 65536.0;
	if (k == FG_OTHER) /* greys: one value for all three channels */
		v[1] = v[2] = v[0];
	for (c = 0; c < 3; c++)
		rgb[c] = p->base[c] + (int)(p->span[c] * v[c]);
	snprintf(buf, size, "rgb(%d,%d,%d)", rgb[0], rgb[1], rgb[2]);
}

/* ---- The tree ---- */

#define NO_NODE SIZE_MAX

/*
 * One box of the graph: a frame reached through one chain of callers.  Node 0
 * is the root.  A node's BYTES and ALLOCATIONS are at least the sums over its
 * children (a stack ending at the node adds to it alone); siblings differ in
 * (NAME, MODULE, INLINED).  Children form a list through SIBLING, sorted by
 * bytes, largest first, once tree_sort() has run.
 */
struct fg_node {
	const char *name;     /* the report's string, or OWNED */
	char *owned;          /* a name this writer formatted, else NULL */
	const char *module;   /* borrowed from the report; NULL = none */
	enum fg_kind kind;
	bool inlined;
	uint64_t bytes;
	uint64_t allocations;
	uint64_t hash;        /* of (parent, name, module, inlined) */
	size_t parent, child, sibling;
};

/*
 * The nodes in one growing array, and an open-addressing index over them by
 * their hash so that merging a stack costs a lookup per frame, not a scan of
 * the siblings.  NSLOTS is a power of two kept above twice N.
 */
struct fg_tree {
	struct fg_node *nodes;
	size_t n, cap;
	size_t *slots;        /* node indices; NO_NODE = empty */
	size_t nslots;
};

static void tree_free(struct fg_tree *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->nodes[i].owned);
	free(t->nodes);
	free(t->slots);
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static uint64_t node_hash(size_t parent, const char *name, const char *module, bool inlined)
{
	uint64_t h = hash_bytes(HASH_SEED, &parent, sizeof(parent));

	h = hash_str(h, name);
	h = hash_str(h, module);
	return hash_bytes(h, &inlined, sizeof(inlined));
}

static int tree_rehash(struct fg_tree *t, size_t nslots)
{
	size_t *slots = malloc(nslots * sizeof(*slots));
	size_t i, j;

	if (!slots)
		return -ENOMEM;
	for (i = 0; i < nslots; i++)
		slots[i] = NO_NODE;
	for (i = 0; i < t->n; i++) {
		for (j = t->nodes[i].hash & (nslots - 1); slots[j] != NO_NODE; j = (j + 1) & (nslots - 1))
			;
		slots[j] = i;
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = nslots;
	return 0;
}

/*
 * Sets *OUT to the child of PARENT with the given key, adding an empty one
 * when there is none.  OWNED (NAME itself, when the caller formatted it) is
 * kept by a new node and freed otherwise, also on error.
 */
static int tree_child(struct fg_tree *t, size_t parent, const char *name, char *owned,
		      const char *module, enum fg_kind kind, bool inlined, size_t *out)
{
	uint64_t h = node_hash(parent, name, module, inlined);
	struct fg_node *nd;
	size_t j;

	for (j = h & (t->nslots - 1); t->slots[j] != NO_NODE; j = (j + 1) & (t->nslots - 1)) {
		nd = &t->nodes[t->slots[j]];
		if (nd->hash == h && nd->parent == parent && nd->inlined == inlined &&
		    strcmp(nd->name, name) == 0 && str_eq(nd->module, module)) {
			free(owned);
			*out = t->slots[j];
			return 0;
		}
	}
	if (t->n == t->cap) {
		size_t cap = t->cap * 2;
		struct fg_node *nodes = realloc(t->nodes, cap * sizeof(*nodes));

		if (!nodes) {
			free(owned);
			return -ENOMEM;
		}
		t->nodes = nodes;
		t->cap = cap;
	}
	nd = &t->nodes[t->n];
	*nd = (struct fg_node){
		.name = name, .owned = owned, .module = module, .kind = kind,
		.inlined = inlined, .hash = h, .parent = parent,
		.child = NO_NODE, .sibling = t->nodes[parent].child,
	};
	t->nodes[parent].child = t->n;
	t->slots[j] = t->n;
	*out = t->n++;
	/* On failure the node is in the array and tree_free() frees OWNED. */
	return 2 * t->n >= t->nslots ? tree_rehash(t, 2 * t->nslots) : 0;
}

static int tree_init(struct fg_tree *t)
{
	*t = (struct fg_tree){ .cap = 64 };
	t->nodes = malloc(t->cap * sizeof(*t->nodes));
	if (!t->nodes)
		return -ENOMEM;
	t->nodes[0] = (struct fg_node){
		.name = "all", .kind = FG_OTHER, .parent = NO_NODE,
		.child = NO_NODE, .sibling = NO_NODE,
	};
	t->n = 1;
	return tree_rehash(t, 256);
}

/* How a report frame is named, as in the folded format: its function, else
 * "[module]+0xELF", else "[unknown]+0xADDRESS". */
static int frame_name(const struct report_frame *fr, const char **name, char **owned)
{
	int len;

	*owned = NULL;
	if (fr->function) {
		*name = fr->function;
		return 0;
	}
	if (fr->module)
		len = asprintf(owned, "[%s]+0x%" PRIx64, base_name(fr->module), fr->elf_address);
	else
		len = asprintf(owned, "[unknown]+0x%" PRIx64, fr->address);
	if (len < 0) {
		*owned = NULL;
		return -ENOMEM;
	}
	*name = *owned;
	return 0;
}

/* Adds BYTES and ALLOCATIONS to node I and its ancestors. */
static void tree_charge(struct fg_tree *t, size_t i, uint64_t bytes, uint64_t allocations)
{
	for (; i != NO_NODE; i = t->nodes[i].parent) {
		t->nodes[i].bytes += bytes;
		t->nodes[i].allocations += allocations;
	}
}

/* Merges stack S, outermost frame first, under the root.  A walk that did not
 * reach the outermost frame hangs under an "[incomplete: WHY]" box, so it is
 * not mistaken for a caller chain that starts where the walk gave up. */
static int tree_add_stack(struct fg_tree *t, const struct report_stack *s, const char *command)
{
	size_t at = 0, j;
	int err;

	if (s->truncated || s->unwind_error) {
		char *name;

		if (asprintf(&name, "[incomplete: %s]",
			     s->unwind_error ? s->unwind_error : "depth limit") < 0)
			return -ENOMEM;
		err = tree_child(t, at, name, name, NULL, FG_OTHER, false, &at);
		if (err)
			return err;
	}
	if (!s->nframes) {
		err = tree_child(t, at, "[unknown]", NULL, NULL, FG_OTHER, false, &at);
		if (err)
			return err;
	}
	for (j = s->nframes; j-- > 0;) {
		const struct report_frame *fr = &s->frames[j];
		const char *name;
		char *owned;

		err = frame_name(fr, &name, &owned);
		if (err)
			return err;
		err = tree_child(t, at, name, owned, fr->module, frame_kind(fr, command),
				 fr->inlined, &at);
		if (err)
			return err;
	}
	tree_charge(t, at, s->bytes, s->allocations);
	return 0;
}

static int node_cmp(const void *pa, const void *pb)
{
	const struct fg_node *a = *(const struct fg_node *const *)pa;
	const struct fg_node *b = *(const struct fg_node *const *)pb;
	int c;

	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	c = strcmp(a->name, b->name);
	if (c)
		return c;
	c = strcmp(a->module ? a->module : "", b->module ? b->module : "");
	if (c)
		return c;
	return (int)a->inlined - (int)b->inlined;
}

/* Sorts every child list by bytes, largest first (then by name, so the
 * picture does not depend on the order of the report's stacks). */
static int tree_sort(struct fg_tree *t)
{
	struct fg_node **v = malloc(t->n * sizeof(*v));
	size_t i, c, k;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		k = 0;
		for (c = t->nodes[i].child; c != NO_NODE; c = t->nodes[c].sibling)
			v[k++] = &t->nodes[c];
		if (k < 2)
			continue;
		qsort(v, k, sizeof(*v), node_cmp);
		t->nodes[i].child = (size_t)(v[0] - t->nodes);
		for (c = 0; c + 1 < k; c++)
			v[c]->sibling = (size_t)(v[c + 1] - t->nodes);
		v[k - 1]->sibling = NO_NODE;
	}
	free(v);
	return 0;
}

/*
 * Builds the tree of R's stacks that have bytes: the first TOP of them in
 * report_sort() order (0 = all) frame by frame, the rest as one
 * "[N more stacks]" box under the root.  The caller frees T, also on error.
 */
static int tree_build(struct fg_tree *t, const struct report *r, unsigned int top)
{
	const struct report_stack **v = NULL;
	uint64_t more_bytes = 0, more_allocs = 0;
	size_t i, n = r->nstacks, shown, more = 0;
	int err;

	err = tree_init(t);
	if (err)
		return err;
	err = report_stacks_ordered(r, &v);
	if (err)
		return err;
	shown = top && top < n ? top : n;
	for (i = 0; i < n && !err; i++) {
		if (!v[i]->bytes)
			continue;
		if (i < shown) {
			err = tree_add_stack(t, v[i], r->command);
		} else {
			more_bytes += v[i]->bytes;
			more_allocs += v[i]->allocations;
			more++;
		}
	}
	if (!err && more_bytes) {
		char *name;
		size_t at;

		if (asprintf(&name, "[%zu more stack%s]", more, more == 1 ? "" : "s") < 0) {
			err = -ENOMEM;
		} else {
			err = tree_child(t, 0, name, name, NULL, FG_OTHER, false, &at);
			if (!err)
				tree_charge(t, at, more_bytes, more_allocs);
		}
	}
	free(v);
	if (!err)
		err = tree_sort(t);
	return err;
}

/* ---- XML text ---- */

/*
 * Decodes the UTF-8 sequence at S into *CP and returns its length, or returns
 * 0 for a byte that starts no well-formed sequence (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF).
 */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t len, i;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		*cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		*cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		*cp = c & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
			return 0;
		*cp = *cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && *cp < 0x800) || (len == 4 && *cp < 0x10000) ||
	    (*cp >= 0xd800 && *cp <= 0xdfff) || *cp > 0x10ffff)
		return 0;
	return len;
}

/* Characters STR shows as: one per code point and one per broken byte. */
static size_t xml_chars(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = 0, len;
	uint32_t cp;

	while (*s) {
		len = utf8_decode(s, &cp);
		s += len ? len : 1;
		n++;
	}
	return n;
}

/*
 * Writes at most MAX characters of STR as XML text, fit for element content
 * and quoted attributes alike: the five markup characters as entities, and
 * what XML 1.0 cannot carry or a label should not (control characters, broken
 * UTF-8, U+FFFE, U+FFFF) as U+FFFD.
 */
static void xml_put(FILE *f, const char *str, size_t max)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len;
	uint32_t cp;

	for (; *s && max; max--) {
		len = utf8_decode(s, &cp);
		if (!len || cp < 0x20 || cp == 0x7f || cp == 0xfffe || cp == 0xffff) {
			fputs("\xef\xbf\xbd", f);
			s += len ? len : 1;
			continue;
		}
		switch (cp) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: fwrite(s, 1, len, f); break;
		}
		s += len;
	}
}

/* STR in at most MAX characters, the last one an ellipsis when it is cut. */
static void xml_put_fit(FILE *f, const char *str, size_t max)
{
	if (xml_chars(str) <= max) {
		xml_put(f, str, max);
	} else if (max) {
		xml_put(f, str, max - 1);
		fputs(ELLIPSIS, f);
	}
}

/* Characters that fit in a label of a box WIDTH wide; the script's fit() uses
 * the same rule when zooming. */
static size_t label_chars(double width)
{
	double n = (width - 2 * FG_LABEL_PAD) / FG_CHAR_W;

	return n < FG_MIN_LABEL_CHARS ? 0 : (size_t)n;
}

/* ---- The document ---- */

/* Shared by the graph and the empty image; a printf format taking
 * FG_FONT_PX and FG_TITLE_PX. */
static const char svg_style[] =
	"text { font-family: monospace; font-size: %.0fpx; fill: rgb(0,0,0); }\n"
	"#title { font-size: %.0fpx; }\n"
	".f rect { cursor: pointer; }\n"
	".f text { pointer-events: none; }\n"
	".f:hover rect { stroke: rgb(0,0,0); stroke-width: 0.6; }\n"
	".f.inl text { font-style: italic; }\n"
	".f.anc { opacity: 0.55; }\n"
	".f.hid, .button.off { display: none; }\n"
	".button { cursor: pointer; fill: rgb(40,40,160); }\n"
	".button:hover { text-decoration: underline; }\n";

/*
 * The interactive part.  Each box is a <g class="f"> carrying its frame in
 * data-* attributes: n name, m module, b bytes, a allocations, o offset (the
 * bytes left of it in its row), d depth (0 = root).  A box lies inside
 * another when it is deeper and its [o, o + b) is within the other's, so
 * zooming and the search's union of matches need no tree in the script.
 */
static const char svg_script[] =
	"\"use strict\";\n"
	"var fg;\n"
	"function fg_init() {\n"
	"\tvar root = document.getElementById(\"frames\");\n"
	"\tfg = {\n"
	"\t\ttotal: +root.getAttribute(\"data-total\"),\n"
	"\t\tpad: +root.getAttribute(\"data-pad\"),\n"
	"\t\twidth: +root.getAttribute(\"data-width\"),\n"
	"\t\tcharW: +root.getAttribute(\"data-char-w\"),\n"
	"\t\tlabelPad: +root.getAttribute(\"data-label-pad\"),\n"
	"\t\tminChars: +root.getAttribute(\"data-min-chars\"),\n"
	"\t\tframes: [], term: \"\",\n"
	"\t\tdetails: document.getElementById(\"details\"),\n"
	"\t\tmatched: document.getElementById(\"matched\"),\n"
	"\t\treset: document.getElementById(\"reset\"),\n"
	"\t\tclear: document.getElementById(\"clear\")\n"
	"\t};\n"
	"\tvar boxes = root.getElementsByTagName(\"g\");\n"
	"\tfor (var i = 0; i < boxes.length; i++) {\n"
	"\t\tvar el = boxes[i];\n"
	"\t\tvar fr = {\n"
	"\t\t\tel: el,\n"
	"\t\t\trect: el.getElementsByTagName(\"rect\")[0],\n"
	"\t\t\tlabel: el.getElementsByTagName(\"text\")[0],\n"
	"\t\t\tname: el.getAttribute(\"data-n\"),\n"
	"\t\t\tmodule: el.getAttribute(\"data-m\") || \"\",\n"
	"\t\t\tbytes: +el.getAttribute(\"data-b\"),\n"
	"\t\t\tallocs: +el.getAttribute(\"data-a\"),\n"
	"\t\t\toff: +el.getAttribute(\"data-o\"),\n"
	"\t\t\tdepth: +el.getAttribute(\"data-d\"),\n"
	"\t\t\tinlined: el.classList.contains(\"inl\")\n"
	"\t\t};\n"
	"\t\tfr.fill = fr.rect.getAttribute(\"fill\");\n"
	"\t\tel.addEventListener(\"mouseover\", show.bind(null, fr));\n"
	"\t\tel.addEventListener(\"mouseout\", function () { fg.details.textContent = \" \"; });\n"
	"\t\tel.addEventListener(\"click\", zoom.bind(null, fr));\n"
	"\t\tfg.frames.push(fr);\n"
	"\t}\n"
	"\tfg.reset.addEventListener(\"click\", unzoom);\n"
	"\tfg.clear.addEventListener(\"click\", function () { highlight(\"\"); });\n"
	"\tdocument.getElementById(\"search\").addEventListener(\"click\", search);\n"
	"\twindow.addEventListener(\"keydown\", function (e) {\n"
	"\t\tif ((e.ctrlKey || e.metaKey) && e.key == \"f\") {\n"
	"\t\t\te.preventDefault();\n"
	"\t\t\tsearch();\n"
	"\t\t} else if (e.key == \"Escape\") {\n"
	"\t\t\thighlight(\"\");\n"
	"\t\t}\n"
	"\t});\n"
	"}\n"
	"function human(b) {\n"
	"\tvar units = [\"B\", \"KiB\", \"MiB\", \"GiB\", \"TiB\", \"PiB\"], u = 0;\n"
	"\twhile (b >= 1024 && u + 1 < units.length) {\n"
	"\t\tb /= 1024;\n"
	"\t\tu++;\n"
	"\t}\n"
	"\treturn (u ? b.toFixed(1) : b) + \" \" + units[u];\n"
	"}\n"
	"function share(b) {\n"
	"\treturn (fg.total ? 100 * b / fg.total : 0).toFixed(2) + \"%\";\n"
	"}\n"
	"function show(fr) {\n"
	"\tvar t = fr.name + (fr.inlined ? \" (inlined)\" : \"\");\n"
	"\tif (fr.module)\n"
	"\t\tt += \" in \" + fr.module;\n"
	"\tt += \": \" + human(fr.bytes) + \" (\" + share(fr.bytes) + \"), \" + fr.allocs +\n"
	"\t\t(fr.allocs == 1 ? \" allocation\" : \" allocations\");\n"
	"\tfg.details.textContent = t;\n"
	"}\n"
	"function fit(name, w) {\n"
	"\tvar n = (w - 2 * fg.labelPad) / fg.charW;\n"
	"\tif (n < fg.minChars)\n"
	"\t\treturn \"\";\n"
	"\tn = Math.floor(n);\n"
	"\tvar chars = Array.from(name);\n"
	"\treturn chars.length <= n ? name : chars.slice(0, n - 1).join(\"\") + \"\\u2026\";\n"
	"}\n"
	"function place(fr, x, w) {\n"
	"\tfr.rect.setAttribute(\"x\", x.toFixed(2));\n"
	"\tfr.rect.setAttribute(\"width\", w.toFixed(2));\n"
	"\tfr.label.setAttribute(\"x\", (x + fg.labelPad).toFixed(2));\n"
	"\tfr.label.textContent = fit(fr.name, w);\n"
	"}\n"
	"function zoom(z) {\n"
	"\tif (z.depth == 0) {\n"
	"\t\tunzoom();\n"
	"\t\treturn;\n"
	"\t}\n"
	"\tfg.frames.forEach(function (fr) {\n"
	"\t\tvar cls = fr.el.classList;\n"
	"\t\tif (fr.depth >= z.depth && fr.off >= z.off && fr.off + fr.bytes <= z.off + z.bytes) {\n"
	"\t\t\tcls.remove(\"hid\", \"anc\");\n"
	"\t\t\tplace(fr, fg.pad + (fr.off - z.off) / z.bytes * fg.width, fr.bytes / z.bytes * fg.width);\n"
	"\t\t} else if (fr.depth < z.depth && fr.off <= z.off && fr.off + fr.bytes >= z.off + z.bytes) {\n"
	"\t\t\tcls.remove(\"hid\");\n"
	"\t\t\tcls.add(\"anc\");\n"
	"\t\t\tplace(fr, fg.pad, fg.width);\n"
	"\t\t} else {\n"
	"\t\t\tcls.add(\"hid\");\n"
	"\t\t}\n"
	"\t});\n"
	"\tfg.reset.classList.remove(\"off\");\n"
	"}\n"
	"function unzoom() {\n"
	"\tfg.frames.forEach(function (fr) {\n"
	"\t\tfr.el.classList.remove(\"hid\", \"anc\");\n"
	"\t\tplace(fr, fg.pad + fr.off / fg.total * fg.width, fr.bytes / fg.total * fg.width);\n"
	"\t});\n"
	"\tfg.reset.classList.add(\"off\");\n"
	"}\n"
	"function search() {\n"
	"\tvar term = window.prompt(\"Search functions and modules (a regular expression; empty clears):\", fg.term);\n"
	"\tif (term !== null)\n"
	"\t\thighlight(term);\n"
	"}\n"
	"function highlight(term) {\n"
	"\tvar re = null, spans = [];\n"
	"\tfg.term = term;\n"
	"\tif (term) {\n"
	"\t\ttry {\n"
	"\t\t\tre = new RegExp(term);\n"
	"\t\t} catch (e) {\n"
	"\t\t\tre = { test: function (s) { return s.indexOf(term) >= 0; } };\n"
	"\t\t}\n"
	"\t}\n"
	"\tfg.frames.forEach(function (fr) {\n"
	"\t\tvar hit = re !== null && fr.depth > 0 && (re.test(fr.name) || re.test(fr.module));\n"
	"\t\tfr.rect.setAttribute(\"fill\", hit ? \"" FG_MATCH_FILL "\" : fr.fill);\n"
	"\t\tif (hit)\n"
	"\t\t\tspans.push([fr.off, fr.off + fr.bytes]);\n"
	"\t});\n"
	"\tif (re === null) {\n"
	"\t\tfg.matched.textContent = \" \";\n"
	"\t\tfg.clear.classList.add(\"off\");\n"
	"\t\treturn;\n"
	"\t}\n"
	"\t/* A match inside another match counts once: sum the union of spans. */\n"
	"\tspans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });\n"
	"\tvar sum = 0, end = -1;\n"
	"\tspans.forEach(function (s) {\n"
	"\t\tif (s[1] > end) {\n"
	"\t\t\tsum += s[1] - Math.max(s[0], end);\n"
	"\t\t\tend = s[1];\n"
	"\t\t}\n"
	"\t});\n"
	"\tfg.matched.textContent = \"Matched: \" + share(sum) + \" (\" + human(sum) + \")\";\n"
	"\tfg.clear.classList.remove(\"off\");\n"
	"}\n"
	"fg_init();\n";

struct svg_out {
	FILE *f;
	const struct fg_tree *t;
	double scale;   /* px per byte */
	double root_y;  /* top of the root's row */
};

static bool box_visible(const struct svg_out *o, const struct fg_node *nd)
{
	return (double)nd->bytes * o->scale >= FG_MIN_BOX_W;
}

/* Rows above node I that have a visible box (0 for a leaf). */
static int visible_height(const struct svg_out *o, size_t i)
{
	int h = 0, ch;
	size_t c;

	for (c = o->t->nodes[i].child; c != NO_NODE; c = o->t->nodes[c].sibling) {
		if (!box_visible(o, &o->t->nodes[c]))
			break; /* the rest are narrower still */
		ch = 1 + visible_height(o, c);
		if (ch > h)
			h = ch;
	}
	return h;
}

static void svg_open(FILE *f, double height, const struct report *r)
{
	char pid[32];

	snprintf(pid, sizeof(pid), "%d", r->pid);
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		   "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		   "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
		FG_IMAGE_W, height, FG_IMAGE_W, height);
	fprintf(f, "<title>dwleak: outstanding memory of pid %s (", pid);
	xml_put(f, r->command ? r->command : "unknown command", SIZE_MAX);
	fputs(")</title>\n<desc>A flame graph of the allocations still outstanding, by call stack, "
	      "written by dwleak: the outermost frame at the bottom, widths in bytes. "
	      "Hover for details, click to zoom, Ctrl-F to search.</desc>\n", f);
	fputs("<style type=\"text/css\"><![CDATA[\n", f);
	fprintf(f, svg_style, FG_FONT_PX, FG_TITLE_PX);
	fputs("]]></style>\n", f);
	fputs("<defs><linearGradient id=\"bg\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
	      "<stop offset=\"5%\" stop-color=\"rgb(238,238,238)\"/>"
	      "<stop offset=\"95%\" stop-color=\"rgb(238,238,176)\"/>"
	      "</linearGradient></defs>\n", f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"url(#bg)\"/>\n",
		FG_IMAGE_W, height);
}

/* The title and subtitle lines, centred. */
static void svg_titles(FILE *f, const struct report *r)
{
	char bytes[24], *line;
	const char *cmd = r->command ? r->command : "unknown command";
	int len;

	fprintf(f, "<text id=\"title\" x=\"%.1f\" y=\"24\" text-anchor=\"middle\">", FG_IMAGE_W / 2);
	len = asprintf(&line, "Outstanding memory of pid %d: %s", r->pid, cmd);
	xml_put_fit(f, len < 0 ? cmd : line, FG_TITLE_CHARS);
	if (len >= 0)
		free(line);
	fputs("</text>\n", f);

	report_human_bytes(bytes, sizeof(bytes), (double)r->totals.outstanding_bytes);
	fprintf(f, "<text id=\"subtitle\" x=\"%.1f\" y=\"44\" text-anchor=\"middle\">", FG_IMAGE_W / 2);
	len = asprintf(&line, "%s in %" PRIu64 " allocations from %" PRIu64 " stacks, traced %.1f s, "
			      "unwind %s; width = bytes still allocated, callers below callees",
		       bytes, r->totals.outstanding_allocations, r->totals.stacks,
		       r->duration_s, r->unwind ? r->unwind : "dwarf");
	if (len >= 0) {
		xml_put_fit(f, line, FG_SUBTITLE_CHARS);
		free(line);
	}
	fputs("</text>\n", f);
}

/* The buttons (top corners) and the colour legend (under the subtitle). */
static void svg_controls(FILE *f)
{
	char colour[24];
	double x = FG_PAD;
	int k;

	fprintf(f, "<text id=\"reset\" class=\"button off\" x=\"%.1f\" y=\"24\">Reset zoom</text>\n",
		FG_PAD);
	fprintf(f, "<text id=\"search\" class=\"button\" x=\"%.1f\" y=\"24\" text-anchor=\"end\">"
		   "Search</text>\n", FG_IMAGE_W - FG_PAD);
	fprintf(f, "<text id=\"clear\" class=\"button off\" x=\"%.1f\" y=\"44\" text-anchor=\"end\">"
		   "Clear search</text>\n", FG_IMAGE_W - FG_PAD);
	fputs("<g id=\"legend\">\n", f);
	for (k = 0; k < FG_NKINDS; k++) {
		kind_colour(colour, sizeof(colour), (enum fg_kind)k, NULL);
		fprintf(f, "<rect x=\"%.1f\" y=\"56\" width=\"12\" height=\"12\" rx=\"2\" fill=\"%s\"/>"
			   "<text x=\"%.1f\" y=\"66\">%s</text>\n",
			x, colour, x + 16, fg_palettes[k].legend);
		x += 16 + FG_CHAR_W * (double)strlen(fg_palettes[k].legend) + 24;
	}
	fprintf(f, "<text x=\"%.1f\" y=\"66\" font-style=\"italic\">italic = inlined</text>\n", x);
	fputs("</g>\n", f);
}

/* The box of node I at row DEPTH, OFF bytes from the left, then its visible
 * children left to right, largest first. */
static void svg_box(const struct svg_out *o, size_t i, uint64_t off, int depth)
{
	const struct fg_node *nd = &o->t->nodes[i];
	double x = FG_PAD + (double)off * o->scale, w = (double)nd->bytes * o->scale;
	double y = o->root_y - depth * FG_ROW_H;
	double share = o->t->nodes[0].bytes ? 100.0 * (double)nd->bytes / (double)o->t->nodes[0].bytes : 0;
	char colour[24], human[24];
	FILE *f = o->f;
	size_t c;

	fprintf(f, "<g class=\"f%s\" data-k=\"%s\" data-n=\"", nd->inlined ? " inl" : "",
		fg_palettes[nd->kind].name);
	xml_put(f, nd->name, SIZE_MAX);
	fputs("\" data-m=\"", f);
	if (nd->module)
		xml_put(f, nd->module, SIZE_MAX);
	fprintf(f, "\" data-b=\"%" PRIu64 "\" data-a=\"%" PRIu64 "\" data-o=\"%" PRIu64 "\" data-d=\"%d\">",
		nd->bytes, nd->allocations, off, depth);

	/* The tooltip: name, module, bytes and share, one per line. */
	fputs("<title>", f);
	xml_put(f, nd->name, SIZE_MAX);
	if (nd->inlined)
		fputs(" (inlined)", f);
	if (nd->module) {
		fputs("\nmodule: ", f);
		xml_put(f, nd->module, SIZE_MAX);
	}
	report_human_bytes(human, sizeof(human), (double)nd->bytes);
	fprintf(f, "\n%s (%" PRIu64 " bytes, %.2f%%) in %" PRIu64 " allocation%s</title>",
		human, nd->bytes, share, nd->allocations, nd->allocations == 1 ? "" : "s");

	kind_colour(colour, sizeof(colour), nd->kind, nd->name);
	fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" rx=\"2\" fill=\"%s\"/>",
		x, y, w, FG_ROW_H - 1, colour);
	fprintf(f, "<text x=\"%.2f\" y=\"%.1f\">", x + FG_LABEL_PAD, y + FG_ROW_H - 5);
	xml_put_fit(f, nd->name, label_chars(w));
	fputs("</text></g>\n", f);

	for (c = nd->child; c != NO_NODE; c = o->t->nodes[c].sibling) {
		if (!box_visible(o, &o->t->nodes[c]))
			break;
		svg_box(o, c, off, depth + 1);
		off += o->t->nodes[c].bytes;
	}
}

static int stream_status(FILE *f)
{
	if (fflush(f) || ferror(f))
		return -EIO;
	return 0;
}

static int svg_empty(FILE *f, const struct report *r)
{
	svg_open(f, FG_EMPTY_H, r);
	svg_titles(f, r);
	fprintf(f, "<text id=\"empty\" x=\"%.1f\" y=\"90\" text-anchor=\"middle\">"
		   "No outstanding allocations: nothing to draw.</text>\n</svg>\n",
		FG_IMAGE_W / 2);
	return stream_status(f);
}

int report_write_svg(FILE *f, const struct report *r, unsigned int top)
{
	struct fg_tree t;
	struct svg_out o;
	double height;
	int err, rows;

	err = tree_build(&t, r, top);
	if (err) {
		tree_free(&t);
		return err;
	}
	if (!t.nodes[0].bytes) {
		err = svg_empty(f, r);
		tree_free(&t);
		return err;
	}

	o = (struct svg_out){ .f = f, .t = &t, .scale = FG_GRAPH_W / (double)t.nodes[0].bytes };
	rows = 1 + visible_height(&o, 0);
	height = FG_HEAD_H + rows * FG_ROW_H + FG_FOOT_H;
	o.root_y = FG_HEAD_H + (rows - 1) * FG_ROW_H;

	svg_open(f, height, r);
	svg_titles(f, r);
	svg_controls(f);
	fprintf(f, "<g id=\"frames\" data-total=\"%" PRIu64 "\" data-pad=\"%.1f\" data-width=\"%.1f\" "
		   "data-char-w=\"%.2f\" data-label-pad=\"%.1f\" data-min-chars=\"%d\">\n",
		t.nodes[0].bytes, FG_PAD, FG_GRAPH_W, FG_CHAR_W, FG_LABEL_PAD, FG_MIN_LABEL_CHARS);
	svg_box(&o, 0, 0, 0);
	fputs("</g>\n", f);
	fprintf(f, "<text id=\"details\" x=\"%.1f\" y=\"%.1f\"> </text>\n", FG_PAD, height - 10);
	fprintf(f, "<text id=\"matched\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\"> </text>\n",
		FG_IMAGE_W - FG_PAD, height - 10);
	fprintf(f, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n", svg_script);
	tree_free(&t);
	return stream_status(f);
}
