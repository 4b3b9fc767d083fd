/* dwleak's BPF programs as user space drives them: the only file that
 * includes the skeleton.  It chooses how allocator calls are probed, sets
 * the programs' settings, sizes and loads the maps, attaches the probes,
 * and hands what the programs report to the caller through a table of
 * callbacks (the way perf's struct perf_tool does), so that the
 * bookkeeping above it never sees a map or a ring buffer. */
#ifndef DWLEAK_PROBES_H
#define DWLEAK_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach.h"
#include "dwleak.h"
#include "objects.h"
#include "preempt.h"

struct allocator;
struct preload_sites;
struct unwinder_maps;

/* How the programs are set up; fixed at load.  The processes they trace
 * are added and removed afterwards (probes_proc_add). */
struct probes_settings {
	uint64_t sample_bytes;	/* --sample-bytes N; 0 = every allocation */
	bool mmap;		/* --mmap: the memory syscall tracepoints too */
	/* --leak-check: the memory syscalls made inside allocator calls (the
	 * allocator's own memory) and the program's (which take memory from
	 * it), delivered through events.mmap */
	bool alloc_memory;
	uint32_t unwind_mode;	/* enum unwind_mode: which walks run */
	uint64_t rows, rules;	/* what the tables known now need: the maps get
				 * room for twice as much (libraries loaded later) */
	int session;		/* 1/0: force uprobe sessions on/off; -1: choose */
	int guard;		/* enum preempt_guard to force; -1: from the kernel's
				 * preemption model */
	bool no_walk;		/* bench/: everything but the walk (no stacks) */
	bool preload;		/* the preload library's site programs are loaded too */
	uint32_t stacks_max;	/* the stacks map's size; 0 = the default (tests make it
				 * small, DWLEAK_STACKS_MAX, to fill it on purpose) */
};

/* What the programs report, delivered from probes_poll and probes_drain.
 * CTX is passed back; a NULL callback ignores its events. */
struct probes_events {
	void *ctx;
	/* one alloc_events record (struct alloc_event or struct free_event, by
	 * its type), in the order the probes wrote them */
	void (*record)(void *ctx, const void *data, size_t size);
	/* --mmap, settings.alloc_memory: an anonymous mapping made, removed or
	 * moved, or the program break moved; E->by says by whom */
	void (*mmap)(void *ctx, const struct mmap_event *e);
	/* process TGID's objects changed: a walk met one with no table, or the
	 * dynamic linker finished (un)loading; STOPPED: the thread that called
	 * it stopped itself (DWLEAK_STOP_SIGNAL) and waits (see probes_proc_add) */
	void (*objects_changed)(void *ctx, uint32_t tgid, bool stopped);
	/* process TGID called exit() and its thread TID stopped itself for the
	 * leak check (see PROC_STOP_AT_EXIT); SP: its stack pointer at exit()'s
	 * entry, where the return address is */
	void (*exiting)(void *ctx, uint32_t tgid, pid_t tid, uint64_t sp);
	/* process TGID exec'd (see probes_attach_exec): a new image */
	void (*exec)(void *ctx, uint32_t tgid);
};

/* How the allocator calls ended up probed, for --stats. */
struct probes_info {
	const char *mode; /* "uprobe sessions", "uprobe_multi entry and return probes", ... */
	const char *why;  /* why that way */
	bool tgid_by_link; /* the links filter by process (else the programs do) */
	enum preempt_guard guard;
	bool guard_forced;
	struct preempt_info preempt;
};

/* A file mapping of a traced process, as the programs met or were told. */
struct probes_mapping {
	uint64_t start, end;
	uint64_t pgoff; /* file offset of START, bytes */
	struct file_key file;
};

struct probes;

/* True when this process may load and attach the programs: CAP_BPF with
 * CAP_PERFMON, or CAP_SYS_ADMIN. */
bool probes_privileged(void);

/*
 * Opens, configures and loads the programs as S says (S is copied), with
 * EV for the events.  Returns 0 and *OUT, or a negative
 * errno: the kernel refused the programs (DWLEAK_DEBUG=1 shows libbpf's
 * and the verifier's messages on stderr) or a map.  Free with
 * probes_close().
 */
int probes_open(const struct probes_settings *s, const struct probes_events *ev, struct probes **out);

/* The maps the unwinder fills (fds stay P's) and their capacities. */
void probes_unwinder_maps(const struct probes *p, struct unwinder_maps *out);

/* With --mmap, attaches the memory syscall tracepoints (once, for every
 * traced process).  Returns 0 or a negative errno. */
int probes_attach_syscalls(struct probes *p);

/* One traced process's part of the programs: its entry in the procs map
 * and its links.  Owned by the caller (one per process); zeroed to start. */
struct probes_proc {
	pid_t pid;
	bool added;		/* in the procs map */
	struct attach_set links; /* its allocator and linker probes */
};

/*
 * Tells the programs of process PID: its mapping table slot SLOT (from
 * unwinder_slot_take, or DWLEAK_NO_SLOT), its image IMAGE (the seed of
 * its stack ids: session/stack_store.h) and its dynamic linker's hook DL
 * (may be NULL).  FLAGS (enum proc_flags) ask for stops, only for
 * processes followed with ptrace, whose tracer resumes them: with
 * PROC_STOP_AT_DL_STATE the thread that calls the hook stops itself
 * (DWLEAK_STOP_SIGNAL, si_code SI_KERNEL) each time the objects are consistent,
 * until the caller has loaded their tables and resumed it, so even a
 * first allocation from a new object has a complete stack; with
 * PROC_STOP_AT_EXIT the thread calling exit() stops for the leak check.
 * Returns 0 or a negative errno (-E2BIG: DWLEAK_MAX_PROCS processes are
 * traced already).
 */
/* Reports every exec of a registered process (probes_events.exec), for the
 * processes not followed with ptrace.  Returns 0 or a negative errno (the
 * kernel has no BTF tracepoint sched_process_exec). */
int probes_attach_exec(struct probes *p);

int probes_proc_add(struct probes *p, struct probes_proc *pp, pid_t pid, uint32_t slot, uint32_t image,
		    const struct dl_hook *dl, unsigned int flags);

/* Probes exit() for PP's process: the function at file offset OFF of the
 * object PATH.  Returns 0 or a negative errno. */
int probes_proc_attach_exit(struct probes *p, struct probes_proc *pp, const char *path, uint64_t off);

/* Probes PP's dynamic linker hook DL->state_off of DL->path.  Returns 0 or
 * a negative errno (new objects are then found by rescans only). */
int probes_proc_attach_linker(struct probes *p, struct probes_proc *pp, const struct dl_hook *dl);

/*
 * Probes allocator A's functions for PP's process (return probes first:
 * an entry seen before its function's return probe exists would wait for
 * a return that never comes).  Returns 0, or a negative errno with WHAT
 * (LEN bytes) saying what could not be attached.
 */
int probes_proc_attach(struct probes *p, struct probes_proc *pp, const struct allocator *a, char *what,
		       size_t len);

/*
 * Attaches to the preload library's two sites S in PP's process (the
 * free site first: a block seen allocated is then seen freed), with their
 * semaphores, which turn the library's sites on; the caller wrote its
 * control block first (preload_control_write).  CONTROL is the runtime
 * address of that block in the process (0: not known), where the kernel
 * program learns which of its memory syscalls the allocator makes (with
 * settings.alloc_memory).  The programs must have been loaded with
 * settings.preload.  Returns 0 or a negative errno (nothing attached by
 * this call is left).
 */
int probes_proc_attach_preload(struct probes *p, struct probes_proc *pp, const struct preload_sites *s,
			       uint64_t control);

/* Removes PP's probes (in the background: see attach_close_async); its
 * procs entry stays (an exec keeps the process). */
void probes_proc_detach(struct probes *p, struct probes_proc *pp);

/* Forgets PP's process: its probes and its procs entry. */
void probes_proc_remove(struct probes *p, struct probes_proc *pp);

/* Forgets the per-thread state of thread TID (its pending calls, stack
 * bounds): after it exec'd a new image.  Returns 0 or a negative errno. */
int probes_thread_forget(struct probes *p, pid_t tid);

/* An fd that polls readable when events wait (for the caller's own
 * epoll set, beside its other fds); probes_poll(P, 0) then delivers them. */
int probes_epoll_fd(const struct probes *p);

/* Waits up to TIMEOUT_MS for events and delivers them.  Returns the
 * number delivered, or a negative errno (-EINTR: a signal came). */
int probes_poll(struct probes *p, int timeout_ms);

/* Delivers every alloc_events record written so far (they come without
 * wakeups).  Returns 0 when every record reserved before the call was
 * delivered, or -EAGAIN when one was still being written by another CPU
 * after a wait (~ms; the records after it are delivered at a later call):
 * a caller that orders other records after the kernel's must then not
 * count on any of them. */
int probes_drain(struct probes *p);

/* probes_drain's calls, for --stats. */
struct probes_drain_stats {
	uint64_t drains;
	uint64_t waited;       /* found a record still being written, and waited */
	uint64_t short_drains; /* returned -EAGAIN */
};
void probes_drain_stats(const struct probes *p, struct probes_drain_stats *out);

/*
 * Moves every walk in the stacks map out to the caller: PUT gets each
 * (with CTX) before it is deleted, and keeps a copy (the map is only where
 * walks wait: see bpf/stacks.bpf.h).  A walk stored meanwhile stays for
 * the next call.  Returns how many were moved, or a negative errno (from
 * PUT, or the map's batch operations).
 */
long probes_stacks_move(struct probes *p, int (*put)(void *ctx, uint64_t id, const struct stack_trace *st),
			void *ctx);

/* The stacks map's occupancy now (walks stored less walks moved out) and
 * its size; *PEAK (may be NULL) gets the most it was seen to hold: at each
 * move and each call of this. */
uint64_t probes_stacks_held(struct probes *p, uint64_t *cap, uint64_t *peak);

/* What the stacks map went through, for --stats. */
struct probes_stacks_stats {
	uint64_t cap;	  /* its size */
	uint64_t moves;	  /* probes_stacks_move calls */
	uint64_t moved;	  /* walks moved out */
	uint64_t peak;	  /* the most it was seen to hold */
};

void probes_stacks_stats(const struct probes *p, struct probes_stacks_stats *out);

/* The programs' counters, summed over CPUs, into OUT[CNT_COUNT]. */
void probes_counters(const struct probes *p, uint64_t *out);

/* The file mappings of process TGID the programs met or were told of, in
 * a malloc'd array *OUT of *N.  Returns 0 or a negative errno. */
int probes_mappings(const struct probes *p, uint32_t tgid, struct probes_mapping **out, size_t *n);

/* The same, taken out of the mappings map (an exited process's, kept by
 * the caller to name its frames; OUT NULL: an exec'd process's old ones,
 * dropped).  Returns 0 or a negative errno. */
int probes_mappings_take(struct probes *p, uint32_t tgid, struct probes_mapping **out, size_t *n);

/* After the mappings or tables changed: the walker's per-CPU rule cache
 * holds rules by runtime address, which may now belong to another object. */
void probes_tables_changed(struct probes *p);

void probes_info(const struct probes *p, struct probes_info *out);

/* Detaches and unloads everything.  NULL is ok. */
void probes_close(struct probes *p);

/* The name of counter I (enum dwleak_counter) for reports and --stats,
 * NULL for an unused index; and why a walk that ended with END (enum
 * walk_end) stopped early, NULL when it did not. */
const char *probes_counter_name(unsigned int i);
const char *probes_walk_end_reason(uint32_t end);

#endif
