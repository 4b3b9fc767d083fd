/* Four threads, each leaking from its own function (leak_alpha .. leak_delta)
 * with a distinct size, so per-thread stacks can be told apart in a report:
 * alpha 16 B, beta 32 B, gamma 48 B, delta 64 B per allocation. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

static struct targs args;

#define DEFINE_LEAKER(name, size)                                   \
	__attribute__((noinline)) static void *name(void *unused)   \
	{                                                           \
		(void)unused;                                       \
		pause_ms(args.delay_ms);                            \
		for (long n = 0; !args.iterations || n < args.iterations; n++) { \
			char *p = malloc(size);                     \
			memset(p, (int)n, size);                    \
			__asm__ volatile("" : : "r"(p) : "memory"); \
			pause_ms(args.interval_ms);                 \
		}                                                   \
		return NULL;                                        \
	}

DEFINE_LEAKER(leak_alpha, 16)
DEFINE_LEAKER(leak_beta, 32)
DEFINE_LEAKER(leak_gamma, 48)
DEFINE_LEAKER(leak_delta, 64)

int main(int argc, char **argv)
{
	void *(*fns[])(void *) = { leak_alpha, leak_beta, leak_gamma, leak_delta };
	pthread_t tids[4];

	targs_parse(&args, argc, argv);
	for (int i = 0; i < 4; i++)
		if (pthread_create(&tids[i], NULL, fns[i], NULL) != 0) {
			fprintf(stderr, "threads: pthread_create failed\n");
			return 1;
		}
	for (int i = 0; i < 4; i++)
		pthread_join(tids[i], NULL);
	return 0;
}
