/* A test runner in miniature, for following process trees: it forks one
 * child per test (no exec), each leaking a known amount from a function of
 * its own and exiting with a known status, one child killed by a signal,
 * and one child that execs the program given after --; the runner leaks
 * too.  With --delay-ms D it waits D ms before forking (time for dwleak -p
 * --follow-forks to attach).  Expected, with the seed as the exec'd
 * program and --iterations N:
 *   runner     64 B in 1 allocation (runner_leak)
 *   test k     k allocations of 100 * k bytes (test_leak), k = 1..3;
 *              test 3 exits 1, the others 0
 *   crasher    24 B in 1 allocation (crash_leak), then SIGABRT
 *   exec'd     whatever it leaks (the seed: 40 B per iteration) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile kept; /* so the compiler keeps each leak */

__attribute__((noinline)) static void runner_leak(void)
{
	kept = malloc(64);
}

__attribute__((noinline)) static void test_leak(int k)
{
	int i;

	for (i = 0; i < k; i++)
		kept = malloc(100 * (size_t)k);
}

__attribute__((noinline)) static void crash_leak(void)
{
	kept = malloc(24);
	abort();
}

int main(int argc, char **argv)
{
	char **exec_argv = NULL;
	long delay_ms = 0;
	int i, status, failed = 0;
	pid_t pid;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--delay-ms") && i + 1 < argc) {
			delay_ms = atol(argv[++i]);
		} else if (!strcmp(argv[i], "--")) {
			exec_argv = &argv[i + 1];
			break;
		} else {
			fprintf(stderr, "usage: forker [--delay-ms D] [-- PROG ARG...]\n");
			return 2;
		}
	}
	if (delay_ms > 0)
		usleep((useconds_t)delay_ms * 1000);
	runner_leak();
	for (i = 1; i <= 3; i++) {
		pid = fork();
		if (pid == 0) {
			test_leak(i);
			_exit(i == 3);
		}
	}
	if (fork() == 0)
		crash_leak();
	if (exec_argv && fork() == 0) {
		execv(exec_argv[0], exec_argv);
		_exit(127);
	}
	while (wait(&status) > 0)
		failed += !WIFEXITED(status) || WEXITSTATUS(status);
	printf("forker: %d test(s) failed\n", failed);
	return 0;
}
