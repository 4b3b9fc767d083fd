/* The bytes of one table cache entry: a header, the key it was stored
 * under and a zstd frame of the serialized table.  Kept apart from the
 * files and directories of table_cache.c so that the decoder, which reads
 * whatever a cache file holds, can be fuzzed on its own. */
#ifndef DWLEAK_CACHE_ENTRY_H
#define DWLEAK_CACHE_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

/*
 * An entry, integers little-endian; the file is exactly header + key + frame:
 *   0 magic "DWLKCACH"  8 u32 version (TABLE_FORMAT_VERSION)  12 u32 key length
 *  16 u64 payload length  24 u64 frame length  32 u64 XXH64 of payload
 *  40 key text, then the zstd frame (with its content checksum)
 */
#define CACHE_ENTRY_HEADER_SIZE 40
#define CACHE_ENTRY_MAX_KEY 4096 /* keys are a version and a digest in text */

/* The largest entry a table of at most MAX_RAW serialized bytes, stored
 * under a key of KEY_LEN bytes, can take: a file larger than this is not
 * read. */
uint64_t cache_entry_max_size(size_t key_len, uint64_t max_raw);

/*
 * Builds the entry holding T under KEY (NUL-terminated text) in a new
 * malloc'd buffer at *BUF of *LEN bytes.  Returns 0, -EINVAL for a key
 * over CACHE_ENTRY_MAX_KEY, -EIO when zstd fails, -ENOMEM.
 */
int cache_entry_encode(const struct unwind_table *t, const char *key, uint8_t **buf, size_t *len);

/*
 * Frames the RAW_LEN bytes at RAW (a table_serialize() payload) as an
 * entry under KEY: what cache_entry_encode() does after serializing.
 * Same returns.
 */
int cache_entry_pack(const void *raw, size_t raw_len, const char *key, uint8_t **buf,
		     size_t *len);

/*
 * Decodes the LEN bytes at BUF (only read; any bytes at all) into a new
 * table at *OUT when they are an entry stored under KEY whose payload is at
 * most MAX_RAW bytes: the payload length is checked against MAX_RAW and the
 * frame before anything is allocated for it.  Returns 0, -ESTALE for an
 * entry of another version or key, -EBADMSG for anything malformed,
 * truncated, corrupt or too large, -ENOMEM.
 */
int cache_entry_decode(const uint8_t *buf, size_t len, const char *key, uint64_t max_raw,
		       struct unwind_table **out);

#endif
