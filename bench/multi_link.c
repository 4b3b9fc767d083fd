/* See multi_link.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "multi_link.h"

/* bpf_attr.link_create as the kernel (6.6+) lays it out for uprobe_multi. */
struct link_create_uprobe_multi {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, multi_flags, pid, pad;
};

_Static_assert(sizeof(struct link_create_uprobe_multi) == 64, "link_create layout");

int multi_link(int prog_fd, uint32_t type, const char *path, const uint64_t *offs, size_t n, bool ret,
	       pid_t pid)
{
	struct link_create_uprobe_multi a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)prog_fd;
	a.attach_type = type;
	a.path = (uint64_t)(uintptr_t)path;
	a.offsets = (uint64_t)(uintptr_t)offs;
	a.cnt = (uint32_t)n;
	a.multi_flags = ret ? 1 : 0; /* BPF_F_UPROBE_MULTI_RETURN */
	a.pid = (uint32_t)pid;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	if (fd < 0)
		fprintf(stderr, "bench: cannot attach %zu uprobe(s) in %s: %s\n", n, path, strerror(errno));
	return fd;
}
