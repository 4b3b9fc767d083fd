/* The report builder: aggregated stacks named frame by frame, with how
 * each walk ended, growth, suppressions, the frame-pointer comparison,
 * and one line per thing the trace lost or limit it hit. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "pc_memo.h"
#include "compare.h"
#include "constants.h"
#include "preload.h"
#include "probes.h"
#include "stack_merge.h"

void build_free(struct built *b)
{
	size_t i;

	pc_memo_free(b->pcs);
	for (i = 0; i < b->nlosses; i++)
		free((char *)b->losses[i].text);
	free(b->losses);
	frame_arena_free(&b->arena);
	free(b->stacks);
	free(b->spans);
	free(b->processes);
	fp_summary_free(&b->fp);
	free(b->supp);
	memset(b, 0, sizeof(*b));
}

/* Ends of stacks that have no walk_end: no frames at all. */
#define END_NOT_STORED (-1)  /* DWLEAK_STACK_NOT_STORED: stacks map full */
#define END_WALKER_BUSY (-2) /* DWLEAK_STACK_WALKER_BUSY */
#define END_NOT_WALKED (-3)  /* DWLEAK_STACK_NOT_WALKED */
#define END_MISSING (-4)     /* a walk's id the source does not have */

/*
 * Frames in dwleak's preload library (libdwleak-preload.so) are left out:
 * a walk from its sites starts in its caller's frame already, but a walk
 * from a uprobe on the allocator behind it (dwleak --no-preload, or -p on
 * a process the sites cannot serve) passes through its wrapper, and a
 * report must read the same either way.
 */
static bool preload_frame(struct built *bt, const struct report_frame *f)
{
	const char *b;

	/* frames come in runs from one module, its path one string */
	if (f->module == bt->preload_seen.module && f->module)
		return bt->preload_seen.is;
	b = f->module ? strrchr(f->module, '/') : NULL;
	b = b ? b + 1 : f->module;
	bt->preload_seen.module = f->module;
	bt->preload_seen.is = b && !strncmp(b, DWLEAK_PRELOAD_NAME, strlen(DWLEAK_PRELOAD_NAME));
	return bt->preload_seen.is;
}

/* Appends the named frames of stack ID; its walk's end (or one of the
 * END_* above) in *END. */
static int frames_of(const struct stack_source *src, struct built *b, uint64_t id, int *end)
{
	struct stack_trace st;
	size_t first, n;
	uint32_t i;
	int err;

	*end = id == DWLEAK_STACK_WALKER_BUSY  ? END_WALKER_BUSY
	       : id == DWLEAK_STACK_NOT_WALKED ? END_NOT_WALKED
	       : id == DWLEAK_STACK_NOT_STORED ? END_NOT_STORED
					       : END_MISSING;
	if (*end != END_MISSING || src->walk(src->ctx, id, &st))
		return 0;
	for (i = 0; i < st.nframes && i < DWLEAK_MAX_FRAMES; i++) {
		size_t before = b->arena.nframes;
		bool ret = i > 0 && !(st.pcs[i] & DWLEAK_FRAME_EXACT);
		uint64_t pc = st.pcs[i] & ~DWLEAK_FRAME_EXACT;

		/* a pc named for an earlier stack of the process: its frames again */
		if (b->pcs && pc_memo_get(b->pcs, pc, ret, &first, &n)) {
			err = frame_arena_add_again(&b->arena, first, n);
			if (err)
				return err;
			continue;
		}
		err = src->name(src->ctx, &b->arena, pc, ret);
		if (err)
			return err;
		if (b->arena.nframes > before && preload_frame(b, &b->arena.frames[before]))
			b->arena.nframes = before;
		if (b->pcs)
			pc_memo_put(b->pcs, pc, ret, before, b->arena.nframes - before);
	}
	*end = st.end;
	return 0;
}

static const char *end_reason(int end)
{
	switch (end) {
	case END_WALKER_BUSY: return "skipped, a preempted probe held this CPU's walker buffers";
	case END_NOT_WALKED: return "not walked (DWLEAK_BENCH_NO_WALK=1)";
	case END_NOT_STORED: return "stack not stored (stacks map full)";
	case END_MISSING: return "stack lost by dwleak (a bug: please report it)";
	default: return probes_walk_end_reason((uint32_t)end);
	}
}

static bool is_c_alloc(uint32_t kind)
{
	return kind == ALLOC_MALLOC || kind == ALLOC_ALIGNED_ALLOC || kind == ALLOC_MEMALIGN ||
	       kind == ALLOC_POSIX_MEMALIGN;
}

static const char *kind_name(uint32_t kind)
{
#define KIND_NAME(e, name, frees) [e] = name,
	static const char *const names[ALLOC_KIND_COUNT] = { ALLOC_KIND_LIST(KIND_NAME) };
#undef KIND_NAME

	return kind < ALLOC_KIND_COUNT ? names[kind] : "unknown";
}

/*
 * Go's runtime runs C code called from Go (cgo) and its own work on the
 * thread's system stack (g0): in runtime.asmcgocall, systemstack, mcall
 * and morestack the stack pointer moves to another stack, which no CFI
 * describes, so frames past them would be wrong.  A wrong frame is worse
 * than a walk that stops and says why: the walk is cut there.
 */
static void go_switch_cut(const struct report_frame *fr, struct frame_span *span, struct report_stack *rs)
{
	static const char *const switches[] = { "runtime.asmcgocall", "runtime.systemstack", "runtime.mcall",
						"runtime.morestack" };
	size_t i, k;

	for (i = 0; i + 1 < span->n; i++) {
		/* every frame of every stack comes here: most are not Go's */
		if (!fr[i].function || fr[i].function[0] != 'r' || strncmp(fr[i].function, "runtime.", 8))
			continue;
		for (k = 0; k < sizeof(switches) / sizeof(switches[0]); k++) {
			if (strncmp(fr[i].function, switches[k], strlen(switches[k])))
				continue;
			span->n = i + 1;
			rs->truncated = false;
			rs->unwind_error = "Go's runtime switched stacks here: the goroutine frames that called "
					   "into C are not walked";
			return;
		}
	}
}

/* The leak check's verdicts of G's blocks in report stack RS: kinds by
 * name (leakcheck/ and report/ order them differently), scaled like the
 * stack's bytes under --sample-bytes; where the classified bytes are. */
static void leak_kinds_set(const struct build_opts *o, const struct ledger_stack *g, struct report_stack *rs)
{
	double scale = o->sample_bytes && g->bytes ? g->est_bytes / (double)g->bytes : 1.0;
	double cscale = o->sample_bytes && g->count ? g->est_count / (double)g->count : 1.0;
	size_t r, k;

	rs->has_leak_kinds = true;
	for (r = 0; r < REPORT_LEAK_KIND_COUNT; r++) {
		for (k = 0; k < LEAK_KIND_COUNT; k++) {
			if (strcmp(leak_kind_name((enum leak_kind)k), report_leak_kind_names[r]))
				continue;
			/* sampled: each kind's own estimate (its blocks, each
			 * weighted), whose error is known, not the stack's
			 * scale applied to its sampled bytes */
			rs->leak_kinds[r].bytes = o->sample_bytes ? (uint64_t)llround(g->est_leak_bytes[k])
								  : g->leak_bytes[k];
			rs->leak_kinds[r].allocations = (uint64_t)llround((double)g->leak_count[k] * cscale);
			rs->leak_kinds_stderr[r] = o->sample_bytes ? sqrt(g->var_leak_bytes[k]) : NAN;
		}
	}
	rs->leak_unsure.bytes = (uint64_t)llround((double)g->unsure_bytes * scale);
	rs->leak_unsure.allocations = (uint64_t)llround((double)g->unsure_count * cscale);
	if (g->checked) {
		rs->has_residency = true;
		rs->residency.resident = g->resident;
		rs->residency.swapped = g->swapped;
		rs->residency.untouched = g->untouched;
		/* sampled: the sampled blocks' pages scaled like their bytes, so
		 * that the parts add up to the stack's estimate */
		if (o->sample_bytes) {
			rs->residency.resident = (uint64_t)llround((double)g->resident * scale);
			rs->residency.swapped = (uint64_t)llround((double)g->swapped * scale);
			if (rs->residency.resident > rs->bytes)
				rs->residency.resident = rs->bytes;
			if (rs->residency.swapped > rs->bytes - rs->residency.resident)
				rs->residency.swapped = rs->bytes - rs->residency.resident;
			rs->residency.untouched = rs->bytes - rs->residency.resident - rs->residency.swapped;
		}
	}
}

/* A sampled trace's checks read every block from the library's index:
 * the totals are theirs, exact, where the stacks' kinds are estimates. */
static void leak_kinds_exact(const struct build_opts *o, struct report_leak_check *lc)
{
	size_t r, k;

	lc->kinds_exact = true;
	for (r = 0; r < REPORT_LEAK_KIND_COUNT; r++) {
		for (k = 0; k < LEAK_KIND_COUNT; k++) {
			if (strcmp(leak_kind_name((enum leak_kind)k), report_leak_kind_names[r]))
				continue;
			lc->kinds[r].bytes = o->indexed.bytes[k];
			lc->kinds[r].allocations = o->indexed.blocks[k];
		}
	}
	lc->exact_unsure.bytes = o->indexed.unsure_bytes;
	lc->exact_unsure.allocations = o->indexed.unsure_blocks;
}

static size_t physical_frames(const struct report_frame *fr, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += !fr[i].inlined;
	return k;
}

/* What a process's stacks lost, summed for its loss lines. */
struct proc_losses {
	uint64_t unstored, unstored_bytes; /* allocations recorded without a stack: map full */
	uint64_t missing, missing_bytes;   /* naming a stack the source does not have */
};

static int stack_build(const struct build_opts *o, const struct build_proc *bp, struct built *b,
		       const struct ledger_stack *g, struct report_stack *rs, struct frame_span *span,
		       struct proc_losses *pl)
{
	const struct stack_source *src = bp->src;
	const struct report_frame *fr;
	int err, end, fp_end = WALK_END_OK;

	rs->pid = bp->pid;
	rs->command = bp->command;
	rs->bytes = o->sample_bytes ? (uint64_t)llround(g->est_bytes) : g->bytes;
	rs->bytes_stderr = o->sample_bytes ? sqrt(g->var_bytes) : NAN;
	for (size_t r = 0; r < REPORT_LEAK_KIND_COUNT; r++)
		rs->leak_kinds_stderr[r] = NAN;
	rs->allocations = o->sample_bytes ? (uint64_t)llround(g->est_count) : g->count;
	rs->allocator = kind_name(g->kind);
	rs->oldest_age_s = (double)(o->now_ns - g->oldest_ts) / 1e9;
	/* in the report's bytes: estimates with --sample-bytes */
	rs->growth_bytes_per_s = o->growth ? growth_of(o->growth, bp->pid, g->stack_id, rs->bytes, o->now_s) : NAN;
	rs->fp_divergence = -1;
	span[0] = frame_span_start(&b->arena);
	err = frames_of(src, b, g->stack_id, &end);
	if (err)
		return err;
	frame_span_end(&b->arena, &span[0]);
	fr = b->arena.frames + span[0].first;
	/* libstdc++'s operator new is malloc's caller: C++ allocated it */
	if (span[0].n > 1 && fr[1].function && !strncmp(fr[1].function, "operator new", 12) && is_c_alloc(g->kind))
		rs->allocator = kind_name(ALLOC_NEW);
	rs->truncated = end == WALK_END_TRUNCATED;
	rs->unwind_error = end_reason(end);
	/* The walker knew no mapping at the last pc, yet that pc lies in an
	 * object the report names: one mapped after the walker's view of the
	 * process was made (the preload library's image is handed over a
	 * moment after a dlopen, the kernel's mapping cache is filled as
	 * dwleak hears of it).  The walk lacked that object's table; only a
	 * pc in no object is JIT or anonymous code. */
	if (end == WALK_ERR_NO_MAPPING && span[0].n && fr[span[0].n - 1].module && fr[span[0].n - 1].module[0] == '/')
		rs->unwind_error = end_reason(WALK_ERR_NO_TABLE);
	/* the dynamic linker runs initializers from _dl_start_user, hand-written
	 * code without CFI: the root of those stacks, not a lost frame */
	if (end == WALK_ERR_NO_FDE && span[0].n && fr[span[0].n - 1].function &&
	    !strcmp(fr[span[0].n - 1].function, "_dl_start_user"))
		rs->unwind_error = NULL;
	/* No allocator is a thread's first function: a walk that "completes"
	 * in its frame ended on a table's say-so (a wrong table, or one a
	 * user planted to hide stacks), and is an error, not a stack. */
	if ((end == WALK_END_OK || end == WALK_END_ZERO_RA) && physical_frames(fr, span[0].n) == 1)
		rs->unwind_error = "the walk ended in the allocator's own frame: its unwind table says the "
				   "stack ends there, which no real stack does (a wrong table?)";
	go_switch_cut(fr, &span[0], rs);
	if (o->leak_check)
		leak_kinds_set(o, g, rs);
	span[1] = frame_span_start(&b->arena);
	if (g->fp_stack_id && o->unwind_mode != UNWIND_MODE_FP) {
		err = frames_of(src, b, g->fp_stack_id, &fp_end);
		rs->fp_complete = fp_end == WALK_END_OK;
	}
	frame_span_end(&b->arena, &span[1]);
	/* an allocation either of whose walks went unstored, or is missing */
	if (end == END_NOT_STORED || fp_end == END_NOT_STORED) {
		pl->unstored += rs->allocations;
		pl->unstored_bytes += rs->bytes;
	} else if (end == END_MISSING || fp_end == END_MISSING) {
		pl->missing += rs->allocations;
		pl->missing_bytes += rs->bytes;
	}
	return err;
}

/* Moves suppressed stacks out of the report, counting them per rule. */
static int suppress_stacks(struct suppressions *supp, struct built *b)
{
	size_t i, k = 0, n = 0;

	for (i = 0; i < supp->n; i++)
		supp->rules[i].stacks = supp->rules[i].bytes = supp->rules[i].allocations = 0;
	for (i = 0; i < b->r.nstacks; i++)
		if (!suppressions_match(supp, &b->stacks[i]))
			b->stacks[k++] = b->stacks[i];
	b->r.nstacks = k;
	b->supp = calloc(supp->n + 1, sizeof(*b->supp));
	if (!b->supp)
		return -ENOMEM;
	for (i = 0; i < supp->n; i++) {
		const struct supp_rule *r = &supp->rules[i];

		if (r->stacks)
			b->supp[n++] = (struct report_suppressed){ r->name, r->description, r->stacks, r->bytes,
								   r->allocations };
	}
	b->r.suppressed = b->supp;
	b->r.nsuppressed = n;
	return 0;
}

/* Adds a loss line: WHAT of process PID (0: the trace's), COUNT of them
 * (BYTES when they are allocations), the line FMT says.  -ENOMEM. */
static int __attribute__((format(printf, 6, 7)))
loss_add(struct built *b, const char *what, int pid, uint64_t count, uint64_t bytes, const char *fmt, ...)
{
	struct report_loss *l;
	char *text;
	va_list ap;
	int n;

	if (b->nlosses == b->losses_cap) {
		size_t cap = b->losses_cap ? 2 * b->losses_cap : 8;

		l = realloc(b->losses, cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		b->losses = l;
		b->losses_cap = cap;
	}
	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	b->losses[b->nlosses++] = (struct report_loss){ what, pid, count, bytes, text };
	return 0;
}

int build_loss_add(struct built *b, const char *what, int pid, uint64_t count, uint64_t bytes, const char *text)
{
	int err = loss_add(b, what, pid, count, bytes, "%s", text);

	b->r.losses = b->losses; /* moved when it grew */
	b->r.nlosses = b->nlosses;
	return err;
}

/* The loss lines of process P (its sums PL), and what it lost on its own. */
static int proc_losses_say(struct built *b, const struct build_proc *p, const struct proc_losses *pl)
{
	const char *cmd = p->command ? p->command : "?";
	int err = 0;

	if (pl->unstored)
		err = loss_add(b, "stacks_map_full", p->pid, pl->unstored, pl->unstored_bytes,
			       "%llu allocations (%llu bytes) of pid %d (%s) were recorded without a stack: the "
			       "stacks map was full",
			       (unsigned long long)pl->unstored, (unsigned long long)pl->unstored_bytes, p->pid, cmd);
	if (!err && pl->missing)
		err = loss_add(b, "stack_missing", p->pid, pl->missing, pl->missing_bytes,
			       "%llu allocations (%llu bytes) of pid %d (%s) name a stack dwleak no longer has "
			       "(a bug in dwleak: please report it)",
			       (unsigned long long)pl->missing, (unsigned long long)pl->missing_bytes, p->pid, cmd);
	if (!err && p->records_lost)
		err = loss_add(b, "records_not_applied", p->pid, p->records_lost, 0,
			       "%llu records of pid %d (%s) could not be applied: dwleak ran out of memory",
			       (unsigned long long)p->records_lost, p->pid, cmd);
	if (!err && p->mappings_beyond_table)
		err = loss_add(b, "proc_mappings_full", p->pid, p->mappings_beyond_table, 0,
			       "%u executable mappings of pid %d (%s) did not fit its walker table (%d): its "
			       "walks look them up in the kernel, slower and failing under mmap-lock "
			       "contention (walk_err_vma_busy)",
			       p->mappings_beyond_table, p->pid, cmd, DWLEAK_MAX_PROC_MAPPINGS);
	if (!err && (p->ring_dropped || p->ring_no_ring))
		err = loss_add(b, "walk_records_dropped", p->pid, p->ring_dropped + p->ring_no_ring, 0,
			       "%llu allocator calls of pid %d (%s) were not recorded by its library (%llu: its "
			       "thread's ring was full, dwleak fell behind; %llu: the thread had no ring): those "
			       "allocations and frees are missing from the ledger",
			       (unsigned long long)(p->ring_dropped + p->ring_no_ring), p->pid, cmd,
			       (unsigned long long)p->ring_dropped, (unsigned long long)p->ring_no_ring);
	if (!err && (p->ring_bad || p->ring_why))
		err = loss_add(b, "walk_rings_corrupt", p->pid, p->ring_bad, 0,
			       "the rings pid %d (%s) records its calls in were found corrupt (%s): what they "
			       "held is missing from the ledger",
			       p->pid, cmd, p->ring_why ? p->ring_why : "a ring's records out of bounds");
	return err;
}

/* The loss lines of the trace as a whole: the programs' counters C of
 * what they gave up on, and the limits user space hit. */
static int trace_losses_say(struct built *b, const struct build_opts *o, const uint64_t *c)
{
	uint64_t mappings = c[CNT_MAPPINGS_FULL] + o->mappings_unrecorded;
	int err = 0;

	if (c[CNT_RING_FULL])
		err = loss_add(b, "alloc_events_lost", 0, c[CNT_RING_FULL], 0,
			       "%llu allocator records were lost: the alloc_events ring buffer was full (dwleak fell "
			       "behind); those allocations and frees are missing from the ledger",
			       (unsigned long long)c[CNT_RING_FULL]);
	if (!err && c[CNT_EVENTS_LOST])
		err = loss_add(b, "events_lost", 0, c[CNT_EVENTS_LOST], 0,
			       "%llu events were lost: the events ring buffer was full (unwind table requests, "
			       "linker stops, --mmap regions)", (unsigned long long)c[CNT_EVENTS_LOST]);
	if (!err && c[CNT_PENDING_FULL])
		err = loss_add(b, "pending_calls_full", 0, c[CNT_PENDING_FULL], 0,
			       "%llu allocator calls were not recorded: more than %d were pending on one thread",
			       (unsigned long long)c[CNT_PENDING_FULL], DWLEAK_MAX_PENDING);
	if (!err && c[CNT_STACKS_FULL])
		err = loss_add(b, "stacks_map_full", 0, c[CNT_STACKS_FULL], 0,
			       "%llu walks could not store their stack: the stacks map was full (dwleak empties it "
			       "as processes end and when it is half full; more new stacks came between two of "
			       "those than it holds)", (unsigned long long)c[CNT_STACKS_FULL]);
	if (!err && mappings)
		err = loss_add(b, "mappings_map_full", 0, mappings, 0,
			       "%llu mappings were not recorded for naming frames: the mappings map was full (frames "
			       "in them are shown as addresses)", (unsigned long long)mappings);
	if (!err && o->tables_dropped)
		err = loss_add(b, "tables_dropped", 0, o->tables_dropped, 0,
			       "%u unwind tables did not fit the walker's maps: walks stop in those objects "
			       "(walk_err_no_table)", o->tables_dropped);
	if (!err && o->procs_without_table)
		err = loss_add(b, "proc_slots_full", 0, o->procs_without_table, 0,
			       "%u processes got no walker mapping table (more than %d were alive at once): their "
			       "walks look mappings up in the kernel, slower and failing under mmap-lock "
			       "contention (walk_err_vma_busy)", o->procs_without_table, DWLEAK_MAX_PROC_SLOTS);
	return err;
}

/* Records and events lost on the way: what the report cannot count at all
 * (each cause also has its loss line). */
static uint64_t dropped_of(const uint64_t *c, uint64_t lost_records)
{
	return c[CNT_RING_FULL] + c[CNT_EVENTS_LOST] + lost_records;
}

int build_report(const struct build_proc *procs, size_t nprocs, const struct build_opts *o, struct built *b)
{
	size_t i, p, k = 0, total = 0, *proc;
	uint64_t lost_records = o->lost_records;
	struct proc_losses *pl;
	int err = 0;

	memset(b, 0, sizeof(*b));
	if (o->counters)
		memcpy(b->counters, o->counters, sizeof(b->counters));
	for (p = 0; p < nprocs; p++)
		total += procs[p].stacks->n;
	b->stacks = calloc(total + 1, sizeof(*b->stacks));
	b->spans = calloc(2 * (total + 1), sizeof(*b->spans));
	proc = calloc(total + 1, sizeof(*proc));
	pl = calloc(nprocs + 1, sizeof(*pl));
	if (!b->stacks || !b->spans || !proc || !pl) {
		free(proc);
		free(pl);
		return -ENOMEM;
	}
	pc_memo_new(&b->pcs); /* without it, every pc is named */
	/* a stack's frames: about 20 (what is not touched costs no memory) */
	if (total > 1000 && frame_arena_reserve(&b->arena, total * 20)) {
		free(proc);
		free(pl);
		return -ENOMEM;
	}
	for (p = 0; p < nprocs; p++) {
		const struct ledger_stacks *t = procs[p].stacks;

		if (b->pcs)
			pc_memo_reset(b->pcs);
		for (i = 0; i < t->cap; i++) {
			if (!t->slots[i].count)
				continue;
			err = stack_build(o, &procs[p], b, &t->slots[i], &b->stacks[k], &b->spans[2 * k], &pl[p]);
			if (err) {
				free(proc);
				free(pl);
				return err;
			}
			proc[k++] = p;
		}
		lost_records += procs[p].records_lost + procs[p].ring_dropped + procs[p].ring_no_ring;
	}
	pc_memo_free(b->pcs);
	b->pcs = NULL;
	/* what was lost: the trace's causes first, then each process's */
	err = trace_losses_say(b, o, b->counters);
	for (p = 0; !err && p < nprocs; p++)
		err = proc_losses_say(b, &procs[p], &pl[p]);
	free(pl);
	if (err) {
		free(proc);
		return err;
	}
	b->r.losses = b->losses;
	b->r.nlosses = b->nlosses;
	/* frames were appended to one growing array: point stacks in now */
	for (i = 0; i < k; i++) {
		b->stacks[i].frames = frame_span_frames(&b->arena, b->spans[2 * i]);
		b->stacks[i].nframes = b->spans[2 * i].n;
		b->stacks[i].fp_frames = frame_span_frames(&b->arena, b->spans[2 * i + 1]);
		b->stacks[i].nfp_frames = b->spans[2 * i + 1].n;
	}
	b->r.pid = o->pid;
	b->r.command = o->command;
	b->r.unwind = o->unwind_name;
	b->r.duration_s = o->duration_s;
	b->r.sample_bytes = o->sample_bytes;
	b->r.stacks = b->stacks;
	b->r.nstacks = k;
	b->processes = calloc(nprocs + 1, sizeof(*b->processes));
	if (!b->processes) {
		free(proc);
		return -ENOMEM;
	}
	for (p = 0; p < nprocs; p++)
		b->processes[p] = (struct report_process){ .pid = procs[p].pid, .ppid = procs[p].ppid,
							   .command = procs[p].command, .state = procs[p].state,
							   .wait_status = procs[p].wait_status,
							   .reason = procs[p].reason,
							   .unchecked = procs[p].unchecked };
	b->r.processes = b->processes;
	b->r.nprocesses = nprocs;
	err = stacks_merge(b->stacks, &b->r.nstacks, proc);
	free(proc);
	if (err)
		return err;
	if (o->supp && (err = suppress_stacks(o->supp, b)))
		return err;
	if (o->leak_check) {
		b->r.leak_check.present = true;
		b->r.leak_check.scanned_bytes = o->scanned_bytes;
		b->r.leak_check.pause_ms = o->pause_ms;
		b->r.leak_check.scan_ms = o->checks ? o->scan_ms : NAN;
		b->r.leak_check.snapshot = o->checks && o->snapshot_checks == o->checks;
		b->r.rss = o->rss;
		if (o->sample_bytes && o->indexed_checks)
			leak_kinds_exact(o, &b->r.leak_check);
	}
	report_totals_from_stacks(&b->r);
	if (o->unwind_mode == UNWIND_MODE_BOTH && (err = fp_compare(&b->r, &b->fp)))
		return err;
	b->r.totals.dropped_events = dropped_of(b->counters, lost_records);
	if (o->counter_names) {
		b->r.counter_names = o->counter_names;
		b->r.counter_values = b->counters;
		b->r.ncounters = CNT_COUNT;
	}
	if (o->growth)
		growth_remember(o->growth, procs, nprocs, o->now_s);
	return 0;
}
