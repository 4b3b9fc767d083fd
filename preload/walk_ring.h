/* The preload library's per-thread rings of walked records (issue 24: the
 * hot path kept in the process): each allocator call's walk written into
 * the calling thread's own ring (bpf/abi/walk_ring_abi.h) in a few
 * nanoseconds beyond copying its pcs, which dwleak drains with
 * process_vm_readv, so that no call enters the kernel.  No allocation, no
 * lock, no system call but a ring's mapping on a thread's first record;
 * errno kept; safe in signal handlers (also one that records in the middle
 * of its thread's record) and in a fork's child; initial-exec TLS only.
 * rings.c records into them from the traced paths. */
#ifndef DWLEAK_PRELOAD_WALK_RING_H
#define DWLEAK_PRELOAD_WALK_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "walk.h" /* struct walk_stack_name */
#include "walk_ring_abi.h"

/* The directory dwleak reads (its address goes in the control block's
 * rings_addr): the library's own variable, set up statically, so that it
 * exists before any constructor. */
extern struct walk_ring_dir walk_ring_directory;

/*
 * Writes one record into the calling thread's ring, claiming a slot and
 * mapping a ring first when the thread has none: TYPE (enum walk_ring_type,
 * not PAD), KIND (enum alloc_kind), END (enum walk_end), FP (1: a
 * frame-pointer walk), ADDR (not 0), SIZE, and the N pcs at PCS (N <=
 * DWLEAK_MAX_FRAMES).  Its tsc is read here (rdtscp): record a free before
 * the block is released, an allocation after the allocator returned it
 * (walk_ring_abi.h's ordering rule depends on it).  Returns 0, or, the record
 * dropped and counted:
 *   -ENOBUFS  the ring is full (its header's dropped)
 *   -ENOSPC   the thread has no ring: no free slot, no mapping, or a
 *             signal handler interrupted the claim (the directory's no_*)
 *   -EINVAL   an argument out of bounds (a caller's bug: not counted)
 * Never overwrites a record dwleak has not read; blocks only as
 * walk_ring_wait_ms allows (the outermost record of a thread).  An
 * allocation's record is remembered for walk_ring_cancel.
 * NAME (an allocation's, NULL for none): its frames are a stack the
 * thread's memo holds (walk_frames.name).  When this ring's stream already
 * has them whole under that name (NAME->epoch is the ring's life and
 * GENERATION, the control block's, and NAME->kind KIND), the record names
 * them and carries no frames; else it carries them and defines the name,
 * and NAME is set to say so once it is written (walk_ring_abi.h's Stacks
 * named once).
 */
int walk_ring_put(uint32_t type, uint32_t kind, uint32_t end, uint32_t fp, uint64_t addr, uint64_t size,
		  const uint64_t *pcs, uint32_t n, struct walk_stack_name *name, uint32_t generation);

/*
 * ADDR is being freed (by any thread): when the record of its allocation
 * is still in a ring and dwleak has not claimed it (walk_ring_abi.h's
 * Cancelling), the record is cancelled and true comes back: the free
 * needs no record (the cancelled record carries this free's tsc).
 * False: record the free as usual.  MAY_TAKE_BACK: when that record is
 * the calling thread's last one, it is taken back instead (Taking back:
 * no trace of the pair is left; only where the library alone records
 * the process's calls).  Call it before the block is released.
 * Lock-free, no system call, safe in a signal handler and in a fork's
 * child.
 */
bool walk_ring_cancel(uint64_t addr, bool may_take_back);

/*
 * A hint that the calling thread is about to record the allocation of
 * ADDR: the line walk_ring_put will note it in is fetched for writing
 * meanwhile.  Changes nothing a reader sees; no system call.
 */
void walk_ring_prefetch(uint64_t addr);

/*
 * The calling thread's scratch memory: WALK_RING_SCRATCH_BYTES after its
 * ring's data (walk_ring_abi.h), 64-byte aligned, zeroed when the ring
 * was mapped or wiped by a fork, left as it was when the ring passes from
 * a thread that ended to a new one (its contents are not to be trusted).
 * NULL while the thread has no ring (its first record claims one).  Only
 * the thread (not a signal handler while the thread uses it) may use it.
 */
void *walk_ring_scratch(void);

/* Counts, in the calling thread's ring (its header's REMEMBERED), one
 * allocation whose walk its memo answered.  Nothing without a ring. */
void walk_ring_count_remembered(void);

/* How long a thread's record waits for room in its full ring (dwleak
 * reading) before it is dropped, in ms: 0 (the default) never waits.  The
 * traced paths set it while dwleak asks for the rings. */
extern uint32_t walk_ring_wait_ms;

/* In a fork's child, from fork() itself (boot.c's atfork handler): every
 * slot freed (the parent's threads do not exist here) and the calling
 * thread's ring forgotten, so that the child's records go to rings of its
 * own (their mappings, wiped by MADV_WIPEONFORK, are reused).  Stores
 * only. */
void walk_ring_fork_child(void);

#endif
