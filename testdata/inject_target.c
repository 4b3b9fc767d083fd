/* A process for tests/inject.sh to inject the preload library into while
 * it runs, checking its own work so that any harm the injection does
 * shows as a failure.  Every mode writes its pid to --ready FILE when set
 * up, runs until --stop FILE exists (or its own end), then prints
 * "inject_target: MODE ok ..." or "... FAIL ..." and exits 0 or 1.
 *
 *   stress N       N threads malloc/calloc/realloc/strdup/posix_memalign/
 *                  free in a tight loop, each block filled and checked
 *                  before it is freed, with double and SSE sums checked
 *                  every round (registers the injection must restore);
 *                  100 blocks allocated before --ready are reallocated,
 *                  measured and freed at the end (allocated before the
 *                  injection, freed after it); the main thread sleeps
 *   read           one thread, blocked in read() on stdin: it must get
 *                  exactly the line the test writes after the injection
 *   sleep MS       one thread in nanosleep(MS): it must not wake early
 *   sig_in_malloc MS  a thread's SIGSYS handler (seccomp traps the mmap of
 *                  a 1 MiB malloc, under the arena's lock) waits MS ms
 *                  before it returns; other threads sleep
 *   dlopen_block LIB  the main thread dlopen()s LIB, whose constructor
 *                  sleeps (libinject_ctor.so), while another waits
 *   seccomp allow|kill  a filter that lets through what the program and an
 *                  injection need (allow), or kills on clone3 and clone
 *                  (kill); then sleeps
 *   burst          reads commands on stdin: "burst K" makes K malloc+free
 *                  from the program, K from libinject_lib.so, K strdup
 *                  (libc's own malloc) and K new[]+delete[] (libstdc++ or
 *                  the allocator's operators), and answers "done" */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

void *inject_lib_malloc(size_t n);
void inject_lib_free(void *p);
void *inject_lib_new(size_t n);
void inject_lib_delete(void *p);

static const char *stop_file, *ready_file;
static volatile int failed;
static volatile int stopping;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void ready(void)
{
	FILE *f;

	if (!ready_file)
		return;
	f = fopen(ready_file, "w");
	if (f) {
		fprintf(f, "%d\n", getpid());
		fclose(f);
	}
}

static int stop_requested(void)
{
	return stopping || (stop_file && access(stop_file, F_OK) == 0);
}

static void wait_stop(void)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	while (!stop_requested())
		nanosleep(&ts, NULL);
}

/* --- stress --- */

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

static int check(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed + i * 7))
			return 0;
	return 1;
}

typedef double v2d __attribute__((vector_size(16)));

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
	struct { unsigned char *p; size_t n; unsigned s; } live[64] = { { 0 } };
	unsigned long rounds = 0;

	while (!stop_requested()) {
		v2d acc = { 0, 0 }, step = { 0.5, 0.25 };
		double sum = 0;

		for (int i = 0; i < 256; i++) {
			int k = (int)((seed = seed * 1103515245 + 12345) >> 8) % 64;
			size_t n = 1 + (seed >> 4) % 2048;

			if (live[k].p) {
				if (!check(live[k].p, live[k].n, live[k].s)) {
					fprintf(stderr, "block corrupted\n");
					failed = 1;
				}
				if ((seed & 7) == 0) {
					unsigned char *q = realloc(live[k].p, live[k].n * 2);

					if (!q || !check(q, live[k].n, live[k].s))
						failed = 1;
					free(q);
				} else {
					free(live[k].p);
				}
				live[k].p = NULL;
			}
			switch (seed % 4) {
			case 0:
				live[k].p = malloc(n);
				break;
			case 1:
				live[k].p = calloc(1, n);
				break;
			case 2: {
				void *q = NULL;

				live[k].p = posix_memalign(&q, 64, n) ? NULL : q;
				break;
			}
			default: {
				char tmp[64];

				memset(tmp, 'x', sizeof(tmp) - 1);
				tmp[(n % 63)] = 0;
				free(strdup(tmp));
				live[k].p = malloc(n);
				break;
			}
			}
			if (!live[k].p) {
				failed = 1;
				continue;
			}
			live[k].n = n;
			live[k].s = seed;
			fill(live[k].p, n, seed);
			acc += step;
			sum += 0.125;
		}
		/* 256 steps: exact in binary floating point */
		if (acc[0] != 128.0 || acc[1] != 64.0 || sum != 32.0) {
			fprintf(stderr, "floating-point state corrupted\n");
			failed = 1;
		}
		rounds++;
	}
	for (int k = 0; k < 64; k++)
		free(live[k].p);
	return (void *)rounds;
}

static int mode_stress(int n)
{
	pthread_t t[64];
	void *old[100];
	size_t old_n[100];
	unsigned long total = 0;

	for (int i = 0; i < 100; i++) {
		old_n[i] = 16 + (size_t)i * 97;
		old[i] = malloc(old_n[i]);
		fill(old[i], old_n[i], (unsigned)i);
	}
	for (int i = 0; i < n && i < 64; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	ready();
	wait_stop();
	for (int i = 0; i < n && i < 64; i++) {
		void *r;

		pthread_join(t[i], &r);
		total += (unsigned long)r;
	}
	/* allocated before the injection, used and freed after it */
	for (int i = 0; i < 100; i++) {
		if (malloc_usable_size(old[i]) < old_n[i] || !check(old[i], old_n[i], (unsigned)i))
			failed = 1;
		if (i % 2) {
			unsigned char *q = realloc(old[i], old_n[i] * 3);

			if (!q || !check(q, old_n[i], (unsigned)i))
				failed = 1;
			old[i] = q;
		}
		free(old[i]);
	}
	printf("inject_target: stress %s (%d threads, %lu rounds)\n", failed ? "FAIL" : "ok", n, total);
	return failed;
}

/* --- read, sleep --- */

static int mode_read(void)
{
	char buf[256];
	ssize_t got;

	ready();
	got = read(0, buf, sizeof(buf) - 1);
	if (got < 0) {
		printf("inject_target: read FAIL (%s)\n", strerror(errno));
		return 1;
	}
	buf[got] = 0;
	failed = strcmp(buf, "the line after the injection\n") != 0;
	printf("inject_target: read %s (got %zd bytes: %.*s)\n", failed ? "FAIL" : "ok", got, (int)strcspn(buf, "\n"),
	       buf);
	return failed;
}

static int mode_sleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	double t0, slept;
	int r;

	ready();
	t0 = now_s();
	r = nanosleep(&ts, NULL);
	slept = now_s() - t0;
	failed = r != 0 || slept < ms / 1000.0;
	printf("inject_target: sleep %s (nanosleep returned %d, %.3f s of %.3f)\n", failed ? "FAIL" : "ok", r, slept,
	       ms / 1000.0);
	return failed;
}

/* --- sig_in_malloc --- */

#define BIG (1u << 20)
static long park_ms;
static volatile int parked;

static void on_sigsys(int sig, siginfo_t *si, void *uc_)
{
	struct timespec ts = { park_ms / 1000, (park_ms % 1000) * 1000000 };
	ucontext_t *uc = uc_;

	(void)sig;
	(void)si;
	parked = 1;
	nanosleep(&ts, NULL); /* inside malloc, the arena's lock held */
	uc->uc_mcontext.gregs[REG_RAX] = -ENOMEM; /* the trapped mmap fails: malloc falls back */
	parked = 2;
}

static void *volatile sink;

static void *big_alloc(void *arg)
{
	(void)arg;
	sink = malloc(BIG); /* kept: a malloc+free pair may be elided */
	free(sink);
	return NULL;
}

static int install(struct sock_filter *f, unsigned short n)
{
	struct sock_fprog prog = { n, f };

	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int mode_sig_in_malloc(long ms)
{
	/* trap the mmap of exactly BIG's chunk: malloc makes it under the lock */
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BIG + 4096, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	pthread_t t;

	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };

	park_ms = ms;
	sigaction(SIGSYS, &sa, NULL);
	sink = malloc(64);
	free(sink);
	if (install(f, sizeof(f) / sizeof(f[0]))) {
		printf("inject_target: sig_in_malloc FAIL (seccomp: %s)\n", strerror(errno));
		return 1;
	}
	pthread_create(&t, NULL, big_alloc, NULL);
	while (!parked)
		nanosleep(&ts, NULL);
	ready();
	pthread_join(t, NULL);
	wait_stop();
	printf("inject_target: sig_in_malloc %s (the handler returned)\n", parked == 2 ? "ok" : "FAIL");
	return parked != 2;
}

/* --- dlopen_block --- */

static void *sleeper(void *arg)
{
	(void)arg;
	wait_stop();
	return NULL;
}

static int mode_dlopen_block(const char *lib)
{
	pthread_t t;
	void *h;

	pthread_create(&t, NULL, sleeper, NULL);
	ready();
	h = dlopen(lib, RTLD_NOW); /* its constructor sleeps */
	failed = !h;
	wait_stop();
	pthread_join(t, NULL);
	printf("inject_target: dlopen_block %s (%s)\n", failed ? "FAIL" : "ok", h ? "loaded" : dlerror());
	return failed;
}

/* --- seccomp --- */

static int mode_seccomp(const char *how)
{
	/* allow: what this program and an injection need, EPERM for the
	 * rest; kill: clone3 and clone kill the process */
	static const int allowed[] = {
		SYS_read, SYS_write, SYS_close, SYS_newfstatat, SYS_mmap, SYS_mprotect, SYS_munmap, SYS_brk,
		SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_madvise, SYS_nanosleep, SYS_clock_nanosleep, SYS_exit,
		SYS_exit_group, SYS_futex, SYS_openat, SYS_set_robust_list, SYS_rseq, SYS_clone3, SYS_mincore,
		SYS_getrandom, SYS_restart_syscall, SYS_access, SYS_getpid, SYS_gettid,
	};
	struct sock_filter f[64];
	unsigned short n = 0;
	size_t i;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	if (!strcmp(how, "kill")) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 2, 0);
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 1, 0);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	} else {
		size_t m = sizeof(allowed) / sizeof(allowed[0]);

		for (i = 0; i < m; i++)
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)allowed[i],
							      (unsigned char)(m - i), 0);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	}
	free(malloc(64));
	if (install(f, n)) {
		printf("inject_target: seccomp FAIL (%s)\n", strerror(errno));
		return 1;
	}
	ready();
	wait_stop();
	printf("inject_target: seccomp %s ok\n", how);
	return 0;
}

/* --- burst --- */

static void say(const char *s)
{
	ssize_t r = write(1, s, strlen(s));

	(void)r;
}

static int mode_burst(void)
{
	char line[64];
	ssize_t got;

	ready();
	/* read(2), write(2): nothing here allocates but the burst */
	while ((got = read(0, line, sizeof(line) - 1)) > 0) {
		long k;

		line[got] = 0;
		if (strncmp(line, "burst ", 6))
			break;
		k = atol(line + 6);
		for (long i = 0; i < k; i++) {
			void *p = malloc(100);

			__asm__ volatile("" : : "r"(p) : "memory");
			free(p);
			inject_lib_free(inject_lib_malloc(200));
			free(strdup("a string for libc's own malloc"));
			inject_lib_delete(inject_lib_new(300));
		}
		say("done\n");
	}
	return 0;
}

int main(int argc, char **argv)
{
	int i = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "--ready"))
			ready_file = argv[i + 1];
		else if (!strcmp(argv[i], "--stop"))
			stop_file = argv[i + 1];
	}
	if (i >= argc)
		return 2;
	if (!strcmp(argv[i], "stress"))
		return mode_stress(i + 1 < argc ? atoi(argv[i + 1]) : 4);
	if (!strcmp(argv[i], "read"))
		return mode_read();
	if (!strcmp(argv[i], "sleep"))
		return mode_sleep(i + 1 < argc ? atol(argv[i + 1]) : 2000);
	if (!strcmp(argv[i], "sig_in_malloc"))
		return mode_sig_in_malloc(i + 1 < argc ? atol(argv[i + 1]) : 3000);
	if (!strcmp(argv[i], "dlopen_block") && i + 1 < argc)
		return mode_dlopen_block(argv[i + 1]);
	if (!strcmp(argv[i], "seccomp") && i + 1 < argc)
		return mode_seccomp(argv[i + 1]);
	if (!strcmp(argv[i], "burst"))
		return mode_burst();
	return 2;
}
