/* What the agent keeps per traced process between reports, and the
 * reports it makes of one: its total at each look, the highest total
 * seen and the heap then (a snapshot of its aggregated stacks, taken at
 * most every DWLEAK_AGENT_PEAK_S), a growth history for what grew most
 * before an OOM kill, its leak checks; and --max-stacks: past that many
 * stacks, the least recently grown (the oldest newest allocation) are
 * folded into one counted [evicted] stack, in every report and in
 * /metrics, their bytes kept in the totals.  agent/stack_table.c does the
 * folding, fed in order of growth. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "leakcheck.h"
#include "stack_table.h"

/* Snapshots of the growth history kept (the first at attach), and the
 * stacks each holds: the 1,024 largest (history.h says what that costs
 * what grew from below them). */
#define HISTORY_LEN 11
#define HISTORY_STACKS 1024
/* The growth rate is said once the history spans this long. */
#define RATE_MIN_SPAN_S 10.0

int agent_books_open(struct agent *a, struct agent_proc *p)
{
	int err = agent_history_new(a->env->history_s, HISTORY_LEN, HISTORY_STACKS, &p->hist);

	/* the first snapshot: nothing outstanding that the agent saw */
	return err ?: agent_history_offer(p->hist, agent_now(), 0, NULL, 0) < 0 ? -ENOMEM : 0;
}

void agent_report_free(struct agent_report *r)
{
	if (r && r->r == &r->sr.b.r)
		session_report_free(&r->sr);
	if (r)
		memset(r, 0, sizeof(*r));
}

void agent_books_free(struct agent_proc *p)
{
	if (!p)
		return;
	agent_history_free(p->hist);
	free(p->pk.st);
	agent_report_free(p->peak_final);
	free(p->peak_final);
	free(p->matched);
	free(p->memcg);
	free(p);
}

/* A stack's bytes and allocations as its report says them: the estimates
 * with --sample-bytes, each rounded (so sums over stacks equal the
 * report's totals). */
static uint64_t stack_bytes(const struct agent *a, const struct ledger_stack *g)
{
	return a->set.sample_bytes ? (uint64_t)llround(g->est_bytes) : g->bytes;
}

static uint64_t stack_allocs(const struct agent *a, const struct ledger_stack *g)
{
	return a->set.sample_bytes ? (uint64_t)llround(g->est_count) : g->count;
}

/* --- --max-stacks --- */

/* What a fold keeps: the stacks (dense, malloc'd), and the sums of those
 * folded into [evicted] (COUNT their allocations). */
struct fold {
	struct ledger_stack *st;
	size_t n;
	struct ledger_stack evicted;
	uint64_t nevicted;
	uint64_t evicted_bytes, evicted_allocs; /* as the report says them */
};

static const struct ledger_stack *fold_src;

static int by_growth(const void *x, const void *y)
{
	const struct ledger_stack *a = &fold_src[*(const size_t *)x], *b = &fold_src[*(const size_t *)y];

	if (a->newest_ts != b->newest_ts)
		return a->newest_ts < b->newest_ts ? -1 : 1;
	return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* Adds the counts of G into the [evicted] sums E. */
static void evicted_add(struct ledger_stack *e, const struct ledger_stack *g)
{
	e->bytes += g->bytes;
	e->count += g->count;
	e->est_bytes += g->est_bytes;
	e->est_count += g->est_count;
	e->checked |= g->checked;
	for (int k = 0; k < LEAK_KIND_COUNT; k++) {
		e->leak_bytes[k] += g->leak_bytes[k];
		e->leak_count[k] += g->leak_count[k];
	}
}

/*
 * The stacks of T (slots with count 0 are empty) cut to the --max-stacks
 * most recently grown, into *F.  The table is fed the stacks from the
 * least to the most recently grown, so it folds exactly those past the
 * bound, and counts them.  Returns 0 or -ENOMEM.
 */
static int fold_stacks(const struct agent *a, const struct ledger_stacks *t, struct fold *f)
{
	size_t max = (size_t)a->env->max_stacks, n = 0, i;
	struct stack_table *tab = NULL;
	struct stack_table_evicted ev;
	size_t *order;
	int err = 0;

	memset(f, 0, sizeof(*f));
	f->st = calloc(t->n + 1, sizeof(*f->st));
	order = calloc(t->n + 1, sizeof(*order));
	if (!f->st || !order) {
		free(order);
		free(f->st);
		return -ENOMEM;
	}
	for (i = 0; i < t->cap; i++)
		if (t->slots[i].count)
			order[n++] = i;
	if (!max || n <= max) {
		for (i = 0; i < n; i++)
			f->st[f->n++] = t->slots[order[i]];
		free(order);
		return 0;
	}
	fold_src = t->slots;
	qsort(order, n, sizeof(*order), by_growth);
	err = stack_table_new(max, NULL, NULL, &tab);
	for (i = 0; !err && i < n; i++) {
		const struct ledger_stack *g = &t->slots[order[i]];

		err = stack_table_add(tab, order[i], stack_bytes(a, g), stack_allocs(a, g));
	}
	for (i = 0; !err && i < n; i++) {
		const struct ledger_stack *g = &t->slots[order[i]];

		if (stack_table_get(tab, order[i]))
			f->st[f->n++] = *g;
		else
			evicted_add(&f->evicted, g);
	}
	if (!err) {
		stack_table_evicted(tab, &ev);
		f->nevicted = ev.stacks;
		f->evicted_bytes = ev.bytes;
		f->evicted_allocs = ev.allocations;
	}
	stack_table_free(tab);
	free(order);
	if (err) {
		free(f->st);
		memset(f, 0, sizeof(*f));
	}
	return err;
}

/* Appends the [evicted] stack of F to R's report for process PID: its
 * bytes in the totals and in the process's, its kinds when the report
 * has them.  Returns 0 or -ENOMEM. */
static int evicted_append(struct agent_report *r, pid_t pid, const struct fold *f)
{
	struct built *b = &r->sr.b;
	struct stack_table_evicted ev = { f->evicted_bytes, f->evicted_allocs, f->nevicted };
	struct report_stack *g, *s;

	if (!f->nevicted)
		return 0;
	g = realloc(b->stacks, (b->r.nstacks + 1) * sizeof(*g));
	if (!g)
		return -ENOMEM;
	b->stacks = b->r.stacks = g;
	s = &g[b->r.nstacks++];
	stack_table_evicted_stack(&ev, pid, s);
	if (b->r.leak_check.present && f->evicted.checked) {
		s->has_leak_kinds = true;
		for (int k = 0; k < LEAK_KIND_COUNT; k++)
			for (int rk = 0; rk < REPORT_LEAK_KIND_COUNT; rk++)
				if (!strcmp(leak_kind_name((enum leak_kind)k), report_leak_kind_names[rk])) {
					s->leak_kinds[rk].bytes += f->evicted.leak_bytes[k];
					s->leak_kinds[rk].allocations += f->evicted.leak_count[k];
					b->r.leak_check.kinds[rk].bytes += f->evicted.leak_bytes[k];
					b->r.leak_check.kinds[rk].allocations += f->evicted.leak_count[k];
				}
	}
	b->r.totals.outstanding_bytes += s->bytes;
	b->r.totals.outstanding_allocations += s->allocations;
	b->r.totals.stacks += f->nevicted;
	for (size_t i = 0; i < b->r.nprocesses; i++)
		if (b->r.processes[i].pid == pid) {
			b->r.processes[i].bytes += s->bytes;
			b->r.processes[i].allocations += s->allocations;
		}
	r->evicted_stacks = f->nevicted;
	return 0;
}

/* --- Reports --- */

int agent_report_build(struct agent *a, struct agent_proc *p, bool peak, struct growth *growth,
		       struct agent_report *out)
{
	struct session_report_opts o = { .pid = p->pid, .growth = growth };
	struct ledger_stacks agg = { 0 }, given;
	struct fold f = { 0 };
	int err;

	memset(out, 0, sizeof(*out));
	out->comm = p->comm;
	if (peak && p->peak_final) {
		/* named at its exit; borrowed */
		out->r = p->peak_final->r;
		out->evicted_stacks = p->peak_final->evicted_stacks;
		return 0;
	}
	if (peak && p->pk.st) {
		f.st = p->pk.st;
		f.n = p->pk.n;
		f.evicted = p->pk.evicted;
		f.nevicted = p->pk.evicted_stacks;
		f.evicted_bytes = stack_bytes(a, &p->pk.evicted);
		f.evicted_allocs = stack_allocs(a, &p->pk.evicted);
	} else {
		err = session_aggregate(a->s, p->pid, &agg);
		err = err ?: fold_stacks(a, &agg, &f);
		ledger_stacks_free(&agg);
		if (err)
			return err;
	}
	given = (struct ledger_stacks){ f.st, f.n, f.n };
	o.stacks = &given;
	err = session_report(a->s, &o, &out->sr);
	out->r = &out->sr.b.r;
	err = err ?: evicted_append(out, p->pid, &f);
	if (f.st != p->pk.st)
		free(f.st);
	if (err)
		agent_report_free(out);
	return err;
}

void agent_books_final(struct agent *a, struct agent_proc *p)
{
	struct agent_report *r;

	if (!p->pk.st || p->peak_final || !(r = calloc(1, sizeof(*r))))
		return;
	if (agent_report_build(a, p, true, NULL, r)) {
		free(r);
		return;
	}
	p->peak_final = r;
	free(p->pk.st); /* the report holds it now */
	p->pk.st = NULL;
}

/* --- The periodic look --- */

/* Keeps AGG (P's stacks now, TOTAL bytes) as its peak snapshot. */
static void peak_keep(struct agent *a, struct agent_proc *p, const struct ledger_stacks *agg, uint64_t total,
		      double now)
{
	struct fold f;

	if (fold_stacks(a, agg, &f))
		return; /* the older snapshot stays */
	free(p->pk.st);
	p->pk = (struct agent_peak){ .st = f.st, .n = f.n, .total = total, .t = now, .wall = time(NULL),
				     .evicted = f.evicted, .evicted_stacks = f.nevicted };
}

/* Offers P's stacks now to its growth history. */
static void history_offer(const struct agent *a, struct agent_proc *p, const struct ledger_stacks *agg,
			  uint64_t total, double now)
{
	struct agent_history_stack *st = calloc(agg->n + 1, sizeof(*st));
	size_t n = 0;

	if (!st)
		return;
	for (size_t i = 0; i < agg->cap; i++)
		if (agg->slots[i].count)
			st[n++] = (struct agent_history_stack){ agg->slots[i].stack_id, stack_bytes(a, &agg->slots[i]) };
	agent_history_offer(p->hist, now, total, st, n);
	free(st);
}

int agent_books_leak_check(struct agent *a, struct agent_proc *p)
{
	const struct proc *sp = NULL;
	const struct procs *ps = session_procs(a->s);
	int err = session_leak_check(a->s, p->pid);

	for (size_t i = ps->n; i-- > 0 && !sp;)
		if (ps->v[i]->pid == p->pid)
			sp = ps->v[i];
	p->t_check = agent_now();
	if (!err) {
		p->checked = true;
		p->t_check_wall = (double)time(NULL);
		if (sp && isfinite(sp->check.pause_ms))
			agent_histogram_observe(&a->pause, sp->check.pause_ms / 1e3);
	}
	return err;
}

void agent_books_tick(struct agent *a, double now)
{
	for (size_t i = 0; i < a->nprocs; i++) {
		struct agent_proc *p = a->procs[i];
		struct ledger_stacks agg;
		uint64_t total = 0;

		if (p->exited || session_aggregate(a->s, p->pid, &agg))
			continue;
		for (size_t k = 0; k < agg.cap; k++)
			if (agg.slots[k].count)
				total += stack_bytes(a, &agg.slots[k]);
		p->total = total;
		if (total > p->peak)
			p->peak = total;
		/* a higher heap than the one kept, when the last was taken long
		 * enough ago: naming is left for when it is asked for */
		if (total > p->pk.total && (!p->pk.st || now - p->pk.t >= a->env->peak_every_s))
			peak_keep(a, p, &agg, total, now);
		history_offer(a, p, &agg, total, now);
		ledger_stacks_free(&agg);
		if (a->env->leak_check_every_s &&
		    now - (p->t_check ? p->t_check : p->t_attached) >= a->env->leak_check_every_s)
			agent_books_leak_check(a, p);
	}
}

/* --- /metrics --- */

int agent_books_metrics(struct agent *a, struct agent_proc *p, struct agent_metrics_proc *out)
{
	uint64_t counters[CNT_COUNT] = { 0 };
	const struct procs *ps = session_procs(a->s);
	struct ledger_stacks agg;
	int err = session_aggregate(a->s, p->pid, &agg);

	if (err)
		return err;
	memset(out, 0, sizeof(*out));
	out->pid = p->pid;
	out->comm = p->comm;
	for (size_t i = 0; i < agg.cap; i++) {
		const struct ledger_stack *g = &agg.slots[i];

		if (!g->count)
			continue;
		out->outstanding_bytes += stack_bytes(a, g);
		out->outstanding_allocations += stack_allocs(a, g);
		out->stacks++;
		out->unwind_errors += session_stack_error(a->s, g->stack_id);
		for (int k = 0; p->checked && k < LEAK_KIND_COUNT; k++)
			for (int rk = 0; rk < REPORT_LEAK_KIND_COUNT; rk++)
				if (!strcmp(leak_kind_name((enum leak_kind)k), report_leak_kind_names[rk])) {
					out->leak_kinds[rk].bytes += g->leak_bytes[k];
					out->leak_kinds[rk].allocations += g->leak_count[k];
				}
	}
	ledger_stacks_free(&agg);
	if (a->env->max_stacks && out->stacks > (uint64_t)a->env->max_stacks)
		out->evicted_stacks = out->stacks - (uint64_t)a->env->max_stacks;
	/* as a report counts them: the rings' losses and its own records lost */
	session_counters(a->s, counters);
	out->dropped_events = counters[CNT_RING_FULL] + counters[CNT_EVENTS_LOST];
	for (size_t i = ps->n; i-- > 0;)
		if (ps->v[i]->pid == p->pid) {
			out->dropped_events += ps->v[i]->ledger.oom;
			break;
		}
	out->growth_bytes_per_second =
		p->exited ? NAN : agent_history_rate(p->hist, agent_now(), out->outstanding_bytes, RATE_MIN_SPAN_S);
	out->peak_bytes = p->peak > out->outstanding_bytes ? p->peak : out->outstanding_bytes;
	out->has_leak_check = p->checked;
	out->leak_check_time_seconds = p->t_check_wall;
	return 0;
}
