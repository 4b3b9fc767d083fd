/* A traced process's outstanding bytes over the last minutes, so the agent
 * can say what grew most before an OOM kill and how fast the process
 * grows: a ring of snapshots, each the process's total and its largest
 * stacks' bytes, taken at most once a period.  Bounded: at most LEN
 * snapshots of at most MAX_STACKS stacks each.  Pure: keys are whatever
 * names a stack to the caller (its stack id). */
#ifndef DWLEAK_AGENT_HISTORY_H
#define DWLEAK_AGENT_HISTORY_H

#include <stddef.h>
#include <stdint.h>

/* One stack's outstanding bytes (the report's: estimates when sampled). */
struct agent_history_stack {
	uint64_t key;
	uint64_t bytes;
};

/* How much one stack grew between a snapshot and now. */
struct agent_history_growth {
	uint64_t key;
	uint64_t then;  /* bytes in the snapshot; 0 when it did not hold the stack
			 * (new since, or too small to be kept then) */
	uint64_t now;
};

struct agent_history;

/*
 * An empty history in *OUT: a snapshot kept at most every PERIOD_S
 * seconds, the LEN (>= 2) newest kept, each with the MAX_STACKS (>= 1)
 * largest stacks.  It covers (LEN - 1) * PERIOD_S seconds.  Returns 0 or
 * -ENOMEM / -EINVAL.  Free with agent_history_free (NULL is ok).
 */
int agent_history_new(double period_s, size_t len, size_t max_stacks, struct agent_history **out);
void agent_history_free(struct agent_history *h);

/*
 * Offers the state at NOW (CLOCK_MONOTONIC seconds, not decreasing):
 * TOTAL outstanding bytes and the N stacks ST (any order; copied).  It is
 * kept as a new snapshot when there is none or the newest is PERIOD_S old
 * or more; past LEN the oldest goes.  Of ST only the MAX_STACKS largest
 * are kept (a stack left out counts as 0 then, so what grew later from
 * below them is overstated by at most the smallest kept).  Returns 1 when
 * kept, 0 when not due, -ENOMEM (H unchanged).
 */
int agent_history_offer(struct agent_history *h, double now, uint64_t total, const struct agent_history_stack *st,
			size_t n);

/* How many snapshots H holds. */
size_t agent_history_count(const struct agent_history *h);

/*
 * The oldest snapshot: its time (*T), total (*TOTAL) and stacks (sorted by
 * key, *N of them; H's, valid until the next offer).  Returns NULL with
 * *N = 0 when there is none.
 */
const struct agent_history_stack *agent_history_oldest(const struct agent_history *h, double *t, uint64_t *total,
						       size_t *n);

/*
 * The growth rate of the total, bytes per second (negative when it
 * shrank), from the oldest snapshot at least MIN_SPAN_S seconds before
 * NOW to TOTAL at NOW.  NAN when no snapshot is that old.
 */
double agent_history_rate(const struct agent_history *h, double now, uint64_t total, double min_span_s);

/*
 * The K stacks that grew most between the oldest snapshot and the N stacks
 * NOW_ST (any order), largest growth first, ties by key; only stacks that
 * grew.  OUT has room for K.  *SINCE gets the snapshot's time (NAN when
 * there is none: then every stack grew from 0).  Returns how many were
 * written, or -ENOMEM.
 */
int agent_history_grew_most(const struct agent_history *h, const struct agent_history_stack *now_st, size_t n,
			    size_t k, struct agent_history_growth *out, double *since);

#endif
