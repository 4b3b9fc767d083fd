/* --stats: how the trace went, on stderr after the final report: the
 * tables loaded, how allocator calls were probed and why, the walker's
 * guard, every probe site, where the walked stacks went, and every
 * counter of the BPF programs. */
#ifndef DWLEAK_STATS_H
#define DWLEAK_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "allocator.h"
#include "leak_scan.h"
#include "probes.h"
#include "stack_store.h"
#include "unwinder.h"

/* Prints to F.  COUNTERS holds CNT_COUNT values (those the ledger counts
 * filled in). */
void stats_print(FILE *f, const struct unwinder_stats *us, const struct probes_info *pi,
		 const struct allocator *a, const uint64_t *counters);

/* Prints to F where the walked stacks went: the kernel map (M) and how
 * often it was emptied, the user-side store (S) and what it let go. */
/* --walk process: what process PID's rings of walked records gave (R). */
struct proc_rings;
void stats_print_rings(FILE *f, int pid, const struct proc_rings *r);

void stats_print_stacks(FILE *f, const struct probes_stacks_stats *m, const struct stack_store_stats *s);

/* The kernel's allocation records' drains: how many met a record another
 * CPU was still writing. */
void stats_print_drains(FILE *f, const struct probes_drain_stats *d);

/* Prints to F how the last --leak-check of process PID went (C): what was
 * read and how, what could not be, and the scan's own counts; CHECKS
 * checks in all, CHANGED_ALL blocks changed while indexed over them. */
void stats_print_leak_check(FILE *f, int pid, const struct leak_scan_result *c, uint32_t checks,
			    uint64_t changed_all);

#endif
