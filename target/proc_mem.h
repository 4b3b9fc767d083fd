/* The traced process's memory as the leak check needs it: which mappings
 * are roots (and which part of a thread's stack is live), which of their
 * pages hold data (pagemap), and reading those pages in large batches into
 * a callback (the scanner); and where the process's resident memory goes:
 * the residency of byte ranges (tracked blocks) and an account of its RSS
 * ("RSS explained").  Plain data out, no printing. */
#ifndef DWLEAK_PROC_MEM_H
#define DWLEAK_PROC_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc_maps.h"

/* What a mapping is, from its /proc/PID/maps name: X(enum, name). */
#define PROC_MAP_KIND_LIST(X)                                                                   \
	/* no file: private or shared anonymous memory, [anon:NAME], [anon_shmem:NAME] */        \
	X(PROC_MAP_ANON, "anonymous")                                                           \
	X(PROC_MAP_HEAP, "heap")	 /* [heap]: the brk heap */                                \
	X(PROC_MAP_STACK, "stack")	 /* [stack]: the main thread's stack */                    \
	/* a mapped file, /dev/zero, /dev/shm and memfd files included */                       \
	X(PROC_MAP_FILE, "file")                                                                \
	X(PROC_MAP_DEVICE, "device") /* a character or block device: reading it may hang */    \
	/* kernel pages: [vdso], [vvar], [vvar_vclock], [vsyscall], [uprobes], any other [NAME] */ \
	X(PROC_MAP_KERNEL, "kernel")

#define PROC_MAP_KIND_ENUM(e, name) e,
enum proc_map_kind {
	PROC_MAP_KIND_LIST(PROC_MAP_KIND_ENUM)
	PROC_MAP_KIND_COUNT,
};
#undef PROC_MAP_KIND_ENUM

/* "anonymous", "heap", ...; NULL for no kind. */
const char *proc_map_kind_name(enum proc_map_kind kind);

/* The kind of mapping M of process PID (a path under /dev/ other than
 * /dev/zero is a device when /proc/PID/map_files says it is a character
 * or block device, or cannot say). */
enum proc_map_kind proc_map_kind_of(int pid, const struct proc_map *m);

/* How far below a thread's rsp its stack is live: the x86-64 SysV red zone,
 * which leaf functions use without moving rsp. */
#define PROC_MEM_RED_ZONE 128

/* A stopped thread, as the caller read it (ptrace): its stack pointer and
 * its TLS pointer (fs_base; 0 when not known). */
struct proc_mem_thread {
	uint64_t sp;
	uint64_t tls;
	/* its red zone is dead too: a thread stopped at a function's entry
	 * (exit()) or in a system call that ends it, whose stack below SP
	 * holds only the frames that returned */
	bool no_red_zone;
};

/*
 * The stack pointer of every thread of process PID, stopped, from
 * /proc/PID/task/TID/syscall (which shows a stopped or blocked thread's
 * user sp without ptrace; registers still need the tracer's ptrace stop):
 * a malloc'd array *THREADS (tls 0: not known here) and their thread ids
 * *TIDS (malloc'd; TIDS may be NULL), *N of each; free both with free().
 * Returns 0, -EBUSY when a thread is running (the process is not
 * stopped), -ESRCH, -ENOMEM or another negative errno.
 */
int proc_mem_threads(int pid, struct proc_mem_thread **threads, int **tids, size_t *n);

/* Why a region is a root: X(enum, name). */
#define PROC_MEM_ROOT_LIST(X)                                                                   \
	X(PROC_MEM_ROOT_WRITABLE, "writable")		/* a readable, writable mapping, whole */ \
	X(PROC_MEM_ROOT_ANON_READONLY, "anon_readonly") /* anonymous, readable, not writable */   \
	/* a thread's stack: from its sp - PROC_MEM_RED_ZONE to the mapping's end (TLS at the */  \
	/* top of a pthread stack included) */                                                   \
	X(PROC_MEM_ROOT_STACK, "stack")

#define PROC_MEM_ROOT_ENUM(e, name) e,
enum proc_mem_root {
	PROC_MEM_ROOT_LIST(PROC_MEM_ROOT_ENUM)
	PROC_MEM_ROOT_COUNT,
};
#undef PROC_MEM_ROOT_ENUM

/* One range of a mapping to read: [start, end), inside maps[map]. */
struct proc_mem_region {
	uint64_t start;
	uint64_t end;
	size_t map;
	enum proc_mem_root why;
};

/* A byte range of the target: [addr, addr + size). */
struct proc_mem_range {
	uint64_t addr;
	uint64_t size;
};

/* Sorts V[0..*N) by address and merges the ranges that overlap or
 * touch; *N becomes how many are left. */
void proc_mem_ranges_normalize(struct proc_mem_range *v, size_t *n);

/* The ranges of A[0..NA) less those of B[0..NB) (both sorted, neither
 * overlapping itself), into a malloc'd *OUT of *NOUT, in address order.
 * Returns 0 or -ENOMEM. */
int proc_mem_ranges_subtract(const struct proc_mem_range *a, size_t na, const struct proc_mem_range *b, size_t nb,
			     struct proc_mem_range **out, size_t *nout);

/*
 * What the leak check reads of a process: its mappings and the regions
 * that are roots, in address order, plus what was left out and why (bytes
 * of address space).  Every readable mapping is either a region or counted
 * in one of the skipped_* fields.
 */
struct proc_mem_plan {
	struct proc_map *maps; /* the process's mappings, owned */
	enum proc_map_kind *kinds;
	size_t nmaps;
	struct proc_mem_region *regions;
	size_t nregions;
	uint64_t skipped_kernel;   /* [vdso], [vvar], ...: never */
	uint64_t skipped_device;   /* devices: never */
	uint64_t skipped_readonly; /* file-backed and not writable: code, rodata, relro */
	uint64_t stack_dead;	   /* stacks below their lowest sp - PROC_MEM_RED_ZONE */
	/* threads whose stack could not be told apart from other memory (an sp
	 * in the heap, in no mapping, or without its TLS pointer): their
	 * mapping, if a root, is read whole (never less than conservative) */
	uint64_t sp_not_on_stack;
	/* stacks read lower than their sp because a range to keep (a tracked
	 * block: a stack the program allocated) lies below it */
	uint64_t stack_kept;
	/* bytes of root mappings in the ranges to skip: the allocator's own
	 * memory where no tracked block lies (see proc_mem_plan_build) */
	uint64_t skipped_allocator;
	/* stacks of threads that ended, kept mapped by glibc for the next
	 * thread: read only from their thread's control block up (see
	 * proc_mem_plan_build) */
	size_t dead_thread_stacks;
};

/*
 * Reads process PID's mappings and plans the leak check's roots into
 * *PLAN: every readable, writable mapping and every readable anonymous one,
 * except kernel pages and devices.  A mapping that holds a thread's stack
 * (THREADS[0..NTHREADS), may be empty) is read only from the lowest sp -
 * PROC_MEM_RED_ZONE in it up: the dead frames below hold stale pointers
 * that would hide leaks (memcheck and LSan skip them too).  A mapping is a
 * thread's stack when it is [stack], or an anonymous private writable
 * mapping other than [heap] that holds both the thread's sp and its TLS
 * pointer (glibc and musl put the thread descriptor and static TLS at the
 * top of the stack they map).  No range of KEEP[0..NKEEP) (the tracked
 * blocks; may be empty) is ever cut: a stack the program allocated itself
 * is read whole.  (Untracked memory the kernel merged into the bottom of
 * a stack mapping would be cut with it; glibc's guard page below every
 * thread stack keeps anything from merging there.)  Bytes in SKIP[0..NSKIP)
 * (sorted by address, not overlapping; may be empty) are not read at all:
 * the caller's knowledge that they hold neither roots nor blocks (the
 * allocator's free memory and bookkeeping).  The stacks of threads that
 * ended, which glibc keeps for its next thread, are dead below their
 * thread's control block, as a live thread's stack is below its sp.  The
 * target should be stopped.  Returns 0, -ESRCH (no such process), -ENOMEM or another
 * negative errno.  Free with proc_mem_plan_free.
 */
int proc_mem_plan_build(int pid, const struct proc_mem_thread *threads, size_t nthreads,
			const struct proc_mem_range *keep, size_t nkeep, const struct proc_mem_range *skip, size_t nskip,
			struct proc_mem_plan *plan);

/*
 * The same from mappings already read: takes MAPS[0..N) (from
 * proc_maps_read, in address order) and KINDS (malloc'd, N entries; the
 * plan owns both from here on, also on failure) and plans as above.
 * Returns 0 or -ENOMEM.
 */
int proc_mem_plan_from_maps(struct proc_map *maps, enum proc_map_kind *kinds, size_t n,
			    const struct proc_mem_thread *threads, size_t nthreads, const struct proc_mem_range *keep,
			    size_t nkeep, const struct proc_mem_range *skip, size_t nskip, struct proc_mem_plan *plan);

/* NULL-safe; leaves *PLAN empty. */
void proc_mem_plan_free(struct proc_mem_plan *plan);

/* What one proc_mem_read did. */
struct proc_mem_read_stats {
	uint64_t scanned_bytes;	   /* read and handed to the callback */
	uint64_t exclusive_bytes;  /* of those, pages only the target maps: process_vm_readv */
	/* of those, pages shared with another process (after fork, KSM) or swapped
	 * out: read through /proc/PID/mem, because process_vm_readv pins pages, and
	 * pinning a shared anonymous page copies it in the target (Linux 5.19+) */
	uint64_t shared_bytes;
	uint64_t swapped_bytes;	   /* of scanned_bytes, swapped out (read back in) */
	uint64_t untouched_bytes;  /* never touched, or the zero page: all zeros, skipped */
	uint64_t unreadable_bytes; /* pages whose read failed: counted, skipped */
	uint64_t read_calls;	   /* process_vm_readv and pread calls */
	bool pagemap_scan;	   /* the PAGEMAP_SCAN ioctl found the pages (Linux 6.7+) */
	uint64_t pagemap_ns;	   /* CLOCK_MONOTONIC ns: finding the pages */
	uint64_t read_ns;	   /* reading them (with reader_thread: overlapping the rest) */
	uint64_t callback_ns;	   /* in the callback */
	uint64_t total_ns;	   /* the whole call: the target's pause */
};

/* Settings of proc_mem_read; NULL means the defaults (all zero). */
struct proc_mem_read_opts {
	bool no_pagemap_scan;  /* find pages by reading pagemap whole, as before Linux 6.7 */
	/* read in a worker thread while the callback scans the previous batch
	 * (pays where a core is free; not on 2-vCPU VMs: see proc_mem.c) */
	bool reader_thread;
	size_t buffer_bytes; /* bytes a read holds: 0 = 256 KiB (fits L2: the callback reads it hot) */
};

/*
 * Called for each run of the target's memory read: LEN bytes, BYTES, that
 * the target holds at ADDR (page-aligned except at a region's ends; the
 * bytes are valid only during the call), in address order, always from
 * the thread that called proc_mem_read (with reader_thread, a worker
 * reads the next run meanwhile).  Returns 0 to go on, anything else to
 * stop proc_mem_read with that value.
 */
typedef int (*proc_mem_chunk_fn)(void *ctx, uint64_t addr, const void *bytes, size_t len);

/*
 * Reads every page of PLAN's regions of process PID that holds data
 * (present or swapped out; never-touched pages are zero and skipped, which
 * is exact) and hands each run to FN(CTX, ...), in address order.  The
 * target should be stopped for the whole call: this is its pause.  Fills
 * *ST (may be NULL).  Returns 0, FN's nonzero value, or a negative errno
 * (-ESRCH: the process is gone; -EPERM: no ptrace access).  A page that
 * fails to read is counted in unreadable_bytes, not an error.
 */
int proc_mem_read(int pid, const struct proc_mem_plan *plan, const struct proc_mem_read_opts *opts,
		  proc_mem_chunk_fn fn, void *ctx, struct proc_mem_read_stats *st);

/* Where the bytes of a range are: in RAM, in swap, nowhere yet (never
 * touched, or only read: the zero page).  A page a range shares with
 * others counts its bytes inside the range only (pro rata). */
struct proc_mem_residency {
	uint64_t resident;
	uint64_t swapped;
	uint64_t untouched;
};

/*
 * The residency of RANGES[0..N) (any order) of process PID from its
 * pagemap: into EACH[i] for range i (EACH may be NULL) and summed into
 * *TOTAL (may be NULL).  Bytes in no mapping count as untouched.  Returns
 * 0 or a negative errno.
 */
int proc_mem_residency(int pid, const struct proc_mem_range *ranges, size_t n, struct proc_mem_residency *each,
		       struct proc_mem_residency *total);

/* The parts of a process's RSS: X(enum, name). */
#define PROC_RSS_PART_LIST(X)                                                                   \
	/* under live tracked blocks: what the tracer counts and is in RAM */                    \
	X(PROC_RSS_TRACKED, "tracked")                                                          \
	/* heap memory under no tracked block ([heap], anonymous private writable mappings): */  \
	/* free but kept by the allocator, its metadata, blocks allocated before the trace */   \
	X(PROC_RSS_HEAP_UNTRACKED, "heap_untracked")                                            \
	/* threads' stacks ([stack], anonymous mappings holding a thread's sp) */               \
	X(PROC_RSS_STACKS, "stacks")                                                            \
	X(PROC_RSS_CODE, "code") /* file-backed executable mappings */                           \
	/* other file-backed mappings (data, relro, rodata) and the bss right after them */     \
	X(PROC_RSS_DATA, "data")                                                                \
	/* shared and read-only anonymous memory, kernel pages, devices */                      \
	X(PROC_RSS_OTHER, "other")

#define PROC_RSS_PART_ENUM(e, name) e,
enum proc_rss_part {
	PROC_RSS_PART_LIST(PROC_RSS_PART_ENUM)
	PROC_RSS_PART_COUNT,
};
#undef PROC_RSS_PART_ENUM

const char *proc_rss_part_name(enum proc_rss_part part);

/*
 * Why RSS, the allocator's own statistics and a tracer disagree: the RSS
 * of a process split by what holds it, each part in bytes and as a share
 * of RSS (the parts sum to rss), and the tracked bytes split by where they
 * are (a block allocated but never touched is counted by the tracer and
 * not by RSS).
 */
struct proc_rss_explained {
	uint64_t rss;			      /* sum of every mapping's smaps Rss */
	uint64_t swap;			      /* sum of every mapping's smaps Swap */
	uint64_t bytes[PROC_RSS_PART_COUNT];  /* by enum proc_rss_part; sums to rss */
	double share[PROC_RSS_PART_COUNT];    /* bytes / rss (0 when rss is 0) */
	uint64_t tracked_bytes;		      /* the tracked ranges' sizes, summed */
	struct proc_mem_residency tracked;    /* those bytes by residency */
};

/*
 * Explains the RSS of process PID (which should be stopped) from its
 * mappings, /proc/PID/smaps and pagemap, given the live tracked blocks
 * TRACKED[0..N) (any order, not overlapping) and its threads
 * THREADS[0..NTHREADS) (may be empty: then only [stack] counts as stack,
 * other threads' stacks as heap).  Returns 0 or a negative errno.
 */
int proc_rss_explain(int pid, const struct proc_mem_range *tracked, size_t n, const struct proc_mem_thread *threads,
		     size_t nthreads, struct proc_rss_explained *out);

#endif
