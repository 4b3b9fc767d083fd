/* A process's objects in symbol lookup order and its dynamic linker's
 * hook: from the link map of a running process, or from the loader's
 * trace mode for a command about to start. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf_symbols.h"
#include "link_map.h"
#include "objects.h"
#include "proc_maps.h"

size_t ld_preload_count(const char *value)
{
	size_t n = 0, len;

	while (value && *value) {
		value += strspn(value, " :");
		len = strcspn(value, " :");
		n += len > 0;
		value += len;
	}
	return n;
}

/* The value of NAME in PID's environment (as it was at exec), malloc'd,
 * or NULL. */
static char *proc_environ_get(pid_t pid, const char *name)
{
	char path[64], *entry = NULL, *value = NULL;
	size_t cap = 0, len = strlen(name);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	while (getdelim(&entry, &cap, 0, f) > 0) {
		if (!strncmp(entry, name, len) && entry[len] == '=') {
			value = strdup(entry + len + 1);
			break;
		}
	}
	free(entry);
	fclose(f);
	return value;
}

static bool is_ld_so(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld-", 3);
}

/* Finds the debugger hook in the dynamic linker at H->path; without it (a
 * static program, an unusual loader) new objects are found by rescans. */
static void dl_hook_find(struct dl_hook *h)
{
	struct elf_sym_want want[2] = {
		{ .name = "_dl_debug_state" },
		{ .name = "_r_debug", .data = true },
	};
	int fd;

	if (!h->path)
		return;
	fd = open(h->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	elf_symbols_find(fd, want, 2);
	close(fd);
	h->found = want[0].found;
	h->state_vaddr = want[0].vaddr;
	h->state_off = want[0].file_off;
	h->r_debug_vaddr = want[1].found ? want[1].vaddr : 0;
}

/* NAMES[0..*N) for a process whose link map cannot be read: the mapped
 * executable files in address order, each once. */
static int names_from_maps(const struct proc_map *maps, size_t nmaps, char ***names, size_t *n)
{
	size_t i, j, k = 0;

	*names = calloc(nmaps + 1, sizeof(**names));
	if (!*names)
		return -ENOMEM;
	for (i = 0; i < nmaps; i++) {
		if (maps[i].path[0] != '/' || !maps[i].exec)
			continue;
		for (j = 0; j < k && strcmp((*names)[j], maps[i].path); j++)
			;
		if (j == k && !((*names)[k++] = strdup(maps[i].path)))
			return -ENOMEM;
	}
	*n = k;
	return 0;
}

int proc_objects_of_pid(pid_t pid, struct proc_objects *out)
{
	size_t nmaps, i;
	struct proc_map *maps;
	uint64_t ld_bias = 0;
	char *preload;
	int err;

	memset(out, 0, sizeof(*out));
	err = proc_maps_read(pid, false, &maps, &nmaps);
	if (err)
		return err;
	for (i = 0; i < nmaps; i++) {
		if (maps[i].path[0] != '/' || !is_ld_so(maps[i].path))
			continue;
		if (!out->dl.path)
			out->dl.path = proc_maps_file_path(pid, maps, nmaps, maps[i].path, NULL);
		if (maps[i].offset == 0 && !ld_bias)
			ld_bias = maps[i].start;
	}
	dl_hook_find(&out->dl);
	if (!(out->dl.r_debug_vaddr && ld_bias &&
	      link_map_read(pid, ld_bias + out->dl.r_debug_vaddr, &out->names, &out->n) == 0 && out->n))
		err = names_from_maps(maps, nmaps, &out->names, &out->n);
	out->paths = err ? NULL : calloc(out->n + 1, sizeof(*out->paths));
	for (i = 0; out->paths && i < out->n; i++) {
		bool replaced = false;

		out->paths[i] = proc_maps_file_path(pid, maps, nmaps, out->names[i], &replaced);
		if (!out->paths[i])
			break;
		if (replaced && !out->nreplaced++)
			out->first_replaced = out->names[i];
	}
	proc_maps_free(maps, nmaps);
	if (!err && !(out->paths && i == out->n))
		err = -ENOMEM;
	preload = proc_environ_get(pid, "LD_PRELOAD");
	out->npreload = ld_preload_count(preload);
	free(preload);
	if (err)
		proc_objects_free(out);
	return err;
}

/* The head of glibc's struct r_debug (link.h), as it lies in memory. */
struct r_debug_head {
	int32_t version;   /* 0 until the dynamic linker set it up */
	int32_t pad;
	uint64_t map;	   /* the link map's first entry */
	uint64_t brk;	   /* _dl_debug_state */
	int32_t state;	   /* RT_CONSISTENT (0), RT_ADD, RT_DELETE */
};

int proc_linker_settled(pid_t pid)
{
	struct dl_hook dl = { 0 };
	struct r_debug_head r = { 0 };
	struct proc_map *maps;
	uint64_t bias = 0;
	size_t nmaps, i;
	char path[64];
	int err, fd;
	ssize_t got;

	err = proc_maps_read(pid, false, &maps, &nmaps);
	if (err)
		return err;
	for (i = 0; i < nmaps; i++) {
		if (maps[i].path[0] != '/' || !is_ld_so(maps[i].path) || maps[i].offset)
			continue;
		bias = maps[i].start;
		dl.path = proc_maps_file_path(pid, maps, nmaps, maps[i].path, NULL);
		break;
	}
	proc_maps_free(maps, nmaps);
	if (!bias) {
		free(dl.path);
		return 1; /* no dynamic linker: a static program is all there */
	}
	dl_hook_find(&dl);
	free(dl.path);
	if (!dl.r_debug_vaddr)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = pread(fd, &r, sizeof(r), (off_t)(bias + dl.r_debug_vaddr));
	err = got < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	return got == (ssize_t)sizeof(r) && r.version && r.map && r.state == 0;
}

int proc_objects_function(const struct proc_objects *o, const char *name, const char **path, uint64_t *off)
{
	size_t i;
	int fd;

	for (i = 0; i < o->n; i++) {
		struct elf_sym_want w = { .name = name, .dynsym_only = o->n > 1 }; /* static: .symtab */

		fd = open(o->paths[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		elf_symbols_find(fd, &w, 1);
		close(fd);
		if (w.found && w.file_off) {
			*path = o->paths[i];
			*off = w.file_off;
			return 0;
		}
	}
	return -ENOENT;
}

static void strings_free(char **s)
{
	size_t i;

	for (i = 0; s && s[i]; i++)
		free(s[i]);
	free(s);
}

static char **strings_copy(char *const *src, size_t n)
{
	char **dst = calloc(n + 1, sizeof(*dst));
	size_t i;

	for (i = 0; dst && i < n; i++) {
		if (!(dst[i] = strdup(src[i]))) {
			strings_free(dst);
			return NULL;
		}
	}
	return dst;
}

int proc_objects_copy(struct proc_objects *dst, const struct proc_objects *src)
{
	*dst = *src;
	dst->paths = strings_copy(src->paths, src->n);
	dst->names = strings_copy(src->names, src->n);
	dst->dl.path = src->dl.path ? strdup(src->dl.path) : NULL;
	dst->first_replaced = NULL;
	if (!dst->paths || !dst->names || (src->dl.path && !dst->dl.path)) {
		proc_objects_free(dst);
		return -ENOMEM;
	}
	return 0;
}

void proc_objects_free(struct proc_objects *o)
{
	strings_free(o->paths);
	strings_free(o->names);
	free(o->dl.path);
	memset(o, 0, sizeof(*o));
}
