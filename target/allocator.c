/* Allocator detection: every allocator function bound where the dynamic
 * linker binds it for this process, which family provides malloc, and the
 * allocator functions the program calls that dwleak does not probe. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator.h"
#include "elf_symbols.h"
#include "preload.h"
#include "probe_site.h"

#define KIND_NAME(e, name, frees) [e] = name,
static const char *const kind_names[ALLOC_KIND_COUNT] = { ALLOC_KIND_LIST(KIND_NAME) };
#undef KIND_NAME

#define KIND_FREES(e, name, frees) [e] = frees,
static const bool kind_frees[ALLOC_KIND_COUNT] = { ALLOC_KIND_LIST(KIND_FREES) };
#undef KIND_FREES

const char *alloc_kind_name(uint32_t kind)
{
	return kind < ALLOC_KIND_COUNT ? kind_names[kind] : "unknown";
}

bool alloc_kind_frees(uint32_t kind)
{
	return kind < ALLOC_KIND_COUNT && kind_frees[kind];
}

struct func_name {
	const char *name;
	uint32_t kind;
};

/* The C malloc family; tcmalloc, jemalloc and mimalloc export it too. */
static const struct func_name c_funcs[] = {
	{ "malloc", ALLOC_MALLOC },
	{ "calloc", ALLOC_CALLOC },
	{ "realloc", ALLOC_REALLOC },
	{ "reallocarray", ALLOC_REALLOCARRAY },
	{ "posix_memalign", ALLOC_POSIX_MEMALIGN },
	{ "memalign", ALLOC_MEMALIGN }, /* before its glibc alias aligned_alloc */
	{ "aligned_alloc", ALLOC_ALIGNED_ALLOC },
	{ "valloc", ALLOC_VALLOC },
	{ "pvalloc", ALLOC_PVALLOC },
	{ "free", ALLOC_FREE },
	{ "cfree", ALLOC_FREE },
};

/* jemalloc's non-standard API (nallocx allocates nothing). */
static const struct func_name je_funcs[] = {
	{ "mallocx", ALLOC_MALLOCX },
	{ "rallocx", ALLOC_RALLOCX },
	{ "xallocx", ALLOC_XALLOCX },
	{ "sdallocx", ALLOC_SDALLOCX },
	{ "dallocx", ALLOC_DALLOCX },
};

/* gperftools' tc_* entry points (most alias the C names). */
static const struct func_name tc_funcs[] = {
	{ "tc_malloc", ALLOC_MALLOC },
	{ "tc_malloc_skip_new_handler", ALLOC_MALLOC },
	{ "tc_calloc", ALLOC_CALLOC },
	{ "tc_realloc", ALLOC_REALLOC },
	{ "tc_memalign", ALLOC_MEMALIGN },
	{ "tc_posix_memalign", ALLOC_POSIX_MEMALIGN },
	{ "tc_valloc", ALLOC_VALLOC },
	{ "tc_pvalloc", ALLOC_PVALLOC },
	{ "tc_free", ALLOC_FREE },
	{ "tc_cfree", ALLOC_FREE },
	{ "tc_free_sized", ALLOC_FREE },
	{ "tc_new", ALLOC_NEW },
	{ "tc_new_nothrow", ALLOC_NEW },
	{ "tc_new_aligned", ALLOC_NEW },
	{ "tc_new_aligned_nothrow", ALLOC_NEW },
	{ "tc_newarray", ALLOC_NEW_ARRAY },
	{ "tc_newarray_nothrow", ALLOC_NEW_ARRAY },
	{ "tc_newarray_aligned", ALLOC_NEW_ARRAY },
	{ "tc_newarray_aligned_nothrow", ALLOC_NEW_ARRAY },
	{ "tc_delete", ALLOC_DELETE },
	{ "tc_delete_sized", ALLOC_DELETE },
	{ "tc_delete_nothrow", ALLOC_DELETE },
	{ "tc_delete_aligned", ALLOC_DELETE },
	{ "tc_delete_sized_aligned", ALLOC_DELETE },
	{ "tc_delete_aligned_nothrow", ALLOC_DELETE },
	{ "tc_deletearray", ALLOC_DELETE },
	{ "tc_deletearray_sized", ALLOC_DELETE },
	{ "tc_deletearray_nothrow", ALLOC_DELETE },
	{ "tc_deletearray_aligned", ALLOC_DELETE },
	{ "tc_deletearray_sized_aligned", ALLOC_DELETE },
	{ "tc_deletearray_aligned_nothrow", ALLOC_DELETE },
};

/* mimalloc's mi_* API, as far as a kind reads its arguments right: the
 * size (or count and size) where malloc, calloc, realloc or reallocarray
 * have them.  mi_malloc_aligned(size, alignment) reads like malloc. */
static const struct func_name mi_funcs[] = {
	{ "mi_malloc", ALLOC_MALLOC },
	{ "mi_zalloc", ALLOC_MALLOC },
	{ "mi_malloc_aligned", ALLOC_MALLOC },
	{ "mi_zalloc_aligned", ALLOC_MALLOC },
	{ "mi_calloc", ALLOC_CALLOC },
	{ "mi_mallocn", ALLOC_CALLOC },
	{ "mi_calloc_aligned", ALLOC_CALLOC },
	{ "mi_realloc", ALLOC_REALLOC },
	{ "mi_rezalloc", ALLOC_REALLOC },
	{ "mi_realloc_aligned", ALLOC_REALLOC },
	{ "mi_reallocn", ALLOC_REALLOCARRAY },
	{ "mi_reallocarray", ALLOC_REALLOCARRAY },
	{ "mi_recalloc", ALLOC_REALLOCARRAY },
	{ "mi_posix_memalign", ALLOC_POSIX_MEMALIGN },
	{ "mi_memalign", ALLOC_MEMALIGN },
	{ "mi_aligned_alloc", ALLOC_ALIGNED_ALLOC },
	{ "mi_valloc", ALLOC_VALLOC },
	{ "mi_pvalloc", ALLOC_PVALLOC },
	{ "mi_new", ALLOC_NEW },
	{ "mi_new_nothrow", ALLOC_NEW },
	{ "mi_new_aligned", ALLOC_NEW },
	{ "mi_new_aligned_nothrow", ALLOC_NEW },
	{ "mi_free", ALLOC_FREE },
	{ "mi_cfree", ALLOC_FREE },
	{ "mi_free_size", ALLOC_FREE },
	{ "mi_free_aligned", ALLOC_FREE },
	{ "mi_free_size_aligned", ALLOC_FREE },
};

/* C++ operators (Itanium ABI names, x86_64 size_t = unsigned long); the
 * aligned ones (align_val_t) come first. */
static const struct func_name cxx_funcs[] = {
	{ "_ZnwmSt11align_val_t", ALLOC_NEW },
	{ "_ZnwmSt11align_val_tRKSt9nothrow_t", ALLOC_NEW },
	{ "_ZnamSt11align_val_t", ALLOC_NEW_ARRAY },
	{ "_ZnamSt11align_val_tRKSt9nothrow_t", ALLOC_NEW_ARRAY },
	{ "_Znwm", ALLOC_NEW },
	{ "_ZnwmRKSt9nothrow_t", ALLOC_NEW },
	{ "_Znam", ALLOC_NEW_ARRAY },
	{ "_ZnamRKSt9nothrow_t", ALLOC_NEW_ARRAY },
	{ "_ZdlPv", ALLOC_DELETE },
	{ "_ZdlPvm", ALLOC_DELETE },
	{ "_ZdlPvRKSt9nothrow_t", ALLOC_DELETE },
	{ "_ZdlPvSt11align_val_t", ALLOC_DELETE },
	{ "_ZdlPvmSt11align_val_t", ALLOC_DELETE },
	{ "_ZdlPvSt11align_val_tRKSt9nothrow_t", ALLOC_DELETE },
	{ "_ZdaPv", ALLOC_DELETE },
	{ "_ZdaPvm", ALLOC_DELETE },
	{ "_ZdaPvRKSt9nothrow_t", ALLOC_DELETE },
	{ "_ZdaPvSt11align_val_t", ALLOC_DELETE },
	{ "_ZdaPvmSt11align_val_t", ALLOC_DELETE },
	{ "_ZdaPvSt11align_val_tRKSt9nothrow_t", ALLOC_DELETE },
};
#define CXX_ALIGNED_NEW 4 /* the first entries of cxx_funcs */

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The names dwleak looks up, each with what it is: tables with a prefix. */
struct func_table {
	const char *prefix;
	const struct func_name *funcs;
	size_t n;
};

static const struct func_table tables[] = {
	{ "", c_funcs, N(c_funcs) },
	{ "", je_funcs, N(je_funcs) },
	{ "je_", c_funcs, N(c_funcs) }, /* jemalloc built with --with-jemalloc-prefix=je_ */
	{ "je_", je_funcs, N(je_funcs) },
	{ "_rjem_", c_funcs, N(c_funcs) }, /* Rust's tikv-jemallocator */
	{ "_rjem_", je_funcs, N(je_funcs) },
	{ "", tc_funcs, N(tc_funcs) },
	{ "", mi_funcs, N(mi_funcs) },
	{ "", cxx_funcs, N(cxx_funcs) },
};

bool allocator_name_known(const char *sym)
{
	size_t t, k, len;

	for (t = 0; t < N(tables); t++) {
		len = strlen(tables[t].prefix);
		if (strncmp(sym, tables[t].prefix, len))
			continue;
		for (k = 0; k < tables[t].n; k++)
			if (!strcmp(sym + len, tables[t].funcs[k].name))
				return true;
	}
	return false;
}

/* One name looked up: its table entry, and where the dynamic linker binds it. */
struct wanted {
	char *sym;		    /* prefix + name */
	const struct func_name *fn; /* what it is */
	bool cxx_plain;		    /* a C++ operator libstdc++ forwards to malloc/free */
	long obj;		    /* index of the binding object, -1 = none */
	struct elf_sym_want at;	    /* the definition there */
};

struct detect {
	char *const *paths;
	char *const *names;
	size_t n;
	struct wanted *w;
	size_t nw;
};

static void wanted_free(struct detect *d)
{
	size_t i;

	for (i = 0; i < d->nw; i++)
		free(d->w[i].sym);
	free(d->w);
}

static int wanted_make(struct detect *d)
{
	size_t t, k, i = 0, total = 0;

	for (t = 0; t < N(tables); t++)
		total += tables[t].n;
	d->w = calloc(total, sizeof(*d->w));
	if (!d->w)
		return -ENOMEM;
	for (t = 0; t < N(tables); t++) {
		for (k = 0; k < tables[t].n; k++, i++) {
			struct wanted *w = &d->w[i];

			d->nw = i + 1;
			if (asprintf(&w->sym, "%s%s", tables[t].prefix, tables[t].funcs[k].name) < 0) {
				w->sym = NULL;
				return -ENOMEM;
			}
			w->fn = &tables[t].funcs[k];
			w->cxx_plain = tables[t].funcs == cxx_funcs && k >= CXX_ALIGNED_NEW;
			w->obj = -1;
		}
	}
	return 0;
}

/* Looks the wanted names up in object I (DYNSYM_ONLY: only its exports),
 * binding those still unbound. */
static int object_bind(struct detect *d, struct elf_sym_want *want, size_t i, bool dynsym_only)
{
	size_t k;
	int fd;

	for (k = 0; k < d->nw; k++)
		want[k] = (struct elf_sym_want){ .name = d->w[k].sym, .dynsym_only = dynsym_only };
	fd = open(d->paths[i], O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (elf_symbols_find(fd, want, d->nw)) {
		close(fd);
		return -ENOEXEC;
	}
	close(fd);
	for (k = 0; k < d->nw; k++) {
		if (d->w[k].obj >= 0 || !want[k].found || !want[k].file_off)
			continue;
		d->w[k].obj = (long)i;
		d->w[k].at = want[k];
	}
	return 0;
}

/* dwleak's preload library forwards every call to the definition after
 * it: the allocator is what it forwards to, so it binds nothing here (its
 * frames are hidden in reports; its sites are probes of their own). */
static bool preload_library(const char *name)
{
	const char *b = strrchr(name, '/');

	return !strncmp(b ? b + 1 : name, DWLEAK_PRELOAD_NAME, strlen(DWLEAK_PRELOAD_NAME));
}

/* Binds every wanted name as the dynamic linker does: the first object
 * exporting it (.dynsym); a name nothing exports, to the executable's own
 * definition (a static program has only .symtab). */
static int wanted_bind(struct detect *d)
{
	struct elf_sym_want *want = calloc(d->nw, sizeof(*want));
	size_t i;

	if (!want)
		return -ENOMEM;
	for (i = 0; i < d->n; i++)
		if (!preload_library(d->names[i]))
			object_bind(d, want, i, true); /* an object that cannot be read binds nothing */
	if (d->n)
		object_bind(d, want, 0, false);
	free(want);
	return 0;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* libstdc++ and libc++: their plain operators only call malloc and free. */
static bool forwards_to_malloc(const char *name)
{
	const char *b = base_name(name);

	return !strncmp(b, "libstdc++.so", 12) || !strncmp(b, "libc++.so", 9);
}

/* The wanted entry for SYM, or NULL. */
static const struct wanted *wanted_find(const struct detect *d, const char *sym)
{
	size_t k;

	for (k = 0; k < d->nw; k++)
		if (!strcmp(d->w[k].sym, sym))
			return &d->w[k];
	return NULL;
}

static bool bound_to(const struct detect *d, const char *sym, long obj)
{
	const struct wanted *w = wanted_find(d, sym);

	return w && w->obj == obj;
}

/* The family of object OBJ, from what it defines. */
static const char *family_of(const struct detect *d, long obj)
{
	const char *b = base_name(d->names[obj]);

	if (bound_to(d, "mi_malloc", obj))
		return "mimalloc";
	if (bound_to(d, "mallocx", obj) || bound_to(d, "je_mallocx", obj) || bound_to(d, "_rjem_mallocx", obj))
		return "jemalloc";
	if (bound_to(d, "tc_malloc", obj))
		return "tcmalloc";
	if (!strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5))
		return "glibc";
	if (obj == 0 && d->n == 1) {
		/* a static program: glibc's own malloc, unless one of the above */
		struct elf_sym_want w = { .name = "__libc_start_main" };
		int fd = open(d->paths[0], O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			elf_symbols_find(fd, &w, 1);
			close(fd);
		}
		if (w.found)
			return "glibc";
	}
	return "custom";
}

/* Entry-only probes (the frees) move to a site the kernel emulates, decoded
 * from the bytes of the very file the probe attaches to. */
static void site_pick(struct alloc_func *f, const char *path)
{
	struct probe_site site = { 0, "entry: a return probe must sit at the entry" };
	uint8_t code[32];
	ssize_t got;
	int fd;

	if (alloc_kind_frees(f->kind) && (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		got = pread(fd, code, sizeof(code), (off_t)f->file_off);
		if (got > 0)
			probe_site_pick(code, (size_t)got, &site);
		close(fd);
	}
	f->site_off = site.offset;
	f->site_why = site.why;
}

/* The alloc_object of lookup index OBJ in A, added when new. */
static struct alloc_object *object_of(struct allocator *a, const struct detect *d, long obj, long *idx)
{
	struct alloc_object *g;
	size_t i;

	for (i = 0; i < a->nobjs; i++)
		if (idx[i] == obj)
			return &a->objs[i];
	g = realloc(a->objs, (a->nobjs + 1) * sizeof(*g));
	if (!g)
		return NULL;
	a->objs = g;
	g = &a->objs[a->nobjs];
	memset(g, 0, sizeof(*g));
	g->path = strdup(d->paths[obj]);
	g->name = strdup(d->names[obj]);
	idx[a->nobjs++] = obj;
	return g->path && g->name ? g : NULL;
}

static int func_add(struct alloc_object *o, const struct wanted *w)
{
	struct alloc_func *f;
	size_t j;

	for (j = 0; j < o->nfuncs; j++)
		if (o->funcs[j].vaddr == w->at.vaddr)
			return 0; /* an alias: one probe serves every name */
	if (o->nfuncs == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 16;

		f = realloc(o->funcs, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		o->funcs = f;
		o->cap = cap;
	}
	f = &o->funcs[o->nfuncs++];
	*f = (struct alloc_func){
		.name = w->fn->name,
		.kind = w->fn->kind,
		.vaddr = w->at.vaddr,
		.size = w->at.size,
		.file_off = w->at.file_off,
	};
	site_pick(f, o->path);
	return 0;
}

/* What the probes cover: every bound name, but plain C++ operators that
 * only forward to malloc and free: libstdc++'s and libc++'s, also linked
 * into a static program with glibc (glibc has no C++ operators, so those
 * beside its malloc are libstdc++'s). */
static int objects_fill(struct allocator *a, const struct detect *d, long malloc_obj)
{
	bool glibc_static = malloc_obj == 0 && !strcmp(a->family, "glibc");
	long *idx = calloc(d->n + 1, sizeof(*idx));
	struct alloc_object *o;
	size_t k;
	int err = 0;

	if (!idx)
		return -ENOMEM;
	/* malloc's provider first: objs[0] */
	if (!object_of(a, d, malloc_obj, idx))
		err = -ENOMEM;
	for (k = 0; !err && k < d->nw; k++) {
		const struct wanted *w = &d->w[k];

		if (w->obj < 0 ||
		    (w->cxx_plain && (forwards_to_malloc(d->names[w->obj]) || (glibc_static && w->obj == 0))))
			continue;
		o = object_of(a, d, w->obj, idx);
		err = o ? func_add(o, w) : -ENOMEM;
	}
	free(idx);
	return err;
}

struct imports_ctx {
	struct allocator *a;
	const struct detect *d;
	const char *importer;
	int err;
};

/* Whether NAME looks like an allocator's entry point: a known allocator
 * prefix and a name that allocates (not a size query). */
static bool allocator_like(const char *name)
{
	static const char *const prefixes[] = { "mi_", "je_", "_rjem_", "tc_" };
	static const char *const verbs[] = { "alloc", "new", "strdup", "strndup", "realpath" };
	size_t i;
	bool prefixed = false, verb = false;

	for (i = 0; i < N(prefixes); i++)
		prefixed |= !strncmp(name, prefixes[i], strlen(prefixes[i]));
	for (i = 0; i < N(verbs); i++)
		verb |= strstr(name, verbs[i]) != NULL;
	return prefixed && verb && !strstr(name, "nallocx") && !strstr(name, "_size") &&
	       !strstr(name, "usable");
}

static void import_seen(void *arg, const char *name)
{
	struct imports_ctx *c = arg;
	struct allocator *a = c->a;
	const struct wanted *w;
	char **g;
	size_t i;

	if (c->err || !allocator_like(name))
		return;
	w = wanted_find(c->d, name);
	if (w && w->obj >= 0)
		return; /* probed */
	for (i = 0; i < a->nnot_covered; i++)
		if (!strncmp(a->not_covered[i], name, strlen(name)) && a->not_covered[i][strlen(name)] == ' ')
			return;
	g = realloc(a->not_covered, (a->nnot_covered + 1) * sizeof(*g));
	if (!g || asprintf(&g[a->nnot_covered], "%s (imported by %s)", name, c->importer) < 0) {
		if (g)
			a->not_covered = g;
		c->err = -ENOMEM;
		return;
	}
	a->not_covered = g;
	a->nnot_covered++;
}

/* Lists the allocator functions the objects import that are not probed. */
static int not_covered_find(struct allocator *a, const struct detect *d)
{
	struct imports_ctx c = { a, d, NULL, 0 };
	size_t i;
	int fd;

	for (i = 0; i < d->n && !c.err; i++) {
		fd = open(d->paths[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		c.importer = d->names[i];
		elf_symbols_imports(fd, import_seen, &c);
		close(fd);
	}
	return c.err;
}

/* "glibc in /lib/.../libc.so.6 (LD_PRELOAD)", "custom allocator in ...",
 * and the other families whose own API a program calls ("; jemalloc's
 * _rjem_* API in ./app"). */
static int describe(struct allocator *a, const struct detect *d)
{
	const char *where = a->preloaded ? " (LD_PRELOAD)" : a->in_executable ? " (linked in)" : "";
	char *s = NULL, *more;
	size_t i;
	int n;

	if (!strcmp(a->family, "custom"))
		n = asprintf(&s, "custom allocator in %s%s", a->objs[0].name, where);
	else
		n = asprintf(&s, "%s in %s%s", a->family, a->objs[0].name, where);
	if (n < 0)
		return -ENOMEM;
	for (i = 1; i < a->nobjs; i++) {
		const char *fam = NULL;
		size_t k;

		for (k = 0; k < d->nw && !fam; k++)
			if (d->w[k].obj >= 0 && !strcmp(d->names[d->w[k].obj], a->objs[i].name) &&
			    strcmp(d->w[k].sym, d->w[k].fn->name))
				fam = d->w[k].sym; /* a prefixed API */
		if (!fam)
			continue;
		n = asprintf(&more, "%s; %s... in %s", s, fam, a->objs[i].name);
		free(s);
		if (n < 0)
			return -ENOMEM;
		s = more;
	}
	a->description = s;
	return 0;
}

int allocator_detect(char *const *paths, char *const *names, size_t n, size_t npreload,
		     struct allocator *a)
{
	struct detect d = { paths, names, n, NULL, 0 };
	static const char *const mallocs[] = { "malloc", "je_malloc", "_rjem_malloc", "mi_malloc" };
	const struct wanted *m = NULL;
	size_t i;
	int err;

	memset(a, 0, sizeof(*a));
	err = wanted_make(&d);
	err = err ?: wanted_bind(&d);
	for (i = 0; !err && !m && i < N(mallocs); i++) {
		m = wanted_find(&d, mallocs[i]);
		m = m && m->obj >= 0 ? m : NULL;
	}
	if (!err && !m)
		err = -ENOENT;
	if (!err) {
		a->family = family_of(&d, m->obj);
		a->in_executable = m->obj == 0;
		a->preloaded = m->obj >= 1 && (size_t)m->obj <= npreload;
		err = objects_fill(a, &d, m->obj);
	}
	err = err ?: describe(a, &d);
	err = err ?: not_covered_find(a, &d);
	wanted_free(&d);
	if (err)
		allocator_free(a);
	return err;
}

static char *strdup_or_null(const char *s, int *err)
{
	char *d = s ? strdup(s) : NULL;

	if (s && !d)
		*err = -ENOMEM;
	return d;
}

int allocator_copy(struct allocator *dst, const struct allocator *src)
{
	size_t i;
	int err = 0;

	memset(dst, 0, sizeof(*dst));
	dst->family = src->family;
	dst->preloaded = src->preloaded;
	dst->in_executable = src->in_executable;
	dst->description = strdup_or_null(src->description, &err);
	dst->objs = calloc(src->nobjs + 1, sizeof(*dst->objs));
	dst->not_covered = calloc(src->nnot_covered + 1, sizeof(*dst->not_covered));
	if (!dst->objs || !dst->not_covered)
		err = -ENOMEM;
	for (i = 0; !err && i < src->nobjs; i++) {
		struct alloc_object *o = &dst->objs[dst->nobjs++];

		o->path = strdup_or_null(src->objs[i].path, &err);
		o->name = strdup_or_null(src->objs[i].name, &err);
		o->funcs = calloc(src->objs[i].nfuncs + 1, sizeof(*o->funcs));
		if (!o->funcs)
			err = -ENOMEM;
		else
			memcpy(o->funcs, src->objs[i].funcs, src->objs[i].nfuncs * sizeof(*o->funcs));
		o->nfuncs = o->cap = o->funcs ? src->objs[i].nfuncs : 0;
	}
	for (i = 0; !err && i < src->nnot_covered; i++)
		dst->not_covered[dst->nnot_covered++] = strdup_or_null(src->not_covered[i], &err);
	if (err)
		allocator_free(dst);
	return err;
}

void allocator_free(struct allocator *a)
{
	size_t i;

	for (i = 0; i < a->nobjs; i++) {
		free(a->objs[i].path);
		free(a->objs[i].name);
		free(a->objs[i].funcs);
	}
	for (i = 0; i < a->nnot_covered; i++)
		free(a->not_covered[i]);
	free(a->not_covered);
	free(a->objs);
	free(a->description);
	memset(a, 0, sizeof(*a));
}
