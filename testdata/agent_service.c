/* agent_service: a service in miniature for `dwleak agent`'s tests and
 * benchmarks (tests/agent_*.sh, bench/run_agent_bench.sh).  It keeps
 * every block it allocates (a leak that grows), says it is alive once a
 * second on stdout (so a test can see it ran on, untouched, after the
 * agent detached), and runs until killed:
 *
 *   --grow-bytes B     bytes kept per allocation, from grow_here() (4096)
 *   --iterations N     allocations before it goes quiet (0 = forever; 10);
 *                      one every --interval-ms M (50); quiet, it allocates
 *                      nothing more and keeps printing
 *   --stacks K         first keeps 64 B from each of K distinct stacks
 *                      (paths of path_step() calls through via_a/via_b)
 *   --prefork N        forks N workers after start-up that do the same
 *                      (a pre-forking server: its workers never exec);
 *                      only the parent prints; a worker ends with it
 *   --oom              keeps 1 MiB every --interval-ms from oom_grow(),
 *                      written so it is resident, until the OOM killer
 *                      ends it
 *   --exec-after-ms T  after T ms, execs what follows "--"
 *   --delay-ms D       waits D ms before the first allocation
 *
 * Lines: "started PID", "alive SECONDS" (each second), "quiet" once
 * the allocations are done; workers print nothing. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

/* Everything kept: a list, so no block is ever unreachable. */
struct kept {
	struct kept *next;
};
static struct kept *kept;

static void keep(void *p)
{
	struct kept *k = p;

	if (!k)
		return;
	k->next = kept;
	kept = k;
}

NOINLINE static void grow_here(size_t bytes)
{
	keep(malloc(bytes < sizeof(struct kept) ? sizeof(struct kept) : bytes));
	KEEP_FRAME();
}

NOINLINE static void oom_grow(void)
{
	size_t n = 1 << 20;
	char *p = malloc(n);

	if (p)
		memset(p, 0x5a, n); /* resident */
	keep(p);
	KEEP_FRAME();
}

NOINLINE static void path_step(unsigned bits, int depth);

NOINLINE static void via_a(unsigned bits, int depth)
{
	path_step(bits, depth);
	KEEP_FRAME();
}

NOINLINE static void via_b(unsigned bits, int depth)
{
	path_step(bits, depth);
	KEEP_FRAME();
}

/* Path BITS, DEPTH levels deep: a stack of its own for each value. */
NOINLINE static void path_step(unsigned bits, int depth)
{
	if (!depth) {
		keep(malloc(64));
		KEEP_FRAME();
		return;
	}
	if (bits & 1)
		via_a(bits >> 1, depth - 1);
	else
		via_b(bits >> 1, depth - 1);
	KEEP_FRAME();
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (ms > 0 && nanosleep(&ts, &ts))
		;
}

int main(int argc, char **argv)
{
	long grow = 4096, iterations = 10, interval = 50, stacks = 0, prefork = 0, exec_after = -1, delay = 0;
	int oom = 0, worker = 0, a;
	char **exec_argv = NULL;
	double t0, next_alive;
	long done = 0;

	for (a = 1; a < argc; a++) {
		long *v = !strcmp(argv[a], "--grow-bytes")      ? &grow
			  : !strcmp(argv[a], "--iterations")    ? &iterations
			  : !strcmp(argv[a], "--interval-ms")   ? &interval
			  : !strcmp(argv[a], "--stacks")        ? &stacks
			  : !strcmp(argv[a], "--prefork")       ? &prefork
			  : !strcmp(argv[a], "--exec-after-ms") ? &exec_after
			  : !strcmp(argv[a], "--delay-ms")      ? &delay
								: NULL;

		if (!strcmp(argv[a], "--oom")) {
			oom = 1;
		} else if (!strcmp(argv[a], "--")) {
			exec_argv = &argv[a + 1];
			break;
		} else if (v && a + 1 < argc) {
			*v = atol(argv[++a]);
		} else {
			fprintf(stderr, "usage: agent_service [--grow-bytes B] [--iterations N] [--interval-ms M] "
					"[--stacks K] [--prefork N] [--oom] [--delay-ms D] [--exec-after-ms T -- PROG...]\n");
			return 2;
		}
	}
	if (exec_after >= 0 && (!exec_argv || !exec_argv[0])) {
		fprintf(stderr, "agent_service: --exec-after-ms needs a program after --\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("started %d\n", (int)getpid());
	for (long i = 0; i < prefork && !worker; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("agent_service: fork");
			return 1;
		}
		worker = pid == 0;
		/* a worker ends with its server, as a test or benchmark expects */
		if (worker && (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() == 1))
			return 1;
	}
	if (!worker)
		signal(SIGCHLD, SIG_IGN); /* workers that end are reaped */
	sleep_ms(delay);
	for (long k = 0; k < stacks; k++)
		path_step((unsigned)k, 14);
	t0 = now_s();
	next_alive = t0 + 1;
	for (;;) {
		double t = now_s();

		if (exec_after >= 0 && (t - t0) * 1000 >= exec_after) {
			execvp(exec_argv[0], exec_argv);
			perror("agent_service: exec");
			return 127;
		}
		if (oom)
			oom_grow();
		else if (!iterations || done < iterations) {
			grow_here((size_t)grow);
			if (++done == iterations && !worker)
				printf("quiet\n");
		}
		if (!worker && t >= next_alive) {
			printf("alive %.0f\n", t - t0);
			next_alive += 1;
		}
		sleep_ms(interval);
	}
}
