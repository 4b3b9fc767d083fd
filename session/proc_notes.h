/* What is said of a process when it is first probed (what of its
 * allocations dwleak cannot see) and after its leak checks.  Read only:
 * proc.c calls it. */
#ifndef DWLEAK_SESSION_PROC_NOTES_H
#define DWLEAK_SESSION_PROC_NOTES_H

#include "proc.h"

/* Says, through SV->log, the allocator functions P calls that are not
 * probed, and that a Go program's Go heap is not traced. */
void proc_notes_probed(const struct proc_services *sv, const struct proc *p);

/* Says what P's last leak check (WHEN: at what moment) could not do or
 * could not be sure of: it failed, memory it could not read, blocks that
 * overlap (frees missed). */
void proc_notes_checked(const struct proc_services *sv, const struct proc *p, const char *when);

#endif
