/* Finds the NT_GNU_BUILD_ID note of an ELF object through the bounded reader
 * of elf_image.c.  The id names cache entries and finds debug files, and the
 * files it is read from belong to anyone, so notes are parsed the way
 * libelf's gelf_getnote() does but with every length checked here and no
 * block read that is larger than a build id note could need. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "build_id.h"

#define NOTE_HEADER_SIZE 12 /* n_namesz, n_descsz, n_type: 4 bytes each */

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static uint32_t le32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Scans one block of notes whose entries are aligned to ALIGN (4, or 8 for
 * blocks aligned so, as GNU property notes are); returns the id length, 0
 * if absent, -ENOBUFS. */
static int notes_find_build_id(const uint8_t *p, uint64_t len, uint64_t align, uint8_t *out,
			       size_t cap)
{
	uint64_t off = 0, name_off, desc_off, namesz, descsz;

	while (len - off >= NOTE_HEADER_SIZE) {
		namesz = le32_at(p + off);
		descsz = le32_at(p + off + 4);
		name_off = off + NOTE_HEADER_SIZE;
		if (namesz > len - name_off)
			return 0;
		desc_off = align_up(name_off + namesz, align);
		if (desc_off > len || align_up(descsz, align) > len - desc_off)
			return 0;
		if (le32_at(p + off + 8) == NT_GNU_BUILD_ID && namesz == sizeof(ELF_NOTE_GNU) &&
		    memcmp(p + name_off, ELF_NOTE_GNU, sizeof(ELF_NOTE_GNU)) == 0 && descsz > 0) {
			if (descsz > cap || descsz > INT_MAX)
				return -ENOBUFS;
			memcpy(out, p + desc_off, descsz);
			return (int)descsz;
		}
		off = desc_off + align_up(descsz, align);
	}
	return 0;
}

/* Reads the note block at OFF, LEN bytes, and scans it. */
static int block_find_build_id(const struct elf_image *img, uint64_t off, uint64_t len,
			       uint64_t align, uint8_t *out, size_t cap)
{
	struct elf_section bytes;
	int ret;

	if (len == 0 || len > BUILD_ID_MAX_NOTES)
		return 0;
	ret = elf_image_bytes(img, off, len, &bytes);
	if (ret)
		return ret == -ENOEXEC ? 0 : ret; /* outside the image: not a note block */
	ret = notes_find_build_id(bytes.data, bytes.size, align == 8 ? 8 : 4, out, cap);
	elf_section_release(&bytes);
	return ret;
}

int elf_image_build_id(const struct elf_image *img, uint8_t *out, size_t cap)
{
	size_t i;
	int ret;

	/* Sections when there are any (what readelf and eu-readelf trust),
	 * else PT_NOTE segments (section headers stripped). */
	for (i = 0; i < img->shnum; i++) {
		const Elf64_Shdr *sh = &img->shdrs[i];

		if (sh->sh_type != SHT_NOTE)
			continue;
		ret = block_find_build_id(img, sh->sh_offset, sh->sh_size, sh->sh_addralign, out, cap);
		if (ret != 0)
			return ret;
	}
	if (img->shnum)
		return 0;
	for (i = 0; i < img->phnum; i++) {
		const Elf64_Phdr *ph = &img->phdrs[i];

		if (ph->p_type != PT_NOTE)
			continue;
		ret = block_find_build_id(img, ph->p_offset, ph->p_filesz, ph->p_align, out, cap);
		if (ret != 0)
			return ret;
	}
	return 0;
}

int elf_build_id_fd(int fd, uint8_t *out, size_t cap)
{
	struct elf_image img;
	const char *why;
	struct stat st;
	int ret;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -ENOEXEC;
	ret = elf_image_open_fd(&img, fd, (uint64_t)st.st_size, &why);
	if (ret)
		return ret;
	ret = elf_image_build_id(&img, out, cap);
	elf_image_close(&img);
	return ret;
}

int elf_build_id_mem(const void *image, size_t size, uint8_t *out, size_t cap)
{
	struct elf_image img;
	const char *why;
	int ret;

	if (!image)
		return -EINVAL;
	ret = elf_image_open_mem(&img, image, size, &why);
	if (ret)
		return ret;
	ret = elf_image_build_id(&img, out, cap);
	elf_image_close(&img);
	return ret;
}
