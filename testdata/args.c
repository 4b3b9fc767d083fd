/* Option parsing and sleeping for the small test programs (see args.h). */
#include "args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--iterations N] [--interval-ms M] [--delay-ms D] [--depth N] [--lib PATH]\n",
		prog);
	exit(2);
}

void targs_parse(struct targs *a, int argc, char **argv)
{
	a->iterations = 10;
	a->interval_ms = 100;
	a->delay_ms = 0;
	a->depth = 200;
	a->lib = NULL;
	for (int i = 1; i < argc; i += 2) {
		long *dst = NULL;

		if (i + 1 == argc)
			usage(argv[0]);
		if (!strcmp(argv[i], "--iterations"))
			dst = &a->iterations;
		else if (!strcmp(argv[i], "--interval-ms"))
			dst = &a->interval_ms;
		else if (!strcmp(argv[i], "--delay-ms"))
			dst = &a->delay_ms;
		else if (!strcmp(argv[i], "--depth"))
			dst = &a->depth;
		else if (!strcmp(argv[i], "--lib"))
			a->lib = argv[i + 1];
		else
			usage(argv[0]);
		if (dst)
			*dst = strtol(argv[i + 1], NULL, 10);
	}
}

void pause_ms(long ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0)
		;
}
