/* Finding a cave for code placed in a process (cave.h). */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cave.h"

/* The end of the file contents of M's executable segment, when they end
 * inside M, or 0. */
static uint64_t segment_end(pid_t pid, const struct proc_map *m)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	uint64_t end = 0;
	int fd = proc_map_open(pid, m), k;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_phentsize != sizeof(ph) || eh.e_phnum > 64) {
		close(fd);
		return 0;
	}
	for (k = 0; k < eh.e_phnum; k++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + k * sizeof(ph))) != sizeof(ph))
			break;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_offset + ph.p_filesz > m->offset &&
		    ph.p_offset + ph.p_filesz - m->offset < m->end - m->start)
			end = m->start + (ph.p_offset + ph.p_filesz - m->offset);
	}
	close(fd);
	return end;
}

int cave_find(pid_t pid, const struct proc_map *maps, size_t n, const struct proc_map *prefer, size_t len,
	      const char magic[8], uint64_t *at)
{
	unsigned char buf[4096];
	uint64_t zeros = 0;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			const struct proc_map *m = &maps[i];
			bool preferred = prefer && m->ino == prefer->ino && m->dev == prefer->dev;
			uint64_t seg_end, a;
			struct iovec local, remote;

			if (!m->exec || m->path[0] != '/' || (pass == 0) != preferred)
				continue;
			seg_end = segment_end(pid, m);
			if (!seg_end || m->end - seg_end > sizeof(buf))
				continue;
			local = (struct iovec){ buf, m->end - seg_end };
			remote = (struct iovec){ (void *)seg_end, m->end - seg_end };
			if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)(m->end - seg_end))
				continue;
			for (a = (seg_end + 63) & ~63ull; a + len <= m->end; a += 64) {
				size_t j, off = a - seg_end;

				if (!memcmp(buf + off, magic, 8)) {
					*at = a;
					return 0;
				}
				for (j = 0; j < len && !buf[off + j]; j++)
					;
				if (j == len && !zeros)
					zeros = a;
			}
		}
		/* the preferred object's zeros before any other object's magic
		 * is searched: a cave is found the same way every time */
		if (zeros) {
			*at = zeros;
			return 0;
		}
	}
	return -ENOENT;
}
