/* Demangling the symbol names reports show: C++ (the Itanium ABI) and Rust
 * (legacy and v0) through libiberty, the demangler of c++filt and nm -C,
 * with the output of `c++filt -i` (no hashes or crate disambiguators). */
#ifndef DWLEAK_DEMANGLE_H
#define DWLEAK_DEMANGLE_H

#include <stdbool.h>

/*
 * Whether NAME looks mangled: a C++ or legacy Rust name ("_Z...") or a Rust
 * v0 name ("_R" then an upper-case letter or a digit).  Only a guess from
 * the prefix: symbol_demangle() decides.  NULL is not.
 */
bool symbol_is_mangled(const char *name);

/*
 * Sets *OUT to a malloc'd copy of NAME the way a report shows it: without
 * an ELF symbol version ("__libc_start_main@@GLIBC_2.34" gives
 * "__libc_start_main"), demangled when symbol_is_mangled() and libiberty
 * demangles it (C++ with parameters, "operator new(unsigned long)"; legacy
 * Rust without its "::h<16 hex>" hash, as rustfilt shows it; Rust v0
 * without crate disambiguators), else as it is.  NAME NULL gives NULL.
 * The caller frees *OUT.  Returns 0 or -ENOMEM (*OUT is then NULL).
 */
int symbol_demangle(const char *name, char **out);

/*
 * Sets *OUT to a malloc'd copy of NAME without an ELF symbol version, not
 * demangled: the raw name that valgrind's suppressions write
 * ("_ZN3Foo3barEv").  NAME NULL gives NULL.  The caller frees *OUT.
 * Returns 0 or -ENOMEM (*OUT is then NULL).
 */
int symbol_unversioned(const char *name, char **out);

#endif
