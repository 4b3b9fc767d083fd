/* A minimal, bounds-checked ELF64 reader over bytes in memory.  The table
 * compiler reads untrusted files (and is fuzzed), so every header, section
 * and segment is checked against the image before it is used. */
#ifndef DWLEAK_ELF_IMAGE_H
#define DWLEAK_ELF_IMAGE_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

/* Headers are copied out of the image so that a misaligned e_shoff or
 * e_phoff in a hostile file cannot cause unaligned access. */
struct elf_image {
	const uint8_t *data;
	size_t size;
	Elf64_Ehdr ehdr;
	Elf64_Shdr *shdrs; /* e_shnum entries, owned */
	size_t shnum;
	Elf64_Phdr *phdrs; /* e_phnum entries, owned */
	size_t phnum;
	const char *shstrtab; /* points into data; NUL inside bounds checked per name */
	size_t shstrsz;
};

/* One section's contents: ADDR is its sh_addr.  When the section was
 * compressed (SHF_COMPRESSED) DATA is a decompressed copy owned by the
 * section (free with elf_section_release()). */
struct elf_section {
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	void *owned;
};

/* Parses the headers of the ELF64 x86_64 image DATA[0..SIZE).  Returns 0,
 * or -ENOEXEC (with a reason in *WHY) when it is not one we can read. */
int elf_image_open(struct elf_image *img, const void *data, size_t size, const char **why);

/* Frees the header copies; the image bytes stay the caller's. */
void elf_image_close(struct elf_image *img);

/* Finds section NAME.  Returns 0 and fills *SEC, -ENOENT when absent or
 * SHT_NOBITS, -ENOEXEC when it lies outside the image or cannot be
 * decompressed. */
int elf_image_section(const struct elf_image *img, const char *name, struct elf_section *sec);

void elf_section_release(struct elf_section *sec);

/* True when [start, end) lies inside one PT_LOAD segment's memory. */
int elf_image_range_loaded(const struct elf_image *img, uint64_t start, uint64_t end);

#endif
