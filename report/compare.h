/* Comparison mode (--unwind both): where the frame-pointer walk of an
 * allocation site loses frames that the DWARF walk found, and which
 * module's missing frame pointers are to blame. */
#ifndef DWLEAK_COMPARE_H
#define DWLEAK_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"

/*
 * Compares each stack's frames (DWARF) with its fp_frames by address,
 * innermost first, setting stack->fp_divergence (index into frames of the
 * first DWARF frame the FP walk does not have, -1 when they agree) and
 * filling SUM: stacks compared, how many agree, and per module how many
 * stacks (and bytes) lost frames because that module's function did not
 * keep a frame pointer (the frame just inside the lost run), and how many
 * frames were lost.  SUM->modules is malloc'd: free with
 * fp_summary_free().  Returns 0 or -ENOMEM.
 */
int fp_compare(struct report *r, struct report_fp_summary *sum);

void fp_summary_free(struct report_fp_summary *sum);

#endif
