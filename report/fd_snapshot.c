/* A file others could truncate copied into a memfd with pread (no mapping
 * of the original, so no SIGBUS however the original changes), in 1 MiB
 * steps; one only root can write handed over as it is. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "fd_snapshot.h"

#define STEP (1u << 20)

/* f_type of the file systems whose owners and sizes another machine or a
 * user's process decides (linux/magic.h's values) */
#define FUSE_SUPER_MAGIC 0x65735546
#define NFS_SUPER_MAGIC 0x6969
#define SMB_SUPER_MAGIC 0x517b
#define SMB2_SUPER_MAGIC 0xfe534d42
#define CIFS_SUPER_MAGIC 0xff534d42
#define V9FS_MAGIC 0x01021997
#define CEPH_SUPER_MAGIC 0x00c36400

/* True when nobody but root or us can change ST's size (see the header). */
static bool size_is_ours(int fd, const struct stat *st)
{
	struct statfs fs;

	if (st->st_uid != 0 || (st->st_mode & (S_IWGRP | S_IWOTH)) || fstatfs(fd, &fs))
		return false;
	switch ((unsigned long)fs.f_type) {
	case FUSE_SUPER_MAGIC:
	case NFS_SUPER_MAGIC:
	case SMB_SUPER_MAGIC:
	case SMB2_SUPER_MAGIC:
	case CIFS_SUPER_MAGIC:
	case V9FS_MAGIC:
	case CEPH_SUPER_MAGIC:
		return false;
	default:
		return true;
	}
}

int fd_snapshot(int fd)
{
	struct stat st;
	char *buf = NULL;
	off_t off = 0;
	ssize_t got;
	int mfd, err = 0;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((uint64_t)st.st_size > FD_SNAPSHOT_MAX)
		return -EFBIG;
	if (size_is_ours(fd, &st)) {
		mfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		return mfd < 0 ? -errno : mfd;
	}
	mfd = memfd_create("dwleak-snapshot", MFD_CLOEXEC);
	if (mfd < 0)
		return -errno;
	buf = malloc(STEP);
	if (!buf)
		err = -ENOMEM;
	while (!err && off < st.st_size) {
		size_t want = (size_t)(st.st_size - off) < STEP ? (size_t)(st.st_size - off) : STEP;

		got = pread(fd, buf, want, off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			err = got < 0 ? -errno : -EIO; /* it shrank */
		else if (write(mfd, buf, (size_t)got) != got)
			err = -errno ?: -EIO;
		else
			off += got;
	}
	free(buf);
	if (err) {
		close(mfd);
		return err;
	}
	return mfd;
}
