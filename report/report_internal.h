/* What report/'s format writers share and nobody else needs: the order and
 * top-N cut of stacks, the stream's final status, and how names are cut and
 * checked.  Not for callers outside report/. */
#ifndef DWLEAK_REPORT_INTERNAL_H
#define DWLEAK_REPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"

/*
 * Sets *OUT to R's stacks in the writers' order (see
 * report_stacks_ordered(), whose contract this shares: the caller frees
 * *OUT) and *N to how many of them TOP shows (0 = all).  After a leak
 * check the N kept are those with the most lost bytes (definitely and
 * indirectly), then possibly lost, then bytes, still listed in byte order.
 * *N is 0 on error.  Returns 0 or -ENOMEM.
 */
int report_stacks_top(const struct report *r, unsigned int top,
		      const struct report_stack ***out, size_t *n);

/*
 * What the flame-graph formats (folded, svg) and pprof split a stack into:
 * with a leak check, one part per kind that holds bytes or allocations
 * (KIND its enum report_leak_kind), then REPORT_PART_UNCLASSIFIED for what
 * no kind holds; without one, the whole stack as REPORT_PART_WHOLE.
 */
#define REPORT_PART_UNCLASSIFIED REPORT_LEAK_KIND_COUNT
#define REPORT_PART_WHOLE (REPORT_LEAK_KIND_COUNT + 1)
#define REPORT_PARTS_MAX (REPORT_LEAK_KIND_COUNT + 1)

struct report_part {
	unsigned int kind;
	struct report_leak_count count;
};

/* Fills PARTS (REPORT_PARTS_MAX of them) with stack S of R's parts; returns
 * how many there are (0 for a stack with nothing outstanding). */
size_t report_stack_parts(const struct report *r, const struct report_stack *s,
			  struct report_part *parts);

/* The name of part KIND as the flame graphs show it: "[definitely_lost]",
 * ..., "[unclassified]"; NULL for REPORT_PART_WHOLE. */
const char *report_part_label(unsigned int kind);

/* The flame graphs' outermost box of a report of several processes,
 * "COMMAND [PID]" of stack S, malloc'd into *OUT.  Returns 0 or -ENOMEM. */
int report_process_label(const struct report *r, const struct report_stack *s, char **out);

/* Flushes F; returns 0, or -EIO when F reports an error. */
int report_stream_status(FILE *f);

/* The last component of PATH ("libc.so.6" of "/usr/lib/libc.so.6"); PATH
 * itself when it ends in '/' or has none.  Points into PATH. */
const char *report_base_name(const char *path);

/*
 * Decodes the UTF-8 sequence at S into *CP and returns its length, or
 * returns 0 for a byte that starts no well-formed sequence (RFC 3629: no
 * overlongs, no surrogates, nothing above U+10FFFF).  Any ASCII byte, the
 * NUL and control bytes included, is a sequence of 1.  S is NUL-terminated:
 * a sequence cut short by the NUL is not well-formed.
 */
size_t report_utf8_decode(const unsigned char *s, uint32_t *cp);

/*
 * Length of the well-formed UTF-8 sequence at S (as report_utf8_decode()),
 * 1 for printable ASCII, or 0 for a control byte (the NUL and DEL
 * included) or a byte that starts no valid sequence.
 */
size_t report_utf8_len(const unsigned char *s);

#endif
