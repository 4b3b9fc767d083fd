/* Naming the frames of a report: (object, ELF address) to function, offset,
 * file:line and the chain of inlined calls, the way `addr2line -f -i -C`
 * and `perf report --inline` show them. */
#ifndef DWLEAK_SYMBOLIZE_H
#define DWLEAK_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Owns every registered object and their caches; one per report run.
 * Not thread-safe: libdwfl handles are not, so use one from one thread. */
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
