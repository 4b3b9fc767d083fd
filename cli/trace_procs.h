/* The tracer's per-process phases (trace_procs.c): probing a process
 * found running, following its exec, its dynamic linker's stop and its
 * forks, and releasing it at exit.  Each prints what the user must know
 * (a process it cannot trace, a warning) and returns 0 unless dwleak
 * itself cannot go on (-ENOMEM). */
#ifndef DWLEAK_TRACE_PROCS_H
#define DWLEAK_TRACE_PROCS_H

#include <stdbool.h>
#include <sys/types.h>

#include "tracer.h"

/* -p: PID runs already: its objects, allocator, tables and probes.
 * Returns 0, or a negative errno (the trace cannot go on). */
int proc_attach_running(struct tracer *tr, pid_t pid);

/* PID exec'd (stopped there): its old image's probes and blocks dropped;
 * a static program probed now, a dynamic one when its linker stops it. */
int proc_on_exec(struct tracer *tr, pid_t pid);

/* PID's dynamic linker stopped it (every object consistent): probed, if
 * it was waiting for that, else its new objects' tables loaded. */
int proc_on_linker_stop(struct tracer *tr, pid_t pid);

/* PARENT forked CHILD (both stopped): the child probed like its parent
 * (a vfork child only registered: its exec is followed). */
int proc_on_fork(struct tracer *tr, pid_t parent, pid_t child, bool vfork);

/* PID is gone with wait status STATUS: its probes and slot released; its
 * ledger stays for the report. */
void proc_on_exit(struct tracer *tr, pid_t pid, int status);

/* Loads the tables of objects P mapped since and republishes its
 * mappings.  Returns 0 or a negative errno. */
int proc_tables_refresh(struct tracer *tr, struct proc *p);

#endif
