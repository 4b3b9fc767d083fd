/* oracle_sizes: lost blocks of many sizes, each one where glibc's malloc
 * keeps a pointer to the chunk right after it, for tests/oracle_memcheck.sh.
 *
 * glibc's chunk of an N-byte block is N + 8 rounded up to 16 (32 at
 * least); the next chunk's header starts at block + (chunk - 16).  When N
 * % 16 is 1..8 that header lies inside the block's own last bytes, so a
 * pointer to it is a pointer into the block: the arena's top pointer (the
 * top chunk's header), its fastbin heads and bin lists (the headers of
 * free chunks) all point into the middle of the block just before.  None
 * of them is a pointer of the program; memcheck, whose allocator replaces
 * glibc's, never sees them, and calls every block below definitely lost.
 *
 * The plan, run in the main thread (main arena) and in a second thread
 * (an arena of its own, in an anonymous mapping), each block B followed
 * by a chunk C that is freed afterwards:
 *
 *   B      C after it                       the pointer to C's header
 *   16     1104 B, freed to the unsorted bin  at B + 16: one past B (control)
 *   32     64 B, freed to a fastbin (its      at B + 32: one past B (control)
 *          tcache bin full: 7 fillers)
 *   24     1120 B, unsorted                   at B + 16: inside B
 *   40     96 B, fastbin (7 fillers too)      at B + 32: inside B
 *   56     48 B, freed to the tcache          tcache points past C's header
 *   72     1152 B, unsorted                   at B + 64: inside B
 *   20     1168 B, unsorted                   at B + 16: inside B
 *   1000   1184 B, unsorted                   at B + 992: inside B
 *   1001   1200 B, unsorted                   at B + 1008: past B (control)
 *   40     the top chunk (B is the last       at B + 32: inside B
 *          chunk carved from it)
 *
 * and two blocks big enough to be mmapped, 200,000 B and 3,000,000 B,
 * made first (their malloc would move fastbin chunks to the unsorted bin).
 * The fillers and the Cs are freed after all blocks are made; nothing is
 * allocated after.  Each B is kept in a global until then, then dropped.
 *
 * memcheck (--run-libc-freeres=no --run-cxx-freeres=no): definitely lost
 * 2 x (16+32+24+40+56+72+20+1000+1001+40 + 200000+3000000) = 6,404,602
 * bytes in 24 blocks, nothing indirectly lost.  The second thread stays
 * alive (blocked on a pipe), so its DTV, which its thread pointer points
 * into, is possibly lost (memcheck and dwleak agree on that kind).
 *
 * Without arguments it does all that and returns from main.  With --wait
 * (tests and dwleak -p): it writes "waiting", waits for SIGUSR1 (the
 * tracer has attached) before it makes any block or the thread, writes
 * "ready" when all is done, and exits (0) on SIGUSR2.  So every block the
 * program loses is made after the attach point.  SIGUSR2 instead of
 * SIGUSR1 makes it exit (0) at that point: memcheck's figures for that
 * run are what was there before attach (an allocator's own start-up
 * blocks: tcmalloc leaks 8 bytes in its constructor), to take from those
 * of the whole run.  It prints nothing else.  -O0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

typedef void *volatile slot;

enum after { UNSORTED, FASTBIN, TCACHE, TOP };

static const struct {
	size_t size;	  /* B */
	enum after after; /* what follows it */
	size_t next;	  /* C's size (0: the top chunk) */
} plan[] = {
	{ 16, UNSORTED, 1104 }, { 32, FASTBIN, 64 },	{ 24, UNSORTED, 1120 }, { 40, FASTBIN, 96 },
	{ 56, TCACHE, 48 },	{ 72, UNSORTED, 1152 }, { 20, UNSORTED, 1168 }, { 1000, UNSORTED, 1184 },
	{ 1001, UNSORTED, 1200 }, { 40, TOP, 0 },
};
#define NPLAN (sizeof(plan) / sizeof(plan[0]))
static const size_t fast_sizes[] = { 64, 96 };
static const size_t big_sizes[] = { 200000, 3000000 };

/* Per thread (0 main, 1 the second): what is kept until the frees. */
static slot g_b[2][NPLAN], g_c[2][NPLAN], g_fill[2][2][7], g_big[2][2];

static int done_pipe[2], block_pipe[2];

static void out(const char *s)
{
	if (write(1, s, strlen(s)) < 0)
		_exit(3);
}

/* Overwrites the dead stack below the caller, where the plan's frames
 * left copies of the pointers they handled. */
static NOINLINE void scrub_stack(void)
{
	volatile char buf[16384];

	memset((char *)buf, 0, sizeof(buf));
}

static NOINLINE void make_blocks(int t)
{
	size_t i, j;

	for (i = 0; i < 2; i++)
		g_big[t][i] = malloc(big_sizes[i]);
	for (i = 0; i < 2; i++)
		for (j = 0; j < 7; j++)
			g_fill[t][i][j] = malloc(fast_sizes[i]);
	for (i = 0; i < NPLAN; i++) {
		g_b[t][i] = malloc(plan[i].size);
		memset((void *)g_b[t][i], 0x5a, plan[i].size);
		if (plan[i].next)
			g_c[t][i] = malloc(plan[i].next);
	}
}

static NOINLINE void free_and_drop(int t)
{
	size_t i, j;

	for (i = 0; i < 2; i++)
		for (j = 0; j < 7; j++) {
			free((void *)g_fill[t][i][j]);
			g_fill[t][i][j] = NULL;
		}
	for (i = 0; i < NPLAN; i++) {
		free((void *)g_c[t][i]);
		g_c[t][i] = NULL;
	}
	for (i = 0; i < NPLAN; i++)
		g_b[t][i] = NULL;
	for (i = 0; i < 2; i++)
		g_big[t][i] = NULL;
}

static NOINLINE void run_plan(int t)
{
	make_blocks(t);
	free_and_drop(t);
	scrub_stack();
}

static void *second_thread(void *arg)
{
	char c = 1;

	(void)arg;
	run_plan(1);
	if (write(done_pipe[1], &c, 1) != 1)
		_exit(4);
	/* stays alive until the process exits */
	if (read(block_pipe[0], &c, 1) < 0)
		_exit(5);
	return NULL;
}

/* The next of the blocked signals of SET, read from signalfd FD: a wait
 * in read(), as a service waits, which dwleak -p can load its library
 * into (a thread in sigwait() is no safe point for it). */
static int signal_next(int fd)
{
	struct signalfd_siginfo si;

	if (read(fd, &si, sizeof(si)) != sizeof(si))
		_exit(8);
	return (int)si.ssi_signo;
}

int main(int argc, char **argv)
{
	int wait_attach = argc > 1 && !strcmp(argv[1], "--wait"), sig, sfd;
	pthread_t t;
	sigset_t set;
	char c;

	if (argc > 2 || (argc == 2 && !wait_attach)) {
		out("usage: oracle_sizes [--wait]\n");
		return 2;
	}
	/* blocked before any thread exists, so that the signalfd takes them */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) || pipe(done_pipe) || pipe(block_pipe) ||
	    (sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0)
		return 6;
	if (wait_attach) {
		out("waiting\n");
		sig = signal_next(sfd);
		if (sig == SIGUSR2)
			exit(0); /* the baseline: nothing made */
	}
	/* the second thread's plan first: its creation allocates (its DTV)
	 * in the main arena, which must be done before the main plan */
	if (pthread_create(&t, NULL, second_thread, NULL) || read(done_pipe[0], &c, 1) != 1)
		return 7;
	run_plan(0);
	if (wait_attach) {
		out("ready\n");
		do
			sig = signal_next(sfd);
		while (sig != SIGUSR2);
		exit(0);
	}
	return 0;
}
