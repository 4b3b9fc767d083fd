/* Symbol names as reports show them: the version suffix cut, then C++ and
 * Rust names demangled by libiberty's cplus_demangle (the same code as
 * c++filt and nm -C), in its automatic style, which tries Rust first
 * because a legacy Rust name is also a valid C++ one. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "demangle.h"

/* c++filt's flags less DMGL_VERBOSE: with it, legacy Rust names keep their
 * hash and v0 names their crate disambiguators ("r[4dd80272b5a2d1fc]"). */
#define DEMANGLE_FLAGS (DMGL_PARAMS | DMGL_ANSI)

bool symbol_is_mangled(const char *name)
{
	if (!name || name[0] != '_')
		return false;
	if (name[1] == 'Z')
		return true;
	return name[1] == 'R' && ((name[2] >= 'A' && name[2] <= 'Z') ||
				  (name[2] >= '0' && name[2] <= '9'));
}

int symbol_unversioned(const char *name, char **out)
{
	const char *at;

	*out = NULL;
	if (!name)
		return 0;
	/* a versioned symbol (__libc_start_main@@GLIBC_2.34): the name alone */
	at = strchr(name, '@');
	*out = at ? strndup(name, (size_t)(at - name)) : strdup(name);
	return *out ? 0 : -ENOMEM;
}

int symbol_demangle(const char *name, char **out)
{
	char *plain, *demangled;
	int err = symbol_unversioned(name, &plain);

	*out = NULL;
	if (err || !plain)
		return err;
	if (symbol_is_mangled(plain)) {
		/* NULL when it is not a name libiberty knows (or without
		 * memory, which then shows the mangled name) */
		demangled = cplus_demangle(plain, DEMANGLE_FLAGS);
		if (demangled) {
			free(plain);
			plain = demangled;
		}
	}
	*out = plain;
	return 0;
}
