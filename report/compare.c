/* The FP-versus-DWARF comparison behind --unwind both.  Stacks are compared
 * as sequences of distinct addresses (inlined frames share their physical
 * frame's address); after a run of DWARF frames the FP walk skipped, the
 * walks may meet again, and later losses are counted too.  Comparison stops
 * at the DWARF walk's first root frame (__libc_start_call_main,
 * start_thread, clone3, _start), where frame-pointer tools conventionally
 * end; an FP walk that ended at rbp 0 (the chain's end marker) is not
 * blamed for outer frames only CFI describes either. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"

/* Where a thread's stack conventionally starts: frame-pointer tools stop
 * here, so frames outside it (__libc_start_main, _start) are not compared. */
static bool is_root(const char *fn)
{
	static const char *const roots[] = { "__libc_start_call_main", "start_thread", "clone3",
					     "_start", NULL };
	size_t i;

	for (i = 0; fn && roots[i]; i++)
		if (!strcmp(fn, roots[i]))
			return true;
	return false;
}

/* Physical frames up to the first root: the index in frames[] of each
 * distinct address. */
static size_t physical(const struct report_frame *f, size_t n, size_t *idx)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		if (i == 0 || f[i].address != f[i - 1].address)
			idx[k++] = i;
		if (is_root(f[i].function))
			break;
	}
	return k;
}

static struct report_fp_module *module_slot(struct report_fp_summary *sum, const char *module)
{
	struct report_fp_module *grown;
	size_t i;

	for (i = 0; i < sum->nmodules; i++)
		if ((!module && !sum->modules[i].module) ||
		    (module && sum->modules[i].module && !strcmp(module, sum->modules[i].module)))
			return &sum->modules[i];
	grown = realloc(sum->modules, (sum->nmodules + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	sum->modules = grown;
	memset(&grown[sum->nmodules], 0, sizeof(*grown));
	grown[sum->nmodules].module = module;
	return &grown[sum->nmodules++];
}

/* Blames LOST frames of stack S on MODULE, counting the stack once per module. */
static int blame(struct report_fp_summary *sum, const struct report_stack *s, const char *module,
		 size_t lost, const char **seen, size_t *nseen)
{
	struct report_fp_module *m = module_slot(sum, module);
	size_t i;

	if (!m)
		return -ENOMEM;
	m->frames_lost += lost;
	sum->frames_lost += lost;
	for (i = 0; i < *nseen; i++)
		if (seen[i] == m->module)
			return 0;
	seen[(*nseen)++] = m->module;
	m->stacks++;
	m->bytes += s->bytes;
	return 0;
}

static int stack_compare(struct report_fp_summary *sum, struct report_stack *s)
{
	size_t *d = malloc((s->nframes + 1) * sizeof(*d));
	const char **seen = malloc((s->nframes + 1) * sizeof(*seen));
	size_t nd, i = 0, k = 0, j, nseen = 0;
	int err = 0;

	if (!d || !seen) {
		err = -ENOMEM;
		goto out;
	}
	nd = physical(s->frames, s->nframes, d);
	s->fp_divergence = -1;
	while (i < nd) {
		if (k < s->nfp_frames && s->frames[d[i]].address == s->fp_frames[k].address) {
			i++;
			k++;
			continue;
		}
		if (s->fp_divergence < 0)
			s->fp_divergence = (long)d[i];
		for (j = i + 1; k < s->nfp_frames && j < nd; j++)
			if (s->frames[d[j]].address == s->fp_frames[k].address)
				break;
		if (k >= s->nfp_frames) {
			/* a chain that ended at rbp 0 stopped where the psABI says the
			 * frame chain ends: the DWARF walk's outer frames (__libc_start_main,
			 * _start) are not frames it lost */
			if (s->fp_complete && s->fp_divergence == (long)d[i])
				s->fp_divergence = -1;
			if (s->fp_complete)
				break;
			j = nd;
		}
		/* the callee just inside the run kept no frame pointer */
		err = blame(sum, s, s->frames[d[i ? i - 1 : 0]].module, j - i, seen, &nseen);
		if (err)
			goto out;
		i = j;
	}
	if (s->fp_divergence < 0 && k != s->nfp_frames && (nd == 0 || !is_root(s->frames[d[nd - 1]].function)))
		s->fp_divergence = (long)s->nframes; /* FP walk went on past the end */
	sum->stacks++;
	sum->agreeing += s->fp_divergence < 0;
out:
	free(d);
	free(seen);
	return err;
}

static int module_cmp(const void *a, const void *b)
{
	const struct report_fp_module *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->stacks < y->stacks ? 1 : x->stacks > y->stacks ? -1 : 0;
}

int fp_compare(struct report *r, struct report_fp_summary *sum)
{
	size_t i;
	int err;

	memset(sum, 0, sizeof(*sum));
	sum->present = true;
	for (i = 0; i < r->nstacks; i++) {
		err = stack_compare(sum, &r->stacks[i]);
		if (err)
			return err;
	}
	if (sum->nmodules)
		qsort(sum->modules, sum->nmodules, sizeof(*sum->modules), module_cmp);
	r->fp = sum;
	return 0;
}

void fp_summary_free(struct report_fp_summary *sum)
{
	free(sum->modules);
	sum->modules = NULL;
	sum->nmodules = 0;
}
