/* The preload library's per-thread Poisson sampler over allocated bytes
 * (see sample.h): xorshift64* uniforms turned into exponential gaps by
 * -ln(U) * N, with a logarithm of its own (no libm in the library). */
#include "sample.h"

/* A seed that differs between threads and runs: the time-stamp counter
 * (x86_64) or the virtual counter (aarch64). */
static uint64_t clock_seed(void)
{
#if defined(__x86_64__)
	return __builtin_ia32_rdtsc();
#else
	uint64_t v;

	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#endif
}

/* splitmix64: spreads a seed of few distinct bits over the state. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t next_u64(struct sampler *s)
{
	uint64_t x = s->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

double sampler_ln(double x)
{
	union {
		double d;
		uint64_t u;
	} v = { .d = x };
	/* x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m by the series of
	 * atanh: ln m = 2 (t + t^3/3 + t^5/5 + ...), t = (m-1)/(m+1), |t| <
	 * 0.172, so six terms leave under 1e-10 */
	int e = (int)((v.u >> 52) & 0x7ff) - 1023;
	double m, t, t2, s;

	v.u = (v.u & ((1ull << 52) - 1)) | (1023ull << 52);
	m = v.d;
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	t = (m - 1) / (m + 1);
	t2 = t * t;
	s = t * (1 + t2 * (1.0 / 3 + t2 * (1.0 / 5 + t2 * (1.0 / 7 + t2 * (1.0 / 9 + t2 * (1.0 / 11))))));
	return 2 * s + e * 0.69314718055994531;
}

uint64_t sampler_gap(struct sampler *s, uint64_t n)
{
	/* U uniform in (0, 1]: 53 random bits, plus one so it is never 0 */
	double u = (double)((next_u64(s) >> 11) + 1) * (1.0 / 9007199254740992.0);
	double g = -sampler_ln(u) * (double)n;

	/* -ln(2^-53) = 36.7: a gap stays under 37 N, which fits for any N
	 * below 2^58; beyond, saturate */
	if (g >= 9.2e18)
		return (uint64_t)1 << 62;
	return g < 1 ? 1 : (uint64_t)(g + 0.5);
}

bool sampler_draw(struct sampler *s, int64_t size, uint64_t n, uint64_t seed)
{
	int64_t gap;

	if (!s->rng) {
		/* the thread's first allocation: its first point is a gap from
		 * the start of its bytes (LEFT was 0, so it holds -SIZE) */
		s->rng = mix(seed ? seed : (uint64_t)(uintptr_t)s ^ clock_seed()) | 1;
		gap = (int64_t)sampler_gap(s, n);
		s->left = gap - size;
		if (s->left > 0)
			return false;
	}
	/* a point fell in this allocation; by memorylessness the next one is
	 * a fresh gap past its end */
	s->left = (int64_t)sampler_gap(s, n);
	return true;
}
