/* The allocator's static state in a traced process (see alloc_state.h):
 * its object's data, or glibc's arenas found by their shape. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "alloc_state.h"
#include "constants.h"
#include "proc_maps.h"

/* struct malloc_state's fields (glibc 2.26+, x86_64): an int mutex, int
 * flags, int have_fastchunks, then mfastbinptr fastbinsY[10] at 16, top
 * at 96, last_remainder at 104, bins[254] at 112 (bin i, 1..127, is the
 * pair at 112 + 16 (i - 1), and the "chunk" a list links to as its head
 * is 16 bytes before the pair), binmap[4] at 2144, next at 2160,
 * next_free, attached_threads, system_mem, max_system_mem. */
#define ARENA_FASTBINS 16
#define ARENA_NFASTBINS 10
#define ARENA_TOP 96
#define ARENA_BINS 112
#define ARENA_NBINS 127
#define ARENA_NEXT 2160
#define ARENA_MIN_EMPTY 16

static uint64_t load_u64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

bool glibc_arena_at(const unsigned char *b, size_t len, uint64_t addr, uint64_t *next)
{
	uint64_t top, nx, end = addr + GLIBC_ARENA_SIZE;
	size_t i, empty = 0;

	if (!b || len < GLIBC_ARENA_SIZE || addr % 8 || end < addr)
		return false;
	for (i = 0; i < ARENA_NBINS; i++) {
		uint64_t head = addr + ARENA_BINS + 16 * i - 16;
		uint64_t fd = load_u64(b + ARENA_BINS + 16 * i), bk = load_u64(b + ARENA_BINS + 16 * i + 8);

		if (fd == head && bk == head) {
			empty++;
			continue;
		}
		/* a list of chunks: its first and last */
		if (!fd || !bk || fd % 16 || bk % 16 || fd == head || bk == head ||
		    (fd >= addr && fd < end) || (bk >= addr && bk < end))
			return false;
	}
	if (empty < ARENA_MIN_EMPTY)
		return false;
	for (i = 0; i < ARENA_NFASTBINS; i++)
		if (load_u64(b + ARENA_FASTBINS + 8 * i) % 16)
			return false;
	/* the top chunk: a chunk, or (before the first allocation) the
	 * unsorted bin's head */
	top = load_u64(b + ARENA_TOP);
	nx = load_u64(b + ARENA_NEXT);
	if (!top || top % 16 || !nx || nx % 8)
		return false;
	if (next)
		*next = nx;
	return true;
}

int64_t glibc_arena_find(const unsigned char *bytes, size_t len, uint64_t base)
{
	size_t off;

	if (!bytes || len < GLIBC_ARENA_SIZE)
		return -1;
	for (off = (8 - base % 8) % 8; off + GLIBC_ARENA_SIZE <= len; off += 8)
		if (glibc_arena_at(bytes + off, len - off, base + off, NULL))
			return (int64_t)off;
	return -1;
}

static uint16_t load_u16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

size_t jemalloc_cache_bins_at(const unsigned char *b, size_t len, uint64_t *start, uint64_t *end)
{
	uint64_t first = 0, last = 0;
	uint16_t prev_empty = 0;
	size_t n, off;

	if (!b)
		return 0;
	for (n = 0, off = 0; off + JEMALLOC_CACHE_BIN_SIZE <= len; n++, off += JEMALLOC_CACHE_BIN_SIZE) {
		uint64_t head = load_u64(b + off), full_at, empty_at;
		uint16_t low = load_u16(b + off + 16), full = load_u16(b + off + 18), empty = load_u16(b + off + 20);
		uint16_t span = (uint16_t)(empty - full), above = (uint16_t)((uint16_t)head - full);

		if (!head || head % 8 || span % 8 || above > span || (uint16_t)(low - full) > span)
			break;
		full_at = head - above;
		empty_at = full_at + span;
		if (full_at > head || empty_at < head)
			break;
		/* each bin's stack starts where the one before ends */
		if (n && (full != prev_empty || full_at != last))
			break;
		if (!n)
			first = full_at;
		last = empty_at;
		prev_empty = empty;
	}
	if (n < JEMALLOC_CACHE_BINS_MIN)
		return 0;
	if (start)
		*start = first;
	if (end)
		*end = last;
	return n;
}

void alloc_state_free(struct alloc_state *s)
{
	if (!s)
		return;
	free(s->ranges);
	free(s->object);
	memset(s, 0, sizeof(*s));
}

static int range_add(struct alloc_state *s, size_t *cap, uint64_t addr, uint64_t size)
{
	if (s->n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		struct proc_mem_range *grown = realloc(s->ranges, c * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		s->ranges = grown;
		*cap = c;
	}
	s->ranges[s->n++] = (struct proc_mem_range){ addr, size };
	return 0;
}

/*
 * The writable mappings of the object at PATH in MAPS[0..N) into
 * *FIRST..*LAST (indexes; *FIRST > *LAST when none) and its bss: the
 * anonymous writable mapping right after its last mapping, *BSS (or -1).
 */
static void object_data(const struct proc_map *maps, size_t n, const char *path, ssize_t *first, ssize_t *last,
			ssize_t *bss)
{
	struct stat st;
	uint64_t dev;
	size_t i;

	*first = 0;
	*last = -1;
	*bss = -1;
	if (stat(path, &st))
		return;
	dev = proc_kdev(major(st.st_dev), minor(st.st_dev));
	for (i = 0; i < n; i++) {
		if (maps[i].ino != st.st_ino || maps[i].dev != dev)
			continue;
		if (*last < *first)
			*first = (ssize_t)i;
		*last = (ssize_t)i;
	}
	if (*last >= *first && (size_t)*last + 1 < n) {
		const struct proc_map *m = &maps[*last + 1];

		if (!m->ino && !*m->path && m->writable && m->start == maps[*last].end)
			*bss = *last + 1;
	}
}

/* Reads LEN bytes at ADDR of the process whose memory FD is; 0 or -EIO. */
static int mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	return pread(fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EIO;
}

/* glibc's arenas: main_arena in the data of its object (mappings
 * FIRST..LAST and BSS of MAPS), then the list its next links make. */
static int arenas_find(int fd, const struct proc_map *maps, ssize_t first, ssize_t last, ssize_t bss,
		       struct alloc_state *s, size_t *cap)
{
	unsigned char arena[GLIBC_ARENA_SIZE];
	uint64_t main_arena = 0, at, next;
	ssize_t i;
	int err;

	for (i = first; i <= last + (bss >= 0) && !main_arena; i++) {
		const struct proc_map *m = &maps[i > last ? bss : i];
		size_t len = m->end - m->start;
		unsigned char *bytes;
		int64_t off;

		if (!m->writable || !m->readable || len > (64u << 20))
			continue;
		bytes = malloc(len);
		if (!bytes)
			return -ENOMEM;
		off = mem_read(fd, m->start, bytes, len) ? -1 : glibc_arena_find(bytes, len, m->start);
		if (off >= 0)
			main_arena = m->start + (uint64_t)off;
		free(bytes);
	}
	if (!main_arena) {
		s->arena_not_found = true;
		return 0;
	}
	for (at = main_arena; s->arenas < GLIBC_ARENAS_MAX;) {
		if ((err = range_add(s, cap, at, GLIBC_ARENA_SIZE)))
			return err;
		s->arenas++;
		if (mem_read(fd, at, arena, sizeof(arena)) || !glibc_arena_at(arena, sizeof(arena), at, &next)) {
			if (at != main_arena) { /* not an arena after all: it was freed? */
				s->n--;
				s->arenas--;
				s->arenas_not_followed++;
			}
			return 0;
		}
		if (next == main_arena)
			return 0;
		at = next;
	}
	s->arenas_not_followed++;
	return 0;
}

/* The mapping of MAPS[0..N) that holds ADDR, or NULL. */
static const struct proc_map *map_of(const struct proc_map *maps, size_t n, uint64_t addr)
{
	ssize_t i = proc_maps_find(maps, n, addr);

	return i < 0 ? NULL : &maps[i];
}

static bool anon_rw(const struct proc_map *maps, size_t n, uint64_t addr)
{
	const struct proc_map *m = map_of(maps, n, addr);

	return m && !m->ino && !*m->path && m->readable && m->writable;
}

/* How far below the thread pointer jemalloc's tcache lies (its tsd is in
 * the static TLS block, the same offset in every thread): searched for in
 * the 64 KiB below TLS, within its mapping.  0 when not found. */
#define TCACHE_SEARCH (64u << 10)
static uint64_t tcache_offset(int fd, const struct proc_map *maps, size_t n, uint64_t tls)
{
	const struct proc_map *m = map_of(maps, n, tls);
	uint64_t lo, off = 0, pos;
	unsigned char *buf;
	size_t len;

	if (!m || !tls)
		return 0;
	lo = tls - m->start > TCACHE_SEARCH ? tls - TCACHE_SEARCH : m->start;
	len = (size_t)(tls - lo);
	buf = malloc(len ? len : 1);
	if (!buf || mem_read(fd, lo, buf, len)) {
		free(buf);
		return 0;
	}
	for (pos = 0; pos + JEMALLOC_CACHE_BIN_SIZE * JEMALLOC_CACHE_BINS_MIN <= len && !off; pos += 8)
		if (jemalloc_cache_bins_at(buf + pos, len - pos, NULL, NULL))
			off = tls - (lo + pos);
	free(buf);
	return off;
}

/* Each thread's tcache stacks (jemalloc), through H's TLS pointers. */
static int tcaches_find(int fd, const struct proc_map *maps, size_t n, const struct alloc_state_hints *h,
			struct alloc_state *s, size_t *cap)
{
	unsigned char bins[JEMALLOC_CACHE_BIN_SIZE * 128];
	uint64_t off = 0, start, end;
	size_t i;
	int err;

	for (i = 0; i < h->ntls && !off; i++)
		off = tcache_offset(fd, maps, n, h->tls[i]);
	for (i = 0; off && i < h->ntls; i++) {
		if (!h->tls[i] || h->tls[i] < off || mem_read(fd, h->tls[i] - off, bins, sizeof(bins)) ||
		    !jemalloc_cache_bins_at(bins, sizeof(bins), &start, &end))
			continue;
		if ((err = range_add(s, cap, start, end - start)))
			return err;
		s->tcaches++;
	}
	return 0;
}

#define RTREE_ENTRIES (1ull << JEMALLOC_RTREE_BITS)

/*
 * Whether DATA[k] (a word of jemalloc's data, at ADDR) is the root slot of
 * the extent map for block BLOCK: it leads, through the leaf for BLOCK's
 * page, to an extent's metadata whose range holds BLOCK.
 */
static bool emap_slot_of(int fd, const struct proc_map *maps, size_t n, uint64_t leaf, uint64_t block)
{
	uint64_t entry, edata, ext[2];

	if (!leaf || leaf % 8 || !anon_rw(maps, n, leaf) ||
	    mem_read(fd, leaf + 8 * ((block >> DWLEAK_PAGE_SHIFT) & (RTREE_ENTRIES - 1)), &entry, sizeof(entry)))
		return false;
	edata = jemalloc_leaf_edata(entry);
	if (!edata || !anon_rw(maps, n, edata) || mem_read(fd, edata + 8, ext, sizeof(ext)))
		return false;
	return ext[0] <= block && block - ext[0] < DWLEAK_PAGE_DOWN(ext[1]);
}

/*
 * Every extent's metadata in jemalloc's extent map, whose root lies in
 * the allocator object's data D[0..ND) (its ranges): found as the slot
 * that leads to the metadata of one of H's blocks.
 */
static int extents_find(int fd, const struct proc_map *maps, size_t n, const struct proc_mem_range *d, size_t nd,
			const struct alloc_state_hints *h, struct alloc_state *s, size_t *cap)
{
	uint64_t root = 0, *words = NULL, *v = NULL;
	size_t r, k, b, nv = 0, vcap = 0;
	int err = 0;

	/* the object's data, its mappings and bss one after the other: the
	 * root (2 MiB) may straddle them */
	for (r = 0; r < nd && !root; r++) {
		uint64_t start = d[r].addr, size = d[r].size;
		size_t nw;

		while (r + 1 < nd && d[r + 1].addr == start + size)
			size += d[++r].size;
		nw = size / 8;
		if (nw < RTREE_ENTRIES)
			continue;
		free(words);
		words = malloc(size);
		if (!words)
			return -ENOMEM;
		if (mem_read(fd, start, words, size))
			continue;
		/* the root slot of a block's gigabyte is at its index in the root */
		for (b = 0; b < h->nblocks && b < 8 && !root; b++) {
			uint64_t i = (h->blocks[b] >> (DWLEAK_PAGE_SHIFT + JEMALLOC_RTREE_BITS)) & (RTREE_ENTRIES - 1);

			for (k = 0; k + RTREE_ENTRIES <= nw && !root; k++)
				if (words[k + i] && emap_slot_of(fd, maps, n, words[k + i], h->blocks[b]))
					root = start + 8 * k;
		}
	}
	free(words);
	if (!root) {
		s->extent_map_not_found = true;
		return 0;
	}
	words = malloc(RTREE_ENTRIES * 8);
	if (!words)
		return -ENOMEM;
	if (mem_read(fd, root, words, RTREE_ENTRIES * 8)) {
		free(words);
		s->extent_map_not_found = true;
		return 0;
	}
	{
		uint64_t *leaf = malloc(RTREE_ENTRIES * 8);

		for (k = 0; leaf && !err && k < RTREE_ENTRIES; k++) {
			if (!words[k] || words[k] % 8 || !anon_rw(maps, n, words[k]) ||
			    mem_read(fd, words[k], leaf, RTREE_ENTRIES * 8))
				continue;
			for (b = 0; b < RTREE_ENTRIES && !err; b++) {
				uint64_t e = jemalloc_leaf_edata(leaf[b]);

				if (!e || (nv && v[nv - 1] == e)) /* an extent's pages follow each other */
					continue;
				if (nv == vcap) {
					uint64_t *grown = realloc(v, (vcap ? 2 * vcap : 256) * sizeof(*v));

					if (!grown) {
						err = -ENOMEM;
						break;
					}
					v = grown;
					vcap = vcap ? 2 * vcap : 256;
				}
				v[nv++] = e;
			}
		}
		if (!leaf)
			err = -ENOMEM;
		free(leaf);
	}
	free(words);
	for (k = 0; !err && k < nv; k++)
		err = range_add(s, cap, v[k], JEMALLOC_EDATA_SIZE);
	s->extents = nv;
	free(v);
	return err;
}

int alloc_state_find(int pid, const struct allocator *a, const struct alloc_state_hints *h, struct alloc_state *out)
{
	static const struct alloc_state_hints none = { 0 };
	bool own_object, glibc, jemalloc;
	ssize_t first, last, bss, i;
	struct proc_map *maps;
	size_t n, cap = 0, ocap = 0;
	char path[64];
	int fd = -1, err;

	memset(out, 0, sizeof(*out));
	if (!h)
		h = &none;
	if (!a->family || !a->nobjs || !a->objs[0].path)
		return 0;
	glibc = !strcmp(a->family, "glibc");
	jemalloc = !strcmp(a->family, "jemalloc");
	own_object = !a->in_executable && (!strcmp(a->family, "jemalloc") || !strcmp(a->family, "tcmalloc") ||
					   !strcmp(a->family, "mimalloc"));
	if (!glibc && !own_object)
		return 0;
	err = proc_maps_read(pid, false, &maps, &n);
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	object_data(maps, n, a->objs[0].path, &first, &last, &bss);
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		err = errno == ENOENT ? -ESRCH : -errno;
	/* the object's data: no bookkeeping as a whole (its globals may hold
	 * blocks it allocated itself, as any library's), but where its
	 * caches and maps are found from */
	for (i = first; !err && own_object && i <= last + (bss >= 0); i++) {
		const struct proc_map *m = &maps[i > last ? bss : i];

		if (!m->writable)
			continue;
		if (out->nobject == ocap) {
			struct proc_mem_range *grown = realloc(out->object, (ocap + 8) * sizeof(*grown));

			if (!grown) {
				err = -ENOMEM;
				break;
			}
			out->object = grown;
			ocap += 8;
		}
		out->object[out->nobject++] = (struct proc_mem_range){ m->start, m->end - m->start };
		out->object_bytes += m->end - m->start;
	}
	if (!err && glibc && last >= first)
		err = arenas_find(fd, maps, first, last, bss, out, &cap);
	if (!err && jemalloc && own_object) {
		err = tcaches_find(fd, maps, n, h, out, &cap);
		if (!err && h->extents && h->nblocks)
			err = extents_find(fd, maps, n, out->object, out->nobject, h, out, &cap);
	}
	if (fd >= 0)
		close(fd);
	proc_maps_free(maps, n);
	if (err)
		alloc_state_free(out);
	else
		proc_mem_ranges_normalize(out->ranges, &out->n);
	return err;
}
