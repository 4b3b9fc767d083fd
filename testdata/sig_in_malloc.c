/* An allocation made by a signal handler that interrupted malloc.  The
 * walk from it crosses the signal frame into malloc's own frame, whose
 * return address, while dwleak's return probe on malloc is pending, is the
 * kernel's uretprobe trampoline, not big_alloc's address: dwleak must put
 * the real one back (bpf/dwleak.bpf.c, read_ra) to reach big_alloc and
 * main.
 *
 * To interrupt malloc at a known point, every time, a seccomp filter traps
 * (SIGSYS) the mmap that malloc makes for a block of BIG bytes (its
 * mmap threshold fixed with mallopt).  The handler allocates 40 B in
 * handler_site() and keeps them, then makes the mmap itself (with
 * MAP_NORESERVE added, which the filter lets through) and returns its
 * result as the trapped call's.  big_alloc frees its block, so only the
 * handler's allocations are outstanding.  The tcache is warmed first so the
 * handler's malloc(40) does not touch the arena malloc is working on.
 *
 * usage: sig_in_malloc [--iterations N] (default 50): N blocks, N handler
 * allocations of 40 B.  Built -O2 -fomit-frame-pointer. */
#define _GNU_SOURCE /* REG_RAX and the other register names */
#include <malloc.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "big_mmap_filter.h"

#define BIG (4u << 20)
#define KEEP_MAX 10000

static void *keep[KEEP_MAX];
static volatile long handled;

__attribute__((noinline)) static void *handler_site(size_t n)
{
	void *p = malloc(n);

	asm volatile("" : : "r"(p) : "memory"); /* no tail call */
	return p;
}

static void on_sigsys(int sig, siginfo_t *si, void *uc_)
{
	greg_t *r = ((ucontext_t *)uc_)->uc_mcontext.gregs;

	(void)sig;
	(void)si;
	if (handled < KEEP_MAX)
		keep[handled] = handler_site(40);
	handled++;
	r[REG_RAX] = (greg_t)syscall(SYS_mmap, r[REG_RDI], r[REG_RSI], r[REG_RDX], r[REG_R10] | MAP_NORESERVE,
				     r[REG_R8], r[REG_R9]);
}

__attribute__((noinline)) static int big_alloc(void)
{
	char *p = malloc(BIG);

	if (!p)
		return -1;
	p[0] = 1;
	asm volatile("" : : "r"(p) : "memory");
	free(p);
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	void *warm[8];
	long i, n = 50;

	if (argc == 3 && !strcmp(argv[1], "--iterations"))
		n = atol(argv[2]);
	if (n < 1 || n > KEEP_MAX) {
		fprintf(stderr, "usage: sig_in_malloc [--iterations N] (1 <= N <= %d)\n", KEEP_MAX);
		return 2;
	}
	mallopt(M_MMAP_THRESHOLD, 1 << 20); /* fixed: no dynamic threshold */
	for (i = 0; i < 8; i++)
		warm[i] = malloc(40);
	for (i = 0; i < 8; i++)
		free(warm[i]);
	if (sigaction(SIGSYS, &sa, NULL) || big_mmap_filter_install(SECCOMP_RET_TRAP, 0)) {
		perror("sig_in_malloc: seccomp");
		return 1;
	}
	for (i = 0; i < n; i++)
		if (big_alloc()) {
			fprintf(stderr, "sig_in_malloc: malloc(%u) failed\n", BIG);
			return 1;
		}
	printf("sig_in_malloc: %ld blocks, %ld handler allocations of 40 B\n", n, handled);
	return handled == n ? 0 : 1;
}
