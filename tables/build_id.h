/* Reading an ELF object's GNU build id, the key under which compiled tables
 * are cached and the identity reports print next to each mapping. */
#ifndef DWLEAK_BUILD_ID_H
#define DWLEAK_BUILD_ID_H

#include <stddef.h>
#include <stdint.h>

/*
 * Copies the descriptor of the first NT_GNU_BUILD_ID note of the ELF object
 * open at FD into OUT (CAP bytes).  Notes are looked for in SHT_NOTE
 * sections and, when the object has no section headers, in PT_NOTE
 * segments.  The fd stays open and owned by the caller; its offset is not
 * used.  Returns the id's length (> 0), 0 when the object has no build id,
 * -ENOEXEC when FD is not an ELF object, -ENOBUFS when the id is longer
 * than CAP, -EBADF/-EIO/-ENOMEM on other failures.
 */
int elf_build_id_fd(int fd, uint8_t *out, size_t cap);

/* Same, on an ELF image of SIZE bytes in memory.  IMAGE is only read. */
int elf_build_id_mem(const void *image, size_t size, uint8_t *out, size_t cap);

#endif
