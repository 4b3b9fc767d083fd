/* Recurses --depth levels (default 200) through recurse() and leaks 56 B at
 * the bottom, once per iteration: a stack deeper than most walkers' limits. */
#include <stdlib.h>
#include <string.h>

#include "args.h"

__attribute__((noinline)) static void *leak_at_bottom(long n)
{
	char *p = malloc(56);

	memset(p, (int)n, 56);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/* The empty asm after the call keeps it from becoming a tail call or a
 * loop, so every level has a real frame. */
__attribute__((noinline)) static long recurse(long depth, long n)
{
	long r;

	if (depth <= 1)
		return (long)(leak_at_bottom(n) != NULL);
	r = recurse(depth - 1, n);
	__asm__ volatile("" : "+r"(r));
	return r;
}

int main(int argc, char **argv)
{
	struct targs args;
	long sum = 0;

	targs_parse(&args, argc, argv);
	pause_ms(args.delay_ms);
	for (long n = 0; !args.iterations || n < args.iterations; n++) {
		sum += recurse(args.depth, n);
		pause_ms(args.interval_ms);
	}
	return sum == args.iterations ? 0 : 1;
}
