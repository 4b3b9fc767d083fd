/* An on-disk cache of compiled unwind tables, so that starting dwleak on a
 * machine it has seen before costs a file read and a decompression per
 * object instead of a full CFI compile.  dwleak runs as root on other
 * users' files, so the cache trusts neither them nor its own directory:
 * entries are keyed by a digest of the CFI they were compiled from, and
 * the directory is used only when nobody else can write it. */
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
	uint64_t misses;       /* no entry, or one for other bytes or another version: compiled */
	uint64_t corrupt;      /* entries truncated, corrupt or larger than the object could
				  produce: compiled and rewritten */
	uint64_t unsafe;       /* entries not read at all: a symlink, not a regular file, or not
				  a file of the effective user's that only it may write */
	uint64_t untrusted;    /* tables compiled from a file (object or debug file) that another
				  user owns or that group or others may write: used, NOT stored,
				  so that no later run reads what such a user chose */
	uint64_t store_errors; /* compiled tables that could not be written (read-only, ENOSPC) */
};

/*
 * Opens the cache in directory DIR, or when DIR is NULL in
 * $XDG_CACHE_HOME/dwleak (if that variable is an absolute path), else
 * $HOME/.cache/dwleak.  The path is walked one component at a time without
 * following symbolic links (one is followed only when root or the effective
 * user owns it, in a directory of the same kind), missing directories are
 * created with mode 0700, and every directory on the way must belong to
 * root or the effective user and be writable by nobody else (sticky ones
 * like /tmp excepted).  The cache directory itself must be a real
 * directory owned by the effective user that group and others cannot write.
 * On success stores the cache at *OUT and returns 0; a cache is used by one
 * thread at a time; close it with table_cache_close().
 * On failure sets *OUT to NULL, returns a negative errno and
 * table_cache_why() says why in one line, for the caller to print before
 * running without a cache (a NULL cache is valid everywhere):
 *   -ENOENT  DIR is NULL and neither variable is set
 *   -EINVAL  DIR is "", or it or a link's target on it has a ".." component
 *   -EPERM   a directory on the path is owned by another user or writable
 *            by others, or the cache directory is not private
 *   -ELOOP   a symbolic link nobody trusted could have made, or the cache
 *            directory itself is a link
 *   -ENOTDIR a component is not a directory
 *   -ENOMEM, or mkdir()/open()'s errno (-EACCES, -EROFS, ...)
 * With TABLE_CACHE_ENV_DISABLE set nothing is checked nor created and the
 * cache returned only compiles.  Entries are never evicted; a crash
 * mid-store can leave a NAME.tbl.XXXXXX temporary behind.
 */
int table_cache_open(const char *dir, struct table_cache **out);

/* Why the last table_cache_open() of this thread failed (never NULL; valid
 * until the next open in this thread). */
const char *table_cache_why(void);

/* Frees the cache (the entries on disk stay); NULL is fine. */
void table_cache_close(struct table_cache *c);

/*
 * Gets the table of the ELF object open at FD, compiled with OPTS (may be
 * NULL), from the cache, or compiles it and stores it.  The object and the
 * debug file are read once, into memory (never mapped), and the table is
 * compiled from those bytes; the entry's key is a SHA-256 of them (headers
 * and CFI sections of both, build id, TABLE_FORMAT_VERSION), so an entry is
 * used only for exactly the CFI it was compiled from, whatever build id a
 * file claims.  The entry's file is named after the build id (else PATH,
 * else device and inode) and the debug file's path, so a rebuilt object
 * replaces its predecessor's entry.  An entry that is truncated, corrupt,
 * for other bytes, larger than the object could produce or not a private
 * regular file of ours is never used: the table is compiled and the entry
 * rewritten.  A table compiled from a file that another user owns or may
 * write is used but not stored (stats.untrusted).  Failing to write the
 * cache is not an error.  C may be NULL: then this is table_compile_fd().
 * The fd stays open and owned by the caller.  On success stores a new
 * table at *OUT (release with table_free()), sets *HIT (may be NULL) to
 * whether it came from the cache, and returns 0; otherwise returns
 * table_compile_fd()'s negative errno.
 */
int table_cache_get(struct table_cache *c, int fd, const char *path,
		    const struct table_opts *opts, struct unwind_table **out, bool *hit);

/* Copies C's counters since table_cache_open() into *ST (zeros if C is NULL). */
void table_cache_stats(const struct table_cache *c, struct table_cache_stats *st);

/* The cache's directory as configured (NULL for a NULL cache), for reports. */
const char *table_cache_dir(const struct table_cache *c);

#endif
