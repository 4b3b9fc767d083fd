/* A process that spoils its own ring of walked records (issue 24: trust
 * nothing from the process): traced with dwleak --walk process, it forks
 * a child, which leaks 200 bytes and exits with its rings intact, then
 * waits until its library walks in the process, leaks 100 bytes, and
 * writes over the published position of its own thread's ring (found
 * through the library's exported control block and the rings' directory)
 * so that the ring claims records beyond its end, and leaks 300 bytes
 * more.  dwleak must say that the parent's ring is corrupt, keep running,
 * and report the child's leak whole (tests/walk_process.sh, part f).
 * Without the library it only leaks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* bpf/abi/preload.h's and walk_ring_abi.h's layouts, by offset: the
 * program pretends to know nothing of dwleak but where the rings are */
#define RINGS_ACTIVE_OFFSET 132
#define RINGS_ADDR_OFFSET 136
#define DIR_SLOTS_OFFSET 128
#define DIR_NSLOTS 256
#define RING_PUBLISHED_OFFSET 72

static void *volatile keep;

static __attribute__((noinline)) void leak(size_t n)
{
	keep = malloc(n);
	memset(keep, 0x5a, n);
	keep = NULL;
}

int main(void)
{
	const unsigned char *ctl = dlsym(RTLD_DEFAULT, "dwleak_preload_control");
	uint32_t tid = (uint32_t)syscall(SYS_gettid), active = 0, i;
	uint64_t dir = 0, ring = 0, bad;
	struct timespec ms = { 0, 1000000 };
	pid_t child;
	int status, n;

	child = fork();
	if (child == 0) {
		leak(200);
		exit(0);
	}
	waitpid(child, &status, 0);
	/* until the library records into its rings (the image handed over) */
	for (n = 0; ctl && n < 3000 && !active; n++) {
		keep = malloc(16); /* not free(malloc(16)): the compiler drops that pair */
		free(keep);
		nanosleep(&ms, NULL);
		memcpy(&active, ctl + RINGS_ACTIVE_OFFSET, sizeof(active));
	}
	leak(100);
	if (ctl && active) {
		memcpy(&dir, ctl + RINGS_ADDR_OFFSET, sizeof(dir));
		for (i = 0; dir && i < DIR_NSLOTS && !ring; i++) {
			const unsigned char *slot = (const unsigned char *)(uintptr_t)dir + DIR_SLOTS_OFFSET + 16 * i;
			uint32_t t;

			memcpy(&t, slot + 8, sizeof(t));
			if (t == tid)
				memcpy(&ring, slot, sizeof(ring));
		}
	}
	if (ring) {
		bad = 1ull << 40; /* far past the ring's head */
		memcpy((void *)(uintptr_t)(ring + RING_PUBLISHED_OFFSET), &bad, sizeof(bad));
	}
	leak(300);
	printf("scribbled %s\n", ring ? "yes" : "no");
	fflush(stdout);
	/* long enough for dwleak to read the spoiled ring before the exit */
	nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	return 0;
}
