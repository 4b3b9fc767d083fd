// jemalloc's own API under dwleak: run with LD_PRELOAD=libjemalloc.so.2.
// The functions are looked up at run time (no jemalloc headers needed).
// Each site is its own function; --ledger FILE gets what is still held per
// site (requested bytes and allocations).  rallocx moves the accounting to
// its site, xallocx resizes in place (the allocation keeps its site),
// sdallocx and dallocx free, nallocx allocates nothing.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

static void *(*je_mallocx)(size_t, int);
static void *(*je_rallocx)(void *, size_t, int);
static size_t (*je_xallocx)(void *, size_t, size_t, int);
static void (*je_sdallocx)(void *, size_t, int);
static void (*je_dallocx)(void *, int);
static size_t (*je_nallocx)(size_t, int);

static void *volatile keep[64];

/* 8 x 100 bytes kept */
NOINLINE void site_mallocx(void)
{
	for (int i = 0; i < 8; i++)
		keep[i] = je_mallocx(100, 0);
	KEEP(keep);
}

/* 4 blocks of 64 grown to 5000 by rallocx: 4 x 5000 at this site */
NOINLINE void site_rallocx(void)
{
	for (int i = 0; i < 4; i++) {
		void *p = je_mallocx(64, 0);

		keep[8 + i] = je_rallocx(p, 5000, 0);
	}
	KEEP(keep);
}

/* 3 x 4096 allocated here, resized in place to 4000 by xallocx */
NOINLINE void site_xallocx(size_t *held)
{
	*held = 0;
	for (int i = 0; i < 3; i++) {
		void *p = je_mallocx(4096, 0);
		size_t got = je_xallocx(p, 4000, 0, 0);

		keep[16 + i] = p;
		*held += got >= 4000 ? 4000 : 4096;
	}
	KEEP(keep);
}

/* freed with sdallocx and dallocx: nothing left */
NOINLINE void site_freed(void)
{
	void *a = je_mallocx(300, 0), *b = je_mallocx(500, 0);

	je_sdallocx(a, 300, 0);
	je_dallocx(b, 0);
}

int main(int argc, char **argv)
{
	size_t xheld;
	FILE *f;

	if (argc != 3 || strcmp(argv[1], "--ledger")) {
		fprintf(stderr, "usage: %s --ledger FILE (run with LD_PRELOAD=libjemalloc.so.2)\n", argv[0]);
		return 2;
	}
	je_mallocx = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "mallocx");
	je_rallocx = (void *(*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "rallocx");
	je_xallocx = (size_t (*)(void *, size_t, size_t, int))dlsym(RTLD_DEFAULT, "xallocx");
	je_sdallocx = (void (*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "sdallocx");
	je_dallocx = (void (*)(void *, int))dlsym(RTLD_DEFAULT, "dallocx");
	je_nallocx = (size_t (*)(size_t, int))dlsym(RTLD_DEFAULT, "nallocx");
	if (!je_mallocx || !je_rallocx || !je_xallocx || !je_sdallocx || !je_dallocx || !je_nallocx) {
		fprintf(stderr, "%s: jemalloc is not loaded (LD_PRELOAD=libjemalloc.so.2)\n", argv[0]);
		return 2;
	}
	site_mallocx();
	site_rallocx();
	site_xallocx(&xheld);
	site_freed();
	if (je_nallocx(1000, 0) < 1000)
		return 1;
	f = fopen(argv[2], "w");
	if (!f)
		return 1;
	fprintf(f, "{\"site_mallocx\": [800, 8], \"site_rallocx\": [20000, 4], "
		   "\"site_xallocx\": [%zu, 3], \"site_freed\": [0, 0]}\n", xheld);
	return fclose(f) ? 1 : 0;
}
