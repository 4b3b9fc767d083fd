/* The tables/ layer on its own, built for the arm64 guest (make ARCH=arm64
 * vm-tools): compiles each object's CFI and checks the table against libdw
 * there, natively, printing the summary line `dwleak tables --verify`
 * prints.  dwleak itself is not built for arm64 yet (its walker and probes
 * are x86_64's); this proves the compiler and its oracle on an arm64 host.
 * Usage: tables_verify OBJECT...   Exit: 0 all agree, 1 a mismatch, 2 an
 * object could not be compiled or verified. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "table.h"
#include "table_verify.h"

#define MISMATCHES_SHOWN 10

static unsigned long mismatches_seen;

static void mismatch_print(void *arg, uint64_t addr, const char *ours, const char *theirs)
{
	const char *path = arg;

	if (mismatches_seen++ < MISMATCHES_SHOWN)
		printf("mismatch %s %#" PRIx64 ": ours %s, libdw %s\n", path, addr, ours, theirs);
}

/* Compiles and verifies PATH; returns the exit status it earns. */
static int object_check(const char *path)
{
	struct table_verify_result res;
	struct unwind_table *t = NULL;
	int fd, ret;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "tables_verify: %s: %s\n", path, strerror(errno));
		return 2;
	}
	ret = table_compile_fd(fd, NULL, &t);
	if (ret) {
		fprintf(stderr, "tables_verify: %s: compiling its CFI failed: %s\n", path, table_last_error());
		close(fd);
		return 2;
	}
	mismatches_seen = 0;
	ret = table_verify(fd, NULL, t, &res, mismatch_print, (void *)path);
	close(fd);
	if (ret) {
		fprintf(stderr, "tables_verify: %s: the check against libdw could not run: %s\n", path,
			table_verify_last_error());
		table_free(t);
		return 2;
	}
	printf("verify %s: arch=%s fdes=%" PRIu32 " rows=%" PRIu32 " bytes=%" PRIu64
	       " bytes_per_row=%.2f coverage=%.3f%% mismatches=%" PRIu64 "\n",
	       path, t->arch == UNWIND_ARCH_AARCH64 ? "aarch64" : "x86_64", res.nfdes, res.nrows,
	       res.walker_bytes, res.nrows ? (double)res.walker_bytes / res.nrows : 0.0,
	       res.covered_bytes ? 100.0 * (double)res.supported_bytes / (double)res.covered_bytes : 0.0,
	       res.mismatches);
	table_free(t);
	return res.mismatches ? 1 : 0;
}

int main(int argc, char **argv)
{
	int i, st, worst = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: tables_verify OBJECT...\n");
		return 2;
	}
	for (i = 1; i < argc; i++) {
		st = object_check(argv[i]);
		if (st > worst)
			worst = st;
	}
	return worst;
}
