/* Object registry and table loader: compiles each executable file a target
 * maps (through the cache), and packs its pages, rows and rules into the
 * walker's maps, giving it a table id and a base in the shared arrays. */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "debug_file.h"
#include "proc_maps.h"
#include "table.h"
#include "table_cache.h"
#include "table_image.h"
#include "unwinder.h"

/* The machine whose code is walked: the one dwleak is built for (the
 * kernel program's walk and the tables it is handed must agree). */
#if defined(__aarch64__)
#define UNWIND_HOST_ARCH UNWIND_ARCH_AARCH64
#else
#define UNWIND_HOST_ARCH UNWIND_ARCH_X86_64
#endif

/* One mapping-table slot of the walker: whose, which of its two buffers
 * is in use, and what it holds (to skip republishing the same). */
struct pm_slot {
	int pid;		     /* 0 = free */
	uint32_t buf;		     /* 0 or 1 */
	struct proc_mappings *last;
};

struct unwinder {
	struct unwind_object **objs;
	size_t n;
	size_t cap;
	struct table_cache *cache;
	const char *const *debug_dirs;
	struct unwinder_maps maps;
	bool have_maps;
	uint32_t next_table_id;
	struct pm_slot *slots; /* DWLEAK_MAX_PROC_SLOTS of them */
	bool keep_tables;      /* a loaded table stays, for unwinder_image_build */
	uint64_t rows_used;
	uint64_t rules_used;
	uint64_t pages_used;
	uint64_t bytes;
	uint32_t dropped_full;
	uint32_t slots_none;
	uint64_t mappings_full;
};

int unwinder_new(struct table_cache *cache, const char *const *debug_dirs, struct unwinder **out)
{
	struct unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->cache = cache;
	u->debug_dirs = debug_dirs;
	u->next_table_id = 1;
	u->slots = calloc(DWLEAK_MAX_PROC_SLOTS, sizeof(*u->slots));
	if (!u->slots) {
		free(u);
		return -ENOMEM;
	}
	*out = u;
	return 0;
}

static void object_free(struct unwind_object *o)
{
	if (!o)
		return;
	if (o->fd >= 0)
		close(o->fd);
	table_free(o->table);
	free(o->path);
	free(o->error_msg);
	free(o);
}

void unwinder_free(struct unwinder *u)
{
	size_t i;

	if (!u)
		return;
	for (i = 0; i < u->n; i++)
		object_free(u->objs[i]);
	free(u->objs);
	for (i = 0; i < DWLEAK_MAX_PROC_SLOTS; i++)
		free(u->slots[i].last);
	free(u->slots);
	free(u);
}

struct unwind_object *unwinder_find(const struct unwinder *u, const struct file_key *key)
{
	size_t i;

	for (i = 0; i < u->n; i++) {
		if (u->objs[i]->key.dev == key->dev && u->objs[i]->key.ino == key->ino)
			return u->objs[i];
	}
	return NULL;
}

size_t unwinder_count(const struct unwinder *u)
{
	return u->n;
}

struct unwind_object *unwinder_object(const struct unwinder *u, size_t i)
{
	return i < u->n ? u->objs[i] : NULL;
}

/* Reads the executable PT_LOAD segments: the walker turns a mapping's file
 * offset into an ELF address with them. */
static int object_segments(struct unwind_object *o)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	unsigned int i;

	if (pread(o->fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(ph))
		return -ENOEXEC;
	for (i = 0; i < eh.e_phnum; i++) {
		if (pread(o->fd, &ph, sizeof(ph), eh.e_phoff + (off_t)i * sizeof(ph)) != sizeof(ph))
			return -ENOEXEC;
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (o->nsegs == DWLEAK_MAX_SEGMENTS) {
			o->segs_truncated = true;
			break;
		}
		o->segs[o->nsegs++] = (struct table_segment){
			.off_start = ph.p_offset,
			.off_end = ph.p_offset + ph.p_filesz,
			.vaddr_delta = (int64_t)(ph.p_vaddr - ph.p_offset),
		};
	}
	return o->nsegs ? 0 : -ENOEXEC;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void object_compile(struct unwinder *u, struct unwind_object *o)
{
	struct table_opts opts = { 0 };
	char *debug = NULL;
	double t0 = now_ms();
	int i;

	o->error = object_segments(o);
	if (o->error) {
		o->error_msg = strdup("not an ELF object with executable segments");
		return;
	}
	if (debug_file_find(o->fd, o->path, u->debug_dirs, &debug) == 0)
		opts.debug_path = debug;
	o->error = table_cache_get(u->cache, o->fd, o->path, &opts, &o->table, &o->cache_hit);
	free(debug);
	o->compile_ms = now_ms() - t0;
	if (o->error) {
		o->error_msg = strdup(table_last_error());
		return;
	}
	if (o->table->arch != UNWIND_HOST_ARCH) { /* another machine's code, mapped as data */
		table_free(o->table);
		o->table = NULL;
		o->error = -ENOEXEC;
		o->error_msg = strdup(UNWIND_HOST_ARCH == UNWIND_ARCH_X86_64
					      ? "an aarch64 object: this walker unwinds x86_64 code"
					      : "an x86_64 object: this walker unwinds aarch64 code");
		return;
	}
	o->rows = o->table->nrows;
	o->rules = o->table->nrules;
	o->table_bytes = table_walker_bytes(o->table);
	for (i = 0; i < (int)o->table->build_id_len; i++)
		sprintf(o->build_id + 2 * i, "%02x", o->table->build_id[i]);
}

int unwinder_add(struct unwinder *u, const struct file_key *key, const char *path, int fd,
		 struct unwind_object **out)
{
	struct unwind_object *o, **grown;

	o = unwinder_find(u, key);
	if (o) {
		if (fd >= 0)
			close(fd);
		goto done;
	}
	if (u->n == u->cap) {
		u->cap = u->cap ? u->cap * 2 : 32;
		grown = realloc(u->objs, u->cap * sizeof(*grown));
		if (!grown)
			goto nomem;
		u->objs = grown;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		goto nomem;
	o->key = *key;
	o->path = strdup(path);
	o->fd = fd >= 0 ? fd : open(path, O_RDONLY | O_CLOEXEC);
	if (!o->path) {
		object_free(o);
		return -ENOMEM;
	}
	u->objs[u->n++] = o;
	if (o->fd < 0) {
		o->error = -errno;
		o->error_msg = strdup(strerror(errno));
	} else {
		object_compile(u, o);
	}
done:
	if (out)
		*out = o;
	return 0;
nomem:
	if (fd >= 0)
		close(fd);
	return -ENOMEM;
}

int unwinder_add_process(struct unwinder *u, int pid)
{
	struct proc_map *maps;
	struct file_key key;
	size_t n, i;
	int err;

	err = proc_maps_read(pid, true, &maps, &n);
	if (err)
		return err;
	for (i = 0; i < n; i++) {
		if (maps[i].ino == 0 || maps[i].path[0] != '/')
			continue; /* anonymous, [vdso], [uprobes]: no file to read */
		key.dev = maps[i].dev;
		key.ino = maps[i].ino;
		if (unwinder_find(u, &key))
			continue;
		err = unwinder_add(u, &key, maps[i].path, proc_map_open(pid, &maps[i]), NULL);
		if (err)
			break;
	}
	proc_maps_free(maps, n);
	return err;
}

void unwinder_needs(const struct unwinder *u, uint64_t *rows, uint64_t *rules)
{
	size_t i;

	*rows = *rules = 0;
	for (i = 0; i < u->n; i++) {
		if (u->objs[i]->table && !u->objs[i]->loaded) {
			*rows += u->objs[i]->rows;
			*rules += u->objs[i]->rules;
		}
	}
}

void unwinder_set_maps(struct unwinder *u, const struct unwinder_maps *maps)
{
	u->maps = *maps;
	u->have_maps = true;
}

/* Writes the N values VALS, of SIZE bytes each, at consecutive indexes
 * from BASE of the array map FD, or of its mapping MEM (STRIDE bytes an
 * element) when there is one: the walker reads what is written there. */
static int array_fill(int fd, void *mem, size_t stride, uint32_t base, const void *vals, size_t size, uint32_t n)
{
	uint32_t *keys, i, count = n;
	int err;

	if (!n)
		return 0;
	if (mem) {
		for (i = 0; i < n; i++)
			memcpy((char *)mem + (size_t)(base + i) * stride, (const char *)vals + (size_t)i * size, size);
		return 0;
	}
	keys = malloc(n * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		keys[i] = base + i;
	err = bpf_map_update_batch(fd, keys, vals, &count, NULL);
	free(keys);
	return err ? -errno : 0;
}

static int pages_fill(struct unwinder *u, const struct unwind_table *t, uint32_t table_id,
		      uint32_t row_base, uint64_t *npages)
{
	struct page_key *keys;
	struct unwind_page *vals;
	uint32_t i, n = 0, count;
	int err = 0;

	keys = malloc(t->npages * sizeof(*keys));
	vals = malloc(t->npages * sizeof(*vals));
	if (!keys || !vals) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < t->npages; i++) {
		if (!t->pages[i].nrows)
			continue;
		keys[n] = (struct page_key){ table_id, (uint32_t)(t->first_page + i) };
		vals[n] = (struct unwind_page){ t->pages[i].first_row + row_base, t->pages[i].nrows };
		n++;
	}
	count = n;
	if (n && bpf_map_update_batch(u->maps.pages, keys, vals, &count, NULL))
		err = -errno;
	*npages = n;
out:
	free(keys);
	free(vals);
	return err;
}

static uint64_t table_pages(const struct unwind_table *t)
{
	uint64_t n = 0;
	uint32_t i;

	for (i = 0; i < t->npages; i++)
		n += t->pages[i].nrows != 0;
	return n;
}

static int object_load(struct unwinder *u, struct unwind_object *o)
{
	const struct unwind_table *t = o->table;
	struct table_info info = { 0 };
	uint64_t npages;
	int err;

	if (u->rows_used + t->nrows > u->maps.rows_cap ||
	    u->rules_used + t->nrules > u->maps.rules_cap ||
	    u->pages_used + table_pages(t) > u->maps.pages_cap) {
		u->dropped_full++;
		o->error = -ENOSPC;
		free(o->error_msg);
		o->error_msg = strdup("unwind table maps are full");
		return 0;
	}
	info.table_id = u->next_table_id++;
	info.rule_base = (uint32_t)u->rules_used;
	info.nsegs = o->nsegs;
	memcpy(info.segs, o->segs, sizeof(info.segs));
	err = array_fill(u->maps.rows, u->maps.rows_mem, u->maps.rows_stride, (uint32_t)u->rows_used, t->rows,
			 sizeof(*t->rows), t->nrows);
	if (!err)
		err = array_fill(u->maps.rules, u->maps.rules_mem, u->maps.rules_stride, info.rule_base, t->rules,
				 sizeof(*t->rules), t->nrules);
	if (!err)
		err = pages_fill(u, t, info.table_id, (uint32_t)u->rows_used, &npages);
	if (err)
		return err;
	/* the table becomes visible to the walker only once complete */
	if (bpf_map_update_elem(u->maps.tables, &o->key, &info, BPF_ANY))
		return -errno;
	u->rows_used += t->nrows;
	u->rules_used += t->nrules;
	u->pages_used += npages;
	u->bytes += o->table_bytes;
	o->table_id = info.table_id;
	o->rule_base = info.rule_base;
	o->loaded = true;
	if (!u->keep_tables) { /* the maps hold it now: no second copy unless asked */
		table_free(o->table);
		o->table = NULL;
	}
	return 0;
}

int unwinder_load_pending(struct unwinder *u)
{
	int loaded = 0, err;
	size_t i;

	if (!u->have_maps)
		return -EINVAL;
	for (i = 0; i < u->n; i++) {
		if (!u->objs[i]->table || u->objs[i]->loaded)
			continue;
		err = object_load(u, u->objs[i]);
		if (err)
			return err;
		loaded += u->objs[i]->loaded;
	}
	return loaded;
}

static int mapping_cmp(const void *a, const void *b)
{
	const struct proc_mapping *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The bias from a runtime pc in map P of object O to O's ELF address (pc
 * - bias), from the executable segment P's offset lies in; false when it
 * lies in none.  The one computation for the kernel walker's mappings
 * (mapping_of) and the unwind image's (unwinder_image_build), so the two
 * walkers look a pc up at the same ELF address. */
static bool mapping_bias(const struct unwind_object *o, const struct proc_map *p, uint64_t *bias)
{
	uint32_t i;

	for (i = 0; i < o->nsegs; i++) {
		if (p->offset < o->segs[i].off_start || p->offset >= o->segs[i].off_end)
			continue;
		*bias = p->start - p->offset - (uint64_t)o->segs[i].vaddr_delta;
		return true;
	}
	return false;
}

/* Fills M for map P of object O; false when O has no table or P lies
 * outside O's executable segments. */
static bool mapping_of(const struct unwind_object *o, const struct proc_map *p,
		       struct proc_mapping *m)
{
	uint64_t bias;

	if (!o || !o->loaded || !mapping_bias(o, p, &bias))
		return false;
	m->bias = bias;
	m->start = p->start;
	m->end = p->end;
	m->table_id = o->table_id;
	m->rule_base = o->rule_base;
	return true;
}

uint32_t unwinder_slot_take(struct unwinder *u, int pid)
{
	uint32_t i;

	for (i = 0; i < DWLEAK_MAX_PROC_SLOTS; i++) {
		if (u->slots[i].pid)
			continue;
		u->slots[i].pid = pid;
		return i;
	}
	u->slots_none++;
	return DWLEAK_NO_SLOT;
}

void unwinder_slot_release(struct unwinder *u, uint32_t slot)
{
	if (slot >= DWLEAK_MAX_PROC_SLOTS)
		return;
	free(u->slots[slot].last);
	u->slots[slot].last = NULL;
	u->slots[slot].pid = 0;
}

int unwinder_publish(struct unwinder *u, int pid, uint32_t slot, uint32_t *dropped)
{
	struct proc_mappings *pm;
	struct proc_map *maps;
	struct file_key key;
	struct pm_slot *ps = slot < DWLEAK_MAX_PROC_SLOTS ? &u->slots[slot] : NULL;
	uint32_t tgid = (uint32_t)pid, next;
	size_t n, i;
	int err;

	if (!u->have_maps)
		return -EINVAL;
	err = proc_maps_read(pid, true, &maps, &n);
	if (err)
		return err;
	pm = calloc(1, sizeof(*pm));
	if (!pm) {
		proc_maps_free(maps, n);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		struct mapping_key mk = { .tgid = tgid, .start = maps[i].start };
		struct mapping_seen ms = { .end = maps[i].end, .pgoff = maps[i].offset };

		key.dev = maps[i].dev;
		key.ino = maps[i].ino;
		if (!maps[i].ino)
			continue;
		ms.file = key;
		if (bpf_map_update_elem(u->maps.mappings, &mk, &ms, BPF_ANY))
			u->mappings_full++; /* counted: frames in it go unnamed */
		if (pm->n == DWLEAK_MAX_PROC_MAPPINGS) {
			if (dropped)
				(*dropped)++;
			continue;
		}
		if (mapping_of(unwinder_find(u, &key), &maps[i], &pm->m[pm->n]))
			pm->n++;
	}
	qsort(pm->m, pm->n, sizeof(pm->m[0]), mapping_cmp);
	pm->tgid = tgid;
	if (!ps || (ps->last && !memcmp(ps->last, pm, sizeof(*pm)))) {
		err = 0; /* no slot (the walker finds mappings itself), or unchanged */
		goto out;
	}
	/* fill the buffer not in use, then switch the walker over to it */
	next = 2 * slot + (ps->buf ^ 1);
	err = bpf_map_update_elem(u->maps.proc_maps, &next, pm, BPF_ANY) ? -errno : 0;
	next -= 2 * slot;
	if (!err && bpf_map_update_elem(u->maps.proc_maps_cur, &slot, &next, BPF_ANY))
		err = -errno;
	if (!err) {
		ps->buf = next;
		free(ps->last);
		ps->last = pm;
		pm = NULL;
		err = 1;
	}
out:
	free(pm);
	proc_maps_free(maps, n);
	return err;
}

void unwinder_keep_tables(struct unwinder *u, bool keep)
{
	u->keep_tables = keep;
}

int unwinder_image_build(const struct unwinder *u, int pid, void **blob, size_t *len,
			 struct unwinder_image_stats *st)
{
	struct unwinder_image_stats s = { 0 };
	struct table_image_mapping *im;
	const struct unwind_object *o;
	struct proc_map *maps;
	struct file_key key;
	size_t n, i, k = 0;
	uint64_t bias;
	int err;

	*blob = NULL;
	*len = 0;
	if (st)
		*st = s;
	err = proc_maps_read(pid, true, &maps, &n);
	if (err)
		return err;
	im = calloc(n ? n : 1, sizeof(*im));
	if (!im) {
		proc_maps_free(maps, n);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		/* as unwinder_add_process takes them: a file to read */
		if (maps[i].ino == 0 || maps[i].path[0] != '/') {
			s.no_file++;
			continue;
		}
		s.mappings++;
		key.dev = maps[i].dev;
		key.ino = maps[i].ino;
		o = unwinder_find(u, &key);
		if (!o) {
			s.unknown++;
			continue;
		}
		if (!o->table) {
			if (o->loaded)
				s.released++;
			else
				s.no_table++;
			continue;
		}
		if (!mapping_bias(o, &maps[i], &bias)) {
			s.outside++;
			continue;
		}
		im[k++] = (struct table_image_mapping){
			.table = o->table, .start = maps[i].start, .end = maps[i].end, .bias = bias
		};
	}
	proc_maps_free(maps, n);
	err = table_image_build(im, k, blob, len);
	free(im);
	if (err)
		return err;
	s.in_image = (uint32_t)k;
	s.tables = ((const struct unwind_image_header *)*blob)->ntables;
	if (st)
		*st = s;
	return 0;
}

void unwinder_stats(const struct unwinder *u, struct unwinder_stats *st)
{
	size_t i;

	memset(st, 0, sizeof(*st));
	st->objects = (uint32_t)u->n;
	for (i = 0; i < u->n; i++) {
		st->loaded += u->objs[i]->loaded;
		st->failed += u->objs[i]->error != 0 && u->objs[i]->error != -ENOSPC;
	}
	st->dropped_full = u->dropped_full;
	st->slots_none = u->slots_none;
	st->mappings_full = u->mappings_full;
	st->rows_used = u->rows_used;
	st->rows_cap = u->maps.rows_cap;
	st->rules_used = u->rules_used;
	st->rules_cap = u->maps.rules_cap;
	st->pages_used = u->pages_used;
	st->bytes = u->bytes;
}

uint64_t unwind_object_elf_addr(const struct unwind_object *o, uint64_t start, uint64_t pgoff,
				uint64_t pc)
{
	uint64_t off = pc - start + pgoff;
	uint32_t i;

	for (i = 0; i < o->nsegs; i++) {
		if (off >= o->segs[i].off_start && off < o->segs[i].off_end)
			return off + o->segs[i].vaddr_delta;
	}
	return off; /* outside executable segments: the file offset is the best name */
}
