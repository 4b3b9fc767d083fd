/* The report's destination.  dwleak runs as root and -o may name a place
 * others can write (a sticky /tmp): a regular file is written beside its
 * final name, in a new file nobody else can have planted, and renamed over
 * it only once the report is complete, so a run that fails leaves the old
 * report as it was, and a symbolic link planted at the name is refused,
 * never followed to overwrite or create the file it points to.  A pipe, a
 * terminal or another device (/dev/stdout) is written directly: opening
 * it overwrites nothing; but only through a link that is root's or ours
 * (another user's could point at a disk), never to a block device, and not
 * to a FIFO or socket another user put in a directory others can write
 * (it would hand them the report).  A file someone else planted gives the
 * report neither its owner nor its mode. */
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

#define REPLACED "something else was put at its name while dwleak opened it; give a path in a directory " \
		 "only you can write"

/* Root's or ours: what someone else cannot have chosen. */
static bool ours(const struct stat *st)
{
	return st->st_uid == 0 || st->st_uid == geteuid();
}

/* The directory PATH's last name is in, stat'ed; 0 or -1. */
static int dir_stat(const char *path, struct stat *st)
{
	char *copy = strdup(path);
	int ret = copy ? stat(dirname(copy), st) : -1;

	free(copy);
	return ret;
}

/* A directory where others may create names and only their owner may
 * remove them: /tmp.  What sits there may have been planted. */
static bool shared_dir(const struct stat *dir)
{
	return (dir->st_mode & S_ISVTX) && (dir->st_mode & (S_IWOTH | S_IWGRP));
}

/* Why the special file ST (at PATH) is not one to write the report to, or
 * NULL when it is.  Asked before it is opened and again of what was. */
static const char *special_refused(const struct stat *st, const char *path)
{
	struct stat dir;

	if (S_ISBLK(st->st_mode))
		return "it is a block device (a disk); give a file name, or a pipe";
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))
		return REPLACED;
	if ((S_ISFIFO(st->st_mode) || S_ISSOCK(st->st_mode)) && !ours(st) && !dir_stat(path, &dir) &&
	    shared_dir(&dir) && st->st_uid != dir.st_uid)
		return "it is a FIFO or socket another user put in a directory anyone can write, and "
		       "would hand them the report; give a file name";
	return NULL;
}

/* A device, FIFO or socket at PATH (ST: what stat or lstat found there),
 * written directly.  LINK: PATH is a symbolic link (lstat'ed in *LINK,
 * root's or ours) that may be followed; else none is. */
static int open_special(const char *path, const struct stat *st, const struct stat *link, struct output *o)
{
	const char *why = special_refused(st, path);
	struct stat now;
	int fd = -1;

	if (!why) {
		fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (link ? 0 : O_NOFOLLOW));
		if (fd < 0 && errno == ENXIO && S_ISFIFO(st->st_mode))
			fprintf(stderr, "dwleak: cannot write %s: a FIFO with no reader\n", path);
		else if (fd < 0 && errno == ELOOP)
			why = REPLACED;
		else if (fd < 0)
			fprintf(stderr, "dwleak: cannot write %s: %s\n", path, strerror(errno));
	}
	if (fd >= 0)
		why = fstat(fd, &now) ? "it cannot be examined" : special_refused(&now, path);
	/* the link followed is the one checked, not one put there since */
	if (fd >= 0 && !why && link &&
	    (lstat(path, &now) || now.st_ino != link->st_ino || now.st_dev != link->st_dev))
		why = REPLACED;
	if (why)
		fprintf(stderr, "dwleak: will not write %s: %s\n", path, why);
	if (why && fd >= 0)
		close(fd);
	if (fd < 0 || why)
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
	/* the report takes the place of the old file: its mode and owner too,
	 * when that owner is us or owns the directory (a user's own report in
	 * their home); not those of a file planted in a shared directory,
	 * which would give its planter the report to rewrite */
	if (old && (old->st_uid == geteuid() || old->st_uid == o->dir_uid)) {
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

int output_open(const char *path, FILE *std, struct output *o)
{
	struct stat st, lst, dir;
	char *copy;
	bool exists;

	memset(o, 0, sizeof(*o));
	o->dirfd = -1;
	if (!path) {
		o->f = std;
		return 0;
	}
	o->path = path;
	exists = !lstat(path, &lst);
	if (exists && S_ISLNK(lst.st_mode)) {
		/* a link leads anywhere: followed only to a device or pipe
		 * (/dev/stdout), and only when root or we made it */
		if (!stat(path, &st) && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && ours(&lst))
			return open_special(path, &st, &lst, o);
		fprintf(stderr, "dwleak: will not write %s: it is a symbolic link%s, which dwleak does not "
				"write through; give the path of the file itself\n",
			path, ours(&lst) ? "" : " another user owns");
		return -1;
	}
	if (exists && S_ISDIR(lst.st_mode)) {
		fprintf(stderr, "dwleak: cannot write %s: it is a directory; give a file name\n", path);
		return -1;
	}
	if (exists && !S_ISREG(lst.st_mode))
		return open_special(path, &lst, NULL, o);
	copy = strdup(path);
	if (!copy)
		return -1;
	o->dirfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (o->dirfd < 0 || fstat(o->dirfd, &dir)) {
		fprintf(stderr, "dwleak: cannot write %s: %s\n", path, strerror(errno));
		output_discard(o);
		return -1;
	}
	o->dir_uid = dir.st_uid;
	if (open_beside(path, exists ? &lst : NULL, o)) {
		output_discard(o);
		return -1;
	}
	return 0;
}

bool output_is_terminal(const struct output *o)
{
	return o->f && isatty(fileno(o->f));
}

int output_commit(struct output *o)
{
	int err = 0;

	if (!o->f)
		return -EBADF;
	if (!o->path)
		return fflush(o->f) ? -errno : 0;
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
	if (o->f && o->path)
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
