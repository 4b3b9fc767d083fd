/* Unit tests for --max-stacks (agent/stack_table.c): a scripted case where
 * the least recently grown stack is the one folded into [evicted], frees
 * taken from an entry and then from [evicted], and a long random run
 * against a brute-force model (an array scanned linearly) that checks every
 * entry, the recency order, the evicted counts and that totals are never
 * lost, under ASan/UBSan. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stack_table.h"

static uint64_t evicted_keys[64];
static size_t nevicted_keys;

static void on_evict(void *ctx, uint64_t key)
{
	(void)ctx;
	if (nevicted_keys < N(evicted_keys))
		evicted_keys[nevicted_keys++] = key;
}

static void test_scripted(void)
{
	struct stack_table *t;
	struct stack_table_evicted ev;
	struct stack_table_entry *e;
	struct report_stack rs;
	size_t n;

	CHECK(stack_table_new(3, on_evict, NULL, &t) == 0, "new");
	CHECK(stack_table_add(t, 1, 100, 1) == 0 && stack_table_add(t, 2, 200, 2) == 0 &&
	      stack_table_add(t, 3, 300, 3) == 0, "add");
	/* 1 grows again: 2 is now the least recently grown */
	CHECK(stack_table_add(t, 1, 10, 1) == 0, "add");
	/* a free is no growth: 2 stays least recently grown */
	EXPECT(stack_table_sub(t, 2, 50, 1) == 0, "sub");
	CHECK(stack_table_add(t, 4, 400, 4) == 0, "add");
	EXPECT(stack_table_count(t) == 3 && !stack_table_get(t, 2), "2 not evicted");
	EXPECT(nevicted_keys == 1 && evicted_keys[0] == 2, "on_evict(2)");
	stack_table_evicted(t, &ev);
	EXPECT(ev.bytes == 150 && ev.allocations == 1 && ev.stacks == 1, "evicted %llu %llu %llu",
	       (unsigned long long)ev.bytes, (unsigned long long)ev.allocations, (unsigned long long)ev.stacks);
	CHECK(stack_table_entries(t, &e, &n) == 0 && n == 3, "entries");
	EXPECT(e[0].key == 3 && e[1].key == 1 && e[2].key == 4 && e[1].bytes == 110 && e[1].allocations == 2,
	       "order %llu %llu %llu", (unsigned long long)e[0].key, (unsigned long long)e[1].key,
	       (unsigned long long)e[2].key);
	free(e);
	/* 2 comes back; then its old block is freed: the entry's part first */
	CHECK(stack_table_add(t, 2, 20, 1) == 0, "add");
	EXPECT(nevicted_keys == 2 && evicted_keys[1] == 3, "3 evicted next");
	EXPECT(stack_table_sub(t, 2, 150, 1) == 0, "sub");
	EXPECT(!stack_table_get(t, 2), "an entry with nothing left is removed");
	stack_table_evicted(t, &ev);
	EXPECT(ev.bytes == 150 + 300 - 130 && ev.allocations == 1 + 3 - 0, "evicted %llu %llu",
	       (unsigned long long)ev.bytes, (unsigned long long)ev.allocations);
	/* more than was ever added comes back as the excess */
	EXPECT(stack_table_sub(t, 99, 1000, 0) == 1000 - 320, "excess");
	stack_table_evicted(t, &ev);
	EXPECT(ev.bytes == 0 && ev.stacks == 2, "evicted emptied");
	stack_table_evicted_stack(&ev, 42, &rs);
	EXPECT(rs.nframes == 1 && !strcmp(rs.frames[0].function, "[evicted]") && rs.pid == 42 && rs.bytes == 0,
	       "evicted stack");
	stack_table_free(t);
	stack_table_free(NULL);
}

/* The model: every stack ever added with its counts and the tick it last
 * grew; evicted ones folded into a sum. */
struct model_entry {
	uint64_t key, bytes, allocations, grown;
	int live;
};

static void test_random(size_t max, unsigned int seed, int steps)
{
	static struct model_entry m[512];
	uint64_t ev_bytes = 0, ev_allocs = 0, ev_stacks = 0, tick = 0, total = 0;
	struct stack_table *t;
	struct stack_table_evicted ev;
	size_t live = 0;

	memset(m, 0, sizeof(m));
	srand(seed);
	CHECK(stack_table_new(max, NULL, NULL, &t) == 0, "new");
	for (int step = 0; step < steps; step++) {
		size_t k = (size_t)rand() % N(m);
		uint64_t key = k * 0x10001ull + 7; /* keys that collide in the low bits */

		m[k].key = key;
		if (rand() % 3) {
			uint64_t b = (uint64_t)(rand() % 1000 + 1);

			CHECK(stack_table_add(t, key, b, 1) == 0, "add");
			total += b;
			if (!m[k].live) {
				if (max && live == max) {
					size_t lru = N(m);

					for (size_t i = 0; i < N(m); i++)
						if (m[i].live && (lru == N(m) || m[i].grown < m[lru].grown))
							lru = i;
					ev_bytes += m[lru].bytes;
					ev_allocs += m[lru].allocations;
					ev_stacks++;
					m[lru].live = 0;
					m[lru].bytes = m[lru].allocations = 0;
					live--;
				}
				m[k].live = 1;
				live++;
			}
			m[k].bytes += b;
			m[k].allocations++;
			m[k].grown = ++tick;
		} else if (total) {
			/* free some of what this key had: what the entry holds first */
			uint64_t b = (uint64_t)(rand() % 500), a = (uint64_t)(rand() % 2), tb, ta;

			if (b > total)
				b = total;
			tb = m[k].live ? (m[k].bytes < b ? m[k].bytes : b) : 0;
			ta = m[k].live ? (m[k].allocations < a ? m[k].allocations : a) : 0;
			if (b - tb > ev_bytes)
				b = tb + ev_bytes;
			if (a - ta > ev_allocs)
				a = ta + ev_allocs;
			EXPECT(stack_table_sub(t, key, b, a) == 0, "sub");
			total -= b;
			if (m[k].live) {
				m[k].bytes -= tb;
				m[k].allocations -= ta;
				if (!m[k].bytes && !m[k].allocations) {
					m[k].live = 0;
					live--;
				}
			}
			ev_bytes -= b - tb;
			ev_allocs -= a - ta;
		}
		if (check_failures)
			break;
	}
	/* every entry, in recency order */
	{
		struct stack_table_entry *e;
		size_t n, i;
		uint64_t last = 0, sum = 0;

		CHECK(stack_table_entries(t, &e, &n) == 0, "entries");
		EXPECT(n == live && n == stack_table_count(t) && (!max || n <= max), "%zu entries, model %zu", n, live);
		for (i = 0; i < n; i++) {
			size_t k = (size_t)((e[i].key - 7) / 0x10001ull);

			EXPECT(k < N(m) && m[k].live && m[k].bytes == e[i].bytes && m[k].allocations == e[i].allocations,
			       "entry %zu (key %llu)", i, (unsigned long long)e[i].key);
			EXPECT(k < N(m) && m[k].grown > last, "recency order at %zu", i);
			if (k < N(m))
				last = m[k].grown;
			sum += e[i].bytes;
		}
		stack_table_evicted(t, &ev);
		EXPECT(ev.bytes == ev_bytes && ev.allocations == ev_allocs && ev.stacks == ev_stacks,
		       "evicted %llu/%llu/%llu, model %llu/%llu/%llu", (unsigned long long)ev.bytes,
		       (unsigned long long)ev.allocations, (unsigned long long)ev.stacks, (unsigned long long)ev_bytes,
		       (unsigned long long)ev_allocs, (unsigned long long)ev_stacks);
		EXPECT(sum + ev.bytes == total, "bytes lost: %llu + %llu != %llu", (unsigned long long)sum,
		       (unsigned long long)ev.bytes, (unsigned long long)total);
		free(e);
	}
	stack_table_free(t);
}

int main(void)
{
	test_scripted();
	test_random(0, 1, 20000);
	test_random(1, 2, 5000);
	test_random(16, 3, 50000);
	test_random(200, 4, 100000);
	if (check_failures)
		return 1;
	printf("test_agent_stack_table: ok\n");
	return 0;
}
