/* Separate debug file lookup: by build id under each debug root, then by
 * .gnu_debuglink next to the object and under the roots, each candidate
 * checked (same build id, or the link's CRC32) so that a stale or unrelated
 * file is never taken for the object's debug info. */
#define _GNU_SOURCE /* asprintf, strndup */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_id.h"
#include "debug_file.h"
#include "table.h"

#define SYSTEM_DEBUG_ROOT "/usr/lib/debug"
#define CRC_CHUNK 65536
/* A .gnu_debuglink section is a file name and a CRC; anything longer than
 * a path can be is not read. */
#define DEBUGLINK_MAX (PATH_MAX + 8)

/* The I-th debug root: the caller's extra dirs, then the system one. */
static const char *debug_root(const char *const *extra_dirs, size_t i)
{
	size_t n = 0;

	while (extra_dirs && extra_dirs[n])
		n++;
	if (i < n)
		return extra_dirs[i];
	return i == n ? SYSTEM_DEBUG_ROOT : NULL;
}

/* CRC-32 (IEEE 802.3, reflected, as zlib and .gnu_debuglink use it). */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
	int k;

	crc = ~crc;
	while (n--) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

/*
 * Opens candidate PATH for reading when it is a regular file other than the
 * one open at FD.  O_NONBLOCK and the check on the open fd (not on a stat
 * of the path first): candidates lie in directories the object's owner may
 * write, and a FIFO put there must neither hang us nor be read.
 */
static int candidate_open(int fd, const char *path)
{
	struct stat self, st;
	int cfd;

	cfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (cfd < 0)
		return -errno;
	if (fstat(cfd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (fstat(fd, &self) == 0 && st.st_dev == self.st_dev && st.st_ino == self.st_ino)) {
		close(cfd);
		return -ENOENT;
	}
	return cfd;
}

static int file_crc32(int fd, uint32_t *crc)
{
	uint8_t *buf;
	ssize_t n;
	int ret = 0;

	buf = malloc(CRC_CHUNK);
	if (!buf)
		return -ENOMEM;
	*crc = 0;
	while ((n = read(fd, buf, CRC_CHUNK)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			break;
		}
		*crc = crc32_update(*crc, buf, (size_t)n);
	}
	free(buf);
	return ret;
}

/* True when candidate PATH is another regular file carrying build id ID. */
static bool build_id_matches(int fd, const char *path, const uint8_t *id, int len)
{
	uint8_t other[TABLE_BUILD_ID_MAX];
	int cfd, n;

	cfd = candidate_open(fd, path);
	if (cfd < 0)
		return false;
	n = elf_build_id_fd(cfd, other, sizeof(other));
	close(cfd);
	return n == len && memcmp(other, id, (size_t)len) == 0;
}

/* ROOT/.build-id/xx/yyyy.debug for ID, malloc'd, or NULL. */
static char *build_id_path(const char *root, const uint8_t *id, int len)
{
	size_t size = strlen(root) + sizeof("/.build-id/xx/.debug") + 2 * (size_t)len;
	char *path = malloc(size);
	size_t pos;
	int i;

	if (!path)
		return NULL;
	pos = (size_t)snprintf(path, size, "%s/.build-id/%02x/", root, id[0]);
	for (i = 1; i < len; i++)
		pos += (size_t)snprintf(path + pos, size - pos, "%02x", id[i]);
	snprintf(path + pos, size - pos, ".debug");
	return path;
}

static int find_by_build_id(int fd, const char *const *extra_dirs, char **out)
{
	uint8_t id[TABLE_BUILD_ID_MAX];
	const char *root;
	char *cand;
	size_t i;
	int len;

	len = elf_build_id_fd(fd, id, sizeof(id));
	if (len < 0)
		return len == -ENOBUFS ? -ENOENT : len;
	if (len < 2)
		return -ENOENT;
	for (i = 0; (root = debug_root(extra_dirs, i)) != NULL; i++) {
		cand = build_id_path(root, id, len);
		if (!cand)
			return -ENOMEM;
		if (build_id_matches(fd, cand, id, len)) {
			*out = cand;
			return 0;
		}
		free(cand);
	}
	return -ENOENT;
}

/* The .gnu_debuglink name (malloc'd) and CRC of the object at FD: a
 * NUL-terminated name, padded to 4 bytes, then the CRC (as libdwelf's
 * dwelf_elf_gnu_debuglink() reads it). */
static int debuglink_read(int fd, char **name, uint32_t *crc)
{
	struct elf_section sec;
	struct elf_image img;
	const char *why;
	struct stat st;
	size_t len, crc_off;
	int ret;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ENOEXEC;
	ret = elf_image_open_fd(&img, fd, (uint64_t)st.st_size, &why);
	if (ret)
		return ret;
	ret = elf_image_section(&img, ".gnu_debuglink", DEBUGLINK_MAX, &sec);
	elf_image_close(&img);
	if (ret)
		return ret == -ENOMEM || ret == -EIO ? ret : -ENOENT;
	ret = -ENOENT;
	len = strnlen((const char *)sec.data, sec.size);
	crc_off = (len + 4) & ~(size_t)3;
	if (len == 0 || len == sec.size || crc_off > sec.size || sec.size - crc_off < 4)
		goto out;
	memcpy(crc, sec.data + crc_off, 4);
	*crc = le32toh(*crc);
	*name = strndup((const char *)sec.data, len);
	ret = *name ? 0 : -ENOMEM;
out:
	elf_section_release(&sec);
	return ret;
}

/* The real directory of PATH, malloc'd ("." when PATH has none). */
static char *object_dir(const char *path)
{
	char *real = realpath(path, NULL);
	const char *p = real ? real : path;
	const char *slash = strrchr(p, '/');
	char *dir;

	if (!slash)
		dir = strdup(".");
	else
		dir = strndup(p, slash == p ? 1 : (size_t)(slash - p));
	free(real);
	return dir;
}

/* Checks candidate FMT-built path; returns 0 and hands it over on a match. */
static int try_link(int fd, uint32_t crc, char **out, const char *fmt, const char *a,
		    const char *b)
{
	uint32_t got = 0;
	char *cand;
	int cfd, err;

	if (asprintf(&cand, fmt, a, b) < 0)
		return -ENOMEM;
	cfd = candidate_open(fd, cand);
	if (cfd >= 0) {
		err = file_crc32(cfd, &got);
		close(cfd);
		if (err == 0 && got == crc) {
			*out = cand;
			return 0;
		}
	}
	free(cand);
	return -ENOENT;
}

/* OBJDIR/NAME, then OBJDIR/.debug/NAME. */
static int search_beside(int fd, const char *dir, const char *name, uint32_t crc, char **out)
{
	int ret;

	ret = try_link(fd, crc, out, "%s/%s", dir, name);
	if (ret == -ENOENT)
		ret = try_link(fd, crc, out, "%s/.debug/%s", dir, name);
	return ret;
}

/* ROOT/OBJDIR/NAME, then ROOT/NAME. */
static int search_root(int fd, const char *root, const char *dir, const char *name,
		       uint32_t crc, char **out)
{
	char *sub;
	int ret = -ENOENT;

	if (dir) {
		if (asprintf(&sub, "%s%s", root, dir) < 0)
			return -ENOMEM;
		ret = try_link(fd, crc, out, "%s/%s", sub, name);
		free(sub);
	}
	if (ret == -ENOENT)
		ret = try_link(fd, crc, out, "%s/%s", root, name);
	return ret;
}

static int find_by_debuglink(int fd, const char *path, const char *const *extra_dirs, char **out)
{
	const char *root;
	char *name = NULL, *dir = NULL;
	uint32_t crc = 0;
	size_t i;
	int ret;

	ret = debuglink_read(fd, &name, &crc);
	if (ret)
		return ret;
	ret = -ENOENT;
	if (path) {
		dir = object_dir(path);
		if (!dir) {
			ret = -ENOMEM;
			goto out;
		}
		ret = search_beside(fd, dir, name, crc, out);
	}
	for (i = 0; ret == -ENOENT && (root = debug_root(extra_dirs, i)) != NULL; i++)
		ret = search_root(fd, root, dir, name, crc, out);
out:
	free(dir);
	free(name);
	return ret;
}

int debug_file_find(int fd, const char *path, const char *const *extra_dirs, char **out)
{
	int ret;

	*out = NULL;
	ret = find_by_build_id(fd, extra_dirs, out);
	if (ret != -ENOENT)
		return ret;
	return find_by_debuglink(fd, path, extra_dirs, out);
}
