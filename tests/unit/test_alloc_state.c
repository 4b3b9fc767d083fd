/* target/alloc_state.c: glibc's arenas found by their shape in a real
 * process (testdata/arena_probe), checked against what glibc itself says
 * of them (mallinfo2: the bytes every arena holds from the system, and
 * the main arena's top chunk), and the shape test refusing memory that is
 * no arena: zeros, an arena with one link broken, one that points into
 * itself, a buffer too short, memory at an unaligned address. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/wait.h>

#include "alloc_state.h"
#include "check.h"
#include "constants.h"

/* struct malloc_state fields the test reads (see alloc_state.c). */
#define TOP 96
#define BINS 112
#define NEXT 2160
#define SYSTEM_MEM 2184

struct child {
	pid_t pid;
	FILE *in;
	size_t arena_bytes, keepcost;
	uint64_t tls, block; /* its main thread's TLS pointer, a block it holds */
};

static void child_start(struct child *c)
{
	const char *td = getenv("TESTDATA");
	char path[4096], line[128];
	int to[2], from[2];
	FILE *out;

	CHECK(td, "TESTDATA is not set (run through tests/run.sh)");
	snprintf(path, sizeof(path), "%s/arena_probe", td);
	CHECK(access(path, X_OK) == 0, "%s is missing (make testdata)", path);
	CHECK(pipe(to) == 0 && pipe(from) == 0);
	c->pid = fork();
	CHECK(c->pid >= 0);
	if (c->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[1]);
		close(from[0]);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	c->in = fdopen(to[1], "w");
	out = fdopen(from[0], "r");
	CHECK(c->in && out);
	CHECK(fgets(line, sizeof(line), out) && !strcmp(line, "arenas\n"), "arena_probe said nothing");
	CHECK(fgets(line, sizeof(line), out), "arena_probe said no more");
	CHECK(sscanf(line, "ready %zu %zu %" SCNx64 " %" SCNx64, &c->arena_bytes, &c->keepcost, &c->tls, &c->block) == 4,
	      "arena_probe said '%s'", line);
	fclose(out);
}

static void child_stop(struct child *c)
{
	int status;

	fputs("done\n", c->in);
	fclose(c->in);
	CHECK(waitpid(c->pid, &status, 0) == c->pid);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "arena_probe ended with status %d", status);
}

static uint64_t word_at(const unsigned char *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static void read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	CHECK(pread(fd, buf, len, (off_t)addr) == (ssize_t)len, "read %zu bytes at %#llx", len,
	      (unsigned long long)addr);
	close(fd);
}

/* The arenas of arena_probe agree with its mallinfo2. */
static void test_real_process(void)
{
	struct allocator a = { .family = "glibc", .nobjs = 1 };
	struct alloc_object libc = { .path = "/lib/x86_64-linux-gnu/libc.so.6" };
	unsigned char arena[GLIBC_ARENA_SIZE];
	struct alloc_state st;
	uint64_t system_mem = 0, top_size = 0, next;
	struct child c;
	size_t i;

	a.objs = &libc;
	child_start(&c);
	CHECK(alloc_state_find(c.pid, &a, NULL, &st) == 0);
	EXPECT(st.arenas == 2, "%zu arenas found, want 2 (main and the thread's)", st.arenas);
	EXPECT(!st.arena_not_found && !st.arenas_not_followed && st.object_bytes == 0);
	for (i = 0; i < st.n; i++) {
		EXPECT(st.ranges[i].size == GLIBC_ARENA_SIZE);
		read_mem(c.pid, st.ranges[i].addr, arena, sizeof(arena));
		EXPECT(glibc_arena_at(arena, sizeof(arena), st.ranges[i].addr, &next));
		system_mem += word_at(arena, SYSTEM_MEM);
		EXPECT(i == 0 || st.ranges[i].addr > st.ranges[i - 1].addr, "ranges not sorted");
	}
	EXPECT(system_mem == c.arena_bytes, "the arenas hold %llu bytes, mallinfo2 says %zu",
	       (unsigned long long)system_mem, c.arena_bytes);
	/* the main arena is the one in libc's data, not at a heap's start:
	 * its top chunk's size is mallinfo2's keepcost */
	for (i = 0; i < st.n; i++) {
		uint64_t top, size;

		read_mem(c.pid, st.ranges[i].addr, arena, sizeof(arena));
		top = word_at(arena, TOP);
		read_mem(c.pid, top + 8, &size, sizeof(size));
		if ((size & ~7ull) == c.keepcost)
			top_size = size & ~7ull;
	}
	EXPECT(top_size == c.keepcost, "no arena's top chunk is %zu bytes (mallinfo2's keepcost)", c.keepcost);
	alloc_state_free(&st);
	child_stop(&c);
}

/* A synthetic arena at ADDR: every bin empty but a few, top and next set. */
static void arena_make(unsigned char *b, uint64_t addr)
{
	uint64_t v;
	size_t i;

	memset(b, 0, GLIBC_ARENA_SIZE);
	for (i = 0; i < 127; i++) {
		v = addr + BINS + 16 * i - 16;
		memcpy(b + BINS + 16 * i, &v, 8);
		memcpy(b + BINS + 16 * i + 8, &v, 8);
	}
	v = 0x555555560000ull; /* bin 5 holds one chunk */
	memcpy(b + BINS + 16 * 4, &v, 8);
	memcpy(b + BINS + 16 * 4 + 8, &v, 8);
	v = 0x555555570010ull;
	memcpy(b + TOP, &v, 8);
	memcpy(b + NEXT, &addr, 8);
}

static void test_shape(void)
{
	static unsigned char buf[4 * GLIBC_ARENA_SIZE], zeros[GLIBC_ARENA_SIZE];
	const uint64_t base = 0x7f0000001000ull, at = base + 808;
	uint64_t next = 0, v;

	arena_make(buf + 808, at);
	EXPECT(glibc_arena_at(buf + 808, GLIBC_ARENA_SIZE, at, &next) && next == at);
	EXPECT(glibc_arena_find(buf, sizeof(buf), base) == 808, "found at %lld",
	       (long long)glibc_arena_find(buf, sizeof(buf), base));
	EXPECT(!glibc_arena_at(zeros, sizeof(zeros), base, NULL), "zeros taken for an arena");
	EXPECT(glibc_arena_find(zeros, sizeof(zeros), base) == -1);
	EXPECT(!glibc_arena_at(buf + 808, GLIBC_ARENA_SIZE - 1, at, NULL), "too short a buffer taken");
	EXPECT(!glibc_arena_at(buf + 808, GLIBC_ARENA_SIZE, at + 4, NULL), "an unaligned address taken");
	/* a bin with one link only */
	v = 0;
	memcpy(buf + 808 + BINS + 16 * 4 + 8, &v, 8);
	EXPECT(!glibc_arena_at(buf + 808, GLIBC_ARENA_SIZE, at, NULL), "a broken bin taken");
	arena_make(buf + 808, at);
	/* a bin linking into the arena itself, not to a chunk */
	v = at + 200;
	memcpy(buf + 808 + BINS + 16 * 7, &v, 8);
	memcpy(buf + 808 + BINS + 16 * 7 + 8, &v, 8);
	EXPECT(!glibc_arena_at(buf + 808, GLIBC_ARENA_SIZE, at, NULL), "a bin into the arena taken");
	arena_make(buf + 808, at);
	v = 0;
	memcpy(buf + 808 + NEXT, &v, 8);
	EXPECT(!glibc_arena_at(buf + 808, GLIBC_ARENA_SIZE, at, NULL), "no next arena, taken");
	EXPECT(!glibc_arena_at(NULL, 0, at, NULL));
}

/* jemalloc in arena_probe: its thread caches and its extents' metadata,
 * found through its TLS pointers and a block it handed out. */
static void test_jemalloc_process(void)
{
	const char *so = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
	struct allocator a = { .family = "jemalloc", .nobjs = 1 };
	struct alloc_object obj = { .path = (char *)so };
	uint64_t tls = 0, block = 0, e[2];
	struct alloc_state_hints h = { .tls = &tls, .ntls = 1, .blocks = &block, .nblocks = 1, .extents = true };
	struct alloc_state st;
	struct child c;
	size_t i;
	bool in_extent = false;

	CHECK(access(so, R_OK) == 0, "%s is not installed (.ci/deps.sh installs libjemalloc2)", so);
	a.objs = &obj;
	setenv("LD_PRELOAD", so, 1);
	child_start(&c);
	unsetenv("LD_PRELOAD");
	tls = c.tls;
	block = c.block;
	CHECK(tls && block, "arena_probe gave no TLS pointer or block");
	CHECK(alloc_state_find(c.pid, &a, &h, &st) == 0);
	EXPECT(st.object_bytes > 0, "libjemalloc's data not found");
	EXPECT(st.tcaches == 1, "%zu thread caches, want the main thread's", st.tcaches);
	EXPECT(!st.extent_map_not_found && st.extents > 0, "no extent metadata found");
	/* the block's own extent is among them (metadata side by side are
	 * merged in one range): its address and size hold it */
	for (i = 0; i < st.n && !in_extent; i++) {
		uint64_t at;

		if (st.ranges[i].size % JEMALLOC_EDATA_SIZE || st.ranges[i].addr % JEMALLOC_EDATA_SIZE)
			continue;
		for (at = st.ranges[i].addr; at < st.ranges[i].addr + st.ranges[i].size && !in_extent;
		     at += JEMALLOC_EDATA_SIZE) {
			read_mem(c.pid, at + 8, e, sizeof(e));
			in_extent = e[0] <= block && block - e[0] < DWLEAK_PAGE_DOWN(e[1]);
		}
	}
	EXPECT(in_extent, "the block's extent metadata is not among those found");
	alloc_state_free(&st);
	child_stop(&c);
}

int main(void)
{
	test_shape();
	test_real_process();
	test_jemalloc_process();
	return check_status();
}
