/* A static, stripped program (built -static -s: no symbol names malloc, so
 * dwleak cannot find its allocator and cannot trace it), standing for a
 * static busybox or a stripped static tool in a traced tree: it leaks,
 * may run a program in a child (which dwleak can trace), waits, and ends
 * with the status it is told, so tests can check that dwleak returns that
 * status after it ends and says what it could not trace.
 *
 *   static_run [--leak-bytes B] [--delay-ms D] [--exit N] [--signal S] [-- PROG ARG...]
 *
 * Leaks B bytes (malloc, default 64), runs PROG in a forked child and
 * waits for it, sleeps D ms, then exits N (default 0) or kills itself
 * with signal S. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long number(const char *opt, const char *arg)
{
	char *end;
	long v;

	errno = 0;
	v = arg ? strtol(arg, &end, 10) : -1;
	if (!arg || errno || *end || v < 0) {
		fprintf(stderr, "static_run: %s wants a number >= 0, not '%s'\n", opt, arg ? arg : "");
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	long leak = 64, delay_ms = 0, status = 0, sig = 0;
	struct timespec ts;
	char **cmd = NULL;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			cmd = argv[i + 1] ? &argv[i + 1] : NULL;
			break;
		} else if (!strcmp(argv[i], "--leak-bytes")) {
			leak = number(argv[i], argv[i + 1]), i++;
		} else if (!strcmp(argv[i], "--delay-ms")) {
			delay_ms = number(argv[i], argv[i + 1]), i++;
		} else if (!strcmp(argv[i], "--exit")) {
			status = number(argv[i], argv[i + 1]), i++;
		} else if (!strcmp(argv[i], "--signal")) {
			sig = number(argv[i], argv[i + 1]), i++;
		} else {
			fprintf(stderr, "usage: static_run [--leak-bytes B] [--delay-ms D] [--exit N] "
					"[--signal S] [-- PROG ARG...]\n");
			return 2;
		}
	}
	if (leak) {
		volatile char *lost = malloc((size_t)leak);

		if (lost)
			lost[0] = 1; /* kept by nothing: leaked */
	}
	if (cmd) {
		pid_t child = fork();
		int st;

		if (child == 0) {
			execvp(cmd[0], cmd);
			fprintf(stderr, "static_run: cannot run %s: %s\n", cmd[0], strerror(errno));
			_exit(127);
		}
		if (child < 0 || waitpid(child, &st, 0) != child)
			return 2;
	}
	ts.tv_sec = delay_ms / 1000;
	ts.tv_nsec = delay_ms % 1000 * 1000000;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	if (sig) {
		signal((int)sig, SIG_DFL);
		raise((int)sig);
	}
	return (int)status;
}
