/* libdwleak-preload.so: the malloc family and the C++ operators new and
 * delete, interposed with LD_PRELOAD, each call forwarded to the
 * definition that follows this library in the dynamic linker's lookup
 * order (glibc's, or tcmalloc's, jemalloc's, mimalloc's when preloaded
 * after it), with dwleak's two probe sites (sites.S) fired around it
 * while a tracer is attached.  Idle (both semaphores 0) a call costs a
 * load, a branch and an indirect jump.  Attached, dwleak's control block
 * (bpf/abi/preload.h) says whether every call fires or the library samples
 * (sample.h) and fires only sampled allocations and their frees, which it
 * recognises through a lock-free set (ptrset.h).  It never changes what
 * the program gets: the same pointers, errno, sizes and failures as
 * without it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc_kind.h"
#include "preload.h"
#include "ptrset.h"
#include "sample.h"
#include "sites.h"

#define VISIBLE __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* --- The control block dwleak writes (bpf/abi/preload.h) --- */

VISIBLE struct dwleak_preload_control dwleak_preload_control = {
	.magic = DWLEAK_PRELOAD_MAGIC,
	.version = DWLEAK_PRELOAD_VERSION,
};

/* The same object under a hidden name: the library's own accesses go
 * straight to it, not through the GOT an exported symbol would need. */
extern struct dwleak_preload_control ctl __attribute__((alias("dwleak_preload_control"), visibility("hidden")));

#define CTL_LOAD(field) __atomic_load_n(&ctl.field, __ATOMIC_ACQUIRE)
#define CTL_COUNT(field) __atomic_fetch_add(&ctl.field, 1, __ATOMIC_RELAXED)

/* --- The functions interposed (bpf/abi/preload.h) --- */

#define FN_ENUM(id, sym, kind, cls) id,
enum fn_id { DWLEAK_PRELOAD_FUNCS(FN_ENUM) F_COUNT };
#undef FN_ENUM

struct fn_info {
	const char *sym;
	uint8_t kind;  /* enum alloc_kind */
	uint8_t cls;   /* enum fn_class */
};

#define FN_INFO(id, sym, kind, cls) [id] = { sym, kind, cls },
static const struct fn_info fns[F_COUNT] = { DWLEAK_PRELOAD_FUNCS(FN_INFO) };
#undef FN_INFO

/*
 * What each function forwards to: NULL until resolved (and for a C++
 * operator no object defines yet: resolved again when called, since a
 * C++ library may be dlopen'ed later).  TRANSPARENT: a C++ operator that
 * only calls malloc or free (libstdc++'s, libc++'s), which then fire:
 * the same call seen once, as dwleak's uprobes see it (they probe malloc,
 * and the walk shows operator new as its caller).  Calls made from inside
 * a function that fires are nested (counted once): RANGE holds each such
 * function's code, [start, start + len).
 */
struct fn_next {
	void *fn;
	bool transparent;
	uintptr_t start, len;
};

static struct fn_next next[F_COUNT];

/* This library's own image, from its ELF header to the end of its code
 * (symbols the linker defines): a real function that tail-calls another
 * allocator function (libstdc++'s aligned operator new[] jumping to the
 * aligned operator new) reaches a wrapper with the return address into
 * the wrapper that called it. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char __etext[] __attribute__((visibility("hidden")));

#define NEXT(id, type) ((type)__atomic_load_n(&next[id].fn, __ATOMIC_RELAXED))

/* --- Bootstrap: allocations made before the functions are resolved ---
 * dlsym itself allocates (glibc's dlerror state: calloc), and the dynamic
 * linker calls malloc before any constructor runs.  Those calls, and any
 * other thread's while the first one resolves, are served from a static
 * arena and never reach the real allocator: free() recognises its blocks
 * by address and ignores them; realloc() moves them out; each block has
 * its size in front of it for malloc_usable_size(). */

#define ARENA_SIZE (256u << 10)
#define ARENA_HDR 16u /* the size in front of each block; keeps 16-byte alignment */

static _Alignas(64) unsigned char arena[ARENA_SIZE];
static size_t arena_used;

enum { BOOT_NONE, BOOT_RESOLVING, BOOT_DONE };
static int boot_state;

static inline bool in_arena(const void *p)
{
	return (uintptr_t)p - (uintptr_t)arena < ARENA_SIZE;
}

/* A block of SIZE bytes (zeroed: the arena is never reused), aligned to
 * ALIGN (a power of two, at most 4096), or NULL with ENOMEM. */
static void *arena_alloc(size_t size, size_t align)
{
	size_t old = __atomic_load_n(&arena_used, __ATOMIC_RELAXED), start, end;

	if (align < ARENA_HDR)
		align = ARENA_HDR;
	do {
		start = (old + ARENA_HDR + align - 1) & ~(align - 1);
		if (align > 4096 || size > ARENA_SIZE || start > ARENA_SIZE - size) {
			errno = ENOMEM;
			return NULL;
		}
		end = start + size;
	} while (!__atomic_compare_exchange_n(&arena_used, &old, end, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	memcpy(arena + start - ARENA_HDR, &size, sizeof(size));
	return arena + start;
}

static size_t arena_size_of(const void *p)
{
	size_t size;

	memcpy(&size, (const unsigned char *)p - ARENA_HDR, sizeof(size));
	return size;
}

/* A message on stderr and abort(): only when the program cannot go on (no
 * allocator to forward to).  write(2), not stdio: no allocation. */
static void die(const char *what, const char *sym)
{
	static const char pre[] = "libdwleak-preload: ";
	ssize_t r = write(2, pre, sizeof(pre) - 1);

	r += write(2, what, strlen(what));
	r += write(2, sym, strlen(sym));
	r += write(2, "\n", 1);
	(void)r;
	abort();
}

static bool base_is(const char *path, const char *prefix)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	b = b ? b + 1 : path;
	return b && !strncmp(b, prefix, strlen(prefix));
}

/* Looks F up in the objects after this one and records what it is;
 * publishes it for the wrappers when PUBLISH.  Returns the function or
 * NULL. */
static void *resolve_one(int f, bool publish)
{
	const ElfW(Sym) *sym = NULL;
	Dl_info info;
	void *fn = dlsym(RTLD_NEXT, fns[f].sym);

	if (!fn)
		return NULL;
	if (dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
		next[f].start = (uintptr_t)fn;
		__atomic_store_n(&next[f].len, (uintptr_t)sym->st_size, __ATOMIC_RELAXED);
	}
	next[f].transparent = (fns[f].cls == PL_CXX_NEW || fns[f].cls == PL_CXX_DELETE) &&
			      (base_is(info.dli_fname, "libstdc++.so") || base_is(info.dli_fname, "libc++.so"));
	if (next[f].transparent || fns[f].cls == PL_C_QUERY)
		__atomic_store_n(&next[f].len, 0, __ATOMIC_RELAXED); /* not a function that fires */
	if (publish)
		__atomic_store_n(&next[f].fn, fn, __ATOMIC_RELEASE);
	return fn;
}

static void fork_token_setup(void);

/*
 * Resolves every function, once.  Nothing is published before the end,
 * so that whatever dlsym allocates meanwhile (glibc's error state for a
 * C++ operator a C program has none of) comes from the arena, not from
 * the allocator dwleak traces; and the error state is cleared, so the
 * program's first dlerror() still says nothing went wrong.  Returns true
 * when the functions are resolved (false: this call came while another
 * one resolves, or from inside the resolution).
 */
static bool boot(void)
{
	int expect = BOOT_NONE, saved = errno, f;
	void *fn[F_COUNT];

	if (likely(__atomic_load_n(&boot_state, __ATOMIC_ACQUIRE) == BOOT_DONE))
		return true;
	if (!__atomic_compare_exchange_n(&boot_state, &expect, BOOT_RESOLVING, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return expect == BOOT_DONE;
	for (f = 0; f < F_COUNT; f++) {
		fn[f] = resolve_one(f, false);
		if (!fn[f] && fns[f].cls != PL_CXX_NEW && fns[f].cls != PL_CXX_NEW_ALIGNED &&
		    fns[f].cls != PL_CXX_DELETE)
			die("no definition to forward to after this library: ", fns[f].sym);
	}
	dlerror();
	fork_token_setup();
	for (f = 0; f < F_COUNT; f++)
		__atomic_store_n(&next[f].fn, fn[f], __ATOMIC_RELEASE);
	__atomic_store_n(&boot_state, BOOT_DONE, __ATOMIC_RELEASE);
	errno = saved;
	return true;
}

/* The function F forwards to, resolving first if need be; NULL for a C++
 * operator no loaded object defines, or while resolving (bootstrap). */
static inline void *next_of(int f)
{
	void *fn = __atomic_load_n(&next[f].fn, __ATOMIC_ACQUIRE);

	if (likely(fn))
		return fn;
	if (!boot())
		return NULL;
	fn = __atomic_load_n(&next[f].fn, __ATOMIC_ACQUIRE);
	if (!fn && fns[f].cls != PL_C_ALLOC && fns[f].cls != PL_C_FREE && fns[f].cls != PL_C_QUERY) {
		int saved = errno;

		fn = resolve_one(f, true); /* a C++ library dlopen'ed since */
		errno = saved;
	}
	return fn;
}

/* The C++ operators' forward, for calls made before any C++ library is
 * loaded: there is nothing that could serve them. */
static void *cxx_next(int f)
{
	void *fn = next_of(f);

	if (!fn)
		die("no C++ library defines ", fns[f].sym);
	return fn;
}

/* --- Sites: when they may fire --- */

/*
 * A fork copies the process's code pages as they are, sites included: a
 * site the kernel turned into `call [uprobes-trampoline]` calls, in the
 * child, a page that fork did not copy (the trampoline is VM_DONTCOPY),
 * and the child dies of SIGSEGV at its first call of it (seen on Linux
 * 6.18).  A tracer that follows the child attaches to it before it runs
 * (the kernel then puts a breakpoint over the stale call), and one that
 * does not leaves the copied semaphores counting.  So the first firing in
 * a new process (a page that reads 0 again after fork: MADV_WIPEONFORK,
 * and pthread_atfork for forks made without it) and the first after a
 * tracer attached (control.generation moved) check the sites: one that
 * calls into no mapping turns them off (control.disabled) until a tracer
 * attaches anew.
 */
static uint8_t fork_token_static;
static volatile uint8_t *fork_token = &fork_token_static;
static uint32_t sites_seen_gen;

static void fork_token_setup(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	if (madvise(p, 4096, MADV_WIPEONFORK)) {
		munmap(p, 4096);
		return;
	}
	fork_token = p;
}

static void on_fork_child(void)
{
	*fork_token = 0;
	fork_token_static = 0;
}

/* Whether the call at CODE (a site) is stale: `call rel32` into no mapping. */
static bool site_stale(const volatile uint8_t *code)
{
	uintptr_t target;
	unsigned char v;
	int32_t rel;

	if (code[0] != 0xe8)
		return false;
	memcpy(&rel, (const uint8_t *)code + 1, sizeof(rel));
	if (code[0] != 0xe8) /* being rewritten: the kernel writes the opcode last */
		return false;
	target = (uintptr_t)code + 5 + (intptr_t)rel;
	return mincore((void *)(target & ~(uintptr_t)4095), 4096, &v) && errno == ENOMEM;
}

static __attribute__((noinline)) bool sites_check(uint32_t gen)
{
	int saved = errno;
	uint32_t off = site_stale((const volatile uint8_t *)(uintptr_t)dwleak_site_alloc) ||
				       site_stale((const volatile uint8_t *)(uintptr_t)dwleak_site_free)
			       ? DWLEAK_PRELOAD_STALE_SITE
			       : DWLEAK_PRELOAD_ENABLED;

	__atomic_store_n(&ctl.disabled, off, __ATOMIC_RELAXED);
	sites_seen_gen = gen;
	*fork_token = 1;
	fork_token_static = 1;
	errno = saved;
	return !off;
}

static inline bool sites_usable(uint32_t gen)
{
	if (likely(*fork_token && fork_token_static && gen == sites_seen_gen))
		return !__atomic_load_n(&ctl.disabled, __ATOMIC_RELAXED);
	return sites_check(gen);
}

/* Whether a call that returns to RA runs inside another allocator call:
 * from inside a function that fires, or (a tail call) from this library. */
static bool nested(uintptr_t ra)
{
	int f;

	if (ra - (uintptr_t)__ehdr_start < (uintptr_t)(__etext - __ehdr_start))
		return true;
	for (f = 0; f < F_COUNT; f++)
		if (ra - next[f].start < __atomic_load_n(&next[f].len, __ATOMIC_RELAXED))
			return true;
	return false;
}

/* --- Sampling: the per-thread sampler and the set of sampled blocks --- */

static __thread struct sampler thread_sampler __attribute__((tls_model("initial-exec")));

/*
 * The sampled blocks: levels of tables, each twice the size of the one
 * before, sharing one filter, so that the set has no fixed size: an
 * insert that finds no free slot near its home in one level goes to the
 * next, mapped on first use (lock-free: a thread that loses the race
 * unmaps its copy).  Only a level that cannot be mapped loses a sample,
 * which is counted (control.set_full).  Level 0: 2^17 slots, 1 MiB.
 */
#define SET_BITS 17
#define SET_LEVELS 16

static struct ptrset *set_levels[SET_LEVELS];
static uint32_t *set_filter;

static void *map_zeroed(size_t len)
{
	int saved = errno;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	errno = saved;
	return m == MAP_FAILED ? NULL : m;
}

/* Sets *SLOT to a new mapping of LEN bytes, unless another thread did
 * first.  Returns what *SLOT holds, NULL when mapping failed. */
static void *map_once(void **slot, size_t len)
{
	void *m = __atomic_load_n(slot, __ATOMIC_ACQUIRE), *want = NULL;

	if (m)
		return m;
	m = map_zeroed(len);
	if (m && !__atomic_compare_exchange_n(slot, &want, m, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		munmap(m, len);
		m = want;
	}
	return m;
}

/* Level I, mapped now if need be; NULL when it cannot be. */
static struct ptrset *set_level(int i)
{
	struct ptrset *s = __atomic_load_n(&set_levels[i], __ATOMIC_ACQUIRE), *want = NULL;
	size_t len = 4096 + (sizeof(uint64_t) << (SET_BITS + i));
	uint32_t *filter;

	if (likely(s))
		return s;
	filter = map_once((void **)&set_filter, sizeof(uint32_t) << PTRSET_FILTER_BITS);
	s = filter ? map_zeroed(len) : NULL;
	if (!s)
		return NULL;
	ptrset_init(s, (uint64_t *)((char *)s + 4096), SET_BITS + (uint32_t)i, filter);
	if (!__atomic_compare_exchange_n(&set_levels[i], &want, s, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		munmap(s, len);
		s = want;
	}
	return s;
}

/* Remembers sampled block P of session TAG.  Returns 0, or -1 when no
 * level could take it (counted). */
static int set_insert(uintptr_t p, uint16_t tag)
{
	struct ptrset *s;
	int i;

	for (i = 0; i < SET_LEVELS && (s = set_level(i)); i++)
		if (!ptrset_insert(s, p, tag))
			return 0;
	CTL_COUNT(set_full);
	return -1;
}

/* Forgets P of session TAG.  Returns true when it was sampled. */
static bool set_take(uintptr_t p, uint16_t tag)
{
	struct ptrset *s = __atomic_load_n(&set_levels[0], __ATOMIC_ACQUIRE);
	int i;

	if (!s || !ptrset_maybe(s, p, tag))
		return false;
	for (i = 0; i < SET_LEVELS && (s = __atomic_load_n(&set_levels[i], __ATOMIC_ACQUIRE)); i++)
		if (ptrset_take(s, p, tag))
			return true;
	return false;
}

/* --- The traced paths --- */

/*
 * One allocator call's decision, made before it runs: fire dwleak:alloc
 * for what it returns (sampled, when sampling; not nested; sites usable).
 * SIZE is what it asks for; CFA the wrapper's canonical frame address:
 * the caller's return address is just below it.
 */
struct call {
	int f;
	uint64_t size;
	uintptr_t cfa;
	uint32_t gen;
	bool sampling;
	bool drawn;	/* the wrapper drew already: sampled */
};

static inline bool call_fires(struct call *c)
{
	uint64_t n = __atomic_load_n(&ctl.sample_bytes, __ATOMIC_RELAXED);

	c->gen = CTL_LOAD(generation);
	c->sampling = n != 0;
	if (n && !c->drawn && !sampler_take(&thread_sampler, c->size, n, 0))
		return false;
	if (nested(*(const uintptr_t *)(c->cfa - 8))) {
		CTL_COUNT(nested);
		return false;
	}
	return sites_usable(c->gen);
}

/* The call C returned P: fire dwleak:alloc (P is remembered first when
 * sampling; a block the set cannot hold is not fired: its free could not
 * be recognised). */
static void call_done(const struct call *c, void *p)
{
	if (!p || (c->sampling && set_insert((uintptr_t)p, (uint16_t)c->gen)))
		return;
	dwleak_site_alloc(p, c->size, fns[c->f].kind, next[c->f].fn, c->cfa - 8);
}

/* P (not NULL) is released by a call that returns into the caller at
 * CFA - 8; HOW: enum dwleak_preload_free.  Fires dwleak:free when it
 * should. */
static void release(void *p, uintptr_t cfa, uint64_t how)
{
	uint32_t gen = CTL_LOAD(generation);

	if (__atomic_load_n(&ctl.sample_bytes, __ATOMIC_RELAXED) &&
	    !set_take((uintptr_t)p, (uint16_t)gen))
		return;
	if (nested(*(const uintptr_t *)(cfa - 8))) {
		CTL_COUNT(nested);
		return;
	}
	if (sites_usable(gen))
		dwleak_site_free(p, how);
}

static inline bool alloc_on(void)
{
	return unlikely(dwleak_alloc_semaphore != 0);
}

/* Sampling, and an allocation of SIZE bytes is not sampled: the common
 * case while a tracer samples, kept in the wrapper itself.  (A call taken
 * here may be nested: it is forwarded like one.) */
static inline bool unsampled(uint64_t size)
{
	uint64_t n = __atomic_load_n(&ctl.sample_bytes, __ATOMIC_RELAXED);

	return n && !sampler_take(&thread_sampler, size, n, 0);
}

/* Sampling, and P is certainly no sampled block: the common free. */
static inline bool unsampled_block(const void *p)
{
	struct ptrset *s;

	if (!__atomic_load_n(&ctl.sample_bytes, __ATOMIC_RELAXED))
		return false;
	s = __atomic_load_n(&set_levels[0], __ATOMIC_ACQUIRE);
	return !s || !ptrset_maybe(s, (uintptr_t)p, (uint16_t)CTL_LOAD(generation));
}

static inline bool free_on(void)
{
	return unlikely(dwleak_free_semaphore != 0);
}

#define CFA() ((uintptr_t)__builtin_dwarf_cfa())

/*
 * While a tracer is attached, the real function is called, never jumped
 * to: a call it makes of another allocator function through the PLT
 * (glibc's reallocarray jumps to realloc@plt, libstdc++'s aligned new
 * calls aligned_alloc) then returns into this library or into the real
 * function, and is known as nested.  Jumped to, it would look like the
 * program's own call and be sampled a second time.  KEPT(x) after the
 * call keeps the compiler from turning it into a tail jump.
 */
#define KEPT(x) __asm__ volatile("" : : "g"(x) : "memory")

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef void (*free_fn)(void *);
typedef size_t (*usable_fn)(void *);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_al_nt_fn)(size_t, size_t, const void *);
typedef void (*del_sz_fn)(void *, size_t);
typedef void (*del_nt_fn)(void *, const void *);
typedef void (*del_sz_al_fn)(void *, size_t, size_t);
typedef void (*del_al_nt_fn)(void *, size_t, const void *);

static inline uint64_t mul_sat(size_t a, size_t b)
{
	size_t r;

	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

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
static __attribute__((noinline)) void *malloc_slow(size_t n, uintptr_t cfa, bool drawn)
{
	malloc_fn fn = next_of(F_MALLOC);
	struct call c = { F_MALLOC, n, cfa, 0, false, drawn };
	bool fire;
	void *p;


	if (!fn)
		return boot_alloc(F_MALLOC, n, 16, false);
	fire = alloc_on() && call_fires(&c);
	p = fn(n);
	KEPT(p);
	if (fire)
		call_done(&c, p);
	return p;
}

/* Traced: a call not sampled costs a subtraction and a call here; out of
 * line, so that the idle wrapper needs no frame. */
static __attribute__((noinline)) void *malloc_on(size_t n, uintptr_t cfa)
{
	malloc_fn fn = NEXT(F_MALLOC, malloc_fn);
	void *p;

	if (fn && unsampled(n)) {
		p = fn(n);
		KEPT(p);
		return p;
	}
	return malloc_slow(n, cfa, fn != NULL);
}

VISIBLE void *malloc(size_t n)
{
	malloc_fn fn = NEXT(F_MALLOC, malloc_fn);

	if (likely(fn && !alloc_on()))
		return fn(n);
	return malloc_on(n, CFA());
}

static __attribute__((noinline)) void *calloc_slow(size_t a, size_t b, uintptr_t cfa)
{
	calloc_fn fn = next_of(F_CALLOC);
	struct call c = { F_CALLOC, mul_sat(a, b), cfa, 0, false, false };
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
	p = fn(a, b);
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
	return calloc_slow(a, b, CFA());
}

/* realloc of a bootstrap block: moved into the real allocator (or the
 * arena while still resolving); the old block is left where it is. */
static void *arena_realloc(void *old, size_t n, uintptr_t cfa)
{
	size_t have = arena_size_of(old);
	void *p = n ? malloc_slow(n, cfa, false) : NULL;

	if (p)
		memcpy(p, old, have < n ? have : n);
	return p;
}

static __attribute__((noinline)) void *realloc_slow(void *old, size_t n, uintptr_t cfa, int f, size_t count)
{
	struct call c = { f, f == F_REALLOCARRAY ? mul_sat(count, n) : n, cfa, 0, false, false };
	void *fn = next_of(f), *p;
	bool fire;

	if (old && in_arena(old)) {
		if (c.size == UINT64_MAX) {
			errno = ENOMEM;
			return NULL;
		}
		return arena_realloc(old, c.size, cfa);
	}
	if (!fn)
		return old ? NULL : boot_alloc(f, c.size == UINT64_MAX ? SIZE_MAX : c.size, 16, false);
	/* the old block is given up before the call, when no other thread can
	 * have it yet; if realloc then fails, it stays forgotten (as with
	 * dwleak's uprobes: counted as a failed allocation) */
	if (old && free_on())
		release(old, cfa, DWLEAK_PRELOAD_REALLOC_FREE);
	fire = alloc_on() && call_fires(&c);
	p = f == F_REALLOCARRAY ? ((reallocarray_fn)fn)(old, count, n) : ((realloc_fn)fn)(old, n);
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
	return realloc_slow(old, n, CFA(), F_REALLOC, 0);
}

VISIBLE void *reallocarray(void *old, size_t count, size_t n)
{
	reallocarray_fn fn = NEXT(F_REALLOCARRAY, reallocarray_fn);

	if (likely(fn && !alloc_on() && !free_on() && !in_arena(old)))
		return fn(old, count, n);
	return realloc_slow(old, n, CFA(), F_REALLOCARRAY, count);
}

static __attribute__((noinline)) int posix_memalign_slow(void **out, size_t align, size_t n, uintptr_t cfa)
{
	posix_memalign_fn fn = next_of(F_POSIX_MEMALIGN);
	struct call c = { F_POSIX_MEMALIGN, n, cfa, 0, false, false };
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
	r = fn(out, align, n);
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
	return posix_memalign_slow(out, align, n, CFA());
}

/* aligned_alloc, memalign (alignment, size), valloc, pvalloc (size). */
static __attribute__((noinline)) void *align_slow(int f, size_t align, size_t n, uintptr_t cfa)
{
	void *fn = next_of(f), *p;
	struct call c = { f, n, cfa, 0, false, false };
	bool two = f == F_ALIGNED_ALLOC || f == F_MEMALIGN;

	bool fire;

	if (!fn)
		return boot_alloc(f, n, two ? align : 4096, false);
	fire = alloc_on() && call_fires(&c);
	p = two ? ((memalign_fn)fn)(align, n) : ((malloc_fn)fn)(n);
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
	return align_slow(F_ALIGNED_ALLOC, align, n, CFA());
}

VISIBLE void *memalign(size_t align, size_t n)
{
	memalign_fn fn = NEXT(F_MEMALIGN, memalign_fn);

	if (likely(fn && !alloc_on()))
		return fn(align, n);
	return align_slow(F_MEMALIGN, align, n, CFA());
}

VISIBLE void *valloc(size_t n)
{
	malloc_fn fn = NEXT(F_VALLOC, malloc_fn);

	if (likely(fn && !alloc_on()))
		return fn(n);
	return align_slow(F_VALLOC, 4096, n, CFA());
}

VISIBLE void *pvalloc(size_t n)
{
	malloc_fn fn = NEXT(F_PVALLOC, malloc_fn);

	if (likely(fn && !alloc_on()))
		return fn(n);
	return align_slow(F_PVALLOC, 4096, n, CFA());
}

static __attribute__((noinline)) void free_slow(void *p, uintptr_t cfa)
{
	free_fn fn;

	if (!p || in_arena(p))
		return;
	fn = next_of(F_FREE);
	if (!fn)
		return; /* cannot happen: only the arena serves before resolution */
	if (free_on())
		release(p, cfa, DWLEAK_PRELOAD_FREE);
	fn(p);
}

static __attribute__((noinline)) void free_on_(void *p, uintptr_t cfa)
{
	free_fn fn = NEXT(F_FREE, free_fn);

	if (fn && p && !in_arena(p) && unsampled_block(p))
		return fn(p);
	free_slow(p, cfa);
}

VISIBLE void free(void *p)
{
	free_fn fn = NEXT(F_FREE, free_fn);

	if (likely(fn && !free_on() && !in_arena(p)))
		return fn(p);
	free_on_(p, CFA());
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
static __attribute__((noinline)) void *new_slow(int f, size_t n, size_t align, const void *nt, uintptr_t cfa)
{
	void *fn = cxx_next(f), *p;
	struct call c = { f, n, cfa, 0, false, false };
	bool fire = alloc_on() && !next[f].transparent && call_fires(&c);

	switch (f) {
	case F_NEW:
	case F_NEWA:
		p = ((malloc_fn)fn)(n);
		break;
	case F_NEW_NT:
	case F_NEWA_NT:
		p = ((new_nt_fn)fn)(n, nt);
		break;
	case F_NEW_AL:
	case F_NEWA_AL:
		p = ((new_al_fn)fn)(n, align);
		break;
	default:
		p = ((new_al_nt_fn)fn)(n, align, nt);
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
		return new_slow(f, n, 0, NULL, CFA());                                          \
	}
#define NEW_NT(name, f)                                                                         \
	VISIBLE void *name(size_t n, const void *nt)                                            \
	{                                                                                       \
		new_nt_fn fn = NEXT(f, new_nt_fn);                                              \
		if (likely(fn && (!alloc_on() || next[f].transparent)))                         \
			return fn(n, nt);                                                       \
		return new_slow(f, n, 0, nt, CFA());                                            \
	}
#define NEW_AL(name, f)                                                                         \
	VISIBLE void *name(size_t n, size_t al)                                                 \
	{                                                                                       \
		new_al_fn fn = NEXT(f, new_al_fn);                                              \
		if (likely(fn && !alloc_on()))                                                  \
			return fn(n, al);                                                       \
		return new_slow(f, n, al, NULL, CFA());                                         \
	}
#define NEW_AL_NT(name, f)                                                                      \
	VISIBLE void *name(size_t n, size_t al, const void *nt)                                 \
	{                                                                                       \
		new_al_nt_fn fn = NEXT(f, new_al_nt_fn);                                        \
		if (likely(fn && !alloc_on()))                                                  \
			return fn(n, al, nt);                                                   \
		return new_slow(f, n, al, nt, CFA());                                           \
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
						  uintptr_t cfa)
{
	void *fn = cxx_next(f);

	if (p && !next[f].transparent && free_on())
		release(p, cfa, DWLEAK_PRELOAD_FREE);
	switch (f) {
	case F_DEL:
	case F_DELA:
		((free_fn)fn)(p);
		break;
	case F_DEL_SZ:
	case F_DELA_SZ:
	case F_DEL_AL:
	case F_DELA_AL:
		((del_sz_fn)fn)(p, f == F_DEL_SZ || f == F_DELA_SZ ? sz : al);
		break;
	case F_DEL_NT:
	case F_DELA_NT:
		((del_nt_fn)fn)(p, nt);
		break;
	case F_DEL_SZ_AL:
	case F_DELA_SZ_AL:
		((del_sz_al_fn)fn)(p, sz, al);
		break;
	default:
		((del_al_nt_fn)fn)(p, al, nt);
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
		delete_slow(f, p, 0, 0, NULL, CFA());                                           \
	}
#define DEL_2(name, f, a2)                                                                      \
	VISIBLE void name(void *p, size_t x)                                                    \
	{                                                                                       \
		del_sz_fn fn = NEXT(f, del_sz_fn);                                              \
		if (likely(DEL_IDLE(f)))                                                        \
			return fn(p, x);                                                        \
		delete_slow(f, p, a2 ? 0 : x, a2 ? x : 0, NULL, CFA());                          \
	}
#define DEL_NT(name, f)                                                                         \
	VISIBLE void name(void *p, const void *nt)                                              \
	{                                                                                       \
		del_nt_fn fn = NEXT(f, del_nt_fn);                                              \
		if (likely(DEL_IDLE(f)))                                                        \
			return fn(p, nt);                                                       \
		delete_slow(f, p, 0, 0, nt, CFA());                                             \
	}
#define DEL_SZ_AL(name, f)                                                                      \
	VISIBLE void name(void *p, size_t sz, size_t al)                                        \
	{                                                                                       \
		del_sz_al_fn fn = NEXT(f, del_sz_al_fn);                                        \
		if (likely(DEL_IDLE(f)))                                                        \
			return fn(p, sz, al);                                                   \
		delete_slow(f, p, sz, al, NULL, CFA());                                         \
	}
#define DEL_AL_NT(name, f)                                                                      \
	VISIBLE void name(void *p, size_t al, const void *nt)                                   \
	{                                                                                       \
		del_al_nt_fn fn = NEXT(f, del_al_nt_fn);                                        \
		if (likely(DEL_IDLE(f)))                                                        \
			return fn(p, al, nt);                                                   \
		delete_slow(f, p, 0, al, nt, CFA());                                            \
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

/* Resolves at load if nothing called malloc yet, and learns of forks made
 * without MADV_WIPEONFORK's help. */
__attribute__((constructor)) static void preload_init(void)
{
	boot();
	pthread_atfork(NULL, NULL, on_fork_child);
}
