/* What is said of a process when it is first probed: what of its
 * allocations dwleak cannot see.  Read only: proc.c calls it. */
#ifndef DWLEAK_SESSION_PROC_NOTES_H
#define DWLEAK_SESSION_PROC_NOTES_H

#include "proc.h"

/* Says, through SV->log, the allocator functions P calls that are not
 * probed, and that a Go program's Go heap is not traced. */
void proc_notes_probed(const struct proc_services *sv, const struct proc *p);

#endif
