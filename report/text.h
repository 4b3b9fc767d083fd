/* What the two halves of the text report share: text.c (stack blocks,
 * processes, header and footer) and text_leak.c (the leak check's loss
 * records, LEAK SUMMARY and RSS explained).  Not for callers outside
 * report/. */
#ifndef DWLEAK_REPORT_TEXT_H
#define DWLEAK_REPORT_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"

/* Writes STR for a terminal: names come from the target's symbol tables,
 * so control bytes and broken UTF-8 are kept off the terminal and out of
 * the line structure, as \xNN. */
void text_put(FILE *f, const char *str);

/* The frame lines of stack S (side by side with the frame-pointer walk in
 * comparison mode), then how its walk ended, as under a stack's line. */
void text_stack_frames(FILE *f, const struct report *r, const struct report_stack *s);

/*
 * One process line of a report of several processes: the tree's process
 * PROCESS, or (PROCESS NULL) a pid only stacks name.  BYTES and
 * ALLOCATIONS are outstanding over all its stacks; RANK is its place in
 * the report's list, which breaks ties.
 */
struct text_group {
	int pid;
	const char *command;
	const struct report_process *process;
	uint64_t bytes, allocations;
	size_t rank;
};

/*
 * Sets *OUT to a malloc'd array of R's processes (and the pids of stacks the
 * tree does not list) in the order the text shows them, most outstanding
 * bytes first, and *N to how many.  The caller frees *OUT, also on error.
 * Returns 0 or -ENOMEM.
 */
int text_groups(const struct report *r, struct text_group **out, size_t *n);

/* "Process PID COMMAND (parent PPID): exited with status 0; N bytes in M
 * allocations outstanding", or why it was not followed. */
void text_group_line(FILE *f, const struct text_group *g);

/*
 * The leak check's loss records of the shown stacks ORDER[0..N), memcheck's:
 * one per stack and kind with bytes, definitely lost first, within a kind
 * the stack with the most resident bytes first, then the most bytes; under
 * their process's line when MULTI.  Returns 0 or -ENOMEM (nothing written).
 */
int text_loss_records(FILE *f, const struct report *r, const struct report_stack **order,
		      size_t n, bool multi);

/* memcheck's LEAK SUMMARY of R's leak check (every stack, not only those
 * shown), with the pause and the bytes scanned. */
void text_leak_summary(FILE *f, const struct report *r);

/* "RSS explained": each part of RSS in bytes and as a share of it. */
void text_rss(FILE *f, const struct report_rss *rss);

#endif
