/* A stopped thread's seccomp filters, read and judged (seccomp_filters.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/seccomp.h>

#include "seccomp_eval.h"
#include "seccomp_filters.h"

#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif

int seccomp_mode(pid_t pid, pid_t tid)
{
	char path[96], buf[4096], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = 0;
	p = strstr(buf, "\nSeccomp:");
	return p ? atoi(p + 9) : 0; /* kernels without seccomp: none */
}

int seccomp_filters_read(pid_t pid, pid_t tid, struct seccomp_filters *out)
{
	int mode = seccomp_mode(pid, tid);

	memset(out, 0, sizeof(*out));
	if (mode < 0)
		return mode;
	out->mode = mode;
	if (mode == 0)
		return 0;
	if (mode == 1)
		return -ENOTSUP;
	for (;;) {
		long len = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)out->n, NULL);

		if (len < 0) {
			if (errno == ENOENT)
				return 0; /* past the last */
			return -errno;
		}
		if (out->n == SECCOMP_FILTERS_MAX)
			return -E2BIG;
		out->prog[out->n] = calloc((size_t)len ? (size_t)len : 1, sizeof(struct sock_filter));
		if (!out->prog[out->n])
			return -ENOMEM;
		out->len[out->n] = (size_t)len;
		out->n++;
		if (ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)(out->n - 1), out->prog[out->n - 1]) != len)
			return errno ? -errno : -EIO;
	}
}

int seccomp_filters_allow(const struct seccomp_filters *f, int nr, const uint64_t args[6], uint64_t ip,
			  const char **what)
{
	struct seccomp_eval_data d = { .nr = nr, .arch = AUDIT_ARCH_X86_64, .ip = ip };
	uint32_t all = SECCOMP_RET_ALLOW, ret;

	if (what)
		*what = NULL;
	memcpy(d.args, args, sizeof(d.args));
	for (size_t i = 0; i < f->n; i++) {
		if (seccomp_eval(f->prog[i], f->len[i], &d, &ret))
			return -EINVAL;
		all = seccomp_eval_combine(all, ret);
	}
	switch (seccomp_fate_of(all, NULL)) {
	case SECCOMP_RUNS:
		return 0;
	case SECCOMP_FAILS:
		if (what)
			*what = "fails";
		return -EPERM;
	case SECCOMP_SIGNALS:
		if (what)
			*what = "raises SIGSYS";
		return -EPERM;
	case SECCOMP_KILLS:
	default:
		if (what)
			*what = "kills the thread";
		return -EPERM;
	}
}

void seccomp_filters_free(struct seccomp_filters *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->prog[i]);
	memset(f, 0, sizeof(*f));
}
