/* The unit tests' assertions, one header so that every test reports a
 * failure the same way: "FILE:LINE: FAIL: COND: message" on stderr.
 * CHECK stops the test at its first failure; EXPECT counts the failure and
 * goes on, for tests that report every broken case in one run, and
 * check_status() turns that count into main's exit status.  The message is
 * optional; CHECK(0, ...) and EXPECT(0, ...) fail unconditionally. */
#ifndef DWLEAK_TEST_CHECK_H
#define DWLEAK_TEST_CHECK_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How many EXPECTs have failed so far. */
static int check_failures;

/* A scratch directory the test leaves behind when it fails: failures name it. */
static const char *check_tmpdir;

/* Says where and why a check failed (stdout first, to keep the log in order). */
static inline void __attribute__((format(printf, 4, 5)))
check_report(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s:%d: FAIL: %s:", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (check_tmpdir)
		fprintf(stderr, " (files kept in %s)", check_tmpdir);
	fputc('\n', stderr);
}

/* CHECK(cond[, fmt, ...]): unless COND holds, report it and exit 1. */
#define CHECK(cond, ...)                                                           \
	do {                                                                       \
		if (!(cond)) {                                                     \
			check_report(__FILE__, __LINE__, #cond, " " __VA_ARGS__);  \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

/* EXPECT(cond[, fmt, ...]): unless COND holds, report it, count it, go on. */
#define EXPECT(cond, ...)                                                          \
	do {                                                                       \
		if (!(cond)) {                                                     \
			check_report(__FILE__, __LINE__, #cond, " " __VA_ARGS__);  \
			check_failures++;                                          \
		}                                                                  \
	} while (0)

/* The exit status tests/run.sh counts as a skip. */
#define EXIT_SKIP 77

/* The number of elements of array A. */
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* For the tests whose independent checker is a Python script: skips the
 * test (exit EXIT_SKIP, saying why) unless shell command PROBE, which asks
 * for python3 and what the script imports, succeeds. */
static inline void check_python3(const char *probe)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "%s >/dev/null 2>&1", probe);
	if (system(cmd) == 0)
		return;
	printf("skip: python3 not found\n");
	exit(EXIT_SKIP);
}

#ifdef _GNU_SOURCE /* process_vm_readv */
#include <sys/uio.h>

/* A decoder's read callback over this process's own memory (CTX unused):
 * LEN bytes at ADDR into BUF, read with process_vm_readv so that a bad
 * address is an error (-EFAULT), not a crash. */
static inline int check_self_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	(void)ctx;
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

/* Its write counterpart: LEN bytes at BUF to ADDR with process_vm_writev
 * (as dwleak writes a ring's words). */
static inline int check_self_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len }, remote = { (void *)(uintptr_t)addr, len };

	(void)ctx;
	return process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}
#endif

/* xorshift64: the tests' reproducible pseudo-random numbers, from the
 * state *S (any nonzero seed of the test's own). */
static inline uint64_t check_xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The I-th of the addresses an allocator might hand out: 16-byte aligned,
 * clustered in 64 regions a MiB apart. */
static inline uint64_t check_alloc_addr(unsigned i)
{
	return 0x7f0000000000ull + (uint64_t)(i % 64) * 0x100000 + (uint64_t)(i / 64) * 16;
}

/* The whole of file PATH in a malloc'd buffer (its size in *LEN). */
static inline uint8_t *check_slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0 && fstat(fd, &st) == 0, "%s: %s", path, strerror(errno));
	buf = malloc((size_t)st.st_size);
	CHECK(buf && pread(fd, buf, (size_t)st.st_size, 0) == st.st_size, "reading %s", path);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* Writes BUF[0..LEN) to PATH, created with MODE or truncated. */
static inline void check_spit(const char *path, const uint8_t *buf, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, mode);

	CHECK(fd >= 0 && write(fd, buf, len) == (ssize_t)len, "%s", path);
	close(fd);
}

/* For a forked writer: truncates the file open at FD to one page and
 * writes IMAGE[0..LEN) back, forever, leaving it whole for PAUSE_US each
 * time, so readers start on a whole file and have it cut under them. */
static inline void __attribute__((noreturn))
check_truncate_forever(int fd, const uint8_t *image, size_t len, long pause_us)
{
	struct timespec whole = { 0, pause_us * 1000 };

	for (;;) {
		if (ftruncate(fd, 4096) != 0 || pwrite(fd, image, len, 0) != (ssize_t)len)
			_exit(1);
		nanosleep(&whole, NULL);
	}
}

/* The first line (from 1) on which multi-line texts GOT and WANT differ,
 * or 0 when they are equal: for a failure message that names it. */
static inline size_t check_first_diff_line(const char *got, const char *want)
{
	size_t line = 1;

	while (*got && *got == *want) {
		if (*got == '\n')
			line++;
		got++;
		want++;
	}
	return *got == *want ? 0 : line;
}

/* main's exit status after EXPECTs: 1, with the count on stderr, if any failed. */
static inline int check_status(void)
{
	if (!check_failures)
		return 0;
	fprintf(stderr, "%d check(s) failed", check_failures);
	if (check_tmpdir)
		fprintf(stderr, "; files kept in %s", check_tmpdir);
	fputc('\n', stderr);
	return 1;
}

#endif
