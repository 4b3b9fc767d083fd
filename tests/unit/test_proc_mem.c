/* Unit test for target/proc_mem.c's plan on made-up mappings (no process):
 * which mappings are roots, the kinds read from their names, where a
 * thread's stack is cut (its sp - 128, its TLS in the same mapping, never
 * below a block to keep), what is counted instead of read; and the reader
 * on this very process, whose memory the test knows. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "proc_mem.h"

#define K 0x1000ull

struct fake {
	uint64_t start, end;
	const char *perms; /* "rw-p" */
	const char *path;
};

/* The mappings of a made-up process, in address order. */
static const struct fake fakes[] = {
	{ 0x10000, 0x11000, "r--p", "/bin/prog" },		  /* 0: read-only file: skipped */
	{ 0x11000, 0x12000, "r-xp", "/bin/prog" },		  /* 1: code: skipped */
	{ 0x12000, 0x13000, "rw-p", "/bin/prog" },		  /* 2: data: root */
	{ 0x13000, 0x14000, "rw-p", "" },			  /* 3: bss: root */
	{ 0x20000, 0x40000, "rw-p", "[heap]" },			  /* 4: heap: root */
	{ 0x50000, 0x51000, "---p", "" },			  /* 5: guard: not readable */
	{ 0x51000, 0x60000, "rw-p", "" },			  /* 6: a pthread stack */
	{ 0x60000, 0x61000, "r--p", "" },			  /* 7: read-only anonymous: root */
	{ 0x61000, 0x62000, "rw-s", "/dev/zero (deleted)" },	  /* 8: shared anonymous: root */
	{ 0x62000, 0x63000, "rw-s", "/dev/shm/ring" },		  /* 9: no map_files here: a device */
	{ 0x70000, 0x80000, "rw-p", "" },			  /* 10: a coroutine's heap with its stack */
	{ 0x80000, 0x81000, "r--p", "[vvar]" },			  /* 11: kernel */
	{ 0x81000, 0x83000, "r-xp", "[vdso]" },			  /* 12: kernel */
	{ 0x90000, 0x91000, "rw-p", "[anon:jit]" },		  /* 13: named anonymous: root */
	{ 0xa0000, 0xc0000, "rw-p", "[stack]" },		  /* 14: main stack */
	{ 0xd0000, 0xd1000, "rw-s", "/dev/nonexistent-device" }, /* 15: stat fails: a device */
	{ 0xe0000, 0xe1000, "r-xp", "[uprobes]" },		  /* 16: kernel */
};

static struct proc_map *fake_maps(size_t *n)
{
	struct proc_map *m = calloc(N(fakes), sizeof(*m));
	size_t i;

	CHECK(m);
	for (i = 0; i < N(fakes); i++) {
		m[i].start = fakes[i].start;
		m[i].end = fakes[i].end;
		m[i].readable = fakes[i].perms[0] == 'r';
		m[i].writable = fakes[i].perms[1] == 'w';
		m[i].exec = fakes[i].perms[2] == 'x';
		m[i].shared = fakes[i].perms[3] == 's';
		m[i].path = strdup(fakes[i].path);
		CHECK(m[i].path);
	}
	*n = N(fakes);
	return m;
}

static const struct proc_mem_region *region_of(const struct proc_mem_plan *p, size_t map)
{
	size_t i;

	for (i = 0; i < p->nregions; i++)
		if (p->regions[i].map == map)
			return &p->regions[i];
	return NULL;
}

static void plan_fake(const struct proc_mem_thread *t, size_t nt, const struct proc_mem_range *keep, size_t nkeep,
		      struct proc_mem_plan *p)
{
	size_t n, i;
	struct proc_map *maps = fake_maps(&n);
	enum proc_map_kind *kinds = malloc(n * sizeof(*kinds));

	CHECK(kinds);
	for (i = 0; i < n; i++) /* no such process: only /dev paths ask it */
		kinds[i] = proc_map_kind_of(getpid(), &maps[i]);
	CHECK(proc_mem_plan_from_maps(maps, kinds, n, t, nt, keep, nkeep, NULL, 0, p) == 0);
}

static void test_kinds_and_roots(void)
{
	static const enum proc_map_kind want[] = {
		PROC_MAP_FILE, PROC_MAP_FILE, PROC_MAP_FILE, PROC_MAP_ANON,   PROC_MAP_HEAP,  PROC_MAP_ANON,
		PROC_MAP_ANON, PROC_MAP_ANON, PROC_MAP_FILE, PROC_MAP_DEVICE, PROC_MAP_ANON,  PROC_MAP_KERNEL,
		PROC_MAP_KERNEL, PROC_MAP_ANON, PROC_MAP_STACK, PROC_MAP_DEVICE, PROC_MAP_KERNEL,
	};
	static const size_t roots[] = { 2, 3, 4, 6, 7, 8, 10, 13, 14 };
	struct proc_mem_plan p;
	size_t i;

	_Static_assert(N(want) == N(fakes), "one kind per fake mapping");
	plan_fake(NULL, 0, NULL, 0, &p);
	for (i = 0; i < p.nmaps; i++)
		EXPECT(p.kinds[i] == want[i], "mapping %zu (%s) is %s", i, fakes[i].path, proc_map_kind_name(p.kinds[i]));
	EXPECT(p.nregions == N(roots), "%zu regions", p.nregions);
	for (i = 0; i < N(roots); i++) {
		const struct proc_mem_region *r = region_of(&p, roots[i]);

		EXPECT(r && r->start == fakes[roots[i]].start && r->end == fakes[roots[i]].end,
		       "mapping %zu (%s) is not read whole", roots[i], fakes[roots[i]].path);
	}
	EXPECT(region_of(&p, 7)->why == PROC_MEM_ROOT_ANON_READONLY && region_of(&p, 2)->why == PROC_MEM_ROOT_WRITABLE);
	EXPECT(p.skipped_kernel == 0x1000 + 0x2000 + 0x1000, "kernel %#llx", (unsigned long long)p.skipped_kernel);
	EXPECT(p.skipped_device == 0x2000);
	EXPECT(p.skipped_readonly == 0x2000);
	EXPECT(p.stack_dead == 0 && p.sp_not_on_stack == 0);
	for (i = 1; i < p.nregions; i++)
		EXPECT(p.regions[i - 1].end <= p.regions[i].start, "regions out of order");
	proc_mem_plan_free(&p);
	proc_mem_plan_free(&p); /* empty: fine */
	proc_mem_plan_free(NULL);
}

static void test_stacks(void)
{
	const struct proc_mem_thread t[] = {
		{ .sp = 0xb8000, .tls = 0x5555 },   /* main: [stack] needs no TLS */
		{ .sp = 0x5a010, .tls = 0x5ff00 },  /* a pthread: TLS at the top of its stack */
		{ .sp = 0x5c000, .tls = 0x5ff80 },  /* another thread on the same mapping */
		{ .sp = 0x78000, .tls = 0x5ff00 },  /* a coroutine stack in a heap: TLS elsewhere */
		{ .sp = 0x30000, .tls = 0x30100 },  /* an sp in [heap]: never cut */
		{ .sp = 0xf0000, .tls = 0xf0010 },  /* in no mapping */
		{ .sp = 0x90800, .tls = 0 },	    /* unknown TLS */
	};
	struct proc_mem_plan p;

	plan_fake(t, N(t), NULL, 0, &p);
	EXPECT(region_of(&p, 14)->start == 0xb8000 - PROC_MEM_RED_ZONE && region_of(&p, 14)->why == PROC_MEM_ROOT_STACK);
	/* the lowest sp of the two threads, minus the red zone, 8-aligned */
	EXPECT(region_of(&p, 6)->start == ((0x5a010 - PROC_MEM_RED_ZONE) & ~7ull), "pthread stack from %#llx",
	       (unsigned long long)region_of(&p, 6)->start);
	EXPECT(region_of(&p, 10)->start == 0x70000 && region_of(&p, 10)->why == PROC_MEM_ROOT_WRITABLE);
	EXPECT(region_of(&p, 4)->start == 0x20000);
	EXPECT(p.sp_not_on_stack == 4, "%llu sps off stacks", (unsigned long long)p.sp_not_on_stack);
	EXPECT(p.stack_dead == (0xb8000 - PROC_MEM_RED_ZONE - 0xa0000) + ((0x5a010 - PROC_MEM_RED_ZONE) & ~7ull) - 0x51000);
	proc_mem_plan_free(&p);

	/* a tracked block below the sp (a stack the program allocated itself
	 * there) is never cut: the stack is read from its start */
	{
		const struct proc_mem_range keep[] = { { .addr = 0xa1000, .size = 64 }, { .addr = 0xb9000, .size = 8 } };

		plan_fake(t, 1, keep, N(keep), &p);
		EXPECT(region_of(&p, 14)->start == 0xa1000 && p.stack_kept == 1);
		proc_mem_plan_free(&p);
	}
	/* an sp below the red zone's size: from the mapping's start */
	{
		const struct proc_mem_thread low = { .sp = 0xa0010, .tls = 0 };

		plan_fake(&low, 1, NULL, 0, &p);
		EXPECT(region_of(&p, 14)->start == 0xa0000 && p.stack_dead == 0);
		proc_mem_plan_free(&p);
	}
}

/* The reader on this process: a page of known words is handed over whole,
 * pages never touched are not read; a /dev/shm file is no device. */
struct seen {
	uint64_t want_addr;
	uint64_t marker;
	int found;
	uint64_t untouched_addr;
	int touched_untouched;
};

static int on_chunk(void *ctx, uint64_t addr, const void *bytes, size_t len)
{
	struct seen *s = ctx;

	if (s->want_addr >= addr && s->want_addr + 8 <= addr + len &&
	    !memcmp((const char *)bytes + (s->want_addr - addr), &s->marker, 8))
		s->found++;
	if (s->untouched_addr >= addr && s->untouched_addr < addr + len)
		s->touched_untouched++;
	return 0;
}

static int stop_at_once(void *ctx, uint64_t addr, const void *bytes, size_t len)
{
	(void)ctx;
	(void)addr;
	(void)bytes;
	(void)len;
	return 42;
}

static void test_read_self(void)
{
	uint64_t *m = mmap(NULL, 64 * K, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct seen s = { 0 };
	struct proc_mem_read_stats st;
	struct proc_mem_plan p;
	char shm_name[64];
	void *shm = MAP_FAILED;
	size_t i;
	int mode, fd;

	CHECK(m != MAP_FAILED);
	snprintf(shm_name, sizeof(shm_name), "/dev/shm/dwleak-test-%d", getpid());
	fd = open(shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		unlink(shm_name);
		if (ftruncate(fd, 4096) == 0)
			shm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
	}
	m[512 + 3] = 0x1122334455667788ull; /* page 1 touched; pages 2.. never */
	s.want_addr = (uint64_t)(uintptr_t)&m[512 + 3];
	s.marker = m[512 + 3];
	s.untouched_addr = (uint64_t)(uintptr_t)m + 8 * K;
	CHECK(shm != MAP_FAILED);
	CHECK(proc_mem_plan_build(getpid(), NULL, 0, NULL, 0, NULL, 0, &p) == 0);
	for (i = 0; i < p.nmaps; i++)
		if (p.maps[i].start == (uint64_t)(uintptr_t)shm)
			EXPECT(p.kinds[i] == PROC_MAP_FILE, "%s is %s", p.maps[i].path, proc_map_kind_name(p.kinds[i]));
	/* modes: PAGEMAP_SCAN; pagemap whole; with the reader thread; all in
	 * 3-page batches */
	for (mode = 0; mode < 3; mode++) {
		struct proc_mem_read_opts o = { .no_pagemap_scan = mode == 1, .reader_thread = mode == 2,
						.buffer_bytes = 3 * K };
		struct proc_mem_plan one = p;

		/* pagemap read whole costs 2 MiB a GiB: over ASan's 15 TB shadow
		 * (which holds pages: smaps cannot skip it) that is minutes, so
		 * that mode reads only the test's own mapping */
		if (mode == 1) {
			for (i = 0; i < p.nregions; i++)
				if (p.regions[i].start <= s.want_addr && s.want_addr < p.regions[i].end)
					one.regions = &p.regions[i];
			one.nregions = 1;
		}
		s.found = s.touched_untouched = 0;
		CHECK(proc_mem_read(getpid(), &one, &o, on_chunk, &s, &st) == 0);
		EXPECT(s.found == 1 && s.touched_untouched == 0, "mode %d: marker seen %d times, untouched page read %d",
		       mode, s.found, s.touched_untouched);
		EXPECT(st.scanned_bytes > 0 && st.untouched_bytes >= 60 * K && st.unreadable_bytes == 0);
		EXPECT(st.total_ns >= st.read_ns + st.callback_ns);
		printf("%s: read %.1f MiB of %zu regions in %.2f ms; %.1f GiB never touched\n",
		       mode == 1 ? "pagemap, one region" : mode ? "reader thread" : "PAGEMAP_SCAN, this process",
		       (double)st.scanned_bytes / 1048576,
		       one.nregions, (double)st.total_ns / 1e6, (double)st.untouched_bytes / (1 << 30));
	}
	EXPECT(proc_mem_read(getpid(), &p, NULL, stop_at_once, NULL, NULL) == 42);
	{
		struct proc_mem_read_opts threaded = { .reader_thread = true };

		EXPECT(proc_mem_read(getpid(), &p, &threaded, stop_at_once, NULL, NULL) == 42);
	}
	proc_mem_plan_free(&p);
	EXPECT(proc_mem_plan_build(0x7ffffff0, NULL, 0, NULL, 0, NULL, 0, &p) == -ESRCH);
	{
		struct proc_mem_thread *t;
		size_t n;

		EXPECT(proc_mem_threads(0x7ffffff0, &t, NULL, &n) == -ESRCH);
	}
	munmap(m, 64 * K);
	munmap(shm, 4096);
}

int main(void)
{
	EXPECT(!strcmp(proc_map_kind_name(PROC_MAP_DEVICE), "device") && !proc_map_kind_name(PROC_MAP_KIND_COUNT));
	EXPECT(!strcmp(proc_rss_part_name(PROC_RSS_HEAP_UNTRACKED), "heap_untracked"));
	test_kinds_and_roots();
	test_stacks();
	test_read_self();
	return check_status();
}
