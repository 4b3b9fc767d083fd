/* debuginfod for the commands that name frames (the trace and `dwleak
 * symbolize`): whether lookups are on and how long they may take, from the
 * environment, and their progress line on a terminal. */
#ifndef DWLEAK_FETCH_H
#define DWLEAK_FETCH_H

#include "symbolize.h"

/* The longest all of a run's lookups take together, unless
 * DWLEAK_DEBUGINFOD_SECONDS says otherwise: a dead server costs a report
 * this much at most, a live one fetches a few large debug files. */
#define FETCH_SECONDS_DEFAULT 120.0

/*
 * Fills *OUT for COMMAND ("dwleak", "dwleak symbolize"): lookups on when
 * DEBUGINFOD_URLS is set and not empty, bounded by
 * DWLEAK_DEBUGINFOD_SECONDS (default FETCH_SECONDS_DEFAULT), with a
 * progress line on stderr when it is a terminal.  Returns 0, or
 * EXIT_USAGE after saying that DWLEAK_DEBUGINFOD_SECONDS is no number of
 * seconds.
 */
int fetch_settings(const char *command, struct sym_fetch *out);

/* Says each of SYM's misses on stderr as a note from COMMAND. */
void fetch_misses_print(const char *command, const struct symbolizer *sym);

#endif
