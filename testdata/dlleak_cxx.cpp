// libdlleak_cxx.so: libdlleak.so's interface in C++, for a C program
// (dlopen_main) that loads it late: its C++ runtime comes with it, into
// the dlopen'ed scope only, and its operator new calls still reach the
// preload library's wrappers (tests/preload_transparency.sh).  Leaks 24
// bytes per iteration from dlleak_leak_one(), with new char[24].
#include <cstring>
#include <string>

extern "C" {
#include "args.h"
}

extern "C" __attribute__((noinline)) void *dlleak_leak_one(long n)
{
	char *p = new char[24];
	std::string churn(1000, 'x'); // made and freed: the allocator works both ways

	std::memset(p, (int)n, 24);
	__asm__ volatile("" : : "r"(p), "r"(churn.data()) : "memory");
	return p;
}

extern "C" void dlleak_run(long iterations, long interval_ms)
{
	for (long n = 0; !iterations || n < iterations; n++) {
		dlleak_leak_one(n);
		pause_ms(interval_ms);
	}
}
