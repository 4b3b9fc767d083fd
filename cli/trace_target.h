/* The trace's target phase, with the messages that go with it: the
 * process to trace (a pid checked, or a command checked and forked, held
 * before its execve), its objects, its allocator, and the unwind tables of
 * what it maps; and the refresh of those tables when objects change. */
#ifndef DWLEAK_TRACE_TARGET_H
#define DWLEAK_TRACE_TARGET_H

#include <sys/types.h>

#include "allocator.h"
#include "objects.h"
#include "probes.h"
#include "target.h"
#include "trace.h"
#include "unwinder.h"

/*
 * Fills T, OBJS and A for ENV's target and registers in UW the tables
 * known before attach (for a command: everything its loader will map, so
 * they are in place before its first instruction).  Prints what went
 * wrong.  Returns 0 or a negative errno.
 */
int trace_target_setup(const struct env *env, struct target *t, struct proc_objects *objs, struct allocator *a,
		       struct unwinder *uw);

/* Registers and loads the tables of objects PID mapped since, tells the
 * walker where they are and, when that changed, flushes P's rule cache.
 * Returns 0 or a negative errno (a process gone is not an error). */
int trace_tables_refresh(struct unwinder *uw, struct probes *p, pid_t pid);

/* Warns, once each, about objects whose table could not be made. */
void trace_tables_warn(struct unwinder *uw);

#endif
