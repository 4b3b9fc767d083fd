/* The processes a trace follows, and the one place that holds what is
 * per process: its command, objects and allocator, its part of the BPF
 * programs (probes, mapping-table slot, image), its outstanding
 * allocations, and how it ended.  The tracer (trace.c, trace_procs.c)
 * drives them through their lives, and gives back at exit what only a
 * live process needs: its slot, procs entry and probes, its objects, its
 * entries of the mappings map (copied here first, to name its frames),
 * its ledger's blocks (folded into sums), its image's stacks when it was
 * the image's last process.  Records reach the right ledger by the
 * process id they carry. */
#ifndef DWLEAK_PROCS_H
#define DWLEAK_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "allocator.h"
#include "leak_scan.h"
#include "ledger.h"
#include "objects.h"
#include "preload_sites.h"
#include "probes.h"

struct proc {
	pid_t pid;
	pid_t parent;		  /* the traced process that forked it; 0 = the first */
	char *command;		  /* its command line as of its last exec (or attach) */
	struct proc_objects objs; /* its objects in lookup order, its dynamic linker */
	struct allocator alloc;	  /* valid when probed */
	bool probed;		  /* its allocator probes are attached */
	bool preload;		  /* ... as the preload library's sites (SITES) */
	struct preload_sites sites;
	bool awaiting_linker;	  /* exec'd a dynamic program: probed when the linker
				   * stops it with every initial object mapped */
	bool vfork_child;	  /* shares its parent's memory until it execs */
	bool refresh;		  /* its objects changed: load tables, republish */
	bool exit_called;	  /* --leak-check: it called exit() (and stopped there) */
	struct leak_scan_exit exit_at; /* the thread that called exit(), where */
	struct leak_scan_result check; /* --leak-check: the last check of it */
	int check_err;		  /* the last check's failure (negative errno), or 0 */
	uint32_t slot;		  /* the walker's mapping-table slot, or DWLEAK_NO_SLOT */
	bool no_slot;		  /* it was given none: all were taken (counted, said) */
	uint32_t table_dropped;	  /* mappings left out of its table (> DWLEAK_MAX_PROC_MAPPINGS) */
	uint32_t image;		  /* its program image (cli/stack_store.h); 0 = none yet */
	bool maps_kept;		  /* its exit was followed: MAPS were taken out of the map */
	struct probes_mapping *maps; /* then: its file mappings, to name its frames */
	size_t nmaps;
	struct probes_proc pp;	  /* its procs entry and links */
	struct ledger ledger;	  /* what it has outstanding */
	bool exited;
	int exit_status;	  /* wait status, when exited */
	char *untraced;		  /* why what its image allocates is not traced (malloc'd), or
				   * NULL; it is followed all the same (its forks, execs and
				   * exit), and its next exec may be traced */
};

struct procs {
	struct proc **v;
	size_t n, cap;
	struct proc *last; /* the last one found: records come in runs */
};

/* The process PID (the newest, if a pid was reused), or NULL. */
struct proc *procs_find(struct procs *ps, pid_t pid);

/* A new process PID, forked by PARENT (0: none traced), with an empty
 * ledger and no slot.  NULL when out of memory. */
struct proc *procs_add(struct procs *ps, pid_t pid, pid_t parent);

/* How many are still alive, traced or not: the trace waits for them all. */
size_t procs_alive(const struct procs *ps);

/* How many are untraced (their image at exit, or now): what they
 * allocated is not in the report. */
size_t procs_untraced(const struct procs *ps);

/* Frees every process's objects, allocator, ledger and strings (their
 * probes and slots are the tracer's to release first). */
void procs_free(struct procs *ps);

#endif
