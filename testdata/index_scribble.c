/* A process that spoils the preload library's index of its blocks (issue
 * 24: trust nothing from the process): it forks a child, which leaks a
 * block and exits with its index intact, then overwrites the magic of its
 * own index (found through the library's exported control block) and
 * leaks one more block.  dwleak --leak-check --sample-bytes must refuse
 * the parent's index with a message and still classify the child's
 * (tests/leak_check.sh, part i).  Without the library it only leaks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* the first fields of bpf/abi/preload.h's control block, by offset: the
 * program pretends to know nothing of dwleak but where the index is */
#define INDEX_ADDR_OFFSET 120

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
	uint64_t index = 0;
	pid_t child;
	int status;

	leak(100);
	child = fork();
	if (child == 0) {
		leak(200);
		exit(0);
	}
	waitpid(child, &status, 0);
	if (ctl) {
		memcpy(&index, ctl + INDEX_ADDR_OFFSET, sizeof(index));
		if (index)
			memset((void *)(uintptr_t)index, 0xee, 8); /* the header's magic */
	}
	leak(300);
	printf("scribbled %s\n", index ? "yes" : "no");
	return 0;
}
