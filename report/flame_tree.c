/* The flame graph's tree: the stacks of a report merged by their chains of
 * callers into one box per (caller chain, frame), each box of a kind (user,
 * system, allocator, other, a leak kind), under a box per process and per
 * leak kind when the report has them.  svg.c draws it. */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constants.h"
#include "flame_tree.h"
#include "report_internal.h"

/* ---- Frame kinds ---- */

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

/* The rule in the comment above enum flame_kind (flame_tree.h); COMMAND may be NULL. */
static enum flame_kind frame_kind(const struct report_frame *fr, const char *command)
{
	const char *fn = fr->function, *mod = fr->module;
	const char *base = mod ? report_base_name(mod) : NULL;
	bool libc = base && (has_prefix(base, "libc.so") || has_prefix(base, "libc-"));

	if (fn && (in_list(fn, alloc_functions, N(alloc_functions)) ||
		   prefix_in_list(fn, alloc_prefixes, N(alloc_prefixes)) ||
		   (libc && prefix_in_list(fn, libc_alloc_prefixes, N(libc_alloc_prefixes)))))
		return FLAME_ALLOC;
	if (base && prefix_in_list(base, allocator_modules, N(allocator_modules)))
		return FLAME_ALLOC;
	if (!mod)
		return FLAME_OTHER;
	if (command && strcmp(mod, command) == 0)
		return FLAME_USER;
	if (prefix_in_list(mod, system_dirs, N(system_dirs)) ||
	    in_list(mod, kernel_modules, N(kernel_modules)))
		return FLAME_SYSTEM;
	return FLAME_USER;
}

/* FNV-1a, 64 bits. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= s[i];
		h *= FNV64_PRIME;
	}
	return h;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	/* The NUL goes in too, so ("ab", "c") and ("a", "bc") differ. */
	return hash_bytes(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

uint64_t flame_name_hash(const char *name)
{
	return hash_str(FNV64_OFFSET, name);
}

/* ---- The tree ---- */

void flame_tree_free(struct flame_tree *t)
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
	uint64_t h = hash_bytes(FNV64_OFFSET, &parent, sizeof(parent));

	h = hash_str(h, name);
	h = hash_str(h, module);
	return hash_bytes(h, &inlined, sizeof(inlined));
}

static int tree_rehash(struct flame_tree *t, size_t nslots)
{
	size_t *slots = malloc(nslots * sizeof(*slots));
	size_t i, j;

	if (!slots)
		return -ENOMEM;
	for (i = 0; i < nslots; i++)
		slots[i] = FLAME_NO_NODE;
	for (i = 0; i < t->n; i++) {
		for (j = t->nodes[i].hash & (nslots - 1); slots[j] != FLAME_NO_NODE; j = (j + 1) & (nslots - 1))
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
static int tree_child(struct flame_tree *t, size_t parent, const char *name, char *owned,
		      const char *module, enum flame_kind kind, bool inlined, size_t *out)
{
	uint64_t h = node_hash(parent, name, module, inlined);
	struct flame_node *nd;
	size_t j;

	for (j = h & (t->nslots - 1); t->slots[j] != FLAME_NO_NODE; j = (j + 1) & (t->nslots - 1)) {
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
		struct flame_node *nodes = realloc(t->nodes, cap * sizeof(*nodes));

		if (!nodes) {
			free(owned);
			return -ENOMEM;
		}
		t->nodes = nodes;
		t->cap = cap;
	}
	nd = &t->nodes[t->n];
	*nd = (struct flame_node){
		.name = name, .owned = owned, .module = module, .kind = kind,
		.inlined = inlined, .hash = h, .parent = parent,
		.child = FLAME_NO_NODE, .sibling = t->nodes[parent].child,
	};
	t->nodes[parent].child = t->n;
	t->slots[j] = t->n;
	*out = t->n++;
	/* On failure the node is in the array and flame_tree_free() frees OWNED. */
	return 2 * t->n >= t->nslots ? tree_rehash(t, 2 * t->nslots) : 0;
}

static int tree_init(struct flame_tree *t)
{
	*t = (struct flame_tree){ .cap = 64 };
	t->nodes = malloc(t->cap * sizeof(*t->nodes));
	if (!t->nodes)
		return -ENOMEM;
	t->nodes[0] = (struct flame_node){
		.name = "all", .kind = FLAME_OTHER, .parent = FLAME_NO_NODE,
		.child = FLAME_NO_NODE, .sibling = FLAME_NO_NODE,
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
		len = asprintf(owned, "[%s]+0x%" PRIx64, report_base_name(fr->module), fr->elf_address);
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
static void tree_charge(struct flame_tree *t, size_t i, uint64_t bytes, uint64_t allocations)
{
	for (; i != FLAME_NO_NODE; i = t->nodes[i].parent) {
		t->nodes[i].bytes += bytes;
		t->nodes[i].allocations += allocations;
	}
}

/* Merges PART of stack S of R, outermost frame first, under the root: under
 * its process's box when MULTI, and its kind's when it has a kind.  A walk
 * that did not reach the outermost frame hangs under an "[incomplete: WHY]"
 * box, so it is not mistaken for a caller chain that starts where the walk
 * gave up. */
static int tree_add_stack(struct flame_tree *t, const struct report *r, bool multi,
			  const struct report_stack *s, const struct report_part *part)
{
	const char *command = report_stack_command(r, s), *label = report_part_label(part->kind);
	size_t at = 0, j;
	int err;

	if (multi) {
		char *name;

		if ((err = report_process_label(r, s, &name)) ||
		    (err = tree_child(t, at, name, name, NULL, FLAME_OTHER, false, &at)))
			return err;
	}
	if (label) {
		enum flame_kind kind = part->kind < REPORT_LEAK_KIND_COUNT ?
			FLAME_FIRST_LEAK + (int)part->kind : FLAME_OTHER;

		err = tree_child(t, at, label, NULL, NULL, kind, false, &at);
		if (err)
			return err;
	}
	if (s->truncated || s->unwind_error) {
		char *name;

		if (asprintf(&name, "[incomplete: %s]",
			     s->unwind_error ? s->unwind_error : "depth limit") < 0)
			return -ENOMEM;
		err = tree_child(t, at, name, name, NULL, FLAME_OTHER, false, &at);
		if (err)
			return err;
	}
	if (!s->nframes) {
		err = tree_child(t, at, "[unknown]", NULL, NULL, FLAME_OTHER, false, &at);
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
	tree_charge(t, at, part->count.bytes, part->count.allocations);
	return 0;
}

static int node_cmp(const void *pa, const void *pb)
{
	const struct flame_node *a = *(const struct flame_node *const *)pa;
	const struct flame_node *b = *(const struct flame_node *const *)pb;
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
static int tree_sort(struct flame_tree *t)
{
	struct flame_node **v = malloc(t->n * sizeof(*v));
	size_t i, c, k;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		k = 0;
		for (c = t->nodes[i].child; c != FLAME_NO_NODE; c = t->nodes[c].sibling)
			v[k++] = &t->nodes[c];
		if (k < 2)
			continue;
		qsort(v, k, sizeof(*v), node_cmp);
		t->nodes[i].child = (size_t)(v[0] - t->nodes);
		for (c = 0; c + 1 < k; c++)
			v[c]->sibling = (size_t)(v[c + 1] - t->nodes);
		v[k - 1]->sibling = FLAME_NO_NODE;
	}
	free(v);
	return 0;
}

int flame_tree_build(struct flame_tree *t, const struct report *r, unsigned int top)
{
	const struct report_stack **v = NULL;
	struct report_part parts[REPORT_PARTS_MAX];
	uint64_t more_bytes = 0, more_allocs = 0;
	size_t i, j, nparts, n = r->nstacks, shown, more = 0;
	bool multi = report_is_multiprocess(r);
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
			nparts = report_stack_parts(r, v[i], parts);
			for (j = 0; j < nparts && !err; j++)
				err = tree_add_stack(t, r, multi, v[i], &parts[j]);
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
			err = tree_child(t, 0, name, name, NULL, FLAME_OTHER, false, &at);
			if (!err)
				tree_charge(t, at, more_bytes, more_allocs);
		}
	}
	free(v);
	if (!err)
		err = tree_sort(t);
	return err;
}
