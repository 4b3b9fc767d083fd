/* walltime FILE CMD [ARG...]: run CMD, write its wall time in seconds
 * (CLOCK_MONOTONIC, fork to exit) to FILE, exit with CMD's status. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double t0, t1;
	int status;
	pid_t pid;
	FILE *f;

	if (argc < 3) {
		fprintf(stderr, "usage: walltime FILE CMD [ARG...]\n");
		return 2;
	}
	t0 = now_s();
	pid = fork();
	if (pid < 0) {
		perror("walltime: fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		perror("walltime: exec");
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0) {
		perror("walltime: waitpid");
		return 2;
	}
	t1 = now_s();
	f = fopen(argv[1], "w");
	if (!f) {
		perror("walltime: output");
		return 2;
	}
	fprintf(f, "%.4f\n", t1 - t0);
	fclose(f);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
