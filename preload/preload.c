/* libdwleak-preload.so: the malloc family and the C++ operators new and
 * delete, interposed with LD_PRELOAD, each call forwarded to the
 * definition that follows this library in the dynamic linker's lookup
 * order (glibc's, or tcmalloc's, jemalloc's, mimalloc's when preloaded
 * after it), with dwleak's two probe sites (sites.S) fired around it
 * while a tracer is attached (or the call walked here and recorded into
 * the thread's ring instead: rings.c).  Idle (both semaphores 0) a call costs a
 * load, a branch and an indirect jump.  Attached, dwleak's control block
 * (bpf/abi/preload.h) says whether every call fires or the library samples
 * (sample.h) and fires only sampled allocations and their frees, which it
 * recognises through a lock-free set (ptrset.h).  It never changes what
 * the program gets: the same pointers, errno, sizes and failures as
 * without it. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "constants.h"
#include "interpose.h"

/* The C functions' bootstrap and traced paths, out of line: the wrappers
 * below keep only the idle test and the jump. */

static __attribute__((noinline)) void *boot_alloc(int f, size_t size, size_t align, bool zero)
{
	void *p = arena_alloc(size, align);

	(void)f;
	if (p && zero)
		memset(p, 0, size); /* never used before, but say so */
	return p;
}

/* DRAWN: the caller drew for this call, and it is sampled. */
static __attribute__((noinline)) void *malloc_slow(size_t n, uintptr_t cfa, uintptr_t ra, bool drawn)
{
	malloc_fn fn = next_of(F_MALLOC);
	struct call c = { F_MALLOC, n, cfa, ra, 0, false, drawn, false, false, 0 };
	bool fire;
	void *p;


	if (!fn)
		return boot_alloc(F_MALLOC, n, 16, false);
	fire = alloc_on() && call_fires(&c);
	p = FORWARDED(fn(n));
	KEPT(p);
	if (fire)
		call_done(&c, p);
	return p;
}

/* Traced: a call not sampled costs a subtraction and a call here; out of
 * line, so that the idle wrapper needs no frame. */
static __attribute__((noinline)) void *malloc_on(size_t n, uintptr_t cfa, uintptr_t ra)
{
	malloc_fn fn = NEXT(F_MALLOC, malloc_fn);
	void *p;

	if (fn && unsampled(n)) {
		/* not sampled: with the block index its block still goes in,
		 * here (a call made inside another one, alloc_depth above 0,
		 * may be nested: looked at in full, drawn again) */
		if (index_on()) {
			if (unlikely(alloc_depth))
				return malloc_slow(n, cfa, ra, false);
			p = FORWARDED(fn(n));
			KEPT(p);
			if (p)
				index_insert(p, n);
			return p;
		}
		p = FORWARDED(fn(n));
		KEPT(p);
		return p;
	}
	return malloc_slow(n, cfa, ra, fn != NULL);
}

VISIBLE void *malloc(size_t n)
{
	malloc_fn fn = NEXT(F_MALLOC, malloc_fn);

	if (likely(fn && !alloc_on()))
		return fn(n);
	return malloc_on(n, CFA(), RA());
}

static __attribute__((noinline)) void *calloc_slow(size_t a, size_t b, uintptr_t cfa, uintptr_t ra)
{
	calloc_fn fn = next_of(F_CALLOC);
	struct call c = { F_CALLOC, mul_sat(a, b), cfa, ra, 0, false, false, false, false, 0 };
	bool fire;
	void *p;

	if (!fn) {
		if (c.size == UINT64_MAX) {
			errno = ENOMEM;
			return NULL;
		}
		return boot_alloc(F_CALLOC, c.size, 16, true);
	}
	fire = alloc_on() && call_fires(&c);
	p = FORWARDED(fn(a, b));
	KEPT(p);
	if (fire)
		call_done(&c, p);
	return p;
}

VISIBLE void *calloc(size_t a, size_t b)
{
	calloc_fn fn = NEXT(F_CALLOC, calloc_fn);

	if (likely(fn && !alloc_on()))
		return fn(a, b);
	return calloc_slow(a, b, CFA(), RA());
}

/* realloc of a bootstrap block: moved into the real allocator (or the
 * arena while still resolving); the old block is left where it is. */
static void *arena_realloc(void *old, size_t n, uintptr_t cfa, uintptr_t ra)
{
	size_t have = arena_size_of(old);
	void *p = n ? malloc_slow(n, cfa, ra, false) : NULL;

	if (p)
		memcpy(p, old, have < n ? have : n);
	return p;
}

static __attribute__((noinline)) void *realloc_slow(void *old, size_t n, uintptr_t cfa, uintptr_t ra, int f,
						   size_t count)
{
	struct call c = { f, f == F_REALLOCARRAY ? mul_sat(count, n) : n, cfa, ra, 0, false, false, false, false, 0 };
	void *fn = next_of(f), *p;
	bool fire;

	if (old && in_arena(old)) {
		if (c.size == UINT64_MAX) {
			errno = ENOMEM;
			return NULL;
		}
		return arena_realloc(old, c.size, cfa, ra);
	}
	if (!fn)
		return old ? NULL : boot_alloc(f, c.size == UINT64_MAX ? SIZE_MAX : c.size, 16, false);
	/* the old block is given up before the call, when no other thread can
	 * have it yet; if realloc then fails, it stays forgotten (as with
	 * dwleak's uprobes: counted as a failed allocation) */
	if (old && free_on())
		release(old, ra, DWLEAK_PRELOAD_REALLOC_FREE, fns[f].kind);
	fire = alloc_on() && call_fires(&c);
	p = FORWARDED(f == F_REALLOCARRAY ? ((reallocarray_fn)fn)(old, count, n) : ((realloc_fn)fn)(old, n));
	KEPT(p);
	if (fire)
		call_done(&c, p);
	return p;
}

VISIBLE void *realloc(void *old, size_t n)
{
	realloc_fn fn = NEXT(F_REALLOC, realloc_fn);

	if (likely(fn && !alloc_on() && !free_on() && !in_arena(old)))
		return fn(old, n);
	return realloc_slow(old, n, CFA(), RA(), F_REALLOC, 0);
}

VISIBLE void *reallocarray(void *old, size_t count, size_t n)
{
	reallocarray_fn fn = NEXT(F_REALLOCARRAY, reallocarray_fn);

	if (likely(fn && !alloc_on() && !free_on() && !in_arena(old)))
		return fn(old, count, n);
	return realloc_slow(old, n, CFA(), RA(), F_REALLOCARRAY, count);
}

static __attribute__((noinline)) int posix_memalign_slow(void **out, size_t align, size_t n, uintptr_t cfa,
							 uintptr_t ra)
{
	posix_memalign_fn fn = next_of(F_POSIX_MEMALIGN);
	struct call c = { F_POSIX_MEMALIGN, n, cfa, ra, 0, false, false, false, false, 0 };
	bool fire;
	int r;

	if (!fn) {
		void *p;

		if (!align || (align & (align - 1)) || align % sizeof(void *))
			return EINVAL;
		p = boot_alloc(F_POSIX_MEMALIGN, n, align, false);
		if (!p)
			return ENOMEM;
		*out = p;
		return 0;
	}
	fire = alloc_on() && call_fires(&c);
	r = FORWARDED(fn(out, align, n));
	KEPT(r);
	if (fire && !r)
		call_done(&c, *out);
	return r;
}

VISIBLE int posix_memalign(void **out, size_t align, size_t n)
{
	posix_memalign_fn fn = NEXT(F_POSIX_MEMALIGN, posix_memalign_fn);

	if (likely(fn && !alloc_on()))
		return fn(out, align, n);
	return posix_memalign_slow(out, align, n, CFA(), RA());
}

/* aligned_alloc, memalign (alignment, size), valloc, pvalloc (size). */
static __attribute__((noinline)) void *align_slow(int f, size_t align, size_t n, uintptr_t cfa, uintptr_t ra)
{
	void *fn = next_of(f), *p;
	struct call c = { f, n, cfa, ra, 0, false, false, false, false, 0 };
	bool two = f == F_ALIGNED_ALLOC || f == F_MEMALIGN;

	bool fire;

	if (!fn)
		return boot_alloc(f, n, two ? align : DWLEAK_PAGE_SIZE, false);
	fire = alloc_on() && call_fires(&c);
	p = FORWARDED(two ? ((memalign_fn)fn)(align, n) : ((malloc_fn)fn)(n));
	KEPT(p);
	if (fire)
		call_done(&c, p);
	return p;
}

VISIBLE void *aligned_alloc(size_t align, size_t n)
{
	memalign_fn fn = NEXT(F_ALIGNED_ALLOC, memalign_fn);

	if (likely(fn && !alloc_on()))
		return fn(align, n);
	return align_slow(F_ALIGNED_ALLOC, align, n, CFA(), RA());
}

VISIBLE void *memalign(size_t align, size_t n)
{
	memalign_fn fn = NEXT(F_MEMALIGN, memalign_fn);

	if (likely(fn && !alloc_on()))
		return fn(align, n);
	return align_slow(F_MEMALIGN, align, n, CFA(), RA());
}

VISIBLE void *valloc(size_t n)
{
	malloc_fn fn = NEXT(F_VALLOC, malloc_fn);

	if (likely(fn && !alloc_on()))
		return fn(n);
	return align_slow(F_VALLOC, DWLEAK_PAGE_SIZE, n, CFA(), RA());
}

VISIBLE void *pvalloc(size_t n)
{
	malloc_fn fn = NEXT(F_PVALLOC, malloc_fn);

	if (likely(fn && !alloc_on()))
		return fn(n);
	return align_slow(F_PVALLOC, DWLEAK_PAGE_SIZE, n, CFA(), RA());
}

static __attribute__((noinline)) void free_slow(void *p, uintptr_t ra)
{
	free_fn fn;

	if (!p || in_arena(p))
		return;
	fn = next_of(F_FREE);
	if (!fn)
		return; /* cannot happen: only the arena serves before resolution */
	if (free_on())
		release(p, ra, DWLEAK_PRELOAD_FREE, ALLOC_FREE);
	FORWARDED_VOID(fn(p));
}

static __attribute__((noinline)) void free_on_(void *p, uintptr_t ra)
{
	free_fn fn = NEXT(F_FREE, free_fn);

	if (fn && p && !in_arena(p) && unsampled_block(p)) {
		/* out of the block index before the allocator may hand the
		 * address out again (a free made inside another call: in full) */
		if (index_on()) {
			if (unlikely(alloc_depth)) {
				free_slow(p, ra);
				return;
			}
			index_remove(p);
		}
		FORWARDED_VOID(fn(p));
		return;
	}
	free_slow(p, ra);
}

VISIBLE void free(void *p)
{
	free_fn fn = NEXT(F_FREE, free_fn);

	if (likely(fn && !free_on() && !in_arena(p)))
		return fn(p);
	free_on_(p, RA());
}

VISIBLE size_t malloc_usable_size(void *p)
{
	usable_fn fn;

	if (p && in_arena(p))
		return arena_size_of(p);
	fn = next_of(F_USABLE);
	return fn ? fn(p) : 0;
}

/* --- C++ operators (Itanium names; size_t = unsigned long, align_val_t
 * an unsigned long enum, nothrow_t passed by reference) ---
 * Defined as the mangled C symbols: no C++ runtime is linked.  An
 * exception thrown by the operator forwarded to passes through these
 * frames (the library is built with unwind tables). */

/* An operator new of class PL_CXX_NEW / PL_CXX_NEW_ALIGNED, traced or not. */
static __attribute__((noinline)) void *new_slow(int f, size_t n, size_t align, const void *nt, uintptr_t cfa,
					       uintptr_t ra)
{
	void *fn = cxx_next(f), *p;
	struct call c = { f, n, cfa, ra, 0, false, false, false, false, 0 };
	bool fire = alloc_on() && !next[f].transparent && call_fires(&c);

	switch (f) {
	case F_NEW:
	case F_NEWA:
		p = FORWARDED(((malloc_fn)fn)(n));
		break;
	case F_NEW_NT:
	case F_NEWA_NT:
		p = FORWARDED(((new_nt_fn)fn)(n, nt));
		break;
	case F_NEW_AL:
	case F_NEWA_AL:
		p = FORWARDED(((new_al_fn)fn)(n, align));
		break;
	default:
		p = FORWARDED(((new_al_nt_fn)fn)(n, align, nt));
		break;
	}
	KEPT(p);
	if (fire)
		call_done(&c, p);
	return p;
}

/* Idle, and libstdc++'s plain operators whatever the state, jump straight
 * on (a tail call: no frame of this library is left on the stack). */
#define NEW_1(name, f)                                                                          \
	VISIBLE void *name(size_t n)                                                            \
	{                                                                                       \
		malloc_fn fn = NEXT(f, malloc_fn);                                              \
		if (likely(fn && (!alloc_on() || next[f].transparent)))                         \
			return fn(n);                                                           \
		return new_slow(f, n, 0, NULL, CFA(), RA());                                    \
	}
#define NEW_NT(name, f)                                                                         \
	VISIBLE void *name(size_t n, const void *nt)                                            \
	{                                                                                       \
		new_nt_fn fn = NEXT(f, new_nt_fn);                                              \
		if (likely(fn && (!alloc_on() || next[f].transparent)))                         \
			return fn(n, nt);                                                       \
		return new_slow(f, n, 0, nt, CFA(), RA());                                      \
	}
#define NEW_AL(name, f)                                                                         \
	VISIBLE void *name(size_t n, size_t al)                                                 \
	{                                                                                       \
		new_al_fn fn = NEXT(f, new_al_fn);                                              \
		if (likely(fn && !alloc_on()))                                                  \
			return fn(n, al);                                                       \
		return new_slow(f, n, al, NULL, CFA(), RA());                                   \
	}
#define NEW_AL_NT(name, f)                                                                      \
	VISIBLE void *name(size_t n, size_t al, const void *nt)                                 \
	{                                                                                       \
		new_al_nt_fn fn = NEXT(f, new_al_nt_fn);                                        \
		if (likely(fn && !alloc_on()))                                                  \
			return fn(n, al, nt);                                                   \
		return new_slow(f, n, al, nt, CFA(), RA());                                     \
	}

NEW_1(_Znwm, F_NEW)
NEW_1(_Znam, F_NEWA)
NEW_NT(_ZnwmRKSt9nothrow_t, F_NEW_NT)
NEW_NT(_ZnamRKSt9nothrow_t, F_NEWA_NT)
NEW_AL(_ZnwmSt11align_val_t, F_NEW_AL)
NEW_AL(_ZnamSt11align_val_t, F_NEWA_AL)
NEW_AL_NT(_ZnwmSt11align_val_tRKSt9nothrow_t, F_NEW_AL_NT)
NEW_AL_NT(_ZnamSt11align_val_tRKSt9nothrow_t, F_NEWA_AL_NT)

/* An operator delete, traced (not transparent, free's semaphore on). */
static __attribute__((noinline)) void delete_slow(int f, void *p, size_t sz, size_t al, const void *nt,
						  uintptr_t ra)
{
	void *fn = cxx_next(f);

	if (p && !next[f].transparent && free_on())
		release(p, ra, DWLEAK_PRELOAD_FREE, fns[f].kind);
	switch (f) {
	case F_DEL:
	case F_DELA:
		FORWARDED_VOID(((free_fn)fn)(p));
		break;
	case F_DEL_SZ:
	case F_DELA_SZ:
	case F_DEL_AL:
	case F_DELA_AL:
		FORWARDED_VOID(((del_sz_fn)fn)(p, f == F_DEL_SZ || f == F_DELA_SZ ? sz : al));
		break;
	case F_DEL_NT:
	case F_DELA_NT:
		FORWARDED_VOID(((del_nt_fn)fn)(p, nt));
		break;
	case F_DEL_SZ_AL:
	case F_DELA_SZ_AL:
		FORWARDED_VOID(((del_sz_al_fn)fn)(p, sz, al));
		break;
	default:
		FORWARDED_VOID(((del_al_nt_fn)fn)(p, al, nt));
		break;
	}
}

#define DEL_IDLE(f) (fn && (!free_on() || next[f].transparent))

#define DEL_1(name, f)                                                                          \
	VISIBLE void name(void *p)                                                              \
	{                                                                                       \
		free_fn fn = NEXT(f, free_fn);                                                  \
		if (likely(DEL_IDLE(f)))                                                        \
			return fn(p);                                                           \
		delete_slow(f, p, 0, 0, NULL, RA());                                            \
	}
#define DEL_2(name, f, a2)                                                                      \
	VISIBLE void name(void *p, size_t x)                                                    \
	{                                                                                       \
		del_sz_fn fn = NEXT(f, del_sz_fn);                                              \
		if (likely(DEL_IDLE(f)))                                                        \
			return fn(p, x);                                                        \
		delete_slow(f, p, a2 ? 0 : x, a2 ? x : 0, NULL, RA());                          \
	}
#define DEL_NT(name, f)                                                                         \
	VISIBLE void name(void *p, const void *nt)                                              \
	{                                                                                       \
		del_nt_fn fn = NEXT(f, del_nt_fn);                                              \
		if (likely(DEL_IDLE(f)))                                                        \
			return fn(p, nt);                                                       \
		delete_slow(f, p, 0, 0, nt, RA());                                              \
	}
#define DEL_SZ_AL(name, f)                                                                      \
	VISIBLE void name(void *p, size_t sz, size_t al)                                        \
	{                                                                                       \
		del_sz_al_fn fn = NEXT(f, del_sz_al_fn);                                        \
		if (likely(DEL_IDLE(f)))                                                        \
			return fn(p, sz, al);                                                   \
		delete_slow(f, p, sz, al, NULL, RA());                                          \
	}
#define DEL_AL_NT(name, f)                                                                      \
	VISIBLE void name(void *p, size_t al, const void *nt)                                   \
	{                                                                                       \
		del_al_nt_fn fn = NEXT(f, del_al_nt_fn);                                        \
		if (likely(DEL_IDLE(f)))                                                        \
			return fn(p, al, nt);                                                   \
		delete_slow(f, p, 0, al, nt, RA());                                             \
	}

DEL_1(_ZdlPv, F_DEL)
DEL_1(_ZdaPv, F_DELA)
DEL_2(_ZdlPvm, F_DEL_SZ, 0)
DEL_2(_ZdaPvm, F_DELA_SZ, 0)
DEL_2(_ZdlPvSt11align_val_t, F_DEL_AL, 1)
DEL_2(_ZdaPvSt11align_val_t, F_DELA_AL, 1)
DEL_NT(_ZdlPvRKSt9nothrow_t, F_DEL_NT)
DEL_NT(_ZdaPvRKSt9nothrow_t, F_DELA_NT)
DEL_SZ_AL(_ZdlPvmSt11align_val_t, F_DEL_SZ_AL)
DEL_SZ_AL(_ZdaPvmSt11align_val_t, F_DELA_SZ_AL)
DEL_AL_NT(_ZdlPvSt11align_val_tRKSt9nothrow_t, F_DEL_AL_NT)
DEL_AL_NT(_ZdaPvSt11align_val_tRKSt9nothrow_t, F_DELA_AL_NT)

/* --- The wrappers by id, for routing (route.c) ---
 * Hidden aliases: the address of the definition in this library itself.
 * Taken as &malloc, an exported name would be looked up in the global
 * scope first, and a library loaded late (dwleak's injection) would get
 * libc's malloc back. */
#define WRAPPERS(X)                                                                                             \
	X(F_MALLOC, malloc) X(F_CALLOC, calloc) X(F_REALLOC, realloc) X(F_REALLOCARRAY, reallocarray)         \
	X(F_POSIX_MEMALIGN, posix_memalign) X(F_ALIGNED_ALLOC, aligned_alloc) X(F_MEMALIGN, memalign)         \
	X(F_VALLOC, valloc) X(F_PVALLOC, pvalloc) X(F_FREE, free) X(F_USABLE, malloc_usable_size)             \
	X(F_NEW, _Znwm) X(F_NEW_NT, _ZnwmRKSt9nothrow_t) X(F_NEWA, _Znam) X(F_NEWA_NT, _ZnamRKSt9nothrow_t)   \
	X(F_NEW_AL, _ZnwmSt11align_val_t) X(F_NEW_AL_NT, _ZnwmSt11align_val_tRKSt9nothrow_t)                 \
	X(F_NEWA_AL, _ZnamSt11align_val_t) X(F_NEWA_AL_NT, _ZnamSt11align_val_tRKSt9nothrow_t)               \
	X(F_DEL, _ZdlPv) X(F_DEL_SZ, _ZdlPvm) X(F_DEL_NT, _ZdlPvRKSt9nothrow_t)                              \
	X(F_DEL_AL, _ZdlPvSt11align_val_t) X(F_DEL_SZ_AL, _ZdlPvmSt11align_val_t)                            \
	X(F_DEL_AL_NT, _ZdlPvSt11align_val_tRKSt9nothrow_t) X(F_DELA, _ZdaPv) X(F_DELA_SZ, _ZdaPvm)          \
	X(F_DELA_NT, _ZdaPvRKSt9nothrow_t) X(F_DELA_AL, _ZdaPvSt11align_val_t)                               \
	X(F_DELA_SZ_AL, _ZdaPvmSt11align_val_t) X(F_DELA_AL_NT, _ZdaPvSt11align_val_tRKSt9nothrow_t)

#define WRAP_ALIAS(id, name) \
	extern __typeof__(name) wrap_##name __attribute__((alias(#name), visibility("hidden"), copy(name)));
WRAPPERS(WRAP_ALIAS)
#undef WRAP_ALIAS

#define WRAP_ENTRY(id, name) [id] = (const void *)wrap_##name,
#define WRAP_COUNT(id, name) +1
const void *const wrappers[F_COUNT] = { WRAPPERS(WRAP_ENTRY) };
_Static_assert(0 WRAPPERS(WRAP_COUNT) == F_COUNT, "a wrapper for every interposed function");
#undef WRAP_ENTRY
#undef WRAP_COUNT
