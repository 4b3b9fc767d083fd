/* Keeps compiled unwind tables on disk, zstd-compressed, one file per
 * object.  Nothing read back is trusted: an entry is used only when its
 * key, length, zstd checksum, our own payload hash and every structural
 * check of table_deserialize() agree; anything else is recompiled. */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "build_id.h"
#include "table_cache.h"

/*
 * An entry file: a fixed header, the key text, then one zstd frame (with
 * its content checksum) holding a table_serialize() payload.
 *   0 magic "DWLKCACH"  8 u32 version  12 u32 key length
 *  16 u64 payload length  24 u64 frame length  32 u64 XXH64 of payload
 * Integers are little-endian; the file length must be exactly
 * header + key + frame.
 */
#define ENTRY_MAGIC "DWLKCACH"
#define ENTRY_HEADER_SIZE 40
#define ENTRY_MAX_KEY 65536		    /* a key is two paths and two ids */
#define ENTRY_MAX_SIZE (1ull << 30)	    /* no object's table comes near 1 GiB */
#define ENTRY_ZSTD_LEVEL 3		    /* fast to write; reads cost the same at any level */
#define FNV64_OFFSET 0xcbf29ce484222325ull /* FNV-1a: file names from key text */
#define FNV64_PRIME 0x100000001b3ull
#define XXH_PRIME64_1 0x9e3779b185ebca87ull	/* XXH64: entry payloads */
#define XXH_PRIME64_2 0xc2b2ae3d27d4eb4full
#define XXH_PRIME64_3 0x165667b19e3779f9ull
#define XXH_PRIME64_4 0x85ebca77c2b2ae63ull
#define XXH_PRIME64_5 0x27d4eb2f165667c5ull

struct table_cache {
	char *dir;
	bool bypass; /* TABLE_CACHE_ENV_DISABLE was set: compile every time */
	struct table_cache_stats stats;
};

/* What identifies one compiled table.  TEXT is compared in full against
 * the copy stored in the entry; FILE is where the entry lives.  The file
 * name leaves out size and mtime, so a rebuilt object overwrites its
 * predecessor's entry instead of adding one. */
struct cache_key {
	char *text;
	char *file;
};

static uint64_t fnv1a64(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len--) {
		h ^= *p++;
		h *= FNV64_PRIME;
	}
	return h;
}

static uint64_t rotl64(uint64_t x, int r)
{
	return x << r | x >> (64 - r);
}

static uint64_t load_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static uint32_t load_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t xxh64_round(uint64_t acc, uint64_t input)
{
	acc += input * XXH_PRIME64_2;
	return rotl64(acc, 31) * XXH_PRIME64_1;
}

static uint64_t xxh64_merge(uint64_t acc, uint64_t val)
{
	acc ^= xxh64_round(0, val);
	return acc * XXH_PRIME64_1 + XXH_PRIME64_4;
}

/*
 * XXH64 with seed 0, the payload hash of an entry.  It is 20x faster than
 * FNV-1a, which matters: a cache hit on libc reads ~120 KiB of payload.
 * (zstd verifies the same function's low 32 bits as its frame checksum.)
 */
static uint64_t xxh64(const uint8_t *p, size_t len)
{
	const uint8_t *end = p + len;
	uint64_t h;

	if (len >= 32) {
		uint64_t v1 = XXH_PRIME64_1 + XXH_PRIME64_2, v2 = XXH_PRIME64_2, v3 = 0,
			 v4 = -XXH_PRIME64_1;

		for (; end - p >= 32; p += 32) {
			v1 = xxh64_round(v1, load_le64(p));
			v2 = xxh64_round(v2, load_le64(p + 8));
			v3 = xxh64_round(v3, load_le64(p + 16));
			v4 = xxh64_round(v4, load_le64(p + 24));
		}
		h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
		h = xxh64_merge(xxh64_merge(xxh64_merge(xxh64_merge(h, v1), v2), v3), v4);
	} else {
		h = XXH_PRIME64_5;
	}
	h += len;
	for (; end - p >= 8; p += 8)
		h = rotl64(h ^ xxh64_round(0, load_le64(p)), 27) * XXH_PRIME64_1 + XXH_PRIME64_4;
	if (end - p >= 4) {
		h = rotl64(h ^ (load_le32(p) * XXH_PRIME64_1), 23) * XXH_PRIME64_2 + XXH_PRIME64_3;
		p += 4;
	}
	for (; p < end; p++)
		h = rotl64(h ^ (*p * XXH_PRIME64_5), 11) * XXH_PRIME64_1;
	h ^= h >> 33;
	h *= XXH_PRIME64_2;
	h ^= h >> 29;
	h *= XXH_PRIME64_3;
	return h ^ h >> 32;
}

static void le_put(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Creates DIR and its missing parents with mode 0700. */
static int mkdir_p(const char *dir)
{
	char *copy = strdup(dir), *slash;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (slash = copy + 1; (slash = strchr(slash, '/')) != NULL; slash++) {
		*slash = '\0';
		if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
			ret = -errno;
			goto out;
		}
		*slash = '/';
	}
	if (mkdir(copy, 0700) != 0 && errno != EEXIST)
		ret = -errno;
out:
	free(copy);
	return ret;
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
		return -ENOENT;
	return n < 0 ? -ENOMEM : 0;
}

int table_cache_open(const char *dir, struct table_cache **out)
{
	const char *off = getenv(TABLE_CACHE_ENV_DISABLE);
	struct table_cache *c;
	int ret;

	if (dir && !dir[0])
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (dir) {
		c->dir = strdup(dir);
		ret = c->dir ? 0 : -ENOMEM;
	} else {
		ret = default_dir(&c->dir);
	}
	if (ret)
		goto err;
	c->bypass = off && off[0] && strcmp(off, "0") != 0;
	if (!c->bypass)
		mkdir_p(c->dir); /* failure only means every get will miss */
	*out = c;
	return 0;
err:
	table_cache_close(c);
	return ret;
}

void table_cache_close(struct table_cache *c)
{
	if (!c)
		return;
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

static void hex_encode(char *dst, const uint8_t *src, size_t len)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		dst[2 * i] = digits[src[i] >> 4];
		dst[2 * i + 1] = digits[src[i] & 15];
	}
	dst[2 * len] = '\0';
}

/* Sets HEX to the object's build id in hex, or "" when it has none. */
static void build_id_hex(int fd, char hex[2 * TABLE_BUILD_ID_MAX + 1])
{
	uint8_t id[TABLE_BUILD_ID_MAX];
	int n = elf_build_id_fd(fd, id, sizeof(id));

	hex_encode(hex, id, n > 0 ? (size_t)n : 0);
}

/*
 * The object's identity: NAME (stable across rebuilds, for the file name)
 * and FULL (what must match).  HEX is its build id or "".  Paths are
 * length-prefixed so no path can forge the fields that follow it.
 */
static int object_identity(int fd, const char *path, const char *hex, char **name, char **full)
{
	struct stat st;
	int n;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (hex[0])
		n = asprintf(name, "build-id:%s", hex);
	else if (path)
		n = asprintf(name, "path:%zu:%s", strlen(path), path);
	else
		n = asprintf(name, "inode:%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
	if (n < 0)
		return -ENOMEM;
	if (hex[0])
		n = asprintf(full, "%s", *name);
	else
		n = asprintf(full, "%s size:%jd mtime:%jd.%09ld", *name, (intmax_t)st.st_size,
			     (intmax_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	if (n < 0) {
		free(*name);
		return -ENOMEM;
	}
	return 0;
}

/* The separate debug file's identity: its build id, else size and mtime. */
static int debug_identity(const char *debug_path, char **out)
{
	char hex[2 * TABLE_BUILD_ID_MAX + 1];
	struct stat st;
	int fd, n;

	if (!debug_path)
		return asprintf(out, "none") < 0 ? -ENOMEM : 0;
	fd = open(debug_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		n = asprintf(out, "path:%zu:%s missing", strlen(debug_path), debug_path);
		goto out;
	}
	build_id_hex(fd, hex);
	if (hex[0])
		n = asprintf(out, "path:%zu:%s build-id:%s", strlen(debug_path), debug_path, hex);
	else
		n = asprintf(out, "path:%zu:%s size:%jd mtime:%jd.%09ld", strlen(debug_path),
			     debug_path, (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec,
			     st.st_mtim.tv_nsec);
out:
	if (fd >= 0)
		close(fd);
	return n < 0 ? -ENOMEM : 0;
}

static void cache_key_release(struct cache_key *key)
{
	free(key->text);
	free(key->file);
}

/*
 * The file name hashes only what survives a rebuild of the object (its
 * build id, else its path or inode, and the debug file's path), so a
 * rebuilt object or a new TABLE_FORMAT_VERSION overwrites the entry it
 * replaces instead of piling up next to it.
 */
static int cache_key_build(const struct table_cache *c, int fd, const char *path,
			   const struct table_opts *opts, struct cache_key *key)
{
	const char *debug_path = opts ? opts->debug_path : NULL;
	char *obj_name = NULL, *obj_full = NULL, *debug = NULL;
	char hex[2 * TABLE_BUILD_ID_MAX + 1];
	uint64_t h;
	int ret;

	memset(key, 0, sizeof(*key));
	build_id_hex(fd, hex);
	ret = object_identity(fd, path, hex, &obj_name, &obj_full);
	if (ret)
		return ret;
	ret = debug_identity(debug_path, &debug);
	if (ret)
		goto out;
	ret = -ENOMEM;
	if (asprintf(&key->text, "dwleak-table v%d obj=%s debug=%s", TABLE_FORMAT_VERSION,
		     obj_full, debug) < 0) {
		key->text = NULL;
		goto out;
	}
	h = fnv1a64(FNV64_OFFSET, obj_name, strlen(obj_name) + 1);
	if (debug_path)
		h = fnv1a64(h, debug_path, strlen(debug_path) + 1);
	if (asprintf(&key->file, "%s/%s-%016" PRIx64 ".tbl", c->dir, hex[0] ? hex : "nobuildid",
		     h) < 0) {
		key->file = NULL;
		goto out;
	}
	ret = 0;
out:
	if (ret)
		cache_key_release(key);
	free(obj_name);
	free(obj_full);
	free(debug);
	return ret;
}

/* Reads all of PATH into a new buffer; refuses files over ENTRY_MAX_SIZE. */
static int file_read_all(const char *path, uint8_t **buf, size_t *len)
{
	struct stat st;
	uint8_t *p = NULL;
	size_t done = 0;
	ssize_t n;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = -EBADMSG;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > ENTRY_MAX_SIZE)
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

/* Checks an entry's framing and key, then decompresses and decodes it.
 * Returns 0, -ESTALE (an entry of another version or for another key),
 * -EBADMSG, -ENOMEM. */
static int entry_decode(const uint8_t *buf, size_t len, const char *key, struct unwind_table **out)
{
	uint64_t key_len, raw_len, zlen, hash;
	const uint8_t *frame;
	uint8_t *raw = NULL;
	size_t n;
	int ret = -EBADMSG;

	if (len < ENTRY_HEADER_SIZE || memcmp(buf, ENTRY_MAGIC, 8) != 0)
		return -EBADMSG;
	if (load_le32(buf + 8) != TABLE_FORMAT_VERSION)
		return -ESTALE;
	key_len = load_le32(buf + 12);
	raw_len = load_le64(buf + 16);
	zlen = load_le64(buf + 24);
	hash = load_le64(buf + 32);
	if (key_len > ENTRY_MAX_KEY || raw_len > ENTRY_MAX_SIZE || zlen > ENTRY_MAX_SIZE ||
	    ENTRY_HEADER_SIZE + key_len + zlen != len)
		return -EBADMSG;
	if (key_len != strlen(key) || memcmp(buf + ENTRY_HEADER_SIZE, key, key_len) != 0)
		return -ESTALE;
	frame = buf + ENTRY_HEADER_SIZE + key_len;
	if (ZSTD_getFrameContentSize(frame, zlen) != raw_len ||
	    ZSTD_findFrameCompressedSize(frame, zlen) != zlen)
		return -EBADMSG;
	raw = malloc(raw_len ? raw_len : 1);
	if (!raw)
		return -ENOMEM;
	n = ZSTD_decompress(raw, raw_len, frame, zlen);
	if (ZSTD_isError(n) || n != raw_len || xxh64(raw, n) != hash)
		goto out;
	ret = table_deserialize(raw, n, out);
out:
	free(raw);
	return ret;
}

/* Builds an entry holding T under KEY into a new buffer. */
static int entry_encode(const struct unwind_table *t, const char *key, uint8_t **buf, size_t *len)
{
	size_t key_len = strlen(key), raw_len, zcap, zlen;
	ZSTD_CCtx *cctx = NULL;
	void *raw = NULL;
	uint8_t *p = NULL;
	int ret;

	ret = table_serialize(t, &raw, &raw_len);
	if (ret)
		return ret;
	ret = -ENOMEM;
	zcap = ZSTD_compressBound(raw_len);
	cctx = ZSTD_createCCtx();
	p = malloc(ENTRY_HEADER_SIZE + key_len + zcap);
	if (!cctx || !p)
		goto out;
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, ENTRY_ZSTD_LEVEL);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	zlen = ZSTD_compress2(cctx, p + ENTRY_HEADER_SIZE + key_len, zcap, raw, raw_len);
	if (ZSTD_isError(zlen)) {
		ret = -EIO;
		goto out;
	}
	memcpy(p, ENTRY_MAGIC, 8);
	le_put(p + 8, TABLE_FORMAT_VERSION, 4);
	le_put(p + 12, key_len, 4);
	le_put(p + 16, raw_len, 8);
	le_put(p + 24, zlen, 8);
	le_put(p + 32, xxh64(raw, raw_len), 8);
	memcpy(p + ENTRY_HEADER_SIZE, key, key_len);
	*buf = p;
	*len = ENTRY_HEADER_SIZE + key_len + zlen;
	p = NULL;
	ret = 0;
out:
	ZSTD_freeCCtx(cctx);
	free(raw);
	free(p);
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

/* Writes BUF to a temporary file next to PATH and renames it over PATH,
 * so readers see the old entry or the new one, never a partial one. */
static int file_replace(const char *path, const uint8_t *buf, size_t len)
{
	char *tmp;
	int fd, ret;

	if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	ret = fd_write_all(fd, buf, len);
	if (close(fd) != 0 && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path) != 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
out:
	free(tmp);
	return ret;
}

static int cache_load(const struct cache_key *key, struct unwind_table **out)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret;

	ret = file_read_all(key->file, &buf, &len);
	if (ret)
		return ret;
	ret = entry_decode(buf, len, key->text, out);
	free(buf);
	return ret;
}

static int cache_store(const struct cache_key *key, const struct unwind_table *t)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret;

	ret = entry_encode(t, key->text, &buf, &len);
	if (ret)
		return ret;
	ret = file_replace(key->file, buf, len);
	free(buf);
	return ret;
}

int table_cache_get(struct table_cache *c, int fd, const char *path,
		    const struct table_opts *opts, struct unwind_table **out, bool *hit)
{
	struct cache_key key;
	int ret;

	if (hit)
		*hit = false;
	if (!c || c->bypass)
		return table_compile_fd(fd, opts, out);
	ret = cache_key_build(c, fd, path, opts, &key);
	if (ret)
		return ret;
	ret = cache_load(&key, out);
	if (ret == 0) {
		c->stats.hits++;
		if (hit)
			*hit = true;
		goto out;
	}
	if (ret == -EBADMSG)
		c->stats.corrupt++;
	else
		c->stats.misses++;
	ret = table_compile_fd(fd, opts, out);
	if (ret == 0 && cache_store(&key, *out) != 0)
		c->stats.store_errors++;
out:
	cache_key_release(&key);
	return ret;
}
