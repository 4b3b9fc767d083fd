/* `dwleak symbolize [--debug-dir DIR]... [-o OUT] REPORT.json`: reads a JSON
 * report back into a struct report, resolves every frame again against the
 * objects and debug files found here, and writes it out in the same format. */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_symbolize.h"
#include "frames.h"
#include "json.h"
#include "report.h"
#include "symbolize.h"
#include "write.h"

#define EXIT_USAGE 2
#define REPORT_VERSION 1 /* the "dwleak_report" value this reader understands */
/* The kernel's signal trampoline: its own frame and the interrupted one
 * after it were recorded at exact pcs, not return addresses. */
#define SIGNAL_TRAMPOLINE "__restore_rt"

/* Settings of one `dwleak symbolize` run. */
struct symbolize_env {
	const char **debug_dirs; /* --debug-dir (repeatable), NULL-terminated */
	size_t ndebug_dirs;
	const char *output;	 /* -o: NULL = stdout */
	const char *input;	 /* REPORT.json, "-" = stdin */
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

/*
 * One object the report's frames name, found at most once per run.
 * CANDIDATES are the registered files with its bytes, best first: the
 * recorded path (when its build id matches), then per --debug-dir the
 * build-id copy and the .debug file.  Reports name a few dozen objects at
 * most, so a list searched in order is enough.
 */
struct module_entry {
	const char *path;     /* as the report has it (borrowed from the tree) */
	const char *build_id; /* NULL when the report has none */
	struct sym_module **candidates;
	size_t ncandidates;
};

/*
 * A run's state.  The report borrows every string from DOC (names, paths)
 * or from FRAMES (new names), and its arrays from what is freed at the end:
 * BLOCKS are plain malloc'd arrays, FRAMES holds the frames written out.
 */
struct run {
	const struct symbolize_env *env;
	struct json_value *doc;
	struct report r;
	struct report_fp_summary fp;
	struct symbolizer *sym;
	struct module_entry *modules;
	size_t nmodules;
	void **blocks;
	size_t nblocks;
	struct frame_arena frames;
	char **warned; /* unknown field names already warned about */
	size_t nwarned;
};

static const struct option symbolize_options[] = {
	{ "debug-dir", required_argument, NULL, 'D' },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static const char symbolize_usage[] =
	"Usage: dwleak symbolize [--debug-dir DIR]... [-o OUT] REPORT.json\n"
	"\n"
	"Names the frames of a JSON report (dwleak --format json) again, here: for\n"
	"a report taken on stripped binaries, on a machine without their debug files.\n"
	"Each frame's object is found at its recorded path when its build id matches,\n"
	"else by build id in each DIR (DIR/.build-id/xx/rest, an executable or library\n"
	"with symbols, or DIR/.build-id/xx/rest.debug, a separate debug file); debug\n"
	"files for the recorded path are also looked up as dwleak does when tracing.\n"
	"Function, offset, file, line and inlined frames are replaced; a frame whose\n"
	"object or symbols are not found keeps what the report had.  Everything else\n"
	"in the report is written back unchanged.\n"
	"\n"
	"  -D, --debug-dir DIR   look for objects and debug files by build id under DIR\n"
	"                        (repeatable, searched in order)\n"
	"  -o, --output OUT      write the report to OUT (default: stdout)\n"
	"  -h, --help            show this help\n"
	"\n"
	"REPORT.json may be '-' for stdin.\n"
	"\n"
	"Examples:\n"
	"  dwleak --format json -o leaks.json -- ./app-stripped      (in CI)\n"
	"  dwleak symbolize --debug-dir ./debug -o named.json leaks.json\n"
	"  dwleak symbolize --debug-dir /usr/lib/debug leaks.json | jq '.stacks[0]'\n"
	"\n"
	"Exit status: 0 success, 2 a usage error, an unreadable or invalid report, or\n"
	"an output that could not be written.\n";

static int usage_error(const char *fmt, const char *arg)
{
	fputs("dwleak symbolize: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry 'dwleak symbolize --help' for more information.\n", stderr);
	return EXIT_USAGE;
}

/* ---- Ownership lists ---- */

/* Keeps P (malloc'd) until the run ends; frees it and fails on -ENOMEM. */
static int keep_block(struct run *run, void *p)
{
	void **g;

	if (!p)
		return -ENOMEM;
	g = realloc(run->blocks, (run->nblocks + 1) * sizeof(*g));
	if (!g) {
		free(p);
		return -ENOMEM;
	}
	run->blocks = g;
	run->blocks[run->nblocks++] = p;
	return 0;
}

static void run_free(struct run *run)
{
	size_t i;

	for (i = 0; i < run->nblocks; i++)
		free(run->blocks[i]);
	free(run->blocks);
	frame_arena_free(&run->frames);
	for (i = 0; i < run->nmodules; i++)
		free(run->modules[i].candidates);
	free(run->modules);
	for (i = 0; i < run->nwarned; i++)
		free(run->warned[i]);
	free(run->warned);
	symbolizer_free(run->sym);
	json_free(run->doc);
}

/* ---- Reading the report ---- */

/* Prints W and FIELD as a path: "stacks[3].frames[2].line", "totals.stacks". */
static void where_print(const struct where *w, const char *field)
{
	const char *sep = "";

	if (w->stack >= 0) {
		fprintf(stderr, "stacks[%ld]", w->stack);
		sep = ".";
	}
	if (w->list && w->frame >= 0)
		fprintf(stderr, "%s%s[%ld]", sep, w->list, w->frame);
	else if (w->list)
		fprintf(stderr, "%s%s", sep, w->list);
	if (w->list)
		sep = ".";
	if (field[0])
		fprintf(stderr, "%s%s", sep, field);
}

/* Reports that FIELD (value V) is not WANT; returns -EINVAL. */
static int field_error(const struct run *run, const struct json_value *v, const struct where *w,
		       const char *field, const char *want)
{
	fprintf(stderr, "dwleak: %s:%u:%u: ", run->env->input, v->line, v->column);
	where_print(w, field);
	fprintf(stderr, ": expected %s, not %s\n", want, json_type_name(v->type));
	return -EINVAL;
}

/*
 * Says once per name that a field this reader does not know is left out of
 * the output (SPEC.md allows new fields; an older dwleak cannot keep them).
 * KNOWN is NULL-terminated.
 */
static void warn_unknown(struct run *run, const struct json_value *obj, const char *prefix,
			 const char *const *known)
{
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
		for (j = 0; j < run->nwarned && !seen; j++)
			seen = strcmp(run->warned[j], name) == 0;
		g = seen ? NULL : realloc(run->warned, (run->nwarned + 1) * sizeof(*g));
		if (!g) {
			free(name);
			continue;
		}
		run->warned = g;
		run->warned[run->nwarned++] = name;
		fprintf(stderr, "dwleak: warning: %s: field '%s' is not known to this dwleak and "
			"is left out of the output\n", run->env->input, name);
	}
}

/*
 * Field KEY of OBJ at *OUT when it is a TYPE (WANT says what is expected,
 * for the message); absent - or null, when NULLABLE - gives NULL.  The
 * getters below that read a JSON type of their own go through here.
 */
static int get_typed(const struct run *run, const struct json_value *obj, const char *key,
		     const struct where *w, enum json_type type, bool nullable, const char *want,
		     const struct json_value **out)
{
	const struct json_value *v = json_get(obj, key);

	*out = NULL;
	if (!v || (nullable && v->type == JSON_NULL))
		return 0;
	if (v->type != type)
		return field_error(run, v, w, key, want);
	*out = v;
	return 0;
}

/* Field KEY of OBJ as a string, or NULL when absent or null. */
static int get_str(const struct run *run, const struct json_value *obj, const char *key,
		   const struct where *w, const char **out)
{
	const struct json_value *v;
	int err = get_typed(run, obj, key, w, JSON_STRING, true, "a string or null", &v);

	*out = v ? v->string.s : NULL;
	return err;
}

/* Field KEY of OBJ as a non-negative integer; absent leaves *OUT alone. */
static int get_u64(const struct run *run, const struct json_value *obj, const char *key,
		   const struct where *w, uint64_t *out)
{
	const struct json_value *v = json_get(obj, key);

	if (!v)
		return 0;
	if (json_to_u64(v, out) != 0)
		return field_error(run, v, w, key, "an integer from 0 to 2^64-1");
	return 0;
}

/* Field KEY of OBJ as an integer in [MIN, MAX]; absent or null gives
 * IF_NULL. */
static int get_int(const struct run *run, const struct json_value *obj, const char *key,
		   const struct where *w, int64_t min, int64_t max, int64_t if_null, int64_t *out)
{
	const struct json_value *v = json_get(obj, key);

	*out = if_null;
	if (!v || v->type == JSON_NULL)
		return 0;
	if (json_to_i64(v, out) != 0 || *out < min || *out > max)
		return field_error(run, v, w, key, "an integer in range, or null");
	return 0;
}

/* Field KEY of OBJ as a number; absent or null (how NaN is written) is NAN. */
static int get_real(const struct run *run, const struct json_value *obj, const char *key,
		    const struct where *w, double *out)
{
	const struct json_value *v = json_get(obj, key);

	*out = NAN;
	if (!v || v->type == JSON_NULL)
		return 0;
	if (json_to_double(v, out) != 0)
		return field_error(run, v, w, key, "a number or null");
	return 0;
}

/* Field KEY of OBJ as true or false; absent is false. */
static int get_bool(const struct run *run, const struct json_value *obj, const char *key,
		    const struct where *w, bool *out)
{
	const struct json_value *v;
	int err = get_typed(run, obj, key, w, JSON_BOOL, false, "true or false", &v);

	*out = v && v->boolean;
	return err;
}

/* Field KEY of OBJ as an address string "0x..." (at most 16 hex digits);
 * absent is 0. */
static int get_hex(const struct run *run, const struct json_value *obj, const char *key,
		   const struct where *w, uint64_t *out)
{
	static const char want[] = "an address string like \"0x1a2b\"";
	const struct json_value *v;
	const char *s;
	size_t i;
	int err;

	*out = 0;
	err = get_typed(run, obj, key, w, JSON_STRING, false, want, &v);
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
	return field_error(run, v, w, key, want);
}

/* The array at field KEY of OBJ; absent gives NULL. */
static int get_array(const struct run *run, const struct json_value *obj, const char *key,
		     const struct where *w, const struct json_value **out)
{
	return get_typed(run, obj, key, w, JSON_ARRAY, false, "an array", out);
}

/* The object at field KEY of OBJ; absent gives NULL. */
static int get_object(const struct run *run, const struct json_value *obj, const char *key,
		      const struct where *w, const struct json_value **out)
{
	return get_typed(run, obj, key, w, JSON_OBJECT, false, "an object", out);
}

static int frame_read(struct run *run, const struct json_value *obj, const struct where *w,
		      struct report_frame *f)
{
	static const char *const known[] = { "address", "module", "build_id", "elf_address",
					     "function", "offset", "file", "line", "inlined",
					     NULL };
	int64_t line;
	int err;

	if (obj->type != JSON_OBJECT)
		return field_error(run, obj, w, "", "a frame object");
	warn_unknown(run, obj, "stacks[].frames[].", known);
	memset(f, 0, sizeof(*f));
	if ((err = get_hex(run, obj, "address", w, &f->address)) ||
	    (err = get_str(run, obj, "module", w, &f->module)) ||
	    (err = get_str(run, obj, "build_id", w, &f->build_id)) ||
	    (err = get_hex(run, obj, "elf_address", w, &f->elf_address)) ||
	    (err = get_str(run, obj, "function", w, &f->function)) ||
	    (err = get_u64(run, obj, "offset", w, &f->offset)) ||
	    (err = get_str(run, obj, "file", w, &f->file)) ||
	    (err = get_int(run, obj, "line", w, 1, INT32_MAX, 0, &line)) ||
	    (err = get_bool(run, obj, "inlined", w, &f->inlined)))
		return err;
	f->line = (int)line;
	return 0;
}

/* Reads the frame list KEY of stack object OBJ (number STACK) into a kept
 * array at *OUT with *N frames. */
static int frames_read(struct run *run, const struct json_value *obj, long stack, const char *key,
		       const struct report_frame **out, size_t *n)
{
	struct where w = { stack, NULL, -1 };
	const struct json_value *arr;
	struct report_frame *frames;
	size_t i;
	int err;

	*out = NULL;
	*n = 0;
	err = get_array(run, obj, key, &w, &arr);
	if (err || !arr || !arr->array.n)
		return err;
	frames = calloc(arr->array.n, sizeof(*frames));
	err = keep_block(run, frames);
	if (err)
		return err;
	w.list = key;
	for (i = 0; i < arr->array.n; i++) {
		w.frame = (long)i;
		err = frame_read(run, arr->array.items[i], &w, &frames[i]);
		if (err)
			return err;
	}
	*out = frames;
	*n = arr->array.n;
	return 0;
}

static int stack_read(struct run *run, const struct json_value *obj, long index,
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
		return field_error(run, obj, &w, "", "a stack object");
	warn_unknown(run, obj, "stacks[].", known);
	memset(s, 0, sizeof(*s));
	if ((err = get_u64(run, obj, "bytes", &w, &s->bytes)) ||
	    (err = get_u64(run, obj, "allocations", &w, &s->allocations)) ||
	    (err = get_str(run, obj, "allocator", &w, &s->allocator)) ||
	    (err = frames_read(run, obj, index, "frames", &s->frames, &s->nframes)) ||
	    (err = frames_read(run, obj, index, "fp_frames", &s->fp_frames, &s->nfp_frames)) ||
	    (err = get_int(run, obj, "fp_divergence", &w, 0, LONG_MAX, -1, &divergence)) ||
	    (err = get_bool(run, obj, "truncated", &w, &s->truncated)) ||
	    (err = get_str(run, obj, "unwind_error", &w, &s->unwind_error)) ||
	    (err = get_real(run, obj, "oldest_age_s", &w, &s->oldest_age_s)) ||
	    (err = get_real(run, obj, "growth_bytes_per_s", &w, &s->growth_bytes_per_s)))
		return err;
	s->fp_divergence = (long)divergence;
	return 0;
}

static int counters_read(struct run *run, const struct json_value *obj)
{
	const struct where w = TOP_LEVEL;
	const char **names;
	uint64_t *values;
	size_t i, n;
	int err;

	err = get_object(run, obj, "counters", &w, &obj);
	if (err || !obj || !obj->object.n)
		return err;
	n = obj->object.n;
	names = calloc(n, sizeof(*names));
	err = keep_block(run, names);
	if (err)
		return err;
	values = calloc(n, sizeof(*values));
	err = keep_block(run, values);
	if (err)
		return err;
	for (i = 0; i < n; i++) {
		const struct json_member *m = &obj->object.members[i];

		names[i] = m->key;
		if (json_to_u64(m->value, &values[i]) != 0) {
			fprintf(stderr, "dwleak: %s:%u:%u: counters.%s: expected an integer from 0 "
				"to 2^64-1, not %s\n", run->env->input, m->value->line,
				m->value->column, m->key, json_type_name(m->value->type));
			return -EINVAL;
		}
	}
	run->r.counter_names = names;
	run->r.counter_values = values;
	run->r.ncounters = n;
	return 0;
}

static int fp_summary_read(struct run *run, const struct json_value *obj)
{
	static const char *const known[] = { "stacks", "agreeing", "agree_share", "frames_lost",
					     "modules", NULL };
	static const char *const module_known[] = { "module", "stacks", "bytes", "frames_lost",
						    NULL };
	const struct where w = TOP_LEVEL, sw = { -1, "fp_summary", -1 };
	const struct json_value *mods;
	size_t i;
	int err;

	err = get_object(run, obj, "fp_summary", &w, &obj);
	if (err || !obj)
		return err;
	warn_unknown(run, obj, "fp_summary.", known);
	run->fp.present = true;
	/* agree_share is agreeing / stacks, recomputed by the writer */
	if ((err = get_u64(run, obj, "stacks", &sw, &run->fp.stacks)) ||
	    (err = get_u64(run, obj, "agreeing", &sw, &run->fp.agreeing)) ||
	    (err = get_u64(run, obj, "frames_lost", &sw, &run->fp.frames_lost)) ||
	    (err = get_array(run, obj, "modules", &sw, &mods)))
		return err;
	run->r.fp = &run->fp;
	if (!mods || !mods->array.n)
		return 0;
	run->fp.modules = calloc(mods->array.n, sizeof(*run->fp.modules));
	err = keep_block(run, run->fp.modules);
	if (err)
		return err;
	run->fp.nmodules = mods->array.n;
	for (i = 0; i < mods->array.n; i++) {
		const struct json_value *m = mods->array.items[i];
		struct report_fp_module *fm = &run->fp.modules[i];
		const struct where mw = { -1, "fp_summary.modules", (long)i };

		if (m->type != JSON_OBJECT)
			return field_error(run, m, &mw, "", "an object");
		warn_unknown(run, m, "fp_summary.modules[].", module_known);
		if ((err = get_str(run, m, "module", &mw, &fm->module)) ||
		    (err = get_u64(run, m, "stacks", &mw, &fm->stacks)) ||
		    (err = get_u64(run, m, "bytes", &mw, &fm->bytes)) ||
		    (err = get_u64(run, m, "frames_lost", &mw, &fm->frames_lost)))
			return err;
	}
	return 0;
}

/* The "suppressed" list: what each suppression rule took out of the report. */
static int suppressed_read(struct run *run, const struct json_value *obj)
{
	static const char *const known[] = { "rule", "description", "stacks", "bytes",
					     "allocations", NULL };
	const struct where w = TOP_LEVEL;
	const struct json_value *arr;
	struct report_suppressed *sup;
	size_t i;
	int err;

	err = get_array(run, obj, "suppressed", &w, &arr);
	if (err || !arr || !arr->array.n)
		return err;
	sup = calloc(arr->array.n, sizeof(*sup));
	err = keep_block(run, sup);
	if (err)
		return err;
	for (i = 0; i < arr->array.n; i++) {
		const struct json_value *x = arr->array.items[i];
		const struct where xw = { -1, "suppressed", (long)i };

		if (x->type != JSON_OBJECT)
			return field_error(run, x, &xw, "", "an object");
		warn_unknown(run, x, "suppressed[].", known);
		if ((err = get_str(run, x, "rule", &xw, &sup[i].rule)) ||
		    (err = get_str(run, x, "description", &xw, &sup[i].description)) ||
		    (err = get_u64(run, x, "stacks", &xw, &sup[i].stacks)) ||
		    (err = get_u64(run, x, "bytes", &xw, &sup[i].bytes)) ||
		    (err = get_u64(run, x, "allocations", &xw, &sup[i].allocations)))
			return err;
	}
	run->r.suppressed = sup;
	run->r.nsuppressed = arr->array.n;
	return 0;
}

/* Fills RUN->r from RUN->doc. */
static int report_read(struct run *run)
{
	static const char *const known[] = { "dwleak_report", "pid", "command", "unwind",
					     "duration_s", "sample_bytes", "totals", "counters",
					     "fp_summary", "suppressed", "stacks", NULL };
	static const char *const totals_known[] = { "outstanding_bytes", "outstanding_allocations",
						    "stacks", "dropped_events", "truncated_stacks",
						    "unwind_errors", NULL };
	const struct json_value *doc = run->doc, *totals, *stacks, *version;
	const struct where w = TOP_LEVEL, tw = { -1, "totals", -1 };
	struct report *r = &run->r;
	struct report_totals *t = &r->totals;
	int64_t pid;
	size_t i;
	int err;

	version = json_get(doc, "dwleak_report");
	if (!version || version->type != JSON_INT || version->i != REPORT_VERSION) {
		fprintf(stderr, "dwleak: %s: not a dwleak report (%s)\n", run->env->input,
			!version ? "no \"dwleak_report\": 1 in a top-level object"
				 : "\"dwleak_report\" is not 1: a format this dwleak does not read");
		return -EINVAL;
	}
	warn_unknown(run, doc, "", known);
	if ((err = get_int(run, doc, "pid", &w, INT32_MIN, INT32_MAX, 0, &pid)) ||
	    (err = get_str(run, doc, "command", &w, &r->command)) ||
	    (err = get_str(run, doc, "unwind", &w, &r->unwind)) ||
	    (err = get_real(run, doc, "duration_s", &w, &r->duration_s)) ||
	    (err = get_u64(run, doc, "sample_bytes", &w, &r->sample_bytes)) ||
	    (err = get_object(run, doc, "totals", &w, &totals)) ||
	    (err = counters_read(run, doc)) ||
	    (err = fp_summary_read(run, doc)) ||
	    (err = suppressed_read(run, doc)) ||
	    (err = get_array(run, doc, "stacks", &w, &stacks)))
		return err;
	r->pid = (int)pid;
	if (!stacks) {
		fprintf(stderr, "dwleak: %s: not a dwleak report (no \"stacks\" array)\n",
			run->env->input);
		return -EINVAL;
	}
	if (stacks->array.n) {
		r->stacks = calloc(stacks->array.n, sizeof(*r->stacks));
		err = keep_block(run, r->stacks);
		if (err)
			return err;
	}
	r->nstacks = stacks->array.n;
	for (i = 0; i < stacks->array.n; i++) {
		err = stack_read(run, stacks->array.items[i], (long)i, &r->stacks[i]);
		if (err)
			return err;
	}

	if (!totals) {
		report_totals_from_stacks(r);
		return 0;
	}
	warn_unknown(run, totals, "totals.", totals_known);
	if ((err = get_u64(run, totals, "outstanding_bytes", &tw, &t->outstanding_bytes)) ||
	    (err = get_u64(run, totals, "outstanding_allocations", &tw, &t->outstanding_allocations)) ||
	    (err = get_u64(run, totals, "stacks", &tw, &t->stacks)) ||
	    (err = get_u64(run, totals, "dropped_events", &tw, &t->dropped_events)) ||
	    (err = get_u64(run, totals, "truncated_stacks", &tw, &t->truncated_stacks)) ||
	    (err = get_u64(run, totals, "unwind_errors", &tw, &t->unwind_errors)))
		return err;
	return 0;
}

/* ---- Finding objects ---- */

/* Registers PATH when it exists and has BUILD_ID (any when NULL), as the
 * next candidate of E. */
static int candidate_try(struct run *run, struct module_entry *e, const char *path)
{
	struct sym_module *m, **g;
	const char *id;

	if (access(path, R_OK) != 0 || symbolizer_module(run->sym, path, -1, &m) != 0)
		return 0; /* not here: the next place may have it */
	id = sym_module_build_id(m);
	if (e->build_id && (!id || strcmp(id, e->build_id) != 0))
		return 0;
	g = realloc(e->candidates, (e->ncandidates + 1) * sizeof(*g));
	if (!g)
		return -ENOMEM;
	e->candidates = g;
	e->candidates[e->ncandidates++] = m;
	return 0;
}

/* Looks up the candidates of E: its recorded path, then by build id in
 * every --debug-dir, the way gdb and libdwfl lay out .build-id trees. */
static int candidates_find(struct run *run, struct module_entry *e)
{
	static const char *const suffixes[] = { "", ".debug" };
	size_t i, j;
	int err;

	err = candidate_try(run, e, e->path);
	if (err || !e->build_id || strlen(e->build_id) < 3)
		return err;
	for (i = 0; i < run->env->ndebug_dirs; i++) {
		for (j = 0; j < sizeof(suffixes) / sizeof(suffixes[0]); j++) {
			char *path;

			if (asprintf(&path, "%s/.build-id/%.2s/%s%s", run->env->debug_dirs[i],
				     e->build_id, e->build_id + 2, suffixes[j]) < 0)
				return -ENOMEM;
			err = candidate_try(run, e, path);
			free(path);
			if (err)
				return err;
		}
	}
	return 0;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* The entry of (PATH, BUILD_ID), looked up on first use; NULL on -ENOMEM. */
static struct module_entry *module_entry_get(struct run *run, const char *path,
					     const char *build_id)
{
	struct module_entry *e, *g;
	size_t i;

	for (i = 0; i < run->nmodules; i++)
		if (str_eq(run->modules[i].path, path) && str_eq(run->modules[i].build_id, build_id))
			return &run->modules[i];
	g = realloc(run->modules, (run->nmodules + 1) * sizeof(*g));
	if (!g)
		return NULL;
	run->modules = g;
	e = &run->modules[run->nmodules++];
	memset(e, 0, sizeof(*e));
	e->path = path;
	e->build_id = build_id;
	return candidates_find(run, e) ? NULL : e;
}

/* ---- Resolving ---- */

/* How much a group of frames says: 2 with a source position, 1 with a
 * name only, 0 with neither.  SCORE is the group's so far; this adds one
 * frame to it, for the resolved frames and the report's alike. */
static int score_add(int score, const char *function, const char *file, int line)
{
	if (file || line > 0)
		return 2;
	return function && score < 1 ? 1 : score;
}

static int sym_score(const struct sym_frame *f, size_t n)
{
	int score = 0;

	for (size_t i = 0; i < n; i++)
		score = score_add(score, f[i].function, f[i].file, f[i].line);
	return score;
}

static int report_score(const struct report_frame *f, size_t n)
{
	int score = 0;

	for (size_t i = 0; i < n; i++)
		score = score_add(score, f[i].function, f[i].file, f[i].line);
	return score;
}

/*
 * Resolves ELF address ADDR in the candidates of E, keeping the first
 * answer with a source position, else the first with a name.  Stores the
 * kept frames (NULL when no candidate named anything) at *OUT.
 */
static int entry_resolve(struct module_entry *e, uint64_t addr, bool return_addr,
			 struct sym_frame **out, size_t *n)
{
	int best = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < e->ncandidates && best < 2; i++) {
		struct sym_frame *f;
		size_t nf;
		int score;

		if (sym_module_resolve(e->candidates[i], addr, return_addr, &f, &nf) != 0)
			return -ENOMEM;
		score = sym_score(f, nf);
		if (score > best) {
			sym_frames_free(*out, *n);
			*out = f;
			*n = nf;
			best = score;
		} else {
			sym_frames_free(f, nf);
		}
	}
	return 0;
}

static bool is_trampoline(const char *function)
{
	return function && strcmp(function, SIGNAL_TRAMPOLINE) == 0;
}

/*
 * Appends to RUN->frames the frame list IN (N frames) resolved again group
 * by group - a physical frame and the inlined frames before it, which share
 * its address - keeping a group as it was when the report said more than
 * the objects found here do.  The first group, the signal trampoline and the
 * frame it interrupted are exact pcs; every other group is a return
 * address, as the tracer resolved them.
 */
static int frames_symbolize(struct run *run, const struct report_frame *in, size_t n)
{
	bool after_trampoline = false;
	size_t i = 0, group = 0;
	int err = 0;

	while (i < n) {
		const struct report_frame *phys;
		size_t len = 1, k;
		struct sym_frame *sf = NULL;
		size_t nsf = 0;
		bool trampoline;

		while (i + len < n && in[i + len - 1].inlined &&
		       in[i + len].address == in[i].address && str_eq(in[i + len].module, in[i].module))
			len++;
		phys = &in[i + len - 1];
		trampoline = is_trampoline(phys->function);
		if (phys->module) {
			struct module_entry *e = module_entry_get(run, phys->module, phys->build_id);
			bool exact = group == 0 || trampoline || after_trampoline;

			if (!e)
				return -ENOMEM;
			err = entry_resolve(e, phys->elf_address, !exact, &sf, &nsf);
			if (err)
				return err;
		}
		if (nsf && sym_score(sf, nsf) >= report_score(&in[i], len)) {
			for (k = 0; k < nsf; k++)
				trampoline = trampoline || is_trampoline(sf[k].function);
			err = frame_arena_add_names(&run->frames, phys->module, phys->build_id,
						    phys->address, phys->elf_address, sf, nsf);
		} else {
			sym_frames_free(sf, nsf);
			err = frame_arena_add_copies(&run->frames, &in[i], len);
		}
		if (err)
			return err;
		after_trampoline = trampoline;
		i += len;
		group++;
	}
	return 0;
}

/* Resolves every stack's frames and FP frames into RUN->frames, then points
 * the stacks at them once the arena stopped growing. */
static int report_symbolize(struct run *run)
{
	struct report *r = &run->r;
	struct frame_span *spans = calloc(2 * r->nstacks + 1, sizeof(*spans));
	int err = spans ? 0 : -ENOMEM;

	for (size_t i = 0; i < r->nstacks && !err; i++) {
		spans[2 * i] = frame_span_start(&run->frames);
		err = frames_symbolize(run, r->stacks[i].frames, r->stacks[i].nframes);
		frame_span_end(&run->frames, &spans[2 * i]);
		spans[2 * i + 1] = frame_span_start(&run->frames);
		if (!err)
			err = frames_symbolize(run, r->stacks[i].fp_frames, r->stacks[i].nfp_frames);
		frame_span_end(&run->frames, &spans[2 * i + 1]);
	}
	for (size_t i = 0; i < r->nstacks && !err; i++) {
		struct report_stack *s = &r->stacks[i];

		s->frames = frame_span_frames(&run->frames, spans[2 * i]);
		s->nframes = spans[2 * i].n;
		s->fp_frames = frame_span_frames(&run->frames, spans[2 * i + 1]);
		s->nfp_frames = spans[2 * i + 1].n;
	}
	free(spans);
	return err;
}

/* Says which objects were found nowhere, so the user knows what to add. */
static void missing_print(const struct run *run)
{
	for (size_t i = 0; i < run->nmodules; i++) {
		const struct module_entry *e = &run->modules[i];

		if (e->ncandidates)
			continue;
		fprintf(stderr, "dwleak: note: %s", e->path);
		if (e->build_id)
			fprintf(stderr, " (build id %s)", e->build_id);
		fputs(" not found here or under any --debug-dir; its frames are kept as they were\n",
		      stderr);
	}
}

/* ---- Command ---- */

/* Reads all of PATH ("-" = stdin) into a malloc'd *BUF of *LEN bytes. */
static int file_read(const char *path, char **buf, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	size_t cap = 0, n;
	char *b = NULL, *g;
	int err = 0;

	*buf = NULL;
	*len = 0;
	if (!f)
		return -errno;
	do {
		if (*len == cap) {
			cap = cap ? cap * 2 : 65536;
			g = realloc(b, cap);
			if (!g) {
				err = -ENOMEM;
				break;
			}
			b = g;
		}
		n = fread(b + *len, 1, cap - *len, f);
		*len += n;
	} while (n);
	if (!err && ferror(f))
		err = -EIO;
	if (f != stdin)
		fclose(f);
	if (err)
		free(b);
	else
		*buf = b;
	return err;
}

static int report_output(struct run *run)
{
	const char *path = run->env->output;
	FILE *f = path ? fopen(path, "w") : stdout;
	int err;

	if (!f) {
		err = -errno;
		fprintf(stderr, "dwleak: cannot write %s: %s\n", path, strerror(-err));
		return err;
	}
	err = report_write(f, REPORT_FORMAT_JSON, &run->r, 0);
	if (path) {
		if (fclose(f) != 0 && !err)
			err = -EIO;
	} else if (fflush(f) != 0 && !err) {
		err = -EIO;
	}
	if (err)
		fprintf(stderr, "dwleak: cannot write %s: %s\n", path ? path : "the report to stdout",
			strerror(-err));
	return err;
}

/* Parses ARGV into ENV; returns -1 to go on, else an exit status. */
static int options_parse(struct symbolize_env *env, int argc, char **argv)
{
	int c;

	optind = 1;
	opterr = 0; /* our own message names the command */
	while ((c = getopt_long(argc, argv, "D:o:h", symbolize_options, NULL)) != -1) {
		switch (c) {
		case 'D':
			if (!optarg[0] || strchr(optarg, ':'))
				return usage_error("--debug-dir '%s': give a directory whose name "
						   "has no ':'", optarg);
			if (debug_dirs_add(&env->debug_dirs, &env->ndebug_dirs, optarg))
				return usage_error("%s", "out of memory");
			break;
		case 'o':
			env->output = optarg;
			break;
		case 'h':
			fputs(symbolize_usage, stdout);
			return 0;
		default:
			return usage_error("unknown option or missing argument '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("%s", "no REPORT.json given");
	if (argc - optind > 1)
		return usage_error("one REPORT.json at a time, not also '%s'", argv[optind + 1]);
	env->input = argv[optind];
	return -1;
}

int cmd_symbolize(int argc, char **argv)
{
	struct symbolize_env env = { 0 };
	struct run run = { .env = &env };
	struct json_error jerr;
	char *text = NULL;
	size_t len;
	int ret, err;

	/* Options and input */
	ret = options_parse(&env, argc, argv);
	if (ret >= 0)
		goto out;
	ret = EXIT_USAGE;
	err = file_read(env.input, &text, &len);
	if (err) {
		fprintf(stderr, "dwleak: cannot read %s: %s\n", env.input, strerror(-err));
		goto out;
	}
	err = json_parse(text, len, &run.doc, &jerr);
	if (err == -EINVAL) {
		fprintf(stderr, "dwleak: %s:%u:%u: invalid JSON: %s\n", env.input, jerr.line,
			jerr.column, jerr.message);
		goto out;
	}
	if (err)
		goto nomem;
	if (run.doc->type != JSON_OBJECT) {
		fprintf(stderr, "dwleak: %s: not a dwleak report (the JSON is %s, not an object)\n",
			env.input, json_type_name(run.doc->type));
		goto out;
	}
	err = report_read(&run);
	if (err == -ENOMEM)
		goto nomem;
	if (err)
		goto out;

	/* Resolve every frame group, then write */
	err = symbolizer_new(env.debug_dirs, &run.sym);
	if (err == -EINVAL) {
		ret = usage_error("%s", "a --debug-dir is empty or contains ':'");
		goto out;
	}
	if (!err)
		err = report_symbolize(&run);
	if (err)
		goto nomem;
	missing_print(&run);
	if (report_output(&run) == 0)
		ret = 0;
	goto out;
nomem:
	fprintf(stderr, "dwleak: out of memory\n");
out:
	run_free(&run);
	free(text);
	free(env.debug_dirs);
	return ret;
}
