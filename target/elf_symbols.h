/* Looking up named symbols in an ELF object (its .dynsym and .symtab):
 * where a function or variable is, its size, and the file offset uprobes
 * attach at. */
#ifndef DWLEAK_ELF_SYMBOLS_H
#define DWLEAK_ELF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_sym_want {
	const char *name; /* in: exact symbol name (no version suffix) */
	bool data;	  /* in: accept STT_OBJECT too (default: STT_FUNC only) */
	bool dynsym_only; /* in: only an exported definition (.dynsym) counts */
	bool found;	  /* out */
	uint64_t vaddr;	  /* out: ELF address */
	uint64_t size;	  /* out: st_size, 0 when unknown */
	uint64_t file_off; /* out: file offset of vaddr, 0 when not in a PT_LOAD */
};

/*
 * Fills WANT[0..N) from the defined symbols of the ELF object open at FD
 * (the first definition wins; .dynsym is read before .symtab).  Returns
 * 0 (check each .found), -ENOEXEC when FD is not an ELF object, or -ENOMEM.
 */
int elf_symbols_find(int fd, struct elf_sym_want *want, size_t n);

/* True when the ELF object at FD has a section named NAME. */
bool elf_has_section(int fd, const char *name);

/*
 * Calls FN(ARG, NAME) for each function or object the ELF object at FD
 * imports (an undefined .dynsym entry; NAME is valid during the call
 * only).  Returns 0, or -ENOEXEC when FD is not an ELF object.
 */
int elf_symbols_imports(int fd, void (*fn)(void *arg, const char *name), void *arg);

#endif
