/* leak_kinds: a program whose every leak kind is known, per allocation
 * site, for dwleak's --leak-check (tests/leak_check.sh) with valgrind as
 * the oracle.  Each site_* function allocates blocks of its own size (a
 * multiple of 16: glibc's free lists point at chunk headers, one past such
 * a block, never into it):
 *
 *   site_lost         2 x 48 B   definitely lost (no pointer anywhere)
 *   site_tree_root    1 x 64 B   definitely lost, and holds the only
 *   site_tree_child   3 x 32 B   pointers to its children: indirectly lost
 *   site_cycle        2 x 80 B   a cycle nothing points into: one definitely,
 *                                one indirectly lost (memcheck's clique rule)
 *   site_interior     1 x 112 B  only a pointer into its middle: possibly lost
 *   site_list         4 x 128 B  a list whose head is a global: reachable
 *   site_other_stack  1 x 144 B  only on another thread's stack: reachable
 *   site_register     1 x 160 B  only in a register (r15; x28 on arm64) of
 *                                a spinning thread: reachable
 *   site_tls          1 x 176 B  only in a thread's __thread variable: reachable
 *   site_anon         1 x 192 B  only in an anonymous mapping: reachable
 *   site_before       1 x 224 B  made first; with --wait, before dwleak
 *                                attaches (untracked: a root, not reported)
 *   site_via_before   1 x 208 B  only in site_before's block: reachable
 *
 * Without --wait it sets all this up and calls exit(0) with its threads
 * alive (the check of -- CMD runs at exit(), before atexit handlers).
 * With --wait it makes site_before's block, writes "waiting", waits for
 * SIGUSR1 (dwleak attached), sets up the rest, writes "ready", and runs on:
 * a thread counts, and each SIGUSR2 makes it write "alive N" (the test's
 * proof that it runs correctly after the checks) until it is killed.
 *
 * --reachable-only skips the lost sites (lost, tree, cycle): what is left
 * outstanding is reachable or possibly lost, never definitely or indirectly.
 * --heap-mb N (with --wait) also keeps N MiB of written memory reachable, so
 * that a scan takes long enough to be caught in the middle.
 * --churn (with --wait) adds a thread that keeps replacing the blocks of a
 * global ring of 64 x 240 B (site_churn): always reachable, always
 * changing while a check indexes and scans. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

typedef void *volatile slot;

slot g_list;	   /* site_list's head */
slot g_interior;   /* into site_interior's block */
slot g_before;	   /* site_before's block */
slot *g_anon;	   /* an anonymous page holding site_anon's pointer */
static int block_pipe[2];
static volatile sig_atomic_t go, report;
static volatile unsigned long counter;
static __thread slot t_slot;

static void out(const char *s)
{
	if (write(1, s, strlen(s)) < 0)
		_exit(3);
}

/* Overwrites the dead stack below the caller, where the sites' frames
 * left copies of the pointers they returned. */
static NOINLINE void scrub_stack(void)
{
	volatile char buf[16384];

	memset((char *)buf, 0, sizeof(buf));
}

static NOINLINE void site_lost(void)
{
	slot a = malloc(48), b = malloc(48);

	(void)a;
	(void)b;
}

static NOINLINE void *site_tree_child(void)
{
	return malloc(32);
}

static NOINLINE void site_tree_root(void)
{
	slot *root = malloc(64);
	int i;

	for (i = 0; i < 3; i++)
		root[i] = site_tree_child();
	root[3] = NULL;
}

static NOINLINE void site_cycle(void)
{
	slot *a = malloc(80), *b = malloc(80);

	memset((void *)a, 0, 80);
	memset((void *)b, 0, 80);
	a[0] = (void *)b;
	b[0] = (void *)a;
}

static NOINLINE void site_interior(void)
{
	char *p = malloc(112);

	g_interior = p + 16;
}

static NOINLINE void site_list(void)
{
	slot *head = NULL, *n;
	int i;

	for (i = 0; i < 4; i++) {
		n = malloc(128);
		memset((void *)n, 0, 128);
		n[0] = (void *)head;
		head = n;
	}
	g_list = (void *)head;
}

static NOINLINE void *site_other_stack(void)
{
	return malloc(144);
}

static NOINLINE void *site_register(void)
{
	return malloc(160);
}

static NOINLINE void *site_tls(void)
{
	return malloc(176);
}

static NOINLINE void site_anon(void)
{
	g_anon = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g_anon == MAP_FAILED)
		_exit(4);
	g_anon[5] = malloc(192);
}

static NOINLINE void site_before(void)
{
	slot *b = malloc(224);

	memset((void *)b, 0, 224);
	g_before = (void *)b;
}

static NOINLINE void site_via_before(void)
{
	((slot *)g_before)[2] = malloc(208);
}

/* Keeps site_other_stack's block only on this thread's stack. */
static void *other_stack_thread(void *arg)
{
	slot p = site_other_stack();
	char c;

	(void)arg;
	scrub_stack();
	if (read(block_pipe[0], &c, 1) < 0)
		_exit(5);
	return (void *)p;
}

/* Keeps site_tls's block only in this thread's TLS. */
static void *tls_thread(void *arg)
{
	char c;

	(void)arg;
	t_slot = site_tls();
	scrub_stack();
	if (read(block_pipe[0], &c, 1) < 0)
		_exit(5);
	return NULL;
}

/* Keeps site_register's block only in r15 (arm64: x28), spinning. */
static void *register_thread(void *arg)
{
	void *p;

	(void)arg;
	p = site_register();
	scrub_stack();
#if defined(__aarch64__)
	__asm__ volatile("mov x28, %0\n\t"
			 "mov %0, xzr\n"
			 "1:\n\t"
			 "yield\n\t"
			 "b 1b"
			 : "+r"(p)
			 :
			 : "x28", "memory");
#else
	__asm__ volatile("mov %0, %%r15\n\t"
			 "xor %0, %0\n"
			 "1:\n\t"
			 "pause\n\t"
			 "jmp 1b"
			 : "+r"(p)
			 :
			 : "r15", "memory");
#endif
	return NULL;
}

static slot g_ring[64]; /* site_churn's blocks */

static NOINLINE void *site_churn(void)
{
	return malloc(240);
}

static void *churn_thread(void *arg)
{
	unsigned long i;

	(void)arg;
	for (i = 0;; i++) {
		void *old = g_ring[i % 64];

		g_ring[i % 64] = site_churn();
		free(old);
		if (i % 64 == 63)
			usleep(100);
	}
	return NULL;
}

static void *counting_thread(void *arg)
{
	char line[64];

	(void)arg;
	for (;;) {
		counter++;
		if (report) {
			report = 0;
			snprintf(line, sizeof(line), "alive %lu\n", counter);
			out(line);
		}
		usleep(10000);
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static void on_usr2(int sig)
{
	(void)sig;
	report = 1;
}

static NOINLINE void set_up(int reachable_only)
{
	pthread_t t;

	if (!reachable_only) {
		site_lost();
		site_tree_root();
		site_cycle();
	}
	site_interior();
	site_list();
	site_anon();
	site_via_before();
	if (pipe(block_pipe) || pthread_create(&t, NULL, other_stack_thread, NULL) ||
	    pthread_create(&t, NULL, tls_thread, NULL) || pthread_create(&t, NULL, register_thread, NULL))
		_exit(6);
	usleep(200000); /* the threads have set up */
}

static slot g_big; /* --heap-mb's block */

int main(int argc, char **argv)
{
	int wait_attach = 0, reachable_only = 0, churn = 0, i;
	size_t heap_mb = 0;
	pthread_t t;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait"))
			wait_attach = 1;
		else if (!strcmp(argv[i], "--reachable-only"))
			reachable_only = 1;
		else if (!strcmp(argv[i], "--churn"))
			churn = 1;
		else if (!strcmp(argv[i], "--heap-mb") && i + 1 < argc)
			heap_mb = strtoul(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: leak_kinds [--wait] [--reachable-only] [--heap-mb N] [--churn]\n");
			return 2;
		}
	}

	signal(SIGUSR1, on_usr1);
	signal(SIGUSR2, on_usr2);
	site_before();
	if (wait_attach) {
		out("waiting\n");
		while (!go)
			pause();
	}
	set_up(reachable_only);
	if (heap_mb) {
		g_big = malloc(heap_mb << 20);
		if (!g_big)
			_exit(7);
		memset((void *)g_big, 0x5a, heap_mb << 20);
	}
	scrub_stack();
	out("ready\n");
	if (!wait_attach)
		exit(0);
	if (pthread_create(&t, NULL, counting_thread, NULL) || (churn && pthread_create(&t, NULL, churn_thread, NULL)))
		_exit(6);
	for (;;)
		pause();
}
