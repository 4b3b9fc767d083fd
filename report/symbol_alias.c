/* Which of an address's ELF symbol names a report shows: the public one of
 * the aliases glibc and C++ runtimes give a function, ranked the way perf
 * picks it. */
#include <stdlib.h>
#include <string.h>

#include <gelf.h>

#include "demangle.h"
#include "symbol_alias.h"

/*
 * How good NAME with binding BIND is as the name of its address: glibc
 * gives one function several names (malloc, __libc_malloc and the local
 * __GI___libc_malloc); users and the report format expect the public one,
 * the way perf picks it.  Fewer leading underscores win (calloc over the
 * global __libc_calloc; malloc over a static binary's global __malloc; a
 * mangled C++ or Rust name counts as none), then an exported name (global or
 * weak) over a local one, then global over weak, then the shorter name.
 */
static int alias_rank(const char *name, unsigned int bind)
{
	int exported = bind == STB_GLOBAL || bind == STB_WEAK;
	size_t underscores = strspn(name, "_"), len = strlen(name);

	/* a C++ or Rust name reads best demangled: operator new over
	 * tcmalloc's tc_new */
	if (symbol_is_mangled(name))
		underscores = 0;

	if (underscores > 15)
		underscores = 15;
	if (len > 4095)
		len = 4095;
	return (int)(15 - underscores) << 20 | exported << 16 | (bind == STB_GLOBAL) << 12 |
	       (int)(4095 - len);
}

static int alias_cmp(const void *a, const void *b)
{
	const struct sym_alias *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return y->rank - x->rank; /* best first */
}

/* Builds A from every function symbol libdwfl knows of MOD.  Without
 * memory there is none and libdwfl's own choice stands. */
static void aliases_build(struct sym_aliases *a, Dwfl_Module *mod)
{
	int nsyms = dwfl_module_getsymtab(mod);
	size_t n = 0;

	a->ready = true;
	if (nsyms <= 0)
		return;
	a->v = malloc(nsyms * sizeof(*a->v));
	if (!a->v)
		return;
	for (int i = 1; i < nsyms; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);

		if (!name || !name[0] || shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		a->v[n].addr = addr;
		a->v[n].name = name;
		a->v[n].rank = alias_rank(name, GELF_ST_BIND(sym.st_info));
		n++;
	}
	qsort(a->v, n, sizeof(*a->v), alias_cmp);
	/* Keep the best name of each address. */
	a->n = 0;
	for (size_t i = 0; i < n; i++)
		if (a->n == 0 || a->v[a->n - 1].addr != a->v[i].addr)
			a->v[a->n++] = a->v[i];
}

const char *sym_aliases_best(struct sym_aliases *a, Dwfl_Module *mod, Dwarf_Addr addr,
			     const char *fallback)
{
	size_t lo = 0, hi;

	if (!a->ready)
		aliases_build(a, mod);
	hi = a->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < a->n && a->v[lo].addr == addr)
		return a->v[lo].name;
	return fallback;
}

void sym_aliases_free(struct sym_aliases *a)
{
	free(a->v);
	*a = (struct sym_aliases){ 0 };
}
