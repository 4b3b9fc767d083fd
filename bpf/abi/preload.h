/* The contract between libdwleak-preload.so (preload/), dwleak's kernel
 * program (the two preload site programs) and dwleak's user side: the
 * probe sites' names and arguments, and the control block dwleak writes
 * into a process to tell the library how to fire them.  Fixed-width
 * types only; every struct's size is asserted. */
#ifndef DWLEAK_PRELOAD_ABI_H
#define DWLEAK_PRELOAD_ABI_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#include "alloc_kind.h"

/* The library's file name starts with this: dwleak recognises it in a
 * process's objects, and hides its frames in reports. */
#define DWLEAK_PRELOAD_NAME "libdwleak-preload.so"

/*
 * The probe sites, as .note.stapsdt notes (provider "dwleak"), each a
 * NOP (x86_64: the 5-byte 0f 1f 44 00 00 that Linux 6.18+ turns into a
 * call to its uprobe trampoline; aarch64: `nop`, which the kernel
 * emulates without a single step), with a USDT semaphore the kernel
 * counts attached probes in (uprobe ref_ctr_offset):
 *
 *   dwleak:alloc  after an allocation returned:
 *                 arg0 pointer (never NULL), arg1 bytes requested,
 *                 arg2 enum alloc_kind, arg3 the address of the
 *                 allocator function the library forwarded to (the
 *                 frame reports show first), arg4 the stack pointer at
 *                 the library's entry (x86_64: where the caller's
 *                 return address is), arg5 that return address (what
 *                 aarch64's x30 held there): the walk starts there, as
 *                 if at the entry of arg3, so no frame of the library
 *                 is walked
 *   dwleak:free   before a block is released (free, delete, or the old
 *                 block of a realloc): arg0 pointer (never NULL),
 *                 arg1 enum dwleak_preload_free
 */
#define DWLEAK_PRELOAD_PROVIDER "dwleak"
#define DWLEAK_PRELOAD_SITE_ALLOC "alloc"
#define DWLEAK_PRELOAD_SITE_FREE "free"

enum dwleak_preload_free {
	DWLEAK_PRELOAD_FREE = 0,	 /* the block is released */
	DWLEAK_PRELOAD_REALLOC_FREE = 1, /* the block was given to realloc: moved or released */
};

/*
 * The functions the library interposes, X(id, symbol, kind, class): one
 * list for the library (its wrappers) and for dwleak, which uses the
 * sites only where every allocator function a process calls is one of
 * these (a call of another, jemalloc's mallocx or __libc_malloc, would
 * reach the allocator unseen).  KIND is the enum alloc_kind its site
 * reports (alloc_kind.h).
 */
enum dwleak_preload_class {
	PL_C_ALLOC,	 /* the C allocation functions: fire dwleak:alloc */
	PL_C_FREE,		 /* free: fire dwleak:free */
	PL_C_QUERY,	 /* malloc_usable_size: no site (bootstrap blocks answered here) */
	PL_CXX_NEW,	 /* operator new: libstdc++'s and libc++'s call malloc: transparent */
	PL_CXX_NEW_ALIGNED, /* aligned operator new: rounds the size, so it fires itself */
	PL_CXX_DELETE,	 /* operator delete: libstdc++'s and libc++'s call free: transparent */
};

#define DWLEAK_PRELOAD_FUNCS(X)                                                                \
	X(F_MALLOC, "malloc", ALLOC_MALLOC, PL_C_ALLOC)                                               \
	X(F_CALLOC, "calloc", ALLOC_CALLOC, PL_C_ALLOC)                                               \
	X(F_REALLOC, "realloc", ALLOC_REALLOC, PL_C_ALLOC)                                            \
	X(F_REALLOCARRAY, "reallocarray", ALLOC_REALLOCARRAY, PL_C_ALLOC)                             \
	X(F_POSIX_MEMALIGN, "posix_memalign", ALLOC_POSIX_MEMALIGN, PL_C_ALLOC)                       \
	X(F_ALIGNED_ALLOC, "aligned_alloc", ALLOC_ALIGNED_ALLOC, PL_C_ALLOC)                          \
	X(F_MEMALIGN, "memalign", ALLOC_MEMALIGN, PL_C_ALLOC)                                         \
	X(F_VALLOC, "valloc", ALLOC_VALLOC, PL_C_ALLOC)                                               \
	X(F_PVALLOC, "pvalloc", ALLOC_PVALLOC, PL_C_ALLOC)                                            \
	X(F_FREE, "free", ALLOC_FREE, PL_C_FREE)                                                      \
	X(F_USABLE, "malloc_usable_size", ALLOC_MALLOC, PL_C_QUERY)                                   \
	X(F_NEW, "_Znwm", ALLOC_NEW, PL_CXX_NEW)                                                      \
	X(F_NEW_NT, "_ZnwmRKSt9nothrow_t", ALLOC_NEW, PL_CXX_NEW)                                     \
	X(F_NEWA, "_Znam", ALLOC_NEW_ARRAY, PL_CXX_NEW)                                               \
	X(F_NEWA_NT, "_ZnamRKSt9nothrow_t", ALLOC_NEW_ARRAY, PL_CXX_NEW)                              \
	X(F_NEW_AL, "_ZnwmSt11align_val_t", ALLOC_NEW, PL_CXX_NEW_ALIGNED)                            \
	X(F_NEW_AL_NT, "_ZnwmSt11align_val_tRKSt9nothrow_t", ALLOC_NEW, PL_CXX_NEW_ALIGNED)           \
	X(F_NEWA_AL, "_ZnamSt11align_val_t", ALLOC_NEW_ARRAY, PL_CXX_NEW_ALIGNED)                     \
	X(F_NEWA_AL_NT, "_ZnamSt11align_val_tRKSt9nothrow_t", ALLOC_NEW_ARRAY, PL_CXX_NEW_ALIGNED)    \
	X(F_DEL, "_ZdlPv", ALLOC_DELETE, PL_CXX_DELETE)                                               \
	X(F_DEL_SZ, "_ZdlPvm", ALLOC_DELETE, PL_CXX_DELETE)                                           \
	X(F_DEL_NT, "_ZdlPvRKSt9nothrow_t", ALLOC_DELETE, PL_CXX_DELETE)                              \
	X(F_DEL_AL, "_ZdlPvSt11align_val_t", ALLOC_DELETE, PL_CXX_DELETE)                             \
	X(F_DEL_SZ_AL, "_ZdlPvmSt11align_val_t", ALLOC_DELETE, PL_CXX_DELETE)                         \
	X(F_DEL_AL_NT, "_ZdlPvSt11align_val_tRKSt9nothrow_t", ALLOC_DELETE, PL_CXX_DELETE)            \
	X(F_DELA, "_ZdaPv", ALLOC_DELETE, PL_CXX_DELETE)                                              \
	X(F_DELA_SZ, "_ZdaPvm", ALLOC_DELETE, PL_CXX_DELETE)                                          \
	X(F_DELA_NT, "_ZdaPvRKSt9nothrow_t", ALLOC_DELETE, PL_CXX_DELETE)                             \
	X(F_DELA_AL, "_ZdaPvSt11align_val_t", ALLOC_DELETE, PL_CXX_DELETE)                            \
	X(F_DELA_SZ_AL, "_ZdaPvmSt11align_val_t", ALLOC_DELETE, PL_CXX_DELETE)                        \
	X(F_DELA_AL_NT, "_ZdaPvSt11align_val_tRKSt9nothrow_t", ALLOC_DELETE, PL_CXX_DELETE)

/*
 * The control block: the library's exported variable of this name, in
 * its writable data (dwleak finds it in .dynsym).  dwleak writes
 * SAMPLE_BYTES and then GENERATION (through /proc/PID/mem, before it
 * attaches to the sites: the semaphores turn the sites on); the library
 * writes the counters, which dwleak reads for its report.
 */
#define DWLEAK_PRELOAD_CONTROL_SYM "dwleak_preload_control"
#define DWLEAK_PRELOAD_MAGIC 0x646c72706b6c7764ull /* "dwlkprld", little-endian */
#define DWLEAK_PRELOAD_VERSION 5

/* Why a process's library does not fire its sites (control.disabled). */
enum dwleak_preload_disabled {
	DWLEAK_PRELOAD_ENABLED = 0,
	/* a fork copied a site the kernel had turned into a call to its
	 * trampoline, which is not copied (VM_DONTCOPY): calling it would
	 * crash; the child's sites stay off until a tracer attaches anew */
	DWLEAK_PRELOAD_STALE_SITE = 1,
};

struct dwleak_preload_control {
	__u64 magic;	      /* DWLEAK_PRELOAD_MAGIC */
	__u32 version;	      /* DWLEAK_PRELOAD_VERSION */
	__u32 generation;     /* written last by each tracer that attaches: the library
			       * re-reads the settings and checks its sites when it moves */
	__u64 sample_bytes;   /* 0: every call fires; N: allocations sampled in the process,
			       * one per N bytes on average (Poisson), and frees fire
			       * only for sampled blocks */
	/* written by the library */
	__u64 set_full;	      /* sampled allocations not fired: no level of the set of
			       * sampled blocks could be mapped (their frees could not
			       * be recognised) */
	__u64 nested;	      /* calls made inside another allocator call: counted once */
	__u32 disabled;	      /* enum dwleak_preload_disabled */
	/* the offset from the thread pointer (%fs base) of the library's
	 * per-thread __u32 count of calls of the allocator in progress (while
	 * a tracer is attached): initial-exec TLS, the same in every thread.
	 * Written once, before the library forwards its first call; 0 until
	 * then (a thread variable is never at the thread pointer itself).
	 * dwleak's kernel program reads it to tell the allocator's own memory
	 * syscalls from the program's. */
	__s32 depth_tls;
	/* the sites fired (written by the library, relaxed counts): every
	 * dwleak:alloc and dwleak:free the library made, attached or not
	 * (a site without a probe is a NOP); tests read them without BPF */
	__u64 fired_alloc;
	__u64 fired_free;
	/*
	 * Injection (target/inject.c loads the library into a running process
	 * and calls dwleak_injected_start, DWLEAK_PRELOAD_INJECTED_START):
	 * the process's allocator calls then reach the library through the
	 * GOT slots it rewrote (preload/route.c), not through LD_PRELOAD.
	 * route_request is dwleak's: a new value asks the library to route
	 * the objects loaded since (glibc's own loads, NSS and gconv modules,
	 * do not pass through dlopen); the library honours it in its next
	 * traced call and then sets route_done to it.  The route_* counts are
	 * the last pass's, over every loaded object: the sites see every call
	 * of the process when route_deferred, route_unreadable, route_elsewhere
	 * and route_failed are 0 and route_done == route_request.
	 */
	__u32 injected;		 /* 1: routed by dwleak_injected_start (0: LD_PRELOAD'ed) */
	__u32 route_request;	 /* written by dwleak */
	__u32 route_done;	 /* the request last honoured */
	__u32 route_passes;	 /* passes made (the injected start, dlopen, requests) */
	__u32 route_objects;	 /* objects looked at, the library itself left out */
	__u32 route_deferred;	 /* objects left for a later pass: being relocated (their RELRO
				  * still writable), or a slot not yet relocated */
	__u32 route_unreadable;	 /* objects whose relocations could not be read */
	__u32 route_elsewhere;	 /* slots of an interposed function bound to another definition
				  * than the one the library forwards to: those calls bypass it */
	__u32 route_failed;	 /* slots that could not be written (mprotect refused) */
	__u32 route_pad;
	__u64 route_slots;	 /* slots that lead to the library's wrappers */
	/*
	 * The block index (bpf/abi/blockset_abi.h): with INDEX_REQUEST 1
	 * (dwleak's, written before the generation) the library puts every
	 * block an allocator call it sees returns into its index and takes
	 * it out when the block is released, sampled or not, so that a leak
	 * check of a sampled trace knows every block.  INDEX_ADDR is the
	 * address of the index's header (the library's own variable), fixed
	 * at load and again for each new index (INDEX_GEN); dwleak reads it
	 * out of the snapshot it scans.  A block allocated while
	 * INDEX_REQUEST was 0 is not in the index.
	 */
	__u32 index_request;
	/* dwleak's, written before the generation: a new value asks for a
	 * new, empty index (a new session: the old one missed every call
	 * made while no tracer listened), the same value keeps the one the
	 * process has (a fork child's copy, which holds its blocks); the
	 * library then publishes the index's address in INDEX_ADDR */
	__u32 index_gen;
	__u64 index_addr;
	/*
	 * The walk in the process (issue 24): the library walks the caller's
	 * stack itself and writes each call it would fire a site for into
	 * its thread's ring of walked records (bpf/abi/walk_ring_abi.h)
	 * instead: no kernel entry per call.  RINGS_ADDR is the address of
	 * the rings' directory (the library's own variable), fixed at load,
	 * which dwleak drains with process_vm_readv.  RINGS_REQUEST is
	 * dwleak's (written before the generation): enum dwleak_preload_walk.
	 * With DWLEAK_PRELOAD_WALK_DWARF the library records into the rings
	 * only while it has an unwind image installed (below); until then, or
	 * when the image could not be installed, it fires its sites as with
	 * DWLEAK_PRELOAD_WALK_NONE.  RINGS_ACTIVE is the library's: the mode
	 * its last recorded call used (0 until one did), for tests and dwleak.
	 */
	__u32 rings_request;
	__u32 rings_active;
	__u64 rings_addr;
	/*
	 * The unwind image (base/unwind_image.h) the DWARF walk uses, handed
	 * over through memory the library maps and dwleak writes with
	 * /proc/PID/mem:
	 *  - IMAGE_ARENA_REQUEST is dwleak's: a number of bytes.  When it is
	 *    above IMAGE_ARENA_LEN, the library (in its next traced call) maps
	 *    a new anonymous read-write arena of at least that many bytes
	 *    (rounded to pages; MAP_NORESERVE) and publishes it: IMAGE_ARENA_LEN
	 *    then IMAGE_ARENA_ADDR (release).  An old arena stays mapped (a
	 *    thread may still walk an image in it).  A mapping that fails sets
	 *    IMAGE_ERROR to its negative errno and is tried again only for a
	 *    larger request.
	 *  - dwleak writes an image at IMAGE_ARENA_ADDR + IMAGE_OFF (8-byte
	 *    aligned, IMAGE_OFF + IMAGE_LEN <= IMAGE_ARENA_LEN), never over an
	 *    image it published before in the same arena (each image at a new
	 *    offset), then IMAGE_OFF, IMAGE_LEN and, last, IMAGE_GEN (a new
	 *    value).
	 *  - The library, in its next traced call that sees IMAGE_GEN move,
	 *    checks the image (preload/walk.c's walk_image_check), gives it a
	 *    rule cache of its own (new memory for each image) and walks with
	 *    it from then on: IMAGE_INSTALLED = IMAGE_GEN and IMAGE_ERROR = 0;
	 *    or IMAGE_ERROR the check's negative errno (-EBADMSG, -EPROTO,
	 *    -EINVAL, -ENOMEM), IMAGE_INSTALLED unchanged, and the image it
	 *    had (if any) stays in use.
	 * A fork's child keeps its parent's image (the same mappings).
	 */
	__u64 image_arena_request;
	__u64 image_arena_addr;
	__u64 image_arena_len;
	__u64 image_off;
	__u64 image_len;
	__u32 image_gen;
	__u32 image_installed;
	__s32 image_error;
	/* dwleak's, written before RINGS_REQUEST: enum
	 * dwleak_preload_rings_cancel, how a free may cancel its block's
	 * record still unread (bpf/abi/walk_ring_abi.h's Cancelling) */
	__u32 rings_cancel;
	/* the library's counts (relaxed): RING_RECORDS is not kept (0; each
	 * ring counts its records in its header: a shared count here made
	 * every thread's call write the line all of them read); RING_FAILED,
	 * calls that could not be recorded (walk_ring_put failed: the ring
	 * full, no ring; each also counted where the ring ABI says) */
	__u64 ring_records;
	__u64 ring_failed;
};

/* What RINGS_REQUEST asks for. */
enum dwleak_preload_walk {
	DWLEAK_PRELOAD_WALK_NONE = 0,  /* fire the sites (dwleak's kernel program walks) */
	DWLEAK_PRELOAD_WALK_DWARF = 1, /* the DWARF walk over the installed image */
	DWLEAK_PRELOAD_WALK_FP = 2,    /* the frame-pointer walk (--unwind fp): no image needed */
};

enum dwleak_preload_rings_cancel {
	DWLEAK_PRELOAD_CANCEL_NONE = 0,	 /* every free recorded */
	/* a free cancels its block's record dwleak has not claimed, the
	 * record stamped with the free's time (walk_ring_abi.h) */
	DWLEAK_PRELOAD_CANCEL_STAMPED = 1,
	/* stamped cancels, and a free of the thread's own last record takes
	 * it back (walk_ring_abi.h's Taking back): only where the library
	 * alone records the process's calls (a pair leaves no trace) */
	DWLEAK_PRELOAD_CANCEL_RETRACT = 2,
};

/* Why the library stopped walking in the process (the rings' directory's
 * STOPPED word, bpf/abi/walk_ring_abi.h). */
enum dwleak_preload_rings_stopped {
	DWLEAK_PRELOAD_RINGS_RUNNING = 0,
	DWLEAK_PRELOAD_RINGS_STOPPED_SECCOMP = 1, /* the program installed a seccomp filter */
};

_Static_assert(sizeof(struct dwleak_preload_control) == 216, "dwleak_preload_control layout");

/* The library's entry for target/inject.c: int dwleak_injected_start(void),
 * called once, in a thread of its own, right after dlopen; it routes the
 * process's allocator calls through the library and returns 0, or a
 * negative errno when it could not route anything (the control block's
 * route_* counts say what it did). */
#define DWLEAK_PRELOAD_INJECTED_START "dwleak_injected_start"

#endif
