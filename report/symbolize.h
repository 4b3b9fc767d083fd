/* Naming the frames of a report: (object, ELF address) to function, offset,
 * file:line and the chain of inlined calls, the way `addr2line -f -i -C`
 * and `perf report --inline` show them. */
#ifndef DWLEAK_SYMBOLIZE_H
#define DWLEAK_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Owns every registered object and their caches; one per report run.
 * Not thread-safe: libdwfl handles are not, so use one from one thread
 * (symbolizer_prepare's own thread gives it back before any other call). */
struct symbolizer;

/* One registered object (executable or shared library), owned by its
 * symbolizer and valid until symbolizer_free(). */
struct sym_module;

/*
 * One frame of a resolved address.  Strings are malloc'd and owned by the
 * frames array (freed by sym_frames_free()); NULL when unknown.
 *   function  demangled name, NULL when no symbol covers the address
 *   offset    bytes from the start of the ELF symbol that contains the
 *             address (the physical function), the same in every frame of
 *             one address; 0 when there is no symbol
 *   file      source file as the line table names it (usually absolute)
 *   line      source line, 0 when unknown
 *   inlined   true when this function was inlined into the next frame
 *   symbol    the name before demangling, as valgrind's suppressions name
 *             frames: the ELF symbol (else the linkage name) of the
 *             physical function, the DW_AT_name of an inlined one
 *             ("make", where FUNCTION is "NS::K::make()"), without a
 *             symbol version; NULL when it is FUNCTION itself (or unknown)
 */
struct sym_frame {
	char *function;
	uint64_t offset;
	char *file;
	int line;
	bool inlined;
	char *symbol;
};

/*
 * debuginfod: fetching what is missing by build id, the way gdb and
 * valgrind do.  Each object's lookup of its separate debug file (and of
 * its dwz supplement) is libdwfl's own, dwfl_standard_find_debuginfo():
 * next to the object, under /usr/lib/debug and every debug dir, and only
 * then, when DEBUGINFOD_URLS names servers, from them through libdwfl's
 * libdebuginfod client, which keeps what it fetched in its cache
 * ($DEBUGINFOD_CACHE_PATH, else ~/.cache/debuginfod_client).  Lookups
 * happen when a frame is named, that is when a report is made: never
 * while a traced process waits.
 *
 * What the host says about them (symbolizer_set_fetch()):
 *   on        DEBUGINFOD_URLS is set and not empty: lookups are made and
 *             what they do not find is noted (libdebuginfod reads the
 *             servers, DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXTIME, ... itself;
 *             unset, it asks no server and not even its cache)
 *   seconds   the longest all lookups of this symbolizer take together
 *             (> 0): past it the one running is cancelled, and each later
 *             one is at its first progress call (within a second)
 *   progress  NULL, or called while a lookup runs, about once a second and
 *             as data comes: OBJECT the object's path, SECONDS since the
 *             lookup began, and TOTAL bytes with DONE of them received
 *             once a server said the size (else 0 and 0)
 *   done      NULL, or called once a lookup that called PROGRESS ended
 *   arg       their first argument
 */
struct sym_fetch {
	bool on;
	double seconds;
	void (*progress)(void *arg, const char *object, double seconds, long done, long total);
	void (*done)(void *arg);
	void *arg;
};

/*
 * One debug file a lookup did not get: PATH is the object, BUILD_ID its
 * build id (hex), SUPPLEMENT true when what was missing is the dwz
 * supplement its debug file refers to (.gnu_debugaltlink) rather than the
 * debug file itself; ERR why, a negative errno from libdebuginfod (-ENOENT:
 * no server has it, -ECONNREFUSED, -EHOSTUNREACH, -ETIME: the server did
 * not answer in DEBUGINFOD_TIMEOUT, ...) or -ECANCELED: the symbolizer's
 * own bound (SECONDS) was spent.
 */
struct sym_fetch_miss {
	char *path;
	char *build_id;
	bool supplement;
	int err;
};

/* Why a lookup failed with ERR (a sym_fetch_miss's), as words for a note:
 * "no server has it", "connection refused", ...  Static. */
const char *sym_fetch_why(int err);

/* The line a report and `dwleak symbolize` say for M, malloc'd into
 * *OUT: what was not fetched, for which object and build id, and why.
 * Returns 0 or -ENOMEM. */
int sym_fetch_miss_text(const struct sym_fetch_miss *m, char **out);

/*
 * Creates a symbolizer in *OUT.  DEBUG_DIRS is a NULL-terminated list of
 * extra places holding separate debug files (dwleak's --debug-dir; may be
 * NULL), each searched both as a root of `.build-id/xx/yyyy.debug` files
 * and for .gnu_debuglink names (DIR/NAME and DIR/OBJDIR/NAME), after the
 * object's own directory, its .debug/ and /usr/lib/debug.  Relative dirs
 * are taken from the current directory at this call.
 * Returns 0, -EINVAL when a dir contains ':' (libdwfl's path separator)
 * or is empty, -ENOMEM.  Free with symbolizer_free().
 */
int symbolizer_new(const char *const *debug_dirs, struct symbolizer **out);

/* Appends DIR to the NULL-terminated --debug-dir list *DIRS of *N entries
 * (the commands' repeatable option, for symbolizer_new() and
 * debug_file_find()).  The list is realloc'd, DIR is borrowed.  Returns 0
 * or -ENOMEM, leaving the list as it was. */
int debug_dirs_add(const char ***dirs, size_t *n, const char *dir);

/* Frees S, every module registered in it and their caches.  NULL is ok. */
void symbolizer_free(struct symbolizer *s);

/* Sets S's debuginfod lookups as F says (copied; see struct sym_fetch).
 * Whether libdwfl asks servers is DEBUGINFOD_URLS's to say, not S's: until
 * this is called, or with F->on false, S gives its client no progress
 * callback and no bound and notes nothing, so a host turns lookups on
 * exactly when that variable names servers (cli/fetch.c does). */
void symbolizer_set_fetch(struct symbolizer *s, const struct sym_fetch *f);

/* The lookups that found nothing so far, one per (build id, supplement),
 * in the order they happened: *OUT points at S's array (valid until S's
 * next lookup or symbolizer_free()).  Returns how many. */
size_t symbolizer_fetch_misses(const struct symbolizer *s, const struct sym_fetch_miss **out);

/*
 * Fetches by BUILD_ID (hex) the separate debug file of an object that is
 * not here at all (`dwleak symbolize` on another machine's report), PATH
 * being the object's path for the notes.  Stores at *FILE the malloc'd
 * path of the file in debuginfod's cache.  Returns 0, -ENOSYS when
 * lookups are off, -EINVAL when BUILD_ID is not hex, -ENOMEM, or why the
 * lookup failed (noted as a miss, see struct sym_fetch_miss).
 */
int symbolizer_fetch_debuginfo(struct symbolizer *s, const char *path, const char *build_id, char **file);

/*
 * Registers an object to symbolize and stores its module at *OUT.
 * PATH is the object's name: it is what reports show, and its directory is
 * where debug files are looked for (.gnu_debuglink next to it, in .debug/,
 * under /usr/lib/debug/PATH-DIR).  FD is an open fd on the object's real
 * bytes (e.g. /proc/PID/map_files/..., when the file on disk may have been
 * deleted or replaced); it is dup'ed and stays the caller's.  FD < 0 opens
 * PATH.  Registering the same (PATH, build id) again returns the same
 * module (objects without a build id are told apart by device, inode,
 * size and mtime).  The module lives until symbolizer_free(S).
 * Returns 0, -ENOEXEC when the bytes are not an ELF object libdwfl
 * accepts, -errno from open()/dup()/fstat(), -ENOMEM.
 */
int symbolizer_module(struct symbolizer *s, const char *path, int fd, struct sym_module **out);

/*
 * Opens PATH (FD as for symbolizer_module(): dup'ed, the caller's still)
 * ahead of a report, in a thread of S's own while the caller goes on: its
 * module, its symbol table and its DWARF (the separate debug file found,
 * its compressed sections inflated, the largest part of naming a
 * program's first frame), so that the report at the command's end finds
 * them ready.  Each file is prepared once.  Every other call on S (but
 * symbolizer_prepare_addr) waits for the item the thread is at and drops
 * the rest of its queue (what a report needs it does itself), so S is
 * still used from one thread at a time.  Does nothing while debuginfod
 * lookups are on (DEBUGINFOD_URLS set): a server is asked when a report
 * is made, never while the traced command runs.  Returns 0, or a negative
 * errno (from fstat() or dup(), -ENOMEM, -EAGAIN: no thread) when nothing
 * was queued.
 */
int symbolizer_prepare(struct symbolizer *s, const char *path, int fd);

/* The same for ELF address ADDR of PATH (as sym_module_resolve() takes
 * it, RETURN_ADDR too): named by the thread into its module's cache (the
 * module opened first when it is not), so that the report's lookup of it
 * is a cache hit.  Never waits for the thread: a caller that must not
 * block (a drain loop) calls this.  Returns what symbolizer_prepare does. */
int symbolizer_prepare_addr(struct symbolizer *s, const char *path, int fd, uint64_t addr, bool return_addr);

/* The path M was registered under.  Owned by M. */
const char *sym_module_path(const struct sym_module *m);

/* M's GNU build id as lower-case hex, or NULL when it has none.  Owned by M. */
const char *sym_module_build_id(const struct sym_module *m);

/*
 * Resolves ELF address ADDR of M (the address `addr2line -e OBJ` takes, not
 * a runtime address).  RETURN_ADDR says ADDR is a return address (a caller
 * frame): function, lines and inlines are then those of ADDR - 1, the call
 * instruction, while offsets stay relative to ADDR.
 * Stores at *FRAMES a malloc'd array of *N >= 1 frames, innermost first:
 * the innermost inlined function (inlined = true; file/line where ADDR is),
 * then each function it was inlined into (file/line = the call site of the
 * inline before it), ending with the physical function (inlined = false) -
 * the order and content of `addr2line -f -i -C -e OBJ ADDR`.  Without debug
 * information there is one frame named from .symtab, .dynsym or
 * .gnu_debugdata (MiniDebugInfo), with function NULL when no symbol covers
 * ADDR.  Results are cached in M, so repeated addresses are cheap.
 * Free with sym_frames_free().  Returns 0 or -ENOMEM.
 */
int sym_module_resolve(struct sym_module *m, uint64_t addr, bool return_addr,
		       struct sym_frame **frames, size_t *n);

/*
 * The frames of ADDR as sym_module_resolve() gives them, without a copy:
 * a report names the same addresses over and over, and frames that share
 * one string per name are what pprof's encoder finds by pointer.  *FRAMES
 * is M's own cache entry (valid while M lives, that is until its
 * symbolizer is freed; never freed by the caller) when *OWNED comes back
 * false, else a malloc'd array the caller frees with sym_frames_free() (M
 * had no room to keep it).  Returns 0 or -ENOMEM.
 */
int sym_module_resolve_shared(struct sym_module *m, uint64_t addr, bool return_addr,
			      const struct sym_frame **frames, size_t *n, bool *owned);

/* Frees the N FRAMES returned by sym_module_resolve().  NULL is ok. */
void sym_frames_free(struct sym_frame *frames, size_t n);

#endif
