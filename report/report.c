/* Writers for the leak report: memleak-like text for people, the JSON object
 * of SPEC.md for scripts, and folded stacks for flame-graph tools.  All three
 * share one order (bytes, then allocations, descending) and one top-N cut. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* ---- Order ---- */

static int stack_cmp(const struct report_stack *a, const struct report_stack *b)
{
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	if (a->allocations != b->allocations)
		return a->allocations > b->allocations ? -1 : 1;
	return 0;
}

/* qsort is not stable: the pointers' own order (into one array) breaks ties. */
static int stack_ptr_cmp(const void *pa, const void *pb)
{
	const struct report_stack *a = *(const struct report_stack *const *)pa;
	const struct report_stack *b = *(const struct report_stack *const *)pb;
	int c = stack_cmp(a, b);

	if (c)
		return c;
	return a < b ? -1 : a > b;
}

int report_stacks_ordered(const struct report *r, const struct report_stack ***out)
{
	const struct report_stack **v;
	size_t i;

	*out = NULL;
	if (!r->nstacks)
		return 0;
	v = malloc(r->nstacks * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < r->nstacks; i++)
		v[i] = &r->stacks[i];
	qsort(v, r->nstacks, sizeof(*v), stack_ptr_cmp);
	*out = v;
	return 0;
}

/* The ordered stacks, and in *N how many of them TOP shows. */
static int stacks_ordered(const struct report *r, unsigned int top,
			  const struct report_stack ***out, size_t *n)
{
	int err = report_stacks_ordered(r, out);

	*n = err ? 0 : top && top < r->nstacks ? top : r->nstacks;
	return err;
}

int report_sort(struct report *r)
{
	const struct report_stack **order;
	struct report_stack *sorted;
	size_t i, n;
	int err;

	if (r->nstacks < 2)
		return 0;
	err = stacks_ordered(r, 0, &order, &n);
	if (err)
		return err;
	sorted = malloc(r->nstacks * sizeof(*sorted));
	if (!sorted) {
		free(order);
		return -ENOMEM;
	}
	for (i = 0; i < r->nstacks; i++)
		sorted[i] = *order[i];
	memcpy(r->stacks, sorted, r->nstacks * sizeof(*sorted));
	free(sorted);
	free(order);
	return 0;
}

void report_totals_from_stacks(struct report *r)
{
	struct report_totals *t = &r->totals;
	size_t i;

	t->outstanding_bytes = 0;
	t->outstanding_allocations = 0;
	t->truncated_stacks = 0;
	t->unwind_errors = 0;
	t->stacks = r->nstacks;
	for (i = 0; i < r->nstacks; i++) {
		const struct report_stack *s = &r->stacks[i];

		t->outstanding_bytes += s->bytes;
		t->outstanding_allocations += s->allocations;
		t->truncated_stacks += s->truncated;
		t->unwind_errors += s->unwind_error != NULL;
	}
}

static int stream_status(FILE *f)
{
	if (fflush(f) || ferror(f))
		return -EIO;
	return 0;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

char *report_human_bytes(char *buf, size_t size, double bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = fabs(bytes);
	const char *sign = bytes < 0 ? "-" : "";
	size_t u = 0;

	if (!(v >= 1024)) { /* also NaN */
		snprintf(buf, size, "%s%.0f B", sign, v);
		return buf;
	}
	v /= 1024;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, size, "%s%.1f %s", sign, v, units[u]);
	return buf;
}

/* ---- Strings ---- */

/* Length of the well-formed UTF-8 sequence at S (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), 1 for printable ASCII, or 0 for a
 * control byte or a byte that starts no valid sequence. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t len, i;
	uint32_t cp;

	if (c >= 0x20 && c < 0x7f)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

/* ---- Text ---- */

/* Names come from the target's symbol tables: keep control bytes and broken
 * UTF-8 off the terminal and out of the line structure, as \xNN. */
static void text_put(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		size_t len = utf8_len(s);

		if (len) {
			fwrite(s, 1, len, f);
			s += len;
		} else {
			fprintf(f, "\\x%02x", *s++);
		}
	}
}

/* One frame line: "func+0xOFF [module] file:line (inlined)", or for a frame
 * without a symbol "[module]+0xELFADDR". */
static void text_frame(FILE *f, const char *indent, const struct report_frame *fr)
{
	fputs(indent, f);
	if (fr->function) {
		text_put(f, fr->function);
		if (!fr->inlined)
			fprintf(f, "+0x%" PRIx64, fr->offset);
		fputs(" [", f);
		text_put(f, fr->module ? base_name(fr->module) : "unknown");
		fputc(']', f);
	} else if (fr->module) {
		fputc('[', f);
		text_put(f, base_name(fr->module));
		fprintf(f, "]+0x%" PRIx64, fr->elf_address);
	} else {
		fprintf(f, "0x%" PRIx64 " [unknown]", fr->address);
	}
	if (fr->file) {
		fputc(' ', f);
		text_put(f, base_name(fr->file));
		if (fr->line > 0)
			fprintf(f, ":%d", fr->line);
	}
	if (fr->inlined)
		fputs(" (inlined)", f);
	fputc('\n', f);
}

/* One frame rendered to a malloc'd string (no indent, no newline). */
static char *frame_string(const struct report_frame *fr)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	text_frame(m, "", fr);
	fclose(m);
	if (buf && len && buf[len - 1] == '\n')
		buf[len - 1] = 0;
	return buf;
}

#define SIDE_WIDTH 64 /* columns of the DWARF side in comparison mode */

static void side_row(FILE *f, const char *mark, const char *left, const char *right)
{
	size_t n = left ? strlen(left) : 0;

	fprintf(f, "\t%s\t%-*.*s%s | %s\n", mark, SIDE_WIDTH, SIDE_WIDTH, left ? left : "",
		n > SIDE_WIDTH ? ">" : " ", right ? right : "");
}

/* --unwind both: the DWARF walk on the left, the frame-pointer walk's
 * matching frame on the right, ">>" at the first frame the FP walk lacks. */
static void text_side_by_side(FILE *f, const struct report *r, const struct report_stack *s)
{
	char *left, *right;
	size_t i, k = 0;

	side_row(f, "", "DWARF walk", "frame-pointer walk");
	for (i = 0; i < s->nframes; i++) {
		bool first_of_addr = i == 0 || s->frames[i].address != s->frames[i - 1].address;
		bool match = first_of_addr && k < s->nfp_frames &&
			     s->fp_frames[k].address == s->frames[i].address;

		left = frame_string(&s->frames[i]);
		right = match ? frame_string(&s->fp_frames[k]) : NULL;
		side_row(f, r->fp && s->fp_divergence == (long)i ? ">>" : "", left,
			 match ? right : first_of_addr ? "(missing)" : "");
		if (match)
			k++;
		free(left);
		free(right);
	}
	for (; k < s->nfp_frames; k++) {
		right = frame_string(&s->fp_frames[k]);
		side_row(f, "", "(not in the DWARF walk)", right);
		free(right);
	}
}

/* Comparison mode's footer: who to rebuild with frame pointers. */
static void text_fp_summary(FILE *f, const struct report_fp_summary *sum)
{
	char human[32];
	size_t i;

	fprintf(f, "Frame pointers vs DWARF: %" PRIu64 " of %" PRIu64 " stacks agree (%.1f%%), "
		"%" PRIu64 " frames lost by the frame-pointer walk\n",
		sum->agreeing, sum->stacks,
		sum->stacks ? 100.0 * (double)sum->agreeing / (double)sum->stacks : 100.0,
		sum->frames_lost);
	for (i = 0; i < sum->nmodules; i++) {
		const struct report_fp_module *m = &sum->modules[i];

		fputs("\tlost at ", f);
		text_put(f, m->module ? m->module : "(unknown module)");
		fprintf(f, ": %" PRIu64 " stacks, %s, %" PRIu64 " frames%s\n", m->stacks,
			report_human_bytes(human, sizeof(human), (double)m->bytes), m->frames_lost,
			i == 0 ? "  <- rebuild this one with -fno-omit-frame-pointer first" : "");
	}
}

static void text_stack(FILE *f, const struct report *r, const struct report_stack *s)
{
	const char *sep = " (";
	char human[32];
	size_t i;

	fprintf(f, "\t%" PRIu64 " bytes in %" PRIu64 " allocations from stack",
		s->bytes, s->allocations);
	if (s->allocator) {
		fputs(sep, f);
		text_put(f, s->allocator);
		sep = ", ";
	}
	if (isfinite(s->oldest_age_s) && s->oldest_age_s >= 0) {
		fprintf(f, "%soldest %.1f s", sep, s->oldest_age_s);
		sep = ", ";
	}
	if (isfinite(s->growth_bytes_per_s)) {
		report_human_bytes(human, sizeof(human), s->growth_bytes_per_s);
		fprintf(f, "%s%s%s/s", sep, s->growth_bytes_per_s >= 0 ? "+" : "", human);
		sep = ", ";
	}
	fputs(sep[0] == ',' ? ")\n" : "\n", f);

	if (r->unwind && !strcmp(r->unwind, "both"))
		text_side_by_side(f, r, s);
	else
		for (i = 0; i < s->nframes; i++)
			text_frame(f, "\t\t", &s->frames[i]);
	if (s->truncated)
		fprintf(f, "\t\t(truncated at %zu frames)\n", s->nframes);
	if (s->unwind_error) {
		fputs("\t\t(walk stopped: ", f);
		text_put(f, s->unwind_error);
		fputs(")\n", f);
	}
	if (!s->nframes && !s->truncated && !s->unwind_error)
		fputs("\t\t(no frames)\n", f);

}

/* Which suppression rules left what out. */
static void text_suppressed(FILE *f, const struct report *r)
{
	uint64_t stacks = 0, bytes = 0;
	char human[32];
	size_t i;

	if (!r->nsuppressed)
		return;
	for (i = 0; i < r->nsuppressed; i++) {
		stacks += r->suppressed[i].stacks;
		bytes += r->suppressed[i].bytes;
	}
	fprintf(f, "Suppressed: %" PRIu64 " stacks, %s, by %zu rules:\n", stacks,
		report_human_bytes(human, sizeof(human), (double)bytes), r->nsuppressed);
	for (i = 0; i < r->nsuppressed; i++) {
		const struct report_suppressed *x = &r->suppressed[i];

		fputs("\t", f);
		text_put(f, x->rule);
		if (x->description) {
			fputs(" (", f);
			text_put(f, x->description);
			fputc(')', f);
		}
		fprintf(f, ": %" PRIu64 " stacks, %" PRIu64 " bytes in %" PRIu64 " allocations\n",
			x->stacks, x->bytes, x->allocations);
	}
}

int report_write_text(FILE *f, const struct report *r, unsigned int top)
{
	const struct report_totals *t = &r->totals;
	const struct report_stack **order;
	time_t now = r->timestamp ? r->timestamp : time(NULL);
	char clock[16] = "??:??:??";
	char human[32];
	const char *sep;
	struct tm tm;
	size_t i, n;
	int err;

	err = stacks_ordered(r, top, &order, &n);
	if (err)
		return err;

	if (localtime_r(&now, &tm))
		strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	fprintf(f, "[%s] Top %zu stacks with outstanding allocations (pid %d, ", clock, n, r->pid);
	text_put(f, r->command ? r->command : "?");
	fputs(", unwind ", f);
	text_put(f, r->unwind ? r->unwind : "?");
	fprintf(f, ", %s in %" PRIu64 " allocations", report_human_bytes(human, sizeof(human),
		(double)t->outstanding_bytes), t->outstanding_allocations);
	if (r->sample_bytes)
		fprintf(f, ", estimated from one sample per %" PRIu64 " bytes", r->sample_bytes);
	fputs("):\n", f);

	for (i = 0; i < n; i++)
		text_stack(f, r, order[i]);

	fprintf(f, "Totals: %" PRIu64 " bytes (%s) in %" PRIu64 " allocations outstanding, "
		"%zu of %" PRIu64 " stacks shown, %.2f s traced\n",
		t->outstanding_bytes, human, t->outstanding_allocations, n, t->stacks,
		isfinite(r->duration_s) ? r->duration_s : 0.0);
	fprintf(f, "Dropped events: %" PRIu64 ", truncated stacks: %" PRIu64
		", unwind errors: %" PRIu64 "\n",
		t->dropped_events, t->truncated_stacks, t->unwind_errors);
	if (r->fp && r->fp->present)
		text_fp_summary(f, r->fp);
	text_suppressed(f, r);

	sep = "Counters: ";
	for (i = 0; i < r->ncounters; i++) {
		if (!r->counter_values[i] || !r->counter_names[i])
			continue;
		fputs(sep, f);
		text_put(f, r->counter_names[i]);
		fprintf(f, " %" PRIu64, r->counter_values[i]);
		sep = ", ";
	}
	if (sep[0] == ',')
		fputc('\n', f);

	free(order);
	return stream_status(f);
}

/* ---- JSON ---- */

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
		} else if ((len = utf8_len(s))) {
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

	err = stacks_ordered(r, top, &order, &n);
	if (err)
		return err;

	fprintf(f, "{\n  \"dwleak_report\": 1,\n  \"pid\": %d,\n  \"command\": ", r->pid);
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
	return stream_status(f);
}

/* ---- Folded ---- */

/* ';' separates frames and the last ' ' the count: a name keeps its spaces
 * (the count is found from the end) but not ';' or control bytes, and the
 * flame-graph tools want UTF-8, so a broken byte becomes U+FFFD. */
static void folded_put(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		size_t len = utf8_len(s);

		if (len) {
			fputc(*s == ';' ? '_' : *s, f);
			fwrite(s + 1, 1, len - 1, f);
			s += len;
		} else {
			fputs(*s < 0x20 || *s == 0x7f ? "_" : "\xef\xbf\xbd", f);
			s++;
		}
	}
}

static void folded_frame(FILE *f, const struct report_frame *fr)
{
	if (fr->function) {
		folded_put(f, fr->function);
	} else if (fr->module) {
		fputc('[', f);
		folded_put(f, base_name(fr->module));
		fprintf(f, "]+0x%" PRIx64, fr->elf_address);
	} else {
		fprintf(f, "[unknown]+0x%" PRIx64, fr->address);
	}
}

int report_write_folded(FILE *f, const struct report *r, unsigned int top)
{
	const struct report_stack **order;
	size_t i, j, n;
	int err;

	err = stacks_ordered(r, top, &order, &n);
	if (err)
		return err;
	for (i = 0; i < n; i++) {
		const struct report_stack *s = order[i];

		if (!s->nframes) {
			fputs("[unknown]", f);
		} else {
			for (j = s->nframes; j-- > 0;) {
				folded_frame(f, &s->frames[j]);
				if (j)
					fputc(';', f);
			}
		}
		fprintf(f, " %" PRIu64 "\n", s->bytes);
	}
	free(order);
	return stream_status(f);
}
