/* The link map walk behind allocator detection for -p: the order the
 * dynamic linker searches objects in is the order of its link map. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "link_map.h"

/* struct r_debug and struct link_map on x86_64 (glibc <link.h>). */
#define R_DEBUG_MAP_OFF 8
#define LINK_MAP_NAME_OFF 8
#define LINK_MAP_NEXT_OFF 24
/* A link map longer than this is corrupt (or we are reading garbage). */
#define LINK_MAP_MAX 4096

static int read_u64(int fd, uint64_t addr, uint64_t *v)
{
	return pread(fd, v, sizeof(*v), (off_t)addr) == sizeof(*v) ? 0 : -EIO;
}

static char *read_str(int fd, uint64_t addr)
{
	char buf[PATH_MAX];
	ssize_t got = pread(fd, buf, sizeof(buf) - 1, (off_t)addr);

	if (got <= 0)
		return NULL;
	buf[got] = 0;
	return strdup(buf);
}

static int names_push(char ***names, size_t *n, char *s)
{
	char **grown = realloc(*names, (*n + 2) * sizeof(*grown));

	if (!grown) {
		free(s);
		return -ENOMEM;
	}
	grown[(*n)++] = s;
	grown[*n] = NULL;
	*names = grown;
	return 0;
}

int link_map_read(int pid, uint64_t r_debug, char ***names, size_t *n)
{
	uint64_t lm, name_addr;
	char path[64], exe[PATH_MAX], *name;
	ssize_t len;
	int fd, err = 0, i;

	*names = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (read_u64(fd, r_debug + R_DEBUG_MAP_OFF, &lm)) {
		err = -EIO;
		goto out;
	}
	for (i = 0; lm && i < LINK_MAP_MAX && !err; i++) {
		if (read_u64(fd, lm + LINK_MAP_NAME_OFF, &name_addr)) {
			err = -EIO;
			break;
		}
		name = name_addr ? read_str(fd, name_addr) : NULL;
		if (name && !name[0] && *n == 0) {
			snprintf(path, sizeof(path), "/proc/%d/exe", pid);
			len = readlink(path, exe, sizeof(exe) - 1);
			free(name);
			name = len > 0 ? strndup(exe, (size_t)len) : NULL;
		}
		/* the vDSO ("linux-vdso.so.1") is in the map but is no file */
		if (name && name[0] == '/')
			err = names_push(names, n, name);
		else
			free(name);
		if (!err && read_u64(fd, lm + LINK_MAP_NEXT_OFF, &lm))
			err = -EIO;
	}
out:
	close(fd);
	if (err) {
		link_map_free(*names);
		*names = NULL;
		*n = 0;
	}
	return err;
}

void link_map_free(char **names)
{
	size_t i;

	for (i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}
