/* Growth: bytes per stack at the previous --interval report, so that the
 * next one says how fast each stack grew since. */
#ifndef DWLEAK_SESSION_GROWTH_H
#define DWLEAK_SESSION_GROWTH_H

#include <stddef.h>
#include <stdint.h>

struct build_proc;

/* Owned by the caller across reports (zeroed to start; growth_free at the
 * end). */
struct growth {
	uint64_t *ids;
	int *pids;
	int64_t *bytes;
	size_t n;
	double t_prev; /* when they were remembered (CLOCK_MONOTONIC s); 0: never */
};

void growth_free(struct growth *g);

/* Bytes per second stack ID of process PID grew by, from G to BYTES at
 * NOW; NAN before the first report. */
double growth_of(const struct growth *g, int pid, uint64_t id, uint64_t bytes, double now);

/* Remembers the bytes of every stack of PROCS[0..NPROCS) at NOW (on no
 * memory, nothing: the next report has no growth). */
void growth_remember(struct growth *g, const struct build_proc *procs, size_t nprocs, double now);

#endif
