/* One leak check: the pause (stop, registers, memory read into the
 * scanner, resume), then the verdicts, residency and RSS account while
 * the process runs again. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "blockset_read.h"
#include "clock.h"
#include "constants.h"
#include "leak_scan.h"
#include "snapshot.h"
#include "thread_regs.h"
#include "proc_rings.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t range_end(const struct leak_block *r)
{
	return r->addr + r->size;
}

/* Sorted ranges V[0..N) with a cursor K (the chunks come in address
 * order): where the next piece of [ADDR, END) stops, and whether it lies
 * in one of them. */
struct range_walk {
	const struct leak_block *v;
	size_t n, k;
};

static bool range_walk_in(struct range_walk *w, uint64_t addr, uint64_t end, uint64_t *stop)
{
	while (w->k < w->n && range_end(&w->v[w->k]) <= addr)
		w->k++;
	if (w->k < w->n && w->v[w->k].addr <= addr) {
		*stop = range_end(&w->v[w->k]) < end ? range_end(&w->v[w->k]) : end;
		return true;
	}
	*stop = w->k < w->n && w->v[w->k].addr < end ? w->v[w->k].addr : end;
	return false;
}

/* Register words kept for a scanner made after the pause (the process's
 * block index is read from its snapshot). */
struct reg_words {
	uint64_t *v;
	size_t n, cap;
};

/* VALUE into LC, or kept in RW when there is no LC yet. */
static void register_value(struct leakcheck *lc, struct reg_words *rw, uint64_t value)
{
	uint64_t *grown;

	if (lc) {
		leakcheck_scan_value(lc, value);
		return;
	}
	if (rw->n == rw->cap) {
		rw->cap = rw->cap ? 2 * rw->cap : 64;
		grown = realloc(rw->v, rw->cap * sizeof(*grown));
		if (!grown) {
			rw->cap = rw->n;
			return; /* rw->n < wanted: register_words_lost says so */
		}
		rw->v = grown;
	}
	rw->v[rw->n++] = value;
}

/* The aligned words of LEN bytes at BYTES (memory at ADDR) kept in RW, for
 * a scanner made after the pause: roots, position aside.  Returns 0 or
 * -ENOMEM. */
static int words_keep(struct reg_words *rw, uint64_t addr, const unsigned char *bytes, size_t len)
{
	size_t skip = (8 - (addr & 7)) & 7, i, before = rw->n, want = 0;
	uint64_t w;

	for (i = skip; i + 8 <= len; i += 8, want++) {
		memcpy(&w, bytes + i, 8);
		register_value(NULL, rw, w);
	}
	return rw->n - before == want ? 0 : -ENOMEM;
}

/* The scan's view of the memory read: which of it is the allocator's own
 * (ALLOC, where only blocks are scanned), and which may be its own or
 * blocks allocated before the trace (UNSURE, whose roots are flagged). */
struct scan_ctx {
	struct leakcheck *lc;	/* NULL: the words are kept in KEEP, roots for later */
	struct reg_words *keep;
	struct range_walk alloc, unsure;
};

static int scan_chunk(void *ctx, uint64_t addr, const void *bytes, size_t len)
{
	struct scan_ctx *c = ctx;
	const unsigned char *b = bytes;
	uint64_t end = addr + len, stop, stop2;
	int err = 0;

	if (!c->lc)
		return words_keep(c->keep, addr, b, len);

	while (!err && addr < end) {
		if (range_walk_in(&c->alloc, addr, end, &stop)) {
			err = leakcheck_scan_blocks(c->lc, addr, b, stop - addr);
		} else if (range_walk_in(&c->unsure, addr, stop, &stop2)) {
			stop = stop2;
			err = leakcheck_scan_unsure(c->lc, addr, b, stop - addr);
		} else {
			stop = stop2;
			err = leakcheck_scan(c->lc, addr, b, stop - addr);
		}
		b += stop - addr;
		addr = stop;
	}
	return err;
}

/* leak_block and proc_mem_range are one layout: the range helpers of
 * target/proc_mem serve both, and blocks are handed to the plan as ranges. */
_Static_assert(sizeof(struct leak_block) == sizeof(struct proc_mem_range) &&
		       offsetof(struct leak_block, size) == offsetof(struct proc_mem_range, size),
	       "blocks are ranges");
static void ranges_normalize(struct leak_block *v, size_t *n)
{
	proc_mem_ranges_normalize((struct proc_mem_range *)v, n);
}

static int ranges_subtract(const struct leak_block *a, size_t na, const struct leak_block *b, size_t nb,
			   struct leak_block **out, size_t *nout)
{
	return proc_mem_ranges_subtract((const struct proc_mem_range *)a, na, (const struct proc_mem_range *)b, nb,
					(struct proc_mem_range **)out, nout);
}

/* The blocks a partial ledger L saw freed (L->freed) where their memory
 * was not unmapped since, into *OUT (sorted, *N, malloc'd; NULL when
 * none).  Returns 0 or -ENOMEM. */
static int freed_dead(const struct ledger *l, struct leak_block **out, size_t *n)
{
	const struct alloc_table *t = &l->freed;
	struct leak_block *v, *unmapped;
	size_t i, k = 0;
	int err;

	*out = NULL;
	*n = 0;
	if (!t->n)
		return 0;
	v = malloc(t->n * sizeof(*v));
	unmapped = malloc((l->unmapped.n + 1) * sizeof(*unmapped));
	if (!v || !unmapped) {
		free(v);
		free(unmapped);
		return -ENOMEM;
	}
	for (i = 0; i < t->cap; i++)
		if (t->slots[i].addr && t->slots[i].size)
			v[k++] = (struct leak_block){ t->slots[i].addr, t->slots[i].size };
	for (i = 0; i < l->unmapped.n; i++)
		unmapped[i] = (struct leak_block){ l->unmapped.r[i].start, l->unmapped.r[i].end - l->unmapped.r[i].start };
	ranges_normalize(v, &k);
	err = ranges_subtract(v, k, unmapped, l->unmapped.n, out, n);
	free(v);
	free(unmapped);
	return err;
}

/*
 * What of the process's memory is the allocator's own and so no root, into *OUT
 * (sorted, *N ranges, malloc'd): what it mapped while traced (its
 * ledger's alloc_memory), its static state (STATE: its object's data,
 * glibc's arenas) and, in memory it held before the trace began, the
 * blocks freed since; less the blocks allocated since the index was built
 * (TABLE's log: in the table now, recorded after SNAP_NS), which are not
 * in the index: the program may hold pointers in them, so they are read
 * as roots, as any memory the check knows nothing of.  Returns 0 or
 * -ENOMEM.
 */
static int allocator_memory(const struct ledger *l, const struct alloc_state *state, uint64_t snap_ns,
			    struct leak_block **out, size_t *n)
{
	const struct alloc_table *table = &l->allocs;
	const struct mmap_regions *am = &l->alloc_memory;
	struct leak_block *mem = malloc((am->n + state->n + 1) * sizeof(*mem)), *fresh = NULL, *dead = NULL;
	size_t i, nmem = 0, nfresh = 0, ndead = 0;
	int err;

	*out = NULL;
	*n = 0;
	if (!mem || (err = freed_dead(l, &dead, &ndead))) {
		free(mem);
		return -ENOMEM;
	}
	if (ndead) {
		struct leak_block *grown = realloc(mem, (am->n + state->n + ndead + 1) * sizeof(*mem));

		if (!grown) {
			free(mem);
			free(dead);
			return -ENOMEM;
		}
		mem = grown;
	}
	for (i = 0; i < am->n; i++)
		mem[nmem++] = (struct leak_block){ am->r[i].start, am->r[i].end - am->r[i].start };
	for (i = 0; i < state->n; i++)
		mem[nmem++] = (struct leak_block){ state->ranges[i].addr, state->ranges[i].size };
	/* blocks freed since attach, where the allocator held memory before:
	 * a tracked block there now is scanned as one all the same */
	for (i = 0; i < ndead; i++)
		mem[nmem++] = dead[i];
	free(dead);
	ranges_normalize(mem, &nmem);
	if (table->log.n)
		fresh = malloc(table->log.n * sizeof(*fresh));
	for (i = 0; fresh && i < table->log.n; i++) {
		const struct alloc_rec *r = alloc_table_find(table, table->log.addrs[i]);

		if (r && r->ts > snap_ns)
			fresh[nfresh++] = (struct leak_block){ r->addr, r->size ? r->size : 1 };
	}
	if (table->log.n && !fresh) {
		free(mem);
		return -ENOMEM;
	}
	ranges_normalize(fresh, &nfresh);
	err = ranges_subtract(mem, nmem, fresh, nfresh, out, n);
	free(mem);
	free(fresh);
	return err;
}

/* The general registers of stopped thread TID as roots, and its stack and
 * TLS pointers into *T; EXITING: the thread stopped in the process's
 * exit, if any (see struct leak_scan_exit). */
static int registers_scan(struct leakcheck *lc, struct reg_words *rw, pid_t tid,
			       const struct leak_scan_exit *exiting, struct proc_mem_thread *t)
{
	struct thread_regs r;
	size_t i, before = rw ? rw->n : 0, want = 0;
	int err;

	err = thread_regs_read(tid, &r);
	if (err)
		return err;
	t->sp = r.sp;
	t->tls = r.tls;
	if (exiting && exiting->tid == tid &&
	    (exiting->sp || r.syscall_nr == SYS_exit || r.syscall_nr == SYS_exit_group)) {
		/* at exit()'s entry or in the syscall that ends the process:
		 * only what a callee must keep is live */
		for (i = 0; i < r.nsaved; i++)
			register_value(lc, rw, r.saved[i]);
		if (exiting->sp)
			t->sp = exiting->sp;
		t->no_red_zone = true;
		want = r.nsaved;
	} else {
		/* every register may hold a pointer (a value kept in a register
		 * of a spinning thread is a root, as for memcheck and
		 * LeakSanitizer) */
		for (i = 0; i < r.nall; i++)
			register_value(lc, rw, r.all[i]);
		want = r.nall;
	}
	/* a root not kept would make its blocks lost: no verdict rather */
	return lc || rw->n - before == want ? 0 : -ENOMEM;
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

/* The allocator's state in process PID (ALLOC; see alloc_state_find), with what the pause
 * knows: its threads' TLS pointers (THREADS, read by pause_scan before),
 * and the tracked blocks (to find jemalloc's extent map by, where its
 * metadata is not known from its memory syscalls: PARTIAL, -p, a fork's child). */
static int allocator_state(pid_t pid, const struct allocator *alloc, bool partial,
			   const struct proc_mem_thread *threads, size_t nthreads, const struct leak_block *blocks,
			   size_t nblocks, struct alloc_state *out)
{
	uint64_t *tls = malloc((nthreads + 1) * sizeof(*tls)), sample[8];
	struct alloc_state_hints h = { .tls = tls, .ntls = nthreads, .blocks = sample,
				       .extents = partial };
	size_t i;
	int err;

	if (!tls)
		return -ENOMEM;
	for (i = 0; i < nthreads; i++)
		tls[i] = threads[i].tls;
	/* a few blocks spread over the index */
	for (i = 0; i < 8 && i < nblocks; i++)
		sample[h.nblocks++] = blocks[i * nblocks / 8].addr;
	err = alloc_state_find(pid, alloc, &h, out);
	free(tls);
	return err;
}

/*
 * The memory the allocator may have held before the trace began (PARTIAL:
 * -p, a fork's child): the mappings of PLAN where its blocks are (a
 * tracked one, or its own memory known) other than threads' stacks, the
 * brk heap and anonymous private ones, and its object's data (OBJECT,
 * where its static caches are), into *OUT (sorted, *N, malloc'd; ALLOC
 * takes precedence where they overlap).  Their words outside every block
 * are live blocks allocated before, or free memory and bookkeeping: roots
 * the check cannot vouch for.  Returns 0 or -ENOMEM.
 */
static int unsure_memory(const struct proc_mem_plan *plan, const struct leakcheck *lc,
			 const struct leak_block *alloc, size_t nalloc, const struct alloc_state *object,
			 struct leak_block **out, size_t *n)
{
	struct leak_block *v = malloc((plan->nmaps + object->nobject + 1) * sizeof(*v));
	size_t i, j, k = 0;

	*out = v;
	*n = 0;
	if (!v)
		return -ENOMEM;
	for (i = 0; i < plan->nregions; i++) {
		const struct proc_mem_region *r = &plan->regions[i];
		const struct proc_map *m = &plan->maps[r->map];
		bool mine = false;

		if (r->why == PROC_MEM_ROOT_STACK || m->shared || !m->writable ||
		    (plan->kinds[r->map] != PROC_MAP_HEAP && plan->kinds[r->map] != PROC_MAP_ANON))
			continue;
		if (k && v[k - 1].addr == m->start)
			continue; /* a mapping cut in several regions: once */
		mine = leakcheck_holds_block(lc, m->start, m->end);
		for (j = 0; j < nalloc && !mine; j++)
			mine = alloc[j].addr < m->end && range_end(&alloc[j]) > m->start;
		if (mine)
			v[k++] = (struct leak_block){ m->start, m->end - m->start };
	}
	for (i = 0; i < object->nobject; i++)
		v[k++] = (struct leak_block){ object->object[i].addr, object->object[i].size };
	ranges_normalize(v, &k);
	*n = k;
	return 0;
}

/* The pause's reading of the memory of process PID (whose NTHREADS
 * threads THREADS are) into LC; in ALLOC[0..NALLOC) (the allocator's own
 * memory), blocks only, and none of its pages that hold no block; with
 * PARTIAL, what the allocator may have held before the trace is read as
 * unsure roots. */
static int pause_scan(pid_t pid, const struct proc_mem_thread *threads, size_t ntids, struct leakcheck *lc,
		      const struct leak_block *blocks, size_t nblocks, const struct leak_block *alloc, size_t nalloc,
		      bool partial, const struct alloc_state *state, const struct proc_snapshot_gap *gaps,
		      size_t ngaps, const struct blockset_index *ix, const struct proc_snapshot_gap *own,
		      size_t nown, struct leak_scan_result *out)
{
	struct scan_ctx sc = { .lc = lc, .alloc = { alloc, nalloc, 0 } };
	struct proc_mem_plan plan = { 0 };
	struct leak_block *holes = NULL, *unsure = NULL, *grown;
	size_t nholes = 0, nunsure = 0, nskip = ix ? ix->n_ranges : 0;
	int err;

	err = leakcheck_holes(lc, alloc, nalloc, DWLEAK_PAGE_SIZE, &holes, &nholes);
	/* not read: a snapshot's gaps (read from the process in the pause),
	 * and the library's index of blocks, which points at every block */
	if (!err && ngaps + nskip + nown) {
		grown = realloc(holes, (nholes + ngaps + nskip + nown) * sizeof(*holes));
		if (!grown) {
			err = -ENOMEM;
		} else {
			holes = grown;
			for (size_t i = 0; i < ngaps; i++)
				holes[nholes++] = (struct leak_block){ gaps[i].start, gaps[i].end - gaps[i].start };
			for (size_t i = 0; i < nskip; i++)
				holes[nholes++] = (struct leak_block){ ix->ranges[i].start,
								       ix->ranges[i].end - ix->ranges[i].start };
			for (size_t i = 0; i < nown; i++)
				holes[nholes++] = (struct leak_block){ own[i].start, own[i].end - own[i].start };
			ranges_normalize(holes, &nholes);
		}
	}
	/* the blocks are never cut as stack: a stack the program allocated */
	err = err ?: proc_mem_plan_build(pid, threads, ntids, (const struct proc_mem_range *)blocks, nblocks,
					 (const struct proc_mem_range *)holes, nholes, &plan);
	if (!err && partial)
		err = unsure_memory(&plan, lc, alloc, nalloc, state, &unsure, &nunsure);
	sc.unsure = (struct range_walk){ unsure, nunsure, 0 };
	err = err ?: proc_mem_read(pid, &plan, NULL, scan_chunk, &sc, &out->read);
	free(unsure);
	out->allocator_skipped_bytes = plan.skipped_allocator;
	/* the gaps were skipped as read already, the index as the library's,
	 * not as the allocator's */
	for (size_t i = 0; i < ngaps + nskip + nown; i++) {
		uint64_t len = i < ngaps	 ? gaps[i].end - gaps[i].start
			       : i < ngaps + nskip ? ix->ranges[i - ngaps].end - ix->ranges[i - ngaps].start
						   : own[i - ngaps - nskip].end - own[i - ngaps - nskip].start;

		out->allocator_skipped_bytes -= out->allocator_skipped_bytes >= len ? len : out->allocator_skipped_bytes;
	}
	out->dead_thread_stacks = plan.dead_thread_stacks;
	proc_mem_plan_free(&plan);
	free(holes);
	return err;
}

/* Adds the bytes and calls of read B to A's. */
static void read_stats_add(struct proc_mem_read_stats *a, const struct proc_mem_read_stats *b)
{
	a->scanned_bytes += b->scanned_bytes;
	a->exclusive_bytes += b->exclusive_bytes;
	a->shared_bytes += b->shared_bytes;
	a->swapped_bytes += b->swapped_bytes;
	a->read_calls += b->read_calls;
}

/* The mappings a snapshot lacks or sees zeroed (GAPS[0..N), sorted),
 * read from stopped process PID itself as roots, in the pause; the read's
 * counts are added to OUT's. */
static int gaps_scan(pid_t pid, const struct proc_mem_thread *threads, size_t nthreads, struct leakcheck *lc,
		     struct reg_words *keep, const struct proc_snapshot_gap *gaps, size_t n,
		     const struct proc_snapshot_gap *own, size_t nown, struct leak_scan_result *out)
{
	struct scan_ctx sc = { .lc = lc, .keep = keep };
	struct proc_mem_plan plan = { 0 };
	struct proc_mem_read_stats st = { 0 };
	struct proc_mem_region *clipped;
	struct leak_block *skip = calloc(nown + 1, sizeof(*skip));
	size_t k = 0, i, j, nskip = nown;
	int err = skip ? 0 : -ENOMEM;

	/* the library's rings (OWN) are never read: they hold the addresses
	 * of the blocks recorded, and are no root (wherever they lie in a
	 * gap: the kernel merges adjacent rings into one mapping) */
	for (i = 0; i < nown; i++)
		skip[i] = (struct leak_block){ own[i].start, own[i].end - own[i].start };
	ranges_normalize(skip, &nskip);
	err = err ?: proc_mem_plan_build(pid, threads, nthreads, NULL, 0, (const struct proc_mem_range *)skip, nskip,
					 &plan);
	free(skip);
	if (err)
		return err;
	clipped = calloc(plan.nregions * n + 1, sizeof(*clipped));
	if (!clipped) {
		proc_mem_plan_free(&plan);
		return -ENOMEM;
	}
	for (i = 0; i < plan.nregions; i++) {
		for (j = 0; j < n; j++) {
			uint64_t lo = plan.regions[i].start > gaps[j].start ? plan.regions[i].start : gaps[j].start;
			uint64_t hi = plan.regions[i].end < gaps[j].end ? plan.regions[i].end : gaps[j].end;

			if (lo < hi) {
				clipped[k] = plan.regions[i];
				clipped[k].start = lo;
				clipped[k++].end = hi;
			}
		}
	}
	free(plan.regions);
	plan.regions = clipped;
	plan.nregions = k;
	err = proc_mem_read(pid, &plan, NULL, scan_chunk, &sc, &st);
	proc_mem_plan_free(&plan);
	read_stats_add(&out->read, &st);
	return err;
}

/* The snapshot's end: the copy killed, then a second stop, of one
 * thread of PID in SET, for the process to reap it.  Returns the stop's
 * length (ms). */
static double snapshot_finish(struct tracee_set *set, pid_t pid, struct proc_snapshot *snap)
{
	double t0;
	pid_t tid = 0;

	/* before the stop's waitpid, which must not see the copy */
	proc_snapshot_drop(snap);
	t0 = now_ms();
	if (!tracee_stop_thread(set, pid, &tid))
		proc_snapshot_reap(snap, tid);
	/* else: a zombie child of the process until it ends (it raises no
	 * SIGCHLD there); it exits or is gone */
	tracee_resume_process(set, pid);
	return now_ms() - t0;
}

/* Reads LEN bytes of process memory at ADDR through the /proc/PID/mem
 * descriptor CTX points at (blockset_read's callback). */
static int mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	ssize_t got = pread(*(const int *)ctx, buf, len, (off_t)addr);

	return got == (ssize_t)len ? 0 : got < 0 ? -errno : -EIO;
}

/*
 * The library's index of every live block of process READER (the
 * snapshot's copy, or the stopped process), its header at HEADER, into
 * *IX, and its blocks as *BLOCKS, *N (sorted).  The bytes are the
 * process's: blockset_read checks them; a corrupt index is an error
 * (OUT->no_index says why), never a guess.  Returns 0 or a negative errno.
 */
static int index_read(pid_t reader, uint64_t header, uint32_t session, struct blockset_index *ix,
		      struct leak_block **blocks, size_t *n, struct leak_scan_result *out)
{
	char path[64];
	size_t i;
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%d/mem", reader);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		snprintf(out->no_index, sizeof(out->no_index), "cannot open %s: %s", path, strerror(-err));
		return err;
	}
	err = blockset_read(mem_read, &fd, header, ix);
	close(fd);
	if (err) {
		snprintf(out->no_index, sizeof(out->no_index), "its block index at 0x%llx cannot be read: %s",
			 (unsigned long long)header, ix->why[0] ? ix->why : strerror(-err));
		return err;
	}
	/* made for an earlier session: the library has made no allocator
	 * call since this one asked for a new index, so this session has no
	 * block (its memory still is not read as roots) */
	if (ix->session != session)
		ix->n_blocks = 0;
	*blocks = calloc(ix->n_blocks + 1, sizeof(**blocks));
	if (!*blocks)
		return -ENOMEM;
	for (i = 0; i < ix->n_blocks; i++)
		(*blocks)[i] = (struct leak_block){ ix->blocks[i].addr, ix->blocks[i].size };
	*n = ix->n_blocks;
	out->indexed = true;
	out->index_lost = ix->lost;
	for (i = 0; i < ix->levels; i++)
		out->index_busy += ix->level[i].busy;
	for (i = 0; i < ix->n_ranges; i++)
		out->index_bytes += ix->ranges[i].end - ix->ranges[i].start;
	return 0;
}

/* The library's rings of walked records in process memory (R's last
 * drain: each ring's header, data and scratch (remembered walks: stack
 * words), those of live threads and those
 * handed back, whose stale records hold block addresses all the same), as
 * ranges, into OWN (at most 2 * WALK_RING_SLOTS); returns how many. */
static size_t rings_ranges(const struct proc_rings *r, struct proc_snapshot_gap *own)
{
	size_t i, n = 0;

	for (i = 0; r && r->drain && i < r->drain->n && i < WALK_RING_SLOTS; i++) {
		const struct walk_ring_ring *g = &r->drain->ring[i];

		if (g->data_bits >= WALK_RING_BITS_MIN && g->data_bits <= WALK_RING_BITS_MAX)
			own[n++] = (struct proc_snapshot_gap){ g->ring, g->ring + WALK_RING_MAP_BYTES(g->data_bits) };
	}
	for (i = 0; r && r->drain && i < r->drain->nidle && i < WALK_RING_SLOTS; i++) {
		const struct walk_ring_idle *g = &r->drain->idle[i];

		own[n++] = (struct proc_snapshot_gap){ g->ring, g->ring + WALK_RING_MAP_BYTES(g->data_bits) };
	}
	return n;
}

int leak_scan_process(struct tracee_set *tracees, pid_t pid, const struct allocator *alloc_fns, struct ledger *ledger,
		      const struct leak_scan_exit *exiting, bool snapshot, uint64_t index_header, uint32_t index_session,
		      const struct proc_rings *rings, void (*drain)(void *ctx), void *ctx, struct leak_scan_result *out)
{
	bool stopped = exiting != NULL, resumed = false, use_index = index_header != 0;
	struct proc_snapshot snap = { 0 };
	struct leak_scan_result gaps_read = { 0 }; /* the gaps' read, in the pause */
	pid_t reader = pid; /* whose memory is read: the process, or its copy */
	struct tracee_options alone = { 0 };
	struct tracee_set *own = NULL, *set = tracees;
	const struct alloc_table *table = &ledger->allocs;
	struct proc_mem_thread *threads = NULL;
	struct proc_mem_residency *each = NULL;
	struct leak_block *blocks = NULL, *alloc = NULL;
	struct blockset_index ix = { 0 };
	struct proc_snapshot_gap rings_at[2 * WALK_RING_SLOTS];
	size_t nrings = 0;
	struct reg_words roots = { 0 }; /* with the index: the pause's roots, for later */
	struct alloc_state state = { 0 };
	struct leakcheck *lc = NULL;
	size_t n = 0, nthreads = 0, nalloc = 0, i;
	double t0, t1, t2, t_pause;
	uint64_t snap_ns;
	pid_t *tids = NULL;
	int err = 0;

	memset(out, 0, sizeof(*out));
	/* The index is built before the stop, from the blocks known now (on a
	 * million blocks, most of the pause it would otherwise be); what the
	 * records applied in the pause change is logged, and each indexed
	 * block that changed is taken as reachable: live memory, as untracked
	 * heap memory is.  Blocks allocated meanwhile are not in the index:
	 * their memory is a root, and they stay unclassified.  With the
	 * library's own index of every block (a sampled trace: the ledger
	 * holds only the sample), the blocks are read out of the snapshot
	 * (or the stopped process) after the stop instead, consistent with
	 * its memory, and the pause's roots are kept until they can be
	 * scanned. */
	t0 = now_ms();
	snap_ns = session_now_ns();
	if (!use_index) {
		err = index_build(table, &blocks, &n, &lc);
		ledger_changes_start(ledger);
	}
	out->index_ms = now_ms() - t0;

	/* a process in its exit pauses anyway: read it in place */
	snapshot = snapshot && !stopped;
	if (snapshot && proc_snapshot_prepare(pid, &snap, out->no_snapshot, sizeof(out->no_snapshot)))
		snapshot = false;
	/* the pause starts with the stop, or started already (in its exit) */
	t_pause = stopped ? t0 : now_ms();
	t0 = now_ms();
	out->index_in_pause = stopped;
	if (!err && !set) {
		err = tracee_set_new(&alone, &own);
		err = err ?: tracee_seize_process(own, pid);
		set = own;
	}
	/* every thread stopped first, then what they wrote up to now */
	err = err ?: tracee_stop_process(set, pid, &tids, &nthreads);
	t1 = now_ms();
	out->stop_ms = t1 - t0;
	if (!err) {
		drain(ctx);
		t2 = now_ms();
		out->drain_ms = t2 - t1;
		if (use_index) {
			/* every sampled block the records named is in the ledger */
			snap_ns = session_now_ns();
		} else if (table->log.lost) { /* no memory for the log: index again */
			leakcheck_free(lc);
			free(blocks);
			lc = NULL;
			blocks = NULL;
			snap_ns = session_now_ns();
			err = index_build(table, &blocks, &n, &lc);
		}
		for (i = 0; !err && !use_index && i < table->log.n; i++)
			out->changed += !leakcheck_keep(lc, table->log.addrs[i]);
		threads = calloc(nthreads + 1, sizeof(*threads));
		err = err ?: threads ? 0 : -ENOMEM;
		t1 = now_ms();
		out->index_ms += t1 - t2;
		for (i = 0; !err && i < nthreads; i++)
			err = registers_scan(lc, &roots, tids[i], exiting, &threads[i]);
		/* the registers are read: a copy of the memory, and the process
		 * goes on while the copy is read */
		/* the rings as the drain above left them: a thread's ring
		 * claimed since it was read is scanned (its records, roots) */
		nrings = rings_ranges(rings, rings_at);
		if (!err && snapshot && snap.ngaps)
			err = gaps_scan(pid, threads, nthreads, lc, &roots, snap.gaps, snap.ngaps, rings_at, nrings,
					&gaps_read);
		if (!err && snapshot &&
		    !proc_snapshot_take(&snap, tids[0], out->no_snapshot, sizeof(out->no_snapshot))) {
			out->snapshot = true;
			out->clone_ms = snap.clone_ms;
			reader = snap.copy;
			t2 = now_ms();
			tracee_resume_process(set, pid);
			out->resume_ms = now_ms() - t2;
			out->pause_ms = now_ms() - t_pause;
			resumed = true;
		}
		if (!err && use_index) {
			/* in the pause only when there is no snapshot */
			t1 = now_ms();
			err = index_read(reader, index_header, index_session, &ix, &blocks, &n, out);
			err = err ?: leakcheck_new(blocks, n, &lc);
			for (i = 0; !err && i < roots.n; i++)
				leakcheck_scan_value(lc, roots.v[i]);
			out->index_ms += now_ms() - t1;
		}
		t1 = now_ms();
		err = err ?: allocator_state(reader, alloc_fns, ledger->partial, threads, nthreads, blocks, n, &state);
		err = err ?: allocator_memory(ledger, &state, snap_ns, &alloc, &nalloc);
		err = err ?: pause_scan(reader, threads, nthreads, lc, blocks, n, alloc, nalloc, ledger->partial,
					&state, out->snapshot ? snap.gaps : NULL, out->snapshot ? snap.ngaps : 0,
					use_index ? &ix : NULL, rings_at, nrings, out);
		if (out->snapshot)
			read_stats_add(&out->read, &gaps_read.read);
		out->scan_ms = now_ms() - t1;
	}
	if (!use_index)
		ledger_changes_stop(ledger);
	if (resumed) {
		out->reap_pause_ms = snapshot_finish(set, pid, &snap);
		if (own)
			tracee_set_free(own);
	} else {
		t1 = now_ms();
		/* resumed on every path: detached when seized for this check only */
		if (own)
			tracee_set_free(own);
		else if (set)
			tracee_resume_process(set, pid);
		out->resume_ms = now_ms() - t1;
		out->pause_ms = now_ms() - t_pause;
	}
	if (!err)
		err = leakcheck_classify(lc, &out->totals);
	/* with the index, the ledger holds the sampled blocks only: the
	 * others' verdicts are in the totals alone */
	for (i = 0; !err && i < n; i++) {
		struct leak_verdict v;

		if (!leakcheck_verdict(lc, i, &v))
			ledger_verdict(ledger, blocks[i].addr, blocks[i].size, snap_ns, v.kind, v.unsure);
	}
	if (!err) {
		leakcheck_stats(lc, &out->scan);
		out->scanned_bytes = out->read.scanned_bytes;
		out->blocks = n;
		out->done = true;
		/* where the bytes are: the process runs again, which moves
		 * little of it in the moment this takes */
		each = calloc(n + 1, sizeof(*each));
		if (each && !proc_mem_residency(pid, (const struct proc_mem_range *)blocks, n, each, NULL)) {
			for (i = 0; i < n; i++)
				ledger_residency(ledger, blocks[i].addr, blocks[i].size, snap_ns, each[i].resident,
						 each[i].swapped);
		}
		out->rss_known = !proc_rss_explain(pid, (const struct proc_mem_range *)blocks, n, threads, nthreads,
						   &out->rss);
	}
	free(each);
	free(alloc);
	proc_snapshot_free(&snap);
	/* what was found, for --stats; not the ranges */
	out->alloc_state = state;
	out->alloc_state.ranges = NULL;
	out->alloc_state.object = NULL;
	alloc_state_free(&state);
	free(tids);
	free(threads);
	leakcheck_free(lc);
	free(blocks);
	blockset_index_free(&ix);
	free(roots.v);
	return err;
}
