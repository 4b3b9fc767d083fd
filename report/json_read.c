/* Reading a JSON report back into a struct report: the document parsed by
 * json.c, every field checked against SPEC.md's types, and the first one
 * that is wrong named by its path ("stacks[3].frames[2].line") and place. */
#define _GNU_SOURCE /* asprintf, vasprintf */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static void *kept_calloc(struct report_json_store *st, size_t n, size_t size)
{
	void **g = realloc(st->blocks, (st->nblocks + 1) * sizeof(*g));
	void *p;

	if (!g)
		return NULL;
	st->blocks = g;
	p = calloc(n, size);
	if (p)
		st->blocks[st->nblocks++] = p;
	return p;
}

/*
 * Sets RJ's error to the message printf-formatted from FMT, at LINE:COLUMN
 * of the text (0 = not about one place).  Returns -EINVAL, or -ENOMEM when
 * there was no memory for the message.
 */
static int __attribute__((format(printf, 4, 5)))
error_set(struct report_json *rj, unsigned int line, unsigned int column, const char *fmt, ...)
{
	va_list ap;
	int len;

	free(rj->error.message);
	va_start(ap, fmt);
	len = vasprintf(&rj->error.message, fmt, ap);
	va_end(ap);
	if (len < 0) {
		rj->error.message = NULL;
		return -ENOMEM;
	}
	rj->error.line = line;
	rj->error.column = column;
	return -EINVAL;
}

/* Writes W and FIELD as a path: "stacks[3].frames[2].line", "totals.stacks". */
static void where_put(FILE *f, const struct where *w, const char *field)
{
	const char *sep = "";

	if (w->stack >= 0) {
		fprintf(f, "stacks[%ld]", w->stack);
		sep = ".";
	}
	if (w->list && w->frame >= 0)
		fprintf(f, "%s%s[%ld]", sep, w->list, w->frame);
	else if (w->list)
		fprintf(f, "%s%s", sep, w->list);
	if (w->list)
		sep = ".";
	if (field[0])
		fprintf(f, "%s%s", sep, field);
}

/* Says that FIELD (value V) is not WANT; returns -EINVAL (or -ENOMEM). */
static int field_error(struct report_json *rj, const struct json_value *v, const struct where *w,
		       const char *field, const char *want)
{
	char *path = NULL;
	size_t len;
	FILE *m = open_memstream(&path, &len);
	int err;

	if (!m)
		return -ENOMEM;
	where_put(m, w, field);
	if (fclose(m) != 0) {
		free(path);
		return -ENOMEM;
	}
	err = error_set(rj, v->line, v->column, "%s: expected %s, not %s", path, want,
			json_type_name(v->type));
	free(path);
	return err;
}

/*
 * Notes once per name each field of OBJ this reader does not know, as
 * PREFIX + key (SPEC.md allows new fields; an older dwleak cannot keep
 * them).  KNOWN is NULL-terminated.  Without memory a name goes unnoted.
 */
static void unknown_note(struct report_json *rj, const struct json_value *obj, const char *prefix,
			 const char *const *known)
{
	struct report_json_store *st = rj->store;
	size_t i, j;

	for (i = 0; obj && i < obj->object.n; i++) {
		const char *key = obj->object.members[i].key;
		const char *const *k;
		char *name, **g;
		bool seen = false;

		for (k = known; *k && strcmp(*k, key) != 0; k++)
			;
		if (*k)
			continue;
		if (asprintf(&name, "%s%s", prefix, key) < 0)
			return;
		for (j = 0; j < st->nunknown && !seen; j++)
			seen = strcmp(st->unknown[j], name) == 0;
		g = seen ? NULL : realloc(st->unknown, (st->nunknown + 1) * sizeof(*g));
		if (!g) {
			free(name);
			continue;
		}
		st->unknown = g;
		st->unknown[st->nunknown++] = name;
		rj->unknown_fields = (const char *const *)st->unknown;
		rj->nunknown_fields = st->nunknown;
	}
}

/*
 * Field KEY of OBJ at *OUT when it is a TYPE (WANT says what is expected,
 * for the message); absent - or null, when NULLABLE - gives NULL.  The
 * getters below that read a JSON type of their own go through here.
 */
static int get_typed(struct report_json *rj, const struct json_value *obj, const char *key,
		     const struct where *w, enum json_type type, bool nullable, const char *want,
		     const struct json_value **out)
{
	const struct json_value *v = json_get(obj, key);

	*out = NULL;
	if (!v || (nullable && v->type == JSON_NULL))
		return 0;
	if (v->type != type)
		return field_error(rj, v, w, key, want);
	*out = v;
	return 0;
}

/* Field KEY of OBJ as a string, or NULL when absent or null. */
static int get_str(struct report_json *rj, const struct json_value *obj, const char *key,
		   const struct where *w, const char **out)
{
	const struct json_value *v;
	int err = get_typed(rj, obj, key, w, JSON_STRING, true, "a string or null", &v);

	*out = v ? v->string.s : NULL;
	return err;
}

/* Field KEY of OBJ as a non-negative integer; absent leaves *OUT alone. */
static int get_u64(struct report_json *rj, const struct json_value *obj, const char *key,
		   const struct where *w, uint64_t *out)
{
	const struct json_value *v = json_get(obj, key);

	if (!v)
		return 0;
	if (json_to_u64(v, out) != 0)
		return field_error(rj, v, w, key, "an integer from 0 to 2^64-1");
	return 0;
}

/* Field KEY of OBJ as an integer in [MIN, MAX]; absent or null gives
 * IF_NULL. */
static int get_int(struct report_json *rj, const struct json_value *obj, const char *key,
		   const struct where *w, int64_t min, int64_t max, int64_t if_null, int64_t *out)
{
	const struct json_value *v = json_get(obj, key);

	*out = if_null;
	if (!v || v->type == JSON_NULL)
		return 0;
	if (json_to_i64(v, out) != 0 || *out < min || *out > max)
		return field_error(rj, v, w, key, "an integer in range, or null");
	return 0;
}

/* Field KEY of OBJ as a number; absent or null (how NaN is written) is NAN. */
static int get_real(struct report_json *rj, const struct json_value *obj, const char *key,
		    const struct where *w, double *out)
{
	const struct json_value *v = json_get(obj, key);

	*out = NAN;
	if (!v || v->type == JSON_NULL)
		return 0;
	if (json_to_double(v, out) != 0)
		return field_error(rj, v, w, key, "a number or null");
	return 0;
}

/* Field KEY of OBJ as true or false; absent is false. */
static int get_bool(struct report_json *rj, const struct json_value *obj, const char *key,
		    const struct where *w, bool *out)
{
	const struct json_value *v;
	int err = get_typed(rj, obj, key, w, JSON_BOOL, false, "true or false", &v);

	*out = v && v->boolean;
	return err;
}

/* Field KEY of OBJ as an address string "0x..." (at most 16 hex digits);
 * absent is 0. */
static int get_hex(struct report_json *rj, const struct json_value *obj, const char *key,
		   const struct where *w, uint64_t *out)
{
	static const char want[] = "an address string like \"0x1a2b\"";
	const struct json_value *v;
	const char *s;
	size_t i;
	int err;

	*out = 0;
	err = get_typed(rj, obj, key, w, JSON_STRING, false, want, &v);
	if (err || !v)
		return err;
	s = v->string.s;
	if (strncmp(s, "0x", 2) != 0 || !s[2] || strlen(s + 2) > 16 || strlen(s) != v->string.len)
		goto bad;
	for (i = 2; s[i]; i++) {
		char c = s[i];
		unsigned int d;

		if (c >= '0' && c <= '9')
			d = (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned int)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned int)(c - 'A' + 10);
		else
			goto bad;
		*out = *out << 4 | d;
	}
	return 0;
bad:
	return field_error(rj, v, w, key, want);
}

/* The array at field KEY of OBJ; absent gives NULL. */
static int get_array(struct report_json *rj, const struct json_value *obj, const char *key,
		     const struct where *w, const struct json_value **out)
{
	return get_typed(rj, obj, key, w, JSON_ARRAY, false, "an array", out);
}

/* The object at field KEY of OBJ; absent gives NULL. */
static int get_object(struct report_json *rj, const struct json_value *obj, const char *key,
		      const struct where *w, const struct json_value **out)
{
	return get_typed(rj, obj, key, w, JSON_OBJECT, false, "an object", out);
}

static int frame_read(struct report_json *rj, const struct json_value *obj, const struct where *w,
		      struct report_frame *f)
{
	static const char *const known[] = { "address", "module", "build_id", "elf_address",
					     "function", "offset", "file", "line", "inlined",
					     NULL };
	int64_t line;
	int err;

	if (obj->type != JSON_OBJECT)
		return field_error(rj, obj, w, "", "a frame object");
	unknown_note(rj, obj, "stacks[].frames[].", known);
	memset(f, 0, sizeof(*f));
	if ((err = get_hex(rj, obj, "address", w, &f->address)) ||
	    (err = get_str(rj, obj, "module", w, &f->module)) ||
	    (err = get_str(rj, obj, "build_id", w, &f->build_id)) ||
	    (err = get_hex(rj, obj, "elf_address", w, &f->elf_address)) ||
	    (err = get_str(rj, obj, "function", w, &f->function)) ||
	    (err = get_u64(rj, obj, "offset", w, &f->offset)) ||
	    (err = get_str(rj, obj, "file", w, &f->file)) ||
	    (err = get_int(rj, obj, "line", w, 1, INT32_MAX, 0, &line)) ||
	    (err = get_bool(rj, obj, "inlined", w, &f->inlined)))
		return err;
	f->line = (int)line;
	return 0;
}

/* Reads the frame list KEY of stack object OBJ (number STACK) into a kept
 * array at *OUT with *N frames. */
static int frames_read(struct report_json *rj, const struct json_value *obj, long stack, const char *key,
		       const struct report_frame **out, size_t *n)
{
	struct where w = { stack, NULL, -1 };
	const struct json_value *arr;
	struct report_frame *frames;
	size_t i;
	int err;

	*out = NULL;
	*n = 0;
	err = get_array(rj, obj, key, &w, &arr);
	if (err || !arr || !arr->array.n)
		return err;
	frames = kept_calloc(rj->store, arr->array.n, sizeof(*frames));
	if (!frames)
		return -ENOMEM;
	w.list = key;
	for (i = 0; i < arr->array.n; i++) {
		w.frame = (long)i;
		err = frame_read(rj, arr->array.items[i], &w, &frames[i]);
		if (err)
			return err;
	}
	*out = frames;
	*n = arr->array.n;
	return 0;
}

static int stack_read(struct report_json *rj, const struct json_value *obj, long index,
		      struct report_stack *s)
{
	static const char *const known[] = { "bytes", "allocations", "allocator", "frames",
					     "fp_frames", "fp_divergence", "truncated",
					     "unwind_error", "oldest_age_s", "growth_bytes_per_s",
					     NULL };
	struct where w = { index, NULL, -1 };
	int64_t divergence;
	int err;

	if (obj->type != JSON_OBJECT)
		return field_error(rj, obj, &w, "", "a stack object");
	unknown_note(rj, obj, "stacks[].", known);
	memset(s, 0, sizeof(*s));
	if ((err = get_u64(rj, obj, "bytes", &w, &s->bytes)) ||
	    (err = get_u64(rj, obj, "allocations", &w, &s->allocations)) ||
	    (err = get_str(rj, obj, "allocator", &w, &s->allocator)) ||
	    (err = frames_read(rj, obj, index, "frames", &s->frames, &s->nframes)) ||
	    (err = frames_read(rj, obj, index, "fp_frames", &s->fp_frames, &s->nfp_frames)) ||
	    (err = get_int(rj, obj, "fp_divergence", &w, 0, LONG_MAX, -1, &divergence)) ||
	    (err = get_bool(rj, obj, "truncated", &w, &s->truncated)) ||
	    (err = get_str(rj, obj, "unwind_error", &w, &s->unwind_error)) ||
	    (err = get_real(rj, obj, "oldest_age_s", &w, &s->oldest_age_s)) ||
	    (err = get_real(rj, obj, "growth_bytes_per_s", &w, &s->growth_bytes_per_s)))
		return err;
	s->fp_divergence = (long)divergence;
	return 0;
}

static int counters_read(struct report_json *rj, const struct json_value *obj)
{
	const struct where w = TOP_LEVEL;
	const char **names;
	uint64_t *values;
	size_t i, n;
	int err;

	err = get_object(rj, obj, "counters", &w, &obj);
	if (err || !obj || !obj->object.n)
		return err;
	n = obj->object.n;
	names = kept_calloc(rj->store, n, sizeof(*names));
	values = kept_calloc(rj->store, n, sizeof(*values));
	if (!names || !values)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const struct json_member *m = &obj->object.members[i];

		names[i] = m->key;
		if (json_to_u64(m->value, &values[i]) != 0) {
			return error_set(rj, m->value->line, m->value->column,
					 "counters.%s: expected an integer from 0 to 2^64-1, not %s",
					 m->key, json_type_name(m->value->type));
		}
	}
	rj->report.counter_names = names;
	rj->report.counter_values = values;
	rj->report.ncounters = n;
	return 0;
}

static int fp_summary_read(struct report_json *rj, const struct json_value *obj)
{
	static const char *const known[] = { "stacks", "agreeing", "agree_share", "frames_lost",
					     "modules", NULL };
	static const char *const module_known[] = { "module", "stacks", "bytes", "frames_lost",
						    NULL };
	const struct where w = TOP_LEVEL, sw = { -1, "fp_summary", -1 };
	struct report_fp_summary *fp = &rj->store->fp;
	const struct json_value *mods;
	size_t i;
	int err;

	err = get_object(rj, obj, "fp_summary", &w, &obj);
	if (err || !obj)
		return err;
	unknown_note(rj, obj, "fp_summary.", known);
	fp->present = true;
	/* agree_share is agreeing / stacks, recomputed by the writer */
	if ((err = get_u64(rj, obj, "stacks", &sw, &fp->stacks)) ||
	    (err = get_u64(rj, obj, "agreeing", &sw, &fp->agreeing)) ||
	    (err = get_u64(rj, obj, "frames_lost", &sw, &fp->frames_lost)) ||
	    (err = get_array(rj, obj, "modules", &sw, &mods)))
		return err;
	rj->report.fp = fp;
	if (!mods || !mods->array.n)
		return 0;
	fp->modules = kept_calloc(rj->store, mods->array.n, sizeof(*fp->modules));
	if (!fp->modules)
		return -ENOMEM;
	fp->nmodules = mods->array.n;
	for (i = 0; i < mods->array.n; i++) {
		const struct json_value *m = mods->array.items[i];
		struct report_fp_module *fm = &fp->modules[i];
		const struct where mw = { -1, "fp_summary.modules", (long)i };

		if (m->type != JSON_OBJECT)
			return field_error(rj, m, &mw, "", "an object");
		unknown_note(rj, m, "fp_summary.modules[].", module_known);
		if ((err = get_str(rj, m, "module", &mw, &fm->module)) ||
		    (err = get_u64(rj, m, "stacks", &mw, &fm->stacks)) ||
		    (err = get_u64(rj, m, "bytes", &mw, &fm->bytes)) ||
		    (err = get_u64(rj, m, "frames_lost", &mw, &fm->frames_lost)))
			return err;
	}
	return 0;
}

/* The "suppressed" list: what each suppression rule took out of the report. */
static int suppressed_read(struct report_json *rj, const struct json_value *obj)
{
	static const char *const known[] = { "rule", "description", "stacks", "bytes",
					     "allocations", NULL };
	const struct where w = TOP_LEVEL;
	const struct json_value *arr;
	struct report_suppressed *sup;
	size_t i;
	int err;

	err = get_array(rj, obj, "suppressed", &w, &arr);
	if (err || !arr || !arr->array.n)
		return err;
	sup = kept_calloc(rj->store, arr->array.n, sizeof(*sup));
	if (!sup)
		return -ENOMEM;
	for (i = 0; i < arr->array.n; i++) {
		const struct json_value *x = arr->array.items[i];
		const struct where xw = { -1, "suppressed", (long)i };

		if (x->type != JSON_OBJECT)
			return field_error(rj, x, &xw, "", "an object");
		unknown_note(rj, x, "suppressed[].", known);
		if ((err = get_str(rj, x, "rule", &xw, &sup[i].rule)) ||
		    (err = get_str(rj, x, "description", &xw, &sup[i].description)) ||
		    (err = get_u64(rj, x, "stacks", &xw, &sup[i].stacks)) ||
		    (err = get_u64(rj, x, "bytes", &xw, &sup[i].bytes)) ||
		    (err = get_u64(rj, x, "allocations", &xw, &sup[i].allocations)))
			return err;
	}
	rj->report.suppressed = sup;
	rj->report.nsuppressed = arr->array.n;
	return 0;
}

/* Fills RJ->report from document DOC, an object. */
static int report_read(struct report_json *rj, const struct json_value *doc)
{
	static const char *const known[] = { "dwleak_report", "pid", "command", "unwind",
					     "duration_s", "sample_bytes", "totals", "counters",
					     "fp_summary", "suppressed", "stacks", NULL };
	static const char *const totals_known[] = { "outstanding_bytes", "outstanding_allocations",
						    "stacks", "dropped_events", "truncated_stacks",
						    "unwind_errors", NULL };
	const struct json_value *totals, *stacks, *version;
	const struct where w = TOP_LEVEL, tw = { -1, "totals", -1 };
	struct report *r = &rj->report;
	struct report_totals *t = &r->totals;
	int64_t pid;
	size_t i;
	int err;

	version = json_get(doc, "dwleak_report");
	if (!version || version->type != JSON_INT || version->i != REPORT_JSON_VERSION)
		return error_set(rj, 0, 0, "not a dwleak report (%s)",
				 !version ? "no \"dwleak_report\": 1 in a top-level object"
					  : "\"dwleak_report\" is not 1: a format this dwleak does not read");
	unknown_note(rj, doc, "", known);
	if ((err = get_int(rj, doc, "pid", &w, INT32_MIN, INT32_MAX, 0, &pid)) ||
	    (err = get_str(rj, doc, "command", &w, &r->command)) ||
	    (err = get_str(rj, doc, "unwind", &w, &r->unwind)) ||
	    (err = get_real(rj, doc, "duration_s", &w, &r->duration_s)) ||
	    (err = get_u64(rj, doc, "sample_bytes", &w, &r->sample_bytes)) ||
	    (err = get_object(rj, doc, "totals", &w, &totals)) ||
	    (err = counters_read(rj, doc)) ||
	    (err = fp_summary_read(rj, doc)) ||
	    (err = suppressed_read(rj, doc)) ||
	    (err = get_array(rj, doc, "stacks", &w, &stacks)))
		return err;
	r->pid = (int)pid;
	if (!stacks)
		return error_set(rj, 0, 0, "not a dwleak report (no \"stacks\" array)");
	if (stacks->array.n) {
		r->stacks = kept_calloc(rj->store, stacks->array.n, sizeof(*r->stacks));
		if (!r->stacks)
			return -ENOMEM;
	}
	r->nstacks = stacks->array.n;
	for (i = 0; i < stacks->array.n; i++) {
		err = stack_read(rj, stacks->array.items[i], (long)i, &r->stacks[i]);
		if (err)
			return err;
	}

	if (!totals) {
		report_totals_from_stacks(r);
		return 0;
	}
	unknown_note(rj, totals, "totals.", totals_known);
	if ((err = get_u64(rj, totals, "outstanding_bytes", &tw, &t->outstanding_bytes)) ||
	    (err = get_u64(rj, totals, "outstanding_allocations", &tw, &t->outstanding_allocations)) ||
	    (err = get_u64(rj, totals, "stacks", &tw, &t->stacks)) ||
	    (err = get_u64(rj, totals, "dropped_events", &tw, &t->dropped_events)) ||
	    (err = get_u64(rj, totals, "truncated_stacks", &tw, &t->truncated_stacks)) ||
	    (err = get_u64(rj, totals, "unwind_errors", &tw, &t->unwind_errors)))
		return err;
	return 0;
}

int report_json_read(const char *text, size_t len, struct report_json *out)
{
	struct json_error jerr;
	int err;

	memset(out, 0, sizeof(*out));
	out->store = calloc(1, sizeof(*out->store));
	if (!out->store)
		return -ENOMEM;
	err = json_parse(text, len, &out->store->doc, &jerr);
	if (err == -EINVAL)
		return error_set(out, jerr.line, jerr.column, "invalid JSON: %s", jerr.message);
	if (err)
		return err;
	if (out->store->doc->type != JSON_OBJECT)
		return error_set(out, 0, 0, "not a dwleak report (the JSON is %s, not an object)",
				 json_type_name(out->store->doc->type));
	return report_read(out, out->store->doc);
}

void report_json_free(struct report_json *rj)
{
	struct report_json_store *st = rj ? rj->store : NULL;

	if (!rj)
		return;
	for (size_t i = 0; st && i < st->nblocks; i++)
		free(st->blocks[i]);
	for (size_t i = 0; st && i < st->nunknown; i++)
		free(st->unknown[i]);
	if (st) {
		free(st->blocks);
		free(st->unknown);
		json_free(st->doc);
		free(st);
	}
	free(rj->error.message);
	memset(rj, 0, sizeof(*rj));
}
