/* Unit test for session/stack_store.c, no BPF and no root: walks put as the
 * tracer moves them out of the kernel map, images joined and left as
 * processes fork, exec and exit, and what an image's end frees and keeps
 * (the invariant written in stack_store.c): an id shared by processes of
 * one image outlives any one of them, a kept id outlives its image, an
 * orphan put after the end is dropped, and thousands of ids across images
 * survive the removals of one image's (the table's shifting back). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "stack_store.h"

/* A walk of image IMG whose frames are derived from ID. */
static struct stack_trace walk_of(uint64_t id, uint32_t img, uint8_t n)
{
	struct stack_trace st;
	uint8_t i;

	memset(&st, 0, sizeof(st));
	st.nframes = n;
	st.end = WALK_END_OK;
	st.kind = ALLOC_MALLOC;
	st.image = img;
	for (i = 0; i < n; i++)
		st.pcs[i] = id * 16 + i;
	return st;
}

/* Whether the store has ID with the frames walk_of gave it. */
static bool has(const struct stack_store *s, uint64_t id, uint32_t img, uint8_t n)
{
	struct stack_trace got, want = walk_of(id, img, n);

	if (stack_store_get(s, id, &got))
		return false;
	return got.nframes == n && got.image == img && got.end == want.end && got.kind == want.kind &&
	       !memcmp(got.pcs, want.pcs, n * sizeof(uint64_t));
}

/* One image, two processes (a fork): the first to exit ends nothing; the
 * last ends it, and what a ledger still names stays. */
static void test_shared_image(void)
{
	struct stack_store *s;
	struct stack_store_stats st;
	struct stack_trace w;
	uint32_t a, b;

	CHECK(!stack_store_new(&s));
	CHECK(!stack_store_image_new(s, &a));
	CHECK(!stack_store_image_new(s, &b));
	EXPECT(a && b && a != b, "images %u and %u", a, b);
	stack_store_image_join(s, a); /* a fork of a's process */
	w = walk_of(100, a, 5);
	EXPECT(!stack_store_put(s, 100, &w));
	w = walk_of(101, a, 7);
	EXPECT(!stack_store_put(s, 101, &w));
	w = walk_of(200, b, 3);
	EXPECT(!stack_store_put(s, 200, &w));
	/* the same walk moved out again (stored anew after the first move) */
	w = walk_of(100, a, 5);
	EXPECT(!stack_store_put(s, 100, &w));
	EXPECT(has(s, 100, a, 5) && has(s, 101, a, 7) && has(s, 200, b, 3));

	EXPECT(!stack_store_image_leave(s, a), "the parent still runs: a must not end");
	EXPECT(has(s, 100, a, 5) && has(s, 101, a, 7));
	EXPECT(stack_store_image_leave(s, a), "the last process of a left");
	stack_store_keep(s, 101);  /* an outstanding block of a's names it */
	stack_store_keep(s, 200);  /* b's: not ending, a mark is harmless */
	stack_store_keep(s, 9999); /* not in the store: ignored */
	EXPECT(stack_store_image_end(s, a) == 1, "one of a's two stacks freed");
	EXPECT(!has(s, 100, a, 5), "100 is named by nothing: freed");
	EXPECT(has(s, 101, a, 7), "101 is kept for the report");
	EXPECT(has(s, 200, b, 3), "b has not ended");
	/* an orphan of a, left in the kernel map and moved after its end */
	w = walk_of(102, a, 2);
	EXPECT(!stack_store_put(s, 102, &w));
	EXPECT(!has(s, 102, a, 2), "a put of an ended image's walk is dropped");
	/* leaving or ending an ended image does nothing */
	EXPECT(!stack_store_image_leave(s, a));
	EXPECT(stack_store_image_end(s, a) == 0);
	/* b ends: its marks were cleared by a's end, so 200 goes */
	EXPECT(stack_store_image_leave(s, b));
	EXPECT(stack_store_image_end(s, b) == 1 && !has(s, 200, b, 3));

	stack_store_stats(s, &st);
	EXPECT(st.stacks == 1 && st.put == 5 && st.put_late == 1 && st.freed == 2 && st.peak == 3 &&
		       st.images == 2 && st.images_ended == 2 && st.bytes == 7 * sizeof(uint64_t),
	       "stacks %llu put %llu late %llu freed %llu peak %llu images %u/%u bytes %llu",
	       (unsigned long long)st.stacks, (unsigned long long)st.put, (unsigned long long)st.put_late,
	       (unsigned long long)st.freed, (unsigned long long)st.peak, st.images_ended, st.images,
	       (unsigned long long)st.bytes);
	stack_store_free(s);
}

/* A long-running session forgets an image once none of its processes is
 * remembered: every stack of it goes, kept or not; a live image or
 * another's stacks never do. */
static void test_forget(void)
{
	struct stack_store *s;
	struct stack_trace w;
	uint32_t a, b;

	CHECK(!stack_store_new(&s));
	CHECK(!stack_store_image_new(s, &a));
	CHECK(!stack_store_image_new(s, &b));
	w = walk_of(300, a, 4);
	EXPECT(!stack_store_put(s, 300, &w));
	w = walk_of(301, a, 4);
	EXPECT(!stack_store_put(s, 301, &w));
	w = walk_of(400, b, 4);
	EXPECT(!stack_store_put(s, 400, &w));
	EXPECT(stack_store_image_forget(s, a) == 0, "a runs: nothing to forget");
	EXPECT(stack_store_image_leave(s, a));
	stack_store_keep(s, 300);
	stack_store_keep(s, 301);
	EXPECT(stack_store_image_end(s, a) == 0, "both kept for the report");
	EXPECT(stack_store_image_forget(s, a) == 2, "forgotten: both go");
	EXPECT(!has(s, 300, a, 4) && !has(s, 301, a, 4) && has(s, 400, b, 4));
	EXPECT(stack_store_image_forget(s, b) == 0 && has(s, 400, b, 4), "b has not ended");
	stack_store_free(s);
}

/* The ids that are never a stored walk's, and image 0 (not known). */
static void test_special(void)
{
	struct stack_store *s;
	struct stack_trace w, got;
	uint64_t id;

	CHECK(!stack_store_new(&s));
	for (id = 0; id <= DWLEAK_STACK_SPECIAL_MAX; id++) {
		w = walk_of(id, 0, 1);
		EXPECT(!stack_store_put(s, id, &w));
		EXPECT(stack_store_get(s, id, &got) == -ENOENT, "id %llu", (unsigned long long)id);
	}
	/* image 0 never ends */
	w = walk_of(50, 0, 4);
	EXPECT(!stack_store_put(s, 50, &w));
	stack_store_image_join(s, 0);
	EXPECT(!stack_store_image_leave(s, 0));
	EXPECT(stack_store_image_end(s, 0) == 0 && has(s, 50, 0, 4));
	/* a full-depth walk keeps all its frames */
	w = walk_of(51, 0, DWLEAK_MAX_FRAMES);
	EXPECT(!stack_store_put(s, 51, &w) && has(s, 51, 0, DWLEAK_MAX_FRAMES));
	stack_store_free(s);
}

/* Thousands of ids in three images, with ids chosen to collide in the
 * table: ending the middle image frees exactly its unkept ones, and every
 * other id is still found (removal shifts entries back across runs and
 * the table's end). */
static void test_many(void)
{
	enum { N = 6000 };
	struct stack_store *s;
	struct stack_store_stats st;
	uint32_t img[3];
	uint64_t i, kept = 0;
	bool ok = true;

	CHECK(!stack_store_new(&s));
	for (i = 0; i < 3; i++)
		CHECK(!stack_store_image_new(s, &img[i]));
	for (i = 0; i < N; i++) {
		/* clustered ids: runs of neighbours, some wrapping the table */
		uint64_t id = (i % 3 == 1 ? 0xfff0000000000000ull : 0x10000) + i * 7;
		struct stack_trace w = walk_of(id, img[i % 3], (uint8_t)(1 + i % 9));

		CHECK(!stack_store_put(s, id, &w));
	}
	CHECK(stack_store_image_leave(s, img[1]));
	for (i = 1; i < N; i += 3) {
		if (i % 5 == 0) {
			stack_store_keep(s, 0xfff0000000000000ull + i * 7);
			kept++;
		}
	}
	EXPECT(stack_store_image_end(s, img[1]) == N / 3 - kept);
	for (i = 0; i < N && ok; i++) {
		uint64_t id = (i % 3 == 1 ? 0xfff0000000000000ull : 0x10000) + i * 7;
		bool want = i % 3 != 1 || i % 5 == 0;

		if (has(s, id, img[i % 3], (uint8_t)(1 + i % 9)) != want) {
			EXPECT(0, "id %llx (image %u): %s", (unsigned long long)id, img[i % 3],
			       want ? "lost" : "not freed");
			ok = false;
		}
	}
	stack_store_stats(s, &st);
	EXPECT(st.stacks == N - (N / 3 - kept) && st.peak == N);
	stack_store_free(s);
}

int main(void)
{
	test_forget();
	test_shared_image();
	test_special();
	test_many();
	return check_status();
}
