/* Bounds-checked ELF64 header, section and segment access for the table
 * compiler, over memory or over a file read with pread.  Written by hand
 * rather than through libelf so that the fuzzed path has no state beyond
 * what is checked here, and so that no file is ever mapped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "elf_image.h"
#include "unwind_format.h"

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2
#endif

static bool range_ok(uint64_t size, uint64_t off, uint64_t len)
{
	return off <= size && len <= size - off;
}

/* Reads LEN bytes at OFF of the file into BUF; a short read means the file
 * shrank after it was measured. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	ssize_t n;

	while (len) {
		n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int elf_image_bytes(const struct elf_image *img, uint64_t off, uint64_t len,
		    struct elf_section *out)
{
	void *copy;
	int err;

	memset(out, 0, sizeof(*out));
	if (!range_ok(img->size, off, len) || len > SIZE_MAX)
		return -ENOEXEC;
	if (img->data) {
		out->data = img->data + off;
		out->size = (size_t)len;
		return 0;
	}
	copy = malloc(len ? (size_t)len : 1);
	if (!copy)
		return -ENOMEM;
	err = pread_all(img->fd, copy, (size_t)len, off);
	if (err) {
		free(copy);
		return err;
	}
	out->data = copy;
	out->size = (size_t)len;
	out->owned = copy;
	return 0;
}

/* Copies a table of N entries of ENTSIZE bytes (which must be WANT) at OFF. */
static int copy_table(const struct elf_image *img, uint64_t off, size_t n, size_t entsize,
		      size_t want, void **out)
{
	struct elf_section bytes;
	int err;

	*out = NULL;
	if (n == 0)
		return 0;
	if (entsize != want || n > SIZE_MAX / want)
		return -ENOEXEC;
	err = elf_image_bytes(img, off, (uint64_t)n * want, &bytes);
	if (err)
		return err;
	if (bytes.owned) {
		*out = bytes.owned;
		return 0;
	}
	*out = malloc(n * want);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, bytes.data, n * want);
	return 0;
}

/* The section name table, when its header is sane; names are optional. */
static int shstrtab_load(struct elf_image *img)
{
	const Elf64_Shdr *strsec;
	struct elf_section bytes;
	int err;

	if (img->ehdr.e_shstrndx == SHN_UNDEF || img->ehdr.e_shstrndx >= img->shnum)
		return 0;
	strsec = &img->shdrs[img->ehdr.e_shstrndx];
	if (strsec->sh_type == SHT_NOBITS || strsec->sh_size > ELF_MAX_SHSTRTAB ||
	    !range_ok(img->size, strsec->sh_offset, strsec->sh_size))
		return 0;
	err = elf_image_bytes(img, strsec->sh_offset, strsec->sh_size, &bytes);
	if (err)
		return err;
	img->shstrtab = (const char *)bytes.data;
	img->shstrsz = bytes.size;
	img->shstrtab_owned = bytes.owned;
	return 0;
}

static int image_parse(struct elf_image *img, const char **why)
{
	struct elf_section bytes;
	void *tab;
	int err;

	*why = "not an ELF file";
	if (img->size < sizeof(Elf64_Ehdr))
		return -ENOEXEC;
	err = elf_image_bytes(img, 0, sizeof(Elf64_Ehdr), &bytes);
	if (err)
		goto fail;
	memcpy(&img->ehdr, bytes.data, sizeof(img->ehdr));
	elf_section_release(&bytes);
	if (memcmp(img->ehdr.e_ident, ELFMAG, SELFMAG))
		return -ENOEXEC;
	*why = "not a 64-bit little-endian ELF file";
	if (img->ehdr.e_ident[EI_CLASS] != ELFCLASS64 || img->ehdr.e_ident[EI_DATA] != ELFDATA2LSB)
		return -ENOEXEC;

	*why = "section headers lie outside the file (truncated?)";
	img->shnum = img->ehdr.e_shnum;
	err = copy_table(img, img->ehdr.e_shoff, img->shnum, img->ehdr.e_shentsize,
			 sizeof(Elf64_Shdr), &tab);
	if (err)
		goto fail;
	img->shdrs = tab;
	*why = "program headers lie outside the file (truncated?)";
	img->phnum = img->ehdr.e_phnum;
	err = copy_table(img, img->ehdr.e_phoff, img->phnum, img->ehdr.e_phentsize,
			 sizeof(Elf64_Phdr), &tab);
	if (err)
		goto fail;
	img->phdrs = tab;
	*why = "the file shrank while it was read";
	err = shstrtab_load(img);
	if (err)
		goto fail;
	return 0;
fail:
	if (err == -EIO)
		*why = "the file shrank while it was read";
	else if (err == -ENOMEM)
		*why = "out of memory";
	elf_image_close(img);
	return err;
}

int elf_image_open_mem(struct elf_image *img, const void *data, size_t size, const char **why)
{
	memset(img, 0, sizeof(*img));
	img->data = data;
	img->fd = -1;
	img->size = size;
	*why = "not an ELF file";
	if (!data)
		return -ENOEXEC;
	return image_parse(img, why);
}

int elf_image_open_fd(struct elf_image *img, int fd, uint64_t size, const char **why)
{
	memset(img, 0, sizeof(*img));
	img->fd = fd;
	img->size = size;
	return image_parse(img, why);
}

int elf_machine_arch(unsigned int machine)
{
	switch (machine) {
	case EM_X86_64:
		return UNWIND_ARCH_X86_64;
	case EM_AARCH64:
		return UNWIND_ARCH_AARCH64;
	default:
		return -1;
	}
}

int elf_image_check_object(const struct elf_image *img, const char **why)
{
	*why = "not an x86_64 or aarch64 ELF object";
	if (elf_machine_arch(img->ehdr.e_machine) < 0)
		return -ENOEXEC;
	*why = "not an executable or shared object (relocatable and core files have no load addresses)";
	if (img->ehdr.e_type != ET_EXEC && img->ehdr.e_type != ET_DYN)
		return -ENOEXEC;
	return 0;
}

void elf_image_close(struct elf_image *img)
{
	free(img->shdrs);
	free(img->phdrs);
	free(img->shstrtab_owned);
	img->shdrs = NULL;
	img->phdrs = NULL;
	img->shstrtab_owned = NULL;
	img->shstrtab = NULL;
}

static bool name_is(const struct elf_image *img, uint32_t off, const char *name)
{
	size_t len = strlen(name);

	if (!img->shstrtab || off >= img->shstrsz || len >= img->shstrsz - off)
		return false;
	return memcmp(img->shstrtab + off, name, len + 1) == 0;
}

int elf_image_section(const struct elf_image *img, const char *name, uint64_t cap,
		      struct elf_section *sec)
{
	const Elf64_Shdr *sh;
	size_t i;
	int err;

	memset(sec, 0, sizeof(*sec));
	for (i = 0; i < img->shnum; i++) {
		sh = &img->shdrs[i];
		if (!name_is(img, sh->sh_name, name))
			continue;
		if (sh->sh_type == SHT_NOBITS)
			return -ENOENT;
		if (!range_ok(img->size, sh->sh_offset, sh->sh_size))
			return -ENOEXEC;
		if (sh->sh_size > cap)
			return -EFBIG;
		err = elf_image_bytes(img, sh->sh_offset, sh->sh_size, sec);
		if (err)
			return err;
		sec->shdr = *sh;
		sec->addr = sh->sh_addr;
		return 0;
	}
	return -ENOENT;
}

bool elf_section_compressed(const struct elf_section *stored)
{
	return (stored->shdr.sh_flags & SHF_COMPRESSED) != 0;
}

/* Reads STORED's compression header; false when it does not fit. */
static bool chdr_read(const struct elf_section *stored, Elf64_Chdr *ch)
{
	if (stored->size < sizeof(*ch))
		return false;
	memcpy(ch, stored->data, sizeof(*ch));
	return true;
}

uint64_t elf_section_claimed_size(const struct elf_section *stored)
{
	Elf64_Chdr ch;

	if (!elf_section_compressed(stored))
		return stored->size;
	return chdr_read(stored, &ch) ? ch.ch_size : 0;
}

/* The most LEN compressed bytes of type TYPE can expand to; 0 for an
 * unknown type. */
static uint64_t inflate_bound(uint32_t type, uint64_t len)
{
	if (type == ELFCOMPRESS_ZLIB)
		return len * ELF_ZLIB_MAX_RATIO;
	if (type == ELFCOMPRESS_ZSTD)
		return len * ELF_ZSTD_MAX_RATIO;
	return 0;
}

int elf_section_inflate(const struct elf_section *stored, uint64_t cap, struct elf_section *out)
{
	const uint8_t *src = stored->data + sizeof(Elf64_Chdr);
	size_t len, got;
	Elf64_Chdr ch;
	uint8_t *buf;

	memset(out, 0, sizeof(*out));
	out->shdr = stored->shdr;
	out->addr = stored->addr;
	if (!elf_section_compressed(stored)) {
		out->data = stored->data;
		out->size = stored->size;
		return stored->size > cap ? -EFBIG : 0;
	}
	if (!chdr_read(stored, &ch) || ch.ch_size == 0 || ch.ch_size > SIZE_MAX)
		return -ENOEXEC;
	len = stored->size - sizeof(ch);
	if (inflate_bound(ch.ch_type, len) == 0)
		return -ENOEXEC;
	if (ch.ch_size > cap || ch.ch_size > inflate_bound(ch.ch_type, len))
		return -EFBIG;
	buf = malloc((size_t)ch.ch_size);
	if (!buf)
		return -ENOMEM;
	if (ch.ch_type == ELFCOMPRESS_ZLIB) {
		uLongf dlen = (uLongf)ch.ch_size;

		if (uncompress(buf, &dlen, src, len) != Z_OK || dlen != ch.ch_size)
			goto bad;
	} else {
		got = ZSTD_decompress(buf, (size_t)ch.ch_size, src, len);
		if (ZSTD_isError(got) || got != ch.ch_size)
			goto bad;
	}
	out->data = buf;
	out->size = (size_t)ch.ch_size;
	out->owned = buf;
	return 0;
bad:
	free(buf);
	return -ENOEXEC;
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

uint64_t elf_image_code_bytes(const struct elf_image *img)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < img->phnum; i++) {
		const Elf64_Phdr *ph = &img->phdrs[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		sum += ph->p_filesz < img->size ? ph->p_filesz : img->size;
		if (sum >= img->size)
			return img->size;
	}
	return sum;
}

bool elf_image_load_extent(const struct elf_image *img, uint64_t *lo, uint64_t *hi)
{
	bool any = false;
	size_t i;

	for (i = 0; i < img->phnum; i++) {
		const Elf64_Phdr *ph = &img->phdrs[i];
		uint64_t end;

		if (ph->p_type != PT_LOAD || ph->p_vaddr + ph->p_memsz < ph->p_vaddr)
			continue;
		end = ph->p_vaddr + ph->p_memsz;
		if (!any || ph->p_vaddr < *lo)
			*lo = ph->p_vaddr;
		if (!any || end > *hi)
			*hi = end;
		any = true;
	}
	return any;
}
