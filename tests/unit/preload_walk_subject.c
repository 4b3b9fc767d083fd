/* Code for tests/unit/test_preload_walk.c to walk through, built apart
 * from it with -O2 -fomit-frame-pointer and no sanitizer (the Makefile):
 * frames whose CFA is rsp + offset, as in most distributions' code,
 * between the test's own (ASan, frame pointers) and libc's.  Each call
 * ends by calling HERE(ARG), where the test walks. */
#include <signal.h>
#include <stdlib.h>

#include "preload_walk_subject.h"

/* The sum after the call keeps each call a real call, not a jump, and
 * the array makes each frame's CFA offset larger than a bare push's. */
__attribute__((noinline)) int subject_recurse(int depth, void (*here)(void *), void *arg)
{
	volatile int pad[6] = { depth };

	if (depth <= 0) {
		here(arg);
		return pad[0];
	}
	return subject_recurse(depth - 1, here, arg) + pad[0];
}

static void (*qsort_here)(void *);
static void *qsort_arg;
static int qsort_calls;

/* libc's qsort calls it: the walk climbs out through libc's frames */
static int subject_compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	if (qsort_calls++ == 0)
		qsort_here(qsort_arg);
	return (x > y) - (x < y);
}

__attribute__((noinline)) int subject_qsort(int depth, void (*here)(void *), void *arg)
{
	int v[8] = { 5, 3, 7, 1, 8, 2, 6, 4 };

	if (depth > 0)
		return subject_qsort(depth - 1, here, arg) + 1;
	qsort_here = here;
	qsort_arg = arg;
	qsort_calls = 0;
	qsort(v, 8, sizeof(v[0]), subject_compare);
	return v[0];
}

__attribute__((noinline)) int subject_raise(int depth, int sig)
{
	volatile int pad[4] = { depth };

	if (depth <= 0)
		return raise(sig);
	return subject_raise(depth - 1, sig) + pad[0];
}
