/* The tracer's owners, shared by the files of its lifecycle: trace.c (the
 * phases and the poll loop) and trace_procs.c (each process's life: attach
 * at exec, at the linker's stop and at fork, detach at exit).  Not an API:
 * nothing outside the trace includes it. */
#ifndef DWLEAK_TRACER_H
#define DWLEAK_TRACER_H

#include <stdbool.h>
#include <stdio.h>

#include "build.h"
#include "probes.h"
#include "procs.h"
#include "stack_store.h"
#include "suppress.h"
#include "symbolize.h"
#include "table_cache.h"
#include "target.h"
#include "trace.h"
#include "tracee.h"
#include "unwinder.h"

struct tracer {
	const struct env *env;
	struct target tgt;	     /* the process dwleak started or attached to */
	struct procs procs;	     /* every process followed, with its ledger */
	struct tracee_set *tracees;  /* ptrace: forks, execs, exits; NULL when not following */
	struct table_cache *cache;
	struct unwinder *uw;	     /* the objects and their tables */
	struct symbolizer *sym;
	struct probes *probes;	     /* the BPF programs */
	struct stack_store *stacks;  /* walked stacks moved out of the kernel, images */
	bool stacks_move_failed;     /* said once */
	struct suppressions supp;
	struct growth growth;	     /* --interval: bytes per stack at the last report */
	FILE *report_stream;	     /* where reports go without -o, --interval ones always:
				      * stdout with -p, stderr with -- CMD */
	bool announced;		     /* the "dwleak: tracing" line was printed, */
	char *first_alloc;	     /* naming this allocator */
	double t_start, t_traced;    /* CLOCK_MONOTONIC s: started, probes live */
};

/* CLOCK_MONOTONIC now, in ns (bpf_ktime_get_ns's clock) and in seconds. */
uint64_t tracer_now_ns(void);
double tracer_now_s(void);

#endif
