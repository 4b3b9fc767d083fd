/* debuginfod's settings from the environment and its progress line: one
 * line on a terminal, rewritten in place while a lookup runs and erased
 * when it ends, so the report that follows starts on a clean line. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fetch.h"
#include "options.h"

/* A progress line is rewritten at most this often (the bytes of a fast
 * download come many times a second). */
#define PROGRESS_EVERY_S 0.2

/* The progress line's state: one lookup at a time. */
static double progress_last_s;

static double monotonic_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* N bytes in a unit a person reads at a glance, into BUF. */
static const char *bytes_text(long n, char *buf, size_t size)
{
	if (n >= 1 << 20)
		snprintf(buf, size, "%.1f MiB", (double)n / (1 << 20));
	else
		snprintf(buf, size, "%.0f KiB", (double)n / (1 << 10));
	return buf;
}

static void progress_print(void *arg, const char *object, double seconds, long done, long total)
{
	const char *name = strrchr(object, '/');
	char a[32], b[32];
	double now = monotonic_s();

	(void)arg;
	if (progress_last_s && now - progress_last_s < PROGRESS_EVERY_S)
		return;
	progress_last_s = now;
	/* \r and erase to the end of the line: the line is rewritten in place */
	fprintf(stderr, "\rdwleak: debuginfod: fetching the debug information of %s, %.0f s", name ? name + 1 : object,
		seconds);
	if (total > 0)
		fprintf(stderr, ", %s of %s", bytes_text(done, a, sizeof(a)), bytes_text(total, b, sizeof(b)));
	fputs("\033[K", stderr);
	fflush(stderr);
}

static void progress_done(void *arg)
{
	(void)arg;
	progress_last_s = 0;
	fputs("\r\033[K", stderr);
	fflush(stderr);
}

int fetch_settings(const char *command, struct sym_fetch *out)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	const char *secs = getenv("DWLEAK_DEBUGINFOD_SECONDS");
	double bound = FETCH_SECONDS_DEFAULT;

	if (secs && *secs && (parse_seconds(secs, 0, SECONDS_MAX, &bound) || bound <= 0)) {
		fprintf(stderr, "%s: DWLEAK_DEBUGINFOD_SECONDS=%s: give the seconds debuginfod lookups may take "
				"(more than 0; to make none, unset DEBUGINFOD_URLS)\n",
			command, secs);
		return EXIT_USAGE;
	}
	*out = (struct sym_fetch){ .on = urls && urls[strspn(urls, " \t")], .seconds = bound };
	if (out->on && isatty(STDERR_FILENO)) {
		out->progress = progress_print;
		out->done = progress_done;
	}
	return 0;
}

void fetch_misses_print(const char *command, const struct symbolizer *sym)
{
	const struct sym_fetch_miss *m;
	size_t n = symbolizer_fetch_misses(sym, &m);
	char *text;

	for (size_t i = 0; i < n; i++) {
		if (sym_fetch_miss_text(&m[i], &text))
			return;
		fprintf(stderr, "%s: note: %s\n", command, text);
		free(text);
	}
}
