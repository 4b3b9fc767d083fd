/* What every dwleak command shares on its command line: exit statuses,
 * the one way a usage error is said, parsers for counts, seconds and
 * --debug-dir, and the --unwind names. */
#ifndef DWLEAK_OPTIONS_H
#define DWLEAK_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#define EXIT_LEAK 1  /* leaks over the --fail-on-leak threshold */
#define EXIT_USAGE 2 /* a usage or runtime error of dwleak itself */

/* Prints "COMMAND: " FMT (with ARG) and a pointer to COMMAND's --help on
 * stderr; COMMAND is "dwleak" or e.g. "dwleak tables".  Returns EXIT_USAGE. */
int usage_error(const char *command, const char *fmt, const char *arg);

/* A whole number in [MIN, MAX] into *OUT; 0 or -EINVAL. */
int parse_count(const char *s, long long min, long long max, long long *out);

/* A number of seconds into *OUT: 0, or in [MIN, MAX].  Returns 0,
 * -EINVAL (not a finite number >= 0) or -ERANGE (outside the bounds). */
int parse_seconds(const char *s, double min, double max, double *out);

/* The longest --duration, --interval or --min-age: a year, far beyond any
 * trace, and well within what 64-bit nanoseconds hold. */
#define SECONDS_MAX (365.0 * 24 * 3600)

/* Appends --debug-dir DIR to the NULL-terminated list *DIRS of *N entries
 * (DIR is borrowed; the list realloc'd) for COMMAND's options.  Returns 0,
 * or EXIT_USAGE after saying why: DIR is empty or holds a ':' (libdwfl's
 * path separator), or no memory was left. */
int debug_dir_option(const char *command, const char ***dirs, size_t *n, const char *dir);

/* --unwind: enum unwind_mode <-> "dwarf", "fp", "both".  Parse returns 0
 * or -EINVAL; name returns NULL for an unknown mode. */
int unwind_mode_parse(const char *name, uint32_t *mode);
const char *unwind_mode_name(uint32_t mode);

#endif
