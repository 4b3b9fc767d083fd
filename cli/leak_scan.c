/* One leak check: the pause (stop, registers, memory read into the
 * scanner, resume), then the verdicts, residency and RSS account while
 * the process runs again. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <time.h>

#include "leak_scan.h"
#include "procs.h"
#include "tracer.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int scan_chunk(void *ctx, uint64_t addr, const void *bytes, size_t len)
{
	return leakcheck_scan(ctx, addr, bytes, len);
}

/* The general registers of stopped thread TID as roots, and its stack and
 * TLS pointers into *T. */
static int registers_scan(struct leakcheck *lc, pid_t tid, struct proc_mem_thread *t)
{
	struct user_regs_struct r;
	const unsigned long long *w = (const unsigned long long *)&r;
	size_t i;

	if (ptrace(PTRACE_GETREGS, tid, 0, &r))
		return -errno;
	/* every register may hold a pointer (a value kept in a register of a
	 * spinning thread is a root, as for memcheck and LeakSanitizer) */
	for (i = 0; i < sizeof(r) / sizeof(*w); i++)
		leakcheck_scan_value(lc, w[i]);
	t->sp = r.rsp;
	t->tls = r.fs_base;
	return 0;
}

/* The ledger's records as blocks. */
static int blocks_of(const struct alloc_table *t, struct leak_block **blocks, size_t *n)
{
	size_t i, k = 0;

	*blocks = calloc(t->n + 1, sizeof(**blocks));
	if (!*blocks)
		return -ENOMEM;
	for (i = 0; i < t->cap && k < t->n; i++) {
		if (!t->slots[i].addr)
			continue;
		(*blocks)[k++] = (struct leak_block){ t->slots[i].addr, t->slots[i].size };
	}
	*n = k;
	return 0;
}

/* The index of the ledger's blocks as they are now (*BLOCKS, *N, *LC). */
static int index_build(const struct alloc_table *t, struct leak_block **blocks, size_t *n, struct leakcheck **lc)
{
	int err = blocks_of(t, blocks, n);

	return err ?: leakcheck_new(*blocks, *n, lc);
}

/* The record of indexed block B, if it is still the block that was
 * indexed: same address and size, recorded before SNAP_NS. */
static struct alloc_rec *rec_of(struct alloc_table *t, const struct leak_block *b, uint64_t snap_ns)
{
	struct alloc_rec *r = alloc_table_get(t, b->addr);

	return r && r->size == b->size && r->ts <= snap_ns ? r : NULL;
}

/* The pause's reading: the registers of threads TIDS[0..NTIDS) and the
 * memory of process PID into LC. */
static int pause_scan(pid_t pid, const pid_t *tids, size_t ntids, struct leakcheck *lc,
		      const struct leak_block *blocks, size_t nblocks, struct proc_mem_thread *threads,
		      struct leak_scan_result *out)
{
	struct proc_mem_plan plan = { 0 };
	size_t i;
	int err = 0;

	for (i = 0; !err && i < ntids; i++)
		err = registers_scan(lc, tids[i], &threads[i]);
	/* the blocks are never cut as stack: a stack the program allocated */
	err = err ?: proc_mem_plan_build(pid, threads, ntids, (const struct proc_mem_range *)blocks, nblocks, &plan);
	err = err ?: proc_mem_read(pid, &plan, NULL, scan_chunk, lc, &out->read);
	proc_mem_plan_free(&plan);
	return err;
}

_Static_assert(sizeof(struct leak_block) == sizeof(struct proc_mem_range), "blocks are ranges");

int leak_scan_process(struct tracee_set *tracees, struct proc *p, bool stopped, void (*drain)(void *ctx),
		      void *ctx, struct leak_scan_result *out)
{
	struct tracee_options alone = { 0 };
	struct tracee_set *own = NULL, *set = tracees;
	struct alloc_table *table = &p->ledger.allocs;
	struct proc_mem_thread *threads = NULL;
	struct proc_mem_residency *each = NULL;
	struct leak_block *blocks = NULL;
	struct leakcheck *lc = NULL;
	size_t n = 0, nthreads = 0, i;
	double t0, t1, t2, t_pause;
	uint64_t snap_ns;
	pid_t *tids = NULL;
	int err;

	memset(out, 0, sizeof(*out));
	/* The index is built before the stop, from the blocks known now (on a
	 * million blocks, most of the pause it would otherwise be); what the
	 * records applied in the pause change is logged, and each indexed
	 * block that changed is taken as reachable: live memory, as untracked
	 * heap memory is.  Blocks allocated meanwhile are not in the index:
	 * their memory is a root, and they stay unclassified. */
	t0 = now_ms();
	snap_ns = tracer_now_ns();
	err = index_build(table, &blocks, &n, &lc);
	alloc_table_log_start(table);
	out->index_ms = now_ms() - t0;

	/* the pause starts with the stop, or started already (in its exit) */
	t_pause = stopped ? t0 : now_ms();
	t0 = now_ms();
	out->index_in_pause = stopped;
	if (!err && !set) {
		err = tracee_set_new(&alone, &own);
		err = err ?: tracee_seize_process(own, p->pid);
		set = own;
	}
	/* every thread stopped first, then what they wrote up to now */
	err = err ?: tracee_stop_process(set, p->pid, &tids, &nthreads);
	t1 = now_ms();
	out->stop_ms = t1 - t0;
	if (!err) {
		drain(ctx);
		t2 = now_ms();
		out->drain_ms = t2 - t1;
		if (table->log.lost) { /* no memory for the log: index again */
			leakcheck_free(lc);
			free(blocks);
			lc = NULL;
			blocks = NULL;
			snap_ns = tracer_now_ns();
			err = index_build(table, &blocks, &n, &lc);
		}
		for (i = 0; !err && i < table->log.n; i++)
			out->changed += !leakcheck_keep(lc, table->log.addrs[i]);
		threads = calloc(nthreads + 1, sizeof(*threads));
		err = err ?: threads ? 0 : -ENOMEM;
		t1 = now_ms();
		out->index_ms += t1 - t2;
		err = err ?: pause_scan(p->pid, tids, nthreads, lc, blocks, n, threads, out);
		out->scan_ms = now_ms() - t1;
	}
	alloc_table_log_stop(table);
	t1 = now_ms();
	/* resumed on every path: detached when seized for this check only */
	if (own)
		tracee_set_free(own);
	else if (set)
		tracee_resume_process(set, p->pid);
	out->resume_ms = now_ms() - t1;
	out->pause_ms = now_ms() - t_pause;
	if (!err)
		err = leakcheck_classify(lc, &out->totals);
	for (i = 0; !err && i < n; i++) {
		struct alloc_rec *r = rec_of(table, &blocks[i], snap_ns);
		struct leak_verdict v;

		if (r && !leakcheck_verdict(lc, i, &v))
			r->leak = 1 + v.kind;
	}
	if (!err) {
		leakcheck_stats(lc, &out->scan);
		out->scanned_bytes = out->read.scanned_bytes;
		out->blocks = n;
		out->done = true;
		/* where the bytes are: the process runs again, which moves
		 * little of it in the moment this takes */
		each = calloc(n + 1, sizeof(*each));
		if (each && !proc_mem_residency(p->pid, (const struct proc_mem_range *)blocks, n, each, NULL)) {
			for (i = 0; i < n; i++) {
				struct alloc_rec *r = rec_of(table, &blocks[i], snap_ns);

				if (r) {
					r->resident = each[i].resident;
					r->swapped = each[i].swapped;
				}
			}
		}
		out->rss_known = !proc_rss_explain(p->pid, (const struct proc_mem_range *)blocks, n, threads, nthreads,
						   &out->rss);
	}
	free(each);
	free(tids);
	free(threads);
	leakcheck_free(lc);
	free(blocks);
	return err;
}
