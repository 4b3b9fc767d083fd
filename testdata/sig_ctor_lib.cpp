// libsig_ctor.so: a C++ library whose constructor raises SIGUSR1, so that
// the program's handler runs inside dlopen() (the loader's lock held, its
// C++ runtime just mapped into the dlopen'ed scope).  no_hang sig-dlopen
// allocates in that handler, with malloc and with operator new, which the
// preload library resolves there for the first time
// (tests/preload_no_hang.sh).  sig_ctor_keep() makes a block with new.
#include <csignal>

extern "C" void *sig_ctor_keep(unsigned long n)
{
	return new char[n];
}

__attribute__((constructor)) static void sig_ctor_raise()
{
	std::raise(SIGUSR1);
}
