/* The preload library's start: every interposed function resolved to
 * the definition after the library (once, with a static arena serving
 * the allocations dlsym makes meanwhile), the control block dwleak
 * writes, and whether the sites may fire in this process (a fork may have
 * copied them stale). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "interpose.h"

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
 * dlsym itself allocates (glibc's dlerror state: calloc), and the dynamic
 * linker calls malloc before any constructor runs.  Those calls, and any
 * other thread's while the first one resolves, are served from a static
 * arena and never reach the real allocator: free() recognises its blocks
 * by address and ignores them; realloc() moves them out; each block has
 * its size in front of it for malloc_usable_size(). */

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
		if (align > 4096 || size > ARENA_SIZE || start > ARENA_SIZE - size) {
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

/* A C++ operator defined by an object loaded later, with dlopen: the
 * first of the loaded objects, in load order, whose own scope (itself and
 * its dependencies: dlsym on its handle) defines SYM outside this
 * library.  RTLD_NEXT does not see it: a library dlopen'ed RTLD_LOCAL
 * brings its C++ runtime into its own scope only, while its calls of the
 * operators still reach the wrappers here, first in the global scope. */
struct find_loaded {
	const char *sym;
	void *fn;
};

static int find_loaded_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_loaded *fl = arg;
	Dl_info at;
	void *h, *fn;

	(void)size;
	if (fl->fn || !info->dlpi_name || !*info->dlpi_name || (const char *)info->dlpi_addr == __ehdr_start)
		return fl->fn != NULL;
	h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
	fn = h ? dlsym(h, fl->sym) : NULL;
	if (fn && dladdr(fn, &at) && at.dli_fbase != (void *)__ehdr_start)
		fl->fn = fn;
	if (h)
		dlclose(h);
	return fl->fn != NULL;
}

/* Looks F up in the objects after this one (with LOADED, also in the
 * scopes of libraries dlopen'ed since) and records what it is; publishes
 * it for the wrappers when PUBLISH.  Returns the function or NULL. */
static void *resolve_one(int f, bool publish, bool loaded)
{
	const ElfW(Sym) *sym = NULL;
	struct find_loaded fl = { fns[f].sym, NULL };
	Dl_info info;
	void *fn = dlsym(RTLD_NEXT, fns[f].sym);

	if (!fn && loaded) {
		dl_iterate_phdr(find_loaded_one, &fl);
		fn = fl.fn;
	}
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

/* Says in the control block where this library counts allocator calls in
 * progress (alloc_depth): its offset from the thread pointer, which
 * initial-exec TLS keeps the same in every thread.  Before the first call
 * is forwarded, so that the allocator's first memory syscall is known. */
static void depth_tls_publish(void)
{
	uintptr_t tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp)); /* the TCB's pointer to itself */
	__atomic_store_n(&ctl.depth_tls, (int32_t)((uintptr_t)&alloc_depth - tp), __ATOMIC_RELAXED);
}

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
		fn[f] = resolve_one(f, false, false);
		if (!fn[f] && fns[f].cls != PL_CXX_NEW && fns[f].cls != PL_CXX_NEW_ALIGNED &&
		    fns[f].cls != PL_CXX_DELETE)
			die("no definition to forward to after this library: ", fns[f].sym);
	}
	dlerror();
	fork_token_setup();
	depth_tls_publish();
	for (f = 0; f < F_COUNT; f++)
		__atomic_store_n(&next[f].fn, fn[f], __ATOMIC_RELEASE);
	__atomic_store_n(&boot_state, BOOT_DONE, __ATOMIC_RELEASE);
	errno = saved;
	return true;
}

void *next_of(int f)
{
	void *fn = __atomic_load_n(&next[f].fn, __ATOMIC_ACQUIRE);

	if (likely(fn))
		return fn;
	if (!boot())
		return NULL;
	fn = __atomic_load_n(&next[f].fn, __ATOMIC_ACQUIRE);
	if (!fn && fns[f].cls != PL_C_ALLOC && fns[f].cls != PL_C_FREE && fns[f].cls != PL_C_QUERY) {
		int saved = errno;

		self_busy++;
		fn = resolve_one(f, true, true); /* a C++ library dlopen'ed since */
		dlerror(); /* what the failed lookups left */
		self_busy--;
		errno = saved;
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

/* Resolves at load if nothing called malloc yet, and learns of forks made
 * without MADV_WIPEONFORK's help. */
__attribute__((constructor)) static void preload_init(void)
{
	boot();
	pthread_atfork(NULL, NULL, on_fork_child);
}
