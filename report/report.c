/* The report model: the writers' shared order (bytes, then allocations,
 * descending) and top-N cut, totals from stacks, human-readable sizes, and
 * the string helpers every format writer uses. */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_internal.h"

/* ---- The name lists of report.h ---- */

const char *const report_leak_kind_names[REPORT_LEAK_KIND_COUNT] = {
#define LEAK_KIND_NAME(id, name, phrase) [REPORT_LEAK_##id] = #name,
	REPORT_LEAK_KINDS(LEAK_KIND_NAME)
#undef LEAK_KIND_NAME
};

const char *const report_leak_kind_phrases[REPORT_LEAK_KIND_COUNT] = {
#define LEAK_KIND_PHRASE(id, name, phrase) [REPORT_LEAK_##id] = phrase,
	REPORT_LEAK_KINDS(LEAK_KIND_PHRASE)
#undef LEAK_KIND_PHRASE
};

const char *const report_process_state_names[REPORT_PROCESS_STATE_COUNT] = {
#define PROCESS_STATE_NAME(id, name) [REPORT_PROCESS_##id] = name,
	REPORT_PROCESS_STATES(PROCESS_STATE_NAME)
#undef PROCESS_STATE_NAME
};

const char *const report_rss_part_names[REPORT_RSS_PART_COUNT] = {
#define RSS_PART_NAME(id, name, text) [REPORT_RSS_##id] = #name,
	REPORT_RSS_PARTS(RSS_PART_NAME)
#undef RSS_PART_NAME
};

const char *const report_rss_part_texts[REPORT_RSS_PART_COUNT] = {
#define RSS_PART_TEXT(id, name, text) [REPORT_RSS_##id] = text,
	REPORT_RSS_PARTS(RSS_PART_TEXT)
#undef RSS_PART_TEXT
};

/* ---- Order and totals ---- */

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

/* What a leak check says matters most in a stack: its lost bytes
 * (definitely and indirectly), then its possibly lost ones. */
static uint64_t stack_lost(const struct report_stack *s)
{
	if (!s->has_leak_kinds)
		return 0;
	return s->leak_kinds[REPORT_LEAK_DEFINITELY_LOST].bytes + s->leak_kinds[REPORT_LEAK_INDIRECTLY_LOST].bytes;
}

static uint64_t stack_possibly(const struct report_stack *s)
{
	return s->has_leak_kinds ? s->leak_kinds[REPORT_LEAK_POSSIBLY_LOST].bytes : 0;
}

static int stack_lost_ptr_cmp(const void *pa, const void *pb)
{
	const struct report_stack *a = *(const struct report_stack *const *)pa;
	const struct report_stack *b = *(const struct report_stack *const *)pb;

	if (stack_lost(a) != stack_lost(b))
		return stack_lost(a) > stack_lost(b) ? -1 : 1;
	if (stack_possibly(a) != stack_possibly(b))
		return stack_possibly(a) > stack_possibly(b) ? -1 : 1;
	return stack_ptr_cmp(pa, pb);
}

int report_stacks_top(const struct report *r, unsigned int top,
		      const struct report_stack ***out, size_t *n)
{
	const struct report_stack **by_loss;
	bool *kept;
	size_t i, k;
	int err = report_stacks_ordered(r, out);

	*n = err ? 0 : top && top < r->nstacks ? top : r->nstacks;
	if (err || *n == r->nstacks || !r->leak_check.present)
		return err;
	/* A cut after a leak check keeps the lost stacks: a big reachable
	 * cache must not push a small definite leak out of the report (as
	 * memcheck lists every lost record).  The kept ones stay in byte order. */
	by_loss = malloc(r->nstacks * sizeof(*by_loss));
	kept = calloc(r->nstacks, sizeof(*kept));
	if (!by_loss || !kept) {
		free(by_loss);
		free(kept);
		free(*out);
		*out = NULL;
		*n = 0;
		return -ENOMEM;
	}
	memcpy(by_loss, *out, r->nstacks * sizeof(*by_loss));
	qsort(by_loss, r->nstacks, sizeof(*by_loss), stack_lost_ptr_cmp);
	for (i = 0; i < *n; i++)
		kept[by_loss[i] - r->stacks] = true;
	for (i = k = 0; i < r->nstacks; i++)
		if (kept[(*out)[i] - r->stacks])
			(*out)[k++] = (*out)[i];
	free(by_loss);
	free(kept);
	return 0;
}

int report_sort(struct report *r)
{
	const struct report_stack **order;
	struct report_stack *sorted;
	size_t i, n;
	int err;

	if (r->nstacks < 2)
		return 0;
	err = report_stacks_top(r, 0, &order, &n);
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

/* Each process's bytes and allocations from the stacks it made. */
static void process_totals_from_stacks(struct report *r)
{
	size_t i, j;

	for (j = 0; j < r->nprocesses; j++)
		r->processes[j].bytes = r->processes[j].allocations = 0;
	for (i = 0; i < r->nstacks; i++) {
		int pid = report_stack_pid(r, &r->stacks[i]);

		for (j = 0; j < r->nprocesses && r->processes[j].pid != pid; j++)
			;
		if (j < r->nprocesses) {
			r->processes[j].bytes += r->stacks[i].bytes;
			r->processes[j].allocations += r->stacks[i].allocations;
		}
	}
}

/* The leak check's kinds from the stacks', when every stack has them,
 * and the bytes none of them has. */
static void leak_totals_from_stacks(struct report *r)
{
	struct report_leak_count *k = r->leak_check.kinds, rest;
	size_t i, j;

	if (r->leak_check.present) {
		memset(&r->leak_check.unclassified, 0, sizeof(r->leak_check.unclassified));
		memset(&r->leak_check.unsure, 0, sizeof(r->leak_check.unsure));
		for (i = 0; i < r->nstacks; i++) {
			report_stack_unclassified(&r->stacks[i], &rest);
			r->leak_check.unclassified.bytes += rest.bytes;
			r->leak_check.unclassified.allocations += rest.allocations;
			r->leak_check.unsure.bytes += r->stacks[i].leak_unsure.bytes;
			r->leak_check.unsure.allocations += r->stacks[i].leak_unsure.allocations;
		}
	}
	if (r->leak_check.kinds_exact) {
		/* the checks' own totals over every block */
		r->leak_check.unsure = r->leak_check.exact_unsure;
		return;
	}
	for (i = 0; i < r->nstacks; i++)
		if (!r->stacks[i].has_leak_kinds)
			return;
	memset(r->leak_check.kinds, 0, sizeof(r->leak_check.kinds));
	for (i = 0; i < r->nstacks; i++) {
		for (j = 0; j < REPORT_LEAK_KIND_COUNT; j++) {
			k[j].bytes += r->stacks[i].leak_kinds[j].bytes;
			k[j].allocations += r->stacks[i].leak_kinds[j].allocations;
		}
	}
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
	process_totals_from_stacks(r);
	if (r->leak_check.present)
		leak_totals_from_stacks(r);
}

int report_stack_pid(const struct report *r, const struct report_stack *s)
{
	return s->pid ? s->pid : r->pid;
}

const char *report_stack_command(const struct report *r, const struct report_stack *s)
{
	if (s->command)
		return s->command;
	return report_stack_pid(r, s) == r->pid ? r->command : NULL;
}

bool report_process_traced(const struct report_process *p)
{
	return p->state != REPORT_PROCESS_NOT_FOLLOWED && !p->reason;
}

size_t report_untraced_count(const struct report *r)
{
	size_t i, n = 0;

	for (i = 0; i < r->nprocesses; i++)
		n += !report_process_traced(&r->processes[i]);
	return n;
}

bool report_is_multiprocess(const struct report *r)
{
	size_t i;

	if (r->nprocesses > 1)
		return true;
	for (i = 1; i < r->nstacks; i++)
		if (report_stack_pid(r, &r->stacks[i]) != report_stack_pid(r, &r->stacks[0]))
			return true;
	return false;
}

void report_stack_unclassified(const struct report_stack *s, struct report_leak_count *out)
{
	uint64_t bytes = 0, allocations = 0;
	size_t k;

	for (k = 0; s->has_leak_kinds && k < REPORT_LEAK_KIND_COUNT; k++) {
		bytes += s->leak_kinds[k].bytes;
		allocations += s->leak_kinds[k].allocations;
	}
	out->bytes = bytes < s->bytes ? s->bytes - bytes : 0;
	out->allocations = allocations < s->allocations ? s->allocations - allocations : 0;
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

/* ---- Helpers of the format writers (report_internal.h) ---- */

size_t report_stack_parts(const struct report *r, const struct report_stack *s,
			  struct report_part *parts)
{
	struct report_leak_count rest;
	size_t n = 0;
	unsigned int k;

	if (!r->leak_check.present) {
		parts[0] = (struct report_part){ REPORT_PART_WHOLE, { s->bytes, s->allocations } };
		return s->bytes || s->allocations;
	}
	for (k = 0; s->has_leak_kinds && k < REPORT_LEAK_KIND_COUNT; k++)
		if (s->leak_kinds[k].bytes || s->leak_kinds[k].allocations)
			parts[n++] = (struct report_part){ k, s->leak_kinds[k] };
	report_stack_unclassified(s, &rest);
	if (rest.bytes || rest.allocations)
		parts[n++] = (struct report_part){ REPORT_PART_UNCLASSIFIED, rest };
	return n;
}

const char *report_part_label(unsigned int kind)
{
	static const char *const labels[REPORT_PARTS_MAX] = {
#define PART_LABEL(id, name, phrase) [REPORT_LEAK_##id] = "[" #name "]",
		REPORT_LEAK_KINDS(PART_LABEL)
#undef PART_LABEL
		[REPORT_PART_UNCLASSIFIED] = "[unclassified]",
	};

	return kind < REPORT_PARTS_MAX ? labels[kind] : NULL;
}

int report_process_label(const struct report *r, const struct report_stack *s, char **out)
{
	const char *command = report_stack_command(r, s);

	if (asprintf(out, "%s [%d]", command ? command : "?", report_stack_pid(r, s)) < 0) {
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

int report_stream_status(FILE *f)
{
	if (fflush(f) || ferror(f))
		return -EIO;
	return 0;
}

const char *report_base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

size_t report_utf8_decode(const unsigned char *s, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t len, i;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		*cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		*cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		*cp = c & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
			return 0;
		*cp = *cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && *cp < 0x800) || (len == 4 && *cp < 0x10000) ||
	    (*cp >= 0xd800 && *cp <= 0xdfff) || *cp > 0x10ffff)
		return 0;
	return len;
}

size_t report_utf8_len(const unsigned char *s)
{
	uint32_t cp;

	if (s[0] < 0x80)
		return s[0] >= 0x20 && s[0] < 0x7f;
	return report_utf8_decode(s, &cp);
}
