/* Unit test for session/alloc_table.c: a million random adds, removes and
 * resizes, on addresses crowded into few slots so that probe runs are long
 * and removal has to shift entries back, checked after every step against
 * a plain array indexed by address (the oracle). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "alloc_table.h"
#include "check.h"

#define ADDRS 4096 /* distinct addresses in play */
#define STEPS 1000000

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	return check_xorshift64(&rng);
}

int main(void)
{
	static uint64_t size[ADDRS]; /* oracle: 0 = not allocated, else size + 1 */
	static bool changed[ADDRS]; /* oracle of the change log, in its second half */
	uint64_t replaced = 0, unknown = 0, resized = 0, live = 0;
	struct alloc_table t = { 0 };
	unsigned step, i;

	for (step = 0; step < STEPS; step++) {
		unsigned k = (unsigned)(next_rand() % ADDRS), op = (unsigned)(next_rand() % 10);
		uint64_t a = check_alloc_addr(k), sz = next_rand() % 100000;
		const struct alloc_rec *r;

		/* the second half runs with the change log on: every address
		 * whose entry was replaced, removed or resized is in it */
		if (step == STEPS / 2)
			alloc_table_log_start(&t);
		if (step >= STEPS / 2 && size[k] && (op < 9 || op == 9))
			changed[k] = true;

		if (op < 5) {
			struct alloc_rec rec = { .addr = a, .size = sz, .stack_id = sz ^ 0x5a5a, .kind = op };

			CHECK(alloc_table_add(&t, &rec) == 0, "add %#llx", (unsigned long long)a);
			if (size[k])
				replaced++;
			else
				live++;
			size[k] = sz + 1;
		} else if (op < 9) {
			int err = alloc_table_remove(&t, a);

			CHECK(err == (size[k] ? 0 : -ENOENT), "remove %#llx gave %d", (unsigned long long)a, err);
			if (size[k])
				live--;
			else
				unknown++;
			size[k] = 0;
		} else {
			int err = alloc_table_resize(&t, a, sz);

			CHECK(err == (size[k] ? 0 : -ENOENT), "resize %#llx gave %d", (unsigned long long)a, err);
			if (size[k]) {
				size[k] = sz + 1;
				resized++;
			}
		}
		r = alloc_table_find(&t, a);
		CHECK(!r == !size[k], "step %u: %#llx found %d, oracle %d", step, (unsigned long long)a, !!r, !!size[k]);
		CHECK(!r || r->size + 1 == size[k], "step %u: size %llu, oracle %llu", step,
		      (unsigned long long)r->size, (unsigned long long)size[k] - 1);
		CHECK(t.n == live, "step %u: n %zu, oracle %llu", step, t.n, (unsigned long long)live);
		if (step % 100000 == 0) /* every address, not only the one touched */
			for (i = 0; i < ADDRS; i++)
				CHECK(!alloc_table_find(&t, check_alloc_addr(i)) == !size[i], "step %u: address %u", step, i);
	}
	CHECK(t.replaced == replaced && t.free_unknown == unknown && t.resized == resized,
	      "counters %llu/%llu/%llu, oracle %llu/%llu/%llu", (unsigned long long)t.replaced,
	      (unsigned long long)t.free_unknown, (unsigned long long)t.resized, (unsigned long long)replaced,
	      (unsigned long long)unknown, (unsigned long long)resized);
	{
		static bool logged[ADDRS];
		size_t j;

		CHECK(t.log.on && !t.log.lost);
		for (j = 0; j < t.log.n; j++) {
			uint64_t off = t.log.addrs[j] - 0x7f0000000000ull;
			unsigned idx = (unsigned)((off / 0x100000) + (off % 0x100000) / 16 * 64);

			CHECK(idx < ADDRS && check_alloc_addr(idx) == t.log.addrs[j], "logged %#llx is no address in play",
			      (unsigned long long)t.log.addrs[j]);
			logged[idx] = true;
		}
		for (i = 0; i < ADDRS; i++)
			CHECK(logged[i] == changed[i], "address %u: logged %d, changed %d", i, logged[i], changed[i]);
		alloc_table_log_stop(&t);
	}
	for (i = 0, live = 0; i < t.cap; i++)
		live += t.slots[i].addr != 0;
	CHECK(live == t.n, "%llu slots in use, n %zu", (unsigned long long)live, t.n);
	CHECK(t.n * 4 <= t.cap * 3, "load %zu of %zu", t.n, t.cap);
	alloc_table_free(&t);
	printf("test_alloc_table: ok (%u steps)\n", STEPS);
	return 0;
}
