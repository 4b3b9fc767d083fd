/* Reading a JSON report (SPEC.md, what report_write_json() writes) back into
 * a struct report, for `dwleak symbolize`.  Nothing is printed: what is
 * wrong with the text, and which fields were not known, come back as data. */
#ifndef DWLEAK_JSON_READ_H
#define DWLEAK_JSON_READ_H

#include <stddef.h>

#include "report.h"

/* Why a text is not a report this dwleak reads. */
struct report_json_error {
	unsigned int line, column; /* where in the text, 1-based; 0 when not about one place */
	char *message;		   /* e.g. "stacks[3].bytes: expected an integer from 0 to
				      2^64-1, not a string"; NULL when none */
};

/* What a read report borrows its strings and arrays from; json_read.c's. */
struct report_json_store;

/*
 * A report read from JSON text.  REPORT borrows every string and array
 * from STORE (report_json_free() frees both; REPORT's arrays may be
 * replaced by the caller, who then owns the replacements).
 * UNKNOWN_FIELDS names, once each and in order of first appearance, every
 * field this reader does not know ("totals.x", "stacks[].frames[].color"):
 * they are left out of REPORT, so a report written again loses them.
 * ERROR says why reading failed.
 */
struct report_json {
	struct report report;
	const char *const *unknown_fields;
	size_t nunknown_fields;
	struct report_json_error error;
	struct report_json_store *store;
};

/*
 * Reads the LEN bytes at TEXT (no NUL needed; not kept) as one JSON report
 * into *OUT.  A report without "totals" gets them from its stacks
 * (report_totals_from_stacks()); a field that is absent (or null where
 * SPEC.md allows it) reads as report.h's "unknown".
 * Returns 0; -EINVAL when TEXT is not JSON, not a report (no
 * "dwleak_report": 1, no "stacks" array) or has a field of the wrong
 * type, with OUT->error set; or -ENOMEM.  OUT->unknown_fields holds what
 * was seen before a failure too.  Free *OUT with report_json_free() in
 * every case.
 */
int report_json_read(const char *text, size_t len, struct report_json *out);

/* Frees what RJ holds (not RJ itself) and empties it.  NULL is ok. */
void report_json_free(struct report_json *rj);

#endif
