/* A private copy of a file others may change: libdw and libelf map the
 * objects and debug files they read, and a mapped file its owner truncates
 * kills the reader with SIGBUS.  dwleak runs as root on other people's
 * files, so it hands those libraries a copy nobody else can touch. */
#ifndef DWLEAK_FD_SNAPSHOT_H
#define DWLEAK_FD_SNAPSHOT_H

#include <stdint.h>

/* The largest file snapshotted: no object or debug file comes near it. */
#define FD_SNAPSHOT_MAX (4ull << 30)

/*
 * Copies the regular file open at FD (its current size, read with pread)
 * into a new anonymous memory file (memfd, close-on-exec).  Returns its fd,
 * or a negative errno: -EFBIG over FD_SNAPSHOT_MAX, -EIO when the file
 * shrank during the copy, -EINVAL when FD is not a regular file.  FD stays
 * the caller's.
 */
int fd_snapshot(int fd);

#endif
