/* Unit tests for the agent's growth history (agent/history.c): snapshots
 * kept once a period and the oldest let go past the ring's length, only
 * the largest stacks kept, the growth rate from the oldest snapshot old
 * enough, and what grew most (new stacks from 0, shrunk ones left out,
 * the order, the bound K), then a random run against a brute-force model
 * of the same rules, under ASan/UBSan. */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "history.h"

static void test_ring_and_rate(void)
{
	struct agent_history *h;
	struct agent_history_stack st[3] = { { 7, 100 }, { 3, 50 }, { 9, 10 } };
	const struct agent_history_stack *o;
	uint64_t total;
	double t;
	size_t n;

	EXPECT(agent_history_new(10, 1, 4, &h) == -EINVAL && !h, "a ring of one is refused");
	CHECK(agent_history_new(10, 3, 2, &h) == 0, "new");
	EXPECT(isnan(agent_history_rate(h, 0, 0, 1)), "no rate without snapshots");
	EXPECT(agent_history_offer(h, 100, 160, st, 3) == 1, "the first offer is kept");
	EXPECT(agent_history_offer(h, 105, 999, st, 3) == 0, "not due within the period");
	o = agent_history_oldest(h, &t, &total, &n);
	CHECK(o && n == 2, "two of three stacks kept: %zu", n);
	/* the largest two, by key */
	EXPECT(o[0].key == 3 && o[0].bytes == 50 && o[1].key == 7 && o[1].bytes == 100, "kept %llu %llu",
	       (unsigned long long)o[0].key, (unsigned long long)o[1].key);
	EXPECT(t == 100 && total == 160, "time %g total %llu", t, (unsigned long long)total);
	EXPECT(isnan(agent_history_rate(h, 104, 200, 5)), "a span under MIN_SPAN: no rate");
	EXPECT(fabs(agent_history_rate(h, 110, 260, 5) - 10.0) < 1e-9, "100 bytes in 10 s");
	EXPECT(fabs(agent_history_rate(h, 110, 60, 5) + 10.0) < 1e-9, "shrinking: negative");
	EXPECT(agent_history_offer(h, 110, 200, NULL, 0) == 1 && agent_history_offer(h, 120, 300, NULL, 0) == 1,
	       "two more");
	EXPECT(agent_history_count(h) == 3, "three kept");
	EXPECT(agent_history_offer(h, 130, 400, st, 1) == 1 && agent_history_count(h) == 3, "the ring is full");
	o = agent_history_oldest(h, &t, &total, &n);
	EXPECT(t == 110 && total == 200 && n == 0 && !o, "the oldest went: now %g", t);
	EXPECT(fabs(agent_history_rate(h, 140, 500, 5) - 10.0) < 1e-9, "rate from 110");
	agent_history_free(h);
	agent_history_free(NULL);
}

static void test_grew_most(void)
{
	struct agent_history *h;
	struct agent_history_stack then[] = { { 1, 1000 }, { 2, 500 }, { 3, 300 } };
	struct agent_history_stack now[] = { { 1, 1100 }, { 2, 400 }, { 3, 900 }, { 4, 50 }, { 5, 700 } };
	struct agent_history_growth g[3];
	double since;
	int k;

	CHECK(agent_history_new(30, 4, 16, &h) == 0, "new");
	k = agent_history_grew_most(h, now, N(now), N(g), g, &since);
	EXPECT(k == 3 && isnan(since), "without a snapshot everything grew from 0: %d", k);
	EXPECT(g[0].key == 1 && g[0].then == 0 && g[0].now == 1100, "largest first");
	CHECK(agent_history_offer(h, 5, 1800, then, N(then)) == 1, "offer");
	k = agent_history_grew_most(h, now, N(now), N(g), g, &since);
	CHECK(k == 3 && since == 5, "%d grew since %g", k, since);
	/* 5: +700 (new), 3: +600, 1: +100; 4 (+50) past K; 2 shrank */
	EXPECT(g[0].key == 5 && g[0].then == 0 && g[0].now == 700, "new stack 5 first");
	EXPECT(g[1].key == 3 && g[1].then == 300 && g[1].now == 900, "then 3");
	EXPECT(g[2].key == 1 && g[2].then == 1000, "then 1");
	k = agent_history_grew_most(h, now, N(now), 0, g, &since);
	EXPECT(k == 0, "K 0");
	agent_history_free(h);
}

/* The model: every snapshot whole, cut to the largest MAX when asked. */
static void test_random(void)
{
	enum { LEN = 4, MAX = 8, KEYS = 24, ROUNDS = 400 };
	struct agent_history *h;
	uint64_t seed = 0x5eed1234, model[LEN][KEYS], mt[LEN];
	double times[LEN];
	size_t mcount = 0, mhead = 0;

	CHECK(agent_history_new(2, LEN, MAX, &h) == 0, "new");
	memset(model, 0, sizeof(model));
	for (int r = 0; r < ROUNDS; r++) {
		struct agent_history_stack st[KEYS];
		struct agent_history_growth g[KEYS];
		uint64_t total = 0, cut;
		size_t n = 0, larger;
		double now = r, since;
		int kept, k;

		for (uint64_t key = 0; key < KEYS; key++) {
			uint64_t b = check_xorshift64(&seed) % 5 ? check_xorshift64(&seed) % 1000 : 0;

			if (b) {
				st[n++] = (struct agent_history_stack){ key + 1, b };
				total += b;
			}
		}
		/* the model's "then" for this round: its oldest snapshot */
		k = agent_history_grew_most(h, st, n, KEYS, g, &since);
		CHECK(k >= 0, "grew_most");
		for (size_t i = 0; i < n; i++) {
			uint64_t then = mcount ? model[mhead][st[i].key - 1] : 0;
			bool found = false;

			for (int j = 0; j < k; j++)
				found |= g[j].key == st[i].key && g[j].then == then && g[j].now == st[i].bytes;
			EXPECT(found == (st[i].bytes > then), "round %d key %llu: then %llu now %llu", r,
			       (unsigned long long)st[i].key, (unsigned long long)then, (unsigned long long)st[i].bytes);
		}
		for (int j = 1; j < k; j++)
			EXPECT(g[j - 1].now - g[j - 1].then >= g[j].now - g[j].then, "order at %d", j);
		kept = agent_history_offer(h, now, total, st, n);
		CHECK(kept >= 0, "offer");
		EXPECT(kept == (!mcount || now - times[(mhead + mcount - 1) % LEN] >= 2), "round %d due", r);
		if (!kept)
			continue;
		if (mcount == LEN) {
			mhead = (mhead + 1) % LEN;
			mcount--;
		}
		size_t slot = (mhead + mcount++) % LEN;

		memset(model[slot], 0, sizeof(model[slot]));
		/* the MAX largest (ties by key, as the history breaks them) */
		for (size_t i = 0; i < n; i++) {
			larger = 0;
			for (size_t j = 0; j < n; j++)
				larger += st[j].bytes > st[i].bytes || (st[j].bytes == st[i].bytes && st[j].key < st[i].key);
			cut = larger < MAX ? st[i].bytes : 0;
			model[slot][st[i].key - 1] = cut;
		}
		times[slot] = now;
		mt[slot] = total;
		EXPECT(agent_history_count(h) == mcount, "count");
		(void)mt;
	}
	agent_history_free(h);
}

int main(void)
{
	test_ring_and_rate();
	test_grew_most();
	test_random();
	return check_status();
}
