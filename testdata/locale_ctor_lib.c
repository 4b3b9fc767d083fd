/* liblocale_ctor.so: a library whose constructor makes its first
 * allocation inside newlocale(), which holds glibc's locale lock
 * (__libc_setlocale_lock) as a writer meanwhile, as p11-kit's constructor
 * does when curl loads it through gnutls.  A preload library whose first
 * malloc calls anything that takes that lock (dlsym's error path and
 * dlerror translate their messages with gettext, which reads it) breaks
 * the lock, and the program's next setlocale() waits forever
 * (tests/preload_no_hang.sh, with no_hang locale).  C only: no C++
 * runtime in the process, so a C++ operator's lookup fails as in curl. */
#define _GNU_SOURCE
#include <locale.h>

/* What the constructor got: "POSIX" is not "C", so glibc builds a new
 * locale object (malloc under the lock) instead of returning its own. */
locale_t locale_ctor_made;

__attribute__((constructor)) static void locale_ctor_make(void)
{
	locale_ctor_made = newlocale(LC_ALL_MASK, "POSIX", (locale_t)0);
}
