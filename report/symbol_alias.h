/* Which of an address's ELF symbol names a report shows: glibc and C++
 * runtimes give one function several (malloc, __libc_malloc,
 * __GI___libc_malloc), and users know the public one. */
#ifndef DWLEAK_SYMBOL_ALIAS_H
#define DWLEAK_SYMBOL_ALIAS_H

#include <stdbool.h>
#include <stddef.h>

#include <elfutils/libdwfl.h>

/*
 * The name to show for the function symbols starting at ADDR (a dwfl
 * address).  NAME points into libdwfl's copy of the symbol table and lives
 * as long as the module's Dwfl; RANK orders aliases, higher is better.
 */
struct sym_alias {
	Dwarf_Addr addr;
	const char *name;
	int rank;
};

/*
 * The best name of each function address of one Dwfl module, sorted by
 * address, built on first use (READY then set, also when there was no
 * memory for it: libdwfl's own choice then stands).  Zero-initialize;
 * free with sym_aliases_free().
 */
struct sym_aliases {
	struct sym_alias *v;
	size_t n;
	bool ready;
};

/*
 * The best name of the function symbols of MOD at dwfl address ADDR, or
 * FALLBACK when no function symbol starts there.  The first call reads
 * MOD's symbols (.symtab, .dynsym, .gnu_debugdata) into A; every call must
 * pass the same MOD.  The name lives as long as MOD's Dwfl.
 */
const char *sym_aliases_best(struct sym_aliases *a, Dwfl_Module *mod, Dwarf_Addr addr,
			     const char *fallback);

/* Frees what A holds and makes it unbuilt again. */
void sym_aliases_free(struct sym_aliases *a);

#endif
