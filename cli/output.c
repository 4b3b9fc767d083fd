/* The report's destination.  dwleak runs as root and -o may name a place
 * others can write (a sticky /tmp): a regular file is written beside its
 * final name, in a new file nobody else can have planted, and renamed over
 * it only once the report is complete, so a run that fails leaves the old
 * report as it was, and a symbolic link planted at the name is refused,
 * never followed to overwrite or create the file it points to.  A pipe, a
 * terminal or another device (/dev/stdout) is written directly: opening
 * it overwrites nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output.h"

/* A device, FIFO or socket at PATH (links followed): written directly. */
static int open_special(const char *path, struct output *o)
{
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	if (fd < 0 && errno == ENXIO)
		fprintf(stderr, "dwleak: cannot write %s: a FIFO with no reader\n", path);
	else if (fd < 0)
		fprintf(stderr, "dwleak: cannot write %s: %s\n", path, strerror(errno));
	if (fd < 0)
		return -1;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	o->f = fdopen(fd, "w");
	if (!o->f) {
		close(fd);
		return -1;
	}
	return 0;
}

/* A new file beside PATH's final name, in the directory O->dirfd. */
static int open_beside(const char *path, const struct stat *old, struct output *o)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	char *base = strdup(path), *name = base ? basename(base) : NULL;
	int fd = -1, tries, i;

	if (!name)
		return -1;
	o->name = strdup(name);
	for (tries = 0; o->name && tries < 100 && fd < 0; tries++) {
		unsigned char rnd[8];
		char suffix[9];

		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			break;
		for (i = 0; i < 8; i++)
			suffix[i] = alnum[rnd[i] % (sizeof(alnum) - 1)];
		suffix[8] = 0;
		free(o->tmp);
		if (asprintf(&o->tmp, ".%s.dwleak-%s", name, suffix) < 0) {
			o->tmp = NULL;
			break;
		}
		fd = openat(o->dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	free(base);
	if (fd < 0) {
		fprintf(stderr, "dwleak: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	/* the report takes the place of the old file: its mode and owner too */
	if (old) {
		if (fchown(fd, old->st_uid, old->st_gid)) {
			/* not root: the report is ours, as any file we write */
		}
		fchmod(fd, old->st_mode & 07777);
	}
	o->f = fdopen(fd, "w");
	if (!o->f) {
		close(fd);
		unlinkat(o->dirfd, o->tmp, 0);
		return -1;
	}
	return 0;
}

int output_open(const char *path, struct output *o)
{
	struct stat st, lst;
	char *dir;
	bool exists;

	memset(o, 0, sizeof(*o));
	o->dirfd = -1;
	if (!path) {
		o->f = stdout;
		return 0;
	}
	o->path = path;
	if (!stat(path, &st) && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return open_special(path, o);
	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "dwleak: cannot write %s: it is a directory; give a file name\n", path);
		return -1;
	}
	exists = !lstat(path, &lst);
	if (exists && S_ISLNK(lst.st_mode)) {
		fprintf(stderr, "dwleak: will not write %s: it is a symbolic link, which dwleak does not "
				"write through; give the path of the file itself\n", path);
		return -1;
	}
	dir = strdup(path);
	if (!dir)
		return -1;
	o->dirfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (o->dirfd < 0) {
		fprintf(stderr, "dwleak: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (open_beside(path, exists ? &lst : NULL, o)) {
		output_discard(o);
		return -1;
	}
	return 0;
}

int output_commit(struct output *o)
{
	int err = 0;

	if (!o->f)
		return -EBADF;
	if (o->f == stdout)
		return fflush(stdout) ? -errno : 0;
	if (fflush(o->f) || (o->tmp && fsync(fileno(o->f))))
		err = -errno;
	if (fclose(o->f) && !err)
		err = -errno;
	o->f = NULL;
	/* rename replaces whatever is at the name now, a link planted
	 * meanwhile included, without following it */
	if (!err && o->tmp && renameat(o->dirfd, o->tmp, o->dirfd, o->name))
		err = -errno;
	if (!err) {
		free(o->tmp); /* renamed: nothing to remove */
		o->tmp = NULL;
	}
	output_discard(o);
	return err;
}

void output_discard(struct output *o)
{
	if (o->f && o->f != stdout)
		fclose(o->f);
	if (o->tmp && o->dirfd >= 0)
		unlinkat(o->dirfd, o->tmp, 0);
	if (o->dirfd >= 0)
		close(o->dirfd);
	free(o->tmp);
	free(o->name);
	memset(o, 0, sizeof(*o));
	o->dirfd = -1;
}
