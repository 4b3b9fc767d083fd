/* The preload library in a traced process: found by its file name among
 * the process's objects, its sites read from its USDT notes, its control
 * block from .dynsym, and the control block reached through /proc/PID/mem
 * at the address the process maps it (found by device and inode, so a
 * path given through a symlink or a relative LD_PRELOAD still matches). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "allocator.h"
#include "elf_symbols.h"
#include "preload_sites.h"
#include "proc_maps.h"
#include "usdt.h"

#define FN_SYM(id, sym, kind, cls) sym,
static const char *const interposed[] = { DWLEAK_PRELOAD_FUNCS(FN_SYM) };
#undef FN_SYM

/* glibc's internal names, which some programs call to reach the
 * allocator under their own malloc; jemalloc and tcmalloc export them. */
static const char *const libc_internal[] = {
	"__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_free",
	"__libc_memalign", "__libc_valloc", "__libc_pvalloc",
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static bool is_library(const char *name)
{
	const char *b = strrchr(name, '/');

	return !strncmp(b ? b + 1 : name, DWLEAK_PRELOAD_NAME, strlen(DWLEAK_PRELOAD_NAME));
}

static bool is_interposed(const char *sym)
{
	size_t i;

	for (i = 0; i < N(interposed); i++)
		if (!strcmp(sym, interposed[i]))
			return true;
	return false;
}

/* Reads the sites and the control block of the library at PATH. */
static int library_read(const char *path, struct preload_sites *s, char **why)
{
	struct elf_sym_want ctl = { .name = DWLEAK_PRELOAD_CONTROL_SYM, .data = true, .dynsym_only = true };
	const struct usdt_note *a, *f;
	struct usdt_note *notes;
	size_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return asprintf(why, "cannot open it: %s", strerror(errno)) < 0 ? -ENOMEM : -ENOTSUP;
	err = usdt_notes_read(fd, &notes, &n);
	if (!err)
		elf_symbols_find(fd, &ctl, 1);
	close(fd);
	if (err == -ENOMEM)
		return err;
	if (err)
		return asprintf(why, "it is not an ELF object") < 0 ? -ENOMEM : -ENOTSUP;
	a = usdt_note_find(notes, n, DWLEAK_PRELOAD_PROVIDER, DWLEAK_PRELOAD_SITE_ALLOC);
	f = usdt_note_find(notes, n, DWLEAK_PRELOAD_PROVIDER, DWLEAK_PRELOAD_SITE_FREE);
	if (a && f && a->sem_off && f->sem_off && ctl.found && ctl.file_off) {
		s->alloc_off = a->pc_off;
		s->alloc_sem_off = a->sem_off;
		s->free_off = f->pc_off;
		s->free_sem_off = f->sem_off;
		s->control_off = ctl.file_off;
	} else {
		err = asprintf(why, "it has no dwleak:alloc and dwleak:free sites with semaphores, or no %s "
				    "(another version?)", DWLEAK_PRELOAD_CONTROL_SYM) < 0 ? -ENOMEM : -ENOTSUP;
	}
	usdt_notes_free(notes, n);
	return err;
}

/* The first interposed function object I (before the library) defines. */
static const char *defines_interposed(const char *path)
{
	struct elf_sym_want want[N(interposed)];
	size_t k;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	for (k = 0; k < N(interposed); k++)
		want[k] = (struct elf_sym_want){ .name = interposed[k], .dynsym_only = true };
	elf_symbols_find(fd, want, N(interposed));
	close(fd);
	for (k = 0; k < N(interposed); k++)
		if (want[k].found)
			return interposed[k];
	return NULL;
}

struct imports_ctx {
	const char *found; /* the first allocator function imported and not interposed */
	char buf[128];
};

static void import_seen(void *arg, const char *name)
{
	struct imports_ctx *c = arg;
	size_t i;

	if (c->found || is_interposed(name))
		return;
	for (i = 0; i < N(libc_internal); i++)
		if (!strcmp(name, libc_internal[i]))
			break;
	if (i == N(libc_internal) && !allocator_name_known(name))
		return;
	snprintf(c->buf, sizeof(c->buf), "%s", name);
	c->found = c->buf;
}

/* Finds the library among the objects; with ORDERED, every interposed
 * function must resolve to it first (LD_PRELOAD). */
static int sites_find(char *const *paths, char *const *names, size_t n, struct preload_sites *s, char **why,
		      bool ordered)
{
	struct imports_ctx ic = { 0 };
	const char *sym;
	size_t lib, i;
	int err, fd;

	memset(s, 0, sizeof(*s));
	*why = NULL;
	for (lib = 0; lib < n && !is_library(names[lib]); lib++)
		;
	if (lib == n)
		return -ENOENT;
	err = library_read(paths[lib], s, why);
	if (err)
		return err;
	for (i = 0; ordered && i < lib; i++) {
		sym = defines_interposed(paths[i]);
		if (sym)
			return asprintf(why, "%s comes before it in symbol lookup order and defines %s", names[i],
					sym) < 0 ? -ENOMEM : -ENOTSUP;
	}
	for (i = 0; i < n && !ic.found; i++) {
		if (i == lib || (fd = open(paths[i], O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		elf_symbols_imports(fd, import_seen, &ic);
		close(fd);
		if (ic.found)
			return asprintf(why, "%s calls %s, which the library does not interpose", names[i], ic.found) < 0
				       ? -ENOMEM
				       : -ENOTSUP;
	}
	s->path = strdup(paths[lib]);
	s->name = strdup(names[lib]);
	if (!s->path || !s->name) {
		preload_sites_free(s);
		return -ENOMEM;
	}
	return 0;
}

int preload_sites_find(char *const *paths, char *const *names, size_t n, struct preload_sites *s, char **why)
{
	return sites_find(paths, names, n, s, why, true);
}

int preload_sites_find_injected(char *const *paths, char *const *names, size_t n, struct preload_sites *s,
				char **why)
{
	return sites_find(paths, names, n, s, why, false);
}

/* Whether O's function F is the definition of an interposed name there. */
static bool covered(const struct alloc_object *o, const struct alloc_func *f, const struct elf_sym_want *want)
{
	size_t k;

	if (is_interposed(f->name))
		return true;
	for (k = 0; k < N(interposed); k++)
		if (want[k].found && want[k].vaddr == f->vaddr)
			return true;
	(void)o;
	return false;
}

int preload_complement(const struct allocator *a, struct allocator *out)
{
	struct elf_sym_want want[N(interposed)];
	size_t i, j, k;
	int err = allocator_copy(out, a), fd;

	if (err)
		return err;
	for (i = 0; i < out->nobjs; i++) {
		struct alloc_object *o = &out->objs[i];

		for (k = 0; k < N(interposed); k++)
			want[k] = (struct elf_sym_want){ .name = interposed[k], .dynsym_only = true };
		fd = open(o->path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			elf_symbols_find(fd, want, N(interposed));
			close(fd);
		}
		for (j = k = 0; j < o->nfuncs; j++)
			if (!covered(o, &o->funcs[j], want))
				o->funcs[k++] = o->funcs[j];
		o->nfuncs = k;
	}
	return 0;
}

int preload_sites_copy(struct preload_sites *dst, const struct preload_sites *src)
{
	*dst = *src;
	dst->path = src->path ? strdup(src->path) : NULL;
	dst->name = src->name ? strdup(src->name) : NULL;
	if ((src->path && !dst->path) || (src->name && !dst->name)) {
		preload_sites_free(dst);
		return -ENOMEM;
	}
	return 0;
}

void preload_sites_free(struct preload_sites *s)
{
	free(s->path);
	free(s->name);
	memset(s, 0, sizeof(*s));
}

uint64_t preload_file_addr(pid_t pid, const struct preload_sites *s, uint64_t off, size_t len)
{
	struct proc_map *maps;
	struct stat st;
	uint64_t addr = 0, dev;
	size_t n, i;

	if (stat(s->path, &st) || proc_maps_read(pid, false, &maps, &n))
		return 0;
	dev = proc_kdev(major(st.st_dev), minor(st.st_dev));
	for (i = 0; i < n && !addr; i++) {
		const struct proc_map *m = &maps[i];

		if (m->ino == st.st_ino && m->dev == dev && m->readable && off >= m->offset &&
		    off - m->offset + len <= m->end - m->start)
			addr = m->start + (off - m->offset);
	}
	proc_maps_free(maps, n);
	return addr;
}

uint64_t preload_control_addr(pid_t pid, const struct preload_sites *s)
{
	return preload_file_addr(pid, s, s->control_off, sizeof(struct dwleak_preload_control));
}

/* Opens process PID's memory (FLAGS: O_RDONLY or O_RDWR). */
static int mem_open(pid_t pid, int flags)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The control block of S's library in process PID read into *C (its
 * address in *ADDR), through PID's memory opened with FLAGS.  Returns
 * the open descriptor (the caller closes it), or -ENOENT (the library is
 * not mapped), -EIO/-errno (the read failed), -EPROTO (not a control
 * block of this version). */
static int control_open(pid_t pid, const struct preload_sites *s, int flags, struct dwleak_preload_control *c,
			uint64_t *addr)
{
	ssize_t got;
	int fd;

	*addr = preload_control_addr(pid, s);
	if (!*addr)
		return -ENOENT;
	fd = mem_open(pid, flags);
	if (fd < 0)
		return fd;
	got = pread(fd, c, sizeof(*c), (off_t)*addr);
	if (got != (ssize_t)sizeof(*c)) {
		close(fd);
		return got < 0 ? -errno : -EIO;
	}
	if (c->magic != DWLEAK_PRELOAD_MAGIC || c->version != DWLEAK_PRELOAD_VERSION) {
		close(fd);
		return -EPROTO;
	}
	return fd;
}

/* Writes the LEN bytes at V into field OFF of the control block at ADDR. */
static int control_put(int fd, uint64_t addr, size_t off, const void *v, size_t len)
{
	return pwrite(fd, v, len, (off_t)(addr + off)) == (ssize_t)len ? 0 : -errno ?: -EIO;
}

int preload_route_request(pid_t pid, const struct preload_sites *s)
{
	struct dwleak_preload_control c;
	uint64_t addr;
	uint32_t req;
	int fd = control_open(pid, s, O_RDWR, &c, &addr), err;

	if (fd < 0)
		return fd;
	req = c.route_request + 1;
	err = !c.injected ? -EPROTO
			  : control_put(fd, addr, offsetof(struct dwleak_preload_control, route_request), &req,
					sizeof(req));
	close(fd);
	return err;
}

int preload_control_read(pid_t pid, const struct preload_sites *s, struct dwleak_preload_control *out)
{
	uint64_t addr;
	int fd = control_open(pid, s, O_RDONLY, out, &addr);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int preload_control_write(pid_t pid, const struct preload_sites *s, uint64_t sample_bytes, bool index,
			  bool fresh_index)
{
	struct dwleak_preload_control c;
	uint32_t gen, want_index = index, index_gen;
	uint64_t addr;
	int fd = control_open(pid, s, O_RDWR, &c, &addr), err;

	if (fd < 0)
		return fd;
	/* the mode first, the generation last: a library that sees the new
	 * generation sees the new mode */
	gen = c.generation + 1;
	/* a new index unless the process's copy is its own (a fork child) */
	index_gen = c.index_gen + (index && fresh_index);
	err = control_put(fd, addr, offsetof(struct dwleak_preload_control, index_gen), &index_gen,
			  sizeof(index_gen));
	err = err ?: control_put(fd, addr, offsetof(struct dwleak_preload_control, index_request), &want_index,
			  sizeof(want_index));
	err = err ?: control_put(fd, addr, offsetof(struct dwleak_preload_control, sample_bytes), &sample_bytes,
			  sizeof(sample_bytes));
	err = err ?: control_put(fd, addr, offsetof(struct dwleak_preload_control, generation), &gen, sizeof(gen));
	close(fd);
	return err;
}
