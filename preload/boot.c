/* The preload library's start: every interposed function resolved to
 * the definition after the library (once, in the first allocation, with
 * a static arena serving the calls other threads make meanwhile), the
 * control block dwleak writes, and whether the sites may fire in this
 * process (a fork may have copied them stale). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "constants.h"
#include "interpose.h"
#include "walk_ring.h"

/* --- The control block dwleak writes (bpf/abi/preload.h) --- */

VISIBLE struct dwleak_preload_control dwleak_preload_control = {
	.magic = DWLEAK_PRELOAD_MAGIC,
	.version = DWLEAK_PRELOAD_VERSION,
};

extern struct dwleak_preload_control ctl __attribute__((alias("dwleak_preload_control")));

#define FN_INFO(id, sym, kind, cls) [id] = { sym, kind, cls },
const struct fn_info fns[F_COUNT] = { DWLEAK_PRELOAD_FUNCS(FN_INFO) };
#undef FN_INFO

struct fn_next next[F_COUNT];

/* --- Bootstrap: allocations made before the functions are resolved ---
 * The first allocation resolves them all (boot), wherever the program
 * makes it; resolving allocates nothing itself (resolve.c), but calls
 * other threads make meanwhile, and a signal handler's in the thread
 * that resolves, cannot wait for it: they are served from a static arena
 * and never reach the real allocator: free() recognises its blocks by
 * address and ignores them; realloc() moves them out; each block has its
 * size in front of it for malloc_usable_size(). */

_Alignas(64) unsigned char arena[ARENA_SIZE];
static size_t arena_used;

enum { BOOT_NONE, BOOT_RESOLVING, BOOT_DONE };
static int boot_state;

void *arena_alloc(size_t size, size_t align)
{
	size_t old = __atomic_load_n(&arena_used, __ATOMIC_RELAXED), start, end;

	if (align < ARENA_HDR)
		align = ARENA_HDR;
	do {
		start = (old + ARENA_HDR + align - 1) & ~(align - 1);
		if (align > DWLEAK_PAGE_SIZE || size > ARENA_SIZE || start > ARENA_SIZE - size) {
			errno = ENOMEM;
			return NULL;
		}
		end = start + size;
	} while (!__atomic_compare_exchange_n(&arena_used, &old, end, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	memcpy(arena + start - ARENA_HDR, &size, sizeof(size));
	return arena + start;
}

size_t arena_size_of(const void *p)
{
	size_t size;

	memcpy(&size, (const unsigned char *)p - ARENA_HDR, sizeof(size));
	return size;
}

/* A message on stderr and abort(): only when the program cannot go on (no
 * allocator to forward to).  write(2), not stdio: no allocation, no lock;
 * abort() takes none this library could hold. */
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

static bool is_cxx_operator(int f)
{
	return fns[f].cls == PL_CXX_NEW || fns[f].cls == PL_CXX_NEW_ALIGNED || fns[f].cls == PL_CXX_DELETE;
}

/* Records DEF as what F forwards to; publishes it for the wrappers when
 * PUBLISH. */
static void next_set(int f, const struct next_def *def, bool publish)
{
	next[f].start = (uintptr_t)def->fn;
	__atomic_store_n(&next[f].len, def->len, __ATOMIC_RELAXED);
	next[f].transparent = (fns[f].cls == PL_CXX_NEW || fns[f].cls == PL_CXX_DELETE) && def->cxx_runtime;
	if (next[f].transparent || fns[f].cls == PL_C_QUERY)
		__atomic_store_n(&next[f].len, 0, __ATOMIC_RELAXED); /* not a function that fires */
	if (publish)
		__atomic_store_n(&next[f].fn, def->fn, __ATOMIC_RELEASE);
}

/* The loader's count of loads at the last look for definitions (boot's
 * is the first). */
static uint64_t loads_seen = UINT64_MAX;

/*
 * Looks again for every C++ operator no object defined yet (a C++
 * runtime may have been loaded since: a library dlopen'ed RTLD_LOCAL
 * brings its own, which RTLD_NEXT would not see, while its calls of the
 * operators still reach the wrappers here, first in the global scope),
 * and publishes those found.  Every look is for all of them, so that
 * when the loader has loaded nothing since the last one (its count of
 * loads, dlpi_adds, is the same), there is nothing new to find, and
 * next_defs_find stops at the first object.
 */
static void resolve_missing(void)
{
	struct next_def def[F_COUNT];
	uint32_t missing = 0, got;
	uint64_t loads = __atomic_load_n(&loads_seen, __ATOMIC_RELAXED);
	int saved = errno, f;

	for (f = 0; f < F_COUNT; f++)
		if (is_cxx_operator(f) && !__atomic_load_n(&next[f].fn, __ATOMIC_ACQUIRE))
			missing |= 1u << f;
	if (!missing)
		return;
	got = next_defs_find(fns, F_COUNT, missing, def, &loads);
	__atomic_store_n(&loads_seen, loads, __ATOMIC_RELAXED);
	for (f = 0; f < F_COUNT; f++)
		if (got & (1u << f))
			next_set(f, &def[f], true);
	errno = saved;
}

static void fork_token_setup(void);

/* Says in the control block where this library counts allocator calls in
 * progress (alloc_depth): its offset from the thread pointer, which
 * initial-exec TLS keeps the same in every thread.  Before the first call
 * is forwarded, so that the allocator's first memory syscall is known. */
static void depth_tls_publish(void)
{
	uintptr_t tp;

#if defined(__x86_64__)
	__asm__("mov %%fs:0, %0" : "=r"(tp)); /* the TCB's pointer to itself */
#else
	__asm__("mrs %0, tpidr_el0" : "=r"(tp)); /* the TCB's address (the kernel's tp_value) */
#endif
	__atomic_store_n(&ctl.depth_tls, (int32_t)((uintptr_t)&alloc_depth - tp), __ATOMIC_RELAXED);
}

/*
 * Resolves every function, once.  Nothing is published before the end:
 * a wrapper that finds its function published finds every other one
 * (and the fork token) set up.
 * Returns true when the functions are resolved (false: this call came
 * while another one resolves, in another thread or in a signal handler
 * that interrupted it).
 */
static bool boot(void)
{
	int expect = BOOT_NONE, saved = errno, f;
	struct next_def def[F_COUNT];
	uint64_t loads = UINT64_MAX;
	uint32_t got;

	if (likely(__atomic_load_n(&boot_state, __ATOMIC_ACQUIRE) == BOOT_DONE))
		return true;
	if (!__atomic_compare_exchange_n(&boot_state, &expect, BOOT_RESOLVING, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return expect == BOOT_DONE;
	got = next_defs_find(fns, F_COUNT, UINT32_MAX, def, &loads);
	__atomic_store_n(&loads_seen, loads, __ATOMIC_RELAXED);
	for (f = 0; f < F_COUNT; f++) {
		if (got & (1u << f))
			next_set(f, &def[f], false);
		else if (!is_cxx_operator(f))
			die("no definition to forward to after this library: ", fns[f].sym);
	}
	fork_token_setup();
	depth_tls_publish();
	for (f = 0; f < F_COUNT; f++)
		if (got & (1u << f))
			__atomic_store_n(&next[f].fn, def[f].fn, __ATOMIC_RELEASE);
	__atomic_store_n(&boot_state, BOOT_DONE, __ATOMIC_RELEASE);
	errno = saved;
	return true;
}

void *next_of_slow(int f)
{
	void *fn;

	if (!boot())
		return NULL;
	fn = __atomic_load_n(&next[f].fn, __ATOMIC_ACQUIRE);
	if (!fn && is_cxx_operator(f)) {
		resolve_missing();
		fn = __atomic_load_n(&next[f].fn, __ATOMIC_ACQUIRE);
	}
	return fn;
}

/* There is nothing that could serve a C++ operator called before any C++
 * library is loaded. */
void *cxx_next(int f)
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
uint8_t fork_token_static;
volatile uint8_t *fork_token = &fork_token_static;
uint32_t sites_seen_gen;

/* Called once, from boot (inside the first allocation): mmap and madvise
 * are bare system calls in glibc (no lock, no allocation), and a failure
 * (a seccomp filter, no memory, a kernel before 4.14 without
 * MADV_WIPEONFORK) leaves the static token, which on_fork_child resets;
 * boot restores errno. */
static void fork_token_setup(void)
{
	void *p = mmap(NULL, DWLEAK_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	if (madvise(p, DWLEAK_PAGE_SIZE, MADV_WIPEONFORK)) {
		munmap(p, DWLEAK_PAGE_SIZE);
		return;
	}
	fork_token = p;
}

bool in_fork_child;

/* In the child, from fork() itself before it returns: stores only. */
static void on_fork_child(void)
{
	*fork_token = 0;
	fork_token_static = 0;
	in_fork_child = true;
	walk_ring_fork_child(); /* the parent's threads' slots are not the child's */
	rings_fork_child();
}

/* Whether the call at CODE (a site) is stale: `call rel32` into no mapping.
 * mincore is a bare system call (no lock, no allocation; its errno is
 * restored by sites_check): the one way to ask whether an address is
 * mapped without touching it. */
static bool site_stale(const volatile uint8_t *code)
{
#if defined(__aarch64__)
	(void)code; /* arm64's uprobes are traps: the site stays a `nop` or a BRK */
	return false;
#else
	uintptr_t target;
	unsigned char v;
	int32_t rel;

	if (code[0] != 0xe8)
		return false;
	memcpy(&rel, (const uint8_t *)code + 1, sizeof(rel));
	if (code[0] != 0xe8) /* being rewritten: the kernel writes the opcode last */
		return false;
	target = (uintptr_t)code + 5 + (intptr_t)rel;
	return mincore((void *)DWLEAK_PAGE_DOWN(target), DWLEAK_PAGE_SIZE, &v) && errno == ENOMEM;
#endif
}

bool sites_check(uint32_t gen)
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

/*
 * Before a fork, in the thread that forks: looks again for the C++
 * operators no object defined yet, so that the child inherits any a C++
 * runtime loaded since defines, and never walks the loaded objects
 * itself.  glibc (2.36, and master in 2025) does not reset in the child
 * the lock dl_iterate_phdr takes, and another thread of a multithreaded
 * parent may hold it at the fork (inside dl_iterate_phdr, or dlopen and
 * dlclose changing the list): the child's first new would wait forever.
 * Here, before the fork, that thread lets go of it as usual.  A process
 * whose loader loaded nothing since the last look (a C program: no C++
 * runtime, ever) pays one callback of dl_iterate_phdr (resolve_missing).
 */
static void on_fork_prepare(void)
{
	if (__atomic_load_n(&boot_state, __ATOMIC_ACQUIRE) == BOOT_DONE)
		resolve_missing();
}

/* Resolves at load if nothing called malloc yet, and learns of forks made
 * without MADV_WIPEONFORK's help.  pthread_atfork is called here only,
 * never inside an allocation: it takes glibc's atfork lock and allocates
 * its list of handlers (from the real allocator, resolved just before, or
 * from the arena while another thread resolves). */
__attribute__((constructor)) static void preload_init(void)
{
	boot();
	pthread_atfork(on_fork_prepare, NULL, on_fork_child);
}
