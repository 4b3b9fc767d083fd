/* The preload library's sampler: sample points fall on a thread's
 * allocated bytes as a Poisson process of rate 1/N (exponential gaps, the
 * process dwleak's kernel program draws for --sample-bytes when it traps
 * the allocator), so an allocation of B bytes is sampled with probability
 * 1 - exp(-B/N), which dwleak's report divides by.  Drawn in the process,
 * per thread, with no system call: an allocation not sampled never enters
 * the kernel. */
#ifndef DWLEAK_PRELOAD_SAMPLE_H
#define DWLEAK_PRELOAD_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

/* One thread's sampler; zeroed to start (a thread-local variable). */
struct sampler {
	int64_t left;  /* bytes until the next sample point (after the first draw) */
	uint64_t rng;  /* xorshift64* state; 0 = not seeded yet */
};

/* The largest size one call counts: keeps LEFT from overflowing (a request
 * that large fails anyway). */
#define SAMPLER_SIZE_MAX (1ll << 48)

/*
 * The first draw and every sample: seeds S on its first call from SEED
 * (0: from S's address, different per thread, and the time stamp
 * counter), charges SIZE, and when a point fell in it draws the next gap
 * (mean N, N > 0).  Returns true when the allocation is sampled.  Out of
 * line: the common case costs no seed.
 */
bool sampler_draw(struct sampler *s, int64_t size, uint64_t n, uint64_t seed);

/* Whether an allocation of SIZE bytes is sampled, mean gap N (N > 0):
 * the common case, a point not reached, is a subtraction. */
static inline bool sampler_take(struct sampler *s, uint64_t size, uint64_t n, uint64_t seed)
{
	int64_t sz = size < (uint64_t)SAMPLER_SIZE_MAX ? (int64_t)size : SAMPLER_SIZE_MAX;

	s->left -= sz;
	if (__builtin_expect(s->left > 0 && s->rng, 1))
		return false;
	return sampler_draw(s, sz, n, seed);
}

/* An exponential gap of mean N bytes (N > 0), at least 1, from S's
 * generator (seeded). */
uint64_t sampler_gap(struct sampler *s, uint64_t n);

/* The natural logarithm of X > 0, to about 1e-9 relative, with no libm
 * (the library links libc only): for the gaps, and for the tests. */
double sampler_ln(double x);

#endif
