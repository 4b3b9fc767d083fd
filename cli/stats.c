/* --stats: the numbers behind a trace, one line each, for people and
 * for the tests that check why walks stopped. */
#include <string.h>

#include "stats.h"
#include "preload.h"
#include "proc_rings.h"

void stats_print(FILE *f, const struct unwinder_stats *us, const struct probes_info *pi,
		 const struct allocator *a, const uint64_t *counters)
{
	size_t i, k;

	fprintf(f, "dwleak: stats: tables %u loaded, %u failed, %u dropped (maps full); "
		   "rows %llu of %llu, rules %llu of %llu, %llu table bytes\n",
		us->loaded, us->failed, us->dropped_full, (unsigned long long)us->rows_used,
		(unsigned long long)us->rows_cap, (unsigned long long)us->rules_used,
		(unsigned long long)us->rules_cap, (unsigned long long)us->bytes);
	fprintf(f, "dwleak: stats: processes given no mapping table (more than %d alive at once): %u; mappings not "
		   "recorded for naming frames (map full): %llu\n",
		DWLEAK_MAX_PROC_SLOTS, us->slots_none, (unsigned long long)us->mappings_full);
	fprintf(f, "dwleak: stats: allocator calls probed by %s (%s); %s\n", pi->mode, pi->why,
		pi->tgid_by_link ? "the links filter by process" : "the programs filter by process");
	fprintf(f, "dwleak: stats: walker buffers %s%s; the kernel's preemption model: %s (from %s)\n",
		pi->guard == PREEMPT_GUARD_OFF	? "not guarded"
		: pi->guard == PREEMPT_GUARD_ON ? "guarded against preempted probes"
						: "always found busy",
		pi->guard_forced ? ", as DWLEAK_PREEMPT_GUARD says" : "", preempt_model_name(pi->preempt.model),
		pi->preempt.source);
	for (i = 0; a && i < a->nobjs; i++) {
		const struct alloc_object *o = &a->objs[i];

		for (k = 0; k < o->nfuncs; k++)
			fprintf(f, "dwleak: stats: probe %s in %s at +%llu (%s): %s\n", o->funcs[k].name, o->name,
				(unsigned long long)o->funcs[k].site_off,
				alloc_kind_frees(o->funcs[k].kind) ? "entry only" : "entry and return",
				o->funcs[k].site_why ? o->funcs[k].site_why : "entry");
	}
	for (i = 0; i < CNT_COUNT; i++)
		if (probes_counter_name((unsigned int)i))
			fprintf(f, "dwleak: stats: %s %llu\n", probes_counter_name((unsigned int)i),
				(unsigned long long)counters[i]);
}

void stats_print_rings(FILE *f, int pid, const struct proc_rings *r)
{
	fprintf(f, "dwleak: stats: pid %d walked in the process: %llu records applied in %llu drains, %llu "
		   "allocations freed before they were read (%llu taken back from their thread's ring, %llu "
		   "cancelled in it, %llu of those freed while a drain read); %llu dropped "
		   "(ring full), %llu without a ring, %llu reads of a corrupt ring, %llu slots handed back; %llu walks "
		   "answered by the thread's memo of whole walks; image %u "
		   "installed%s%s%s\n",
		pid, (unsigned long long)r->records, (unsigned long long)r->drains,
		(unsigned long long)(r->cancelled + r->retracted), (unsigned long long)r->retracted,
		(unsigned long long)r->cancelled, (unsigned long long)r->straddled,
		(unsigned long long)r->dropped,
		(unsigned long long)r->no_ring, (unsigned long long)r->bad, (unsigned long long)r->reclaimed,
		(unsigned long long)r->remembered, r->installed, r->image_err ? ", last image refused: " : "",
		r->image_err ? strerror(-r->image_err) : "",
		r->stopped == DWLEAK_PRELOAD_RINGS_STOPPED_SECCOMP ? "; back at its sites since it installed a seccomp filter"
		: r->stopped ? "; back at its sites (a reason this dwleak does not know)" : "");
	if (r->ring_why[0])
		fprintf(f, "dwleak: stats: pid %d: the first corrupt ring: %s\n", pid, r->ring_why);
	if (r->unnamed)
		fprintf(f, "dwleak: stats: pid %d: %llu allocations named a stack no record this dwleak read defined "
			   "(written before it attached, or a corrupt ring): counted, their stacks lost\n",
			pid, (unsigned long long)r->unnamed);
}

void stats_print_stacks(FILE *f, const struct probes_stacks_stats *m, const struct stack_store_stats *s)
{
	fprintf(f, "dwleak: stats: stacks map: %llu entries, at most %llu held at once; emptied %llu times, %llu "
		   "walks moved out\n",
		(unsigned long long)m->cap, (unsigned long long)m->peak, (unsigned long long)m->moves,
		(unsigned long long)m->moved);
	fprintf(f, "dwleak: stats: stack store: %llu stacks held (%llu bytes of frames; at most %llu), %llu freed "
		   "with their image, %llu orphans dropped; %u of %u images ended\n",
		(unsigned long long)s->stacks, (unsigned long long)s->bytes, (unsigned long long)s->peak,
		(unsigned long long)s->freed, (unsigned long long)s->put_late, s->images_ended, s->images);
}

void stats_print_drains(FILE *f, const struct probes_drain_stats *d)
{
	fprintf(f, "dwleak: stats: kernel records drained %llu times; %llu met a record another CPU was still "
		   "writing and waited for it, %llu in vain (the processes' own rings then waited a drain)\n",
		(unsigned long long)d->drains, (unsigned long long)d->waited, (unsigned long long)d->short_drains);
}

void stats_print_leak_check(FILE *f, int pid, const struct leak_scan_result *c, uint32_t checks,
			    uint64_t changed_all)
{
	const struct proc_mem_read_stats *r = &c->read;
	const struct leakcheck_scan_stats *s = &c->scan;

	if (!c->done) {
		fprintf(f, "dwleak: stats: leak check of pid %d: not done\n", pid);
		return;
	}
	fprintf(f, "dwleak: stats: leak check of pid %d: %llu blocks, stopped %.3f ms; read %llu bytes "
		   "(%llu by process_vm_readv, %llu shared or swapped by /proc/PID/mem, %llu swapped) in %llu "
		   "calls, pages found by %s; skipped %llu never touched, %llu unreadable\n",
		pid, (unsigned long long)c->blocks, c->pause_ms, (unsigned long long)r->scanned_bytes,
		(unsigned long long)r->exclusive_bytes, (unsigned long long)r->shared_bytes,
		(unsigned long long)r->swapped_bytes, (unsigned long long)r->read_calls,
		r->pagemap_scan ? "PAGEMAP_SCAN" : "/proc/PID/pagemap", (unsigned long long)r->untouched_bytes,
		(unsigned long long)r->unreadable_bytes);
	if (c->snapshot)
		fprintf(f, "dwleak: stats: leak check of pid %d: the pause, ms: %.3f stopping every thread, %.3f "
			   "applying the records written up to then, %.3f making a copy-on-write snapshot, %.3f "
			   "resuming; then %.3f reading and scanning the snapshot while the process ran, and %.3f "
			   "stopping one thread for it to reap the snapshot; %.3f ms indexing the blocks, before "
			   "the pause; %llu blocks freed or resized meanwhile (left unclassified); %llu over its "
			   "%u checks\n",
			pid, c->stop_ms, c->drain_ms, c->clone_ms, c->resume_ms, c->scan_ms, c->reap_pause_ms,
			c->index_ms, (unsigned long long)c->changed, (unsigned long long)changed_all, checks);
	else
		fprintf(f, "dwleak: stats: leak check of pid %d: the pause, ms: %.3f stopping every thread, %.3f "
			   "applying the records written up to then, %.3f reading and scanning, %.3f resuming; "
			   "%.3f ms indexing the blocks, %s; %llu blocks freed or resized meanwhile (left "
			   "unclassified); %llu over its %u checks%s%s%s\n",
			pid, c->stop_ms, c->drain_ms, c->scan_ms, c->resume_ms, c->index_ms,
			c->index_in_pause ? "in the pause (the process was stopped in its exit)" : "before the pause",
			(unsigned long long)c->changed, (unsigned long long)changed_all, checks,
			c->no_snapshot[0] ? "; no snapshot: " : "", c->no_snapshot,
			c->no_snapshot[0] ? " (it stayed stopped while read)" : "");
	fprintf(f, "dwleak: stats: leak check of pid %d: %llu register values, %llu root pointers, %llu "
		   "block-to-block pointers, %llu overlapping blocks (a missed free), %llu edge bytes not "
		   "scanned\n",
		pid, (unsigned long long)s->values, (unsigned long long)s->root_hits, (unsigned long long)s->edges,
		(unsigned long long)s->overlapping, (unsigned long long)s->edge_bytes);
	fprintf(f, "dwleak: stats: leak check of pid %d: the allocator's own memory, no root: %llu bytes "
		   "holding no block not read, %llu bytes between blocks read but skipped; its object's data "
		   "%llu bytes, %zu glibc arenas%s%s, %zu jemalloc thread caches, %zu jemalloc extents' "
		   "metadata%s; %zu stacks of ended threads\n",
		pid, (unsigned long long)c->allocator_skipped_bytes, (unsigned long long)s->skipped_bytes,
		(unsigned long long)c->alloc_state.object_bytes, c->alloc_state.arenas,
		c->alloc_state.arena_not_found ? " (glibc, but no arena found in its data)" : "",
		c->alloc_state.arenas_not_followed ? " (some not followed)" : "", c->alloc_state.tcaches,
		c->alloc_state.extents, c->alloc_state.extent_map_not_found ? " (its extent map not found)" : "",
		c->dead_thread_stacks);
}
