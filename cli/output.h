/* Where a trace's final report goes: stdout, or the -o file. */
#ifndef DWLEAK_OUTPUT_H
#define DWLEAK_OUTPUT_H

#include <stdio.h>

/* Opens PATH for the report (NULL: stdout), printing why when it cannot.
 * Returns the stream or NULL. */
FILE *output_open(const char *path);

/* Closes what output_open returned (stdout stays open).  NULL is ok. */
void output_close(FILE *f);

#endif
