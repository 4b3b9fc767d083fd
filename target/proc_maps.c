/* /proc/PID/maps parser: which files a process runs code from, and where,
 * and which memory it can write (the leak check's roots); and where the
 * bytes of a mapped file are opened (map_files). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc_maps.h"

static int map_parse(char *line, struct proc_map *m)
{
	unsigned int major, minor;
	char perms[8];
	int pathpos = 0;
	char *nl;

	if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &m->start, &m->end, perms, &m->offset,
		   &major, &minor, &m->ino, &pathpos) < 7)
		return -EINVAL;
	nl = strchr(line + pathpos, '\n');
	if (nl)
		*nl = 0;
	m->dev = proc_kdev(major, minor);
	m->readable = perms[0] == 'r';
	m->writable = perms[1] == 'w';
	m->exec = perms[2] == 'x';
	m->shared = perms[3] == 's';
	m->path = strdup(line + pathpos);
	return m->path ? 0 : -ENOMEM;
}

int proc_maps_read(int pid, bool exec_only, struct proc_map **maps, size_t *n)
{
	struct proc_map *arr = NULL, *grown, m;
	size_t cap = 0, cnt = 0, linecap = 0;
	char *line = NULL, *path;
	int err = 0;
	FILE *f;

	if (asprintf(&path, "/proc/%d/maps", pid) < 0)
		return -ENOMEM;
	f = fopen(path, "re");
	free(path);
	if (!f)
		return -errno;
	while (getline(&line, &linecap, f) > 0) {
		memset(&m, 0, sizeof(m));
		if (map_parse(line, &m))
			continue;
		if (exec_only && !m.exec) {
			free(m.path);
			continue;
		}
		if (cnt == cap) {
			cap = cap ? cap * 2 : 64;
			grown = realloc(arr, cap * sizeof(*arr));
			if (!grown) {
				free(m.path);
				err = -ENOMEM;
				break;
			}
			arr = grown;
		}
		arr[cnt++] = m;
	}
	free(line);
	fclose(f);
	if (err) {
		proc_maps_free(arr, cnt);
		return err;
	}
	*maps = arr;
	*n = cnt;
	return 0;
}

void proc_maps_free(struct proc_map *maps, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(maps[i].path);
	free(maps);
}

ssize_t proc_maps_find(const struct proc_map *maps, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && maps[lo].start <= addr ? (ssize_t)lo : -1;
}

char *proc_map_files_path(int pid, const struct proc_map *m)
{
	char *p;

	if (asprintf(&p, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)m->start,
		     (unsigned long long)m->end) < 0)
		return NULL;
	return p;
}

static char *root_path(int pid, const char *name)
{
	char *p;

	if (asprintf(&p, "/proc/%d/root%s", pid, name) < 0)
		return NULL;
	return p;
}

char *proc_maps_file_path(int pid, const struct proc_map *maps, size_t n, const char *name,
			  bool *replaced)
{
	static const char deleted[] = " (deleted)";
	size_t len = strlen(name), i;

	for (i = 0; i < n; i++) {
		const char *p = maps[i].path;

		if (strncmp(p, name, len) || (p[len] && strcmp(p + len, deleted)))
			continue;
		if (replaced)
			*replaced = p[len] != 0;
		return proc_map_files_path(pid, &maps[i]);
	}
	return root_path(pid, name);
}

int proc_map_open(int pid, const struct proc_map *m)
{
	char *p = proc_map_files_path(pid, m);
	int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;

	free(p);
	if (fd >= 0 || m->path[0] != '/')
		return fd;
	p = root_path(pid, m->path);
	fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
	free(p);
	return fd;
}
