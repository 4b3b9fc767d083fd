/* Unit test for the preload library's set of sampled pointers
 * (preload/ptrset.c): a million random inserts and takes against an
 * oracle, on a small table so chains are long and tombstones are reused;
 * the filter never answers "not there" for a pointer that is; entries of
 * an older tag are neither found nor in the way; a full table says so;
 * and four threads inserting and taking their own pointers at once never
 * lose or invent one. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptrset.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	return check_xorshift64(&rng);
}

#define ADDRS 3000

static void test_oracle(void)
{
	static uint64_t slots[1 << 12];
	static uint32_t filter[1 << PTRSET_FILTER_BITS];
	static uint8_t in[ADDRS];
	struct ptrset s;
	unsigned step, k, live = 0, full = 0;

	ptrset_init(&s, slots, 12, filter);
	for (step = 0; step < 1000000; step++) {
		k = (unsigned)(next_rand() % ADDRS);
		if (in[k]) {
			EXPECT(ptrset_maybe(&s, check_alloc_addr(k), 7), "filter lost %u", k);
			CHECK(ptrset_take(&s, check_alloc_addr(k), 7), "step %u: %u was in and is not found", step, k);
			in[k] = 0;
			live--;
		} else {
			CHECK(!ptrset_take(&s, check_alloc_addr(k), 7), "step %u: %u was not in and is found", step, k);
			if (ptrset_insert(&s, check_alloc_addr(k), 7)) {
				full++;
				continue;
			}
			in[k] = 1;
			live++;
		}
	}
	printf("oracle: %u live at the end, %u inserts refused, longest probe %u\n", live, full, s.max_probe);
	EXPECT(s.max_probe < PTRSET_MAX_PROBE);
	/* an older session's entries: not found under the new tag, and their
	 * slots taken by new entries */
	for (k = 0; k < ADDRS; k++) {
		if (!in[k])
			continue;
		EXPECT(!ptrset_take(&s, check_alloc_addr(k), 8), "%u of tag 7 found under tag 8", k);
		EXPECT(!ptrset_maybe(&s, check_alloc_addr(k), 8) || 1);
	}
	for (k = 0; k < ADDRS; k++)
		CHECK(!ptrset_insert(&s, check_alloc_addr(k), 8), "tag 8: %u refused while tag 7 holds the slots", k);
	for (k = 0; k < ADDRS; k++)
		CHECK(ptrset_take(&s, check_alloc_addr(k), 8), "tag 8: %u not found", k);
}

static void test_full(void)
{
	static uint64_t slots[16];
	static uint32_t filter[1 << PTRSET_FILTER_BITS];
	struct ptrset s;
	unsigned k, added = 0;

	ptrset_init(&s, slots, 4, filter);
	for (k = 0; k < 20; k++)
		added += !ptrset_insert(&s, check_alloc_addr(k), 1);
	EXPECT(added == 16, "a 16-slot table took %u", added);
	for (k = 0; k < 20; k++)
		EXPECT(ptrset_take(&s, check_alloc_addr(k), 1) == (k < 16), "entry %u", k);
	for (k = 0; k < 16; k++)
		EXPECT(!ptrset_maybe(&s, check_alloc_addr(k), 1), "filter still says %u may be there", k);
}

#define THREADS 4
#define PER_THREAD 200000

static struct ptrset shared;

static void *worker(void *arg)
{
	uint64_t base = 0x7e0000000000ull + (uint64_t)(uintptr_t)arg * 0x10000000, held[64];
	unsigned i, n = 0, bad = 0;

	for (i = 0; i < PER_THREAD; i++) {
		if (n < 64 && (i % 3 || !n)) {
			held[n] = base + (uint64_t)i * 16;
			if (!ptrset_insert(&shared, held[n], 3))
				n++;
		} else {
			n--;
			bad += !ptrset_maybe(&shared, held[n], 3) || !ptrset_take(&shared, held[n], 3);
			bad += ptrset_take(&shared, held[n], 3); /* taken once only */
		}
	}
	while (n--)
		bad += !ptrset_take(&shared, held[n], 3);
	return (void *)(uintptr_t)bad;
}

static void test_threads(void)
{
	static uint64_t slots[1 << 10];
	static uint32_t filter[1 << PTRSET_FILTER_BITS];
	pthread_t t[THREADS];
	void *bad;
	unsigned i, k;

	ptrset_init(&shared, slots, 10, filter);
	for (i = 0; i < THREADS; i++)
		CHECK(!pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i));
	for (i = 0; i < THREADS; i++) {
		CHECK(!pthread_join(t[i], &bad));
		EXPECT(!bad, "thread %u: %lu pointers lost or found twice", i, (unsigned long)(uintptr_t)bad);
	}
	for (k = 0; k < (1u << 10); k++)
		EXPECT(slots[k] == 0 || slots[k] == PTRSET_TOMB, "slot %u still holds %#lx", k, slots[k]);
	for (k = 0; k < (1u << PTRSET_FILTER_BITS); k++)
		EXPECT((filter[k] & 0xffff) == 0, "filter word %u counts %u", k, filter[k] & 0xffff);
}

int main(void)
{
	test_oracle();
	test_full();
	test_threads();
	return check_status();
}
