// Anonymous memory a program maps itself, next to large mallocs that glibc
// serves with mmap, for dwleak --mmap.  Each site is its own function so
// dwleak's stacks name it; the program writes what it still holds per site
// (bytes, and regions or allocations) to --ledger FILE, then exits without
// releasing it.  mmap lengths are whole pages, as the kernel maps them; a
// region split by a partial munmap counts as two.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096ul
#define NOINLINE __attribute__((noinline))

static void *anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(p, 1, len);
	return p;
}

/* what the program holds; read at exit so no allocation can be optimised away */
static void *volatile keep[16];

/* 3 x 256 KiB kept, 1 freed: glibc maps them inside malloc; counted once, as malloc */
NOINLINE void site_big_malloc(void)
{
	void *gone = malloc(256 << 10);

	for (int i = 0; i < 3; i++)
		keep[i] = malloc(256 << 10);
	memset(gone, 1, 256 << 10);
	free(gone);
}

/* 4 regions of 5 pages kept */
NOINLINE void site_mmap_keep(void)
{
	for (int i = 0; i < 4; i++)
		keep[4 + i] = anon(5 * PAGE);
}

/* 10 pages; 2 unmapped from the middle (a split) and the last 3: 5 pages in 2 regions */
NOINLINE void site_mmap_partial(void)
{
	char *p = anon(10 * PAGE);

	munmap(p + 3 * PAGE, 2 * PAGE);
	munmap(p + 7 * PAGE, 3 * PAGE);
}

/* 4 pages grown to 16 by mremap (it may move): 16 pages in 1 region */
NOINLINE void site_mmap_remap(void)
{
	void *p = anon(4 * PAGE);
	void *q = mremap(p, 4 * PAGE, 16 * PAGE, MREMAP_MAYMOVE);

	if (q == MAP_FAILED) {
		perror("mremap");
		exit(1);
	}
	memset(q, 2, 16 * PAGE);
}

/* mapped and unmapped again: nothing */
NOINLINE void site_mmap_freed(void)
{
	void *p = anon(3 * PAGE);

	munmap(p, 3 * PAGE);
}

/* a file mapping: not anonymous, not tracked */
NOINLINE void site_mmap_file(int fd)
{
	keep[12] = mmap(NULL, 2 * PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
}

int main(int argc, char **argv)
{
	const char *ledger = argc == 3 && !strcmp(argv[1], "--ledger") ? argv[2] : NULL;
	FILE *f, *tmp = tmpfile();

	if (!ledger || !tmp || ftruncate(fileno(tmp), 2 * PAGE)) {
		fprintf(stderr, "usage: %s --ledger FILE\n", argv[0]);
		return 2;
	}
	site_big_malloc();
	site_mmap_keep();
	site_mmap_partial();
	site_mmap_remap();
	site_mmap_freed();
	site_mmap_file(fileno(tmp));
	f = fopen(ledger, "w");
	if (!f)
		return 1;
	fprintf(f, "{\"site_big_malloc\": [%lu, 3], \"site_mmap_keep\": [%lu, 4], "
		   "\"site_mmap_partial\": [%lu, 2], \"site_mmap_remap\": [%lu, 1], "
		   "\"site_mmap_freed\": [0, 0], \"site_mmap_file\": [0, 0]}\n",
		3ul * (256 << 10), 4 * 5 * PAGE, 5 * PAGE, 16 * PAGE);
	for (int i = 0; i < 16; i++)
		if (keep[i] == (void *)1)
			return 3;
	return fclose(f) ? 1 : 0;
}
