/* target/snapshot.c on a real process (ptrace, no BPF): a process with a
 * thread blocked in read(), one in nanosleep(), one writing a counter
 * without pause and a SIGCHLD handler is stopped, copied (one injected
 * clone), resumed, and its copy read while it runs: the copy holds the
 * counter as it was at the stop while the process's moves on; the copy
 * never runs (its counter never moves); after the copy is dropped and
 * reaped (one injected wait4) the process has no child left, got no
 * SIGCHLD, its read() returns the bytes written later and its nanosleep()
 * sleeps its whole time: neither saw EINTR.  A mapping with
 * MADV_WIPEONFORK is named as a gap.  Then a tracer process making
 * snapshots in a loop is SIGKILLed at random moments, many times: the
 * process runs on every time (its sleeping thread never sees EINTR, its
 * counter moves), and every copy left ends at once (a zombie child, never
 * a second running program). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "snapshot.h"
#include "tracee.h"

/* the busy thread's, in the child's private memory (shared memory would
 * be shared with the copy too) */
static volatile uint64_t counter;

struct shared {
	volatile int sigchld;
	volatile int read_got, read_errno; /* the reader thread's read() */
	volatile int sleep_rc, sleep_errno;
	volatile double slept_ms;
	volatile int done;
};

static struct shared *sh;
static int data_pipe[2];

static void on_sigchld(int sig)
{
	(void)sig;
	sh->sigchld++;
}

static void *reader(void *arg)
{
	char buf[8];
	ssize_t got;

	(void)arg;
	got = read(data_pipe[0], buf, sizeof(buf));
	sh->read_errno = got < 0 ? errno : 0;
	sh->read_got = (int)got;
	return NULL;
}

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *sleeper(void *arg)
{
	struct timespec d = { 1, 0 };
	double t0 = mono_ms();

	(void)arg;
	sh->sleep_rc = nanosleep(&d, NULL);
	sh->sleep_errno = sh->sleep_rc ? errno : 0;
	sh->slept_ms = mono_ms() - t0;
	return NULL;
}

static void *busy(void *arg)
{
	(void)arg;
	while (!sh->done)
		counter++;
	return NULL;
}

static void child_main(int ready_fd)
{
	pthread_t t[3];
	void *wiped = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	signal(SIGCHLD, on_sigchld);
	if (wiped == MAP_FAILED || madvise(wiped, 4096, MADV_WIPEONFORK))
		_exit(3);
	*(volatile int *)wiped = 1;
	pthread_create(&t[0], NULL, reader, NULL);
	pthread_create(&t[1], NULL, sleeper, NULL);
	pthread_create(&t[2], NULL, busy, NULL);
	if (write(ready_fd, &wiped, sizeof(wiped)) != sizeof(wiped))
		_exit(4);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	sh->done = 1;
	pthread_join(t[2], NULL);
	_exit(0);
}

/* The children of process PID (every thread's), counted. */
static int children_of(pid_t pid)
{
	char path[320];
	struct dirent *e;
	int n = 0, c;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	CHECK(d, "opendir %s: %s", path, strerror(errno));
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/children", pid, e->d_name);
		f = fopen(path, "re");
		while (f && fscanf(f, "%d", &c) == 1)
			n++;
		if (f)
			fclose(f);
	}
	closedir(d);
	return n;
}

/* The counter in process PID's memory. */
static uint64_t counter_of(pid_t copy)
{
	uint64_t v = 0;
	char path[64];
	int fd;

	/* /proc/PID/mem: process_vm_readv would pin the shared page and copy it */
	snprintf(path, sizeof(path), "/proc/%d/mem", copy);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	CHECK(pread(fd, &v, sizeof(v), (off_t)(uintptr_t)&counter) == sizeof(v));
	close(fd);
	return v;
}

/* The tracer of the second part: snapshots of PID, taken and ended,
 * until it is killed. */
static void snapshot_loop(pid_t pid)
{
	for (;;) {
		struct tracee_options o = { 0 };
		struct tracee_set *set = NULL;
		struct proc_snapshot snap;
		pid_t *tids = NULL;
		size_t n = 0;
		char why[200] = "";

		int err;

		if ((err = tracee_set_new(&o, &set)) || (err = tracee_seize_process(set, pid)) ||
		    (err = proc_snapshot_prepare(pid, &snap, why, sizeof(why)))) {
			fprintf(stderr, "tracer: %s %s\n", strerror(-err), why);
			_exit(1);
		}
		if ((err = tracee_stop_process(set, pid, &tids, &n)) ||
		    (err = proc_snapshot_take(&snap, tids[0], why, sizeof(why)))) {
			fprintf(stderr, "tracer: %s %s\n", strerror(-err), why);
			_exit(2);
		}
		tracee_resume_process(set, pid);
		free(tids);
		proc_snapshot_drop(&snap);
		if (tracee_stop_process(set, pid, &tids, &n) || proc_snapshot_reap(&snap, tids[0]))
			_exit(3);
		tracee_resume_process(set, pid);
		free(tids);
		proc_snapshot_free(&snap);
		tracee_set_free(set);
	}
}

/* The sleeper of the second part: 1 ms sleeps, any EINTR counted. */
static void *short_sleeper(void *arg)
{
	struct timespec d = { 0, 1000000 };

	(void)arg;
	while (!sh->done)
		if (nanosleep(&d, NULL))
			sh->sleep_errno = errno;
	return NULL;
}

/* The state letters of PID's threads ("S R t ..."), for a message. */
static const char *thread_states(pid_t pid)
{
	static char out[256];
	char path[320], st;
	struct dirent *e;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	out[0] = 0;
	d = opendir(path);
	while (d && (e = readdir(d)) && n + 3 < sizeof(out)) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", pid, e->d_name);
		f = fopen(path, "re");
		if (f && fscanf(f, "%*d (%*[^)]) %c", &st) == 1) {
			out[n++] = st;
			out[n++] = ' ';
			out[n] = 0;
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return out;
}

/* A child of PID's other than a zombie ("Z"), or 0. */
static pid_t live_child_of(pid_t pid)
{
	char path[320], st;
	struct dirent *e;
	pid_t c, found = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	while (d && (e = readdir(d)) && !found) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/children", pid, e->d_name);
		f = fopen(path, "re");
		while (f && !found && fscanf(f, "%d", &c) == 1) {
			FILE *sf;

			snprintf(path, sizeof(path), "/proc/%d/stat", c);
			sf = fopen(path, "re");
			if (sf && fscanf(sf, "%*d (%*[^)]) %c", &st) == 1 && st != 'Z')
				found = c;
			if (sf)
				fclose(sf);
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

static void killed_tracers(void)
{
	pthread_t t[2];
	pid_t pid, tracer;
	int rounds = 40, left = 0, status;
	uint64_t before;

	memset((void *)sh, 0, sizeof(*sh));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		signal(SIGCHLD, on_sigchld);
		pthread_create(&t[0], NULL, short_sleeper, NULL);
		pthread_create(&t[1], NULL, busy, NULL);
		pthread_join(t[0], NULL);
		pthread_join(t[1], NULL);
		_exit(0);
	}
	srand(7);
	for (int r = 0; r < rounds; r++) {
		pid_t c;

		tracer = fork();
		CHECK(tracer >= 0);
		if (tracer == 0)
			snapshot_loop(pid);
		usleep(2000 + rand() % 20000);
		kill(tracer, SIGKILL);
		CHECK(waitpid(tracer, &status, 0) == tracer);
		EXPECT(WIFSIGNALED(status), "round %d: the tracer ended by itself (status %#x)", r, status);
		usleep(20 * 1000);
		if (waitpid(pid, &status, WNOHANG) == pid)
			CHECK(0, "round %d: the process ended (status %#x) after its tracer was killed", r, status);
		/* it runs on: its counter moves (on a loaded machine the busy
		 * thread may wait its turn: up to 2 s, and if it never moves,
		 * what state its threads are in) */
		before = counter_of(pid);
		for (int w = 0; w < 200 && counter_of(pid) == before; w++)
			usleep(10 * 1000);
		EXPECT(counter_of(pid) != before, "round %d: the process does not run after its tracer was killed: %s", r,
		       thread_states(pid));
		c = live_child_of(pid);
		EXPECT(!c, "round %d: a copy %d of the process runs", r, (int)c);
		if (c) {
			kill(c, SIGKILL);
			left++;
		}
	}
	sh->done = 1;
	CHECK(waitpid(pid, &status, 0) == pid);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the process ended with status %#x", status);
	EXPECT(sh->sleep_errno == 0, "a 1 ms nanosleep failed: %s", strerror(sh->sleep_errno));
	EXPECT(sh->sigchld == 0, "the process got %d SIGCHLD", sh->sigchld);
	printf("ok: %d tracers killed while making snapshots: the process ran on every time, no copy ran, no "
	       "EINTR, no SIGCHLD\n", rounds);
	(void)left;
}

int main(void)
{
	struct tracee_options o = { 0 };
	struct tracee_set *set = NULL;
	struct proc_snapshot snap;
	size_t n = 0;
	pid_t pid, *tids = NULL;
	void *wiped = NULL;
	uint64_t at_stop, c1, c2, live;
	char why[200] = "";
	int ready[2], status, err;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	CHECK(pipe(ready) == 0 && pipe(data_pipe) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		child_main(ready[1]);
	CHECK(read(ready[0], &wiped, sizeof(wiped)) == sizeof(wiped));
	usleep(100 * 1000); /* the threads in their calls */

	err = proc_snapshot_prepare(pid, &snap, why, sizeof(why));
	CHECK(!err, "proc_snapshot_prepare: %s: %s", strerror(-err), why);
	EXPECT(snap.ngaps >= 1 && snap.gaps[0].start <= (uintptr_t)wiped && (uintptr_t)wiped < snap.gaps[snap.ngaps - 1].end,
	       "the MADV_WIPEONFORK page %p is not a gap (%zu gaps)", wiped, snap.ngaps);

	CHECK(!tracee_set_new(&o, &set));
	CHECK(!tracee_seize_process(set, pid));
	CHECK(!tracee_stop_process(set, pid, &tids, &n) && n == 4, "stopped %zu threads", n);
	at_stop = counter_of(pid);
	err = proc_snapshot_take(&snap, tids[0], why, sizeof(why));
	CHECK(!err, "proc_snapshot_take: %s: %s", strerror(-err), why);
	CHECK(snap.copy > 0 && snap.copy != pid);
	EXPECT(counter_of(pid) == at_stop, "the counter moved during the stop");
	CHECK(!tracee_resume_process(set, pid));
	free(tids);

	usleep(50 * 1000);
	c1 = counter_of(snap.copy);
	live = counter_of(pid);
	usleep(50 * 1000);
	c2 = counter_of(snap.copy);
	EXPECT(c1 == at_stop && c2 == at_stop, "the copy's counter %llu, %llu; at the stop %llu",
	       (unsigned long long)c1, (unsigned long long)c2, (unsigned long long)at_stop);
	EXPECT(live != at_stop, "the process did not run on after the snapshot");
	printf("ok: the copy holds the counter at the stop (%llu) while the process ran on\n",
	       (unsigned long long)at_stop);

	EXPECT(children_of(pid) == 1, "the copy is not the process's one child");
	err = proc_snapshot_drop(&snap);
	EXPECT(!err, "proc_snapshot_drop: %s", strerror(-err));
	CHECK(!tracee_stop_process(set, pid, &tids, &n));
	err = proc_snapshot_reap(&snap, tids[0]);
	EXPECT(!err, "proc_snapshot_reap: %s", strerror(-err));
	CHECK(!tracee_resume_process(set, pid));
	free(tids);
	EXPECT(children_of(pid) == 0, "a child is left in the process: %d", children_of(pid));
	tracee_set_free(set);
	proc_snapshot_free(&snap);

	CHECK(write(data_pipe[1], "data", 4) == 4);
	CHECK(waitpid(pid, &status, 0) == pid);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the process ended with status %#x", status);
	EXPECT(sh->read_got == 4 && sh->read_errno == 0, "read() gave %d (%s)", sh->read_got,
	       strerror(sh->read_errno));
	EXPECT(sh->sleep_rc == 0 && sh->slept_ms >= 999, "nanosleep() gave %d (%s) after %.1f ms", sh->sleep_rc,
	       strerror(sh->sleep_errno), sh->slept_ms);
	EXPECT(sh->sigchld == 0, "the process got %d SIGCHLD", sh->sigchld);
	printf("ok: reaped in the process, no SIGCHLD, read() and nanosleep() restarted (%.1f ms slept), clone "
	       "%.3f ms, wait4 %.3f ms\n", sh->slept_ms, snap.clone_ms, snap.reap_ms);
	killed_tracers();
	return check_status();
}
