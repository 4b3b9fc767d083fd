/* target/tracee.c on real processes (ptrace, no BPF): a shell command
 * that forks and execs is followed event by event (each process's exec,
 * the shell's fork, every exit, with the exit statuses), a process seized
 * while running with several threads is stopped whole and resumed, a
 * signal the program sends itself still reaches its handler, and the end
 * of a process let go is kept for whoever waits for it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tracee.h"

/* Forks ARGV held before its execve (like target_spawn); *RELEASE_FD
 * lets it go. */
static pid_t spawn_held(char *const argv[], int *release_fd)
{
	int p[2];
	pid_t pid;
	char c;

	CHECK(pipe(p) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(127);
		/* LeakSanitizer cannot run in a traced process (it ptraces itself) */
		setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(p[0]);
	*release_fd = p[1];
	return pid;
}

/* The events of a whole tree until its last process exits, resuming
 * after each; their kinds in KINDS (a letter each), exits' statuses in
 * order in STATUSES. */
static void follow(struct tracee_set *s, char *kinds, size_t cap, int *statuses, size_t *nstat)
{
	struct tracee_event ev;
	size_t k = 0;
	int ret;

	*nstat = 0;
	while (tracee_count(s) && k + 1 < cap) {
		ret = tracee_next(s, &ev);
		CHECK(ret >= 0, "tracee_next: %s", strerror(-ret));
		if (!ret) {
			usleep(1000);
			continue;
		}
		switch (ev.kind) {
		case TRACEE_FORK: /* dash vforks where it can: the same to us */
			kinds[k++] = 'f';
			tracee_resume(s, ev.child);
			tracee_resume(s, ev.tid);
			break;
		case TRACEE_EXEC:
			kinds[k++] = 'e';
			tracee_resume(s, ev.tid);
			break;
		case TRACEE_EXIT:
			kinds[k++] = 'x';
			statuses[(*nstat)++] = ev.status;
			break;
		default:
			kinds[k++] = '?';
			tracee_resume(s, ev.tid);
		}
	}
	kinds[k] = 0;
}

/* Runs ARGV held, seized and followed to its end (see follow). */
static void run_followed(char *const argv[], char *kinds, size_t cap, int *statuses, size_t *nstat)
{
	struct tracee_options o = { .follow = true };
	struct tracee_set *s;
	pid_t pid;
	int fd;

	CHECK(tracee_set_new(&o, &s) == 0);
	pid = spawn_held(argv, &fd);
	CHECK(tracee_seize_thread(s, pid, pid) == 0);
	CHECK(write(fd, "x", 1) == 1);
	close(fd);
	follow(s, kinds, cap, statuses, nstat);
	tracee_set_free(s);
}

static void test_tree(void)
{
	char *argv[] = { "/bin/sh", "-c", "/bin/true; /bin/sh -c 'exit 3'; exit 7", NULL };
	int statuses[8];
	size_t nstat;
	char kinds[32];

	run_followed(argv, kinds, sizeof(kinds), statuses, &nstat);
	/* sh execs; forks /bin/true, which execs and exits 0; forks the inner
	 * sh, which execs and exits 3; exits 7 */
	EXPECT(!strcmp(kinds, "efexfexx"), "events %s, want efexfexx", kinds);
	EXPECT(nstat == 3 && WIFEXITED(statuses[0]) && WEXITSTATUS(statuses[0]) == 0 &&
		       WEXITSTATUS(statuses[1]) == 3 && WEXITSTATUS(statuses[2]) == 7,
	       "exit statuses");
}

/* A program with 4 threads spinning: stopped whole, resumed. */
static void test_stop_threads(void)
{
	struct tracee_options o = { 0 };
	struct tracee_set *s;
	pid_t pid, *tids;
	size_t n, i;
	char path[64], state;
	FILE *f;

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* a copy of this program that spins in four threads */
		execl("/proc/self/exe", "test_tracee", "--spin", (char *)NULL);
		_exit(127);
	}
	usleep(200000); /* let it start its threads */
	CHECK(tracee_set_new(&o, &s) == 0);
	CHECK(tracee_seize_process(s, pid) == 0);
	CHECK(tracee_stop_process(s, pid, &tids, &n) == 0);
	EXPECT(n == 5, "%zu threads stopped, want 5", n);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tids[i]);
		f = fopen(path, "re");
		CHECK(f);
		CHECK(fscanf(f, "%*d (%*[^)]) %c", &state) == 1);
		fclose(f);
		EXPECT(state == 't', "thread %d is in state %c, want t (tracing stop)", tids[i], state);
	}
	free(tids);
	CHECK(tracee_resume_process(s, pid) == 0);
	tracee_set_free(s); /* detaches: it runs on, untraced */
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	usleep(100000);
	f = fopen(path, "re");
	CHECK(f);
	CHECK(fscanf(f, "%*d (%*[^)]) %c", &state) == 1);
	fclose(f);
	EXPECT(state == 'R' || state == 'S', "after detach the process is in state %c", state);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void *spin(void *arg)
{
	volatile unsigned long *x = arg;

	for (;;)
		(*x)++;
	return NULL;
}

static volatile sig_atomic_t got_usr1;

static void on_usr1(int sig)
{
	(void)sig;
	got_usr1 = 1;
}

/* A signal the tracee sends itself reaches its handler: the tracer passes
 * it on.  Exit status 0 when it did. */
static int signal_child(void)
{
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);
	return got_usr1 ? 0 : 1;
}

static void test_signal_passed(void)
{
	char *argv[] = { "/proc/self/exe", "--signal", NULL };
	int statuses[4];
	size_t nstat;
	char kinds[8];

	run_followed(argv, kinds, sizeof(kinds), statuses, &nstat);
	EXPECT(nstat == 1 && WIFEXITED(statuses[0]) && WEXITSTATUS(statuses[0]) == 0,
	       "the handler did not run under the tracer");
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--spin")) {
		static unsigned long counters[4];
		pthread_t t;
		int i;

		for (i = 0; i < 4; i++)
			pthread_create(&t, NULL, spin, &counters[i]);
		pause();
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--signal"))
		return signal_child();
	test_tree();
	test_stop_threads();
	test_signal_passed();
	return check_status();
}
