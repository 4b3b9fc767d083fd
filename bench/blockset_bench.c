/* What the preload library's index of live blocks (preload/blockset.c,
 * compiled here with the library's flags) adds to every malloc and free:
 * ns per insert+remove pair, next to bare malloc+free in the same run, with
 * 1 and 4 threads sharing one set.  Each workload runs three ways on the
 * same pattern: the set alone, malloc+free alone, and malloc+free with the
 * set as the library would use it (insert after malloc, remove before
 * free).
 *
 *   pair       malloc then free at once (the allocator's fastest path)
 *   pool N     N live blocks per thread; each step frees one at random and
 *              allocates another (16..512 bytes): the set holds N x threads
 *              blocks, so its slots leave the caches when N is large;
 *              N = 4096, then --pool
 *   fresh N    the set alone, as pool N (--pool), but every block at a new
 *              address (an allocator that never reuses one): tombstones
 *              pile up
 *
 * Usage: blockset_bench [--steps N] [--pool N] [--reps N]
 *   (defaults 1000000 steps per thread, 65536, 5)
 *
 * Times are CPU time (CLOCK_THREAD_CPUTIME_ID) summed over the threads and
 * divided by the pairs made: with more threads than cores the wall time
 * says how the scheduler shared them, not what a pair costs.  Each row runs
 * its ways in turn REPS times and shows each way's fastest, so that other
 * work on the machine weighs on every way alike and least.  Prints one
 * line per row, with the set's levels at the end of its run. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockset.h"

enum way { SET_ONLY, MALLOC_ONLY, MALLOC_AND_SET, WAYS };
static const char *const way_names[WAYS] = { "set", "malloc+free", "malloc+free+set" };

enum workload { PAIR, POOL, FRESH };

static struct blockset set = BLOCKSET_INITIALIZER(BLOCKSET_FIRST_BITS, BLOCKSET_ABI_LEVELS);
static long steps = 1000000, pool = 65536, reps = 5; /* see Usage */
static pthread_barrier_t start_line;

struct run {
	enum way way;
	enum workload load;
	unsigned id;
	long pool;
	double cpu_ns;
	unsigned long lost;
};

static double thread_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *run_thread(void *arg)
{
	struct run *r = arg;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (r->id + 1), fresh = 0x7e0000000000ull + (uint64_t)r->id * (1ull << 36);
	size_t n = r->load == PAIR ? 1 : (size_t)r->pool, j;
	void **live = calloc(n, sizeof(*live));
	uint64_t size;
	void *volatile sink; /* keeps the compiler from dropping a malloc+free pair */
	double t0;
	long i;

	if (!live)
		abort();
	/* the pool filled, untimed */
	for (j = 0; r->load != PAIR && j < n; j++) {
		size = 16 + xorshift(&rng) % 497;
		live[j] = r->way == SET_ONLY ? (void *)(uintptr_t)(fresh += 528) : malloc(size);
		if (r->way != MALLOC_ONLY && blockset_insert(&set, (uint64_t)(uintptr_t)live[j], size))
			r->lost++;
	}
	pthread_barrier_wait(&start_line);
	t0 = thread_cpu_ns();
	for (i = 0; i < steps; i++) {
		size = 16 + xorshift(&rng) % 497;
		j = n == 1 ? 0 : xorshift(&rng) % n;
		switch (r->way) {
		case SET_ONLY:
			if (r->load == PAIR) {
				/* malloc's immediate reuse: one address */
				r->lost += blockset_insert(&set, fresh + 64, size) != 0;
				blockset_remove(&set, fresh + 64);
				break;
			}
			blockset_remove(&set, (uint64_t)(uintptr_t)live[j]);
			if (r->load == FRESH)
				live[j] = (void *)(uintptr_t)(fresh += 528);
			r->lost += blockset_insert(&set, (uint64_t)(uintptr_t)live[j], size) != 0;
			break;
		case MALLOC_ONLY:
			if (r->load == PAIR) {
				sink = malloc(size);
				free(sink);
				break;
			}
			free(live[j]);
			live[j] = malloc(size);
			break;
		case MALLOC_AND_SET:
			if (r->load == PAIR) {
				sink = malloc(size);
				r->lost += blockset_insert(&set, (uint64_t)(uintptr_t)sink, size) != 0;
				blockset_remove(&set, (uint64_t)(uintptr_t)sink);
				free(sink);
				break;
			}
			blockset_remove(&set, (uint64_t)(uintptr_t)live[j]);
			free(live[j]);
			live[j] = malloc(size);
			r->lost += blockset_insert(&set, (uint64_t)(uintptr_t)live[j], size) != 0;
			break;
		default:
			abort();
		}
	}
	r->cpu_ns = thread_cpu_ns() - t0;
	for (j = 0; r->load != PAIR && j < n; j++) {
		if (r->way != MALLOC_ONLY)
			blockset_remove(&set, (uint64_t)(uintptr_t)live[j]);
		if (r->way != SET_ONLY)
			free(live[j]);
	}
	free(live);
	return NULL;
}

/* The set's levels now: how many, the memory they map. */
static void print_levels(void)
{
	unsigned long long bytes = 0;
	uint32_t i;

	for (i = 0; i < set.abi.levels && set.abi.level[i].slots; i++)
		bytes += 16ull << set.abi.level[i].bits;
	printf(" [set: %u levels, %.1f MiB]", i, bytes / 1048576.0);
}

static double run_row(enum workload load, long n, enum way way, unsigned threads)
{
	pthread_t t[4];
	struct run r[4];
	double cpu = 0;
	unsigned long lost = 0;
	unsigned i;

	/* levels of the run before unmapped: each run grows its own */
	blockset_reset(&set);
	pthread_barrier_init(&start_line, NULL, threads);
	for (i = 0; i < threads; i++) {
		r[i] = (struct run){ .way = way, .load = load, .id = i, .pool = n };
		if (pthread_create(&t[i], NULL, run_thread, &r[i]))
			abort();
	}
	for (i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		cpu += r[i].cpu_ns;
		lost += r[i].lost;
	}
	pthread_barrier_destroy(&start_line);
	if (lost)
		printf("blockset_bench: %lu inserts lost\n", lost);
	return cpu / ((double)steps * threads);
}

int main(int argc, char **argv)
{
	static const char *const load_names[] = { "pair", "pool", "fresh" };
	struct {
		enum workload load;
		long n;
	} rows[] = { { PAIR, 1 }, { POOL, 4096 }, { POOL, 0 }, { FRESH, 0 } };
	enum workload load;
	unsigned threads, w, row;
	double best[WAYS], t;
	long rep, n;
	int i;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--steps"))
			steps = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--pool"))
			pool = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--reps"))
			reps = atol(argv[i + 1]);
		else
			break;
	}
	if (i < argc || steps <= 0 || pool <= 0 || reps <= 0) {
		fprintf(stderr, "usage: blockset_bench [--steps N] [--pool N] [--reps N]\n");
		return 2;
	}
	for (row = 0; row < sizeof(rows) / sizeof(rows[0]); row++)
		for (threads = 1; threads <= 4; threads *= 4) {
			load = rows[row].load;
			n = rows[row].n ? rows[row].n : pool;
			printf("blockset_bench: %-5s", load_names[load]);
			if (load != PAIR)
				printf(" %ld", n);
			printf(" threads=%u", threads);
			for (w = 0; w < WAYS; w++)
				best[w] = 1e300;
			for (rep = 0; rep < reps; rep++)
				for (w = 0; w < WAYS; w++)
					if (load != FRESH || w == SET_ONLY) {
						t = run_row(load, n, w, threads);
						best[w] = t < best[w] ? t : best[w];
					}
			for (w = 0; w < WAYS; w++)
				if (load != FRESH || w == SET_ONLY)
					printf(" %s=%.1f", way_names[w], best[w]);
			printf(" (cpu ns per pair)");
			print_levels();
			printf("\n");
			fflush(stdout);
		}
	return 0;
}
