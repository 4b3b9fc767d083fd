/* Two callers whose calls reach malloc with the same stack pointer and the
 * same return address into leaf(): only the return address one frame up
 * (into from_left or from_right) tells the stacks apart.  The walker's
 * memo of whole walks (bpf/dwleak.bpf.c, walk_memo) is keyed by where a
 * walk starts, so this is the case it must get right by comparing the
 * words the remembered walk read.  Sizes differ per caller so the bytes of
 * each stack are checked too.
 *
 * usage: same_depth [--iterations N]: N calls, every third from
 * from_left (24 bytes), the others from from_right (40 bytes); nothing is
 * freed.  Built -O2 -fomit-frame-pointer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *keep[100000];
static volatile unsigned left_calls, right_calls;

__attribute__((noinline)) static void *leaf(size_t n)
{
	void *p = malloc(n);

	asm volatile("" : : "r"(p) : "memory"); /* no tail call */
	return p;
}

/* Different bodies (the counters), so identical-code folding keeps both. */
__attribute__((noinline)) void *from_left(size_t n)
{
	void *p = leaf(n);

	left_calls++;
	return p;
}

__attribute__((noinline)) void *from_right(size_t n)
{
	void *p = leaf(n);

	right_calls += 2;
	return p;
}

int main(int argc, char **argv)
{
	long i, n = 3000;

	if (argc == 3 && !strcmp(argv[1], "--iterations"))
		n = atol(argv[2]);
	if (n < 0 || n > (long)(sizeof(keep) / sizeof(keep[0]))) {
		fprintf(stderr, "usage: same_depth [--iterations N] (N <= 100000)\n");
		return 2;
	}
	for (i = 0; i < n; i++)
		keep[i] = i % 3 == 0 ? from_left(24) : from_right(40);
	printf("same_depth: %u from_left, %u from_right\n", left_calls, right_calls / 2);
	return 0;
}
