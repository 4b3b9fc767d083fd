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
#include "json_fields.h"
#include "json_read.h"

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
	field_unknown_note(rj, obj, "stacks[].frames[].", known);
	memset(f, 0, sizeof(*f));
	if ((err = field_hex(rj, obj, "address", w, &f->address)) ||
	    (err = field_str(rj, obj, "module", w, &f->module)) ||
	    (err = field_str(rj, obj, "build_id", w, &f->build_id)) ||
	    (err = field_hex(rj, obj, "elf_address", w, &f->elf_address)) ||
	    (err = field_str(rj, obj, "function", w, &f->function)) ||
	    (err = field_u64(rj, obj, "offset", w, &f->offset)) ||
	    (err = field_str(rj, obj, "file", w, &f->file)) ||
	    (err = field_int(rj, obj, "line", w, 1, INT32_MAX, 0, &line)) ||
	    (err = field_bool(rj, obj, "inlined", w, &f->inlined)))
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
	err = field_array(rj, obj, key, &w, &arr);
	if (err || !arr || !arr->array.n)
		return err;
	frames = store_calloc(rj->store, arr->array.n, sizeof(*frames));
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

/* Where each kind's counts sit, for messages: "stacks[3].leak_kinds.reachable". */
static const char *const stack_kind_paths[REPORT_LEAK_KIND_COUNT] = {
#define STACK_KIND_PATH(id, name, phrase) [REPORT_LEAK_##id] = "leak_kinds." #name,
	REPORT_LEAK_KINDS(STACK_KIND_PATH)
#undef STACK_KIND_PATH
};
static const char *const totals_kind_paths[REPORT_LEAK_KIND_COUNT] = {
#define TOTALS_KIND_PATH(id, name, phrase) [REPORT_LEAK_##id] = "totals.leak_check." #name,
	REPORT_LEAK_KINDS(TOTALS_KIND_PATH)
#undef TOTALS_KIND_PATH
};

/*
 * Reads the four kinds of leak-kinds object OBJ (NULL: nothing to read)
 * into KINDS; W places OBJ (its stack), PATHS name each kind's object for
 * messages, PREFIX the object for unknown fields.  A kind left out is 0.
 */
static int leak_kinds_read(struct report_json *rj, const struct json_value *obj,
			   const struct where *w, const char *const *paths, const char *prefix,
			   struct report_leak_count *kinds)
{
	static const char *const known[] = {
#define KIND_KNOWN(id, name, phrase) #name,
		REPORT_LEAK_KINDS(KIND_KNOWN)
#undef KIND_KNOWN
		"scanned_bytes", "pause_ms", "scan_ms", "snapshot", "kinds_exact", "unclassified", "unsure", NULL
	};
	static const char *const count_known[] = { "bytes", "allocations", NULL };
	char *count_prefix;
	int err = 0;

	if (!obj)
		return 0;
	field_unknown_note(rj, obj, prefix, known);
	for (int k = 0; k < REPORT_LEAK_KIND_COUNT && !err; k++) {
		const struct where kw = { w->stack, paths[k], -1 };
		const struct json_value *c;

		if ((err = field_object(rj, obj, report_leak_kind_names[k], w, &c)) || !c)
			continue;
		if (asprintf(&count_prefix, "%s%s.", prefix, report_leak_kind_names[k]) < 0)
			return -ENOMEM;
		field_unknown_note(rj, c, count_prefix, count_known);
		free(count_prefix);
		if (!(err = field_u64(rj, c, "bytes", &kw, &kinds[k].bytes)))
			err = field_u64(rj, c, "allocations", &kw, &kinds[k].allocations);
	}
	return err;
}

/* The stack's "residency" object, when it has one. */
static int residency_read(struct report_json *rj, const struct json_value *obj,
			  const struct where *w, struct report_stack *s)
{
	static const char *const known[] = { "resident_bytes", "swapped_bytes", "untouched_bytes",
					     NULL };
	const struct where rw = { w->stack, "residency", -1 };
	int err = field_object(rj, obj, "residency", w, &obj);

	if (err || !obj)
		return err;
	field_unknown_note(rj, obj, "stacks[].residency.", known);
	s->has_residency = true;
	if ((err = field_u64(rj, obj, "resident_bytes", &rw, &s->residency.resident)) ||
	    (err = field_u64(rj, obj, "swapped_bytes", &rw, &s->residency.swapped)))
		return err;
	return field_u64(rj, obj, "untouched_bytes", &rw, &s->residency.untouched);
}

/* OBJ's {"bytes": N, "allocations": N} named NAME (absent: left as is);
 * PREFIX names its fields in notes. */
static int count_read(struct report_json *rj, const struct json_value *obj, const char *name,
		      const struct where *w, const char *prefix, struct report_leak_count *out)
{
	static const char *const count_known[] = { "bytes", "allocations", NULL };
	const struct json_value *c;
	int err = field_object(rj, obj, name, w, &c);

	if (err || !c)
		return err;
	field_unknown_note(rj, c, prefix, count_known);
	if ((err = field_u64(rj, c, "bytes", w, &out->bytes)))
		return err;
	return field_u64(rj, c, "allocations", w, &out->allocations);
}

static int stack_read(struct report_json *rj, const struct json_value *obj, long index,
		      struct report_stack *s)
{
	static const char *const known[] = { "bytes", "allocations", "allocator", "frames",
					     "fp_frames", "fp_divergence", "truncated",
					     "unwind_error", "oldest_age_s", "growth_bytes_per_s",
					     "pid", "command", "leak_kinds", "leak_unsure", "residency",
					     "bytes_stderr", "leak_kinds_stderr", NULL };
	struct where w = { index, NULL, -1 };
	const struct json_value *kinds, *kinds_err;
	int64_t divergence, pid;
	int err;

	if (obj->type != JSON_OBJECT)
		return field_error(rj, obj, &w, "", "a stack object");
	field_unknown_note(rj, obj, "stacks[].", known);
	memset(s, 0, sizeof(*s));
	if ((err = field_u64(rj, obj, "bytes", &w, &s->bytes)) ||
	    (err = field_u64(rj, obj, "allocations", &w, &s->allocations)) ||
	    (err = field_str(rj, obj, "allocator", &w, &s->allocator)) ||
	    (err = frames_read(rj, obj, index, "frames", &s->frames, &s->nframes)) ||
	    (err = frames_read(rj, obj, index, "fp_frames", &s->fp_frames, &s->nfp_frames)) ||
	    (err = field_int(rj, obj, "fp_divergence", &w, 0, LONG_MAX, -1, &divergence)) ||
	    (err = field_bool(rj, obj, "truncated", &w, &s->truncated)) ||
	    (err = field_str(rj, obj, "unwind_error", &w, &s->unwind_error)) ||
	    (err = field_real(rj, obj, "oldest_age_s", &w, &s->oldest_age_s)) ||
	    (err = field_real(rj, obj, "growth_bytes_per_s", &w, &s->growth_bytes_per_s)) ||
	    (err = field_int(rj, obj, "pid", &w, 0, INT32_MAX, 0, &pid)) ||
	    (err = field_str(rj, obj, "command", &w, &s->command)) ||
	    (err = field_object(rj, obj, "leak_kinds", &w, &kinds)) ||
	    (err = leak_kinds_read(rj, kinds, &w, stack_kind_paths, "stacks[].leak_kinds.",
				   s->leak_kinds)) ||
	    (err = count_read(rj, obj, "leak_unsure", &w, "stacks[].leak_unsure.", &s->leak_unsure)) ||
	    (err = residency_read(rj, obj, &w, s)) ||
	    (err = field_real(rj, obj, "bytes_stderr", &w, &s->bytes_stderr)) ||
	    (err = field_object(rj, obj, "leak_kinds_stderr", &w, &kinds_err)))
		return err;
	for (int k = 0; k < REPORT_LEAK_KIND_COUNT; k++) {
		s->leak_kinds_stderr[k] = NAN;
		if (kinds_err && (err = field_real(rj, kinds_err, report_leak_kind_names[k], &w, &s->leak_kinds_stderr[k])))
			return err;
	}
	s->fp_divergence = (long)divergence;
	s->pid = (int)pid;
	s->has_leak_kinds = kinds != NULL;
	return 0;
}

static int counters_read(struct report_json *rj, const struct json_value *obj)
{
	const struct where w = TOP_LEVEL;
	const char **names;
	uint64_t *values;
	size_t i, n;
	int err;

	err = field_object(rj, obj, "counters", &w, &obj);
	if (err || !obj || !obj->object.n)
		return err;
	n = obj->object.n;
	names = store_calloc(rj->store, n, sizeof(*names));
	values = store_calloc(rj->store, n, sizeof(*values));
	if (!names || !values)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const struct json_member *m = &obj->object.members[i];

		names[i] = m->key;
		if (json_to_u64(m->value, &values[i]) != 0) {
			return report_json_error_set(rj, m->value->line, m->value->column,
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

	err = field_object(rj, obj, "fp_summary", &w, &obj);
	if (err || !obj)
		return err;
	field_unknown_note(rj, obj, "fp_summary.", known);
	fp->present = true;
	/* agree_share is agreeing / stacks, recomputed by the writer */
	if ((err = field_u64(rj, obj, "stacks", &sw, &fp->stacks)) ||
	    (err = field_u64(rj, obj, "agreeing", &sw, &fp->agreeing)) ||
	    (err = field_u64(rj, obj, "frames_lost", &sw, &fp->frames_lost)) ||
	    (err = field_array(rj, obj, "modules", &sw, &mods)))
		return err;
	rj->report.fp = fp;
	if (!mods || !mods->array.n)
		return 0;
	fp->modules = store_calloc(rj->store, mods->array.n, sizeof(*fp->modules));
	if (!fp->modules)
		return -ENOMEM;
	fp->nmodules = mods->array.n;
	for (i = 0; i < mods->array.n; i++) {
		const struct json_value *m = mods->array.items[i];
		struct report_fp_module *fm = &fp->modules[i];
		const struct where mw = { -1, "fp_summary.modules", (long)i };

		if (m->type != JSON_OBJECT)
			return field_error(rj, m, &mw, "", "an object");
		field_unknown_note(rj, m, "fp_summary.modules[].", module_known);
		if ((err = field_str(rj, m, "module", &mw, &fm->module)) ||
		    (err = field_u64(rj, m, "stacks", &mw, &fm->stacks)) ||
		    (err = field_u64(rj, m, "bytes", &mw, &fm->bytes)) ||
		    (err = field_u64(rj, m, "frames_lost", &mw, &fm->frames_lost)))
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

	err = field_array(rj, obj, "suppressed", &w, &arr);
	if (err || !arr || !arr->array.n)
		return err;
	sup = store_calloc(rj->store, arr->array.n, sizeof(*sup));
	if (!sup)
		return -ENOMEM;
	for (i = 0; i < arr->array.n; i++) {
		const struct json_value *x = arr->array.items[i];
		const struct where xw = { -1, "suppressed", (long)i };

		if (x->type != JSON_OBJECT)
			return field_error(rj, x, &xw, "", "an object");
		field_unknown_note(rj, x, "suppressed[].", known);
		if ((err = field_str(rj, x, "rule", &xw, &sup[i].rule)) ||
		    (err = field_str(rj, x, "description", &xw, &sup[i].description)) ||
		    (err = field_u64(rj, x, "stacks", &xw, &sup[i].stacks)) ||
		    (err = field_u64(rj, x, "bytes", &xw, &sup[i].bytes)) ||
		    (err = field_u64(rj, x, "allocations", &xw, &sup[i].allocations)))
			return err;
	}
	rj->report.suppressed = sup;
	rj->report.nsuppressed = arr->array.n;
	return 0;
}

/* "losses": each cause of a loss, or limit hit, when there was one. */
static int losses_read(struct report_json *rj, const struct json_value *obj)
{
	static const char *const known[] = { "what", "pid", "count", "bytes", "text", NULL };
	const struct where w = TOP_LEVEL;
	const struct json_value *arr;
	struct report_loss *loss;
	int64_t pid;
	size_t i;
	int err;

	err = field_array(rj, obj, "losses", &w, &arr);
	if (err || !arr || !arr->array.n)
		return err;
	loss = store_calloc(rj->store, arr->array.n, sizeof(*loss));
	if (!loss)
		return -ENOMEM;
	for (i = 0; i < arr->array.n; i++) {
		const struct json_value *x = arr->array.items[i];
		const struct where xw = { -1, "losses", (long)i };

		if (x->type != JSON_OBJECT)
			return field_error(rj, x, &xw, "", "an object");
		field_unknown_note(rj, x, "losses[].", known);
		if ((err = field_str(rj, x, "what", &xw, &loss[i].what)) ||
		    (err = field_int(rj, x, "pid", &xw, 0, INT32_MAX, 0, &pid)) ||
		    (err = field_u64(rj, x, "count", &xw, &loss[i].count)) ||
		    (err = field_u64(rj, x, "bytes", &xw, &loss[i].bytes)) ||
		    (err = field_str(rj, x, "text", &xw, &loss[i].text)))
			return err;
		loss[i].pid = (int)pid;
	}
	rj->report.losses = loss;
	rj->report.nlosses = arr->array.n;
	return 0;
}

/* totals.leak_check, when the report has one. */
static int leak_check_read(struct report_json *rj, const struct json_value *totals)
{
	const struct where tw = { -1, "totals", -1 }, lw = { -1, "totals.leak_check", -1 };
	struct report_leak_check *lc = &rj->report.leak_check;
	const struct json_value *obj;
	int err = field_object(rj, totals, "leak_check", &tw, &obj);

	if (err || !obj)
		return err;
	lc->present = true;
	if ((err = leak_kinds_read(rj, obj, &lw, totals_kind_paths, "totals.leak_check.",
				   lc->kinds)) ||
	    (err = field_u64(rj, obj, "scanned_bytes", &lw, &lc->scanned_bytes)) ||
	    (err = count_read(rj, obj, "unclassified", &lw, "totals.leak_check.unclassified.", &lc->unclassified)) ||
	    (err = count_read(rj, obj, "unsure", &lw, "totals.leak_check.unsure.", &lc->unsure)))
		return err;
	/* exact totals (a sampled check of every block) are kept as read,
	 * not summed again from the stacks' estimates */
	lc->exact_unsure = lc->unsure;
	return field_real(rj, obj, "pause_ms", &lw, &lc->pause_ms) ?:
	       field_real(rj, obj, "scan_ms", &lw, &lc->scan_ms) ?:
	       field_bool(rj, obj, "snapshot", &lw, &lc->snapshot) ?:
	       field_bool(rj, obj, "kinds_exact", &lw, &lc->kinds_exact);
}

/* "rss", RSS explained: each part's bytes ("share" and "unaccounted" are
 * recomputed by the writer). */
static int rss_read(struct report_json *rj, const struct json_value *doc)
{
	static const char *const known[] = {
		"rss_bytes",
#define RSS_KNOWN(id, name, text) #name,
		REPORT_RSS_PARTS(RSS_KNOWN)
#undef RSS_KNOWN
		"unaccounted", NULL
	};
	static const char *const paths[REPORT_RSS_PART_COUNT] = {
#define RSS_PATH(id, name, text) [REPORT_RSS_##id] = "rss." #name,
		REPORT_RSS_PARTS(RSS_PATH)
#undef RSS_PATH
	};
	const struct where w = TOP_LEVEL, rw = { -1, "rss", -1 };
	struct report_rss *rss = &rj->report.rss;
	const struct json_value *obj, *part;
	int err = field_object(rj, doc, "rss", &w, &obj);

	if (err || !obj)
		return err;
	field_unknown_note(rj, obj, "rss.", known);
	rss->present = true;
	err = field_u64(rj, obj, "rss_bytes", &rw, &rss->rss_bytes);
	for (int i = 0; i < REPORT_RSS_PART_COUNT && !err; i++) {
		const struct where pw = { -1, paths[i], -1 };

		err = field_object(rj, obj, report_rss_part_names[i], &rw, &part);
		if (!err && part)
			err = field_u64(rj, part, "bytes", &pw, &rss->parts[i]);
	}
	return err;
}

/* A process's "state" as enum report_process_state. */
static int process_state_read(struct report_json *rj, const struct json_value *obj,
			      const struct where *w, enum report_process_state *out)
{
	const char *name;
	int err = field_str(rj, obj, "state", w, &name);

	*out = REPORT_PROCESS_RUNNING;
	if (err || !name)
		return err;
	for (int i = 0; i < REPORT_PROCESS_STATE_COUNT; i++) {
		if (strcmp(name, report_process_state_names[i]) == 0) {
			*out = (enum report_process_state)i;
			return 0;
		}
	}
	return field_error(rj, json_get(obj, "state"), w, "state",
			   "\"running\", \"ended\" or \"not_followed\"");
}

/* One entry of "processes"; an exit code or a signal makes the wait status
 * waitpid() gave (a core dump is not in the JSON). */
static int process_read(struct report_json *rj, const struct json_value *obj, long index,
			struct report_process *p)
{
	static const char *const known[] = { "pid", "ppid", "command", "state", "exit_code",
					     "signal", "reason", "unchecked", "traced", "outstanding_bytes",
					     "outstanding_allocations", NULL };
	const struct where w = { -1, "processes", index };
	int64_t pid, ppid, code, sig;
	bool traced = true;
	int err;

	if (obj->type != JSON_OBJECT)
		return field_error(rj, obj, &w, "", "a process object");
	field_unknown_note(rj, obj, "processes[].", known);
	if ((err = field_int(rj, obj, "pid", &w, 0, INT32_MAX, 0, &pid)) ||
	    (err = field_int(rj, obj, "ppid", &w, 0, INT32_MAX, 0, &ppid)) ||
	    (err = field_str(rj, obj, "command", &w, &p->command)) ||
	    (err = process_state_read(rj, obj, &w, &p->state)) ||
	    (err = field_int(rj, obj, "exit_code", &w, 0, 255, -1, &code)) ||
	    (err = field_int(rj, obj, "signal", &w, 1, 127, 0, &sig)) ||
	    (err = field_str(rj, obj, "reason", &w, &p->reason)) ||
	    (err = field_str(rj, obj, "unchecked", &w, &p->unchecked)) ||
	    (json_get(obj, "traced") && (err = field_bool(rj, obj, "traced", &w, &traced))) ||
	    (err = field_u64(rj, obj, "outstanding_bytes", &w, &p->bytes)) ||
	    (err = field_u64(rj, obj, "outstanding_allocations", &w, &p->allocations)))
		return err;
	p->pid = (int)pid;
	p->ppid = (int)ppid;
	/* "traced" is false exactly when a reason is given (a report written
	 * before it existed has none): one without a reason keeps it false */
	if (!traced && !p->reason && p->state != REPORT_PROCESS_NOT_FOLLOWED)
		p->reason = "not traced (no reason given)";
	/* as <sys/wait.h> decodes them: exit code in bits 8-15, signal in 0-6 */
	p->wait_status = code >= 0 ? (int)code << 8 : sig ? (int)sig : 0x7f;
	return 0;
}

static int processes_read(struct report_json *rj, const struct json_value *doc)
{
	const struct where w = TOP_LEVEL;
	const struct json_value *arr;
	size_t i;
	int err = field_array(rj, doc, "processes", &w, &arr);

	if (err || !arr || !arr->array.n)
		return err;
	rj->report.processes = store_calloc(rj->store, arr->array.n, sizeof(*rj->report.processes));
	if (!rj->report.processes)
		return -ENOMEM;
	rj->report.nprocesses = arr->array.n;
	for (i = 0; i < arr->array.n && !err; i++)
		err = process_read(rj, arr->array.items[i], (long)i, &rj->report.processes[i]);
	return err;
}

/* Fills RJ->report from document DOC, an object. */
static int report_read(struct report_json *rj, const struct json_value *doc)
{
	static const char *const known[] = { "dwleak_report", "pid", "command", "unwind",
					     "duration_s", "sample_bytes", "totals", "counters",
					     "fp_summary", "suppressed", "losses", "rss", "processes",
					     "stacks", NULL };
	static const char *const totals_known[] = { "outstanding_bytes", "outstanding_allocations",
						    "stacks", "dropped_events", "truncated_stacks",
						    "unwind_errors", "untraced_processes", "leak_check", NULL };
	const struct json_value *totals, *stacks, *version;
	const struct where w = TOP_LEVEL, tw = { -1, "totals", -1 };
	struct report *r = &rj->report;
	struct report_totals *t = &r->totals;
	int64_t pid;
	size_t i;
	int err;

	version = json_get(doc, "dwleak_report");
	if (!version || version->type != JSON_INT || version->i != REPORT_JSON_VERSION)
		return report_json_error_set(rj, 0, 0, "not a dwleak report (%s)",
				 !version ? "no \"dwleak_report\": 1 in a top-level object"
					  : "\"dwleak_report\" is not 1: a format this dwleak does not read");
	field_unknown_note(rj, doc, "", known);
	if ((err = field_int(rj, doc, "pid", &w, INT32_MIN, INT32_MAX, 0, &pid)) ||
	    (err = field_str(rj, doc, "command", &w, &r->command)) ||
	    (err = field_str(rj, doc, "unwind", &w, &r->unwind)) ||
	    (err = field_real(rj, doc, "duration_s", &w, &r->duration_s)) ||
	    (err = field_u64(rj, doc, "sample_bytes", &w, &r->sample_bytes)) ||
	    (err = field_object(rj, doc, "totals", &w, &totals)) ||
	    (err = counters_read(rj, doc)) ||
	    (err = fp_summary_read(rj, doc)) ||
	    (err = suppressed_read(rj, doc)) ||
	    (err = losses_read(rj, doc)) ||
	    (err = rss_read(rj, doc)) ||
	    (err = processes_read(rj, doc)) ||
	    (err = field_array(rj, doc, "stacks", &w, &stacks)))
		return err;
	r->pid = (int)pid;
	if (!stacks)
		return report_json_error_set(rj, 0, 0, "not a dwleak report (no \"stacks\" array)");
	if (stacks->array.n) {
		r->stacks = store_calloc(rj->store, stacks->array.n, sizeof(*r->stacks));
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
	field_unknown_note(rj, totals, "totals.", totals_known);
	if ((err = field_u64(rj, totals, "outstanding_bytes", &tw, &t->outstanding_bytes)) ||
	    (err = field_u64(rj, totals, "outstanding_allocations", &tw, &t->outstanding_allocations)) ||
	    (err = field_u64(rj, totals, "stacks", &tw, &t->stacks)) ||
	    (err = field_u64(rj, totals, "dropped_events", &tw, &t->dropped_events)) ||
	    (err = field_u64(rj, totals, "truncated_stacks", &tw, &t->truncated_stacks)) ||
	    (err = field_u64(rj, totals, "unwind_errors", &tw, &t->unwind_errors)))
		return err;
	return leak_check_read(rj, totals);
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
		return report_json_error_set(out, jerr.line, jerr.column, "invalid JSON: %s", jerr.message);
	if (err)
		return err;
	if (out->store->doc->type != JSON_OBJECT)
		return report_json_error_set(out, 0, 0, "not a dwleak report (the JSON is %s, not an object)",
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
