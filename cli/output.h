/* Where a trace's final report goes: a standard stream (stdout with -p,
 * stderr with -- CMD, whose stdout is the command's), or the -o file,
 * written so that a failed run never truncates an old report and a
 * symbolic link planted at the name is never followed (see output.c). */
#ifndef DWLEAK_OUTPUT_H
#define DWLEAK_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct output {
	FILE *f;	  /* write the report here */
	const char *path; /* -o, borrowed; NULL: F is a standard stream, not ours to close */
	int dirfd;	  /* the directory of a regular file's name, or -1 */
	char *tmp;	  /* the new file there until output_commit renames it */
	char *name;	  /* the final name in that directory */
	uid_t dir_uid;	  /* that directory's owner */
};

/*
 * Readies O for the report to PATH (NULL: the standard stream STD), before
 * the trace starts, so that a bad -o is a usage error before anything runs: a
 * device, FIFO or socket is opened as it is (through a symbolic link only
 * when root or we own it; never a block device, nor a FIFO or socket
 * another user put in a shared directory); a regular file's name gets a
 * new file beside it; any other symbolic link or a directory is refused.
 * Prints why it failed.  Returns 0 or -1.
 */
int output_open(const char *path, FILE *std, struct output *o);

/* Whether O is a terminal: binary data (pprof) would garble it. */
bool output_is_terminal(const struct output *o);

/* The report is complete: flushed, synced, and renamed over PATH.
 * Returns 0 or a negative errno (then the old file is left as it was). */
int output_commit(struct output *o);

/* No report after all: the new file is removed, the old one untouched.
 * Safe after output_commit and on a zeroed O. */
void output_discard(struct output *o);

#endif
