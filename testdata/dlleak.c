/* libdlleak.so: a library that dlopen_main loads late, after tracing began,
 * and that leaks 24 bytes per iteration from dlleak_leak_one(). */
#include <stdlib.h>
#include <string.h>

#include "args.h"

__attribute__((noinline)) void *dlleak_leak_one(long n)
{
	char *p = malloc(24);

	memset(p, (int)n, 24);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

void dlleak_run(long iterations, long interval_ms)
{
	for (long n = 0; !iterations || n < iterations; n++) {
		dlleak_leak_one(n);
		pause_ms(interval_ms);
	}
}
