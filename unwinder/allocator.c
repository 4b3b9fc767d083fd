/* Allocator symbol lookup: which functions of an object to probe, and
 * where, read from its dynamic (or full) symbol table with libelf. */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include "allocator.h"

static const char *const kind_names[ALLOC_KIND_COUNT] = {
	[ALLOC_MALLOC] = "malloc",
	[ALLOC_CALLOC] = "calloc",
	[ALLOC_REALLOC] = "realloc",
	[ALLOC_REALLOCARRAY] = "reallocarray",
	[ALLOC_POSIX_MEMALIGN] = "posix_memalign",
	[ALLOC_ALIGNED_ALLOC] = "aligned_alloc",
	[ALLOC_MEMALIGN] = "memalign",
	[ALLOC_VALLOC] = "valloc",
	[ALLOC_PVALLOC] = "pvalloc",
	[ALLOC_FREE] = "free",
};

const char *alloc_kind_name(uint32_t kind)
{
	return kind < ALLOC_KIND_COUNT ? kind_names[kind] : "unknown";
}

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

/* Scans symbol section SCN for the allocator names not found yet. */
static void scan_symbols(Elf *elf, Elf_Scn *scn, struct alloc_func *found)
{
	GElf_Shdr sh;
	Elf_Data *data;
	GElf_Sym sym;
	const char *name;
	size_t i, k, nsyms;

	if (!gelf_getshdr(scn, &sh) || !sh.sh_entsize)
		return;
	data = elf_getdata(scn, NULL);
	if (!data)
		return;
	nsyms = sh.sh_size / sh.sh_entsize;
	for (i = 0; i < nsyms; i++) {
		if (!gelf_getsym(data, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh.sh_link, sym.st_name);
		if (!name)
			continue;
		for (k = 0; k < ALLOC_KIND_COUNT; k++) {
			if (found[k].vaddr || strcmp(name, kind_names[k]))
				continue;
			found[k].vaddr = sym.st_value;
			found[k].size = sym.st_size;
		}
	}
}

int allocator_find(int fd, struct alloc_func *out, size_t *n)
{
	struct alloc_func found[ALLOC_KIND_COUNT] = { 0 };
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t k, j, cnt = 0;
	Elf *elf;
	int err = 0;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		if (gelf_getshdr(scn, &sh) && (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB))
			scan_symbols(elf, scn, found);
	}
	if (!found[ALLOC_MALLOC].vaddr || !found[ALLOC_FREE].vaddr) {
		err = -ENOENT;
		goto out;
	}
	for (k = 0; k < ALLOC_KIND_COUNT; k++) {
		if (!found[k].vaddr)
			continue;
		for (j = 0; j < cnt && out[j].vaddr != found[k].vaddr; j++)
			;
		if (j < cnt)
			continue; /* an alias: one probe serves both names */
		found[k].name = kind_names[k];
		found[k].kind = (uint32_t)k;
		if (vaddr_to_off(elf, found[k].vaddr, &found[k].file_off))
			continue;
		out[cnt++] = found[k];
	}
	*n = cnt;
out:
	if (elf)
		elf_end(elf);
	return err;
}
