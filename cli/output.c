/* The report's destination, opened before the trace starts so that a bad
 * -o path is a usage error before anything runs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "output.h"

FILE *output_open(const char *path)
{
	FILE *f;

	if (!path)
		return stdout;
	f = fopen(path, "we");
	if (!f)
		fprintf(stderr, "dwleak: cannot write %s: %s\n", path, strerror(errno));
	return f;
}

void output_close(FILE *f)
{
	if (f && f != stdout)
		fclose(f);
}
