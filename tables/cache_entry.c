/* Encodes and decodes table cache entries.  Decoding trusts nothing it
 * reads: the key must match, every length must agree with the file's and
 * with the bound the caller derives from the object, and only then is the
 * payload decompressed, hashed and handed to table_deserialize(). */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "cache_entry.h"
#include "table_serialize.h"

#define ENTRY_MAGIC "DWLKCACH"
#define ENTRY_ZSTD_LEVEL 3 /* fast to write; reads cost the same at any level */
#define XXH_PRIME64_1 0x9e3779b185ebca87ull /* XXH64: entry payloads */
#define XXH_PRIME64_2 0xc2b2ae3d27d4eb4full
#define XXH_PRIME64_3 0x165667b19e3779f9ull
#define XXH_PRIME64_4 0x85ebca77c2b2ae63ull
#define XXH_PRIME64_5 0x27d4eb2f165667c5ull

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

static void le_put(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
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
 * XXH64 with seed 0, the payload hash of an entry: it catches damage, not
 * attacks (anyone can recompute it; what binds an entry to its object is
 * the key).  It is 20x faster than FNV-1a, which matters on every hit.
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

uint64_t cache_entry_max_size(size_t key_len, uint64_t max_raw)
{
	/* ZSTD_COMPRESSBOUND, in 64 bits: the frame of incompressible bytes. */
	uint64_t frame = max_raw + (max_raw >> 8) + (128 << 10) + 64;

	return CACHE_ENTRY_HEADER_SIZE + (uint64_t)key_len + frame;
}

int cache_entry_decode(const uint8_t *buf, size_t len, const char *key, uint64_t max_raw,
		       struct unwind_table **out)
{
	uint64_t key_len, raw_len, zlen, hash;
	const uint8_t *frame;
	uint8_t *raw = NULL;
	size_t n;
	int ret = -EBADMSG;

	*out = NULL;
	if (len < CACHE_ENTRY_HEADER_SIZE || memcmp(buf, ENTRY_MAGIC, 8) != 0)
		return -EBADMSG;
	if (load_le32(buf + 8) != TABLE_FORMAT_VERSION)
		return -ESTALE;
	key_len = load_le32(buf + 12);
	raw_len = load_le64(buf + 16);
	zlen = load_le64(buf + 24);
	hash = load_le64(buf + 32);
	if (key_len > CACHE_ENTRY_MAX_KEY || key_len > len - CACHE_ENTRY_HEADER_SIZE ||
	    zlen != len - CACHE_ENTRY_HEADER_SIZE - key_len)
		return -EBADMSG;
	if (key_len != strlen(key) || memcmp(buf + CACHE_ENTRY_HEADER_SIZE, key, key_len) != 0)
		return -ESTALE;
	/* The claimed size, and the frame's own, are checked before any
	 * memory is committed: a tiny frame can expand to gigabytes. */
	if (raw_len > max_raw || raw_len > SIZE_MAX)
		return -EBADMSG;
	frame = buf + CACHE_ENTRY_HEADER_SIZE + key_len;
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

int cache_entry_pack(const void *raw, size_t raw_len, const char *key, uint8_t **buf,
		     size_t *len)
{
	size_t key_len = strlen(key), zcap, zlen;
	ZSTD_CCtx *cctx = NULL;
	uint8_t *p = NULL;
	int ret = -ENOMEM;

	if (key_len > CACHE_ENTRY_MAX_KEY)
		return -EINVAL;
	zcap = ZSTD_compressBound(raw_len);
	cctx = ZSTD_createCCtx();
	p = malloc(CACHE_ENTRY_HEADER_SIZE + key_len + zcap);
	if (!cctx || !p)
		goto out;
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, ENTRY_ZSTD_LEVEL);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	zlen = ZSTD_compress2(cctx, p + CACHE_ENTRY_HEADER_SIZE + key_len, zcap, raw, raw_len);
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
	memcpy(p + CACHE_ENTRY_HEADER_SIZE, key, key_len);
	*buf = p;
	*len = CACHE_ENTRY_HEADER_SIZE + key_len + zlen;
	p = NULL;
	ret = 0;
out:
	ZSTD_freeCCtx(cctx);
	free(p);
	return ret;
}

int cache_entry_encode(const struct unwind_table *t, const char *key, uint8_t **buf, size_t *len)
{
	size_t raw_len;
	void *raw;
	int ret;

	if (strlen(key) > CACHE_ENTRY_MAX_KEY)
		return -EINVAL;
	ret = table_serialize(t, &raw, &raw_len);
	if (ret)
		return ret;
	ret = cache_entry_pack(raw, raw_len, key, buf, len);
	free(raw);
	return ret;
}
