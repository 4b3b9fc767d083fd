/* Loaded by inject_target dlopen_block: its constructor sleeps, so that
 * the dynamic linker's lock is held while tests/inject.sh injects. */
#include <time.h>

__attribute__((constructor)) static void slow_ctor(void)
{
	struct timespec ts = { 1, 500 * 1000 * 1000 };

	nanosleep(&ts, NULL);
}
