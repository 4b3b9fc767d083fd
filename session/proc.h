/* One traced process and its life: the one place that holds what is per
 * process (its command, objects and allocator, its part of the BPF
 * programs, its outstanding allocations, its leak checks, how it ended)
 * and the only file that writes it (proc.c).  The session hands it
 * events (attached, exec, the linker's stop, fork, exit() called, exit,
 * records) and a table of services (the programs, the walker, the
 * target's files) instead of itself, so a process's whole life runs in a
 * unit test against fake services (tests/unit/test_proc.c), the way the
 * OpenTelemetry profiler's processmanager is tested with a fake eBPF
 * handler.  Outside proc.c a struct proc is read only. */
#ifndef DWLEAK_SESSION_PROC_H
#define DWLEAK_SESSION_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "allocator.h"
#include "leak_scan.h"
#include "ledger.h"
#include "log.h"
#include "objects.h"
#include "preload_sites.h"
#include "probes.h"
#include "proc_rings.h"
#include "stack_store.h"

struct proc {
	pid_t pid;
	pid_t parent;		  /* the traced process that forked it; 0 = the first */
	char *command;		  /* its command line as of its last exec (or attach) */
	struct proc_objects objs; /* its objects in lookup order, its dynamic linker */
	struct allocator alloc;	  /* valid when probed */
	bool probed;		  /* its allocator probes are attached */
	bool preload;		  /* ... as the preload library's sites (SITES) */
	bool injected;		  /* ... of a library loaded into it while it ran (-p): its
				   * calls reach it through routed GOT slots */
	bool sites_alone;	  /* ... and no uprobe beside them (attach_sites' ALONE) */
	struct preload_sites sites;
	bool awaiting_linker;	  /* exec'd a dynamic program: probed when the linker
				   * stops it with every initial object mapped */
	bool vfork_child;	  /* shares its parent's memory until it execs */
	bool refresh;		  /* its objects changed: load tables, republish */
	bool exit_called;	  /* --leak-check: it called exit() (and stopped there) */
	struct leak_scan_exit exit_at; /* the thread that called exit(), where */
	struct leak_scan_result check; /* --leak-check: the last check of it */
	int check_err;		  /* the last check's failure (negative errno), or 0 */
	uint32_t checks;	  /* leak checks done */
	uint64_t checks_changed;  /* blocks freed or resized while they were indexed, over them all */
	uint32_t slot;		  /* the walker's mapping-table slot, or DWLEAK_NO_SLOT */
	bool no_slot;		  /* it was given none: all were taken (counted, said) */
	uint32_t table_dropped;	  /* mappings left out of its table (> DWLEAK_MAX_PROC_MAPPINGS) */
	uint32_t image;		  /* its program image (stack_store.h); 0 = none yet */
	bool maps_kept;		  /* its exit was followed: MAPS were taken out of the map */
	struct probes_mapping *maps; /* then: its file mappings, to name its frames */
	size_t nmaps;
	uint32_t maps_gen;	  /* bumped by each tables refresh that may change its mappings */
	struct probes_mapping *warm_maps; /* a copy of them to name ahead with (SV->names_warm's: */
	size_t warm_nmaps;		  /* read again only when WARM_GEN is not MAPS_GEN, so a */
	uint32_t warm_gen;		  /* wakeup does not read every process's mappings) */
	struct probes_proc pp;	  /* its procs entry and links */
	struct ledger ledger;	  /* what it has outstanding */
	struct proc_rings rings;  /* the walk in the process: its library's rings (mode 0: off) */
	bool walk_said;		  /* ... and that its library took an image was said */
	bool walk_stop_said;	  /* ... and that it went back to its sites (a seccomp filter) */
	bool exited;
	int exit_status;	  /* wait status, when exited */
	char *untraced;		  /* why what its image allocates is not traced (malloc'd), or
				   * NULL; it is followed all the same (its forks, execs and
				   * exit), and its next exec may be traced */
};

/* The processes a session follows: a growing list, searched newest first
 * (a pid the kernel reused belongs to the newer process), the last hit
 * kept, since records come in runs from one process. */
struct procs {
	struct proc **v;
	size_t n, cap;
	struct proc *last;
};

/* The process PID (the newest, if a pid was reused), or NULL. */
struct proc *procs_find(struct procs *ps, pid_t pid);

/* How many are still alive, traced or not: the trace waits for them all. */
size_t procs_alive(const struct procs *ps);

/* How many are untraced (their image at exit, or now). */
size_t procs_untraced(const struct procs *ps);

/* Appends P (made by proc_new) to PS, which owns it from then on.
 * Returns 0 or -ENOMEM (P then still the caller's). */
int procs_append(struct procs *ps, struct proc *p);

/* Takes P out of PS (its list order kept); P is then the caller's. */
void procs_remove(struct procs *ps, const struct proc *p);

/* What a process's life is told to do, from the session's settings. */
struct proc_settings {
	bool following;	     /* its forks and execs are followed with ptrace (stops work) */
	bool leak_check;     /* --leak-check */
	bool no_preload;     /* never at the preload library's sites */
	bool mmap;	     /* --mmap (uprobes only) */
	uint64_t sample_bytes; /* --sample-bytes: the library samples in the process */
	uint64_t min_age_ns; /* --min-age: what a sealed ledger counts */
	uint32_t walk_rings; /* enum dwleak_preload_walk: at the library's sites, the walk
			      * made in the process (--walk process), or NONE */
	uint32_t ring_bits;  /* its rings' size: 2^ring_bits bytes of records a thread */
};

/*
 * What a process's life needs from the rest of the session: the programs
 * (bpf/probes), the walker (unwinder/), the target's files (target/) and
 * the stack store.  session/services.c wires the real ones; a unit test
 * fakes them.  Every function gets CTX back; int ones return 0 or a
 * negative errno.
 */
struct proc_services {
	void *ctx;
	const struct proc_settings *set;
	const struct session_log *log;
	struct stack_store *stacks; /* images and walks (pure bookkeeping: real in tests too) */

	/* the target: its command line (malloc'd, or NULL), its objects
	 * (-ENOENT/-ESRCH: gone), the allocator they bind, its preload
	 * library's sites (-ENOENT: none; another error with *WHY, malloc'd:
	 * they would not see every call) */
	char *(*cmdline)(void *ctx, pid_t pid);
	int (*objects)(void *ctx, pid_t pid, struct proc_objects *out);
	int (*allocator)(void *ctx, const struct proc_objects *objs, struct allocator *out);
	int (*sites_find)(void *ctx, const struct proc_objects *objs, struct preload_sites *out, char **why);
	/* the library loaded into PID while it ran (target/inject.h): -ENOENT
	 * when none is, or it was not routed; 0 with *WHY (malloc'd) saying
	 * which calls its routing misses, or NULL when it sees every one */
	int (*sites_find_injected)(void *ctx, pid_t pid, const struct proc_objects *objs, struct preload_sites *out,
				   char **why);
	/* asks PID's injected library to route the objects loaded since */
	int (*route)(void *ctx, pid_t pid, const struct preload_sites *s);

	/* the walker: a mapping-table slot (DWLEAK_NO_SLOT when all are
	 * taken), the tables of PID's objects loaded and its mappings
	 * published into SLOT (*DROPPED: mappings left out, may be NULL);
	 * tables returns 1 when the walker's view of PID changed (a table or
	 * a mapping), 0 when not or PID is gone, or a negative errno */
	uint32_t (*slot_take)(void *ctx, pid_t pid);
	void (*slot_release)(void *ctx, uint32_t slot);
	int (*tables)(void *ctx, pid_t pid, uint32_t slot, uint32_t *dropped);

	/* the walk in the process (proc_rings.h); the control block's address
	 * of PID's library SITES (0: not found) */
	struct proc_rings_io rings_io;
	uint64_t (*control_addr)(void *ctx, pid_t pid, const struct preload_sites *s);

	/* the programs (see bpf/probes.h for each one's contract) */
	int (*add)(void *ctx, struct probes_proc *pp, pid_t pid, uint32_t slot, uint32_t image,
		   const struct dl_hook *dl, unsigned int flags);
	void (*remove)(void *ctx, struct probes_proc *pp);
	void (*detach)(void *ctx, struct probes_proc *pp);
	int (*attach_linker)(void *ctx, struct probes_proc *pp, const struct dl_hook *dl);
	int (*attach_allocator)(void *ctx, struct probes_proc *pp, const struct allocator *a, char *what, size_t len);
	/* PID's control block written (the mode; FORK_CHILD: a traced
	 * process's child, whose copy of the library's block index is its
	 * own), the allocator functions the library does not see probed, and
	 * its sites attached; *ALONE: true when no function was probed
	 * beside the sites (the library sees every allocator call) */
	int (*attach_sites)(void *ctx, struct probes_proc *pp, pid_t pid, const struct preload_sites *s,
			    const struct allocator *a, bool fork_child, bool *alone);
	int (*attach_exit)(void *ctx, struct probes_proc *pp, const char *path, uint64_t off);
	void (*thread_forget)(void *ctx, pid_t pid);
	int (*mappings_take)(void *ctx, pid_t pid, struct probes_mapping **maps, size_t *n);
	/* every walk in the kernel's stacks map into STACKS */
	void (*stacks_move)(void *ctx);

	/* one leak check of PID (see leak_scan_process): its LEDGER gets the
	 * verdicts; SITES: its preload library's, NULL when it is traced with
	 * uprobes (a sampled trace's check reads the library's index of every
	 * block: -ENOTSUP without one); EXITING as there; RINGS: its rings of
	 * walked records (not roots), NULL without */
	int (*leak_scan)(void *ctx, pid_t pid, bool exited, const struct allocator *alloc, struct ledger *ledger,
			 const struct preload_sites *sites, const struct leak_scan_exit *exiting,
			 const struct proc_rings *rings, struct leak_scan_result *out);

	/* P is traced now (its allocator probed): the session says so */
	void (*traced)(void *ctx, const struct proc *p);
	/* P walks its stacks in itself now (--walk process): its library took
	 * an unwind image, or walks frame pointers (may be NULL) */
	void (*walking)(void *ctx, const struct proc *p);
	/* hands the frames of the N stacks IDS of live process P to the
	 * symbolizer to name ahead (stack_names_warm), until UNTIL
	 * (session_now_s), with P's mappings as of its MAPS_GEN (kept in its
	 * WARM_MAPS); returns how many it handed (may be NULL: none are) */
	size_t (*names_warm)(void *ctx, struct proc *p, const uint64_t *ids, size_t n, double until);
};

/* --- A process's life (each returns 0 unless the session cannot go on:
 * -ENOMEM; what the user must know is said through SV->log) --- */

/* -p: PID runs already: registered, its objects, allocator, tables and
 * probes.  Returns 0, or a negative errno (PID is then in PS, untraced,
 * when it got that far). */
int proc_attach_running(const struct proc_services *sv, struct procs *ps, pid_t pid);

/* -- CMD: PID was spawned (held before its execve) as COMMAND: listed, to
 * be probed at its exec.  Returns 0 or -ENOMEM. */
int proc_spawned(struct procs *ps, pid_t pid, const char *command);

/* PID exec'd (stopped there): its old image's probes and blocks dropped;
 * a static program probed now, a dynamic one when its linker stops it. */
int proc_on_exec(const struct proc_services *sv, struct procs *ps, pid_t pid);

/* PID stopped as asked: at exit() for its leak check, or at its linker's
 * stop (probed, if it was waiting for that, else its new objects' tables
 * loaded). */
int proc_on_stop(const struct proc_services *sv, struct procs *ps, pid_t pid);

/* PARENT forked CHILD (both stopped): the child probed like its parent
 * (a vfork child only registered: its exec is followed). */
int proc_on_fork(const struct proc_services *sv, struct procs *ps, pid_t parent, pid_t child, bool vfork);

/* Thread TID of PID is exiting without exit() (_exit, a signal): its leak
 * check, unless one ran. */
void proc_on_exiting(const struct proc_services *sv, struct procs *ps, pid_t pid, pid_t tid);

/* PID is gone with wait status STATUS: its probes and slot released, its
 * mappings kept to name its frames, its ledger sealed into sums. */
void proc_on_exit(const struct proc_services *sv, struct procs *ps, pid_t pid, int status);

/* Forgets PID, which exited (its last report is out): freed, and with
 * it its image's stacks when no process of that image is left in PS.
 * Returns 0, or -ENOENT (no such process) or -EBUSY (still alive). */
int proc_forget(const struct proc_services *sv, struct procs *ps, pid_t pid);

/* Without ptrace (-p alone): whether PS's first process still lives
 * (marked exited when the kernel no longer has it: then call
 * proc_top_gone once the kernel's records are read). */
bool proc_top_alive(struct procs *ps);

/* PS's first process, found exited by proc_top_alive: what its rings
 * held is applied (proc_rings_gone). */
void proc_top_gone(struct procs *ps);

/* --- What the programs report --- */

/* One alloc_events record (the process is found by its tgid), read at
 * NOW_NS; the ring records the process's library wrote before it went
 * back to its sites are applied first (proc_rings_site_record), said
 * through SV. */
void proc_record(const struct proc_services *sv, struct procs *ps, uint64_t now_ns, const void *data, size_t size);
/* One memory syscall's event. */
/* Drains the rings of every live process walking in itself into its
 * ledger (proc_rings.h), applying records only below BEFORE (taken before
 * the kernel's records were read: proc_rings_drain).  Returns the records
 * read; *FILL_PPM (may be NULL): how full the fullest ring of any process
 * was when read, parts per million (0 without rings). */
uint64_t procs_rings_drain(const struct proc_services *sv, struct procs *ps, uint64_t before, uint32_t *fill_ppm);

void proc_mmap(struct procs *ps, const struct mmap_event *e);
/* TGID's objects changed (dlopen, dlclose): tables due. */
void proc_objects_changed(struct procs *ps, uint32_t tgid);
/* --leak-check: thread TID of TGID called exit(), with stack pointer SP
 * there (it stops, and its check runs at the stop). */
void proc_exit_called(struct procs *ps, uint32_t tgid, pid_t tid, uint64_t sp);

/* Hands the frames of the stacks the live processes' rings gave since
 * the last call to the symbolizer to name ahead (SV->names_warm), until
 * UNTIL: the report at their end then finds most names made while they
 * ran. */
void procs_names_warm(const struct proc_services *sv, struct procs *ps, double until);

/* Loads the tables of objects the processes mapped since (or of every
 * live one, with ALL) and republishes their mappings. */
void proc_tables_due(const struct proc_services *sv, struct procs *ps, bool all);

/* --leak-check of P now (WHEN says at what moment, for messages). */
void proc_leak_check(const struct proc_services *sv, struct proc *p, const char *when);

/* Frees every process (their probes and slots are the programs' to
 * release first: proc_release_all). */
void procs_free(struct procs *ps);

/* Frees P, taken out of its list (its objects, allocator, sites, ledger,
 * mappings and strings). */
void proc_free(struct proc *p);

/* P left its image (an exit or an exec): when it was the image's last
 * process, the image ends in SV->stacks (every walk moved out of the
 * kernel first, the ids PS's ledgers of that image name kept). */
void procs_image_leave(const struct proc_services *sv, struct procs *ps, const struct proc *p);

/* Image IMG's stacks are freed when no process of PS is of it (0: none). */
void procs_image_forget(const struct proc_services *sv, const struct procs *ps, uint32_t img);

/* Gives every process's programs entry back (the end of a session). */
void proc_release_all(const struct proc_services *sv, struct procs *ps);

#endif
