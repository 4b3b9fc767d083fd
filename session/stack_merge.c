/* The report builder's last step for stacks: walks that read the same
 * once cut are merged into one report stack (session/build.c). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constants.h"
#include "stack_merge.h"

static bool frames_same(const struct report_frame *a, size_t na, const struct report_frame *b, size_t nb)
{
	size_t i;

	if (na != nb)
		return false;
	for (i = 0; i < na; i++)
		if (a[i].address != b[i].address || a[i].inlined != b[i].inlined)
			return false;
	return true;
}

/* Whether X and Y, of processes PX and PY, read the same: one stack. */
static bool stacks_same(const struct report_stack *x, size_t px, const struct report_stack *y, size_t py)
{
	return px == py && x->allocator == y->allocator && x->unwind_error == y->unwind_error &&
	       x->truncated == y->truncated && x->fp_complete == y->fp_complete &&
	       frames_same(x->frames, x->nframes, y->frames, y->nframes) &&
	       frames_same(x->fp_frames, x->nfp_frames, y->fp_frames, y->nfp_frames);
}

/* Adds what S counts into T, the stack it is merged into: bytes, the
 * leak check's kinds and residency (left out, S's blocks would read as
 * "not classified"), age and growth. */
static void stack_merge_into(struct report_stack *t, const struct report_stack *s)
{
	size_t k;

	t->bytes += s->bytes;
	t->allocations += s->allocations;
	/* independent samples: variances add (NAN, exact, stays NAN) */
	t->bytes_stderr = hypot(t->bytes_stderr, s->bytes_stderr);
	if (s->oldest_age_s > t->oldest_age_s)
		t->oldest_age_s = s->oldest_age_s;
	t->growth_bytes_per_s += s->growth_bytes_per_s;
	for (k = 0; k < REPORT_LEAK_KIND_COUNT; k++) {
		t->leak_kinds[k].bytes += s->leak_kinds[k].bytes;
		t->leak_kinds[k].allocations += s->leak_kinds[k].allocations;
		t->leak_kinds_stderr[k] = hypot(t->leak_kinds_stderr[k], s->leak_kinds_stderr[k]);
	}
	t->leak_unsure.bytes += s->leak_unsure.bytes;
	t->leak_unsure.allocations += s->leak_unsure.allocations;
	t->has_leak_kinds |= s->has_leak_kinds;
	if (s->has_residency) {
		t->residency.resident += s->residency.resident;
		t->residency.swapped += s->residency.swapped;
		t->residency.untouched += s->residency.untouched;
		t->has_residency = true;
	}
}

/* Identical stacks are found through a hash of their frame addresses. */
int stacks_merge(struct report_stack *s, size_t *nstacks, const size_t *proc)
{
	size_t n = *nstacks, cap = 16, i, j, k = 0;
	size_t *slots, *keep;

	while (cap < 2 * n)
		cap *= 2;
	slots = malloc(cap * sizeof(*slots));
	keep = malloc((n + 1) * sizeof(*keep));
	if (!slots || !keep) {
		free(slots);
		free(keep);
		return -ENOMEM;
	}
	memset(slots, 0xff, cap * sizeof(*slots));
	for (i = 0; i < n; i++) {
		uint64_t h = 0x9e3779b97f4a7c15ull * (proc[i] + 1);

		for (j = 0; j < s[i].nframes; j++)
			h = (h ^ s[i].frames[j].address) * FNV64_PRIME;
		for (j = h & (cap - 1); slots[j] != SIZE_MAX; j = (j + 1) & (cap - 1)) {
			struct report_stack *t = &s[keep[slots[j]]];

			if (!stacks_same(t, proc[keep[slots[j]]], &s[i], proc[i]))
				continue;
			stack_merge_into(t, &s[i]);
			break;
		}
		if (slots[j] == SIZE_MAX) {
			slots[j] = k;
			keep[k++] = i;
		}
	}
	for (i = 0; i < k; i++)
		s[i] = s[keep[i]];
	*nstacks = k;
	free(slots);
	free(keep);
	return 0;
}
