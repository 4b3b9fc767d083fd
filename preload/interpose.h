/* The preload library's parts, shared by its files (boot.c: resolution,
 * bootstrap arena, control block, sites' health; resolve.c: the
 * definitions after the library, found without dlsym; traced.c: sampling,
 * nesting, firing the sites; rings.c: the walk in the process, recorded
 * into rings instead; preload.c: the interposed functions).  Not
 * an API: everything here is hidden in the library. */
#ifndef DWLEAK_PRELOAD_INTERPOSE_H
#define DWLEAK_PRELOAD_INTERPOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc_kind.h"
#include "preload.h"
#include "ptrset.h"
#include "sample.h"
#include "sites.h"

/* Declarations name hidden symbols: reached without the GOT. */
#pragma GCC visibility push(hidden)

#define VISIBLE __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* dwleak_preload_control (boot.c) under a hidden name: the library's own
 * accesses go straight to it, not through the GOT an exported symbol
 * needs. */
extern struct dwleak_preload_control ctl;

#define CTL_LOAD(field) __atomic_load_n(&ctl.field, __ATOMIC_ACQUIRE)
#define CTL_COUNT(field) __atomic_fetch_add(&ctl.field, 1, __ATOMIC_RELAXED)

/* --- The functions interposed (bpf/abi/preload.h) --- */

#define FN_ENUM(id, sym, kind, cls) id,
enum fn_id { DWLEAK_PRELOAD_FUNCS(FN_ENUM) F_COUNT };
#undef FN_ENUM

struct fn_info {
	const char *sym;
	uint8_t kind;  /* enum alloc_kind */
	uint8_t cls;   /* enum dwleak_preload_class */
};

extern const struct fn_info fns[F_COUNT];

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

extern struct fn_next next[F_COUNT];

/* This library's own image, from its ELF header to the end of its code
 * (symbols the linker defines): a real function that tail-calls another
 * allocator function (libstdc++'s aligned operator new[] jumping to the
 * aligned operator new) reaches a wrapper with the return address into
 * the wrapper that called it. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char __etext[] __attribute__((visibility("hidden")));

#define NEXT(id, type) ((type)__atomic_load_n(&next[id].fn, __ATOMIC_RELAXED))


/* This library's own definition of each function (preload.c), for the
 * GOT slots route.c rewrites. */
extern const void *const wrappers[F_COUNT];

/* --- resolve.c: the definitions the functions forward to --- */

/* One function's definition: FN (an IFUNC already resolved), its size in
 * bytes from the symbol table (LEN, 0 when unknown), and whether the
 * object defining it is a C++ runtime (libstdc++, libc++), whose
 * operators only call malloc and free. */
struct next_def {
	void *fn;
	uintptr_t len;
	bool cxx_runtime;
};

/* The most functions one lookup takes (a set of them is a uint32_t). */
#define NEXT_DEFS_MAX 32

/*
 * Finds each function FN[F] (F < N <= NEXT_DEFS_MAX) whose bit is set in
 * WANT the way dlsym (RTLD_NEXT) would from this library, without calling
 * it: the first definition in the objects loaded after the library, in
 * link-map order (objects dlopen'ed since, RTLD_LOCAL ones too, come
 * last), else the first in those before it, never in the library itself
 * (the object holding __ehdr_start).  Fills OUT[F] for each found and
 * returns the set of those.  With LOADS, looks at nothing when the
 * loader's count of objects loaded so far (dlpi_adds) is *LOADS, and sets
 * *LOADS to the count it saw.  Allocates nothing and takes one lock, the
 * loader's list lock (through dl_iterate_phdr), which is recursive, and
 * which glibc (2.36) holds only to change the list: around no malloc
 * (dlclose calls free under it, and free never looks anything up).
 * Safe inside an allocation made anywhere, except in the child of a
 * multithreaded fork whose other thread held that lock (see
 * on_fork_prepare in boot.c).
 */
uint32_t next_defs_find(const struct fn_info *fn, int n, uint32_t want, struct next_def *out, uint64_t *loads);

/* --- boot.c: resolution and the bootstrap arena --- */

#define ARENA_SIZE (256u << 10)
#define ARENA_HDR 16u /* the size in front of each block; keeps 16-byte alignment */

extern unsigned char arena[ARENA_SIZE];

static inline bool in_arena(const void *p)
{
	return (uintptr_t)p - (uintptr_t)arena < ARENA_SIZE;
}

/* A block of SIZE bytes from the arena (zeroed: it is never reused),
 * aligned to ALIGN (a power of two, at most the page), or NULL with ENOMEM;
 * and the size of one. */
void *arena_alloc(size_t size, size_t align);
size_t arena_size_of(const void *p);

/* The function F forwards to, resolving first if need be; NULL for a C++
 * operator no loaded object defines, or while resolving (bootstrap).
 * Inline where it is resolved already: every traced call asks. */
void *next_of_slow(int f);

static inline void *next_of(int f)
{
	void *fn = __atomic_load_n(&next[f].fn, __ATOMIC_ACQUIRE);

	return likely(fn) ? fn : next_of_slow(f);
}

/* The same for a C++ operator, which must exist (else the program ends,
 * saying why). */
void *cxx_next(int f);

/* --- boot.c: whether the sites may fire (see there) --- */

extern volatile uint8_t *fork_token;
extern uint8_t fork_token_static;
extern uint32_t sites_seen_gen;

bool sites_check(uint32_t gen);

/* Set in the child of a fork (boot.c): there the loader's list lock may be
 * held by a thread that no longer exists (see on_fork_prepare), so no
 * routing pass walks the objects from inside an allocation. */
extern bool in_fork_child;

/* --- route.c: the process's allocator calls routed through the library
 * when it was loaded late (dwleak's injection) --- */

/* A pass over every loaded object, unless one is under way in another
 * thread: the GOT slots of the interposed functions (and of dlopen and
 * dlmopen) that lead to the definitions the library forwards to now lead
 * to its wrappers.  Publishes the pass's counts in the control block.
 * Allocates nothing and calls no function that allocates or takes a lock
 * but the loader's list lock (dl_iterate_phdr, recursive); safe inside an
 * allocation, except in a fork child (in_fork_child).  Returns 0, or
 * -EBUSY when another pass is under way. */
int route_all(void);

/* Called on the traced paths: honours a route request dwleak wrote in
 * the control block (objects loaded by glibc itself, without dlopen),
 * unless the call (returning to RA) comes from the dynamic linker itself. */
void route_requested(uintptr_t ra);

static inline void route_check(uintptr_t ra)
{
	if (unlikely(__atomic_load_n(&ctl.route_request, __ATOMIC_RELAXED) !=
		     __atomic_load_n(&ctl.route_done, __ATOMIC_RELAXED)))
		route_requested(ra);
}

static inline bool sites_usable(uint32_t gen)
{
	if (likely(*fork_token && fork_token_static && gen == sites_seen_gen))
		return !__atomic_load_n(&ctl.disabled, __ATOMIC_RELAXED);
	return sites_check(gen);
}

/* --- traced.c: sampling, nesting, the sites fired --- */

/* The calling thread's sampler.  Every thread-local variable of the
 * library is initial-exec (tests/preload_no_hang.sh checks that the
 * library imports no __tls_get_addr): an access is an offset from the
 * thread pointer, set up with the thread, whereas a dynamic-TLS access may call
 * __tls_get_addr, which allocates the thread's block on first use (malloc
 * inside malloc) and can take the loader's TLS lock.  The cost: the
 * block comes from the static TLS surplus glibc keeps for objects
 * dlopen'ed later (16 bytes here, of the 512+ reserved). */
extern __thread struct sampler thread_sampler __attribute__((tls_model("initial-exec")));

/* Calls of the allocator in progress on this thread while a tracer is
 * attached: dwleak's kernel program reads it (at the offset from the
 * thread pointer the control block's depth_tls gives) to tell the
 * memory the allocator maps for itself from the program's own. */
extern __thread uint32_t alloc_depth __attribute__((tls_model("initial-exec")));

/* CALL, an expression calling the allocator, counted in alloc_depth while
 * it runs; the value of CALL.  (The stores stay around the call: the
 * callee could read alloc_depth.) */
#define FORWARDED(call)                                    \
	({                                                 \
		alloc_depth++;                             \
		__typeof__(call) forwarded_ = (call);      \
		alloc_depth--;                             \
		forwarded_;                                \
	})
#define FORWARDED_VOID(call)    \
	do {                    \
		alloc_depth++;  \
		call;           \
		alloc_depth--;  \
	} while (0)
extern struct ptrset *set_levels[];

/*
 * One allocator call's decision, made before it runs: fire dwleak:alloc
 * for what it returns (sampled, when sampling; not nested; sites usable),
 * or record it into the rings (the same, the sites not needed).
 * SIZE is what it asks for; CFA the wrapper's canonical frame address
 * (the caller's stack pointer at its call, CALLER_SP gives the one the
 * walks start from), RA the return address into the caller.
 */
struct call {
	int f;
	uint64_t size;
	uintptr_t cfa;
	uintptr_t ra;
	uint32_t gen;
	bool sampling;
	bool drawn;	/* the wrapper drew already: sampled */
	bool fire;	/* call_fires' decisions: fire dwleak:alloc (or record it), */
	bool index;	/* put what it returns in the block index, */
	uint8_t walk;	/* and how: enum dwleak_preload_walk, NONE: the site */
};

/* Whether call C needs call_done after it runs: it fires (or is recorded
 * into the rings), or what it returns goes into the block index (decided
 * before it runs; fills C's GEN, SAMPLING, FIRE, INDEX and WALK). */
bool call_fires(struct call *c);

/* The call C returned P: into the index when C->INDEX; fire dwleak:alloc
 * when C->FIRE, or record it into the thread's ring when C->WALK (P is
 * remembered first when sampling; a block the set cannot hold is not
 * fired: its free could not be recognised). */
void call_done(const struct call *c, void *p);

/* P (not NULL) is released by a call of KIND (enum alloc_kind) that
 * returns into the caller at RA; HOW: enum dwleak_preload_free.
 * Takes it out of the block index, and fires dwleak:free (or records the
 * free into the thread's ring) when it should. */
void release(void *p, uintptr_t ra, uint64_t how, uint32_t kind);

/* --- rings.c: the walk in the process (bpf/abi/preload.h, rings_request) --- */

uint32_t rings_mode_slow(uint32_t request);

/* How a call that fires is delivered, enum dwleak_preload_walk: NONE, the
 * site (no rings requested, or the DWARF walk asked for and no image
 * installed yet); DWARF or FP, walked here and recorded into the calling
 * thread's ring.  Honours dwleak's image handover first when it asked for
 * one.  One relaxed load when no rings are requested. */
static inline uint32_t rings_mode(void)
{
	uint32_t request = __atomic_load_n(&ctl.rings_request, __ATOMIC_RELAXED);

	if (likely(request == DWLEAK_PRELOAD_WALK_NONE))
		return DWLEAK_PRELOAD_WALK_NONE;
	return rings_mode_slow(request);
}

/* Call C (C->WALK not NONE) returned P: its caller's stack walked and
 * recorded into the calling thread's ring (a failure counted in the
 * control block's ring_failed). */
void rings_alloc(const struct call *c, void *p);

/* P is about to be released by a call of KIND (HOW: enum
 * dwleak_preload_free): recorded (no frames) into the calling thread's
 * ring, MODE (DWARF or FP) as rings_mode said. */
void rings_free(void *p, uint32_t kind, uint64_t how, uint32_t mode);

/* Goes back to the sites for good, WHY (enum
 * dwleak_preload_rings_stopped) said in the rings' directory, once dwleak
 * has read what the rings hold (waits up to 200 ms for it while a tracer
 * listens).  Called before a seccomp filter goes in (seccomp_guard.c),
 * while the library's system calls are still allowed; outside any
 * allocation.  Only the first call does anything. */
void rings_stop(uint32_t why);

/* --- seccomp_guard.c: prctl and syscall, seen before a filter goes in --- */

/* The library's prctl and syscall (exported under those names, for
 * LD_PRELOAD; route.c leads the GOT slots of an injected process to
 * them): the same system calls as glibc's, rings_stop first when the
 * call installs a seccomp filter (PR_SET_SECCOMP, or the seccomp system
 * call's SECCOMP_SET_MODE_STRICT or _FILTER). */
int seccomp_guard_prctl(int option, ...);
long seccomp_guard_syscall(long nr, ...);

/* In a fork's child (boot.c's atfork handler): the handover, which a
 * thread of the parent may have been in, free again.  Stores only. */
void rings_fork_child(void);

/* The block index (bpf/abi/preload.h, index_request): every live block,
 * sampled or not, while dwleak asks for it. */
static inline bool index_on(void)
{
	return unlikely(__atomic_load_n(&ctl.index_request, __ATOMIC_RELAXED) != 0);
}

/* Block P of SIZE bytes into the index, and out of it (traced.c): for the
 * wrappers' own fast paths, calls known not to be nested. */
void index_insert(void *p, uint64_t size);
void index_remove(void *p);

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

/* In a wrapper: its canonical frame address, the caller's stack pointer
 * before its call instruction, and the return address into the caller
 * (x86_64: the word at CFA - 8; aarch64: x30 at the entry, which no stack
 * slot the caller knows holds: so both are passed down). */
#define CFA() ((uintptr_t)__builtin_dwarf_cfa())
#define RA() ((uintptr_t)__builtin_return_address(0))

/* The stack pointer a walk of the wrapper's caller starts from, as at the
 * entry of the function the wrapper forwards to: x86_64's holds the return
 * address (CFA - 8), aarch64's is the caller's own (bl pushes nothing). */
#if defined(__x86_64__)
#define CALLER_SP(cfa) ((cfa) - 8)
#elif defined(__aarch64__)
#define CALLER_SP(cfa) (cfa)
#else
#error "the preload library is built for x86_64 or aarch64"
#endif

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

#pragma GCC visibility pop

#endif
