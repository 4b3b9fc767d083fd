/* Unit test for the preload library's own symbol lookup
 * (preload/resolve.c), which replaced dlsym and dladdr inside allocations:
 * run from this program (the "library" whose next definitions it finds),
 * it must give what dlsym(RTLD_NEXT) and dladdr1 give, for the interposed
 * functions and for names that exercise the hard cases: IFUNCs (wmemset),
 * several versions of one name (the default one wins, as with dlsym), the
 * vDSO (its dynamic section is not relocated in place), names nobody
 * defines, the count of loads that lets a look stop at once when nothing
 * was loaded since the last, a C++ runtime dlopen'ed RTLD_LOCAL (found,
 * and known as one), and an object with only a SysV hash table. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "interpose.h"

#define FN_INFO(id, sym, kind, cls) [id] = { sym, kind, cls },
static const struct fn_info interposed[F_COUNT] = { DWLEAK_PRELOAD_FUNCS(FN_INFO) };
#undef FN_INFO

/* What dlsym(RTLD_NEXT) and dladdr1 say of NAME. */
static void *expected(const char *name, uintptr_t *len, const char **file)
{
	const ElfW(Sym) *sym = NULL;
	void *fn = dlsym(RTLD_NEXT, name);
	Dl_info info;

	*len = 0;
	*file = NULL;
	if (fn && dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT)) {
		*file = info.dli_fname;
		if (sym && (void *)info.dli_saddr == fn)
			*len = sym->st_size;
	}
	return fn;
}

static void test_interposed(void)
{
	struct next_def got[F_COUNT];
	uint32_t found = next_defs_find(interposed, F_COUNT, UINT32_MAX, got, NULL);
	int f;

	for (f = 0; f < F_COUNT; f++) {
		const char *file;
		uintptr_t len;
		void *want = expected(interposed[f].sym, &len, &file);

		EXPECT(!!(found & (1u << f)) == !!want, "%s: found %d, dlsym %p", interposed[f].sym,
		       !!(found & (1u << f)), want);
		if (!want || !(found & (1u << f)))
			continue;
		EXPECT(got[f].fn == want, "%s: %p, dlsym(RTLD_NEXT) %p", interposed[f].sym, got[f].fn, want);
		EXPECT(got[f].len == len, "%s: length %lu, dladdr1 %lu", interposed[f].sym,
		       (unsigned long)got[f].len, (unsigned long)len);
		EXPECT(got[f].cxx_runtime == (strstr(file, "/libstdc++.so") || strstr(file, "/libc++.so")),
		       "%s: from %s, cxx_runtime %d", interposed[f].sym, file, got[f].cxx_runtime);
	}
	printf("ok: the %d interposed functions as dlsym(RTLD_NEXT) finds them (%d defined)\n", F_COUNT,
	       __builtin_popcount(found));
}

/* Names whose lookup has a catch, compared with dlsym(RTLD_NEXT). */
static void test_hard_names(void)
{
	static const struct fn_info names[] = {
		{ .sym = "wmemset" },		  /* IFUNC in libc (ASan does not intercept it) */
		{ .sym = "stpcpy" },		  /* IFUNC in libc */
		{ .sym = "memcpy" },		  /* ASan's (an IFUNC in libc) */
		{ .sym = "pthread_cond_wait" },  /* GLIBC_2.2.5 (hidden) and GLIBC_2.3.2 (default) */
		{ .sym = "realpath" },		  /* GLIBC_2.2.5 (hidden) and GLIBC_2.3 (default) */
		{ .sym = "gnu_get_libc_version" },
		{ .sym = "dwleak_no_such_function" },
		{ .sym = "main" },		  /* this program's: never "next" */
	};
	struct next_def got[N(names)];
	uint32_t found = next_defs_find(names, N(names), UINT32_MAX, got, NULL);
	unsigned i;

	for (i = 0; i < N(names); i++) {
		const char *file;
		uintptr_t len;
		void *want = expected(names[i].sym, &len, &file);

		EXPECT(!!(found & (1u << i)) == !!want, "%s: found %d, dlsym %p", names[i].sym,
		       !!(found & (1u << i)), want);
		if (want && (found & (1u << i)))
			EXPECT(got[i].fn == want, "%s: %p, dlsym(RTLD_NEXT) %p", names[i].sym, got[i].fn, want);
	}
	printf("ok: IFUNCs, versioned names, absent names as dlsym(RTLD_NEXT) finds them\n");
}

/* The vDSO: in the link map, not in the global scope (dlsym(RTLD_NEXT)
 * does not see it), its dynamic section left unrelocated. */
static void test_vdso(void)
{
	static const struct fn_info names[] = { { .sym = "__vdso_clock_gettime" } };
	void *h = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD), *want;
	struct next_def got[1];

	if (!h) {
		printf("info: no vDSO to look in\n");
		return;
	}
	want = dlsym(h, names[0].sym);
	EXPECT(next_defs_find(names, 1, 1, got, NULL) == 1, "__vdso_clock_gettime not found");
	EXPECT(got[0].fn == want, "__vdso_clock_gettime: %p, dlsym on the vDSO %p", got[0].fn, want);
	dlclose(h);
	printf("ok: the vDSO's symbols, through its unrelocated dynamic section\n");
}

/* With the count of loads, a look finds nothing when the loader loaded
 * nothing since the last (even a name that is there), and looks again
 * once it has. */
static void test_loads(void)
{
	static const struct fn_info names[] = { { .sym = "malloc" } };
	uint64_t loads = UINT64_MAX, first;
	struct next_def got[1];
	void *h;

	EXPECT(next_defs_find(names, 1, 1, got, &loads) == 1, "malloc not found");
	CHECK(loads != UINT64_MAX, "the count of loads was not read");
	first = loads;
	EXPECT(next_defs_find(names, 1, 1, got, &loads) == 0 && loads == first,
	       "nothing loaded since: the look must stop at once");
	h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("info: no libz.so.1 to load: %s\n", dlerror());
		return;
	}
	EXPECT(next_defs_find(names, 1, 1, got, &loads) == 1 && loads > first,
	       "a library loaded since (%lu loads, then %lu): malloc must be looked up again",
	       (unsigned long)first, (unsigned long)loads);
	dlclose(h);
	printf("ok: no look while nothing was loaded since the last (%lu loads)\n", (unsigned long)first);
}

/* A C++ runtime loaded RTLD_LOCAL (or already there): in the link map,
 * found and known as one, though dlsym(RTLD_NEXT) would not see it. */
static void test_local_cxx(void)
{
	static const struct fn_info names[] = { { .sym = "_ZSt9terminatev" } };
	struct next_def got[1];
	void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL), *want;

	if (!h) {
		printf("info: no libstdc++.so.6 to load: %s\n", dlerror());
		return;
	}
	want = dlsym(h, names[0].sym);
	EXPECT(next_defs_find(names, 1, 1, got, NULL) == 1, "std::terminate not found after dlopen");
	EXPECT(got[0].fn == want && got[0].cxx_runtime, "std::terminate: %p (C++ runtime %d), dlsym %p", got[0].fn,
	       got[0].cxx_runtime, want);
	printf("ok: a C++ runtime dlopen'ed RTLD_LOCAL (or there already), known as one\n");
}

/* An object linked with --hash-style=sysv (no DT_GNU_HASH), built here
 * when a compiler is at hand. */
static void test_sysv_hash(void)
{
	static const struct fn_info names[] = { { .sym = "dwleak_sysv_probe" } };
	char dir[] = "/tmp/dwleak-resolve.XXXXXX", cmd[512], lib[256];
	struct next_def got[1];
	void *h, *want;

	CHECK(mkdtemp(dir));
	snprintf(lib, sizeof(lib), "%s/libsysv.so", dir);
	snprintf(cmd, sizeof(cmd),
		 "echo 'int dwleak_sysv_probe(void) { return 7; }' | cc -x c -shared -fPIC "
		 "-Wl,--hash-style=sysv -o %s - 2>/dev/null",
		 lib);
	if (system(cmd) != 0 || !(h = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
		printf("info: no compiler to build a SysV-hash object\n");
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		EXPECT(system(cmd) == 0);
		return;
	}
	want = dlsym(h, names[0].sym);
	EXPECT(next_defs_find(names, 1, 1, got, NULL) == 1 && got[0].fn == want,
	       "dwleak_sysv_probe: %p, dlsym %p", got[0].fn, want);
	dlclose(h);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	EXPECT(system(cmd) == 0);
	printf("ok: an object with a SysV hash table only\n");
}

int main(void)
{
	test_interposed();
	test_hard_names();
	test_vdso();
	test_loads();
	test_local_cxx();
	test_sysv_hash();
	return check_status();
}
