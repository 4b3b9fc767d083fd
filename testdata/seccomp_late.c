/* A program that installs a seccomp filter after it started, in a thread,
 * while dwleak's preload library walks its stacks in the process
 * (dwleak --walk process): the filter kills the process on an anonymous
 * private mmap of 1 MiB or more (what the library would map for the
 * thread's first ring, 2 MiB), and the thread then leaks N blocks of 48 B
 * in leak_site().  The library sees the filter go in
 * (preload/seccomp_guard.c) and goes back to its sites first, so the
 * thread's calls are walked by the kernel and the program lives; without
 * that, its first leak would be its last call.
 *
 * usage: seccomp_late [--via prctl|syscall] [--walk-first MS] [--leaks N]
 *   --via: how the filter goes in: prctl(PR_SET_SECCOMP) (default) or
 *          syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER) (libseccomp's way)
 *   --walk-first: the main thread allocates for MS ms first (default 300),
 *          so that the library walks in the process by then
 *   --leaks: N blocks (default 40)
 * Prints "seccomp_late: N blocks of 48 B leaked, filter in by VIA". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "big_mmap_filter.h"

static const char *via = "prctl";
static long leaks = 40;
static void *kept[1000];

__attribute__((noinline)) static void *leak_site(void)
{
	void *p = malloc(48);

	asm volatile("" : : "r"(p) : "memory");
	return p;
}

static void *worker(void *arg)
{
	long i;

	(void)arg;
	if (big_mmap_filter_install(SECCOMP_RET_KILL_PROCESS, !strcmp(via, "syscall"))) {
		perror("seccomp_late: the filter");
		return (void *)1;
	}
	for (i = 0; i < leaks; i++)
		kept[i] = leak_site();
	return NULL;
}

int main(int argc, char **argv)
{
	long first_ms = 300, ms = 0;
	struct timespec t0, t;
	void *warm, *failed = NULL;
	pthread_t th;
	int a;

	for (a = 1; a + 1 < argc; a += 2)
		if (!strcmp(argv[a], "--via") && (!strcmp(argv[a + 1], "prctl") || !strcmp(argv[a + 1], "syscall")))
			via = argv[a + 1];
		else if (!strcmp(argv[a], "--walk-first"))
			first_ms = atol(argv[a + 1]);
		else if (!strcmp(argv[a], "--leaks"))
			leaks = atol(argv[a + 1]);
		else
			break;
	if (a != argc || first_ms < 0 || leaks < 1 || leaks > 1000) {
		fprintf(stderr, "usage: seccomp_late [--via prctl|syscall] [--walk-first MS] [--leaks N (1-1000)]\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ms < first_ms) {
		warm = malloc(40);
		asm volatile("" : : "r"(warm) : "memory");
		free(warm);
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &t);
		ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
	}
	if (pthread_create(&th, NULL, worker, NULL) || pthread_join(th, &failed) || failed)
		return 1;
	printf("seccomp_late: %ld blocks of 48 B leaked, filter in by %s\n", leaks, via);
	return 0;
}
