/* Bounds-checked ELF64 header, section and segment access for the table
 * compiler.  Written by hand rather than through libelf so that the fuzzed
 * path has no state beyond what is checked here. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "elf_image.h"

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2
#endif

/* Decompressed debug sections larger than this are refused: a hostile
 * Chdr could otherwise ask for any amount of memory. */
#define ELF_MAX_DECOMPRESSED (1ull << 30)

static int range_ok(size_t size, uint64_t off, uint64_t len)
{
	return off <= size && len <= size - off;
}

static int copy_table(const struct elf_image *img, uint64_t off, size_t n, size_t entsize,
		      size_t want, void **out)
{
	if (n == 0) {
		*out = NULL;
		return 0;
	}
	if (entsize != want || n > SIZE_MAX / want || !range_ok(img->size, off, n * want))
		return -ENOEXEC;
	*out = malloc(n * want);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, img->data + off, n * want);
	return 0;
}

int elf_image_open(struct elf_image *img, const void *data, size_t size, const char **why)
{
	const Elf64_Shdr *strsec;
	void *tab;
	int err;

	memset(img, 0, sizeof(*img));
	img->data = data;
	img->size = size;
	*why = "not an ELF file";
	if (size < sizeof(Elf64_Ehdr) || memcmp(data, ELFMAG, SELFMAG))
		return -ENOEXEC;
	memcpy(&img->ehdr, data, sizeof(img->ehdr));
	*why = "not a 64-bit little-endian x86_64 ELF object";
	if (img->ehdr.e_ident[EI_CLASS] != ELFCLASS64 || img->ehdr.e_ident[EI_DATA] != ELFDATA2LSB ||
	    img->ehdr.e_machine != EM_X86_64)
		return -ENOEXEC;
	*why = "not an executable or shared object (relocatable and core files have no load addresses)";
	if (img->ehdr.e_type != ET_EXEC && img->ehdr.e_type != ET_DYN)
		return -ENOEXEC;

	*why = "section headers lie outside the file (truncated?)";
	img->shnum = img->ehdr.e_shnum;
	if (img->shnum) {
		err = copy_table(img, img->ehdr.e_shoff, img->shnum, img->ehdr.e_shentsize,
				 sizeof(Elf64_Shdr), &tab);
		if (err)
			goto fail;
		img->shdrs = tab;
	}
	*why = "program headers lie outside the file (truncated?)";
	img->phnum = img->ehdr.e_phnum;
	if (img->phnum) {
		err = copy_table(img, img->ehdr.e_phoff, img->phnum, img->ehdr.e_phentsize,
				 sizeof(Elf64_Phdr), &tab);
		if (err)
			goto fail;
		img->phdrs = tab;
	}
	if (img->ehdr.e_shstrndx != SHN_UNDEF && img->ehdr.e_shstrndx < img->shnum) {
		strsec = &img->shdrs[img->ehdr.e_shstrndx];
		if (strsec->sh_type != SHT_NOBITS && range_ok(size, strsec->sh_offset, strsec->sh_size)) {
			img->shstrtab = (const char *)img->data + strsec->sh_offset;
			img->shstrsz = strsec->sh_size;
		}
	}
	return 0;
fail:
	elf_image_close(img);
	return err;
}

void elf_image_close(struct elf_image *img)
{
	free(img->shdrs);
	free(img->phdrs);
	img->shdrs = NULL;
	img->phdrs = NULL;
}

static int name_is(const struct elf_image *img, uint32_t off, const char *name)
{
	size_t len = strlen(name);

	if (!img->shstrtab || off >= img->shstrsz || len >= img->shstrsz - off)
		return 0;
	return memcmp(img->shstrtab + off, name, len + 1) == 0;
}

static int section_inflate(const Elf64_Chdr *ch, const uint8_t *src, size_t len,
			   struct elf_section *sec)
{
	uint8_t *out;
	size_t got;

	if (ch->ch_size == 0 || ch->ch_size > ELF_MAX_DECOMPRESSED)
		return -ENOEXEC;
	out = malloc(ch->ch_size);
	if (!out)
		return -ENOMEM;
	if (ch->ch_type == ELFCOMPRESS_ZLIB) {
		uLongf dlen = ch->ch_size;

		if (uncompress(out, &dlen, src, len) != Z_OK || dlen != ch->ch_size)
			goto bad;
	} else if (ch->ch_type == ELFCOMPRESS_ZSTD) {
		got = ZSTD_decompress(out, ch->ch_size, src, len);
		if (ZSTD_isError(got) || got != ch->ch_size)
			goto bad;
	} else {
		goto bad;
	}
	sec->data = out;
	sec->size = ch->ch_size;
	sec->owned = out;
	return 0;
bad:
	free(out);
	return -ENOEXEC;
}

int elf_image_section(const struct elf_image *img, const char *name, struct elf_section *sec)
{
	const Elf64_Shdr *sh;
	Elf64_Chdr ch;
	size_t i;

	memset(sec, 0, sizeof(*sec));
	for (i = 0; i < img->shnum; i++) {
		sh = &img->shdrs[i];
		if (!name_is(img, sh->sh_name, name))
			continue;
		if (sh->sh_type == SHT_NOBITS)
			return -ENOENT;
		if (!range_ok(img->size, sh->sh_offset, sh->sh_size))
			return -ENOEXEC;
		sec->addr = sh->sh_addr;
		if (!(sh->sh_flags & SHF_COMPRESSED)) {
			sec->data = img->data + sh->sh_offset;
			sec->size = sh->sh_size;
			return 0;
		}
		if (sh->sh_size < sizeof(ch))
			return -ENOEXEC;
		memcpy(&ch, img->data + sh->sh_offset, sizeof(ch));
		return section_inflate(&ch, img->data + sh->sh_offset + sizeof(ch),
				       sh->sh_size - sizeof(ch), sec);
	}
	return -ENOENT;
}

void elf_section_release(struct elf_section *sec)
{
	free(sec->owned);
	sec->owned = NULL;
}

int elf_image_range_loaded(const struct elf_image *img, uint64_t start, uint64_t end)
{
	const Elf64_Phdr *ph;
	size_t i;

	for (i = 0; i < img->phnum; i++) {
		ph = &img->phdrs[i];
		if (ph->p_type != PT_LOAD || ph->p_vaddr + ph->p_memsz < ph->p_vaddr)
			continue;
		if (start >= ph->p_vaddr && end <= ph->p_vaddr + ph->p_memsz)
			return 1;
	}
	return 0;
}
