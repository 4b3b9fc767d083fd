/* libi18n_ctor.so: a library whose constructor makes the process's first
 * allocation while glibc holds one of its i18n locks as a writer, as
 * libraries do in their constructors: inside newlocale() (the locale
 * lock, __libc_setlocale_lock: p11-kit's, loaded by curl through gnutls)
 * or, with NO_HANG_CTOR=gettext, inside bindtextdomain() (gettext's state
 * lock, _nl_state_lock: procps's tools hung there).  A preload library
 * whose first malloc calls anything that takes the same lock (dlsym's
 * error path and dlerror translate their messages with gettext, which
 * reads both) breaks it, and the program's next setlocale() or
 * textdomain() waits forever (tests/preload_no_hang.sh, with no_hang
 * locale and gettext).  C only: no C++ runtime in the process, so a C++
 * operator's lookup fails, as in curl. */
#define _GNU_SOURCE
#include <libintl.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

/* What the constructor got: "POSIX" is not "C", so glibc builds a new
 * locale object (malloc under the lock) instead of returning its own;
 * bindtextdomain allocates the new binding under its lock. */
locale_t i18n_ctor_locale;
const char *i18n_ctor_binding;

__attribute__((constructor)) static void i18n_ctor_allocate(void)
{
	const char *what = getenv("NO_HANG_CTOR");

	if (what && !strcmp(what, "gettext"))
		i18n_ctor_binding = bindtextdomain("dwleak-no-hang", "/nonexistent/locale");
	else
		i18n_ctor_locale = newlocale(LC_ALL_MASK, "POSIX", (locale_t)0);
}
