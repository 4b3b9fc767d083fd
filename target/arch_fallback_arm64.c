/* On arm64 (issue 26): what x86_64's target/ does by running code of its
 * own inside a process (inject.c loads the preload library into a running
 * process, snapshot.c clones it for the leak check's copy-on-write view;
 * both write x86_64 instructions there) is not built for arm64 yet.  Their
 * entry points answer here, each saying so, and the callers take the ways
 * they take when these fail on x86_64 too: -p traces with uprobes, the
 * leak check scans the stopped process in place. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject.h"
#include "snapshot.h"

int inject_library(pid_t pid, const char *library_path, const struct inject_opts *opts, struct inject_result *res)
{
	(void)pid;
	(void)library_path;
	(void)opts;
	memset(res, 0, sizeof(*res));
	res->reason = strdup("loading the library into a running process is built for x86_64 only so far");
	return -EOPNOTSUPP;
}

void inject_result_free(struct inject_result *res)
{
	if (!res)
		return;
	free(res->reason);
	res->reason = NULL;
}

int proc_snapshot_prepare(pid_t pid, struct proc_snapshot *s, char *why, size_t whylen)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	snprintf(why, whylen, "no copy-on-write snapshot on arm64 yet: the process stays stopped for the scan");
	return -EOPNOTSUPP;
}

int proc_snapshot_take(struct proc_snapshot *s, pid_t tid, char *why, size_t whylen)
{
	(void)s;
	(void)tid;
	snprintf(why, whylen, "no copy-on-write snapshot on arm64 yet");
	return -EOPNOTSUPP;
}

int proc_snapshot_drop(struct proc_snapshot *s)
{
	(void)s;
	return 0;
}

int proc_snapshot_reap(struct proc_snapshot *s, pid_t tid)
{
	(void)s;
	(void)tid;
	return 0;
}

void proc_snapshot_free(struct proc_snapshot *s)
{
	if (s) {
		free(s->gaps);
		s->gaps = NULL;
		s->ngaps = 0;
	}
}
