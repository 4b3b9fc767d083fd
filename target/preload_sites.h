/* The preload library (libdwleak-preload.so, bpf/abi/preload.h) in a
 * traced process: whether the process's allocator calls all pass through
 * it, where its two sites and their semaphores are, and its control
 * block, which dwleak writes before it attaches (the mode) and reads back
 * (the library's counters). */
#ifndef DWLEAK_PRELOAD_SITES_H
#define DWLEAK_PRELOAD_SITES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "allocator.h"
#include "preload.h"

struct preload_sites {
	char *path;		/* where to open it and attach (may be /proc/PID/map_files/...) */
	char *name;		/* its path as the process names it */
	uint64_t alloc_off;	/* dwleak:alloc's file offset, */
	uint64_t alloc_sem_off; /* and its semaphore's (the uprobe's ref_ctr_offset) */
	uint64_t free_off;	/* the same for dwleak:free */
	uint64_t free_sem_off;
	uint64_t control_off;	/* the control block's file offset */
};

/*
 * Finds the library among the N objects PATHS (openable) / NAMES (as the
 * process names them), in symbol lookup order, and checks that its sites
 * see every allocator call: it defines each function it interposes before
 * any other object does (it was LD_PRELOAD'ed first, or right after
 * objects that define none of them), and no object imports an allocator
 * function it does not interpose (jemalloc's mallocx, tc_*, mi_*,
 * __libc_malloc...), which would reach the allocator unseen.  Returns 0
 * with *S filled (free with preload_sites_free); -ENOENT when no object
 * is the library; -ENOTSUP when it is there but cannot serve, with *WHY
 * (malloc'd) saying why; -ENOMEM.
 */
int preload_sites_find(char *const *paths, char *const *names, size_t n, struct preload_sites *s, char **why);

/*
 * The same for a process the library was injected into (target/inject.h):
 * it comes last in lookup order, and reaches the process's allocator
 * calls through the GOT slots it routed, not by coming first; so only the
 * imports are checked.  Whether the routing is complete is in its control
 * block (route_*, bpf/abi/preload.h).  Returns as preload_sites_find.
 */
int preload_sites_find_injected(char *const *paths, char *const *names, size_t n, struct preload_sites *s,
				char **why);

/*
 * Asks process PID's injected library to route the objects loaded since
 * its last pass (glibc's own loads: NSS, gconv; objects dlopen'ed through
 * a pointer dlsym gave): a new control.route_request, honoured in its
 * next traced call (control.route_done then equals it).  Call it when the
 * dynamic linker's hook says the process's objects changed.  Returns 0,
 * -EPROTO (not an injected library of this version), or a negative errno.
 */
int preload_route_request(pid_t pid, const struct preload_sites *s);

/* The address at which process PID maps LEN bytes at file offset OFF of
 * the library S describes (a semaphore, the control block: data the
 * process can read), or 0.  A mapping of the file without access is not
 * it: on arm64 the loader keeps the hole between a library's 64 KiB
 * aligned segments as such a mapping, whose file offsets cover the data
 * segment's (the data itself is mapped elsewhere). */
uint64_t preload_file_addr(pid_t pid, const struct preload_sites *s, uint64_t off, size_t len);

/*
 * The functions of allocator A (detected with the library passed over)
 * that the library does not see: neither one it interposes nor an alias
 * of one (tcmalloc's tc_new is its operator new).  A program can still
 * reach them through dlsym (jemalloc's mallocx), so they keep uprobes
 * beside the sites.  Fills *OUT (free with allocator_free; it may have no
 * object).  Returns 0 or -ENOMEM.
 */
int preload_complement(const struct allocator *a, struct allocator *out);

/* A deep copy of SRC into *DST.  Returns 0 or -ENOMEM (DST then empty). */
int preload_sites_copy(struct preload_sites *dst, const struct preload_sites *src);

void preload_sites_free(struct preload_sites *s);

/*
 * Tells process PID's library its mode through its control block: sample
 * allocations one per SAMPLE_BYTES bytes on average (0: every call), keep
 * the index of every live block or not (INDEX: a leak check of a sampled
 * trace reads it; FRESH_INDEX: a new, empty one, for a new session; not
 * for a fork child, whose copy holds its blocks), then a new generation,
 * which makes the library take the mode and check its sites.  Through
 * /proc/PID/mem, before the sites are attached.  Returns 0, or a negative
 * errno (-EPROTO: the block is not a control block of this version).
 */
int preload_control_write(pid_t pid, const struct preload_sites *s, uint64_t sample_bytes, bool index,
			  bool fresh_index);

/* The address at which process PID maps the control block of the library
 * S describes, or 0 when it maps none. */
uint64_t preload_control_addr(pid_t pid, const struct preload_sites *s);

/* Reads process PID's control block into *OUT.  Returns 0 or a negative
 * errno. */
int preload_control_read(pid_t pid, const struct preload_sites *s, struct dwleak_preload_control *out);

#endif
