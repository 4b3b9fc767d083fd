/* Reading a whole input file (a suppressions file, a JSON report) the
 * way a tool running as root must: never blocking on a FIFO or device
 * someone put in its place, never growing without bound. */
#ifndef DWLEAK_TEXT_FILE_H
#define DWLEAK_TEXT_FILE_H

#include <stddef.h>

/*
 * Reads PATH, a regular file, a FIFO or /dev/null ("-": standard input)
 * into *BUF (malloc'd, NUL-terminated, *LEN bytes without the NUL).  At
 * most MAX bytes: more is -EFBIG.  A directory is -EISDIR; another device
 * or a socket -ENOTSUP, with *WHAT (static) saying which ("a device").  A
 * signal interrupting the read gives -EINTR.  Returns 0 or a negative
 * errno.
 */
int text_file_read(const char *path, size_t max, char **buf, size_t *len, const char **what);

#endif
