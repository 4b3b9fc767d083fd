/* Keeps compiled unwind tables on disk, one file per object, for root as
 * much as for users.  Nothing read back is trusted: the directory is used
 * only when nobody but us can write it, an entry is opened without
 * following links and read only when it is a private regular file of ours
 * no larger than its object could produce, and it is used only when its key
 * (a digest of the exact CFI bytes it was compiled from) and every check of
 * cache_entry_decode() agree; anything else is recompiled. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_entry.h"
#include "constants.h"
#include "table_cache.h"
#include "table_input.h"

#define CACHE_MAX_LINKS 40	  /* symbolic links one walk follows, as the kernel's limit */
#define CACHE_TMP_TRIES 16	  /* temporary names tried before a store gives up */
#define CACHE_DIR_MODE 0700	  /* created directories: ours alone */
#define CACHE_ENTRY_MODE 0600

/* The directory is open for the cache's lifetime and every entry is
 * reached relative to DIRFD, so nothing done to the path after open can
 * redirect a read or a write.  DIRFD is -1 exactly when BYPASS. */
struct table_cache {
	char *dir;
	int dirfd;
	bool bypass; /* TABLE_CACHE_ENV_DISABLE was set: compile every time */
	struct table_cache_stats stats;
};

/* What identifies one compiled table.  TEXT is compared in full against
 * the copy stored in the entry; NAME is the entry's file in the directory. */
struct cache_key {
	char *text;
	char *name;
};

static __thread char open_why[512];

const char *table_cache_why(void)
{
	return open_why[0] ? open_why : "no error";
}

static int __attribute__((format(printf, 2, 3))) refuse(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(open_why, sizeof(open_why), fmt, ap);
	va_end(ap);
	return err;
}

/* FNV-1a: cache file names from identities. */
static uint64_t fnv1a64(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len--) {
		h ^= *p++;
		h *= FNV64_PRIME;
	}
	return h;
}

/* --- The directory: walked without trusting anything on the way --- */

/* One walk of the cache path: AT is the directory reached, SHOWN its path
 * for messages, REST the components still to walk. */
struct dir_walk {
	int at;
	char *shown;
	char *rest;
	size_t pos; /* next unread byte of REST */
	int links;
	uid_t euid;
};

/*
 * Checks the directory open at FD, reached as SHOWN.  On the way (LAST
 * false) it must belong to root or the effective user, and others may not
 * write it unless it is sticky (/tmp: they cannot touch what is ours in
 * it).  The cache directory itself (LAST) must belong to the effective
 * user, and neither group nor others may write it.
 */
static int dir_check(const struct dir_walk *w, int fd, bool last)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return refuse(-errno, "cannot stat %s: %s", w->shown, strerror(errno));
	if (last) {
		if (st.st_uid != w->euid)
			return refuse(-EPERM, "%s is owned by uid %u, not by the effective user (uid %u)",
				      w->shown, (unsigned)st.st_uid, (unsigned)w->euid);
		if (st.st_mode & (S_IWGRP | S_IWOTH))
			return refuse(-EPERM, "%s is writable by %s (mode %04o)", w->shown,
				      st.st_mode & S_IWOTH ? "everyone" : "its group",
				      (unsigned)(st.st_mode & 07777));
		return 0;
	}
	if (st.st_uid != 0 && st.st_uid != w->euid)
		return refuse(-EPERM, "%s is owned by uid %u, neither root nor the effective user",
			      w->shown, (unsigned)st.st_uid);
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
		return refuse(-EPERM, "%s is writable by %s (mode %04o) and not sticky", w->shown,
			      st.st_mode & S_IWOTH ? "everyone" : "its group",
			      (unsigned)(st.st_mode & 07777));
	return 0;
}

/* The next component of W's path into *COMP (NUL-terminated in place);
 * false at the end.  *LAST is set when no component follows it. */
static bool next_component(struct dir_walk *w, char **comp, bool *last)
{
	char *p = w->rest + w->pos, *end;

	while (*p == '/')
		p++;
	if (!*p)
		return false;
	end = strchrnul(p, '/');
	w->pos = (size_t)(end - w->rest) + (*end ? 1 : 0);
	*end = '\0';
	*comp = p;
	for (p = w->rest + w->pos; *p == '/'; p++)
		;
	*last = *p == '\0';
	return true;
}

static int shown_append(struct dir_walk *w, const char *comp)
{
	char *s;

	if (asprintf(&s, "%s/%s", strcmp(w->shown, "/") ? w->shown : "", comp) < 0)
		return refuse(-ENOMEM, "out of memory");
	free(w->shown);
	w->shown = s;
	return 0;
}

/* Drops the last component of SHOWN (the link just read). */
static void shown_pop(struct dir_walk *w)
{
	char *slash = strrchr(w->shown, '/');

	if (slash && slash != w->shown)
		*slash = '\0';
	else if (slash)
		slash[1] = '\0';
}

static int reopen_root(struct dir_walk *w)
{
	close(w->at);
	free(w->shown);
	w->shown = strdup("/");
	w->at = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!w->shown || w->at < 0)
		return refuse(w->at < 0 ? -errno : -ENOMEM, "cannot open /");
	return dir_check(w, w->at, false);
}

/*
 * COMP in W->at is a symbolic link: follows it when root or the effective
 * user made it (W->at is trusted, so nobody else could have replaced it),
 * by splicing its target in front of the components still to walk.
 */
static int link_follow(struct dir_walk *w, const char *comp, bool last)
{
	char target[PATH_MAX], *rest;
	struct stat st;
	ssize_t n;

	if (fstatat(w->at, comp, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return refuse(-errno, "cannot stat %s: %s", w->shown, strerror(errno));
	if (!S_ISLNK(st.st_mode))
		return refuse(-ENOTDIR, "%s is not a directory", w->shown);
	if (last)
		return refuse(-ELOOP, "%s is a symbolic link, not a real directory", w->shown);
	if (st.st_uid != 0 && st.st_uid != w->euid)
		return refuse(-ELOOP, "%s is a symbolic link owned by uid %u", w->shown,
			      (unsigned)st.st_uid);
	if (++w->links > CACHE_MAX_LINKS)
		return refuse(-ELOOP, "%s: too many symbolic links", w->shown);
	n = readlinkat(w->at, comp, target, sizeof(target) - 1);
	if (n <= 0)
		return refuse(n < 0 ? -errno : -ENOENT, "cannot read link %s", w->shown);
	target[n] = '\0';
	if (asprintf(&rest, "%s/%s", target, w->rest + w->pos) < 0)
		return refuse(-ENOMEM, "out of memory");
	free(w->rest);
	w->rest = rest;
	w->pos = 0;
	if (target[0] == '/')
		return reopen_root(w);
	shown_pop(w);
	return 0;
}

/* Opens directory COMP in W->at without following a link, creating it
 * (mode 0700) when it is missing.  Returns the fd, -ELOOP or -ENOTDIR for
 * the caller to look at, or another negative errno with the reason set. */
static int component_open(struct dir_walk *w, const char *comp)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(w->at, comp, flags);

	if (fd < 0 && errno == ENOENT) {
		if (mkdirat(w->at, comp, CACHE_DIR_MODE) != 0 && errno != EEXIST)
			return refuse(-errno, "cannot create %s: %s", w->shown, strerror(errno));
		fd = openat(w->at, comp, flags);
	}
	if (fd >= 0 || errno == ELOOP || errno == ENOTDIR)
		return fd < 0 ? -errno : fd;
	return refuse(-errno, "cannot open %s: %s", w->shown, strerror(errno));
}

static int dir_walk_step(struct dir_walk *w, char *comp, bool last)
{
	int fd, err;

	if (strcmp(comp, "..") == 0)
		return refuse(-EINVAL, "%s: a cache path may not contain '..'", w->shown);
	err = shown_append(w, comp);
	if (err)
		return err;
	fd = component_open(w, comp);
	if (fd == -ELOOP || fd == -ENOTDIR)
		return link_follow(w, comp, last);
	if (fd < 0)
		return fd;
	err = dir_check(w, fd, last);
	close(w->at);
	w->at = fd;
	return err;
}

/* Opens directory PATH for the cache (see table_cache_open()). */
static int cache_dir_open(const char *path, int *out)
{
	struct dir_walk w = { .at = -1, .euid = geteuid() };
	bool last = false;
	char *comp;
	int err;

	open_why[0] = '\0';
	w.rest = strdup(path);
	w.shown = strdup(path[0] == '/' ? "/" : ".");
	if (!w.rest || !w.shown) {
		err = refuse(-ENOMEM, "out of memory");
		goto out;
	}
	w.at = open(w.shown, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w.at < 0) {
		err = refuse(-errno, "cannot open %s: %s", w.shown, strerror(errno));
		goto out;
	}
	err = dir_check(&w, w.at, false);
	while (!err && next_component(&w, &comp, &last)) {
		if (strcmp(comp, ".") != 0)
			err = dir_walk_step(&w, comp, last);
	}
	/* Again on the directory reached, whatever the path ended with
	 * ("/", ".", a link's target). */
	if (!err)
		err = dir_check(&w, w.at, true);
	if (!err) {
		*out = w.at;
		w.at = -1;
	}
out:
	if (w.at >= 0)
		close(w.at);
	free(w.rest);
	free(w.shown);
	return err;
}

static int default_dir(char **out)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;

	if (xdg && xdg[0] == '/')
		n = asprintf(out, "%s/dwleak", xdg);
	else if (home && home[0])
		n = asprintf(out, "%s/.cache/dwleak", home);
	else
		return refuse(-ENOENT, "neither $XDG_CACHE_HOME (absolute) nor $HOME is set");
	return n < 0 ? refuse(-ENOMEM, "out of memory") : 0;
}

int table_cache_open(const char *dir, struct table_cache **out)
{
	const char *off = getenv(TABLE_CACHE_ENV_DISABLE);
	struct table_cache *c;
	char *msg;
	size_t len;
	int ret, n = -1;

	*out = NULL;
	open_why[0] = '\0';
	if (dir && !dir[0])
		return refuse(-EINVAL, "the cache directory is \"\"");
	c = calloc(1, sizeof(*c));
	if (!c)
		return refuse(-ENOMEM, "out of memory");
	c->dirfd = -1;
	if (dir) {
		c->dir = strdup(dir);
		ret = c->dir ? 0 : refuse(-ENOMEM, "out of memory");
	} else {
		ret = default_dir(&c->dir);
	}
	if (ret)
		goto err;
	c->bypass = off && off[0] && strcmp(off, "0") != 0;
	if (!c->bypass) {
		ret = cache_dir_open(c->dir, &c->dirfd);
		if (ret)
			goto err;
	}
	*out = c;
	return 0;
err:
	/* Say which cache it was: the reason names only the culprit. */
	len = c->dir ? strlen(c->dir) : 0;
	if (len && strncmp(open_why, c->dir, len) == 0 && open_why[len] == ' ')
		n = asprintf(&msg, "cache directory %s", open_why);
	else if (len)
		n = asprintf(&msg, "cache directory %s: %s", c->dir, open_why);
	if (len && n >= 0) {
		snprintf(open_why, sizeof(open_why), "%s", msg);
		free(msg);
	}
	table_cache_close(c);
	return ret;
}

void table_cache_close(struct table_cache *c)
{
	if (!c)
		return;
	if (c->dirfd >= 0)
		close(c->dirfd);
	free(c->dir);
	free(c);
}

void table_cache_stats(const struct table_cache *c, struct table_cache_stats *st)
{
	if (c)
		*st = c->stats;
	else
		memset(st, 0, sizeof(*st));
}

const char *table_cache_dir(const struct table_cache *c)
{
	return c ? c->dir : NULL;
}

/* --- Keys --- */

static void hex_encode(char *dst, const uint8_t *src, size_t len)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		dst[2 * i] = digits[src[i] >> 4];
		dst[2 * i + 1] = digits[src[i] & 15];
	}
	dst[2 * len] = '\0';
}

static void cache_key_release(struct cache_key *key)
{
	free(key->text);
	free(key->name);
}

/*
 * The key TEXT is the digest of IN: only an entry compiled from the same
 * bytes matches.  The file NAME hashes what survives a rebuild of the
 * object (its build id, else its path or inode, and the debug file's path),
 * so a rebuilt object or a new TABLE_FORMAT_VERSION overwrites the entry
 * it replaces instead of piling up next to it.  Paths are length-prefixed
 * so no path can forge the fields that follow it.
 */
static int cache_key_build(int fd, const char *path, const struct table_opts *opts,
			   const struct table_input *in, struct cache_key *key)
{
	const char *debug_path = opts ? opts->debug_path : NULL;
	char hex[2 * TABLE_BUILD_ID_MAX + 1], digest_hex[2 * TABLE_INPUT_DIGEST_SIZE + 1];
	uint8_t digest[TABLE_INPUT_DIGEST_SIZE];
	char *identity = NULL;
	struct stat st;
	uint64_t h;
	int n;

	memset(key, 0, sizeof(*key));
	table_input_digest(in, digest);
	hex_encode(digest_hex, digest, sizeof(digest));
	hex_encode(hex, in->build_id, in->build_id_len);
	if (hex[0])
		n = asprintf(&identity, "build-id:%s", hex);
	else if (path)
		n = asprintf(&identity, "path:%zu:%s", strlen(path), path);
	else if (fstat(fd, &st) == 0)
		n = asprintf(&identity, "inode:%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
	else
		return -errno;
	if (n < 0)
		return -ENOMEM;
	h = fnv1a64(FNV64_OFFSET, identity, strlen(identity) + 1);
	if (debug_path)
		h = fnv1a64(h, debug_path, strlen(debug_path) + 1);
	free(identity);
	if (asprintf(&key->text, "dwleak-table v%d input-sha256:%s", TABLE_FORMAT_VERSION,
		     digest_hex) < 0)
		key->text = NULL;
	if (asprintf(&key->name, "%s-%016" PRIx64 ".tbl", hex[0] ? hex : "nobuildid", h) < 0)
		key->name = NULL;
	if (!key->text || !key->name) {
		cache_key_release(key);
		return -ENOMEM;
	}
	return 0;
}

/* --- Entries --- */

/* Why an entry was not used, beyond what cache_entry_decode() says. */
#define ENTRY_UNSAFE (-EPERM) /* not read: a link, not regular, not ours alone */

/*
 * Reads entry NAME of C into a new buffer.  It is opened relative to the
 * directory without following a link and without blocking (a FIFO), and
 * read only when it is a regular file of the effective user's that group
 * and others cannot write, of at most MAX_SIZE bytes.  Returns 0, -ENOENT,
 * ENTRY_UNSAFE, -EBADMSG (too large, or shorter than it said), -ENOMEM.
 */
static int entry_read(const struct table_cache *c, const char *name, uint64_t max_size,
		      uint8_t **buf, size_t *len)
{
	struct stat st;
	uint8_t *p = NULL;
	size_t done = 0;
	ssize_t n;
	int fd, ret;

	fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? ENTRY_UNSAFE : -errno;
	ret = ENTRY_UNSAFE;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		goto out;
	ret = -EBADMSG;
	if ((uint64_t)st.st_size > max_size)
		goto out;
	ret = -ENOMEM;
	p = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!p)
		goto out;
	while (done < (size_t)st.st_size) {
		n = read(fd, p + done, (size_t)st.st_size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EBADMSG;
			goto out;
		}
		done += (size_t)n;
	}
	*buf = p;
	*len = done;
	p = NULL;
	ret = 0;
out:
	free(p);
	close(fd);
	return ret;
}

static int cache_load(const struct table_cache *c, const struct cache_key *key, uint64_t max_raw,
		      struct unwind_table **out)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret;

	ret = entry_read(c, key->name, cache_entry_max_size(strlen(key->text), max_raw), &buf, &len);
	if (ret)
		return ret;
	ret = cache_entry_decode(buf, len, key->text, max_raw, out);
	free(buf);
	return ret;
}

static int fd_write_all(int fd, const uint8_t *buf, size_t len)
{
	ssize_t n;

	while (len) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Creates a new temporary file NAME.XXXXXX in the directory (O_EXCL, no
 * link followed) and stores its name at *TMP. */
static int tmp_create(const struct table_cache *c, const char *name, char **tmp)
{
	uint32_t r;
	int fd = -EEXIST;

	for (int i = 0; i < CACHE_TMP_TRIES && fd == -EEXIST; i++) {
		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (uint32_t)getpid() * 2654435761u + (uint32_t)i;
		if (asprintf(tmp, "%s.%06" PRIx32, name, r & 0xffffff) < 0)
			return -ENOMEM;
		fd = openat(c->dirfd, *tmp,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, CACHE_ENTRY_MODE);
		if (fd < 0) {
			fd = -errno;
			free(*tmp);
			*tmp = NULL;
		}
	}
	return fd;
}

/* Writes BUF to a temporary file in the directory and renames it over
 * NAME, so readers see the old entry or the new one, never a partial one;
 * a link, FIFO or foreign file at NAME is replaced, not written through. */
static int entry_replace(const struct table_cache *c, const char *name, const uint8_t *buf,
			 size_t len)
{
	char *tmp = NULL;
	int fd, ret;

	fd = tmp_create(c, name, &tmp);
	if (fd < 0)
		return fd;
	ret = fd_write_all(fd, buf, len);
	if (close(fd) != 0 && !ret)
		ret = -errno;
	if (!ret && renameat(c->dirfd, tmp, c->dirfd, name) != 0)
		ret = -errno;
	if (ret)
		unlinkat(c->dirfd, tmp, 0);
	free(tmp);
	return ret;
}

static int cache_store(const struct table_cache *c, const struct cache_key *key,
		       const struct unwind_table *t)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret;

	ret = cache_entry_encode(t, key->text, &buf, &len);
	if (ret)
		return ret;
	ret = entry_replace(c, key->name, buf, len);
	free(buf);
	return ret;
}

static void count_miss(struct table_cache *c, int why)
{
	if (why == -EBADMSG)
		c->stats.corrupt++;
	else if (why == ENTRY_UNSAFE)
		c->stats.unsafe++;
	else
		c->stats.misses++;
}

int table_cache_get(struct table_cache *c, int fd, const char *path,
		    const struct table_opts *opts, struct unwind_table **out, bool *hit)
{
	struct cache_key key = { NULL, NULL };
	struct table_input in;
	int ret;

	if (hit)
		*hit = false;
	if (!c || c->bypass)
		return table_compile_fd(fd, opts, out);
	*out = NULL;
	ret = table_input_read_fd(fd, opts, &in);
	if (ret)
		return ret;
	ret = cache_key_build(fd, path, opts, &in, &key);
	if (ret)
		goto out;
	ret = cache_load(c, &key, table_input_max_serialized(&in), out);
	if (ret == 0) {
		c->stats.hits++;
		if (hit)
			*hit = true;
		goto out;
	}
	count_miss(c, ret);
	ret = table_compile_input(&in, out);
	if (ret)
		goto out;
	if (!table_input_trusted(&in))
		c->stats.untrusted++;
	else if (cache_store(c, &key, *out) != 0)
		c->stats.store_errors++;
out:
	cache_key_release(&key);
	table_input_release(&in);
	return ret;
}
