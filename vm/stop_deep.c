/* A program that stops itself (SIGSTOP) four calls deep, through qsort's
 * callback in libc, for vm/walk_a64 and gdb to walk the same stopped
 * stack (vm/check_arm64.sh).  Built -O2 -fomit-frame-pointer. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static volatile int sink;

__attribute__((noinline)) static void stop_here(int depth)
{
	raise(SIGSTOP);
	sink += depth; /* not a tail call */
}

__attribute__((noinline)) static void level2(int v)
{
	stop_here(v + 1);
	sink += v;
}

static int stopped;

__attribute__((noinline)) static int compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	if (!stopped) {
		stopped = 1;
		level2(x);
	}
	return (x > y) - (x < y);
}

int main(void)
{
	int v[] = { 3, 1, 2 };

	qsort(v, 3, sizeof(v[0]), compare);
	printf("%d %d %d\n", v[0], v[1], v[2]);
	return 0;
}
