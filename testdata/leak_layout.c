/* leak_layout: a process whose memory layout the leak check's live test
 * (tests/unit/test_leakcheck_live.c) knows: blocks it mallocs, pointers to
 * them in .data and .bss, on its stack, in private, shared and read-only
 * anonymous mappings, in file mappings, in TLS, on another thread's stack
 * and in its TLS, inside a block the tracer would not know (allocated
 * before attach); lost blocks alone, in a tree, in a cycle, pointing at
 * themselves; pointers that must not count (unaligned, one past the end,
 * in a dead frame below the stack pointer).
 *
 * It writes to stdout, in lines, without stdio (no heap buffer of its
 * own): "block NAME ADDR SIZE KIND" for each tracked block (KIND the one
 * expected), "thread TID TLS" for each thread, "buried ADDR VALUE" (a
 * pointer left in a dead frame), then "ready", and sleeps until killed.
 * Blocks are sized in multiples of 16: glibc's free lists and top pointer
 * point at chunk headers, one past such a block, never into it.  Pointers
 * are stored through volatile lvalues: the compiler would drop stores it
 * can prove are never read back, and the test is about memory. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

/* A pointer slot the compiler must write. */
typedef void *volatile slot;

/* *WHERE = VALUE, kept however dead it looks. */
static void put(void *where, const void *value)
{
	*(slot *)where = (void *)value;
}

/* Roots in the data segments. */
slot g_data = (void *)&g_data; /* .data: initialised, overwritten below */
slot g_bss;		/* .bss */
slot g_interior;	/* an interior pointer */
slot g_zero;		/* a malloc(0) block */
slot g_one_past;	/* one past a block's end: not a pointer into it */
slot g_big_untouched, g_big_touched;
volatile unsigned char g_unaligned[24]; /* a pointer at offset 3 only */
__thread slot t_tls;			/* each thread's own */

static int ready_pipe[2]; /* the thread says it is set up */
static int block_pipe[2]; /* the thread sleeps on it */

static void out(const char *s)
{
	size_t len = strlen(s);

	while (len) {
		ssize_t w = write(1, s, len);

		if (w <= 0)
			_exit(3);
		s += w;
		len -= (size_t)w;
	}
}

/* Hex of V into BUF (at least 19 bytes). */
static void hex(char *buf, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	int i;

	buf[0] = '0';
	buf[1] = 'x';
	for (i = 0; i < 16; i++)
		buf[2 + i] = digits[(v >> (60 - 4 * i)) & 15];
	buf[18] = 0;
}

static void dec(char *buf, uint64_t v)
{
	char tmp[24];
	int n = 0, i;

	do
		tmp[n++] = (char)('0' + v % 10);
	while (v /= 10);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = 0;
}

static NOINLINE void report(const char *name, const void *p, uint64_t size, const char *kind)
{
	char num[24];

	out("block ");
	out(name);
	out(" ");
	hex(num, (uint64_t)(uintptr_t)p);
	out(num);
	out(" ");
	dec(num, size);
	out(num);
	out(" ");
	out(kind);
	out("\n");
}

static NOINLINE void report_thread(void)
{
	char num[24];

	out("thread ");
	dec(num, (uint64_t)gettid());
	out(num);
	out(" ");
	hex(num, (uint64_t)pthread_self()); /* glibc x86-64: the TCB, fs_base */
	out(num);
	out("\n");
}

/* A block, every byte written (not with zeros: malloc + memset(0) becomes
 * calloc, which leaves fresh pages untouched; 0x5a words point nowhere). */
static NOINLINE void *block(const char *name, uint64_t size, const char *kind)
{
	void *p = malloc(size);

	if (!p)
		_exit(2);
	memset(p, 0x5a, size);
	if (kind) /* NULL: the caller reports it once it knows its kind */
		report(name, p, size, kind);
	return p;
}

/* Lost blocks are made in functions of their own, so no live frame keeps
 * their address. */
static NOINLINE void make_lost(void)
{
	void **root, **a, **b, **c, **x, **y, **self;

	block("lost", 48, "definitely_lost");
	root = block("tree_root", 64, "definitely_lost");
	a = block("tree_a", 32, "indirectly_lost");
	b = block("tree_b", 32, "indirectly_lost");
	c = block("tree_c", 32, "indirectly_lost");
	put(&root[0], a);
	put(&root[1], b);
	put(&a[2], c);
	/* a cycle: memcheck makes its lowest block the definitely lost one */
	x = block("cycle_x", 32, NULL);
	y = block("cycle_y", 32, NULL);
	put(&x[0], y);
	put(&y[1], x);
	report("cycle_x", x, 32, x < y ? "definitely_lost" : "indirectly_lost");
	report("cycle_y", y, 32, y < x ? "definitely_lost" : "indirectly_lost");
	self = block("self_loop", 32, "definitely_lost");
	put(&self[0], self);
	block("zero_lost", 0, "definitely_lost");
}

/* Pointers that must not count. */
static NOINLINE void make_false_pointers(void)
{
	uintptr_t p = (uintptr_t)block("unaligned", 32, "definitely_lost");
	int i;

	for (i = 0; i < 8; i++)
		g_unaligned[3 + i] = (unsigned char)(p >> (8 * i));
	g_one_past = (char *)block("one_past", 32, "definitely_lost") + 32;
}

/* Leaves a pointer to a fresh block deep in this frame, which is dead once
 * it returns: far below main's stack pointer, so no later call in main
 * overwrites it, and the test can check it is still there. */
static NOINLINE void bury(void)
{
	volatile uintptr_t deep[4096];
	char num[24];
	void *p = block("dead_stack", 96, "definitely_lost");

	deep[0] = (uintptr_t)p;
	out("buried ");
	hex(num, (uint64_t)(uintptr_t)&deep[0]);
	out(num);
	out(" ");
	hex(num, (uint64_t)(uintptr_t)p);
	out(num);
	out("\n");
}

/* Zeroes the stack just below main's frame, where the calls above left
 * copies of lost blocks' addresses that the red zone below main's blocked
 * call would show. */
static NOINLINE void scrub(void)
{
	volatile char area[8192];

	memset((char *)area, 0, sizeof(area));
}

static NOINLINE void *map_anon(int prot, int flags)
{
	void *m = mmap(NULL, 4096, prot, flags | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		_exit(2);
	return m;
}

static NOINLINE void *map_file(int flags)
{
	char path[] = "/tmp/leak_layout.XXXXXX";
	int fd = mkstemp(path);
	void *m;

	if (fd < 0 || ftruncate(fd, 4096))
		_exit(2);
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, flags, fd, 0);
	unlink(path);
	close(fd);
	if (m == MAP_FAILED)
		_exit(2);
	return m;
}

static NOINLINE void make_reachable(void)
{
	void **data = block("reach_data", 64, "reachable"), **head, **ro, **pre;

	g_data = data;
	put(&data[0], block("chain_child", 32, "reachable"));
	g_bss = block("reach_bss", 48, "reachable");
	head = block("interior_head", 64, "possibly_lost");
	g_interior = (char *)head + 16;
	put(&head[0], block("interior_child", 32, "possibly_lost"));
	put(map_anon(PROT_READ | PROT_WRITE, MAP_PRIVATE), block("anon_private", 32, "reachable"));
	put(map_anon(PROT_READ | PROT_WRITE, MAP_SHARED), block("anon_shared", 32, "reachable"));
	ro = map_anon(PROT_READ | PROT_WRITE, MAP_PRIVATE);
	put(&ro[0], block("anon_readonly", 32, "reachable"));
	if (mprotect(ro, 4096, PROT_READ))
		_exit(2);
	put(map_file(MAP_PRIVATE), block("file_private", 32, "reachable"));
	put(map_file(MAP_SHARED), block("file_shared", 32, "reachable"));
	t_tls = block("tls_main", 32, "reachable");
	/* a block the tracer did not see (allocated before it attached): a
	 * root, never reported, and what it points to is reachable */
	pre = malloc(64);
	if (!pre)
		_exit(2);
	put(&pre[3], block("pre_attach_child", 32, "reachable"));
	g_zero = block("zero_reach", 0, "reachable");
	g_big_untouched = malloc(64 << 20); /* mmap'd, never touched */
	if (!g_big_untouched)
		_exit(2);
	report("big_untouched", (void *)g_big_untouched, 64 << 20, "reachable");
	g_big_touched = block("big_touched", 8 << 20, "reachable");
}

static void *thread_main(void *arg)
{
	volatile uintptr_t on_stack[2];
	char c;

	(void)arg;
	on_stack[0] = (uintptr_t)block("thread_stack", 32, "reachable");
	t_tls = block("thread_tls", 32, "reachable");
	report_thread();
	if (write(ready_pipe[1], "x", 1) != 1)
		_exit(2);
	while (read(block_pipe[0], &c, 1) != 0)
		;
	return (void *)on_stack[1];
}

int main(void)
{
	volatile uintptr_t on_stack[2];
	pthread_t thread;
	char c;

	if (pipe(ready_pipe) || pipe(block_pipe))
		return 2;
	report_thread();
	make_reachable();
	make_lost();
	make_false_pointers();
	on_stack[0] = (uintptr_t)block("on_stack", 80, "reachable");
	if (pthread_create(&thread, NULL, thread_main, NULL) || read(ready_pipe[0], &c, 1) != 1)
		return 2;
	bury();
	scrub();
	out("ready\n");
	for (;;)
		pause();
	return (int)on_stack[1];
}
