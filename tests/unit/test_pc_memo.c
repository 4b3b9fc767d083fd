/* Unit tests for the pcs a report names once per process
 * (session/pc_memo.c): a pc named as a return address and as an exact pc
 * are two entries, a pc with no frames (the preload library's) is
 * remembered as such, reset forgets all, and thousands of random pcs
 * through several doublings against a plain array, under ASan/UBSan. */
#include <stdlib.h>

#include "check.h"
#include "pc_memo.h"

static void test_cases(void)
{
	struct pc_memo *m;
	size_t first = 99, n = 99;

	CHECK(pc_memo_new(&m) == 0, "new");
	EXPECT(!pc_memo_get(m, 0x401000, true, &first, &n), "empty");
	pc_memo_put(m, 0x401000, true, 10, 2);
	pc_memo_put(m, 0x401000, false, 20, 1);
	pc_memo_put(m, 0x7f0000001000, true, 30, 0);
	pc_memo_put(m, 0, false, 40, 1);
	EXPECT(pc_memo_get(m, 0x401000, true, &first, &n) && first == 10 && n == 2, "return address");
	EXPECT(pc_memo_get(m, 0x401000, false, &first, &n) && first == 20 && n == 1, "exact pc apart");
	EXPECT(pc_memo_get(m, 0x7f0000001000, true, &first, &n) && n == 0, "no frames is remembered");
	EXPECT(pc_memo_get(m, 0, false, &first, &n) && first == 40, "pc 0 is a pc");
	pc_memo_put(m, 0x401000, true, 50, 3);
	EXPECT(pc_memo_get(m, 0x401000, true, &first, &n) && first == 50 && n == 3, "put again replaces");
	pc_memo_reset(m);
	EXPECT(!pc_memo_get(m, 0x401000, true, &first, &n), "reset forgets");
	pc_memo_free(m);
	pc_memo_free(NULL);
}

static void test_random(void)
{
	enum { N = 5000 };
	static uint64_t pcs[N];
	struct pc_memo *m;
	uint64_t seed = 0x1234abcd;
	size_t first, n;

	CHECK(pc_memo_new(&m) == 0, "new");
	for (size_t i = 0; i < N; i++) {
		pcs[i] = check_xorshift64(&seed) & 0x7fffffffffffull;
		pc_memo_put(m, pcs[i], i & 1, i, i % 7);
	}
	for (size_t i = 0; i < N; i++) {
		size_t last = i;

		/* a pc drawn twice keeps its last put */
		for (size_t j = i + 1; j < N; j++)
			if (pcs[j] == pcs[i] && (j & 1) == (i & 1))
				last = j;
		EXPECT(pc_memo_get(m, pcs[i], i & 1, &first, &n) && first == last && n == last % 7, "pc %zu", i);
	}
	pc_memo_free(m);
}

int main(void)
{
	test_cases();
	test_random();
	return check_status();
}
