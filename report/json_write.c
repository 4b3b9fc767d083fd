/* The JSON report: the one object of SPEC.md, for scripts and for
 * `dwleak symbolize`, which reads it back (json_read.c).  What a report
 * does not have (a leak check, residency, the process tree, the RSS
 * account) is left out, so such a report reads as it always did. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "report.h"
#include "report_internal.h"

/* S as a JSON string, or null.  Bytes that are not valid UTF-8 become U+FFFD,
 * one per byte. */
static void json_str(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	while (*s) {
		unsigned char c = *s;
		size_t len;

		switch (c) {
		case '"':  fputs("\\\"", f); s++; continue;
		case '\\': fputs("\\\\", f); s++; continue;
		case '\b': fputs("\\b", f); s++; continue;
		case '\f': fputs("\\f", f); s++; continue;
		case '\n': fputs("\\n", f); s++; continue;
		case '\r': fputs("\\r", f); s++; continue;
		case '\t': fputs("\\t", f); s++; continue;
		}
		if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			s++;
		} else if ((len = report_utf8_len(s))) {
			fwrite(s, 1, len, f);
			s += len;
		} else {
			fputs("\\ufffd", f);
			s++;
		}
	}
	fputc('"', f);
}

/* A double with DECIMALS places, or null when it is NaN or infinite. */
static void json_real(FILE *f, double v, int decimals)
{
	if (isfinite(v))
		fprintf(f, "%.*f", decimals, v);
	else
		fputs("null", f);
}

static void json_frames(FILE *f, const char *key, const struct report_frame *frames, size_t n)
{
	size_t i;

	fprintf(f, "      \"%s\": [", key);
	for (i = 0; i < n; i++) {
		const struct report_frame *fr = &frames[i];

		fputs(i ? ",\n" : "\n", f);
		fprintf(f, "        {\n          \"address\": \"0x%" PRIx64 "\",\n", fr->address);
		fputs("          \"module\": ", f);
		json_str(f, fr->module);
		fputs(",\n          \"build_id\": ", f);
		json_str(f, fr->build_id);
		fprintf(f, ",\n          \"elf_address\": \"0x%" PRIx64 "\",\n", fr->elf_address);
		fputs("          \"function\": ", f);
		json_str(f, fr->function);
		fprintf(f, ",\n          \"offset\": %" PRIu64 ",\n", fr->offset);
		fputs("          \"file\": ", f);
		json_str(f, fr->file);
		if (fr->line > 0)
			fprintf(f, ",\n          \"line\": %d,\n", fr->line);
		else
			fputs(",\n          \"line\": null,\n", f);
		fprintf(f, "          \"inlined\": %s\n        }", fr->inlined ? "true" : "false");
	}
	fputs(n ? "\n      ]" : "]", f);
}

/* "NAME": {"bytes": N, "allocations": N}, one line. */
static void json_leak_count(FILE *f, const char *name, const struct report_leak_count *c)
{
	fprintf(f, "\"%s\": {\"bytes\": %" PRIu64 ", \"allocations\": %" PRIu64 "}", name,
		c->bytes, c->allocations);
}

/* The four kinds of KINDS, one a line at INDENT, each line ended by ",\n"
 * but the last when LAST_ENDS is false. */
static void json_leak_kinds(FILE *f, const char *indent, const struct report_leak_count *kinds,
			    bool last_ends)
{
	for (int k = 0; k < REPORT_LEAK_KIND_COUNT; k++) {
		fputs(indent, f);
		json_leak_count(f, report_leak_kind_names[k], &kinds[k]);
		fputs(k + 1 < REPORT_LEAK_KIND_COUNT || last_ends ? ",\n" : "\n", f);
	}
}

static void json_stack(FILE *f, const struct report *r, const struct report_stack *s)
{
	fprintf(f, "    {\n      \"bytes\": %" PRIu64 ",\n      \"allocations\": %" PRIu64 ",\n",
		s->bytes, s->allocations);
	/* sampled: the estimates' standard errors */
	if (r->sample_bytes) {
		fputs("      \"bytes_stderr\": ", f);
		json_real(f, s->bytes_stderr, 1);
		fputs(",\n", f);
	}
	fputs("      \"allocator\": ", f);
	json_str(f, s->allocator);
	fputs(",\n", f);
	json_frames(f, "frames", s->frames, s->nframes);
	fputs(",\n", f);
	if (r->unwind && !strcmp(r->unwind, "both")) {
		json_frames(f, "fp_frames", s->fp_frames, s->nfp_frames);
		fputs(",\n      \"fp_divergence\": ", f);
		if (s->fp_divergence >= 0)
			fprintf(f, "%ld", s->fp_divergence);
		else
			fputs("null", f);
		fputs(",\n", f);
	}
	fprintf(f, "      \"truncated\": %s,\n", s->truncated ? "true" : "false");
	fputs("      \"unwind_error\": ", f);
	json_str(f, s->unwind_error);
	fputs(",\n      \"oldest_age_s\": ", f);
	json_real(f, s->oldest_age_s, 3);
	fputs(",\n      \"growth_bytes_per_s\": ", f);
	json_real(f, s->growth_bytes_per_s, 1);
	fprintf(f, ",\n      \"pid\": %d,\n      \"command\": ", report_stack_pid(r, s));
	json_str(f, report_stack_command(r, s));
	if (s->has_leak_kinds) {
		fputs(",\n      \"leak_kinds\": {\n", f);
		json_leak_kinds(f, "        ", s->leak_kinds, false);
		fputs("      }", f);
		if (r->sample_bytes) {
			fputs(",\n      \"leak_kinds_stderr\": {", f);
			for (int k = 0; k < REPORT_LEAK_KIND_COUNT; k++) {
				fprintf(f, "%s\"%s\": ", k ? ", " : "", report_leak_kind_names[k]);
				json_real(f, s->leak_kinds_stderr[k], 1);
			}
			fputs("}", f);
		}
		if (s->leak_unsure.bytes || s->leak_unsure.allocations)
			fprintf(f, ",\n      \"leak_unsure\": {\"bytes\": %" PRIu64 ", \"allocations\": %" PRIu64 "}",
				s->leak_unsure.bytes, s->leak_unsure.allocations);
	}
	if (s->has_residency)
		fprintf(f, ",\n      \"residency\": {\"resident_bytes\": %" PRIu64
			", \"swapped_bytes\": %" PRIu64 ", \"untouched_bytes\": %" PRIu64 "}",
			s->residency.resident, s->residency.swapped, s->residency.untouched);
	fputs("\n    }", f);
}

/* "PART": {"bytes": N, "share": 0.1234}, the share of the RSS. */
static void json_rss_part(FILE *f, const char *name, uint64_t bytes, uint64_t rss, bool last)
{
	fprintf(f, "    \"%s\": {\"bytes\": %" PRIu64 ", \"share\": ", name, bytes);
	json_real(f, rss ? (double)bytes / (double)rss : 0.0, 4);
	fputs(last ? "}\n" : "},\n", f);
}

/* "rss": RSS explained; "unaccounted" is what the parts leave of the RSS. */
static void json_rss(FILE *f, const struct report_rss *rss)
{
	uint64_t sum = 0;
	int i;

	fprintf(f, "  \"rss\": {\n    \"rss_bytes\": %" PRIu64 ",\n", rss->rss_bytes);
	for (i = 0; i < REPORT_RSS_PART_COUNT; i++) {
		json_rss_part(f, report_rss_part_names[i], rss->parts[i], rss->rss_bytes, false);
		sum += rss->parts[i];
	}
	json_rss_part(f, "unaccounted", sum < rss->rss_bytes ? rss->rss_bytes - sum : 0,
		      rss->rss_bytes, true);
	fputs("  },\n", f);
}

/* "processes": the traced tree, one object a line. */
static void json_processes(FILE *f, const struct report *r)
{
	size_t i;

	fputs("  \"processes\": [", f);
	for (i = 0; i < r->nprocesses; i++) {
		const struct report_process *p = &r->processes[i];
		bool ended = p->state == REPORT_PROCESS_ENDED;
		unsigned int state = (unsigned int)p->state;

		fprintf(f, "%s    {\"pid\": %d, \"ppid\": %d, \"command\": ", i ? ",\n" : "\n",
			p->pid, p->ppid);
		json_str(f, p->command);
		fputs(", \"state\": ", f);
		json_str(f, state < REPORT_PROCESS_STATE_COUNT ? report_process_state_names[state] : NULL);
		if (ended && WIFEXITED(p->wait_status))
			fprintf(f, ", \"exit_code\": %d", WEXITSTATUS(p->wait_status));
		else
			fputs(", \"exit_code\": null", f);
		if (ended && WIFSIGNALED(p->wait_status))
			fprintf(f, ", \"signal\": %d", WTERMSIG(p->wait_status));
		else
			fputs(", \"signal\": null", f);
		fputs(", \"reason\": ", f);
		json_str(f, p->reason);
		fprintf(f, ", \"traced\": %s", report_process_traced(p) ? "true" : "false");
		if (r->leak_check.present) {
			fputs(", \"unchecked\": ", f);
			json_str(f, p->unchecked);
		}
		fprintf(f, ", \"outstanding_bytes\": %" PRIu64 ", \"outstanding_allocations\": %" PRIu64
			"}", p->bytes, p->allocations);
	}
	fputs("\n  ],\n", f);
}

static void json_fp_summary(FILE *f, const struct report_fp_summary *sum)
{
	size_t i;

	fprintf(f, "  \"fp_summary\": {\n    \"stacks\": %" PRIu64 ",\n    \"agreeing\": %" PRIu64
		",\n    \"agree_share\": ", sum->stacks, sum->agreeing);
	json_real(f, sum->stacks ? (double)sum->agreeing / (double)sum->stacks : 1.0, 4);
	fprintf(f, ",\n    \"frames_lost\": %" PRIu64 ",\n    \"modules\": [", sum->frames_lost);
	for (i = 0; i < sum->nmodules; i++) {
		fputs(i ? ",\n      {\"module\": " : "\n      {\"module\": ", f);
		json_str(f, sum->modules[i].module);
		fprintf(f, ", \"stacks\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"frames_lost\": %" PRIu64 "}",
			sum->modules[i].stacks, sum->modules[i].bytes, sum->modules[i].frames_lost);
	}
	fputs(sum->nmodules ? "\n    ]\n  },\n" : "]\n  },\n", f);
}

int report_write_json(FILE *f, const struct report *r, unsigned int top)
{
	const struct report_totals *t = &r->totals;
	const struct report_stack **order;
	size_t i, n;
	int err;

	err = report_stacks_top(r, top, &order, &n);
	if (err)
		return err;

	fprintf(f, "{\n  \"dwleak_report\": %d,\n  \"pid\": %d,\n  \"command\": ",
		REPORT_JSON_VERSION, r->pid);
	json_str(f, r->command);
	fputs(",\n  \"unwind\": ", f);
	json_str(f, r->unwind);
	fputs(",\n  \"duration_s\": ", f);
	json_real(f, r->duration_s, 2);
	if (r->sample_bytes)
		fprintf(f, ",\n  \"sample_bytes\": %" PRIu64, r->sample_bytes);
	fprintf(f, ",\n  \"totals\": {\n"
		"    \"outstanding_bytes\": %" PRIu64 ",\n"
		"    \"outstanding_allocations\": %" PRIu64 ",\n"
		"    \"stacks\": %" PRIu64 ",\n"
		"    \"dropped_events\": %" PRIu64 ",\n"
		"    \"truncated_stacks\": %" PRIu64 ",\n"
		"    \"unwind_errors\": %" PRIu64 ",\n"
		"    \"untraced_processes\": %zu",
		t->outstanding_bytes, t->outstanding_allocations, t->stacks,
		t->dropped_events, t->truncated_stacks, t->unwind_errors, report_untraced_count(r));
	if (r->leak_check.present) {
		fputs(",\n    \"leak_check\": {\n", f);
		json_leak_kinds(f, "      ", r->leak_check.kinds, true);
		fprintf(f, "      \"unclassified\": {\"bytes\": %" PRIu64 ", \"allocations\": %" PRIu64 "},\n",
			r->leak_check.unclassified.bytes, r->leak_check.unclassified.allocations);
		fprintf(f, "      \"unsure\": {\"bytes\": %" PRIu64 ", \"allocations\": %" PRIu64 "},\n",
			r->leak_check.unsure.bytes, r->leak_check.unsure.allocations);
		fprintf(f, "      \"scanned_bytes\": %" PRIu64 ",\n      \"pause_ms\": ",
			r->leak_check.scanned_bytes);
		json_real(f, r->leak_check.pause_ms, 3);
		fputs(",\n      \"scan_ms\": ", f);
		json_real(f, r->leak_check.scan_ms, 3);
		fprintf(f, ",\n      \"snapshot\": %s", r->leak_check.snapshot ? "true" : "false");
		fprintf(f, ",\n      \"kinds_exact\": %s\n    }", r->leak_check.kinds_exact ? "true" : "false");
	}
	fputs("\n  },\n", f);

	fputs("  \"counters\": {", f);
	for (i = 0; i < r->ncounters; i++) {
		if (!r->counter_names[i])
			continue;
		fputs(i ? ",\n    " : "\n    ", f);
		json_str(f, r->counter_names[i]);
		fprintf(f, ": %" PRIu64, r->counter_values[i]);
	}
	fputs(r->ncounters ? "\n  },\n" : "},\n", f);
	if (r->fp && r->fp->present)
		json_fp_summary(f, r->fp);
	if (r->nsuppressed) {
		fputs("  \"suppressed\": [", f);
		for (i = 0; i < r->nsuppressed; i++) {
			fputs(i ? ",\n    {\"rule\": " : "\n    {\"rule\": ", f);
			json_str(f, r->suppressed[i].rule);
			fputs(", \"description\": ", f);
			json_str(f, r->suppressed[i].description);
			fprintf(f, ", \"stacks\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"allocations\": %" PRIu64 "}",
				r->suppressed[i].stacks, r->suppressed[i].bytes, r->suppressed[i].allocations);
		}
		fputs("\n  ],\n", f);
	}
	if (r->nlosses) {
		fputs("  \"losses\": [", f);
		for (i = 0; i < r->nlosses; i++) {
			const struct report_loss *x = &r->losses[i];

			fputs(i ? ",\n    {\"what\": " : "\n    {\"what\": ", f);
			json_str(f, x->what);
			fprintf(f, ", \"pid\": %d, \"count\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"text\": ", x->pid,
				x->count, x->bytes);
			json_str(f, x->text);
			fputc('}', f);
		}
		fputs("\n  ],\n", f);
	}
	if (r->rss.present)
		json_rss(f, &r->rss);
	if (r->nprocesses)
		json_processes(f, r);

	fputs("  \"stacks\": [", f);
	for (i = 0; i < n; i++) {
		fputs(i ? ",\n" : "\n", f);
		json_stack(f, r, order[i]);
	}
	fputs(n ? "\n  ]\n}\n" : "]\n}\n", f);

	free(order);
	return report_stream_status(f);
}
