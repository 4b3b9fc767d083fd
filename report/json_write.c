/* The JSON report: the one object of SPEC.md, for scripts and for
 * `dwleak symbolize`, which reads it back (json_read.c). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static void json_stack(FILE *f, const struct report *r, const struct report_stack *s)
{
	fprintf(f, "    {\n      \"bytes\": %" PRIu64 ",\n      \"allocations\": %" PRIu64 ",\n",
		s->bytes, s->allocations);
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
	fputs("\n    }", f);
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
		"    \"unwind_errors\": %" PRIu64 "\n  },\n",
		t->outstanding_bytes, t->outstanding_allocations, t->stacks,
		t->dropped_events, t->truncated_stacks, t->unwind_errors);

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

	fputs("  \"stacks\": [", f);
	for (i = 0; i < n; i++) {
		fputs(i ? ",\n" : "\n", f);
		json_stack(f, r, order[i]);
	}
	fputs(n ? "\n  ]\n}\n" : "]\n}\n", f);

	free(order);
	return report_stream_status(f);
}
