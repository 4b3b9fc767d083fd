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

#include "dwleak.h"
#include "objects.h"
#include "preempt.h"

struct allocator;
struct unwinder_maps;

/* How the programs are set up; fixed at load. */
struct probes_settings {
	pid_t pid;		/* the process the programs trace */
	uint64_t sample_bytes;	/* --sample-bytes N; 0 = every allocation */
	bool mmap;		/* --mmap: the memory syscall tracepoints too */
	uint32_t unwind_mode;	/* enum unwind_mode: which walks run */
	/* the dynamic linker's hook of PID; with STOP_AT_DL_STATE the process
	 * stops itself (SIGSTOP) each time the hook says the objects are
	 * consistent, until the caller loaded their tables and sent SIGCONT:
	 * for a command started by us, so even its first allocation from a new
	 * object has a complete stack */
	const struct dl_hook *dl;
	bool stop_at_dl_state;
	uint64_t rows, rules;	/* what the tables known now need: the maps get
				 * room for twice as much (libraries loaded later) */
	int session;		/* 1/0: force uprobe sessions on/off; -1: choose */
	int guard;		/* enum preempt_guard to force; -1: from the kernel's
				 * preemption model */
	bool no_walk;		/* bench/: everything but the walk (no stacks) */
};

/* What the programs report, delivered from probes_poll and probes_drain.
 * CTX is passed back; a NULL callback ignores its events. */
struct probes_events {
	void *ctx;
	/* one alloc_events record (struct alloc_event or struct free_event, by
	 * its type), in the order the probes wrote them */
	void (*record)(void *ctx, const void *data, size_t size);
	/* --mmap: an anonymous mapping made, removed or moved */
	void (*mmap)(void *ctx, const struct mmap_event *e);
	/* process TGID's objects changed: a walk met one with no table, or the
	 * dynamic linker finished (un)loading; STOPPED: it stopped itself and
	 * waits for SIGCONT (see stop_at_dl_state) */
	void (*objects_changed)(void *ctx, uint32_t tgid, bool stopped);
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
 * Opens, configures and loads the programs as S says (S and S->dl are
 * copied), with EV for the events.  Returns 0 and *OUT, or a negative
 * errno: the kernel refused the programs (DWLEAK_DEBUG=1 shows libbpf's
 * and the verifier's messages on stderr) or a map.  Free with
 * probes_close().
 */
int probes_open(const struct probes_settings *s, const struct probes_events *ev, struct probes **out);

/* The maps the unwinder fills (fds stay P's) and their capacities. */
void probes_unwinder_maps(const struct probes *p, struct unwinder_maps *out);

/*
 * Attaches everything: allocator A's functions (return probes first: an
 * entry seen before its function's return probe exists would wait for a
 * return that never comes), the memory syscall tracepoints with --mmap,
 * and the dynamic linker's hook.  Returns 0, or a negative errno with
 * WHAT (LEN bytes) saying what could not be attached.  A hook that cannot
 * be probed is not an error: *NO_HOOK (may be NULL) is then set, and new
 * objects are found by rescans.
 */
int probes_attach(struct probes *p, const struct allocator *a, char *what, size_t len, int *no_hook);

/* Waits up to TIMEOUT_MS for events and delivers them.  Returns the
 * number delivered, or a negative errno (-EINTR: a signal came). */
int probes_poll(struct probes *p, int timeout_ms);

/* Delivers every alloc_events record written so far (they come without
 * wakeups). */
void probes_drain(struct probes *p);

/* The walk stored under ID.  Returns 0, or -ENOENT when it is not stored
 * (the stacks map was full, or ID is one of the DWLEAK_STACK_* ids). */
int probes_stack(const struct probes *p, uint64_t id, struct stack_trace *out);

/* The programs' counters, summed over CPUs, into OUT[CNT_COUNT]. */
void probes_counters(const struct probes *p, uint64_t *out);

/* The file mappings of process TGID the programs met or were told of, in
 * a malloc'd array *OUT of *N.  Returns 0 or -ENOMEM. */
int probes_mappings(const struct probes *p, uint32_t tgid, struct probes_mapping **out, size_t *n);

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
