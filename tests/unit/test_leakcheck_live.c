/* The leak check on a live process, without BPF and without ptrace: runs
 * testdata/leak_layout (which reports the blocks it made, where it hid
 * pointers to them, and the kind each must get), stops it with SIGSTOP,
 * plans its roots with target/proc_mem (stack pointers from
 * /proc/PID/task/TID/syscall), reads its memory into leakcheck_scan,
 * resumes it, classifies, and checks every block's kind, the lost tree's
 * indirect bytes, and the residency and RSS accounts of the blocks; with
 * PAGEMAP_SCAN and with pagemap read whole.  Registers are not scanned
 * here: that needs the tracer's ptrace stop. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "leakcheck.h"
#include "proc_mem.h"

#define MAX_BLOCKS 64
#define MAX_THREADS 8

struct child_block {
	char name[32];
	char kind[32];
	uint64_t addr;
	uint64_t size;
};

struct child {
	pid_t pid;
	struct child_block b[MAX_BLOCKS];
	size_t n;
	struct {
		int tid;
		uint64_t tls;
	} threads[MAX_THREADS];
	size_t nthreads;
	uint64_t buried_at, buried_value;
};

/* Starts leak_layout and reads its report up to "ready". */
static void child_start(struct child *c)
{
	const char *td = getenv("TESTDATA");
	char path[4096], *line = NULL;
	size_t cap = 0;
	int out[2];
	FILE *f;

	CHECK(td, "TESTDATA is not set (run through tests/run.sh)");
	snprintf(path, sizeof(path), "%s/leak_layout", td);
	CHECK(access(path, X_OK) == 0, "%s is missing (make testdata)", path);
	CHECK(pipe(out) == 0);
	c->pid = fork();
	CHECK(c->pid >= 0);
	if (c->pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		close(out[1]);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	f = fdopen(out[0], "r");
	CHECK(f);
	while (getline(&line, &cap, f) > 0) {
		struct child_block *b = &c->b[c->n];
		unsigned long long a, s;
		int tid;

		if (!strcmp(line, "ready\n"))
			break;
		if (sscanf(line, "block %31s %llx %llu %31s", b->name, &a, &s, b->kind) == 4) {
			CHECK(c->n + 1 < MAX_BLOCKS);
			b->addr = a;
			b->size = s;
			c->n++;
		} else if (sscanf(line, "thread %d %llx", &tid, &a) == 2) {
			CHECK(c->nthreads < MAX_THREADS);
			c->threads[c->nthreads].tid = tid;
			c->threads[c->nthreads++].tls = a;
		} else if (sscanf(line, "buried %llx %llx", &a, &s) == 2) {
			c->buried_at = a;
			c->buried_value = s;
		} else {
			CHECK(0, "leak_layout said: %s", line);
		}
	}
	free(line);
	fclose(f);
	CHECK(c->n > 20 && c->nthreads == 2 && c->buried_at, "leak_layout ended early (%zu blocks)", c->n);
}

/* SIGSTOP, and wait until every thread has stopped (the group stop is
 * reported to the parent once the last one has). */
static void child_stop(const struct child *c)
{
	int st;

	CHECK(kill(c->pid, SIGSTOP) == 0);
	CHECK(waitpid(c->pid, &st, WUNTRACED) == c->pid && WIFSTOPPED(st));
}

/* Each thread's sp (proc_mem_threads), paired with the TLS it reported. */
static size_t child_threads(const struct child *c, struct proc_mem_thread *t)
{
	struct proc_mem_thread *got;
	size_t n, i, k;
	int *tids;

	CHECK(proc_mem_threads(c->pid, &got, &tids, &n) == 0);
	CHECK(n <= MAX_THREADS, "%zu threads", n);
	for (i = 0; i < n; i++) {
		t[i] = got[i];
		for (k = 0; k < c->nthreads; k++)
			if (c->threads[k].tid == tids[i])
				t[i].tls = c->threads[k].tls;
		CHECK(t[i].sp && t[i].tls, "thread %d: sp %#llx, tls %#llx", tids[i], (unsigned long long)t[i].sp,
		      (unsigned long long)t[i].tls);
	}
	free(got);
	free(tids);
	return n;
}

static int scan_chunk(void *ctx, uint64_t addr, const void *bytes, size_t len)
{
	return leakcheck_scan(ctx, addr, bytes, len);
}

static const struct child_block *named(const struct child *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		if (!strcmp(c->b[i].name, name))
			return &c->b[i];
	CHECK(0, "no block %s", name);
	return NULL;
}

/* One check of the stopped child: plan, read, resume is left to the
 * caller; classifies and checks every block. */
static void check_once(const struct child *c, bool pagemap_scan)
{
	struct proc_mem_thread t[MAX_THREADS];
	size_t nt = child_threads(c, t);
	struct leak_block blocks[MAX_BLOCKS];
	struct proc_mem_range keep[MAX_BLOCKS];
	struct proc_mem_read_opts opts = { .no_pagemap_scan = !pagemap_scan };
	struct proc_mem_read_stats rs;
	struct leakcheck_scan_stats ss;
	struct leakcheck_totals tot;
	struct proc_mem_plan plan;
	struct leakcheck *lc;
	const char *mode = pagemap_scan ? "PAGEMAP_SCAN" : "pagemap";
	uint64_t buried = 0;
	size_t i;

	for (i = 0; i < c->n; i++) {
		blocks[i] = (struct leak_block){ .addr = c->b[i].addr, .size = c->b[i].size };
		keep[i] = (struct proc_mem_range){ .addr = c->b[i].addr, .size = c->b[i].size };
	}
	CHECK(leakcheck_new(blocks, c->n, &lc) == 0);
	CHECK(proc_mem_plan_build(c->pid, t, nt, keep, c->n, NULL, 0, &plan) == 0);
	EXPECT(plan.sp_not_on_stack == 0 && plan.stack_kept == 0, "%llu sps off their stacks, %llu kept",
	       (unsigned long long)plan.sp_not_on_stack, (unsigned long long)plan.stack_kept);
	EXPECT(plan.skipped_kernel > 0, "no [vdso] skipped");
	EXPECT(plan.stack_dead > 0, "nothing below the stack pointers left out");
	CHECK(proc_mem_read(c->pid, &plan, &opts, scan_chunk, lc, &rs) == 0);
	leakcheck_stats(lc, &ss);
	EXPECT(rs.scanned_bytes == ss.scanned_bytes + ss.edge_bytes && ss.edge_bytes == 0,
	       "%s: read %llu, scanned %llu + %llu", mode, (unsigned long long)rs.scanned_bytes,
	       (unsigned long long)ss.scanned_bytes, (unsigned long long)ss.edge_bytes);
	EXPECT(rs.unreadable_bytes == 0 && rs.pagemap_scan == pagemap_scan, "%s: %llu unreadable, scan %d", mode,
	       (unsigned long long)rs.unreadable_bytes, rs.pagemap_scan);
	/* the big untouched block's pages are never read */
	EXPECT(rs.untouched_bytes >= (64 << 20) - 4096, "%s: untouched %llu", mode,
	       (unsigned long long)rs.untouched_bytes);
	EXPECT(rs.exclusive_bytes + rs.shared_bytes == rs.scanned_bytes + rs.unreadable_bytes);
	printf("%s: read %.1f MiB of %zu regions in %.2f ms (pagemap %.2f, read %.2f, scan %.2f), "
	       "%.1f MiB never touched, %.1f MiB shared\n",
	       mode, (double)rs.scanned_bytes / 1048576, plan.nregions, (double)rs.total_ns / 1e6,
	       (double)rs.pagemap_ns / 1e6, (double)rs.read_ns / 1e6, (double)rs.callback_ns / 1e6,
	       (double)rs.untouched_bytes / 1048576, (double)rs.shared_bytes / 1048576);

	/* the buried pointer is really there, below the live stack */
	{
		struct iovec l = { .iov_base = &buried, .iov_len = 8 },
			     r = { .iov_base = (void *)(uintptr_t)c->buried_at, .iov_len = 8 };

		CHECK(process_vm_readv(c->pid, &l, 1, &r, 1, 0) == 8);
		EXPECT(buried == c->buried_value, "the dead frame lost its pointer");
		for (i = 0; i < nt; i++)
			EXPECT(c->buried_at + PROC_MEM_RED_ZONE < t[i].sp || c->buried_at > t[i].sp + (1 << 20),
			       "the buried pointer is not below an sp's red zone");
	}

	CHECK(kill(c->pid, SIGCONT) == 0); /* classify after the target runs again */
	CHECK(leakcheck_classify(lc, &tot) == 0);
	for (i = 0; i < c->n; i++) {
		struct leak_verdict v;

		CHECK(leakcheck_verdict(lc, i, &v) == 0);
		EXPECT(!strcmp(leak_kind_name(v.kind), c->b[i].kind), "%s: %s at %#llx (%llu bytes) is %s, want %s",
		       mode, c->b[i].name, (unsigned long long)c->b[i].addr, (unsigned long long)c->b[i].size,
		       leak_kind_name(v.kind), c->b[i].kind);
		if (!strcmp(c->b[i].name, "tree_root"))
			EXPECT(v.indirect_bytes == 3 * 32, "tree_root carries %llu indirect bytes",
			       (unsigned long long)v.indirect_bytes);
	}
	leakcheck_free(lc);
	proc_mem_plan_free(&plan);
	CHECK(kill(c->pid, SIGSTOP) == 0); /* for the next round */
	{
		int st;

		CHECK(waitpid(c->pid, &st, WUNTRACED) == c->pid && WIFSTOPPED(st));
	}
}

/* Residency of the blocks, and the RSS account. */
static void check_rss(const struct child *c, const struct proc_mem_thread *t, size_t nt)
{
	struct proc_mem_range r[MAX_BLOCKS];
	struct proc_mem_residency each[MAX_BLOCKS], total;
	const struct child_block *untouched = named(c, "big_untouched"), *touched = named(c, "big_touched");
	struct proc_rss_explained x;
	uint64_t sum = 0, sizes = 0;
	double shares = 0;
	size_t i;

	for (i = 0; i < c->n; i++) {
		r[i] = (struct proc_mem_range){ .addr = c->b[i].addr, .size = c->b[i].size };
		sizes += c->b[i].size;
	}
	CHECK(proc_mem_residency(c->pid, r, c->n, each, &total) == 0);
	for (i = 0; i < c->n; i++) {
		const struct child_block *b = &c->b[i];

		EXPECT(each[i].resident + each[i].swapped + each[i].untouched == b->size, "%s: residency sums to %llu",
		       b->name, (unsigned long long)(each[i].resident + each[i].swapped + each[i].untouched));
		if (b == untouched)
			/* malloc wrote the chunk header in the first page only */
			EXPECT(each[i].resident <= 4096 && each[i].untouched >= b->size - 4096,
			       "big_untouched: %llu resident", (unsigned long long)each[i].resident);
		else /* every other block was written (memset) */
			EXPECT(each[i].resident == b->size, "%s: %llu of %llu resident", b->name,
			       (unsigned long long)each[i].resident, (unsigned long long)b->size);
	}
	EXPECT(total.resident + total.swapped + total.untouched == sizes);

	CHECK(proc_rss_explain(c->pid, r, c->n, t, nt, &x) == 0);
	for (i = 0; i < PROC_RSS_PART_COUNT; i++) {
		sum += x.bytes[i];
		shares += x.share[i];
		printf("rss %-15s %8.1f KiB %5.1f%%\n", proc_rss_part_name((enum proc_rss_part)i),
		       (double)x.bytes[i] / 1024, 100 * x.share[i]);
	}
	EXPECT(x.rss > 0 && sum == x.rss, "parts sum to %llu, rss %llu", (unsigned long long)sum,
	       (unsigned long long)x.rss);
	EXPECT(shares > 0.999 && shares < 1.001);
	EXPECT(x.tracked_bytes == sizes);
	EXPECT(x.tracked.untouched >= untouched->size - 4096);
	/* the tracked part is what is resident under the blocks */
	EXPECT(x.bytes[PROC_RSS_TRACKED] >= touched->size && x.bytes[PROC_RSS_TRACKED] <= total.resident,
	       "tracked %llu, resident under blocks %llu", (unsigned long long)x.bytes[PROC_RSS_TRACKED],
	       (unsigned long long)total.resident);
	EXPECT(x.bytes[PROC_RSS_CODE] > 0 && x.bytes[PROC_RSS_STACKS] > 0 && x.bytes[PROC_RSS_DATA] > 0);
}

int main(void)
{
	struct proc_mem_thread t[MAX_THREADS];
	struct child c = { 0 };
	size_t nt;
	int st;

	child_start(&c);
	child_stop(&c);
	nt = child_threads(&c, t);
	CHECK(nt == 2, "%zu threads", nt);
	check_once(&c, true);
	check_once(&c, false);
	check_rss(&c, t, nt);
	kill(c.pid, SIGKILL);
	waitpid(c.pid, &st, 0);
	return check_status();
}
