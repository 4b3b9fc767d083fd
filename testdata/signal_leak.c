/* Leaks from inside signal handlers, so a stack walk has to cross the
 * kernel's signal frame (__restore_rt): SIGALRM from an interval timer
 * leaks 40 B in leak_in_sigalrm(), and each SIGUSR1 leaks 80 B in
 * leak_in_sigusr1().  The main thread only waits in sigsuspend, so no
 * malloc is ever interrupted by a handler that calls malloc. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "args.h"

static volatile sig_atomic_t alarms;

__attribute__((noinline)) static void leak_in_sigalrm(void)
{
	char *p = malloc(40);

	memset(p, 1, 40);
	__asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) static void leak_in_sigusr1(void)
{
	char *p = malloc(80);

	memset(p, 2, 80);
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void on_signal(int sig)
{
	if (sig == SIGALRM) {
		leak_in_sigalrm();
		alarms++;
	} else {
		leak_in_sigusr1();
	}
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct itimerval it;
	struct targs args;
	sigset_t block, old;

	targs_parse(&args, argc, argv);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);

	sigemptyset(&block);
	sigaddset(&block, SIGALRM);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &old);

	pause_ms(args.delay_ms);
	memset(&it, 0, sizeof(it));
	it.it_interval.tv_sec = args.interval_ms / 1000;
	it.it_interval.tv_usec = (args.interval_ms % 1000) * 1000;
	if (args.interval_ms <= 0)
		it.it_interval.tv_usec = 1000;
	it.it_value = it.it_interval;
	setitimer(ITIMER_REAL, &it, NULL);

	while (!args.iterations || alarms < args.iterations)
		sigsuspend(&old);
	return 0;
}
