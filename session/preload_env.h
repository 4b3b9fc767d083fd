/* The preload path of a session (issue 16): the environment `-- CMD`
 * starts in, with the library first in LD_PRELOAD, and what the libraries
 * of the processes traced at their sites counted.  Which process is
 * traced at its sites and which with uprobes is proc.c's choice. */
#ifndef DWLEAK_SESSION_PRELOAD_ENV_H
#define DWLEAK_SESSION_PRELOAD_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "proc.h"

/*
 * The environment PROGRAM starts in: BASE_ENV with the library first in
 * LD_PRELOAD.  NULL, after a note through LOG saying why, when the
 * command runs as it is: NO_PRELOAD, MMAP (--mmap needs uprobes), the
 * library not found, or a program built with a sanitizer (its runtime
 * must come first in LD_PRELOAD, or it aborts); NULL without a note when
 * LD_PRELOAD has the library already.  Free with
 * session_preload_environ_free (the strings of BASE_ENV are borrowed).
 */
char **session_preload_environ(const char *program, bool no_preload, bool mmap, char **base_env,
			       const struct session_log *log);
void session_preload_environ_free(char **envp);

/* What the libraries of PS's processes traced at their sites counted. */
struct preload_counts {
	size_t procs;	   /* traced at the sites */
	size_t read;	   /* of those, still running, whose control block was read */
	uint64_t set_full; /* sampled allocations not remembered (no room) */
	uint64_t nested;   /* calls nested in another allocator call */
};

void preload_counts_read(const struct procs *ps, struct preload_counts *out);

#endif
