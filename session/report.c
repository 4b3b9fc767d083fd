/* A session's report of what is outstanding now: the running processes
 * checked for leaks first (--leak-check), every record applied and every
 * walk moved out of the kernel, then each process's ledger aggregated by
 * stack and named through its mappings, and the report built (build.c)
 * with what the trace lost and the limits it hit. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "names.h"
#include "session_private.h"

/*
 * --leak-check: why some of P's outstanding blocks have no kind, as the
 * report says it (malloc'd), or NULL when every one has (or P is not
 * traced, which the report says otherwise).
 */
static char *unchecked_why(const struct proc *p, bool sampled)
{
	const struct alloc_table *t = &p->ledger.allocs;
	char *why = NULL;
	size_t i, n = 0;
	int r;

	if (p->untraced || !p->probed)
		return NULL;
	for (i = 0; i < t->cap; i++)
		n += t->slots[i].addr && !t->slots[i].leak;
	/* sampled, the ledger holds only the sample: a failed check leaves
	 * every block unclassified, however few were sampled */
	if (sampled && p->check_err && p->check_err != -ESRCH && !p->check.done) {
		if (p->check_err == -ENOTSUP)
			r = asprintf(&why, "a sampled trace's leak check needs the preload library's index of every "
					   "block, and pid %d is traced with uprobes (see the tracing line): run it "
					   "without --sample-bytes, or under the library: none of its blocks classified",
				     p->pid);
		else
			r = asprintf(&why, "its leak check failed (%s): none of its blocks classified",
				     p->check.no_index[0] ? p->check.no_index : strerror(-p->check_err));
		return r < 0 ? NULL : why;
	}
	if (!n)
		return NULL;
	if (p->check.done && p->check.index_in_pause)
		r = asprintf(&why, "%zu blocks allocated after its leak check at its exit (by its atexit "
				   "handlers or destructors)", n);
	else if (p->check.done)
		r = asprintf(&why, "%zu blocks allocated since its last leak check", n);
	else if (p->check_err)
		r = asprintf(&why, "its leak check failed (%s): %zu blocks not classified", strerror(-p->check_err),
			     n);
	else if (p->exited)
		r = asprintf(&why, "it ended before a leak check could run (dwleak -p does not stop it at its "
				   "exit: run it under dwleak -- CMD, or check it with -i while it runs): %zu "
				   "blocks not classified", n);
	else
		r = asprintf(&why, "%zu blocks not classified", n);
	return r < 0 ? NULL : why;
}

/* Adds process check C's memory read, pause and RSS account to O. */
static void leak_check_totals(struct build_opts *o, const struct leak_scan_result *c)
{
	static const enum report_rss_part part_of[PROC_RSS_PART_COUNT] = {
		[PROC_RSS_TRACKED] = REPORT_RSS_TRACKED_BLOCKS,
		[PROC_RSS_HEAP_UNTRACKED] = REPORT_RSS_ALLOCATOR_UNTRACKED,
		[PROC_RSS_STACKS] = REPORT_RSS_STACKS,
		[PROC_RSS_CODE] = REPORT_RSS_CODE_AND_DATA,
		[PROC_RSS_DATA] = REPORT_RSS_CODE_AND_DATA,
		[PROC_RSS_OTHER] = REPORT_RSS_OTHER_MAPPINGS,
	};
	size_t k;

	if (!c->done)
		return;
	o->scanned_bytes += c->scanned_bytes;
	if (c->pause_ms > o->pause_ms)
		o->pause_ms = c->pause_ms; /* the longest any process was stopped */
	if (c->scan_ms > o->scan_ms)
		o->scan_ms = c->scan_ms;
	o->checks++;
	o->snapshot_checks += c->snapshot;
	if (c->indexed) {
		o->indexed_checks++;
		for (k = 0; k < LEAK_KIND_COUNT; k++) {
			o->indexed.bytes[k] += c->totals.bytes[k];
			o->indexed.blocks[k] += c->totals.blocks[k];
		}
		o->indexed.unsure_bytes += c->totals.unsure_bytes;
		o->indexed.unsure_blocks += c->totals.unsure_blocks;
	}
	if (!c->rss_known)
		return;
	o->rss.present = true;
	o->rss.rss_bytes += c->rss.rss;
	for (k = 0; k < PROC_RSS_PART_COUNT; k++)
		o->rss.parts[part_of[k]] += c->rss.bytes[k];
}

/* A loss line for each debug file a debuginfod lookup did not get while
 * this report's frames (or an earlier report's) were named. */
static int fetch_losses_say(struct session *s, struct built *b)
{
	const struct sym_fetch_miss *m;
	size_t n = symbolizer_fetch_misses(s->sym, &m);
	char *text;
	int err = 0;

	for (size_t i = 0; i < n && !err; i++) {
		err = sym_fetch_miss_text(&m[i], &text);
		err = err ?: build_loss_add(b, "debuginfo_not_fetched", 0, 1, 0, text);
		free(text);
	}
	return err;
}

/* What one report holds per process while it is built. */
struct per_proc {
	struct ledger_stacks stacks;
	struct stack_names names;
	struct stack_source src;
};

int session_report(struct session *s, const struct session_report_opts *opts, struct session_report *out)
{
	static const struct session_report_opts whole = { .check_first = true };
	const struct session_settings *set = s->set;
	static const char *counter_names[CNT_COUNT];
	uint64_t now = session_now_ns();
	size_t n = s->procs.n, i, k = 0;
	struct per_proc *pp = calloc(n + 1, sizeof(*pp));
	struct build_proc *bps = calloc(n + 1, sizeof(*bps));
	char **notes = calloc(n + 1, sizeof(*notes));
	struct build_opts o = {
		.pid = s->tgt.pid,
		.command = s->tgt.command,
		.unwind_mode = set->unwind,
		.unwind_name = set->unwind_name,
		.sample_bytes = set->sample_bytes,
		.now_s = (double)now / 1e9,
		.now_ns = now,
		.duration_s = (double)now / 1e9 - (s->t_traced ? s->t_traced : s->t_start),
		.growth = opts && opts->growth ? opts->growth : set->growth ? &s->growth : NULL,
		.supp = set->supp,
		.counters = out->counters,
		.counter_names = counter_names,
		.leak_check = set->leak_check,
	};
	const struct ledger_stacks *given;
	struct unwinder_stats limits;
	int err = pp && bps && notes ? 0 : -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (!opts)
		opts = &whole;
	given = opts->pid ? opts->stacks : NULL;
	if (opts->pid) {
		const struct proc *only = procs_find(&s->procs, opts->pid);

		if (!only)
			err = -ENOENT;
		else {
			o.pid = only->pid;
			o.command = only->command;
		}
	}
	out->notes = notes;
	out->nnotes = notes ? n : 0;
	o.counters = out->counters;
	for (i = 0; i < CNT_COUNT; i++)
		counter_names[i] = probes_counter_name((unsigned int)i);
	/* --leak-check: the processes still running are checked now (those
	 * gone were checked when they exited) */
	for (i = 0; !err && opts->check_first && i < n; i++)
		if (!s->procs.v[i]->exited && (!opts->pid || s->procs.v[i]->pid == opts->pid))
			proc_leak_check(&s->sv, s->procs.v[i], "before the report");
	session_drain(s);
	session_stacks_move(s); /* every walk a record names, into the store */
	probes_counters(s->probes, out->counters);
	unwinder_stats(s->uw, &limits);
	o.tables_dropped = limits.dropped_full;
	o.procs_without_table = limits.slots_none;
	o.mappings_unrecorded = limits.mappings_full;
	for (i = 0; set->leak_check && i < n; i++)
		if (!opts->pid || s->procs.v[i]->pid == opts->pid)
			leak_check_totals(&o, &s->procs.v[i]->check);
	for (i = 0; !err && i < n; i++) {
		const struct proc *p = s->procs.v[i];

		if (opts->pid && p->pid != opts->pid)
			continue;
		/* counted where the records are applied */
		out->counters[CNT_FREE_UNKNOWN] += p->ledger.allocs.free_unknown;
		out->counters[CNT_REPLACED] += p->ledger.allocs.replaced;
		out->counters[CNT_RESIZED] += p->ledger.allocs.resized;
		/* the host's own snapshot of it, or its ledger now */
		if (!given)
			err = ledger_aggregate(&p->ledger, now, set->min_age_ns, set->sample_bytes, &pp[k].stacks);
		err = err ?: stack_names_open(&pp[k].names, s->stacks, s->probes, s->uw, s->sym, (uint32_t)p->pid,
					      p->maps_kept, p->maps, p->nmaps, &pp[k].src);
		if (set->leak_check)
			notes[k] = unchecked_why(p, set->sample_bytes != 0);
		/* an untraced process is followed all the same: its state is
		 * its life's, the reason says its allocations are missing */
		bps[k] = (struct build_proc){ p->pid, p->command, given ? given : &pp[k].stacks,
					      &pp[k].src, p->parent,
					      p->exited ? REPORT_PROCESS_ENDED : REPORT_PROCESS_RUNNING,
					      p->exit_status, p->untraced, notes[k], p->ledger.oom,
					      p->table_dropped, p->rings.dropped, p->rings.no_ring, p->rings.bad,
					      p->rings.why[0] ? p->rings.why : p->rings.ring_why[0] ? p->rings.ring_why : NULL };
		k++;
	}
	err = err ?: build_report(bps, k, &o, &out->b);
	err = err ?: fetch_losses_say(s, &out->b);
	for (i = 0; pp && i < n; i++) {
		stack_names_free(&pp[i].names);
		ledger_stacks_free(&pp[i].stacks);
	}
	free(pp);
	free(bps);
	return err;
}

int session_aggregate(struct session *s, pid_t pid, struct ledger_stacks *out)
{
	const struct proc *p = procs_find(&s->procs, pid);

	memset(out, 0, sizeof(*out));
	if (!p)
		return -ENOENT;
	session_drain(s);
	return ledger_aggregate(&p->ledger, session_now_ns(), s->set->min_age_ns, s->set->sample_bytes, out);
}

void session_report_free(struct session_report *r)
{
	size_t i;

	build_free(&r->b);
	for (i = 0; i < r->nnotes; i++)
		free(r->notes[i]);
	free(r->notes);
	memset(r, 0, sizeof(*r));
}
