/* Allocates with malloc, calloc, realloc, aligned_alloc and posix_memalign
 * and frees everything: a report on it must show nothing outstanding. */
#include <stdlib.h>
#include <string.h>

#include "args.h"

__attribute__((noinline)) static void churn(long n)
{
	char *a = malloc(100 + (size_t)n % 7);
	char *b = calloc(4, 25);
	char *c = realloc(NULL, 30);
	void *d = aligned_alloc(64, 128);
	void *e = NULL;

	if (posix_memalign(&e, 32, 96) != 0)
		e = NULL;
	c = realloc(c, 300);
	memset(a, 1, 100);
	__asm__ volatile("" : : "r"(a), "r"(b), "r"(c), "r"(d), "r"(e) : "memory");
	free(a);
	free(b);
	free(c);
	free(d);
	free(e);
}

int main(int argc, char **argv)
{
	struct targs args;

	targs_parse(&args, argc, argv);
	pause_ms(args.delay_ms);
	for (long n = 0; !args.iterations || n < args.iterations; n++) {
		churn(n);
		pause_ms(args.interval_ms);
	}
	return 0;
}
