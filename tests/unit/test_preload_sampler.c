/* Unit test for the preload library's sampler (preload/sample.c): its
 * logarithm against libm's; its gaps exponential with mean N; each size
 * sampled with probability 1 - exp(-B/N), the probability dwleak's report
 * divides by, so the estimate of the bytes allocated is unbiased; threads
 * seeded apart draw apart.  Statistical checks at 5 standard deviations
 * with fixed seeds: deterministic. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "sample.h"

static void test_ln(void)
{
	double x, worst = 0;

	for (x = 1e-300; x < 1e300; x *= 1.37) {
		double want = log(x), got = sampler_ln(x);
		double err = fabs(got - want) / (fabs(want) > 1 ? fabs(want) : 1);

		if (err > worst)
			worst = err;
	}
	EXPECT(worst < 1e-9, "worst relative error of sampler_ln %g", worst);
	EXPECT(sampler_ln(1.0) == 0.0, "ln 1 = %g", sampler_ln(1.0));
	printf("sampler_ln: worst relative error %.2g\n", worst);
}

static void test_gaps(void)
{
	struct sampler s = { 0, 12345 };
	const uint64_t n = 524288;
	const int k = 200000;
	double sum = 0, below = 0;
	int i;

	for (i = 0; i < k; i++) {
		uint64_t g = sampler_gap(&s, n);

		CHECK(g >= 1);
		sum += (double)g;
		below += g < (uint64_t)(n * M_LN2); /* the median of Exp(mean n) */
	}
	/* mean: sd of the mean is n / sqrt(k) */
	EXPECT(fabs(sum / k - (double)n) < 5 * (double)n / sqrt(k), "mean gap %.0f, want %lu", sum / k, n);
	EXPECT(fabs(below / k - 0.5) < 5 * 0.5 / sqrt(k), "%.4f of gaps under the median", below / k);
	printf("gaps: mean %.0f (N %lu), %.4f under the median\n", sum / k, n, below / k);
}

/* Sizes from a few bytes to several N, as a program's: each size's
 * sampled fraction against 1 - exp(-B/N), and the Horvitz-Thompson
 * estimate of all bytes against the truth. */
static void test_inclusion(void)
{
	static const uint64_t sizes[] = { 16, 64, 512, 4096, 65536, 262144, 1 << 20, 3 << 20 };
	const uint64_t n = 262144;
	uint64_t hit[N(sizes)] = { 0 }, tries = 400000, t, i;
	double est = 0, truth = 0, var = 0;
	struct sampler s = { 0 };

	for (t = 0; t < tries; t++) {
		i = (t * 2654435761u >> 7) % N(sizes);
		truth += (double)sizes[i];
		if (sampler_take(&s, sizes[i], n, 0xfeedface)) {
			double p = 1 - exp(-(double)sizes[i] / (double)n);

			hit[i]++;
			est += (double)sizes[i] / p;
			var += (1 - p) / (p * p) * (double)sizes[i] * (double)sizes[i];
		}
	}
	for (i = 0; i < N(sizes); i++) {
		double m = (double)tries / N(sizes), p = 1 - exp(-(double)sizes[i] / (double)n);
		double sd = sqrt(m * p * (1 - p)) + 1;

		EXPECT(fabs((double)hit[i] - m * p) < 5 * sd, "size %lu: sampled %lu of %.0f, want %.1f",
		       sizes[i], hit[i], m, m * p);
	}
	/* the estimate's sd is about sqrt(sum over all of B^2 (1-p)/p) */
	EXPECT(fabs(est - truth) < 5 * sqrt(var) + 1, "estimated %.0f bytes, true %.0f (sd %.0f)", est, truth,
	       sqrt(var));
	printf("inclusion: estimate %.0f of %.0f bytes (%+.2f%%)\n", est, truth, 100 * (est - truth) / truth);
}

/* The first draw counts the first allocation too; huge sizes saturate. */
static void test_edges(void)
{
	struct sampler a = { 0 }, b = { 0 };
	int i, same = 0;

	CHECK(sampler_take(&a, UINT64_MAX, 1024, 1), "a request of 2^64 - 1 bytes holds a point");
	CHECK(a.left > 0, "the next gap is drawn after a sample");
	for (i = 0; i < 1000; i++)
		same += sampler_take(&a, 100, 1024, 1) == sampler_take(&b, 100, 1024, 2);
	EXPECT(same < 1000, "two seeds drew the same 1000 decisions");
	memset(&a, 0, sizeof(a));
	CHECK(!sampler_take(&a, 0, 1ull << 40, 7) || a.left > 0, "malloc(0) first call");
}

int main(void)
{
	test_ln();
	test_gaps();
	test_inclusion();
	test_edges();
	return check_status();
}
