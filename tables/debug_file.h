/* Finding an object's separate debug file (the .debug_frame source for
 * stripped objects), the way gdb and elfutils look for it.  Shared by
 * `dwleak tables` and the runtime that compiles tables for live mappings. */
#ifndef DWLEAK_DEBUG_FILE_H
#define DWLEAK_DEBUG_FILE_H

/*
 * Looks for the separate debug file of the ELF object open at FD, whose
 * path is PATH (used for its directory; may be NULL, then only build ids
 * are tried).  EXTRA_DIRS is a NULL-terminated list of extra debug roots
 * searched before /usr/lib/debug (may be NULL).  Candidates, in order:
 *   ROOT/.build-id/xx/yyyy.debug          for each root, by NT_GNU_BUILD_ID
 *   OBJDIR/NAME, OBJDIR/.debug/NAME,      NAME from .gnu_debuglink, OBJDIR
 *   ROOT/OBJDIR/NAME, EXTRA_DIR/NAME      the object's real directory
 * A build-id candidate must carry the same build id; a debuglink candidate
 * must match the link's CRC32 and must not be the object itself.
 * On success stores a malloc'd path at *OUT (the caller frees it) and
 * returns 0.  Returns -ENOENT when there is none, -ENOEXEC when FD is not
 * an ELF object, -ENOMEM.  The fd stays the caller's; its offset is unused.
 */
int debug_file_find(int fd, const char *path, const char *const *extra_dirs, char **out);

#endif
