/* leakcheck_bench: what one leak check costs on one heap, for dwleak's
 * scanner (issue 15) next to LeakSanitizer's and valgrind memcheck's, on
 * the same heap shapes built by the same code with the same seed.
 *
 * One source, three ways (bench/run_leakcheck_bench.sh runs them):
 *   leakcheck_bench --shape S        dwleak: a child builds the heap (its
 *       pages its own, as in a traced process), sends its block list
 *       through a pipe and stops (SIGSTOP); the parent times what the
 *       target's pause would hold (the blocks indexed, the roots planned
 *       from its maps, its memory read with target/proc_mem and scanned with
 *       leakcheck_scan), resumes it, and times the classification.
 *   valgrind --leak-check=full leakcheck_bench --shape S
 *       memcheck: the heap built in-process, VALGRIND_DO_LEAK_CHECK timed
 *       (the whole client request: the process runs no code meanwhile).
 *   leakcheck_bench_lsan --shape S   (clang -fsanitize=leak)
 *       LeakSanitizer: __lsan_do_recoverable_leak_check() timed (it stops
 *       the world, scans and reports).
 *
 * The heap: BLOCKS blocks of BYTES in all, sizes uniform in [mean/2,
 * 3 mean/2) in multiples of 16, in lists of 8 (word 0: the next block,
 * word 1: the list's head; the rest payload: small numbers, text, zeros,
 * doubles, as a program's data).  A directory block, pointed to from a
 * global, holds each list's head: 75% of lists by a start pointer
 * (reachable), 5% by an interior pointer (possibly lost), 20% not at all
 * (lost: the head definitely, the rest indirectly, through the cycle the
 * head pointers make).  Each tool's verdict totals are printed, so the
 * table also shows that they agree.
 *
 *   dwleak --leak-check -- leakcheck_bench --shape S --build-and-exit
 *       the whole of dwleak: the heap built under its probes, the check at
 *       exit() (threads stopped, records drained, registers, memory); the
 *       script reads the pause from the JSON report.
 *   dwleak --leak-check -p PID, PID a leakcheck_bench --shape S --build-and-wait
 *       the same on a live process: it waits for SIGUSR1 (dwleak attached),
 *       builds the heap, says so, and idles until killed; the check runs at
 *       dwleak's report, its index built before the stop.
 *
 * Usage: leakcheck_bench --shape NAME [--reps N] [--thread] [--buffer BYTES] [--build-and-exit]
 *   NAME: 1e4-100MiB, 1e4-1GiB, 1e6-100MiB, 1e6-1GiB
 *   --thread: dwleak reads in a worker thread (proc_mem_read_opts.reader_thread),
 *             tool=dwleak-thread
 *   --buffer: dwleak's bytes a read (proc_mem_read_opts.buffer_bytes)
 * Prints one line per repetition:
 *   leakcheck_bench: tool=T shape=S blocks=N block_bytes=B pause_ms=X [more key=value]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef LEAKCHECK_BENCH_LSAN
#include <sanitizer/lsan_interface.h>
#define TOOL "lsan"
#else
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#else /* no valgrind headers: only the dwleak mode */
#define RUNNING_ON_VALGRIND 0
#define VALGRIND_DO_LEAK_CHECK
#define VALGRIND_COUNT_LEAKS(leaked, dubious, reachable, suppressed)
#endif

#include "leakcheck.h"
#include "proc_mem.h"
#define TOOL (RUNNING_ON_VALGRIND ? "memcheck" : reader_thread ? "dwleak-thread" : "dwleak")
#endif

#define LIST_LEN 8
/* The child's block list crosses the pipe XORed with this, so the last
 * batch left in its buffer is no pointer into its heap. */
#define HIDE 0xa5a5a5a5a5a5a5a5ull

struct shape {
	const char *name;
	size_t blocks;
	uint64_t bytes;
};

static const struct shape shapes[] = {
	{ "1e4-100MiB", 10000, 100ull << 20 },
	{ "1e4-1GiB", 10000, 1ull << 30 },
	{ "1e6-100MiB", 1000000, 100ull << 20 },
	{ "1e6-1GiB", 1000000, 1ull << 30 },
};

/* The root of everything reachable. */
void *volatile g_directory;

/* --thread: proc_mem_read with its reader thread; --buffer */
static int reader_thread;
static size_t buffer_bytes;
static int build_and_exit, build_and_wait;
static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void fail(const char *what)
{
	fprintf(stderr, "leakcheck_bench: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* Where the block list goes: the dwleak child's pipe (fd >= 0), in
 * batches of hidden records; else only counted. */
struct block_sink {
	int fd;
	uint64_t batch[2 * 4096];
	size_t n;
	uint64_t bytes;
};

static void sink_flush(struct block_sink *s)
{
	const char *p = (const char *)s->batch;
	size_t len = s->n * 16;

	while (s->fd >= 0 && len) {
		ssize_t w = write(s->fd, p, len);

		if (w <= 0)
			fail("write");
		p += w;
		len -= (size_t)w;
	}
	s->n = 0;
}

static void *block(struct block_sink *s, uint64_t size)
{
	uint64_t *b = malloc(size);
	size_t k;

	if (!b)
		fail("malloc");
	for (k = 2; k < size / 8; k++) /* a program's data: no pointers */
		b[k] = k % 4 == 0 ? k : k % 4 == 1 ? 0x2074786574206120ull : k % 4 == 2 ? 0 : 0x3ff8000000000000ull;
	s->bytes += size;
	s->batch[2 * s->n] = (uint64_t)(uintptr_t)b ^ HIDE;
	s->batch[2 * s->n + 1] = size;
	if (++s->n == 4096)
		sink_flush(s);
	return b;
}

static uint64_t block_size(const struct shape *sh)
{
	uint64_t mean = sh->bytes / sh->blocks, lo = mean / 2;

	return (lo + rnd() % (mean ? mean : 1) + 15) & ~15ull;
}

/* Builds the heap of SH; every block goes to S. */
static void build_heap(const struct shape *sh, struct block_sink *s)
{
	size_t lists = (sh->blocks - 1 + LIST_LEN - 1) / LIST_LEN, made = 1, j;
	void **dir = block(s, (lists * 8 + 15) & ~15ull);

	for (j = 0; j < lists; j++) {
		uint64_t fate = rnd() % 100;
		void **head = NULL, **prev = NULL;
		size_t k;

		for (k = 0; k < LIST_LEN && made < sh->blocks; k++, made++) {
			void **b = block(s, block_size(sh));

			b[0] = NULL;
			b[1] = head ? (void *)head : NULL;
			if (prev)
				prev[0] = b;
			else
				head = b;
			prev = b;
		}
		dir[j] = fate < 75 ? (void *)head : fate < 80 ? (void *)((char *)head + 8) : NULL;
	}
	g_directory = dir;
	sink_flush(s);
}

/* Clears the stack below the caller, where build_heap's frames left the
 * addresses of the last list built: the in-process checkers scan from the
 * stack pointer down to nothing, but a register spilled there later could
 * carry one back; the three tools should see the same heap. */
static __attribute__((noinline)) void scrub_stack(void)
{
	volatile char area[16384];

	explicit_bzero((char *)area, sizeof(area)); /* a plain memset of a dead local is dropped */
}

static const struct shape *shape_named(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!strcmp(shapes[i].name, name))
			return &shapes[i];
	fprintf(stderr, "leakcheck_bench: no shape %s\n", name);
	exit(2);
}

#ifdef LEAKCHECK_BENCH_LSAN

static int run_in_process(const struct shape *sh, int reps)
{
	struct block_sink s = { .fd = -1 };
	int r;

	build_heap(sh, &s);
	scrub_stack();
	for (r = 0; r < reps; r++) {
		double t0 = now_ms(), t1;

		__lsan_do_recoverable_leak_check();
		t1 = now_ms();
		printf("leakcheck_bench: tool=%s shape=%s blocks=%zu block_bytes=%llu pause_ms=%.2f\n", TOOL, sh->name,
		       sh->blocks, (unsigned long long)s.bytes, t1 - t0);
		fflush(stdout);
	}
	_exit(0); /* no second check at exit */
}

#else

static int run_in_process(const struct shape *sh, int reps)
{
	struct block_sink s = { .fd = -1 };
	int r;

	build_heap(sh, &s);
	scrub_stack();
	for (r = 0; r < reps; r++) {
		unsigned long leaked = 0, dubious = 0, reachable = 0, suppressed = 0;
		double t0 = now_ms(), t1;

		VALGRIND_DO_LEAK_CHECK;
		t1 = now_ms();
		VALGRIND_COUNT_LEAKS(leaked, dubious, reachable, suppressed);
		(void)suppressed;
		printf("leakcheck_bench: tool=%s shape=%s blocks=%zu block_bytes=%llu pause_ms=%.2f "
		       "lost_bytes=%lu possibly_bytes=%lu reachable_bytes=%lu\n",
		       TOOL, sh->name, sh->blocks, (unsigned long long)s.bytes, t1 - t0, leaked, dubious, reachable);
		fflush(stdout);
	}
	return 0;
}

/* The target: builds the heap, sends the block list, its TLS pointer
 * and a terminator, stops itself, then idles. */
static void child_main(const struct shape *sh, int fd)
{
	static struct block_sink s;
	uint64_t end[2] = { 0, (uint64_t)pthread_self() };

	s.fd = fd;
	build_heap(sh, &s);
	scrub_stack(); /* the red zone below raise()'s sp is read as live */
	if (write(fd, end, sizeof(end)) != sizeof(end))
		fail("write");
	close(fd);
	raise(SIGSTOP);
	for (;;)
		pause();
}

/* The child's block list from FD, until the terminator; *TLS its TLS. */
static struct leak_block *read_blocks(int fd, size_t *n, uint64_t *tls)
{
	size_t cap = 1 << 16;
	struct leak_block *b = malloc(cap * sizeof(*b));
	uint64_t rec[2];

	*n = 0;
	for (;;) {
		size_t got = 0;

		while (got < sizeof(rec)) {
			ssize_t r = read(fd, (char *)rec + got, sizeof(rec) - got);

			if (r <= 0)
				fail("the child's block list");
			got += (size_t)r;
		}
		if (!rec[0]) {
			*tls = rec[1];
			return b;
		}
		if (*n == cap) {
			cap *= 2;
			b = realloc(b, cap * sizeof(*b));
		}
		if (!b)
			fail("realloc");
		b[(*n)++] = (struct leak_block){ .addr = rec[0] ^ HIDE, .size = rec[1] };
	}
}

/* The child's one thread: its sp (proc_mem_threads) and TLS. */
static struct proc_mem_thread child_thread(pid_t pid, uint64_t tls)
{
	struct proc_mem_thread *t, one;
	size_t n;
	int err = proc_mem_threads(pid, &t, NULL, &n);

	if (err || n != 1) {
		errno = err ? -err : EINVAL;
		fail("the child's thread");
	}
	one = t[0];
	one.tls = tls;
	free(t);
	return one;
}

static void wait_stopped(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, WUNTRACED) != pid || !WIFSTOPPED(st))
		fail("the child did not stop");
}

static int scan_chunk(void *ctx, uint64_t addr, const void *bytes, size_t len)
{
	return leakcheck_scan(ctx, addr, bytes, len);
}

static int run_dwleak(const struct shape *sh, int reps)
{
	struct proc_mem_range *keep;
	struct proc_mem_thread thread;
	struct leak_block *blocks;
	uint64_t tls, bytes = 0;
	size_t n, i;
	int fds[2], r, st;
	pid_t pid;

	if (pipe(fds))
		fail("pipe");
	pid = fork();
	if (pid < 0)
		fail("fork");
	if (!pid) {
		close(fds[0]);
		child_main(sh, fds[1]);
	}
	close(fds[1]);
	blocks = read_blocks(fds[0], &n, &tls);
	close(fds[0]);
	wait_stopped(pid);
	thread = child_thread(pid, tls);
	keep = malloc(n * sizeof(*keep));
	if (!keep)
		fail("malloc");
	for (i = 0; i < n; i++) {
		keep[i] = (struct proc_mem_range){ .addr = blocks[i].addr, .size = blocks[i].size };
		bytes += blocks[i].size;
	}
	for (r = 0; r < reps; r++) {
		struct proc_mem_read_opts opts = { .reader_thread = reader_thread, .buffer_bytes = buffer_bytes };
		struct leakcheck_totals tot;
		struct proc_mem_read_stats rs;
		struct proc_mem_plan plan;
		struct leakcheck *lc;
		double t0 = now_ms(), t1, t2, t3, t4;
		int err;

		err = leakcheck_new(blocks, n, &lc);
		t1 = now_ms();
		err = err ? err : proc_mem_plan_build(pid, &thread, 1, keep, n, NULL, 0, &plan);
		t2 = now_ms();
		err = err ? err : proc_mem_read(pid, &plan, &opts, scan_chunk, lc, &rs);
		t3 = now_ms();
		kill(pid, SIGCONT); /* the target runs again: classify after */
		err = err ? err : leakcheck_classify(lc, &tot);
		t4 = now_ms();
		if (err) {
			errno = -err;
			fail("the leak check");
		}
		printf("leakcheck_bench: tool=%s shape=%s blocks=%zu block_bytes=%llu pause_ms=%.2f build_ms=%.2f "
		       "plan_ms=%.2f read_ms=%.2f pagemap_ms=%.2f syscalls_ms=%.2f scan_ms=%.2f classify_ms=%.2f "
		       "regions=%zu read_calls=%llu scanned_bytes=%llu shared_bytes=%llu lost_bytes=%llu possibly_bytes=%llu reachable_bytes=%llu "
		       "definitely_blocks=%llu indirectly_blocks=%llu possibly_blocks=%llu\n",
		       TOOL, sh->name, n, (unsigned long long)bytes, t3 - t0, t1 - t0, t2 - t1, t3 - t2,
		       (double)rs.pagemap_ns / 1e6, (double)rs.read_ns / 1e6, (double)rs.callback_ns / 1e6, t4 - t3,
		       plan.nregions, (unsigned long long)rs.read_calls, (unsigned long long)rs.scanned_bytes,
		       (unsigned long long)rs.shared_bytes,
		       (unsigned long long)(tot.bytes[LEAK_DEFINITELY_LOST] + tot.bytes[LEAK_INDIRECTLY_LOST]),
		       (unsigned long long)tot.bytes[LEAK_POSSIBLY_LOST], (unsigned long long)tot.bytes[LEAK_REACHABLE],
		       (unsigned long long)tot.blocks[LEAK_DEFINITELY_LOST],
		       (unsigned long long)tot.blocks[LEAK_INDIRECTLY_LOST],
		       (unsigned long long)tot.blocks[LEAK_POSSIBLY_LOST]);
		fflush(stdout);
		leakcheck_free(lc);
		proc_mem_plan_free(&plan);
		kill(pid, SIGSTOP);
		wait_stopped(pid);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	free(keep);
	free(blocks);
	return 0;
}

#endif

int main(int argc, char **argv)
{
	const struct shape *sh = NULL;
	int reps = 3, i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--shape") && i + 1 < argc)
			sh = shape_named(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--thread"))
			reader_thread = 1;
		else if (!strcmp(argv[i], "--buffer") && i + 1 < argc)
			buffer_bytes = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--build-and-exit"))
			build_and_exit = 1;
		else if (!strcmp(argv[i], "--build-and-wait"))
			build_and_wait = 1;
		else
			sh = NULL, i = argc;
	}
	if (!sh || reps < 1) {
		fprintf(stderr, "usage: leakcheck_bench --shape 1e4-100MiB|1e4-1GiB|1e6-100MiB|1e6-1GiB [--reps N] [--thread] [--buffer BYTES] [--build-and-exit | --build-and-wait]\n");
		return 2;
	}
	if (build_and_exit || build_and_wait) {
		struct block_sink s = { .fd = -1 };

		if (build_and_wait) {
			signal(SIGUSR1, on_usr1);
			printf("leakcheck_bench: waiting\n");
			fflush(stdout);
			while (!go)
				pause();
		}
		build_heap(sh, &s);
		scrub_stack();
		printf("leakcheck_bench: tool=%s shape=%s blocks=%zu block_bytes=%llu\n",
		       build_and_wait ? "dwleak-live" : "dwleak-trace", sh->name, sh->blocks, (unsigned long long)s.bytes);
		fflush(stdout);
		if (build_and_exit)
			exit(0); /* dwleak --leak-check checks here */
		for (;;)
			pause();
	}
#ifdef LEAKCHECK_BENCH_LSAN
	return run_in_process(sh, reps);
#else
	return RUNNING_ON_VALGRIND ? run_in_process(sh, reps) : run_dwleak(sh, reps);
#endif
}
