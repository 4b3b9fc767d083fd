/* Allocator detection and symbol lookup: which object provides malloc and
 * operator new for a process, which family it is, and every entry point of
 * it dwleak probes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator.h"
#include "elf_symbols.h"
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

/* The C malloc family; jemalloc and tcmalloc export these names too. */
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
	/* jemalloc's non-standard API (nallocx allocates nothing) */
	{ "mallocx", ALLOC_MALLOCX },
	{ "rallocx", ALLOC_RALLOCX },
	{ "xallocx", ALLOC_XALLOCX },
	{ "sdallocx", ALLOC_SDALLOCX },
	{ "dallocx", ALLOC_DALLOCX },
	/* gperftools' tc_* entry points (most alias the names above) */
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

/* C++ operators (Itanium ABI names, x86_64 size_t = unsigned long). */
static const struct func_name cxx_funcs[] = {
	{ "_Znwm", ALLOC_NEW },
	{ "_ZnwmRKSt9nothrow_t", ALLOC_NEW },
	{ "_ZnwmSt11align_val_t", ALLOC_NEW },
	{ "_ZnwmSt11align_val_tRKSt9nothrow_t", ALLOC_NEW },
	{ "_Znam", ALLOC_NEW_ARRAY },
	{ "_ZnamRKSt9nothrow_t", ALLOC_NEW_ARRAY },
	{ "_ZnamSt11align_val_t", ALLOC_NEW_ARRAY },
	{ "_ZnamSt11align_val_tRKSt9nothrow_t", ALLOC_NEW_ARRAY },
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

/* libstdc++'s aligned operators round the size up to the alignment before
 * calling aligned_alloc: probed so the size asked for is what counts. */
static const struct func_name cxx_aligned_funcs[] = {
	{ "_ZnwmSt11align_val_t", ALLOC_NEW },
	{ "_ZnwmSt11align_val_tRKSt9nothrow_t", ALLOC_NEW },
	{ "_ZnamSt11align_val_t", ALLOC_NEW_ARRAY },
	{ "_ZnamSt11align_val_tRKSt9nothrow_t", ALLOC_NEW_ARRAY },
};

#define NC (sizeof(c_funcs) / sizeof(c_funcs[0]))
#define NX (sizeof(cxx_funcs) / sizeof(cxx_funcs[0]))
#define NXA (sizeof(cxx_aligned_funcs) / sizeof(cxx_aligned_funcs[0]))

/* Looks up NAME in PATH; DYN_ONLY: only as an exported (.dynsym) symbol. */
static bool defines(const char *path, const char *name, bool dyn_only)
{
	struct elf_sym_want w = { .name = name, .dynsym_only = dyn_only };
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	elf_symbols_find(fd, &w, 1);
	close(fd);
	return w.found;
}

/* Index of the first object in lookup order that provides NAME. */
static long provider(char *const *paths, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (defines(paths[i], name, true))
			return (long)i;
	/* a static executable: nothing exported, the definition is in .symtab */
	return n && defines(paths[0], name, false) ? 0 : -1;
}

/* Adds the functions of TABLE (PREFIX + name) found in O to O's list,
 * one entry per address. */
/* Entry-only probes (the frees) move to a site the kernel emulates, decoded
 * from the bytes of the very file the probe attaches to. */
static void site_pick(struct alloc_func *f, int fd)
{
	struct probe_site site = { 0, "entry: a return probe must sit at the entry" };
	uint8_t code[32];
	ssize_t got;

	if (alloc_kind_frees(f->kind)) {
		got = pread(fd, code, sizeof(code), (off_t)f->file_off);
		if (got > 0)
			probe_site_pick(code, (size_t)got, &site);
	}
	f->site_off = site.offset;
	f->site_why = site.why;
}

static void funcs_add(struct alloc_object *o, struct elf_sym_want *want, const struct func_name *table,
		      size_t n, int fd)
{
	size_t k, j;

	for (k = 0; k < n; k++) {
		if (!want[k].found || !want[k].file_off || o->nfuncs == ALLOC_MAX_FUNCS)
			continue;
		for (j = 0; j < o->nfuncs && o->funcs[j].vaddr != want[k].vaddr; j++)
			;
		if (j < o->nfuncs)
			continue; /* an alias: one probe serves every name */
		o->funcs[o->nfuncs++] = (struct alloc_func){
			.name = table[k].name,
			.kind = table[k].kind,
			.vaddr = want[k].vaddr,
			.size = want[k].size,
			.file_off = want[k].file_off,
		};
		site_pick(&o->funcs[o->nfuncs - 1], fd);
	}
}

/* Fills O with the functions of TABLE that PATH defines (with PREFIX). */
_Static_assert(NC >= NX && NC >= NXA, "object_scan's arrays hold the largest table");

static int object_scan(struct alloc_object *o, const char *path, const char *prefix,
		       const struct func_name *table, size_t n)
{
	struct elf_sym_want want[NC];
	char *names[NC];
	size_t k;
	int fd, err;

	memset(want, 0, sizeof(want));
	for (k = 0; k < n; k++) {
		if (asprintf(&names[k], "%s%s", prefix, table[k].name) < 0) {
			while (k--)
				free(names[k]);
			return -ENOMEM;
		}
		want[k].name = names[k];
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	err = fd < 0 ? -errno : elf_symbols_find(fd, want, n);
	if (!err)
		funcs_add(o, want, table, n, fd);
	if (fd >= 0)
		close(fd);
	for (k = 0; k < n; k++)
		free(names[k]);
	return err;
}

static const char *family_of(const char *path, const char *name, const char *prefix)
{
	const char *base = strrchr(name, '/');
	char sym[32];

	base = base ? base + 1 : name;
	snprintf(sym, sizeof(sym), "%smallocx", prefix);
	if (defines(path, sym, false))
		return "jemalloc";
	if (defines(path, "tc_malloc", false))
		return "tcmalloc";
	if (!strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5) || defines(path, "__libc_malloc", false))
		return "glibc";
	return "unknown";
}

static int object_set(struct alloc_object *o, const char *path, const char *name)
{
	o->path = strdup(path);
	o->name = strdup(name);
	return o->path && o->name ? 0 : -ENOMEM;
}

int allocator_detect(char *const *paths, char *const *names, size_t n, size_t npreload,
		     struct allocator *a)
{
	const char *prefix = "";
	long m, x;
	int err;

	memset(a, 0, sizeof(*a));
	m = provider(paths, n, "malloc");
	if (m < 0 && n && defines(paths[0], "je_malloc", false)) {
		m = 0; /* jemalloc built with --with-jemalloc-prefix=je_, linked in */
		prefix = "je_";
	}
	if (m < 0)
		return -ENOENT;
	a->family = family_of(paths[m], names[m], prefix);
	a->in_executable = m == 0;
	a->preloaded = m >= 1 && (size_t)m <= npreload;
	err = object_set(&a->objs[0], paths[m], names[m]);
	err = err ?: object_scan(&a->objs[0], paths[m], prefix, c_funcs, NC);
	if (err)
		goto fail;
	a->nobjs = 1;
	/* C++ operators of their own (tcmalloc's, jemalloc's, a static build
	 * of either) are entry points; libstdc++'s plain ones only call malloc,
	 * which is probed already (the walk shows operator new as malloc's
	 * caller), but its aligned ones change the size */
	x = provider(paths, n, "_Znwm");
	if (strcmp(a->family, "glibc") && x == m) {
		err = object_scan(&a->objs[0], paths[m], "", cxx_funcs, NX);
	} else if (x == m) {
		err = object_scan(&a->objs[0], paths[m], "", cxx_aligned_funcs, NXA);
	} else if (x >= 0) {
		err = object_set(&a->objs[1], paths[x], names[x]);
		err = err ?: object_scan(&a->objs[1], paths[x], "", cxx_aligned_funcs, NXA);
		a->nobjs = a->objs[1].nfuncs ? 2 : 1;
	}
	if (err)
		goto fail;
	return 0;
fail:
	allocator_free(a);
	return err;
}

void allocator_free(struct allocator *a)
{
	size_t i;

	for (i = 0; i < sizeof(a->objs) / sizeof(a->objs[0]); i++) {
		free(a->objs[i].path);
		free(a->objs[i].name);
	}
	memset(a, 0, sizeof(*a));
}
