/* Symbol lookup with libelf for the probes dwleak places: allocator
 * functions, and the dynamic linker's _dl_debug_state and _r_debug. */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constants.h"
#include "elf_symbols.h"

/* File offset of ELF address VADDR, through the PT_LOAD holding it. */
static int vaddr_to_off(Elf *elf, uint64_t vaddr, uint64_t *off)
{
	GElf_Phdr ph;
	size_t i, n;

	if (elf_getphdrnum(elf, &n))
		return -ENOEXEC;
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

static bool sym_wanted(const GElf_Sym *sym, const struct elf_sym_want *w)
{
	int type = GELF_ST_TYPE(sym->st_info);

	if (sym->st_shndx == SHN_UNDEF || !sym->st_value)
		return false;
	/* not STT_GNU_IFUNC: its address is the resolver, not the function */
	return type == STT_FUNC || (w->data && type == STT_OBJECT);
}

/* The wanted names by hash (base/constants.h's FNV-1a), so that each
 * symbol of a table of thousands is looked up once instead of compared
 * with every wanted name (the allocator's detection asks ~150 names of
 * each object a process maps: 10 ms of every start of python3.11 went to
 * those compares).  SLOTS (a power of two, at least twice N) hold an
 * index into WANT plus one, 0 when empty; a name wanted twice has two
 * slots. */
struct want_index {
	uint32_t *slots;
	size_t mask;
};

static uint64_t name_hash(const char *name)
{
	uint64_t h = FNV64_OFFSET;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * FNV64_PRIME;
	return h;
}

static int want_index_make(struct want_index *x, const struct elf_sym_want *want, size_t n)
{
	size_t cap = 16, k, j;

	while (cap < 2 * n)
		cap *= 2;
	x->slots = calloc(cap, sizeof(*x->slots));
	if (!x->slots)
		return -ENOMEM;
	x->mask = cap - 1;
	for (k = 0; k < n; k++) {
		for (j = name_hash(want[k].name) & x->mask; x->slots[j]; j = (j + 1) & x->mask)
			;
		x->slots[j] = (uint32_t)k + 1;
	}
	return 0;
}

static void scan_symbols(Elf *elf, Elf_Scn *scn, bool dynsym, struct elf_sym_want *want, const struct want_index *x)
{
	GElf_Shdr sh;
	Elf_Data *data;
	GElf_Sym sym;
	const char *name;
	size_t i, j, k, nsyms;

	if (!gelf_getshdr(scn, &sh) || !sh.sh_entsize)
		return;
	data = elf_getdata(scn, NULL);
	if (!data)
		return;
	nsyms = sh.sh_size / sh.sh_entsize;
	for (i = 0; i < nsyms; i++) {
		if (!gelf_getsym(data, (int)i, &sym))
			continue;
		name = elf_strptr(elf, sh.sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		for (j = name_hash(name) & x->mask; x->slots[j]; j = (j + 1) & x->mask) {
			k = x->slots[j] - 1;
			if (want[k].found || (want[k].dynsym_only && !dynsym) || strcmp(name, want[k].name) ||
			    !sym_wanted(&sym, &want[k]))
				continue;
			want[k].found = true;
			want[k].vaddr = sym.st_value;
			want[k].size = sym.st_size;
			vaddr_to_off(elf, sym.st_value, &want[k].file_off);
		}
	}
}

/* The ELF object at FD, or NULL when it is not one. */
static Elf *elf_open(int fd)
{
	Elf *elf;

	elf_version(EV_CURRENT);
	/* read (headers now, sections on demand with pread), not mapped: the
	 * owner of a traced process's library truncating it must not be able
	 * to kill dwleak with SIGBUS */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		elf = NULL;
	}
	return elf;
}

int elf_symbols_find(int fd, struct elf_sym_want *want, size_t n)
{
	static const GElf_Word order[] = { SHT_DYNSYM, SHT_SYMTAB };
	struct want_index x;
	Elf *elf;
	Elf_Scn *scn;
	GElf_Shdr sh;
	size_t t;

	if (want_index_make(&x, want, n))
		return -ENOMEM;
	elf = elf_open(fd);
	if (!elf) {
		free(x.slots);
		return -ENOEXEC;
	}
	for (t = 0; t < 2; t++) {
		for (scn = NULL; (scn = elf_nextscn(elf, scn));)
			if (gelf_getshdr(scn, &sh) && sh.sh_type == order[t])
				scan_symbols(elf, scn, order[t] == SHT_DYNSYM, want, &x);
	}
	elf_end(elf);
	free(x.slots);
	return 0;
}

int elf_symbols_imports(int fd, void (*fn)(void *arg, const char *name), void *arg)
{
	Elf *elf = elf_open(fd);
	Elf_Scn *scn = NULL;
	Elf_Data *data;
	GElf_Shdr sh;
	GElf_Sym sym;
	const char *name;
	size_t i, nsyms;

	if (!elf)
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		nsyms = data ? sh.sh_size / sh.sh_entsize : 0;
		for (i = 1; i < nsyms; i++) {
			if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx != SHN_UNDEF)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (name && *name)
				fn(arg, name);
		}
	}
	elf_end(elf);
	return 0;
}

bool elf_has_section(int fd, const char *name)
{
	Elf *elf = elf_open(fd);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstrndx;
	const char *n;
	bool found = false;

	if (!elf)
		return false;
	if (elf_getshdrstrndx(elf, &shstrndx) == 0) {
		while (!found && (scn = elf_nextscn(elf, scn))) {
			n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
			found = n && !strcmp(n, name);
		}
	}
	elf_end(elf);
	return found;
}
