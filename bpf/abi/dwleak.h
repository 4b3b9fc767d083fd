/* Layouts shared by the BPF program (bpf/dwleak.bpf.c) and user space
 * (bpf/, unwinder/, session/): map keys and values, events, counters and limits,
 * and the lists that give the counters and walk ends the names users see
 * (the BPF side uses only the enums).  Fixed-width types only; every
 * struct's size is asserted.  The unwind tables' own rows, rules and pages
 * (values of the walker's maps) are the table compiler's format,
 * base/unwind_format.h, which both sides include beside this one:
 * bpf/abi/ includes nothing outside itself and base/. */
#ifndef DWLEAK_SHARED_H
#define DWLEAK_SHARED_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#include "alloc_kind.h"
#include "stop_signal.h"

/* --- Limits ---------------------------------------------------------- */

/* Frames per stack: 127 like perf's default user stack depth; a deeper
 * walk is counted as truncated, never silently cut. */
#define DWLEAK_MAX_FRAMES 127
/* Steps of the binary search in one 64 KiB page: rows per page <= 65536
 * (asserted against UNWIND_PAGE_SIZE where the search is, in
 * bpf/mappings.bpf.h). */
#define DWLEAK_ROW_SEARCH_STEPS 17
/* Allocator calls pending on one thread at once (outer call, a nested
 * allocator call, a signal handler that allocates while one is pending). */
#define DWLEAK_MAX_PENDING 8
/* Allocator functions remembered per thread whose calls skipped their
 * return probe (uprobe sessions), for recognising calls nested in them. */
#define DWLEAK_SKIPPED_FUNCS 4
/* Executable segments of one object told to the walker. */
#define DWLEAK_MAX_SEGMENTS 4
/* Per-walk cache of the mappings met, so a stack touching the same few
 * objects looks each up once. */
#define DWLEAK_VMA_CACHE 4
/* --sample-bytes: gaps between sample points are drawn from this many
 * precomputed quantiles of the exponential distribution (user space fills
 * them), indexed by a random number: a Poisson process over bytes. */
#define DWLEAK_SAMPLE_GAPS 1024
/* Executable file mappings of one process told to the walker by user
 * space; more are found with bpf_find_vma (slower, and it fails while
 * another thread holds the mmap lock) and counted. */
#define DWLEAK_MAX_PROC_MAPPINGS 512
/* Processes traced at once (of a command's tree, those alive: each one's
 * entry is removed at its exit): the procs map's size.  A process beyond
 * it is not followed, and the report says so. */
#define DWLEAK_MAX_PROCS 4096
/* Processes alive at once whose mapping tables the walker reads (two
 * buffers of struct proc_mappings each, 16 KiB a buffer): beyond them a
 * process's walks find each mapping with bpf_find_vma (slower, and busy
 * under mmap-lock contention), which --stats counts. */
#define DWLEAK_MAX_PROC_SLOTS 256
#define DWLEAK_NO_SLOT 0xffffffffu /* proc_info.slot of a process without one */
#define DWLEAK_MAPPING_SEARCH_STEPS 10 /* log2(DWLEAK_MAX_PROC_MAPPINGS) + 1 */
/* Bit 63 of a recorded pc: the address is not a return address (a signal
 * trampoline, or code a signal interrupted), so symbolize it as is. */
#define DWLEAK_FRAME_EXACT (1ull << 63)
/* The FP walk's stack ids start from FNV-1a's offset basis with its
 * halves swapped, so that with --unwind both its id for a stack differs
 * from the DWARF walk's for the same frames: both go into the one stacks
 * map, each entry saying which walk made it (stack_trace.fp).  The kernel
 * program's walks and session/proc_rings.c's ids of the preload library's
 * walks hash alike (FNV64_OFFSET: base/constants.h). */
#define DWLEAK_FP_STACK_ID_SEED ((FNV64_OFFSET << 32) | (FNV64_OFFSET >> 32))
/* The stack id of allocations whose walk was skipped because another
 * program was using its CPU's walker buffers (a preempted probe, see
 * walker_enter in bpf/guard.bpf.h).  Stack ids are hashes of 64 bits. */
#define DWLEAK_STACK_WALKER_BUSY 1ull
/* The stack id of every allocation (and --mmap region) under
 * DWLEAK_BENCH_NO_WALK (bench/: what dwleak's bookkeeping costs without
 * the walk). */
#define DWLEAK_STACK_NOT_WALKED 2ull
/* The stack id of allocations whose walk could not be stored: the stacks
 * map was full (counted in stacks_map_full).  The allocation is recorded
 * all the same, under this id, so the report counts its bytes and says
 * per process how many have no stack and why. */
#define DWLEAK_STACK_NOT_STORED 3ull
/* Ids up to this one are those above, never a stored walk's. */
#define DWLEAK_STACK_SPECIAL_MAX 3ull
/* Values of the BPF program's guard_preempt. */
enum preempt_guard {
	PREEMPT_GUARD_OFF = 0,	 /* the kernel does not preempt BPF programs */
	PREEMPT_GUARD_ON = 1,	 /* it may: count the programs in the buffers */
	PREEMPT_GUARD_BUSY = 2,	 /* tests: every walk finds the buffers busy */
};

/* --- Allocator functions (enum alloc_kind: alloc_kind.h) ------------- */

/* A probe's attach cookie: the function's kind in the low byte, its size
 * (st_size, saturated at 16 MiB) in the next three, so a call made from
 * inside a pending allocator call can be recognised as nested without a
 * per-process address table; and the process its link was made for in the
 * high half (links are per process), which every record carries. */
#define DWLEAK_COOKIE_SIZE_MAX 0xffffffull
#define DWLEAK_COOKIE(kind, size, tgid)                                                               \
	((__u64)(kind) | ((__u64)((size) < DWLEAK_COOKIE_SIZE_MAX ? (size) : DWLEAK_COOKIE_SIZE_MAX) << 8) | \
	 ((__u64)(tgid) << 32))
#define DWLEAK_COOKIE_KIND(c) ((__u32)((c) & 0xff))
#define DWLEAK_COOKIE_SIZE(c) (((c) >> 8) & DWLEAK_COOKIE_SIZE_MAX)
#define DWLEAK_COOKIE_TGID(c) ((__u32)((c) >> 32))

/* Which walks run at each allocation (--unwind): bits. */
enum unwind_mode {
	UNWIND_MODE_DWARF = 1,
	UNWIND_MODE_FP = 2,
	UNWIND_MODE_BOTH = 3,
};

/* --- Unwind tables in maps ------------------------------------------- */

/* An object is known to the walker by its file (the kernel's dev_t of the
 * inode's superblock and the inode number), so one table serves every
 * process and every mapping of that file. */
struct file_key {
	__u64 dev; /* kernel encoding: major << 20 | minor */
	__u64 ino;
};

/* File offsets [off_start, off_end) of one executable segment; ELF address
 * = file offset + vaddr_delta (p_vaddr - p_offset). */
struct table_segment {
	__u64 off_start;
	__u64 off_end;
	__s64 vaddr_delta;
};

struct table_info {
	__u32 table_id;	 /* key prefix in the pages map */
	__u32 rule_base; /* index of the object's rule 0 in the rules array */
	__u32 nsegs;
	__u32 pad;
	struct table_segment segs[DWLEAK_MAX_SEGMENTS];
};

/* One executable mapping of a process: ELF address = pc - bias. */
struct proc_mapping {
	__u64 start;
	__u64 end;
	__u64 bias;
	__u32 table_id;
	__u32 rule_base;
};

/* A traced process, as user space registered it (procs map, keyed by
 * tgid): its walker mapping table and its dynamic linker's hook. */
enum proc_flags {
	PROC_STOP_AT_DL_STATE = 1, /* stop at _dl_debug_state until tables are loaded */
	PROC_STOP_AT_EXIT = 2,	   /* stop at exit() for the leak check (--leak-check) */
};

struct proc_info {
	__u32 slot;		/* its proc_maps buffers (2 * slot, + 1), or DWLEAK_NO_SLOT */
	__u32 flags;		/* enum proc_flags */
	__u64 dl_state_vaddr;	/* its _dl_debug_state and _r_debug (ELF addresses, 0 = */
	__u64 r_debug_vaddr;	/* none): the runtime bias comes from the probe's pc */
	/* traced at the preload library's sites: the runtime address of its
	 * control block (bpf/abi/preload.h), where the library says which
	 * thread-local word counts its allocator calls in progress; 0 = none */
	__u64 preload_control;
	/* Its program image: a number user space gives each exec (and each
	 * process attached to with -p), which the processes forked from it
	 * share.  Every stack id the walkers make is seeded with it, so an id
	 * belongs to one image, and user space can let go of an image's
	 * stacks once no process of it is left (session/stack_store.c). */
	__u32 image;
	__u32 pad;
};

/* All of a process's mappings that have tables, sorted by start. */
struct proc_mappings {
	__u32 n;
	__u32 tgid; /* whose they are */
	struct proc_mapping m[DWLEAK_MAX_PROC_MAPPINGS];
};

/* A mapping seen (key: process and start), for naming frames later. */
struct mapping_key {
	__u32 tgid;
	__u32 pad;
	__u64 start;
};

struct mapping_seen {
	__u64 end;
	__u64 pgoff; /* bytes */
	struct file_key file;
};

struct page_key {
	__u32 table_id;
	__u32 page; /* ELF address >> UNWIND_PAGE_SHIFT (base/unwind_format.h) */
};
/* page value: struct unwind_page (base/unwind_format.h), first_row
 * indexing the global rows array */

/* --- Stacks and allocations ----------------------------------------- */

/* Why a walk ended: X(enum, counter name, reason).  The counter, at
 * CNT_WALK_END_BASE + the enum, counts the walks that ended so; the reason
 * is what a report says of a stack the walk cut short (NULL for the three
 * ends that are not errors).  Both are the names users see. */
#define WALK_END_LIST(X)                                                                        \
	/* reached a frame whose return address is undefined */                                 \
	X(WALK_END_OK, "walks_complete", NULL)                                                  \
	/* return address 0: the conventional end of the stack */                               \
	X(WALK_END_ZERO_RA, "walks_ended_zero_ra", NULL)                                        \
	/* DWLEAK_MAX_FRAMES reached */                                                         \
	X(WALK_END_TRUNCATED, "walks_truncated", NULL)                                          \
	X(WALK_ERR_NO_MAPPING, "walk_err_no_mapping",                                           \
	  "pc in no file-backed mapping (JIT or anonymous code)")                               \
	/* the file has no table loaded (yet) */                                                \
	X(WALK_ERR_NO_TABLE, "walk_err_no_table", "no unwind table for this object")            \
	X(WALK_ERR_NO_FDE, "walk_err_no_fde", "no CFI for this pc")                             \
	X(WALK_ERR_UNSUPPORTED, "walk_err_unsupported",                                         \
	  "CFI rule the walker does not support")                                               \
	X(WALK_ERR_READ, "walk_err_read", "stack memory unreadable")                            \
	/* the rule needs rbp, but the caller's rbp was lost */                                 \
	X(WALK_ERR_RBP_UNKNOWN, "walk_err_rbp_unknown", "frame needs rbp, which was lost")      \
	/* a uretprobe trampoline that is not dwleak's */                                       \
	X(WALK_ERR_TRAMPOLINE, "walk_err_trampoline", "another tool's uretprobe trampoline")    \
	/* the mmap lock was contended: no mapping found */                                     \
	X(WALK_ERR_VMA_BUSY, "walk_err_vma_busy", "mapping lookup contended")

#define WALK_END_ENUM(e, name, reason) e,
enum walk_end {
	WALK_END_LIST(WALK_END_ENUM)
	WALK_END_COUNT,
};
#undef WALK_END_ENUM

struct stack_trace {
	__u8 nframes;	 /* <= DWLEAK_MAX_FRAMES */
	__u8 end;	 /* enum walk_end */
	__u8 kind;	 /* enum alloc_kind of the call that walked it */
	__u8 fp;	 /* 1 = frame-pointer walk, 0 = DWARF */
	__u32 image;	 /* proc_info.image of the process that walked it */
	__u64 pcs[DWLEAK_MAX_FRAMES]; /* runtime addresses; [0] is the allocator's entry */
};

/*
 * Outstanding allocations are kept in user space (session/alloc_table.c), fed
 * by these records through the alloc_events ring buffer: a BPF hash map
 * insert and delete cost ~250 ns a pair on these VMs, a ring record ~35 ns.
 * The ring preserves reservation order across CPUs, and every record is
 * reserved before the memory it names can change hands (a free's probe
 * fires before the block is released, an allocation's before the caller
 * sees it), so user space replays them in an order that is causal.
 */
enum alloc_event_type {
	AEV_ALLOC = 1,	/* struct alloc_event: ADDR now holds SIZE bytes from STACK_ID */
	AEV_FREE = 2,	/* struct free_event: ADDR released */
	AEV_RESIZE = 3,	/* struct alloc_event: ADDR resized in place to SIZE (xallocx) */
	AEV_REALLOC_FREE = 4, /* struct free_event: ADDR given to realloc: about to be moved or
			       * freed; realloc(p, 0) may then free p itself, seen as AEV_FREE */
};

/* Both records start with their type and process, where the reader
 * looks first. */
struct alloc_event {
	__u32 type;	/* AEV_ALLOC or AEV_RESIZE */
	__u32 tgid;	/* the process */
	__u32 kind;	/* enum alloc_kind */
	__u32 pad;
	__u64 addr;
	__u64 size;	/* bytes requested */
	__u64 stack_id; /* key in the stacks map (the FP walk's with --unwind fp) */
	__u64 fp_stack_id; /* with --unwind both: the FP walk of the same call; else 0 */
};

struct free_event {
	__u32 type;	/* AEV_FREE */
	__u32 tgid;	/* the process */
	__u64 addr;
};

/* One allocator call in progress on a thread (entry seen, return not yet). */
struct pending_call {
	__u64 ra_addr;	/* where the return address lives (rsp at entry) */
	__u64 ra;	/* the real return address, before the uretprobe hijacks it */
	__u64 size;
	__u64 arg;	/* realloc: old pointer; posix_memalign: memptr */
	__u64 stack_id;
	__u64 fp_stack_id;
	__u64 func_start; /* the probed function's runtime range: calls from */
	__u64 func_end;	  /* inside it are nested */
	__u32 kind;
	__u16 outer;	/* 0 = nested inside another allocator call: not counted */
	__u16 sampled;	/* --sample-bytes: 0 = not sampled, track nothing new */
};

/* --mmap: the memory syscall this thread is in (entry seen, exit not yet). */
struct pending_syscall {
	__u64 addr;	/* munmap/mremap: the range's start */
	__u64 len;	/* mmap/munmap: length; mremap: old length; brk: the break asked for */
	__u64 new_len;	/* mremap */
	__u64 stack_id;
	__u64 fp_stack_id;
	__u32 nr;	/* syscall number; 0 = none pending */
	__u32 by;	/* enum mmap_by */
};

struct func_range {
	__u64 start;
	__u64 end;
};

struct thread_state {
	__u32 depth;
	__u32 sample_init;  /* sample_left has been drawn */
	__s64 sample_left;  /* --sample-bytes: bytes until this thread's next sample point */
	__u64 stack_lo;	    /* the mapping the thread's stack was last found in: */
	__u64 stack_hi;	    /* stack reads never cross its end (0: not known) */
	__u64 read_hi;	    /* a read crossing this failed: pages above may be absent
			     * (the random gap under the main stack's argv); 0 = none */
	__u64 snap_hint;    /* bytes of stack the last walk used, plus room: what
			     * the next walk's first read takes (0 = as much as it can) */
	/* With uprobe sessions, calls that need nothing at their return (not
	 * sampled, or nested) cancel their return probe and are not pending;
	 * what is needed to see calls nested in them is kept here instead: */
	__u64 skip_sp;	    /* the last such call's return slot, */
	__u64 skip_ra;	    /* return address */
	__u64 skip_func;    /* and function, for a tail call from it */
	__u32 skip_next;    /* next slot of skipped[] to replace */
	__u32 proc_slot;    /* its process's proc_info.slot + 1, 0 = not looked up yet */
	__u32 image;	    /* and its proc_info.image (0: none), looked up with it */
	__u32 pad;
	struct func_range skipped[DWLEAK_SKIPPED_FUNCS]; /* their functions */
	struct pending_syscall sc;
	struct pending_call calls[DWLEAK_MAX_PENDING];
};

/* --- Counters (per-CPU array, summed by user space) ------------------ */

/*
 * The counters, in enum order: X(enum, name) each, the name being what
 * --stats and the reports print; in the walk ends' place (CNT_WALK_END_BASE
 * + enum walk_end) the list puts its second argument, which is meant to
 * expand WALK_END_LIST.  User space builds its tables from the two lists:
 *
 *	#define COUNTER_NAME(e, name) [e] = name,
 *	#define WALK_END_COUNTER_NAME(e, name, reason) [CNT_WALK_END_BASE + e] = name,
 *	static const char *const counter_names[CNT_COUNT] = {
 *		DWLEAK_COUNTER_LIST(COUNTER_NAME, WALK_END_LIST(WALK_END_COUNTER_NAME))
 *	};
 *	#define WALK_END_REASON(e, name, reason) [e] = reason,
 *	static const char *const walk_end_reasons[WALK_END_COUNT] = {
 *		WALK_END_LIST(WALK_END_REASON)
 *	};
 */
#define DWLEAK_COUNTER_LIST(X, WALK_ENDS)                                                       \
	/* outer allocator calls seen */                                                        \
	X(CNT_ALLOC_CALLS, "alloc_calls")                                                       \
	X(CNT_FREE_CALLS, "free_calls")                                                         \
	/* allocator calls inside another: counted once */                                      \
	X(CNT_NESTED_CALLS, "nested_calls")                                                     \
	/* returned NULL / error: nothing recorded (realloc's old block stays forgotten) */     \
	X(CNT_FAILED_ALLOCS, "failed_allocs")                                                   \
	/* free of an address allocated before attach (user space) */                           \
	X(CNT_FREE_UNKNOWN, "frees_of_untracked")                                               \
	/* alloc_events record not written: ring full */                                        \
	X(CNT_RING_FULL, "alloc_events_lost")                                                   \
	/* stack not stored: stacks map full (recorded under DWLEAK_STACK_NOT_STORED) */        \
	X(CNT_STACKS_FULL, "stacks_map_full")                                                   \
	/* stacks added to the stacks map (user space moves them out: session/stack_store.c) */     \
	X(CNT_STACKS_STORED, "stacks_stored")                                                   \
	/* more than DWLEAK_MAX_PENDING nested calls */                                         \
	X(CNT_PENDING_FULL, "pending_calls_full")                                               \
	/* a return with no entry, or an entry whose return never came */                       \
	X(CNT_PENDING_LOST, "returns_unmatched")                                                \
	/* address returned again without a free seen (user space) */                           \
	X(CNT_REPLACED, "allocs_replaced")                                                      \
	/* in-place resizes (xallocx) applied (user space) */                                   \
	X(CNT_RESIZED, "allocs_resized")                                                        \
	/* --sample-bytes: allocations not sampled (no walk) */                                 \
	X(CNT_UNSAMPLED, "allocs_not_sampled")                                                  \
	/* --mmap: memory syscalls seen outside the allocator */                                \
	X(CNT_MMAP_CALLS, "mmap_calls")                                                         \
	/* --mmap: made inside an allocator call: counted by it */                              \
	X(CNT_MMAP_IN_ALLOC, "mmap_calls_in_allocator")                                         \
	/* --leak-check: memory syscalls (mmap, munmap, mremap, brk) that changed the */         \
	/* allocator's own memory, and those the program made itself */                         \
	X(CNT_ALLOC_MEMORY_CALLS, "allocator_memory_calls")                                     \
	X(CNT_PROGRAM_MEMORY_CALLS, "program_memory_calls")                                     \
	/* return addresses recovered from our own uretprobes */                                \
	X(CNT_TRAMPOLINE_FIXED, "uretprobe_returns_recovered")                                  \
	/* a mapping not recorded for naming frames: map full */                                \
	X(CNT_MAPPINGS_FULL, "mappings_map_full")                                               \
	X(CNT_FRAMES, "frames_walked")                                                          \
	/* frames whose rule was searched in the tables */                                      \
	X(CNT_RULE_CACHE_MISSES, "rule_cache_misses")                                           \
	X(CNT_WALKS, "walks")                                                                   \
	/* walks found remembered (walk_memo), not made again */                                \
	X(CNT_WALKS_MEMO, "walks_remembered")                                                   \
	/* reads of user stack memory into the snapshot */                                      \
	X(CNT_STACK_READS, "stack_reads")                                                       \
	/* walks skipped: the CPU's walker buffers were in use */                               \
	X(CNT_WALKER_BUSY, "walks_skipped_walker_busy")                                         \
	/* frame-pointer walks (--unwind fp/both) */                                            \
	X(CNT_FP_WALKS, "fp_walks")                                                             \
	X(CNT_FP_FRAMES, "fp_frames_walked")                                                    \
	/* how walks ended: CNT_WALK_END_BASE + enum walk_end */                                \
	WALK_ENDS                                                                               \
	X(CNT_EVENTS_LOST, "events_lost")

/* Each walk end's counter is also named CNT_ and its walk_end name
 * (CNT_WALK_ERR_READ); CNT_WALK_END_BASE is the first of them. */
#define DWLEAK_COUNTER_ENUM(e, name) e,
#define DWLEAK_WALK_END_COUNTER_ENUM(e, name, reason) CNT_##e,
enum dwleak_counter {
	DWLEAK_COUNTER_LIST(DWLEAK_COUNTER_ENUM, WALK_END_LIST(DWLEAK_WALK_END_COUNTER_ENUM))
	CNT_COUNT,
	CNT_WALK_END_BASE = CNT_WALK_END_OK, /* + enum walk_end: how walks ended */
};
#undef DWLEAK_COUNTER_ENUM
#undef DWLEAK_WALK_END_COUNTER_ENUM

/* --- Events to user space (ring buffer) ------------------------------ */

enum event_type {
	EVENT_NEED_TABLE = 1,	 /* a walk met a file with no table */
	EVENT_MAPS_CHANGED = 2,	 /* the dynamic linker finished (un)loading objects */
	/* struct mmap_event: --mmap, and the allocator's own memory (--leak-check) */
	EVENT_MMAP = 3,
	EVENT_EXITING = 4,	 /* the process called exit(); stopped (PROC_STOP_AT_EXIT) */
	EVENT_EXEC = 5,		 /* the process exec'd: a new image (in the new image's context) */
};

enum mmap_op {
	MMAP_OP_MAP = 1,	/* [addr, addr+len) mapped, from stack_id */
	MMAP_OP_UNMAP = 2,	/* [addr, addr+len) unmapped */
	MMAP_OP_REMAP = 3,	/* [addr, addr+len) now at [new_addr, new_addr+new_len) */
	MMAP_OP_BRK = 4,	/* the program break moved to addr (brk asked for len) */
};

/* Who made a memory syscall (mmap_event.by). */
enum mmap_by {
	/* the program, outside any allocator call: --mmap tracks it, with its stack */
	MMAP_BY_PROGRAM = 0,
	/* the program, seen only so that memory it maps or unmaps stops counting
	 * as the allocator's (--leak-check without --mmap): no stack */
	MMAP_BY_PROGRAM_UNTRACKED = 1,
	/* an allocator call in progress on the thread: the allocator's own
	 * memory (its heap, arenas, metadata), which the leak check does not
	 * take as a root */
	MMAP_BY_ALLOCATOR = 2,
};

/* Regions are kept in user space: partial munmaps split them, which a
 * hash map keyed by address cannot do. */
struct mmap_event {
	__u32 type;	/* EVENT_MMAP */
	__u32 op;	/* enum mmap_op */
	__u64 addr;
	__u64 len;
	__u64 new_addr;
	__u64 new_len;
	__u64 stack_id;
	__u64 fp_stack_id;
	__u64 ts;	/* bpf_ktime_get_ns() */
	__u32 tgid;	/* the process */
	__u32 by;	/* enum mmap_by */
};

struct event {
	__u32 type;
	__u32 tgid;
	struct file_key file;	/* EVENT_NEED_TABLE */
	__u64 pc;		/* EVENT_EXITING: the stack pointer at exit()'s entry (where its
				 * return address is: the stack below is dead) */
	__u32 stopped;		/* EVENT_MAPS_CHANGED: the process was stopped (DWLEAK_STOP_SIGNAL) */
	__u32 tid;		/* EVENT_EXITING: the thread that called exit() */
};

_Static_assert(CNT_EVENTS_LOST == CNT_WALK_END_BASE + WALK_END_COUNT,
	       "one counter per walk end, between the counters before and after");
_Static_assert(sizeof(struct file_key) == 16, "file_key layout");
_Static_assert(sizeof(struct table_info) == 16 + 24 * DWLEAK_MAX_SEGMENTS, "table_info layout");
_Static_assert(sizeof(struct page_key) == 8, "page_key layout");
_Static_assert(sizeof(struct proc_mapping) == 32, "proc_mapping layout");
_Static_assert(sizeof(struct mapping_key) == 16, "mapping_key layout");
_Static_assert(sizeof(struct mapping_seen) == 32, "mapping_seen layout");
_Static_assert((1u << (DWLEAK_MAPPING_SEARCH_STEPS - 1)) >= DWLEAK_MAX_PROC_MAPPINGS,
	       "binary search must cover every mapping");
_Static_assert(sizeof(struct stack_trace) == 8 + 8 * DWLEAK_MAX_FRAMES, "stack_trace layout");
_Static_assert(DWLEAK_MAX_FRAMES <= 255, "stack_trace.nframes is a byte");
_Static_assert(sizeof(struct alloc_event) == 48, "alloc_event layout");
_Static_assert(sizeof(struct proc_info) == 40, "proc_info layout");
_Static_assert(sizeof(struct free_event) == 16, "free_event layout");
_Static_assert(sizeof(struct pending_call) == 72, "pending_call layout");
_Static_assert(sizeof(struct pending_syscall) == 48, "pending_syscall layout");
_Static_assert(sizeof(struct thread_state) ==
	       136 + 16 * DWLEAK_SKIPPED_FUNCS + 72 * DWLEAK_MAX_PENDING, "thread_state layout");
_Static_assert(sizeof(struct event) == 40, "event layout");
_Static_assert(sizeof(struct mmap_event) == 72, "mmap_event layout");

#endif
