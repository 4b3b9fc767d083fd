// supp_leaks: leaks from named C and C++ functions, for suppressions in
// memcheck's format (tests/suppress_memcheck.sh): valgrind
// --gen-suppressions=all writes one per loss record, dwleak reads them.
//
//   SuppLeaks::new_leak()          new Node (32 B), definitely lost:
//                                  operator new (_Znwm)
//   SuppLeaks::new_array_leak()    new int[10] (40 B), definitely lost:
//                                  operator new[] (_Znam), which libstdc++
//                                  turns into operator new by a tail call
//   SuppLeaks::inlined_new_leak()  new int[4] (16 B) through the inlined
//                                  SuppLeaks::Pool::grab(), definitely lost:
//                                  memcheck names the inlined frame "grab"
//   malloc_leak                    malloc(24), definitely lost (extern "C")
//   reachable_cache                malloc(64) kept in a global: reachable
//   mixed_leak                     2 x malloc(48) from one call site, the
//                                  first kept in a global (reachable), the
//                                  second dropped (definitely lost): one
//                                  stack for dwleak, two loss records for
//                                  memcheck
//
// It then prints "done" and returns from main.
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

typedef void *volatile slot;

slot g_cache;        // reachable_cache's block
slot g_mixed;        // mixed_leak's first block
volatile int g_mixed_count = 2;

// Overwrites the dead stack below the caller, where the sites' frames
// left copies of the pointers they dropped.
static NOINLINE void scrub_stack()
{
	volatile char buf[16384];

	memset((char *)buf, 0, sizeof(buf));
}

namespace SuppLeaks {
struct Node {
	Node *next;
	long payload[3];
};

struct Pool {
	static inline __attribute__((always_inline)) int *grab()
	{
		return new int[4];
	}
};

NOINLINE void new_leak()
{
	slot p = new Node();
	(void)p;
}

NOINLINE void new_array_leak()
{
	slot p = new int[10];
	(void)p;
}

NOINLINE void inlined_new_leak()
{
	slot p = Pool::grab();
	(void)p;
}
} // namespace SuppLeaks

extern "C" NOINLINE void malloc_leak()
{
	slot p = malloc(24);
	(void)p;
}

extern "C" NOINLINE void reachable_cache()
{
	g_cache = malloc(64);
}

extern "C" NOINLINE void mixed_leak()
{
	for (int i = 0; i < g_mixed_count; i++) {
		slot p = malloc(48);
		if (i == 0)
			g_mixed = p;
	}
}

int main()
{
	SuppLeaks::new_leak();
	SuppLeaks::new_array_leak();
	SuppLeaks::inlined_new_leak();
	malloc_leak();
	reachable_cache();
	mixed_leak();
	scrub_stack();
	if (write(1, "done\n", 5) != 5)
		return 3;
	return 0;
}
