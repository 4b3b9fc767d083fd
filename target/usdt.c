/* Reading .note.stapsdt with libelf: each note is type 3, owner
 * "stapsdt", and holds the site's address, the address .stapsdt.base had
 * at link time (a prelinked object moved it: sites move with it), the
 * semaphore's address, then provider, name and arguments as strings. */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "usdt.h"

#define NT_STAPSDT 3

/* File offset of ELF address VADDR in a PT_LOAD's file bytes; 0 when none. */
static uint64_t off_of(Elf *elf, uint64_t vaddr)
{
	GElf_Phdr ph;
	size_t i, n;

	if (elf_getphdrnum(elf, &n))
		return 0;
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

/* The address of section NAME, 0 when there is none. */
static uint64_t section_addr(Elf *elf, const char *name)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstrndx;
	const char *n;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (n && !strcmp(n, name))
			return sh.sh_addr;
	}
	return 0;
}

/* Appends the note DESC (LEN bytes) to *V; -ENOMEM or 0 (a malformed
 * note is skipped). */
static int note_add(Elf *elf, uint64_t base_now, const char *desc, size_t len, struct usdt_note **v, size_t *n)
{
	struct usdt_note *grown, nt = { 0 };
	const char *s[3], *end = desc + len, *p;
	uint64_t a[3];
	int i;

	if (len < 24)
		return 0;
	memcpy(a, desc, sizeof(a));
	for (p = desc + 24, i = 0; i < 3; i++) {
		s[i] = p;
		p = memchr(p, 0, (size_t)(end - p));
		if (!p)
			return 0;
		p++;
	}
	nt.pc = base_now && a[1] ? a[0] - a[1] + base_now : a[0];
	nt.pc_off = off_of(elf, nt.pc);
	nt.sem = a[2];
	nt.sem_off = a[2] ? off_of(elf, a[2]) : 0;
	if (!nt.pc_off)
		return 0;
	nt.provider = strdup(s[0]);
	nt.name = strdup(s[1]);
	nt.args = strdup(s[2]);
	grown = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nt.provider || !nt.name || !nt.args || !grown) {
		free(nt.provider);
		free(nt.name);
		free(nt.args);
		if (grown)
			*v = grown;
		return -ENOMEM;
	}
	*v = grown;
	(*v)[(*n)++] = nt;
	return 0;
}

int usdt_notes_read(int fd, struct usdt_note **out, size_t *n)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	Elf_Data *data;
	GElf_Shdr sh;
	GElf_Nhdr nh;
	size_t off, name_off, desc_off;
	uint64_t base_now;
	int err = 0;

	*out = NULL;
	*n = 0;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		return -ENOEXEC;
	}
	base_now = section_addr(elf, ".stapsdt.base");
	while (!err && (scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		for (off = 0; !err && data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0;) {
			if (nh.n_type != NT_STAPSDT || nh.n_namesz != 8 ||
			    memcmp((char *)data->d_buf + name_off, "stapsdt", 8))
				continue;
			err = note_add(elf, base_now, (char *)data->d_buf + desc_off, nh.n_descsz, out, n);
		}
	}
	elf_end(elf);
	if (err) {
		usdt_notes_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return err;
}

const struct usdt_note *usdt_note_find(const struct usdt_note *v, size_t n, const char *provider, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(v[i].provider, provider) && !strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

void usdt_notes_free(struct usdt_note *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(v[i].provider);
		free(v[i].name);
		free(v[i].args);
	}
	free(v);
}
