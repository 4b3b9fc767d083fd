/* Unit tests for report/demangle.c: C++ names exactly as reports showed them
 * before (libstdc++'s __cxa_demangle), Rust names in both manglings - real
 * symbols of a rustc 1.95 binary, checked in because CI may have no rustc -
 * as rustfilt shows them (no hash, no crate disambiguator), symbol versions
 * cut, and what is not mangled kept; then `c++filt -i` (libiberty too, in
 * binutils) as an independent oracle for every mangled name. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "demangle.h"

static const struct {
	const char *symbol; /* as an ELF symbol table or DWARF linkage name has it */
	const char *shown;  /* as a report shows it */
} cases[] = {
	/* C++: the names the pinned tests compare */
	{ "_Znwm", "operator new(unsigned long)" },
	{ "_ZdlPvm@GLIBCXX_3.4", "operator delete(void*, unsigned long)" },
	{ "_ZN7LeakLib14slowMemoryLeakEv", "LeakLib::slowMemoryLeak()" },
	{ "_ZNSt6vectorIiSaIiEE9push_backERKi",
	  "std::vector<int, std::allocator<int> >::push_back(int const&)" },
	{ "_ZNKSt9type_info4nameEv", "std::type_info::name() const" },
	/* Rust legacy: the hash dropped, $-escapes decoded */
	{ "_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write" },
	{ "_ZN1r5Leaky4grow17h30ba9961730967c4E", "r::Leaky::grow" },
	{ "_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17ha86af84d9cc65291E",
	  "std::rt::lang_start::{{closure}}" },
	{ "_ZN4core3ptr92drop_in_place$LT$std..collections..hash..map..HashMap$LT$u32$C$"
	  "alloc..string..String$GT$$GT$17h3cf5af9dfed40c30E",
	  "core::ptr::drop_in_place<std::collections::hash::map::HashMap<u32,alloc::string::String>>" },
	/* Rust v0: generics and impls, no crate disambiguators */
	{ "_RINvCs6GmmlP4bgsG_1r4makeyEB2_", "r::make::<u64>" },
	{ "_RNvMCs6GmmlP4bgsG_1rNtB2_5Leaky4grow", "<r::Leaky>::grow" },
	{ "_RNvMs3_NtCslNYArtu3iFV_5alloc7raw_vecINtB5_6RawVecNtNtB7_6string6StringE8grow_one"
	  "CsjrHSEGnQ3l9_3std",
	  "<alloc::raw_vec::RawVec<alloc::string::String>>::grow_one" },
	/* versions cut, plain and broken names kept */
	{ "__libc_start_main@@GLIBC_2.34", "__libc_start_main" },
	{ "malloc", "malloc" },
	{ "_Zbad", "_Zbad" },
	{ "_RNvXbad", "_RNvXbad" },
	{ "_Reserved", "_Reserved" },
	{ "_GLOBAL__sub_I_main", "_GLOBAL__sub_I_main" },
	{ "", "" },
};

static void test_table(void)
{
	char *got;

	for (size_t i = 0; i < N(cases); i++) {
		EXPECT(symbol_demangle(cases[i].symbol, &got) == 0, "%s", cases[i].symbol);
		EXPECT(got && strcmp(got, cases[i].shown) == 0, "%s: got '%s', want '%s'",
		       cases[i].symbol, got, cases[i].shown);
		free(got);
	}
	EXPECT(symbol_demangle(NULL, &got) == 0 && got == NULL);
	/* the raw name: the version cut, nothing demangled */
	EXPECT(symbol_unversioned("_ZN3Foo3barEv@@V_1", &got) == 0 && got && !strcmp(got, "_ZN3Foo3barEv"),
	       "got '%s'", got);
	free(got);
	EXPECT(symbol_unversioned("malloc", &got) == 0 && got && !strcmp(got, "malloc"));
	free(got);
	EXPECT(symbol_unversioned(NULL, &got) == 0 && got == NULL);
	EXPECT(symbol_is_mangled("_Z3fooi") && symbol_is_mangled("_RNvC1a1b"));
	EXPECT(!symbol_is_mangled("_Reserved") && !symbol_is_mangled("main") &&
	       !symbol_is_mangled("_") && !symbol_is_mangled(NULL));
}

/* `c++filt -i SYMBOL` for each mangled case that demangles: the same words. */
static void test_oracle(void)
{
	char cmd[4096], line[4096];
	size_t n = 0;
	FILE *p;

	if (system("command -v c++filt >/dev/null 2>&1") != 0) {
		printf("note: no c++filt, oracle not run\n");
		return;
	}
	for (size_t i = 0; i < N(cases); i++) {
		const char *s = cases[i].symbol;

		if (!strcmp(s, cases[i].shown) || strchr(s, '@'))
			continue;
		snprintf(cmd, sizeof(cmd), "c++filt -i '%s'", s);
		p = popen(cmd, "r");
		CHECK(p, "popen %s", cmd);
		CHECK(fgets(line, sizeof(line), p), "no output from %s", cmd);
		line[strcspn(line, "\n")] = '\0';
		EXPECT(strcmp(line, cases[i].shown) == 0, "c++filt -i %s: '%s', we show '%s'", s,
		       line, cases[i].shown);
		pclose(p);
		n++;
	}
	CHECK(n >= 10, "only %zu names went to c++filt", n);
}

int main(void)
{
	test_table();
	test_oracle();
	if (check_failures)
		return check_status();
	printf("test_demangle: ok\n");
	return 0;
}
