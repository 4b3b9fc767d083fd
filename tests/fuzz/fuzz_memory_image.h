/* The process memory a fuzzer hands a decoder of the preload library's
 * structures (fuzz_blockset, fuzz_walk_ring): the input's bytes mapped at
 * FUZZ_MEMORY_BASE, every read outside them an error (EFAULT), as a read
 * of a process's memory that is not there would be. */
#ifndef DWLEAK_FUZZ_MEMORY_IMAGE_H
#define DWLEAK_FUZZ_MEMORY_IMAGE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FUZZ_MEMORY_BASE 0x100000ull

struct fuzz_memory {
	const uint8_t *bytes;
	size_t len;
};

/* The decoders' read callback: LEN bytes at ADDR of the fuzz_memory CTX
 * into BUF, all of them or -EFAULT. */
static inline int fuzz_memory_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct fuzz_memory *m = ctx;

	if (addr < FUZZ_MEMORY_BASE || addr - FUZZ_MEMORY_BASE > m->len || len > m->len - (addr - FUZZ_MEMORY_BASE))
		return -EFAULT;
	memcpy(buf, m->bytes + (addr - FUZZ_MEMORY_BASE), len);
	return 0;
}

/* The decoders' write callback: bounds checked as a read, the bytes not
 * stored (the input stays as given; a process may as well overwrite what
 * dwleak wrote at once). */
static inline int fuzz_memory_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
	const struct fuzz_memory *m = ctx;

	(void)buf;
	if (addr < FUZZ_MEMORY_BASE || addr - FUZZ_MEMORY_BASE > m->len || len > m->len - (addr - FUZZ_MEMORY_BASE))
		return -EFAULT;
	return 0;
}

#endif
