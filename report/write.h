/* The report formats: one table of their names and properties, and the one
 * entry point that writes a report in any of them.  This table is the only
 * place that knows which formats exist. */
#ifndef DWLEAK_REPORT_WRITE_H
#define DWLEAK_REPORT_WRITE_H

#include <stdbool.h>
#include <stdio.h>

#include "report.h"

/*
 * X(ID, NAME, BINARY, STRUCTURED), one row a format, in the order --help
 * lists them:
 *   ID          the enumerator is REPORT_FORMAT_<ID>
 *   NAME        the --format value, a bare word; its writer is
 *               report_write_<NAME>() (report.h, pprof.h, svg.h)
 *   BINARY      the bytes are not text (pprof is gzip): not for a terminal
 *   STRUCTURED  a file a program reads, which must not be interleaved with
 *               anything else (another report, a program's own output);
 *               text is for people and is not
 */
#define REPORT_FORMATS(X)                   \
	X(TEXT, text, false, false)         \
	X(JSON, json, false, true)          \
	X(FOLDED, folded, false, true)      \
	X(PPROF, pprof, true, true)         \
	X(SVG, svg, false, true)

enum report_format {
#define REPORT_FORMAT_ENUM(id, name, binary, structured) REPORT_FORMAT_##id,
	REPORT_FORMATS(REPORT_FORMAT_ENUM)
#undef REPORT_FORMAT_ENUM
	REPORT_FORMAT_COUNT /* not a format: how many there are */
};

/* Every format's name in table order, then NULL. */
extern const char *const report_format_names[REPORT_FORMAT_COUNT + 1];

/* Every format's name in table order joined by ", " ("text, json, ..."),
 * for --help and for the message about an unknown format. */
extern const char *const report_format_list;

/*
 * Sets *OUT to the format named NAME (exactly, as report_format_name()
 * gives it).  Returns 0, or -EINVAL when NAME is NULL or names no format
 * (*OUT is then unchanged).
 */
int report_format_parse(const char *name, enum report_format *out);

/* The name of FMT ("json"), a static string; NULL when FMT is no format. */
const char *report_format_name(enum report_format fmt);

/* Whether FMT writes bytes that are not text (see REPORT_FORMATS); false
 * when FMT is no format. */
bool report_format_is_binary(enum report_format fmt);

/* Whether FMT is a file for programs that must stand alone in its output
 * (see REPORT_FORMATS); false when FMT is no format. */
bool report_format_is_structured(enum report_format fmt);

/*
 * Writes R to F in format FMT, showing at most TOP stacks (0 = all) in
 * report_sort() order, without modifying R.  F must be open for binary
 * output when report_format_is_binary(FMT).  Nothing is written before the
 * report is built in memory, so an error other than -EIO leaves F
 * untouched.  Returns 0, -EINVAL when FMT is no format, or what the
 * format's writer returns: -ENOMEM, -EIO when F reports an error, -EPROTO
 * when compression fails (pprof).
 */
int report_write(FILE *f, enum report_format fmt, const struct report *r, unsigned int top);

#endif
