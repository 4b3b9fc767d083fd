/* A program that stops itself (SIGSTOP) four calls deep, through qsort's
 * callback in libc, for vm/walk_a64 and gdb to walk the same stopped
 * stack (vm/check_arm64.sh).  Built -O2 -fomit-frame-pointer.  With the
 * argument "signal" it stops in a SIGUSR1 handler instead, the signal
 * raised at that depth: the walk goes through the kernel's signal frame. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile int sink;

__attribute__((noinline)) static void stop_here(int depth)
{
	raise(SIGSTOP);
	sink += depth; /* not a tail call */
}

static int in_handler;

__attribute__((noinline)) static void on_usr1(int sig)
{
	stop_here(sig);
	sink += sig;
}

__attribute__((noinline)) static void level2(int v)
{
	if (in_handler)
		raise(SIGUSR1);
	else
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

int main(int argc, char **argv)
{
	int v[] = { 3, 1, 2 };

	if (argc > 1 && !strcmp(argv[1], "signal")) {
		in_handler = 1;
		signal(SIGUSR1, on_usr1);
	}

	qsort(v, 3, sizeof(v[0]), compare);
	printf("%d %d %d\n", v[0], v[1], v[2]);
	return 0;
}
