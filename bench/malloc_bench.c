/* malloc(64) + free loop: the micro benchmark of issues 3 and 7.  Each
 * thread makes PAIRS malloc(64)+free pairs; only the loop is timed
 * (CLOCK_MONOTONIC), so a tracer's attach time does not count.
 *
 * Usage: malloc_bench [--pairs N] [--threads T] [--size BYTES]
 *   --pairs N     pairs per thread (default 2000000)
 *   --threads T   threads running the loop at once (default 1)
 *   --size BYTES  allocation size (default 64)
 *   --go-file F   wait until file F exists before the loop (an injection
 *                 first: bench/run_inject_bench.sh)
 *
 * Prints one line:
 *   malloc_bench: pairs=N threads=T size=S ns_per_pair=X total_s=Y
 * ns_per_pair is the wall time of the loop divided by the pairs one thread
 * made (with T threads: the latency each thread sees; T x pairs were made). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long pairs = 2000000;
static size_t size = 64;
static const char *go_file;
static pthread_barrier_t start_line;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The compiler may drop a malloc whose memory is never used: make the
 * pointer escape into an asm it cannot see through. */
static inline void escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void *loop(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&start_line);
	for (long i = 0; i < pairs; i++) {
		void *p = malloc(size);

		if (!p)
			abort();
		escape(p);
		free(p);
	}
	return NULL;
}

static long parse(const char *opt, const char *s, long min)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < min) {
		fprintf(stderr, "malloc_bench: invalid %s '%s'\n", opt, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	long threads = 1;
	pthread_t *tids;
	double t0, t1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
			pairs = parse("--pairs", argv[++i], 1);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = parse("--threads", argv[++i], 1);
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size = parse("--size", argv[++i], 1);
		else if (!strcmp(argv[i], "--go-file") && i + 1 < argc)
			go_file = argv[++i];
		else {
			fprintf(stderr, "usage: malloc_bench [--pairs N] [--threads T] [--size BYTES] [--go-file F]\n");
			return 2;
		}
	}
	tids = calloc(threads, sizeof(*tids));
	if (!tids || pthread_barrier_init(&start_line, NULL, threads + 1)) {
		fprintf(stderr, "malloc_bench: out of memory\n");
		return 1;
	}
	for (long t = 0; t < threads; t++)
		if (pthread_create(&tids[t], NULL, loop, NULL)) {
			fprintf(stderr, "malloc_bench: cannot start thread %ld\n", t);
			return 1;
		}
	/* threads exist (their stacks and arenas too) before the clock starts */
	while (go_file && access(go_file, F_OK)) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	t0 = now_s();
	pthread_barrier_wait(&start_line);
	for (long t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);
	t1 = now_s();
	printf("malloc_bench: pairs=%ld threads=%ld size=%zu ns_per_pair=%.1f total_s=%.3f\n", pairs,
	       threads, size, (t1 - t0) * 1e9 / pairs, t1 - t0);
	free(tids);
	return 0;
}
