/* The preload library's traced paths: the per-thread sampler, the levels
 * of the set of sampled blocks, nesting, and the decision to fire a site
 * for one call, or to record it into the rings (rings.c) instead. */
#include <errno.h>
#include <sys/mman.h>

#include "blockset.h"
#include "constants.h"
#include "interpose.h"
#include "walk_ring.h"

/* Whether a call that returns to RA runs inside another allocator call:
 * from inside a function that fires, or (a tail call) from this library.
 * Either way an outer wrapper of this thread is forwarding (every traced
 * path forwards through FORWARDED), so alloc_depth is not 0: the common
 * call is told in one load, not in a look at every function's range.
 * (A signal handler's call made inside a forwarded one has a return
 * address in none of them: not nested, and looked at in full.) */
static bool nested(uintptr_t ra)
{
	int f;

	if (likely(!alloc_depth))
		return false;

	if (ra - (uintptr_t)__ehdr_start < (uintptr_t)(__etext - __ehdr_start))
		return true;
	for (f = 0; f < F_COUNT; f++)
		if (ra - next[f].start < __atomic_load_n(&next[f].len, __ATOMIC_RELAXED))
			return true;
	return false;
}

/* --- Sampling: the per-thread sampler and the set of sampled blocks --- */

__thread struct sampler thread_sampler __attribute__((tls_model("initial-exec")));
__thread uint32_t alloc_depth __attribute__((tls_model("initial-exec")));

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

struct ptrset *set_levels[SET_LEVELS];
static uint32_t *set_filter;

/* The set's memory, mapped from inside a traced allocation: mmap and
 * munmap are bare system calls in glibc (no lock, no allocation, unlike
 * the allocator this library cannot call into from here), so they are
 * safe under any lock the program holds, in a signal handler and in a
 * fork child; a failure (a seccomp filter, no memory) only loses the
 * sample, counted.  errno is the program's: kept. */
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
		munmap(m, len); /* of a mapping just made: cannot fail, errno untouched */
		m = want;
	}
	return m;
}

/* Level I, mapped now if need be; NULL when it cannot be. */
static struct ptrset *set_level(int i)
{
	struct ptrset *s = __atomic_load_n(&set_levels[i], __ATOMIC_ACQUIRE), *want = NULL;
	/* the set's header has the first page; its slots start on the next */
	size_t len = DWLEAK_PAGE_SIZE + (sizeof(uint64_t) << (SET_BITS + i));
	uint32_t *filter;

	if (likely(s))
		return s;
	filter = map_once((void **)&set_filter, sizeof(uint32_t) << PTRSET_FILTER_BITS);
	s = filter ? map_zeroed(len) : NULL;
	if (!s)
		return NULL;
	ptrset_init(s, (uint64_t *)((char *)s + DWLEAK_PAGE_SIZE), SET_BITS + (uint32_t)i, filter);
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

/* --- The block index (bpf/abi/preload.h, index_request) ---
 * Every block a call the library sees returns, sampled or not, while
 * dwleak asks: put in where the call would fire if every call fired (not
 * a nested call: the outer one puts the same block in), taken out where
 * its free would.  Its levels come from mmap (blockset.c), like the
 * sampled set's. */
static struct blockset first_index = BLOCKSET_INITIALIZER(BLOCKSET_FIRST_BITS, 20);

/* The index in use, and the control block's index_gen it serves: a
 * session that asks anew (index_gen moved) gets a new, empty one, mapped
 * here (the old one stays mapped: a thread may still be in it), since the
 * old one missed what was freed while nobody listened.  The first new one
 * is the static one, unused until then.  One thread makes it (the one
 * whose claim of the generation succeeds); the others go on with the one
 * in use meanwhile, a moment at a session's start. */
static struct blockset *index_cur = &first_index;
static uint32_t index_cur_gen;
static uint32_t index_claim_gen;

static __attribute__((noinline)) struct blockset *index_renew(uint32_t gen)
{
	uint32_t claimed = __atomic_load_n(&index_claim_gen, __ATOMIC_ACQUIRE);
	struct blockset *fresh = NULL;
	int saved = errno;

	if (claimed == gen ||
	    !__atomic_compare_exchange_n(&index_claim_gen, &claimed, gen, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return __atomic_load_n(&index_cur, __ATOMIC_ACQUIRE);
	if (!__atomic_load_n(&index_cur_gen, __ATOMIC_ACQUIRE) && index_cur == &first_index) {
		fresh = &first_index;
	} else {
		void *m = mmap(NULL, DWLEAK_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m != MAP_FAILED) {
			fresh = m;
			if (blockset_init(fresh, BLOCKSET_FIRST_BITS, 20)) {
				munmap(m, DWLEAK_PAGE_SIZE);
				fresh = NULL;
			}
		}
	}
	errno = saved;
	if (!fresh) { /* no memory: the old one goes on (its stale blocks with it) */
		__atomic_store_n(&index_cur_gen, gen, __ATOMIC_RELEASE);
		return __atomic_load_n(&index_cur, __ATOMIC_ACQUIRE);
	}
	__atomic_store_n(&fresh->abi.session, gen, __ATOMIC_RELEASE);
	__atomic_store_n(&index_cur, fresh, __ATOMIC_RELEASE);
	__atomic_store_n(&ctl.index_addr, (uint64_t)(uintptr_t)&fresh->abi, __ATOMIC_RELEASE);
	__atomic_store_n(&index_cur_gen, gen, __ATOMIC_RELEASE);
	return fresh;
}

/* The index for this session's calls (a load and a compare when it is
 * the one in use). */
static inline struct blockset *index_now(void)
{
	uint32_t gen = __atomic_load_n(&ctl.index_gen, __ATOMIC_RELAXED);

	if (likely(gen == __atomic_load_n(&index_cur_gen, __ATOMIC_ACQUIRE)))
		return __atomic_load_n(&index_cur, __ATOMIC_ACQUIRE);
	return index_renew(gen);
}

/* The index's header for dwleak (control.index_addr), and the rings'
 * directory (control.rings_addr), set at load: a
 * constructor runs before dwleak can ask for the index (it writes the
 * control block once the library's sites are known, after the loader
 * mapped it), and the address never changes. */
__attribute__((constructor)) static void index_publish(void)
{
	__atomic_store_n(&ctl.index_addr, (uint64_t)(uintptr_t)&first_index.abi, __ATOMIC_RELEASE);
	/* the rings' directory likewise (walk_ring.c; recorded into by rings.c) */
	__atomic_store_n(&ctl.rings_addr, (uint64_t)(uintptr_t)&walk_ring_directory, __ATOMIC_RELEASE);
}

void index_insert(void *p, uint64_t size)
{
	blockset_insert(index_now(), (uintptr_t)p, size);
}

void index_remove(void *p)
{
	blockset_remove(index_now(), (uintptr_t)p);
}

bool call_fires(struct call *c)
{
	uint64_t n = __atomic_load_n(&ctl.sample_bytes, __ATOMIC_RELAXED);
	bool sampled, index = index_on(), fire;

	route_check(c->ra);
	c->gen = CTL_LOAD(generation);
	c->sampling = n != 0;
	c->index = false;
	c->fire = false;
	c->walk = DWLEAK_PRELOAD_WALK_NONE;
	sampled = !n || c->drawn || sampler_take(&thread_sampler, c->size, n, 0);
	if (!sampled && !index)
		return false;
	if (nested(c->ra)) {
		if (sampled)
			CTL_COUNT(nested);
		return false;
	}
	/* the sites usable say a tracer listens to this process (dwleak keeps
	 * them attached while it drains the rings: a fork's child that no
	 * tracer follows has them stale and records nothing); then recorded
	 * into the rings when asked, else fired */
	fire = sampled && sites_usable(c->gen);
	if (fire)
		c->walk = (uint8_t)rings_mode();
	/* the answer from the locals: read back from C, the two byte stores
	 * just made stall the load (no store forwarding across both) */
	c->fire = fire;
	c->index = index;
	return fire || index;
}

void call_done(const struct call *c, void *p)
{
	if (!p)
		return;
	if (c->index)
		blockset_insert(index_now(), (uintptr_t)p, c->size);
	if (!c->fire || (c->sampling && set_insert((uintptr_t)p, (uint16_t)c->gen)))
		return;
	if (c->walk != DWLEAK_PRELOAD_WALK_NONE) {
		rings_alloc(c, p);
		return;
	}
	dwleak_site_alloc(p, c->size, fns[c->f].kind, next[c->f].fn, CALLER_SP(c->cfa), c->ra);
	CTL_COUNT(fired_alloc);
}

void release(void *p, uintptr_t ra, uint64_t how, uint32_t kind)
{
	bool sampled, index = index_on();
	uint32_t gen, walk;

	route_check(ra);
	gen = CTL_LOAD(generation);
	sampled = !__atomic_load_n(&ctl.sample_bytes, __ATOMIC_RELAXED) || set_take((uintptr_t)p, (uint16_t)gen);
	if (!sampled && !index)
		return;
	if (nested(ra)) {
		if (sampled)
			CTL_COUNT(nested);
		return;
	}
	if (index)
		blockset_remove(index_now(), (uintptr_t)p);
	if (!sampled || !sites_usable(gen))
		return;
	walk = rings_mode();
	if (walk != DWLEAK_PRELOAD_WALK_NONE) {
		rings_free(p, kind, how, walk);
	} else {
		dwleak_site_free(p, how);
		CTL_COUNT(fired_free);
	}
}
