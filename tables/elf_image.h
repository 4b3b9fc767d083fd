/* A minimal, bounds-checked ELF64 reader over bytes in memory or over a file
 * read with pread.  The table compiler reads untrusted files as root (and is
 * fuzzed), so every header, section and segment is checked against the image
 * before it is used, and a file is never mapped: the owner of a mapped file
 * who truncates it would turn our next read into SIGBUS. */
#ifndef DWLEAK_ELF_IMAGE_H
#define DWLEAK_ELF_IMAGE_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One ELF64 little-endian image.  Exactly one backing is set: DATA (the
 * whole image in memory, borrowed) or FD (a file read with pread, borrowed;
 * it must stay open for as long as sections are read from it).  SIZE is the
 * image's length, for a file its size when opened: every offset is checked
 * against it, and a file that has shrunk since gives -EIO, never a fault.
 * Headers are copied out so that a misaligned e_shoff or e_phoff in a
 * hostile file cannot cause unaligned access.
 */
struct elf_image {
	const uint8_t *data; /* memory backing, or NULL */
	int fd;		     /* file backing, or -1 */
	uint64_t size;
	Elf64_Ehdr ehdr;
	Elf64_Shdr *shdrs; /* e_shnum entries, owned */
	size_t shnum;
	Elf64_Phdr *phdrs; /* e_phnum entries, owned */
	size_t phnum;
	const char *shstrtab; /* section names; NUL inside bounds checked per name */
	size_t shstrsz;
	void *shstrtab_owned; /* the file backing's copy of it */
};

/* Bytes of one section, or of any range of the image.  DATA points into a
 * memory image, or into OWNED, a copy read from the file or a decompressed
 * copy (free with elf_section_release()).  SHDR is the section's header
 * (zeroed for a range that is no section). */
struct elf_section {
	const uint8_t *data;
	size_t size;
	uint64_t addr; /* = shdr.sh_addr */
	Elf64_Shdr shdr;
	void *owned;
};

/* Section names longer than this table cannot be real (a linked object's
 * names are a few hundred bytes; -ffunction-sections names are merged by
 * the linker): one that claims more is ignored rather than read. */
#define ELF_MAX_SHSTRTAB (4u << 20)

/*
 * The most a compressed section can expand to, per byte of compressed data.
 * deflate's longest match (258 bytes) costs at least two bits, so zlib never
 * exceeds 1032:1 (zlib's own FAQ gives that figure).  zstd's densest form is
 * an RLE block: a 3-byte header and one byte make up to a full 128 KiB
 * block, so no zstd frame exceeds 32768:1.  A section that claims more than
 * this cannot be telling the truth, and is refused before anything is
 * allocated for it.
 */
#define ELF_ZLIB_MAX_RATIO 1032
#define ELF_ZSTD_MAX_RATIO 32768

/* Parses the headers of the ELF64 little-endian image DATA[0..SIZE).
 * Returns 0, or -ENOEXEC (with a reason in *WHY) when it is not one we can
 * read, -ENOMEM.  Close with elf_image_close(). */
int elf_image_open_mem(struct elf_image *img, const void *data, size_t size, const char **why);

/* Same on the file open at FD whose size is SIZE (the caller's fstat), read
 * with pread (the fd's offset is not used).  Returns 0, -ENOEXEC with *WHY,
 * -EIO when the file is shorter than SIZE by now, -ENOMEM. */
int elf_image_open_fd(struct elf_image *img, int fd, uint64_t size, const char **why);

/* Checks that the image is something the table compiler can unwind: an
 * x86_64 or aarch64 executable or shared object (the walker takes only
 * its own machine's: unwinder_add checks).  Returns 0 or -ENOEXEC with *WHY. */
int elf_image_check_object(const struct elf_image *img, const char **why);

/* The enum unwind_arch whose tables the compiler makes from an object of
 * ELF machine MACHINE, or -1 for a machine it does not read: the one
 * place that knows which machines those are. */
int elf_machine_arch(unsigned int machine);

/* Frees the header copies; the image bytes or fd stay the caller's. */
void elf_image_close(struct elf_image *img);

/*
 * Finds the first section called NAME and gives its bytes as stored in the
 * file (still compressed when SHF_COMPRESSED).  Nothing is read or
 * allocated when it lies outside the image or is larger than CAP.  Returns
 * 0 and fills *SEC, -ENOENT when absent or SHT_NOBITS, -ENOEXEC when it
 * lies outside the image, -EFBIG when its sh_size exceeds CAP, -EIO when
 * the file has shrunk, -ENOMEM.
 */
int elf_image_section(const struct elf_image *img, const char *name, uint64_t cap,
		      struct elf_section *sec);

/* Gives the LEN bytes at image offset OFF in *OUT (shdr zeroed).  Returns
 * 0, -ENOEXEC outside the image, -EIO when the file has shrunk, -ENOMEM. */
int elf_image_bytes(const struct elf_image *img, uint64_t off, uint64_t len,
		    struct elf_section *out);

/* True when STORED (from elf_image_section()) is SHF_COMPRESSED. */
bool elf_section_compressed(const struct elf_section *stored);

/*
 * The decompressed contents of STORED into *OUT (a borrowed view of STORED
 * when it is not compressed).  The size its compression header claims is
 * checked before any memory is committed: it may not exceed CAP, nor what
 * the compressed bytes could possibly expand to (ELF_ZLIB_MAX_RATIO,
 * ELF_ZSTD_MAX_RATIO).  Returns 0, -EFBIG when the claim exceeds either
 * bound, -ENOEXEC when the header or the data are invalid, -ENOMEM.
 */
int elf_section_inflate(const struct elf_section *stored, uint64_t cap, struct elf_section *out);

/* The decompressed size STORED claims (its size when not compressed), or 0
 * when its compression header is unreadable. */
uint64_t elf_section_claimed_size(const struct elf_section *stored);

/* Frees what SEC owns; a zeroed or borrowed section is fine. */
void elf_section_release(struct elf_section *sec);

/* True when [start, end) lies inside one PT_LOAD segment's memory. */
int elf_image_range_loaded(const struct elf_image *img, uint64_t start, uint64_t end);

/* Bytes of code the image really holds: the file sizes of its executable
 * PT_LOAD segments, each and their sum clipped to the image's size. */
uint64_t elf_image_code_bytes(const struct elf_image *img);

/* The lowest PT_LOAD address in *LO and one past the highest in *HI;
 * returns false when there is no PT_LOAD segment. */
bool elf_image_load_extent(const struct elf_image *img, uint64_t *lo, uint64_t *hi);

#endif
