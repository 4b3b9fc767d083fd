/* Waits --delay-ms (default 0), then dlopen()s libdlleak.so (from --lib, or
 * next to this executable) and runs its leak loop: the leaking code is
 * mapped only after a tracer attached. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"

int main(int argc, char **argv)
{
	struct targs args;
	char *path = NULL;
	void (*run)(long, long);
	void *h;

	targs_parse(&args, argc, argv);
	if (args.lib) {
		path = strdup(args.lib);
	} else {
		char *exe = realpath("/proc/self/exe", NULL);
		char *slash = exe ? strrchr(exe, '/') : NULL;

		if (!slash || asprintf(&path, "%.*s/libdlleak.so", (int)(slash - exe), exe) < 0)
			path = NULL;
		free(exe);
	}
	if (!path) {
		fprintf(stderr, "dlopen_main: cannot find libdlleak.so\n");
		return 1;
	}
	pause_ms(args.delay_ms);
	h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen_main: %s\n", dlerror());
		free(path);
		return 1;
	}
	*(void **)&run = dlsym(h, "dlleak_run");
	if (!run) {
		fprintf(stderr, "dlopen_main: %s\n", dlerror());
		free(path);
		return 1;
	}
	printf("dlopen_main: loaded %s\n", path);
	fflush(stdout);
	run(args.iterations, args.interval_ms);
	free(path);
	return 0;
}
