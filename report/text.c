/* The text report: memleak-like blocks for people, one per stack (frames
 * indented, innermost first), a header and a footer with the totals, and in
 * comparison mode the DWARF and frame-pointer walks side by side.  A report
 * of several processes shows each stack under its process; one with a leak
 * check shows memcheck's loss records instead of stack blocks (text_leak.c). */
#define _GNU_SOURCE /* sigabbrev_np */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "report.h"
#include "report_internal.h"
#include "text.h"

void text_put(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		size_t len = report_utf8_len(s);

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
		text_put(f, fr->module ? report_base_name(fr->module) : "unknown");
		fputc(']', f);
	} else if (fr->module) {
		fputc('[', f);
		text_put(f, report_base_name(fr->module));
		fprintf(f, "]+0x%" PRIx64, fr->elf_address);
	} else {
		fprintf(f, "0x%" PRIx64 " [unknown]", fr->address);
	}
	if (fr->file) {
		fputc(' ', f);
		text_put(f, report_base_name(fr->file));
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

void text_stack_frames(FILE *f, const struct report *r, const struct report_stack *s)
{
	size_t i;

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

static void text_stack(FILE *f, const struct report *r, const struct report_stack *s)
{
	const char *sep = " (";
	char human[32];

	fprintf(f, "\t%" PRIu64 " bytes", s->bytes);
	/* sampled: the estimate's standard error */
	if (r->sample_bytes && isfinite(s->bytes_stderr))
		fprintf(f, " (+- %.0f)", s->bytes_stderr);
	fprintf(f, " in %" PRIu64 " allocations from stack", s->allocations);
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
	if (s->has_residency) {
		report_human_bytes(human, sizeof(human), (double)s->residency.resident);
		fprintf(f, "%s%s resident", sep, human);
		report_human_bytes(human, sizeof(human), (double)s->residency.swapped);
		fprintf(f, ", %s swapped", human);
		report_human_bytes(human, sizeof(human), (double)s->residency.untouched);
		fprintf(f, ", %s never touched", human);
		sep = ", ";
	}
	fputs(sep[0] == ',' ? ")\n" : "\n", f);
	text_stack_frames(f, r, s);
}

/* ---- Processes ---- */

/* The processes in the order the text shows them: most outstanding bytes
 * first, ties by allocations, then as R lists them. */
static int group_cmp(const void *pa, const void *pb)
{
	const struct text_group *a = pa, *b = pb;

	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	if (a->allocations != b->allocations)
		return a->allocations > b->allocations ? -1 : 1;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

int text_groups(const struct report *r, struct text_group **out, size_t *n)
{
	struct text_group *g = calloc(r->nprocesses + r->nstacks + 1, sizeof(*g));
	size_t i, j, k = 0;

	*out = g;
	*n = 0;
	if (!g)
		return -ENOMEM;
	for (j = 0; j < r->nprocesses; j++, k++)
		g[k] = (struct text_group){ .pid = r->processes[j].pid,
					    .command = r->processes[j].command,
					    .process = &r->processes[j], .bytes = r->processes[j].bytes,
					    .allocations = r->processes[j].allocations, .rank = k };
	/* a stack of a pid the tree does not list still gets a line */
	for (i = 0; i < r->nstacks; i++) {
		const struct report_stack *s = &r->stacks[i];
		int pid = report_stack_pid(r, s);

		for (j = 0; j < k && g[j].pid != pid; j++)
			;
		if (j == k)
			g[k++] = (struct text_group){ .pid = pid, .command = report_stack_command(r, s),
						      .rank = k };
		if (!g[j].process) {
			g[j].bytes += s->bytes;
			g[j].allocations += s->allocations;
		}
	}
	qsort(g, k, sizeof(*g), group_cmp);
	*n = k;
	return 0;
}

/* How process P is doing: "exited with status 0", "killed by signal 9
 * (SIGKILL)", "still running", "not followed (setuid exec)". */
static void text_process_state(FILE *f, const struct report_process *p)
{
	int st = p->wait_status;

	switch (p->state) {
	case REPORT_PROCESS_RUNNING:
		fputs("still running", f);
		break;
	case REPORT_PROCESS_ENDED:
		if (WIFEXITED(st)) {
			fprintf(f, "exited with status %d", WEXITSTATUS(st));
		} else if (WIFSIGNALED(st)) {
			const char *abbrev = sigabbrev_np(WTERMSIG(st));

			fprintf(f, "killed by signal %d", WTERMSIG(st));
			if (abbrev)
				fprintf(f, " (SIG%s)", abbrev);
			if (WCOREDUMP(st))
				fputs(", core dumped", f);
		} else {
			fprintf(f, "ended (wait status 0x%x)", (unsigned int)st);
		}
		break;
	case REPORT_PROCESS_NOT_FOLLOWED:
	default:
		fputs("not followed", f);
		if (p->reason) {
			fputs(" (", f);
			text_put(f, p->reason);
			fputc(')', f);
		}
		return;
	}
	if (p->reason) {
		fputs("; not traced (", f);
		text_put(f, p->reason);
		fputc(')', f);
	}
}

/* The processes the text shows a line for: the tree's, and any pid of a
 * stack the tree does not list. */
static size_t text_process_count(const struct report *r)
{
	struct text_group *g;
	size_t n;

	text_groups(r, &g, &n);
	free(g);
	return n;
}

void text_group_line(FILE *f, const struct text_group *g)
{
	const struct report_process *p = g->process;

	fprintf(f, "Process %d ", g->pid);
	text_put(f, g->command ? g->command : "?");
	if (p && p->ppid)
		fprintf(f, " (parent %d)", p->ppid);
	fputs(": ", f);
	if (p)
		text_process_state(f, p);
	else
		fputs("not in the process list", f);
	if (!p || report_process_traced(p) || g->bytes)
		fprintf(f, "; %" PRIu64 " bytes in %" PRIu64 " allocations outstanding",
			g->bytes, g->allocations);
	fputc('\n', f);
}

/* Each process's line, then the shown stacks (ORDER[0..N)) it made. */
static int text_by_process(FILE *f, const struct report *r, const struct report_stack **order,
			   size_t n)
{
	struct text_group *g;
	size_t ng, i, j;
	int err = text_groups(r, &g, &ng);

	for (j = 0; j < ng && !err; j++) {
		text_group_line(f, &g[j]);
		for (i = 0; i < n; i++)
			if (report_stack_pid(r, order[i]) == g[j].pid)
				text_stack(f, r, order[i]);
	}
	free(g);
	return err;
}

/* The processes whose allocations are not in the report, and why: a
 * report that looks clean must not hide that part of the tree was not
 * seen. */
static void text_untraced(FILE *f, const struct report *r)
{
	size_t i, n = report_untraced_count(r);

	if (!n)
		return;
	fprintf(f, "Not traced: %zu process%s, what %s allocated is not in this report:\n", n,
		n == 1 ? "" : "es", n == 1 ? "it" : "they");
	for (i = 0; i < r->nprocesses; i++) {
		const struct report_process *p = &r->processes[i];

		if (report_process_traced(p))
			continue;
		fprintf(f, "\tpid %d ", p->pid);
		text_put(f, p->command ? p->command : "?");
		fputs(": ", f);
		text_put(f, p->reason ? p->reason : "?");
		fputc('\n', f);
	}
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
	bool multi = report_is_multiprocess(r);
	struct tm tm;
	size_t i, n;
	int err;

	err = report_stacks_top(r, top, &order, &n);
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
	if (multi)
		fprintf(f, ", %zu processes", text_process_count(r));
	fputs("):\n", f);

	if (r->leak_check.present)
		err = text_loss_records(f, r, order, n, multi);
	else if (multi)
		err = text_by_process(f, r, order, n);
	else
		for (i = 0; i < n; i++)
			text_stack(f, r, order[i]);
	if (err) {
		free(order);
		return err;
	}
	if (r->leak_check.present)
		text_leak_summary(f, r);
	if (r->rss.present)
		text_rss(f, &r->rss);

	fprintf(f, "Totals: %" PRIu64 " bytes (%s) in %" PRIu64 " allocations outstanding, "
		"%zu of %" PRIu64 " stacks shown, %.2f s traced\n",
		t->outstanding_bytes, human, t->outstanding_allocations, n, t->stacks,
		isfinite(r->duration_s) ? r->duration_s : 0.0);
	fprintf(f, "Dropped events: %" PRIu64 ", truncated stacks: %" PRIu64
		", unwind errors: %" PRIu64 "\n",
		t->dropped_events, t->truncated_stacks, t->unwind_errors);
	for (i = 0; i < r->nlosses; i++) {
		fputs("Lost: ", f);
		text_put(f, r->losses[i].text);
		fputc('\n', f);
	}
	text_untraced(f, r);
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
	return report_stream_status(f);
}
