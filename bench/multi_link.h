/* uprobe_multi links for the bench loaders (uprobe_floor, op_cost), made
 * with the bpf() syscall as cli/attach.c does: Debian 12's libbpf 1.1
 * predates them.  The bench programs stand alone, so they do not link
 * dwleak's own attach code. */
#ifndef DWLEAK_BENCH_MULTI_LINK_H
#define DWLEAK_BENCH_MULTI_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ATTACH_UPROBE_MULTI 48	 /* BPF_TRACE_UPROBE_MULTI (Linux 6.6) */
#define ATTACH_UPROBE_SESSION 57 /* BPF_TRACE_UPROBE_SESSION (Linux 6.13) */

/*
 * Links program PROG_FD (loaded with expected attach type TYPE) to the N
 * file offsets OFFS of PATH in process PID, as return probes when RET.
 * Returns the link's fd, or -1 with a message on stderr.
 */
int multi_link(int prog_fd, uint32_t type, const char *path, const uint64_t *offs, size_t n, bool ret,
	       pid_t pid);

#endif
