/* --leak-check on one traced process: stop every thread (ptrace), read
 * the registers, hand the process's tracked blocks and its memory to the
 * leak check (leakcheck/ over target/proc_mem), resume, classify, and
 * write each block's kind and residency into its ledger record.  A
 * running process is stopped only for its registers and a copy-on-write
 * snapshot (target/snapshot.h): its memory is read from the copy while it
 * runs on, then a second short stop of one of its threads lets it reap
 * the copy.  Where no
 * snapshot can be made (a seccomp filter, MADV_DONTFORK memory, a process
 * in its exit) it stays stopped while its memory is read. */
#ifndef DWLEAK_LEAK_SCAN_H
#define DWLEAK_LEAK_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "alloc_state.h"
#include "allocator.h"
#include "leakcheck.h"
#include "ledger.h"
#include "proc_mem.h"
#include "tracee.h"

/* What one check of a process found. */
struct leak_scan_result {
	bool done;
	struct leakcheck_totals totals; /* bytes and blocks per enum leak_kind */
	uint64_t scanned_bytes;		/* memory read for pointers */
	double pause_ms;		/* how long the process was stopped (every thread) */
	/* the pause, part by part (ms): every thread stopped; the records the
	 * probes wrote up to then applied; the registers and memory read and
	 * scanned; the process resumed.  INDEX_MS, the blocks listed and
	 * indexed, is in the pause only for a process stopped in its exit */
	double stop_ms, drain_ms, index_ms, scan_ms, resume_ms;
	bool index_in_pause;
	/* a snapshot's check: SCAN_MS ran while the process ran on; the pause
	 * held CLONE_MS (the copy made), and REAP_PAUSE_MS was a second stop
	 * of one thread only, the others running on (the copy reaped by the
	 * process) */
	bool snapshot;
	double clone_ms, reap_pause_ms;
	char no_snapshot[200];		/* why there was none ("" when there was, or none asked) */
	/* the blocks came from the preload library's index of every live
	 * block (a sampled trace: the ledger has only the sample), read out of
	 * the snapshot: the totals are exact, the ledger's verdicts those of
	 * its sampled blocks.  INDEX_LOST: blocks the library could not index
	 * (not checked); INDEX_BUSY: slots mid-insert (a block being
	 * allocated as the process stopped); INDEX_BYTES: the index's own
	 * memory, not read.  NO_INDEX: why it could not be read */
	bool indexed;
	uint64_t index_lost, index_busy, index_bytes;
	char no_index[200];
	uint64_t blocks;		/* blocks checked */
	uint64_t changed;		/* of those, freed or resized while the index was built:
					   taken as reachable, left unclassified */
	struct leakcheck_scan_stats scan;
	struct proc_mem_read_stats read;
	/* the allocator's own memory (mapped by it while traced) that holds no
	 * tracked block: not read (its free memory and bookkeeping) */
	uint64_t allocator_skipped_bytes;
	size_t dead_thread_stacks; /* stacks of ended threads glibc keeps: read from their TCB up */
	struct alloc_state alloc_state; /* its static state found (counts only: no ranges) */
	bool rss_known;
	struct proc_rss_explained rss;
};

/* The thread whose exit a check runs in, stopped there: at exit()'s
 * entry (SP: its stack pointer there, where the return address is), or
 * in the exit or exit_group syscall (SP 0).  Its registers other than the
 * callee-saved ones are dead (the SysV ABI: a called function may clobber
 * them, and exit's one argument is an int), and so is its stack below
 * SP (or its stack pointer): the red zone there is the dead frames of
 * main and of what it called.  (A thread killed by a signal is stopped
 * anywhere: all of it is live.) */
struct leak_scan_exit {
	pid_t tid;
	uint64_t sp;
};

/*
 * Checks process PID, which allocates with ALLOC and whose outstanding
 * blocks LEDGER holds: stops it through TRACEES (which follow it already),
 * or, when TRACEES is NULL, seizes it for the check only and detaches
 * after (-p: the process is not left traced between checks).  EXITING:
 * the process is already stopped in its exit, by that thread, so the pause it
 * reports starts now; NULL: it runs, and the blocks are indexed first.  DRAIN is
 * called once every thread is stopped, to apply the records the probes
 * wrote up to then (CTX passed back).  SNAPSHOT: read a running process's
 * memory from a copy-on-write snapshot (see above; OUT->no_snapshot says
 * why not when it could not be made).  INDEX_HEADER: the address of the
 * preload library's index of every live block in the process
 * (bpf/abi/blockset_abi.h), whose blocks are checked instead of LEDGER's
 * (a sampled trace), or 0; INDEX_SESSION: the index_gen this session
 * asked for (an index made for another, the library having made no call
 * since, is taken as empty).  RINGS: the process's rings of walked
 * records (proc_rings.h, as DRAIN leaves them), whose memory holds the
 * addresses of the blocks recorded and is no root; NULL: none.  Gives each block's verdict and
 * residency to LEDGER (ledger_verdict, ledger_residency) and fills *OUT.  Returns 0, or a negative errno (-ESRCH:
 * the process is gone; -EPERM: it cannot be stopped, e.g. a debugger
 * traces it); the process is resumed on every path.
 */
struct proc_rings;

int leak_scan_process(struct tracee_set *tracees, pid_t pid, const struct allocator *alloc, struct ledger *ledger,
		      const struct leak_scan_exit *exiting, bool snapshot, uint64_t index_header, uint32_t index_session,
		      const struct proc_rings *rings, void (*drain)(void *ctx), void *ctx, struct leak_scan_result *out);

#endif
