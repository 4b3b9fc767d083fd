// A library of tests/inject.sh's target: allocations made from an object
// other than the program (its own GOT slots), and C++ operators.
#include <cstdlib>

extern "C" void *inject_lib_malloc(size_t n)
{
	return malloc(n);
}

extern "C" void inject_lib_free(void *p)
{
	free(p);
}

extern "C" void *inject_lib_new(size_t n)
{
	char *p = new char[n];

	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

extern "C" void inject_lib_delete(void *p)
{
	delete[] static_cast<char *>(p);
}
