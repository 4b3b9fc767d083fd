/* The lookup of the preload library next to dwleak's own executable (see
 * preload_path.h for the places tried, in order): a build tree's dwleak
 * finds its own build's library, an installed one the library installed
 * with it, never the other's. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"
#include "preload_path.h"

/* The Makefile passes the multiarch tuple its compiler installs libraries
 * under (x86_64-linux-gnu); `make install` and the Debian package put the
 * library in PREFIX/lib/TUPLE/dwleak/ beside PREFIX/bin/dwleak. */
#ifndef DWLEAK_MULTIARCH
#define DWLEAK_MULTIARCH "x86_64-linux-gnu"
#endif

static const char *const places[] = {
	"%s/" DWLEAK_PRELOAD_NAME,
	"%s/build/" DWLEAK_PRELOAD_NAME,
	"%s/../" DWLEAK_PRELOAD_NAME,
	"%s/../lib/" DWLEAK_MULTIARCH "/dwleak/" DWLEAK_PRELOAD_NAME,
	"%s/../lib/dwleak/" DWLEAK_PRELOAD_NAME,
};

int preload_library_path(char **out)
{
	const char *env = getenv("DWLEAK_PRELOAD_LIB");
	char *exe, *dir, *cand;
	size_t i;

	*out = NULL;
	if (env && *env) {
		*out = realpath(env, NULL);
		return *out ? 0 : errno == ENOMEM ? -ENOMEM : -ENOENT;
	}
	exe = realpath("/proc/self/exe", NULL);
	if (!exe)
		return -ENOENT;
	dir = strrchr(exe, '/');
	if (dir)
		*dir = 0;
	for (i = 0; i < sizeof(places) / sizeof(places[0]) && !*out; i++) {
		if (asprintf(&cand, places[i], exe) < 0) {
			free(exe);
			return -ENOMEM;
		}
		if (!access(cand, R_OK))
			*out = realpath(cand, NULL);
		free(cand);
	}
	free(exe);
	return *out ? 0 : -ENOENT;
}
