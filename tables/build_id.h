/* Reading an ELF object's GNU build id, the identity reports print next to
 * each mapping, the name of its cache entry and how its separate debug file
 * is found. */
#ifndef DWLEAK_BUILD_ID_H
#define DWLEAK_BUILD_ID_H

#include <stddef.h>
#include <stdint.h>

#include "elf_image.h"

/* A note section or segment larger than this is not read: a build id note
 * is 36 bytes and sits in its own small section or in a PT_NOTE segment of
 * a few notes, so a bigger one cannot hold it and is skipped unread. */
#define BUILD_ID_MAX_NOTES (1u << 20)

/*
 * Copies the descriptor of the first NT_GNU_BUILD_ID note of IMG into OUT
 * (CAP bytes).  Notes are looked for in SHT_NOTE sections and, when the
 * image has no section headers, in PT_NOTE segments; a note block outside
 * the image or over BUILD_ID_MAX_NOTES is skipped.  Returns the id's length
 * (> 0), 0 when there is none, -ENOBUFS when the id is longer than CAP,
 * -EIO when IMG's file has shrunk, -ENOMEM.
 */
int elf_image_build_id(const struct elf_image *img, uint8_t *out, size_t cap);

/*
 * Same for the ELF64 little-endian file open at FD, read with pread (never
 * mapped; the fd's offset is not used; it stays open and owned by the
 * caller).  Returns the length, 0, -ENOEXEC when FD is not an ELF64
 * little-endian regular file, -EISDIR for a directory, -ENOBUFS, -EBADF,
 * -EIO, -ENOMEM.
 */
int elf_build_id_fd(int fd, uint8_t *out, size_t cap);

/* Same, on an ELF image of SIZE bytes in memory.  IMAGE is only read. */
int elf_build_id_mem(const void *image, size_t size, uint8_t *out, size_t cap);

#endif
