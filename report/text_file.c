/* Whole-file input for dwleak's commands: a regular file, a pipe (a
 * FIFO, standard input, bash's <(...)), or /dev/null; any other device
 * refused (/dev/zero never ends, a terminal waits); bounded, so no input
 * can eat all memory.  A FIFO is opened without waiting for a writer (none:
 * it reads as empty), and a read a signal interrupts ends the read, so
 * Ctrl-C always gets through. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "text_file.h"

static const char *kind_of(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a regular file";
}

/* Reads FD to its end, at most MAX bytes. */
static int read_all(int fd, size_t max, char **buf, size_t *len)
{
	size_t cap = 0, n = 0;
	char *b = NULL, *g;
	ssize_t got;

	for (;;) {
		if (n + 1 >= cap) {
			cap = cap ? cap * 2 : 65536;
			if (cap > max + 2)
				cap = max + 2;
			g = realloc(b, cap);
			if (!g) {
				free(b);
				return -ENOMEM;
			}
			b = g;
		}
		got = read(fd, b + n, cap - n - 1);
		if (got < 0) {
			free(b);
			return -errno;
		}
		if (!got)
			break;
		n += (size_t)got;
		if (n > max) {
			free(b);
			return -EFBIG;
		}
	}
	b[n] = 0;
	*buf = b;
	*len = n;
	return 0;
}

int text_file_read(const char *path, size_t max, char **buf, size_t *len, const char **what)
{
	struct stat st;
	int fd, err;

	*buf = NULL;
	*len = 0;
	*what = NULL;
	if (!strcmp(path, "-"))
		return read_all(STDIN_FILENO, max, buf, len);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
	} else if (S_ISDIR(st.st_mode)) {
		err = -EISDIR;
	} else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) {
		err = read_all(fd, max, buf, len); /* /dev/null: empty */
	} else if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
		*what = kind_of(st.st_mode);
		err = -ENOTSUP;
	} else if ((uint64_t)st.st_size > max) {
		err = -EFBIG;
	} else {
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		err = read_all(fd, max, buf, len);
	}
	close(fd);
	return err;
}
