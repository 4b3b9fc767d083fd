/* Attaching dwleak's BPF programs to uprobes: one uprobe_multi link per
 * program where the kernel has them (Linux 6.6+: one attach and one
 * detach for all offsets), else one perf-event link per offset. */
#ifndef DWLEAK_ATTACH_H
#define DWLEAK_ATTACH_H

#include <bpf/libbpf.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* BPF_TRACE_UPROBE_MULTI and _SESSION, missing from Debian 12's uapi headers. */
#define DWLEAK_ATTACH_UPROBE_MULTI 48
#define DWLEAK_ATTACH_UPROBE_SESSION 57

struct attach_set {
	bool multi;		/* use uprobe_multi links (set before load) */
	int *fds;		/* uprobe_multi link fds */
	size_t nfds;
	struct bpf_link **links; /* perf-event links */
	size_t nlinks;
};

/* True when this kernel creates uprobe_multi links that run their program
 * in every thread of the process they were made for (see
 * attach_multi_per_process): known from Linux 6.10 on, tried for real on
 * this process before. */
bool attach_multi_supported(void);

/* True when a uprobe_multi link made for a pid runs in every thread of
 * that process (Linux 6.10+, or a kernel with the fix backported). */
bool attach_multi_per_process(void);

/* The function attach_multi_per_process() probes. */
void attach_probe_target(void);

/* True when the running kernel's version is at least MAJOR.MINOR (from
 * uname; false when it cannot be read).  For behaviour no probe can
 * observe cheaply; prefer trying a feature for real. */
bool kernel_at_least(int major, int minor);

/* True when this kernel creates uprobe session links (Linux 6.13+): one
 * program runs at entry and return, and the entry can cancel the return. */
bool attach_session_supported(void);

/* Programs that attach through uprobe_multi must be loaded for it: call
 * before the skeleton is loaded, when SET->multi. */
void attach_prepare(struct attach_set *set, struct bpf_program *prog);
/* The same for a uprobe session program. */
void attach_prepare_session(struct bpf_program *prog);

/* Attaches session program PROG to the N file offsets OFFS of PATH, for
 * process PID only.  Returns 0 or a negative errno. */
int attach_session(struct attach_set *set, struct bpf_program *prog, const char *path, pid_t pid,
		   const uint64_t *offs, const uint64_t *cookies, size_t n);

/*
 * Attaches PROG (entry, or return when RET) to the N file offsets OFFS of
 * PATH, for process PID only, with the matching attach COOKIES (may be
 * NULL).  Returns 0 or a negative errno; on error nothing is left attached
 * by this call.
 */
int attach_uprobes(struct attach_set *set, struct bpf_program *prog, const char *path, pid_t pid,
		   const uint64_t *offs, const uint64_t *cookies, size_t n, bool ret);

/*
 * Creates one uprobe_multi link (ATTACH_TYPE: DWLEAK_ATTACH_UPROBE_MULTI, or
 * _SESSION) of program PROG_FD on the N file offsets OFFS of PATH, with the
 * matching COOKIES (may be NULL), as return probes when RET, running only
 * in process PID.  Through the bpf() syscall: Debian 12's libbpf 1.1 has
 * no uprobe_multi.  Returns the link's fd or a negative errno.  bench/'s
 * loaders use it too.
 */
int attach_link_multi(int prog_fd, uint32_t attach_type, const char *path, const uint64_t *offs,
		      const uint64_t *cookies, size_t n, bool ret, pid_t pid);

/* attach_link_multi with a USDT semaphore per offset: REF_CTR_OFFS[i]
 * (may be NULL) is the file offset of the 2-byte counter the kernel
 * increments in the process while OFFS[i] is probed (the uprobe's
 * ref_ctr_offset; 0 = none). */
int attach_link_multi_ref(int prog_fd, uint32_t attach_type, const char *path, const uint64_t *offs,
			  const uint64_t *ref_ctr_offs, const uint64_t *cookies, size_t n, bool ret, pid_t pid);

/* Attaches entry program PROG to the USDT site at file offset OFF of
 * PATH, for process PID only, with its semaphore at file offset
 * REF_CTR_OFF (0 = none) and attach cookie COOKIE.  Returns 0 or a
 * negative errno. */
int attach_usdt(struct attach_set *set, struct bpf_program *prog, const char *path, pid_t pid, uint64_t off,
		uint64_t ref_ctr_off, uint64_t cookie);

/* Detaches what was attached to SET after it held NFDS fds and NLINKS
 * links (undoes a partial attach). */
void attach_truncate(struct attach_set *set, size_t nfds, size_t nlinks);

/* Detaches everything; SET can be reused. */
void attach_close(struct attach_set *set);

/* The same in a background thread: closing a link waits for the kernel's
 * RCU grace periods (tens of ms), which a tracer handling a process tree's
 * events must not; SET is left empty at once, for reuse.
 * attach_close_wait() returns once every such close is done. */
void attach_close_async(struct attach_set *set);
void attach_close_wait(void);

#endif
