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
 * A descriptor of the regular file open at FD whose size nobody but root
 * can change: the file itself, dup'ed, when it is owned by root, writable
 * by neither group nor others, on a local file system (not FUSE, NFS, SMB, 9p or Ceph,
 * whose owners and sizes the kernel takes from elsewhere); otherwise a
 * copy of it (its current size, read with pread) in a new anonymous memory
 * file (memfd).  Either is close-on-exec.  A system library or debug file
 * is not copied: the copy cost a report tens of ms.  Returns the fd, or a
 * negative errno: -EFBIG over FD_SNAPSHOT_MAX, -EIO when the file shrank
 * during the copy, -EINVAL when FD is not a regular file.  FD stays the
 * caller's.
 */
int fd_snapshot(int fd);

#endif
