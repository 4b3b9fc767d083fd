/* Issue 13: reading target files never dies of SIGBUS, whatever their
 * owner does meanwhile.  A writer truncates a copy of libc and writes it
 * back, forever, while this test looks symbols up in it (target/
 * elf_symbols.c, what allocator detection and the linker hook use) and
 * names addresses in it (report/symbolize.c through libdwfl, which maps
 * what it reads: it gets a private copy, fd_snapshot).  Each reader runs
 * in a child, so a SIGBUS shows as the child's death, a failed check.
 * The copy is another user's file, as a program's debug file would be: a
 * file only root can write is read as it is (same_file_unless_others_write).
 * Against the old code (libelf and libdwfl mapping the file itself) the
 * children died of SIGBUS. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "elf_symbols.h"
#include "fd_snapshot.h"
#include "symbolize.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define ROUNDS 300

/* Looks malloc up ROUNDS times. */
static int read_symbols(const char *path)
{
	int i, found = 0;

	for (i = 0; i < ROUNDS; i++) {
		struct elf_sym_want w = { .name = "malloc" };
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return 3;
		elf_symbols_find(fd, &w, 1);
		found += w.found;
		close(fd);
	}
	printf("  malloc found in %d of %d lookups of a file being truncated\n", found, ROUNDS);
	return 0;
}

/* Names an address in it ROUNDS times, each through a new symbolizer. */
static int symbolize_rounds(const char *path, uint64_t addr)
{
	int i, named = 0;

	for (i = 0; i < ROUNDS / 10; i++) {
		struct symbolizer *s;
		struct sym_module *m;
		struct sym_frame *f;
		size_t n;
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || symbolizer_new(NULL, &s))
			return 3;
		if (symbolizer_module(s, path, fd, &m) == 0 && sym_module_resolve(m, addr, false, &f, &n) == 0) {
			named += n && f[0].function;
			sym_frames_free(f, n);
		}
		symbolizer_free(s);
		close(fd);
	}
	printf("  %d of %d symbolizations of a file being truncated named the address\n", named, ROUNDS / 10);
	return 0;
}

/* Runs FN in a child while a writer truncates VICTIM; the child's fate. */
static void race(const char *what, const char *victim, const uint8_t *image, size_t len, int (*fn)(const char *))
{
	pid_t writer, reader;
	int fd, status;

	fd = open(victim, O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	writer = fork();
	CHECK(writer >= 0);
	if (writer == 0)
		check_truncate_forever(fd, image, len, 300);
	close(fd);
	reader = fork();
	CHECK(reader >= 0);
	if (reader == 0)
		_exit(fn(victim));
	CHECK(waitpid(reader, &status, 0) == reader);
	kill(writer, SIGKILL);
	waitpid(writer, NULL, 0);
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the reader %s %d", what,
	       WIFSIGNALED(status) ? "died of signal" : "exited", WIFSIGNALED(status) ? WTERMSIG(status)
										: WEXITSTATUS(status));
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		printf("ok: %s: no SIGBUS\n", what);
}

static uint64_t malloc_addr;

static int symbolize_malloc(const char *path)
{
	return symbolize_rounds(path, malloc_addr);
}

/* True when A and B are descriptors of one file. */
static bool same_inode(int a, int b)
{
	struct stat x, y;

	return !fstat(a, &x) && !fstat(b, &y) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* A file only root can write is not copied (a system library or debug
 * file: the copies cost a report tens of ms); one its group can write,
 * or another user owns, is.  FD: the victim, another user's. */
static void same_file_unless_others_write(int fd)
{
	struct stat st;
	int copy;

	CHECK(!fstat(fd, &st) && st.st_uid != 0);
	CHECK(fchown(fd, 0, 0) == 0 && fchmod(fd, 0644) == 0);
	copy = fd_snapshot(fd);
	EXPECT(copy >= 0 && same_inode(copy, fd), "root's 0644 file was copied");
	close(copy);
	CHECK(fchmod(fd, 0664) == 0);
	copy = fd_snapshot(fd);
	EXPECT(copy >= 0 && !same_inode(copy, fd), "root's group-writable file was not copied");
	close(copy);
	CHECK(fchown(fd, st.st_uid, st.st_gid) == 0 && fchmod(fd, st.st_mode & 07777) == 0);
}

/* A snapshot is the file as it was, unchanged by later writes to it. */
static void test_snapshot(const char *victim, const uint8_t *image, size_t len)
{
	int fd = open(victim, O_RDWR | O_CLOEXEC), copy;
	uint8_t *back = malloc(len);

	CHECK(fd >= 0 && back);
	CHECK(pwrite(fd, image, len, 0) == (ssize_t)len);
	copy = fd_snapshot(fd);
	CHECK(copy >= 0, "fd_snapshot: %s", strerror(-copy));
	CHECK(ftruncate(fd, 0) == 0);
	EXPECT(pread(copy, back, len, 0) == (ssize_t)len && !memcmp(back, image, len),
	       "the snapshot changed with its original");
	EXPECT(fd_snapshot(open("/dev/null", O_RDONLY | O_CLOEXEC)) == -EINVAL, "a device is no file to copy");
	same_file_unless_others_write(fd);
	CHECK(pwrite(fd, image, len, 0) == (ssize_t)len);
	close(copy);
	close(fd);
	free(back);
}

int main(void)
{
	char victim[] = "/tmp/dwleak-no-sigbus.XXXXXX";
	struct elf_sym_want w = { .name = "malloc" };
	size_t len;
	uint8_t *image = check_slurp(LIBC, &len);
	int fd = mkstemp(victim);

	CHECK(fd >= 0 && write(fd, image, len) == (ssize_t)len);
	/* another user's file, as a traced program's debug file would be
	 * (root's own are not copied: only root could truncate them) */
	CHECK(fchown(fd, 65534, 65534) == 0, "chown: %s", strerror(errno));
	elf_symbols_find(fd, &w, 1);
	CHECK(w.found, "no malloc in %s", LIBC);
	malloc_addr = w.vaddr;
	close(fd);
	test_snapshot(victim, image, len);
	race("elf_symbols_find", victim, image, len, read_symbols);
	race("symbolizer", victim, image, len, symbolize_malloc);
	unlink(victim);
	free(image);
	return check_status();
}
