/* A preload library for the arm64 guest's checks (vm/check_arm64.sh):
 * its malloc stops the process (SIGSTOP) the first time it is asked for
 * DWLEAK_STOP_SIZE bytes, so vm/walk_a64 and gdb walk the stack a leak
 * profiler's probe at malloc sees: the seed's new int[10] comes through
 * operator new in Debian's arm64 libstdc++ (built without frame
 * pointers).  Every call goes on to glibc's own malloc. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>

void *__libc_malloc(size_t size);

static long stop_size = -1;
static int stopped;

__attribute__((constructor)) static void stop_size_read(void)
{
	const char *v = getenv("DWLEAK_STOP_SIZE");

	stop_size = v && *v ? atol(v) : -1;
}

__attribute__((noinline)) void *malloc(size_t size)
{
	void *p;

	if (!stopped && (long)size == stop_size) {
		stopped = 1;
		raise(SIGSTOP);
	}
	p = __libc_malloc(size);
	__asm__ volatile("" ::: "memory"); /* not a tail call: malloc's frame stays */
	return p;
}
