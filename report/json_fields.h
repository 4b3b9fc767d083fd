/* Typed access to the fields of a parsed JSON report, for json_read.c: each
 * getter checks a field against SPEC.md's type and names a wrong one by its
 * path ("stacks[3].frames[2].line") and place; the store a read report
 * borrows from; the fields this dwleak does not know, noted.  Not for
 * callers outside report/. */
#ifndef DWLEAK_JSON_FIELDS_H
#define DWLEAK_JSON_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "json_read.h"

/*
 * What a read report borrows: the document (every string), the fp summary
 * REPORT.fp points at, BLOCKS (the malloc'd arrays of stacks, frames,
 * counters, modules, suppressions) and the names of UNKNOWN fields.
 */
struct report_json_store {
	struct json_value *doc;
	struct report_fp_summary fp;
	void **blocks;
	size_t nblocks;
	char **unknown;
	size_t nunknown;
};

/*
 * Where a value sits in the report, for messages: "stacks[3].frames[2]."
 * then the field.  STACK < 0 means outside the stacks; LIST names a frame
 * list (FRAME its index) or another object (FRAME < 0), NULL for none.
 */
struct where {
	long stack;
	const char *list;
	long frame;
};

#define TOP_LEVEL ((struct where){ -1, NULL, -1 })

/* A zeroed array of N elements of SIZE bytes kept until the report is
 * freed, or NULL when there is no memory. */
void *store_calloc(struct report_json_store *st, size_t n, size_t size);

/*
 * Sets RJ's error to the message printf-formatted from FMT, at LINE:COLUMN
 * of the text (0 = not about one place).  Returns -EINVAL, or -ENOMEM when
 * there was no memory for the message.
 */
int __attribute__((format(printf, 4, 5)))
report_json_error_set(struct report_json *rj, unsigned int line, unsigned int column, const char *fmt, ...);

/* Says that FIELD (value V) is not WANT; returns -EINVAL (or -ENOMEM). */
int field_error(struct report_json *rj, const struct json_value *v, const struct where *w,
		const char *field, const char *want);

/*
 * Notes once per name each field of OBJ this reader does not know, as
 * PREFIX + key (SPEC.md allows new fields; an older dwleak cannot keep
 * them).  KNOWN is NULL-terminated.  Without memory a name goes unnoted.
 */
void field_unknown_note(struct report_json *rj, const struct json_value *obj, const char *prefix,
			const char *const *known);

/*
 * Field KEY of OBJ at *OUT when it is a TYPE (WANT says what is expected,
 * for the message); absent - or null, when NULLABLE - gives NULL.  The
 * getters below that read a JSON type of their own go through here.
 */
int field_typed(struct report_json *rj, const struct json_value *obj, const char *key,
		const struct where *w, enum json_type type, bool nullable, const char *want,
		const struct json_value **out);

/* Field KEY of OBJ as a string, or NULL when absent or null. */
int field_str(struct report_json *rj, const struct json_value *obj, const char *key,
	      const struct where *w, const char **out);

/* Field KEY of OBJ as a non-negative integer; absent leaves *OUT alone. */
int field_u64(struct report_json *rj, const struct json_value *obj, const char *key,
	      const struct where *w, uint64_t *out);

/* Field KEY of OBJ as an integer in [MIN, MAX]; absent or null gives
 * IF_NULL. */
int field_int(struct report_json *rj, const struct json_value *obj, const char *key,
	      const struct where *w, int64_t min, int64_t max, int64_t if_null, int64_t *out);

/* Field KEY of OBJ as a number; absent or null (how NaN is written) is NAN. */
int field_real(struct report_json *rj, const struct json_value *obj, const char *key,
	       const struct where *w, double *out);

/* Field KEY of OBJ as true or false; absent is false. */
int field_bool(struct report_json *rj, const struct json_value *obj, const char *key,
	       const struct where *w, bool *out);

/* Field KEY of OBJ as an address string "0x..." (at most 16 hex digits);
 * absent is 0. */
int field_hex(struct report_json *rj, const struct json_value *obj, const char *key,
	      const struct where *w, uint64_t *out);

/* The array at field KEY of OBJ; absent gives NULL. */
int field_array(struct report_json *rj, const struct json_value *obj, const char *key,
		const struct where *w, const struct json_value **out);

/* The object at field KEY of OBJ; absent gives NULL. */
int field_object(struct report_json *rj, const struct json_value *obj, const char *key,
		 const struct where *w, const struct json_value **out);

#endif
