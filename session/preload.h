/* The trace's preload path (issue 16): a process whose objects include
 * libdwleak-preload.so, in front of its allocator, is traced at the
 * library's two sites instead of with uprobes on every allocator
 * function; `dwleak -- CMD` preloads the library for that.  The tracer's
 * phases (trace.c, trace_procs.c) call these at their one place each. */
#ifndef DWLEAK_TRACE_PRELOAD_H
#define DWLEAK_TRACE_PRELOAD_H

#include "tracer.h"

/*
 * The environment -- CMD starts in: dwleak's own with the library first in
 * LD_PRELOAD.  NULL, after a note saying why, when the command runs as it
 * is: --no-preload, the library not found, or a program built with a
 * sanitizer (its runtime must come first in LD_PRELOAD, or it aborts).
 * Free with trace_preload_environ_free().
 */
char **trace_preload_environ(const struct env *env);
void trace_preload_environ_free(char **envp);

/*
 * Probes P at its preload library's sites, when its objects include the
 * library and the sites see every allocator call (preload_sites_find):
 * its control block written (the mode), the sites attached.  Returns 0
 * (P->preload set), 1 when P is for uprobes (no library, --no-preload, or
 * the sites cannot serve: said on stderr), or -ENOMEM.
 */
int trace_preload_attach(struct tracer *tr, struct proc *p);

/* CHILD, forked by PARENT, which is traced at its sites: the same for
 * CHILD (its copy of the library needs its own links and control).
 * Returns 0, 1 (CHILD is for uprobes) or -ENOMEM. */
int trace_preload_fork(struct tracer *tr, const struct proc *parent, struct proc *child);

/* Forgets P's sites (its image is gone: exec). */
void trace_preload_forget(struct proc *p);

/* At the end: what the libraries of the live traced processes could not
 * do (sampled allocations they had no room to remember), and with
 * --stats their counters. */
void trace_preload_say(struct tracer *tr);

#endif
