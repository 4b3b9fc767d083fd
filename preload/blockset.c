/* The index of live blocks (see blockset.h): compare-and-swap on a slot's
 * address word, plain stores of its size, mmap for a new level; no lock,
 * no allocation, no system call but the mapping of a level, so it is safe
 * under any lock the program holds, in signal handlers and in the child
 * of a fork made while other threads were inside it. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/mman.h>

#include "blockset.h"

/* A block's home slot in a level of 2^BITS slots: the address without
 * its low 4 bits (every allocator aligns to 16), spread by Fibonacci
 * hashing, so blocks next to each other land far apart and clusters stay
 * short whatever the allocator's spacing. */
static inline uint64_t home_of(uint64_t addr, uint32_t bits)
{
	return ((addr >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - bits);
}

static inline size_t level_bytes(uint32_t bits)
{
	return sizeof(struct blockset_abi_slot) << bits;
}

int blockset_init(struct blockset *s, uint32_t first_bits, uint32_t levels)
{
	if (first_bits < BLOCKSET_ABI_BITS_MIN || first_bits > BLOCKSET_ABI_BITS_MAX || levels < 1 ||
	    levels > BLOCKSET_ABI_LEVELS || first_bits + levels - 1 > BLOCKSET_ABI_BITS_MAX)
		return -EINVAL;
	*s = (struct blockset)BLOCKSET_INITIALIZER(first_bits, levels);
	return 0;
}

/* Level I's slots, or NULL while it is not mapped.  Acquire: whoever
 * sees the slots sees the level's bits, written before. */
static inline struct blockset_abi_slot *level_slots(const struct blockset *s, uint32_t i)
{
	return (struct blockset_abi_slot *)(uintptr_t)__atomic_load_n(&s->abi.level[i].slots, __ATOMIC_ACQUIRE);
}

/*
 * Maps level I and publishes it, unless another thread did first (the
 * loser unmaps its copy).  Returns its slots, NULL when it cannot be
 * mapped.  mmap and munmap are bare system calls in glibc (no lock, no
 * allocation), so safe from inside an allocation, in a signal handler
 * and in a fork's child; a failure (no memory, a seccomp filter) loses
 * the block, counted.  errno is the program's: kept.
 */
static __attribute__((noinline, cold)) struct blockset_abi_slot *level_map(struct blockset *s, uint32_t i)
{
	struct blockset_abi_level *lv = &s->abi.level[i];
	uint32_t bits = s->abi.first_bits + i;
	uint64_t want = 0;
	int saved = errno;
	void *m = mmap(NULL, level_bytes(bits), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED) {
		errno = saved;
		return NULL;
	}
	__atomic_store_n(&lv->bits, bits, __ATOMIC_RELAXED);
	if (!__atomic_compare_exchange_n(&lv->slots, &want, (uint64_t)(uintptr_t)m, false, __ATOMIC_RELEASE,
					 __ATOMIC_ACQUIRE)) {
		munmap(m, level_bytes(bits)); /* of a mapping just made: cannot fail */
		m = (void *)(uintptr_t)want;
	}
	errno = saved;
	return m;
}

/* Raises *W to D unless it is already as high (another thread's raise
 * may come between the load and the swap). */
static void raise_to(uint32_t *w, uint32_t d)
{
	uint32_t old = __atomic_load_n(w, __ATOMIC_RELAXED);

	while (d > old && !__atomic_compare_exchange_n(w, &old, d, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/*
 * Puts ADDR, SIZE in the first free slot (EMPTY or TOMB) within
 * BLOCKSET_MAX_PROBE of ADDR's home in level I.  Returns whether it did.
 * The slot is claimed first (BUSY), then written, size before address:
 * two inserts racing for one slot cannot mix their halves, and a reader
 * that sees the address sees the size.  The claim acquires what the
 * slot's last remover released, so its reading of the old size comes
 * before the new size is written.
 */
static inline __attribute__((always_inline)) bool level_put(struct blockset *s, uint32_t i,
							     struct blockset_abi_slot *slots, uint64_t addr,
							     uint64_t size)
{
	uint32_t bits = s->abi.first_bits + i, d;
	uint64_t mask = (1ull << bits) - 1, j = home_of(addr, bits), cur;

	for (d = 0; d < BLOCKSET_MAX_PROBE && d <= mask; d++, j = (j + 1) & mask) {
		cur = __atomic_load_n(&slots[j].addr, __ATOMIC_RELAXED);
		while (cur == BLOCKSET_ABI_EMPTY || cur == BLOCKSET_ABI_TOMB) {
			if (!__atomic_compare_exchange_n(&slots[j].addr, &cur, BLOCKSET_ABI_BUSY, false,
							 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				continue; /* another insert took it, or it changed: look again */
			__atomic_store_n(&slots[j].size, size, __ATOMIC_RELAXED);
			/* before the block can be freed, so its lookup goes as far */
			if (d)
				raise_to(&s->abi.level[i].max_probe, d);
			__atomic_store_n(&slots[j].addr, addr, __ATOMIC_RELEASE);
			return true;
		}
	}
	return false;
}

/*
 * An insert that the newest level, TOP, did not take (or that maps the
 * first level), out of line, so that the common case stays a leaf: the
 * older levels first, newest first, whose blocks were freed since (a
 * set grows only when every level is crowded around ADDR); then a new
 * level, twice as large as the last, which inserts then use first.
 */
static __attribute__((noinline)) int insert_slow(struct blockset *s, uint32_t top, uint64_t addr, uint64_t size)
{
	uint32_t levels = s->abi.levels, i;
	struct blockset_abi_slot *slots;

	for (i = top < levels ? top : levels; i-- > 0;) {
		slots = level_slots(s, i);
		if (slots && level_put(s, i, slots, addr, size))
			return 0;
	}
	for (i = top; i < levels; i++) {
		slots = level_slots(s, i);
		if (!slots && !(slots = level_map(s, i)))
			break;
		/* before a block goes there, so every lookup starts from it */
		if (i > top)
			raise_to(&s->abi.top, i);
		if (level_put(s, i, slots, addr, size))
			return 0;
	}
	__atomic_fetch_add(&s->abi.lost, 1, __ATOMIC_RELAXED);
	return -1;
}

int blockset_insert(struct blockset *s, uint64_t addr, uint64_t size)
{
	uint32_t top = __atomic_load_n(&s->abi.top, __ATOMIC_RELAXED);
	struct blockset_abi_slot *slots = level_slots(s, top);

	/* the newest level: the largest, where ADDR's neighbourhood is
	 * least crowded, so a set grown large costs an insert one level, not
	 * all of them */
	if (__builtin_expect(slots != NULL, 1) && level_put(s, top, slots, addr, size))
		return 0;
	return insert_slow(s, top, addr, size);
}

/*
 * Takes ADDR out of level I: a tombstone in its slot.  Returns whether it
 * was there, its size in *SIZE.  Only ADDR's remover changes its slot
 * while it holds ADDR (inserts take free slots only), so the size read
 * first is ADDR's; the swap (release: the next claim of the slot sees the
 * read done) still guards against a second free of ADDR racing this one,
 * a program's bug that must not take another block's slot.
 */
static inline __attribute__((always_inline)) bool level_take(struct blockset *s, uint32_t i,
							      struct blockset_abi_slot *slots, uint64_t addr,
							      uint64_t *size)
{
	uint32_t bits = s->abi.first_bits + i, d;
	uint32_t limit = __atomic_load_n(&s->abi.level[i].max_probe, __ATOMIC_RELAXED);
	uint64_t mask = (1ull << bits) - 1, j = home_of(addr, bits), cur, sz;

	for (d = 0; d <= limit && d <= mask; d++, j = (j + 1) & mask) {
		cur = __atomic_load_n(&slots[j].addr, __ATOMIC_ACQUIRE);
		if (cur == addr) {
			sz = __atomic_load_n(&slots[j].size, __ATOMIC_RELAXED);
			if (__atomic_compare_exchange_n(&slots[j].addr, &cur, BLOCKSET_ABI_TOMB, false,
							__ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
				*size = sz;
				return true;
			}
		} else if (cur == BLOCKSET_ABI_EMPTY) {
			return false; /* the end of every chain through here */
		}
	}
	return false;
}

/* A remove that did not find ADDR in the newest level, TOP: the older
 * ones, newest first; out of line, as insert_slow. */
static __attribute__((noinline)) uint64_t remove_slow(struct blockset *s, uint32_t top, uint64_t addr)
{
	struct blockset_abi_slot *slots;
	uint64_t size;
	uint32_t i;

	for (i = top; i-- > 0;) {
		slots = level_slots(s, i);
		if (slots && level_take(s, i, slots, addr, &size))
			return size;
	}
	__atomic_fetch_add(&s->abi.absent, 1, __ATOMIC_RELAXED);
	return 0;
}

uint64_t blockset_remove(struct blockset *s, uint64_t addr)
{
	uint32_t top = __atomic_load_n(&s->abi.top, __ATOMIC_RELAXED);
	struct blockset_abi_slot *slots = level_slots(s, top);
	uint64_t size;

	/* the newest level first: most frees are of recent blocks */
	if (__builtin_expect(slots != NULL, 1) && level_take(s, top, slots, addr, &size))
		return size;
	return remove_slow(s, top, addr);
}

void blockset_reset(struct blockset *s)
{
	struct blockset_abi_slot *slots;
	uint32_t i;

	for (i = 0; i < s->abi.levels && i < BLOCKSET_ABI_LEVELS; i++)
		if ((slots = level_slots(s, i)))
			munmap(slots, level_bytes(s->abi.first_bits + i));
	blockset_init(s, s->abi.first_bits, s->abi.levels);
}
