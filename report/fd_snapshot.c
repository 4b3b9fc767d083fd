/* Copying a file into a memfd with pread (no mapping of the original, so
 * no SIGBUS however the original changes), in 1 MiB steps. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd_snapshot.h"

#define STEP (1u << 20)

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
