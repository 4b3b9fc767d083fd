/* An on-disk cache of compiled unwind tables, so that starting dwleak on a
 * machine it has seen before costs a file read and a decompression per
 * object instead of a full CFI compile. */
#ifndef DWLEAK_TABLE_CACHE_H
#define DWLEAK_TABLE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "table.h"
#include "table_serialize.h" /* TABLE_FORMAT_VERSION, part of every key */

/* Set to anything but "" or "0" to make table_cache_open() return a cache
 * that never reads nor writes: every get compiles.  (A caller that wants no
 * cache at all can also pass a NULL cache to table_cache_get().) */
#define TABLE_CACHE_ENV_DISABLE "DWLEAK_NO_CACHE"

struct table_cache;

struct table_cache_stats {
	uint64_t hits;	       /* entries read back, checked and used */
	uint64_t misses;       /* no entry, or one for an older file or version: compiled */
	uint64_t corrupt;      /* entries truncated/corrupt/unreadable: compiled and rewritten */
	uint64_t store_errors; /* compiled tables that could not be written (read-only, ENOSPC) */
};

/*
 * Opens the cache in directory DIR, or when DIR is NULL in
 * $XDG_CACHE_HOME/dwleak (if that variable is an absolute path), else
 * $HOME/.cache/dwleak.  Missing directories are created with mode 0700; a
 * directory that cannot be created or written does not make this fail: the
 * cache then only misses and counts store errors.  Stores the cache at *OUT
 * and returns 0, or -ENOENT when DIR is NULL and neither variable is set,
 * -EINVAL when DIR is "", -ENOMEM.  A cache is used by one thread at a
 * time; close it with table_cache_close().  Entries are never evicted;
 * a crash mid-store can leave a NAME.tbl.XXXXXX temporary behind.
 */
int table_cache_open(const char *dir, struct table_cache **out);

/* Frees the cache (the entries on disk stay); NULL is fine. */
void table_cache_close(struct table_cache *c);

/*
 * Gets the table of the ELF object open at FD, compiled with OPTS (may be
 * NULL), from the cache, or compiles it with table_compile_fd() and stores
 * it.  PATH names the object for keying when it has no build id; it may be
 * NULL, the object is then keyed by device and inode.  The key is the
 * object's build id (else path or inode, plus size and mtime), the
 * identity of OPTS->debug_path (its build id, else size and mtime) and
 * TABLE_FORMAT_VERSION.  An entry that is truncated, corrupt or for
 * another key is never used: the table is compiled and the entry
 * rewritten.  Failing to write the cache is not an error.  C may be NULL:
 * then this is table_compile_fd().
 * The fd stays open and owned by the caller.  On success stores a new
 * table at *OUT (release with table_free()), sets *HIT (may be NULL) to
 * whether it came from the cache, and returns 0; otherwise returns
 * table_compile_fd()'s negative errno, or fstat()'s (-EBADF) for a bad FD.
 */
int table_cache_get(struct table_cache *c, int fd, const char *path,
		    const struct table_opts *opts, struct unwind_table **out, bool *hit);

/* Copies C's counters since table_cache_open() into *ST (zeros if C is NULL). */
void table_cache_stats(const struct table_cache *c, struct table_cache_stats *st);

/* The cache's directory (NULL for a NULL cache), for reports. */
const char *table_cache_dir(const struct table_cache *c);

#endif
