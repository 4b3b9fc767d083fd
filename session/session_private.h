/* The session's owners, shared by the files that make up the session
 * (session.c: setup, events, the poll; services.c: what a process's life
 * is given; report.c: reports).  Not an API: only session/ includes it. */
#ifndef DWLEAK_SESSION_PRIVATE_H
#define DWLEAK_SESSION_PRIVATE_H

#include "session.h"
#include "symbolize.h"
#include "table_cache.h"
#include "tracee.h"

struct session {
	const struct session_settings *set;
	struct session_log log;
	struct proc_settings pset;   /* what each process's life is told */
	struct proc_services sv;     /* the services it is given (services.c) */
	struct target tgt;	     /* the process dwleak started or attached to first */
	struct procs procs;	     /* every process followed, with its ledger */
	struct tracee_set *tracees;  /* ptrace: forks, execs, exits; NULL when not following */
	struct table_cache *cache;
	struct unwinder *uw;	     /* the objects and their tables */
	struct symbolizer *sym;
	struct probes *probes;	     /* the BPF programs */
	struct stack_store *stacks;  /* walked stacks moved out of the kernel, images */
	bool stacks_move_failed;     /* said once */
	struct growth growth;	     /* growth: bytes per stack at the last report */
	bool announced;		     /* the "tracing" line was said, */
	char *first_alloc;	     /* naming this allocator */
	double t_start, t_traced;    /* CLOCK_MONOTONIC s: made, first process traced */
	uint64_t records_now;	     /* when the records being applied were drained */
	int ep, sigfd;		     /* what session_poll waits on (-1: not yet) */
	int timerfd;		     /* --walk process: the rings' drain, every rings_ms (rings_pace) */
	bool walking_said;	     /* a process walking in itself was said */
	long rings_ms;		     /* the rings' drain timer's period (rings_pace) */
	uint64_t rings_last_ns;	     /* when they were drained last (0: not yet) */
	double next_scan;	     /* when every process's tables are looked at again */
	pid_t *execs;		     /* processes not followed with ptrace that exec'd, */
	size_t nexecs, execs_cap;    /* to handle after the records are applied */
	bool exec_lost;		     /* one could not be queued (no memory): said */
	double inject_ms;	     /* the last injection of the library, for the tracing line
				      * (-1: it was there already) */
};

/* Applies every record the programs have written so far. */
void session_drain(struct session *s);

/* Moves every walk in the kernel's stacks map into the store (a failure
 * said once).  Returns 0 or a negative errno. */
int session_stacks_move(struct session *s);

/* Wires S->sv to S's parts (services.c). */
void session_services_init(struct session *s);

#endif
