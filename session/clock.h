/* The session's one clock: CLOCK_MONOTONIC, the clock bpf_ktime_get_ns
 * stamps records with, so ages computed from either side agree. */
#ifndef DWLEAK_SESSION_CLOCK_H
#define DWLEAK_SESSION_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Now, in ns. */
static inline uint64_t session_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Now, in seconds. */
static inline double session_now_s(void)
{
	return (double)session_now_ns() / 1e9;
}

#endif
