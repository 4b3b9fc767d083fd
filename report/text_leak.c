/* The text report's leak check, read like Valgrind's memcheck: a loss record
 * per stack and kind ("1,400 bytes in 7 blocks are definitely lost in loss
 * record 1 of 6", then the stack innermost first), its LEAK SUMMARY, and
 * the account of the target's RSS. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_internal.h"
#include "text.h"

/* The part no kind holds (allocated after the check): a record of its own,
 * after the four kinds. */
#define UNCLASSIFIED REPORT_LEAK_KIND_COUNT
#define UNCLASSIFIED_PHRASE "not classified"

#define LABEL_WIDTH 15 /* LEAK SUMMARY's labels, right-aligned as memcheck's */
#define RSS_LABEL_WIDTH 34 /* the longest part's text */

/* V with memcheck's thousands separators ("1,400") into BUF; returns BUF. */
static char *grouped(char *buf, size_t size, uint64_t v)
{
	char digits[24];
	size_t len, i, k = 0;

	len = (size_t)snprintf(digits, sizeof(digits), "%" PRIu64, v);
	for (i = 0; i < len && k + 2 < size; i++) {
		if (i && (len - i) % 3 == 0)
			buf[k++] = ',';
		buf[k++] = digits[i];
	}
	buf[k] = '\0';
	return buf;
}

/* One loss record: COUNT of stack S of kind KIND (or UNCLASSIFIED), shown
 * under the process at GROUP; PLACE is S's place among the shown stacks. */
struct loss_record {
	const struct report_stack *s;
	struct report_leak_count count;
	unsigned int kind;
	size_t group;
	size_t place;
};

static uint64_t resident_of(const struct report_stack *s)
{
	return s->has_residency ? s->residency.resident : 0;
}

/* By process, kind, resident bytes (a leak that costs RSS first), bytes. */
static int record_cmp(const void *pa, const void *pb)
{
	const struct loss_record *a = pa, *b = pb;

	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (resident_of(a->s) != resident_of(b->s))
		return resident_of(a->s) > resident_of(b->s) ? -1 : 1;
	if (a->count.bytes != b->count.bytes)
		return a->count.bytes > b->count.bytes ? -1 : 1;
	return a->place < b->place ? -1 : a->place > b->place;
}

/* Appends to V (room for 5 per stack) the records of ORDER[I]. */
static size_t records_of(const struct report_stack *s, size_t group, size_t place,
			 struct loss_record *v)
{
	struct report_leak_count rest;
	size_t n = 0;
	unsigned int k;

	for (k = 0; s->has_leak_kinds && k < REPORT_LEAK_KIND_COUNT; k++)
		if (s->leak_kinds[k].bytes || s->leak_kinds[k].allocations)
			v[n++] = (struct loss_record){ s, s->leak_kinds[k], k, group, place };
	report_stack_unclassified(s, &rest);
	if (rest.bytes || rest.allocations)
		v[n++] = (struct loss_record){ s, rest, UNCLASSIFIED, group, place };
	return n;
}

static void record_write(FILE *f, const struct report *r, const struct loss_record *x,
			 size_t number, size_t total)
{
	const struct report_residency *res = &x->s->residency;
	char a[32], b[32], c[32], d[32];

	fprintf(f, "\t%s bytes", grouped(a, sizeof(a), x->count.bytes));
	/* sampled: the estimate's standard error */
	if (r->sample_bytes && x->kind != UNCLASSIFIED && isfinite(x->s->leak_kinds_stderr[x->kind]))
		fprintf(f, " (+- %s)", grouped(a, sizeof(a), (uint64_t)llround(x->s->leak_kinds_stderr[x->kind])));
	fprintf(f, " in %s blocks are %s in loss record %zu of %zu", grouped(b, sizeof(b), x->count.allocations),
		x->kind == UNCLASSIFIED ? UNCLASSIFIED_PHRASE : report_leak_kind_phrases[x->kind], number, total);
	if (x->s->has_residency)
		fprintf(f, " (of its stack's %s bytes: %s resident, %s swapped, %s never touched)",
			grouped(a, sizeof(a), x->s->bytes), grouped(b, sizeof(b), res->resident),
			grouped(c, sizeof(c), res->swapped), grouped(d, sizeof(d), res->untouched));
	fputc('\n', f);
	/* said once a stack: with its reachable record, else its possibly lost one */
	if (x->s->leak_unsure.allocations &&
	    (x->kind == REPORT_LEAK_REACHABLE ||
	     (x->kind == REPORT_LEAK_POSSIBLY_LOST && !x->s->leak_kinds[REPORT_LEAK_REACHABLE].allocations)))
		fprintf(f, "\t(%s bytes in %s blocks of its stack were reached only through memory the allocator "
			   "held before dwleak attached: they may be lost)\n",
			grouped(a, sizeof(a), x->s->leak_unsure.bytes),
			grouped(b, sizeof(b), x->s->leak_unsure.allocations));
	text_stack_frames(f, r, x->s);
}

int text_loss_records(FILE *f, const struct report *r, const struct report_stack **order,
		      size_t n, bool multi)
{
	struct text_group *g = NULL;
	struct loss_record *v;
	size_t ng = 1, nv = 0, i, j, k;
	int err = 0;

	v = calloc(n * (REPORT_LEAK_KIND_COUNT + 1) + 1, sizeof(*v));
	if (!v || (multi && (err = text_groups(r, &g, &ng)))) {
		free(g);
		free(v);
		return err ? err : -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		for (j = 0; multi && j < ng && g[j].pid != report_stack_pid(r, order[i]); j++)
			;
		nv += records_of(order[i], multi ? j : 0, i, v + nv);
	}
	qsort(v, nv, sizeof(*v), record_cmp);
	for (j = 0, k = 0; j < ng; j++) {
		if (multi)
			text_group_line(f, &g[j]);
		for (; k < nv && v[k].group == j; k++)
			record_write(f, r, &v[k], k + 1, nv);
	}
	free(g);
	free(v);
	return 0;
}

/* "definitely lost: 1,448 bytes in 8 blocks", the label right-aligned. */
static void summary_line(FILE *f, const char *label, uint64_t bytes, uint64_t blocks)
{
	char a[32], b[32];

	fprintf(f, "\t%*s: %s bytes in %s blocks\n", LABEL_WIDTH, label,
		grouped(a, sizeof(a), bytes), grouped(b, sizeof(b), blocks));
}

void text_leak_summary(FILE *f, const struct report *r)
{
	const struct report_leak_check *lc = &r->leak_check;
	uint64_t sup_bytes = 0, sup_blocks = 0;
	bool any;
	char a[32];
	size_t i;

	fputs("LEAK SUMMARY:\n", f);
	for (i = 0; i < REPORT_LEAK_KIND_COUNT; i++)
		summary_line(f, report_leak_kind_phrases[i], lc->kinds[i].bytes, lc->kinds[i].allocations);
	for (i = 0; i < r->nsuppressed; i++) {
		sup_bytes += r->suppressed[i].bytes;
		sup_blocks += r->suppressed[i].allocations;
	}
	summary_line(f, "suppressed", sup_bytes, sup_blocks);
	for (i = 0, any = false; i < r->nprocesses; i++)
		any |= r->processes[i].unchecked != NULL;
	/* sampled, a process whose check failed may have no sampled block
	 * left unclassified: it is said anyway */
	if (lc->unclassified.bytes || lc->unclassified.allocations || any) {
		summary_line(f, "not classified", lc->unclassified.bytes, lc->unclassified.allocations);
		for (i = 0; i < r->nprocesses; i++)
			if (r->processes[i].unchecked)
				fprintf(f, "\t  pid %d (%s): %s\n", r->processes[i].pid,
					r->processes[i].command ? r->processes[i].command : "?",
					r->processes[i].unchecked);
	}
	if (lc->unsure.bytes || lc->unsure.allocations) {
		char b[32];

		fprintf(f, "\t(of the reached ones, %s bytes in %s blocks only through memory the allocator held "
			   "before dwleak attached, which holds its free lists and caches beside blocks allocated "
			   "before: they may be lost; run the program under dwleak -- CMD for an exact verdict)\n",
			grouped(a, sizeof(a), lc->unsure.bytes), grouped(b, sizeof(b), lc->unsure.allocations));
	}
	if (lc->kinds_exact)
		fprintf(f, "\t(every block%s classified, sampled or not, from the preload library's index of live "
			   "blocks: these totals are exact and take no suppression; each stack's kinds are estimates "
			   "from the sample)\n",
			any ? " of each process checked" : "");
	fprintf(f, "\t(%s bytes scanned", grouped(a, sizeof(a), lc->scanned_bytes));
	if (isfinite(lc->scan_ms))
		fprintf(f, " in %.3f ms", lc->scan_ms);
	fputs("; the target was stopped for ", f);
	if (isfinite(lc->pause_ms))
		fprintf(f, "%.3f ms", lc->pause_ms);
	else
		fputs("an unknown time", f);
	fputs(lc->snapshot ? ", the scan reading a copy-on-write snapshot while it ran on)\n" : ")\n", f);
}

/* One line of RSS explained: its label, bytes and share of the RSS. */
static void rss_line(FILE *f, const char *label, uint64_t bytes, uint64_t rss)
{
	char a[32];

	fprintf(f, "\t%-*s %15s bytes %5.1f%%\n", RSS_LABEL_WIDTH, label,
		grouped(a, sizeof(a), bytes), rss ? 100.0 * (double)bytes / (double)rss : 0.0);
}

void text_rss(FILE *f, const struct report_rss *rss)
{
	uint64_t sum = 0;
	char a[32], human[32];
	size_t i;

	fprintf(f, "RSS explained: %s bytes (%s) resident\n", grouped(a, sizeof(a), rss->rss_bytes),
		report_human_bytes(human, sizeof(human), (double)rss->rss_bytes));
	for (i = 0; i < REPORT_RSS_PART_COUNT; i++) {
		rss_line(f, report_rss_part_texts[i], rss->parts[i], rss->rss_bytes);
		sum += rss->parts[i];
	}
	if (sum < rss->rss_bytes)
		rss_line(f, "unaccounted", rss->rss_bytes - sum, rss->rss_bytes);
}
