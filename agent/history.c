/* A process's snapshots of outstanding bytes (history.h): a ring of at
 * most LEN snapshots, each a sorted array of its largest stacks, so a
 * lookup by key is a binary search and a process costs at most LEN x
 * MAX_STACKS entries however many stacks it makes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"

struct snapshot {
	double t;
	uint64_t total;
	struct agent_history_stack *st; /* sorted by key */
	size_t n;
};

/*
 * Invariants: RING holds COUNT snapshots, the oldest at HEAD, in the order
 * they were taken (times not decreasing); COUNT <= LEN; each has at most
 * MAX_STACKS stacks.
 */
struct agent_history {
	double period;
	size_t len, max_stacks;
	struct snapshot *ring;
	size_t head, count;
};

int agent_history_new(double period_s, size_t len, size_t max_stacks, struct agent_history **out)
{
	struct agent_history *h;

	*out = NULL;
	if (len < 2 || !max_stacks || !(period_s >= 0))
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->ring = calloc(len, sizeof(*h->ring));
	if (!h->ring) {
		free(h);
		return -ENOMEM;
	}
	h->period = period_s;
	h->len = len;
	h->max_stacks = max_stacks;
	*out = h;
	return 0;
}

void agent_history_free(struct agent_history *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->len; i++)
		free(h->ring[i].st);
	free(h->ring);
	free(h);
}

static const struct snapshot *nth(const struct agent_history *h, size_t i)
{
	return &h->ring[(h->head + i) % h->len];
}

static int by_bytes_desc(const void *a, const void *b)
{
	const struct agent_history_stack *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return (x->key > y->key) - (x->key < y->key);
}

static int by_key(const void *a, const void *b)
{
	const struct agent_history_stack *x = a, *y = b;

	return (x->key > y->key) - (x->key < y->key);
}

int agent_history_offer(struct agent_history *h, double now, uint64_t total, const struct agent_history_stack *st,
			size_t n)
{
	struct agent_history_stack *copy = NULL;
	struct snapshot *s;
	size_t keep = n < h->max_stacks ? n : h->max_stacks;

	if (h->count && now - nth(h, h->count - 1)->t < h->period)
		return 0;
	if (n) {
		copy = malloc(n * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, st, n * sizeof(*copy));
		/* the largest first, then only those kept, by key */
		if (keep < n)
			qsort(copy, n, sizeof(*copy), by_bytes_desc);
		qsort(copy, keep, sizeof(*copy), by_key);
		if (keep < n) {
			struct agent_history_stack *shrunk = realloc(copy, keep * sizeof(*copy));

			copy = shrunk ? shrunk : copy;
		}
	}
	if (h->count == h->len) {
		/* the oldest goes; its slot takes the new one */
		s = &h->ring[h->head];
		free(s->st);
		h->head = (h->head + 1) % h->len;
		h->count--;
	}
	s = &h->ring[(h->head + h->count) % h->len];
	*s = (struct snapshot){ .t = now, .total = total, .st = copy, .n = keep };
	h->count++;
	return 1;
}

size_t agent_history_count(const struct agent_history *h)
{
	return h->count;
}

const struct agent_history_stack *agent_history_oldest(const struct agent_history *h, double *t, uint64_t *total,
						       size_t *n)
{
	const struct snapshot *s;

	*n = 0;
	if (!h->count)
		return NULL;
	s = nth(h, 0);
	*t = s->t;
	*total = s->total;
	*n = s->n;
	return s->st;
}

double agent_history_rate(const struct agent_history *h, double now, uint64_t total, double min_span_s)
{
	/* the oldest snapshot is the longest span: use it if it is long enough */
	const struct snapshot *s = h->count ? nth(h, 0) : NULL;

	if (!s || now - s->t < min_span_s || now <= s->t)
		return NAN;
	return ((double)total - (double)s->total) / (now - s->t);
}

/* KEY's bytes in the sorted snapshot S, 0 when it does not hold it. */
static uint64_t bytes_then(const struct snapshot *s, uint64_t key)
{
	const struct agent_history_stack probe = { .key = key }, *hit;

	if (!s || !s->n)
		return 0;
	hit = bsearch(&probe, s->st, s->n, sizeof(*s->st), by_key);
	return hit ? hit->bytes : 0;
}

static int by_growth_desc(const void *a, const void *b)
{
	const struct agent_history_growth *x = a, *y = b;
	uint64_t gx = x->now - x->then, gy = y->now - y->then;

	if (gx != gy)
		return gx < gy ? 1 : -1;
	return (x->key > y->key) - (x->key < y->key);
}

int agent_history_grew_most(const struct agent_history *h, const struct agent_history_stack *now_st, size_t n,
			    size_t k, struct agent_history_growth *out, double *since)
{
	const struct snapshot *s = h->count ? nth(h, 0) : NULL;
	struct agent_history_growth *all;
	size_t m = 0, i;

	*since = s ? s->t : NAN;
	if (!n || !k)
		return 0;
	all = malloc(n * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		uint64_t then = bytes_then(s, now_st[i].key);

		if (now_st[i].bytes > then)
			all[m++] = (struct agent_history_growth){ now_st[i].key, then, now_st[i].bytes };
	}
	qsort(all, m, sizeof(*all), by_growth_desc);
	if (m > k)
		m = k;
	memcpy(out, all, m * sizeof(*out));
	free(all);
	return (int)m;
}
