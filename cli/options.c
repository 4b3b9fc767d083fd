/* Command-line plumbing shared by dwleak's commands, so each says a
 * usage error, reads a number and checks a --debug-dir the same way. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwleak.h"
#include "options.h"
#include "symbolize.h"

int usage_error(const char *command, const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", command);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", command);
	return EXIT_USAGE;
}

int parse_count(const char *s, long long min, long long max, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno || end == s || *end || *out < min || *out > max ? -EINVAL : 0;
}

int parse_seconds(const char *s, double min, double max, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	/* a number too small to hold (1e-300) is still a number: compared below */
	if (errno == ERANGE && *out < 1.0)
		errno = 0;
	if (errno || end == s || *end || !isfinite(*out) || *out < 0)
		return -EINVAL;
	return *out && (*out < min || *out > max) ? -ERANGE : 0;
}

int debug_dir_option(const char *command, const char ***dirs, size_t *n, const char *dir)
{
	if (!dir[0] || strchr(dir, ':'))
		return usage_error(command, "--debug-dir '%s': give a directory whose name is not empty and "
					    "has no ':'", dir);
	if (debug_dirs_add(dirs, n, dir))
		return usage_error(command, "%s", "out of memory");
	return 0;
}

static const struct {
	uint32_t mode;
	const char *name;
} unwind_names[] = {
	{ UNWIND_MODE_DWARF, "dwarf" },
	{ UNWIND_MODE_FP, "fp" },
	{ UNWIND_MODE_BOTH, "both" },
};

int unwind_mode_parse(const char *name, uint32_t *mode)
{
	size_t i;

	for (i = 0; i < sizeof(unwind_names) / sizeof(unwind_names[0]); i++) {
		if (!strcmp(name, unwind_names[i].name)) {
			*mode = unwind_names[i].mode;
			return 0;
		}
	}
	return -EINVAL;
}

const char *unwind_mode_name(uint32_t mode)
{
	size_t i;

	for (i = 0; i < sizeof(unwind_names) / sizeof(unwind_names[0]); i++)
		if (unwind_names[i].mode == mode)
			return unwind_names[i].name;
	return NULL;
}
