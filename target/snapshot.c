/* A copy-on-write snapshot of a stopped process for the leak check
 * (snapshot.h): one clone() makes it, one wait4() lets the process reap
 * it, each made by a stopped thread from code in a cave (snapshot_cave.S),
 * the way the injector makes its calls (inject.c): the thread's state is
 * written into the cave before it runs any of it, the call is watched
 * with PTRACE_SYSCALL, and at its syscall-exit stop the thread is set
 * back exactly (signal mask first, then the registers, so that a SIGKILL
 * of dwleak between the two still leaves it whole); the system call it
 * was interrupted in is made again when it resumes, as the kernel's
 * restart would. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cave.h"
#include "inject_abi.h"
#include "proc_maps.h"
#include "seccomp_filters.h"
#include "snapshot.h"
#include "snapshot_abi.h"

#define STEP_MS 10000 /* a clone of a process with a huge address space takes a while */
#define COPY_STOP_MS 2000


static void __attribute__((format(printf, 3, 4))) say(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (!why || !whylen)
		return;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}


/* The cave's code, copied from snapshot_cave.S. */
extern const char snapshot_cave_start[], snapshot_cave_end[], snapshot_cave_clone[], snapshot_cave_syscall[];

#define CAVE_OFF(sym) ((uint64_t)((sym) - snapshot_cave_start))
#define CAVE_LEN ((size_t)(snapshot_cave_end - snapshot_cave_start))
#define SIGSETXID 33 /* glibc's: setuid() in a threaded process waits for it */





/*
 * Thread TID (stopped) makes system call NR(ARGS) from the cave's entry
 * ENTRY; *RET gets its return.  The thread is set back (see the module's
 * comment) and left stopped for the caller.  Returns 0 or -errno.
 */
static int cave_syscall(struct proc_snapshot *s, pid_t tid, const char *entry, long nr, const uint64_t args[6],
			long *ret)
{
	unsigned char cave[1024] __attribute__((aligned(8)));
	struct user_regs_struct saved, back, g;
	uint64_t mask, blocked = ~0ull & ~(1ull << (SIGSETXID - 1)), ir[IR_COUNT];
	double deadline = cave_now_ms() + STEP_MS;
	int status, sig = 0, stops = 0, err;

	if (CAVE_LEN > sizeof(cave))
		return -E2BIG;
	if (ptrace(PTRACE_GETREGS, tid, 0, &saved) ||
	    ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(mask), &mask))
		return -errno;
	cave_resume_regs(&saved, &back, NULL);
	/* the cave first, with what the thread needs to restore itself */
	memcpy(cave, snapshot_cave_start, CAVE_LEN);
	memcpy(cave + SNAP_RESUME, &back.rip, 8);
	memcpy(cave + SNAP_SIGMASK, &mask, 8);
	cave_regs_pack(&back, ir);
	memcpy(cave + SNAP_REGS, ir, sizeof(ir));
	err = cave_write(s->pid, s->cave, cave, CAVE_LEN);
	if (err)
		return err;
	/* registers, then the mask: the cave restores both */
	g = saved;
	g.rip = s->cave + (uint64_t)(entry - snapshot_cave_start);
	g.rax = (unsigned long long)nr;
	g.orig_rax = (unsigned long long)-1;
	g.rdi = args[0];
	g.rsi = args[1];
	g.rdx = args[2];
	g.r10 = args[3];
	g.r8 = args[4];
	g.r9 = args[5];
	if (ptrace(PTRACE_SETREGS, tid, 0, &g))
		return -errno;
	if (ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(blocked), &blocked)) {
		err = -errno;
		goto back;
	}
	for (;;) {
		if (ptrace(PTRACE_SYSCALL, tid, 0, (void *)(long)sig)) {
			err = -errno;
			break;
		}
		sig = 0;
		err = cave_wait_stop(tid, deadline, &status);
		if (err)
			break;
		if (status >> 16)
			continue; /* a ptrace event (the clone's, a group stop): on */
		/* a syscall stop (PTRACE_O_TRACESYSGOOD, see the contract): the
		 * call's entry, then its exit */
		if (WSTOPSIG(status) == (SIGTRAP | 0x80)) {
			if (++stops == 2) {
				if (ptrace(PTRACE_GETREGS, tid, 0, &g))
					err = -errno;
				*ret = (long)g.rax;
				break;
			}
			continue;
		}
		sig = WSTOPSIG(status); /* a signal not blocked (SIGSETXID): delivered */
	}
	if (err == -ESRCH)
		return err;
	if (err == -ETIMEDOUT) {
		/* inside the call still: stopped, then set back */
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		cave_wait_stop(tid, cave_now_ms() + 1000, &status);
	}
back:
	if (ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(mask), &mask) || ptrace(PTRACE_SETREGS, tid, 0, &back))
		err = err ?: -errno;
	return err;
}

static int gaps_read(pid_t pid, struct proc_snapshot_gap **gaps, size_t *n)
{
	char path[64], *line = NULL;
	struct proc_snapshot_gap cur = { 0 }, *v = NULL, *grown;
	size_t cap = 0, vcap = 0;
	bool uprobes = false;
	int err = 0;
	FILE *f;

	*gaps = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (!err && getline(&line, &cap, f) > 0) {
		unsigned long long lo, hi;

		if (strncmp(line, "VmFlags:", 8)) {
			/* a mapping's first line, "start-end perms offset dev inode
			 * path", not a field ("Rss:   4 kB") */
			int path_at = 0;

			if (line[strcspn(line, " :-")] == '-' &&
			    sscanf(line, "%llx-%llx %*s %*x %*x:%*x %*u %n", &lo, &hi, &path_at) == 2) {
				cur = (struct proc_snapshot_gap){ lo, hi };
				/* the kernel's page, not a file of that name (a path
				 * starts with '/') */
				uprobes = path_at && !strcmp(line + path_at, "[uprobes]\n");
			}
			continue;
		}
		if (!strstr(line, " wr") || !(strstr(line, " dc") || strstr(line, " wf")) || uprobes || !cur.end)
			continue;
		if (*n == vcap) {
			vcap = vcap ? 2 * vcap : 8;
			grown = realloc(v, vcap * sizeof(*v));
			if (!grown) {
				err = -ENOMEM;
				break;
			}
			v = grown;
		}
		v[(*n)++] = cur;
	}
	free(line);
	fclose(f);
	if (err) {
		free(v);
		*n = 0;
		return err;
	}
	*gaps = v;
	return 0;
}

/* A number from the first line of file PATH ("max": UINT64_MAX), or
 * UINT64_MAX when it cannot be read. */
static uint64_t file_number(const char *path)
{
	unsigned long long v = UINT64_MAX;
	char line[64] = "";
	FILE *f = fopen(path, "re");

	if (f && fgets(line, sizeof(line), f) && strncmp(line, "max", 3))
		v = strtoull(line, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* The value of FIELD (a "Name:" line, in kB) in /proc file PATH, in
 * bytes, or UINT64_MAX. */
static uint64_t proc_kb(const char *path, const char *field)
{
	char line[256];
	uint64_t v = UINT64_MAX;
	size_t n = strlen(field);
	FILE *f = fopen(path, "re");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n)) {
			v = strtoull(line + n, NULL, 10) << 10;
			break;
		}
	if (f)
		fclose(f);
	return v;
}

/* Where this process sees the memory cgroup hierarchies: the v1 memory
 * controller's mount and the cgroup2 mount (paths, malloc'd, NULL when
 * not mounted), each with the root of the hierarchy it shows. */
struct memcg_mounts {
	char *v1, *v1_root, *v2, *v2_root;
};

static bool option_in(const char *list, const char *want)
{
	size_t n = strlen(want);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, want, n) && (p[n] == ',' || p[n] == 0 || p[n] == '\n'))
			return true;
	return false;
}

static void memcg_mounts_read(struct memcg_mounts *m)
{
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");

	memset(m, 0, sizeof(*m));
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS" */
	while (f && fgets(line, sizeof(line), f)) {
		char root[1024], point[1024], type[64], super[1024];
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", root, point) != 2 ||
		    sscanf(dash + 3, "%63s %*s %1023s", type, super) != 2)
			continue;
		if (!strcmp(type, "cgroup") && option_in(super, "memory") && !m->v1) {
			m->v1 = strdup(point);
			m->v1_root = strdup(root);
		} else if (!strcmp(type, "cgroup2") && !m->v2) {
			m->v2 = strdup(point);
			m->v2_root = strdup(root);
		}
	}
	if (f)
		fclose(f);
}

static void memcg_mounts_free(struct memcg_mounts *m)
{
	free(m->v1);
	free(m->v1_root);
	free(m->v2);
	free(m->v2_root);
}

/* The least free memory (limit less usage) of PID's memory cgroup and
 * its ancestors, in the v1 memory controller and in cgroup2, or
 * UINT64_MAX when no limit is found. */
static uint64_t cgroup_headroom(pid_t pid)
{
	struct memcg_mounts mm;
	char path[4352], line[4096], *rel;
	uint64_t best = UINT64_MAX;
	FILE *f;

	memcg_mounts_read(&mm);
	for (int v1 = 1; v1 >= 0; v1--) {
		const char *mount = v1 ? mm.v1 : mm.v2, *root = v1 ? mm.v1_root : mm.v2_root;
		const char *limit_file = v1 ? "memory.limit_in_bytes" : "memory.max";
		const char *usage_file = v1 ? "memory.usage_in_bytes" : "memory.current";

		if (!mount || !root)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
		f = fopen(path, "re");
		rel = NULL;
		/* "N:memory,...:/path" (v1) or "0::/path" (v2) */
		while (!rel && f && fgets(line, sizeof(line), f)) {
			char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

			if (!c2)
				continue;
			*c2 = 0;
			if (v1 ? option_in(c1 + 1, "memory") : (c2 == c1 + 1 && !strncmp(line, "0:", 2)))
				rel = c2 + 1;
		}
		if (f)
			fclose(f);
		if (!rel)
			continue;
		rel[strcspn(rel, "\n")] = 0;
		/* the mount may show a subtree of the hierarchy */
		if (strcmp(root, "/") && !strncmp(rel, root, strlen(root)))
			rel += strlen(root);
		for (;;) {
			uint64_t limit, usage;

			snprintf(path, sizeof(path), "%s%s/%s", mount, *rel && strcmp(rel, "/") ? rel : "", limit_file);
			limit = file_number(path);
			snprintf(path, sizeof(path), "%s%s/%s", mount, *rel && strcmp(rel, "/") ? rel : "", usage_file);
			usage = file_number(path);
			/* v1's "no limit" is near INT64_MAX */
			if (limit < (1ull << 62) && usage != UINT64_MAX) {
				uint64_t free_here = limit > usage ? limit - usage : 0;

				if (free_here < best)
					best = free_here;
			}
			if (!*rel || !strcmp(rel, "/") || !strrchr(rel, '/'))
				break;
			*strrchr(rel, '/') = 0;
		}
	}
	memcg_mounts_free(&mm);
	return best;
}

/* A copy shares every page until the process writes it; each page then
 * costs a new one.  So the memory free for the process, in its cgroup
 * and in the system, must cover a good part of what it may write while
 * the copy is read: a quarter of its anonymous memory, or no snapshot
 * (a copy's faults must not get the process OOM-killed). */
static int headroom_check(pid_t pid, char *why, size_t whylen)
{
	char path[64];
	uint64_t anon, cg, avail;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	anon = proc_kb(path, "RssAnon:");
	if (anon == UINT64_MAX)
		return 0;
	cg = cgroup_headroom(pid);
	if (cg != UINT64_MAX && cg < anon / 4) {
		say(why, whylen, "its memory cgroup has %llu MiB free, less than a quarter of its %llu MiB of anonymous "
				 "memory, which a copy's pages would take as the process writes them",
		    (unsigned long long)(cg >> 20), (unsigned long long)(anon >> 20));
		return -ENOMEM;
	}
	avail = proc_kb("/proc/meminfo", "MemAvailable:");
	if (avail != UINT64_MAX && avail < anon / 4) {
		say(why, whylen, "the system has %llu MiB available, less than a quarter of its %llu MiB of anonymous "
				 "memory, which a copy's pages would take as the process writes them",
		    (unsigned long long)(avail >> 20), (unsigned long long)(anon >> 20));
		return -ENOMEM;
	}
	return 0;
}

int proc_snapshot_prepare(pid_t pid, struct proc_snapshot *s, char *why, size_t whylen)
{
	struct proc_map *maps = NULL;
	const struct proc_map *libc = NULL;
	size_t n = 0;
	int err;

	memset(s, 0, sizeof(*s));
	s->pid = pid;
	err = headroom_check(pid, why, whylen);
	if (err)
		return err;
	err = proc_maps_read(pid, false, &maps, &n);
	if (err) {
		say(why, whylen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-err));
		return err;
	}
	for (size_t i = 0; i < n && !libc; i++) {
		const char *b = strrchr(maps[i].path, '/');

		if (b && !strcmp(b + 1, "libc.so.6"))
			libc = &maps[i];
	}
	err = cave_find(pid, maps, n, libc, CAVE_LEN, "dwlksnp1", &s->cave);
	proc_maps_free(maps, n);
	if (err) {
		say(why, whylen, "no executable mapping has %zu bytes of padding for the snapshot's code", CAVE_LEN);
		return -ENOTSUP;
	}
	err = gaps_read(pid, &s->gaps, &s->ngaps);
	if (err)
		say(why, whylen, "cannot read /proc/%d/smaps: %s", (int)pid, strerror(-err));
	return err;
}

int proc_snapshot_take(struct proc_snapshot *s, pid_t tid, char *why, size_t whylen)
{
	/* clone(flags, stack, parent_tid, child_tid, tls): traced by us, no
	 * exit signal, the same stack (copied) */
	static const struct {
		int nr;
		uint64_t args[6];
	} calls[] = {
		{ SYS_clone, { CLONE_PTRACE, 0, 0, 0, 0, 0 } },
		{ SYS_wait4, { 1, 0, __WALL, 0, 0, 0 } },
		{ SYS_rt_sigprocmask, { SIG_SETMASK, 1, 0, 8, 0, 0 } },
		{ SYS_exit_group, { 0, 0, 0, 0, 0, 0 } },
	};
	struct seccomp_filters f;
	const char *what = NULL;
	double t0 = cave_now_ms();
	long ret = 0;
	int status, err;

	s->copy = 0;
	err = seccomp_filters_read(s->pid, tid, &f);
	if (err) {
		say(why, whylen, "cannot read its seccomp filters: %s", strerror(-err));
		seccomp_filters_free(&f);
		return -ENOTSUP;
	}
	for (size_t i = 0; f.n && i < sizeof(calls) / sizeof(calls[0]); i++) {
		if (seccomp_filters_allow(&f, calls[i].nr, calls[i].args, s->cave + CAVE_OFF(snapshot_cave_syscall),
					  &what)) {
			say(why, whylen, "a seccomp filter of the process %s system call %d",
			    !what ? "cannot be evaluated for" : !strcmp(what, "fails") ? "fails" : "would stop it at",
			    calls[i].nr);
			seccomp_filters_free(&f);
			return -ENOTSUP;
		}
	}
	seccomp_filters_free(&f);
	err = cave_syscall(s, tid, snapshot_cave_clone, SYS_clone, calls[0].args, &ret);
	if (err) {
		say(why, whylen, "the clone in thread %d: %s", (int)tid, strerror(-err));
		return err;
	}
	if (ret <= 0) {
		say(why, whylen, "clone failed in the process: %s", ret ? strerror((int)-ret) : "no pid");
		return ret < 0 ? (int)ret : -EIO;
	}
	s->copy = (pid_t)ret;
	/* its first stop: before it could return to user space */
	err = cave_wait_stop(s->copy, cave_now_ms() + COPY_STOP_MS, &status);
	s->clone_ms = cave_now_ms() - t0;
	if (err) {
		say(why, whylen, "the copy did not stop: %s", strerror(-err));
		proc_snapshot_drop(s);
		proc_snapshot_reap(s, tid);
		return err;
	}
	return 0;
}

int proc_snapshot_drop(struct proc_snapshot *s)
{
	double deadline = cave_now_ms() + COPY_STOP_MS;
	int status, err;

	if (!s->copy)
		return 0;
	kill(s->copy, SIGKILL);
	for (;;) {
		err = cave_wait_stop(s->copy, deadline, &status);
		if (err)
			break;
		ptrace(PTRACE_CONT, s->copy, 0, 0); /* a stop that came before the kill */
	}
	s->zombie = s->copy;
	s->copy = 0;
	return err == -ESRCH ? 0 : err;
}

int proc_snapshot_reap(struct proc_snapshot *s, pid_t tid)
{
	uint64_t args[6] = { (uint64_t)s->zombie, 0, __WALL, 0, 0, 0 };
	double t0 = cave_now_ms();
	long ret = 0;
	int err;

	if (!s->zombie)
		return 0;
	err = cave_syscall(s, tid, snapshot_cave_syscall, SYS_wait4, args, &ret);
	if (!err && ret != s->zombie)
		err = ret < 0 ? (int)ret : -EIO;
	s->zombie = 0;
	s->reap_ms = cave_now_ms() - t0;
	return err;
}

void proc_snapshot_free(struct proc_snapshot *s)
{
	if (!s)
		return;
	proc_snapshot_drop(s);
	free(s->gaps);
	s->gaps = NULL;
	s->ngaps = 0;
}
