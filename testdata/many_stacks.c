/* many_stacks: a short-lived program that allocates from many different
 * stacks, for following long process trees (tests/long_tree.sh): two
 * hundred of them make far more distinct stack ids than dwleak's stacks
 * map holds (16,384), which it must give back as they exit.
 *
 * Every allocation goes through step(), which recurses DEPTH levels
 * (default 9) calling itself through via_a() or via_b() as the bits of
 * the path number say, so path k reaches malloc by a stack of its own:
 * --stacks N (default 300) walks paths 0..N-1, each allocating and
 * freeing a block.  Every --leak-every Kth path (default 32: paths 0,
 * 32, ...) also leaks one block of 48 bytes from leak_here(), so each
 * process leaves a known number of lost blocks under distinct stacks.
 * --fork F runs the same paths in F forked children at once too (a tree
 * whose processes share stack ids: the same program at the same
 * addresses), the parent walking them again after each child it reaps;
 * --pause-ms M makes the parent wait M ms before reaping, while the
 * children exit (time for dwleak to move the stacks out of its map).
 *
 * Leaks: ceil(N / K) x 48 B from leak_here per walk of the paths (once in
 * a child, 1 + F times in the parent), definitely lost: the pointer is
 * dropped.  Built with frame pointers, so --unwind fp walks are distinct
 * per path too. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define LEAK_BYTES 48

/* so the calls below are no tail calls, each frame keeping its return
 * address (the stack's identity) */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static void *volatile sink;
static unsigned leak_every = 32;

NOINLINE static void leak_here(void)
{
	sink = malloc(LEAK_BYTES);
	sink = NULL; /* lost: nothing points to it any more */
	KEEP_FRAME();
}

NOINLINE static void step(unsigned path, unsigned bits, int depth);

NOINLINE static void via_a(unsigned path, unsigned bits, int depth)
{
	step(path, bits, depth);
	KEEP_FRAME();
}

NOINLINE static void via_b(unsigned path, unsigned bits, int depth)
{
	step(path, bits, depth);
	KEEP_FRAME();
}

NOINLINE static void step(unsigned path, unsigned bits, int depth)
{
	if (depth == 0) {
		sink = malloc(16 + path % 7 * 16);
		free(sink);
		if (path % leak_every == 0)
			leak_here();
		KEEP_FRAME();
		return;
	}
	if (bits & 1)
		via_a(path, bits >> 1, depth - 1);
	else
		via_b(path, bits >> 1, depth - 1);
	KEEP_FRAME();
}

static void paths(unsigned n, int depth)
{
	unsigned k;

	for (k = 0; k < n; k++)
		step(k, k, depth);
}

int main(int argc, char **argv)
{
	unsigned n = 300, forks = 0, pause_ms = 0, i, round;
	int depth = 9, a, child = 0;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--stacks") && a + 1 < argc)
			n = (unsigned)atoi(argv[++a]);
		else if (!strcmp(argv[a], "--depth") && a + 1 < argc)
			depth = atoi(argv[++a]);
		else if (!strcmp(argv[a], "--leak-every") && a + 1 < argc)
			leak_every = (unsigned)atoi(argv[++a]);
		else if (!strcmp(argv[a], "--fork") && a + 1 < argc)
			forks = (unsigned)atoi(argv[++a]);
		else if (!strcmp(argv[a], "--pause-ms") && a + 1 < argc)
			pause_ms = (unsigned)atoi(argv[++a]);
		else {
			fprintf(stderr, "usage: many_stacks [--stacks N] [--depth D] [--leak-every K] [--fork F] "
					"[--pause-ms M]\n");
			return 2;
		}
	}
	if (!leak_every || depth < 0 || depth > 30) {
		fprintf(stderr, "many_stacks: --leak-every must be > 0, --depth 0..30\n");
		return 2;
	}
	for (i = 0; i < forks && !child; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		child = pid == 0;
	}
	/* every walk of the paths, the parent's and the children's, from this
	 * one call: the same stacks, the same ids */
	for (round = 0;; round++) {
		if (round > 0) {
			if (child || !forks)
				break;
			if (round == 1 && pause_ms) {
				struct timespec ts = { pause_ms / 1000, (long)(pause_ms % 1000) * 1000000 };

				nanosleep(&ts, NULL);
			}
			if (wait(NULL) <= 0)
				break;
		}
		paths(n, depth);
	}
	return 0;
}
