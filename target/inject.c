/* Loading the preload library into a running process (inject.h), without
 * stopping the world: one thread at a time is stopped (PTRACE_SEIZE +
 * PTRACE_INTERRUPT) and judged (inject_safe.c); the one found at a safe
 * point makes one system call (mmap of a data page) and one call,
 * pthread_create, whose new thread loads the library while every other
 * thread runs on, so no lock a stopped thread holds can block the load.
 *
 * Never a state a SIGKILL of dwleak cannot leave: the code the thread
 * runs (inject_cave.S) is copied into padding of an executable mapping
 * (the "cave": the bytes between the end of a code segment and the end of
 * its page, written through /proc/PID/mem, which makes the process a
 * private copy of that one page) before the thread runs any of it, and
 * every path through it ends with the thread restoring itself when no
 * tracer takes it back first.  With dwleak alive, the thread is taken
 * back exactly: at the syscall-entry stop of the cave's last system call
 * its registers, FPU/SSE/AVX state and signal mask are set back, and the
 * system call it was interrupted in is the one the kernel then runs (the
 * restart block's, for nanosleep and the like): a signal that came
 * meanwhile interrupts it as it would have.  Signals are held pending
 * (all blocked but glibc's SIGSETXID) while the thread works for us. */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>
#include <linux/filter.h>

#include "cave.h"
#include "elf_symbols.h"
#include "inject.h"
#include "inject_abi.h"
#include "inject_safe.h"
#include "preload.h"
#include "proc_maps.h"
#include "seccomp_filters.h"

#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK 0x420a
#define PTRACE_SETSIGMASK 0x420b
#endif
#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

#define XSAVE_MAX (16u << 10) /* AMX's tiles included */
#define DATA_SIZE (D_XSAVE + XSAVE_MAX)
#define STACK_SCAN_MAX (256u << 10) /* live stack read per thread */
#define CALL_FRAME 1024		    /* below the red zone: the call's own frame starts there */
#define SIGSETXID 33		    /* glibc's: setuid() in a threaded process waits for it */

/* The cave's code, copied from inject_cave.S. */
extern const char inject_cave_start[], inject_cave_end[], inject_cave_syscall[], inject_cave_call[],
	inject_cave_marker[], inject_cave_thread[];

#define CAVE_OFF(sym) ((uint64_t)((sym) - inject_cave_start))
#define CAVE_LEN ((size_t)(inject_cave_end - inject_cave_start))


static int __attribute__((format(printf, 3, 4))) fail(struct inject_result *r, int err, const char *fmt, ...)
{
	va_list ap;

	free(r->reason);
	r->reason = NULL;
	va_start(ap, fmt);
	if (vasprintf(&r->reason, fmt, ap) < 0)
		r->reason = NULL;
	va_end(ap);
	return err;
}

void inject_result_free(struct inject_result *res)
{
	if (!res)
		return;
	free(res->reason);
	res->reason = NULL;
}

/* --- What the process is (before any thread is touched) --- */

struct target {
	pid_t pid;
	struct proc_map *maps;
	size_t nmaps;
	struct inject_layout layout;
	uint64_t libc_text;   /* an address in libc's code (seccomp's ip) */
	uint64_t fn_create, fn_dlopen, fn_dlsym, fn_dlerror, fn_detach, fn_self;
	uint64_t cave;	      /* where the cave goes */
	const char *lib;      /* the library's path */
	struct stat lib_st;
};

/* Reads the whole small file PATH into BUF (CAP bytes, NUL-terminated).
 * Returns its length or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, got = 0;

	if (fd < 0)
		return -errno;
	while ((size_t)got < cap - 1 && (n = read(fd, buf + got, cap - 1 - got)) > 0)
		got += n;
	close(fd);
	buf[got] = 0;
	return got;
}

/* The value after FIELD in /proc/PID/task/TID/status (TID 0: the
 * process's), as a string in OUT; false when absent. */
static bool status_field(pid_t pid, pid_t tid, const char *field, char *out, size_t cap)
{
	char path[96], buf[4096], *p;
	size_t n;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (read_small(path, buf, sizeof(buf)) < 0 || !(p = strstr(buf, field)))
		return false;
	p += strlen(field);
	p += strspn(p, " \t");
	n = strcspn(p, "\n");
	snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
	return true;
}

static const char *base_of(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* The library file and every directory above it are root's and nobody
 * else can write them: the process will run what is in it.  A sticky
 * directory of root's that others can write (/tmp) may be on the way:
 * nobody but root can remove or rename root's entry in it, and that
 * entry, checked first (the walk goes up from the file), is root's and
 * written by nobody else. */
static int library_check(struct target *t, struct inject_result *r)
{
	char *real = realpath(t->lib, NULL), *slash;
	struct stat st;
	int err = 0;

	if (!real)
		return fail(r, -ENOTSUP, "the library %s cannot be found: %s", t->lib, strerror(errno));
	if (stat(real, &t->lib_st) || !S_ISREG(t->lib_st.st_mode))
		err = fail(r, -ENOTSUP, "the library %s is not a regular file", real);
	while (!err) {
		bool sticky_dir;

		if (stat(*real ? real : "/", &st))
			st.st_uid = (uid_t)-1, st.st_mode = 0;
		sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
		if (st.st_uid != 0 || ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky_dir))
			err = fail(r, -ENOTSUP, "%s is not root's, or others can write it: the library injected must be root's",
				   *real ? real : "/");
		if (!*real)
			break;
		slash = strrchr(real, '/');
		*slash = 0; /* realpath's result is absolute: a slash is there */
	}
	free(real);
	return err;
}

/* The process's refusals that need no thread stopped. */
static int process_check(struct target *t, struct inject_result *r)
{
	char path[96], v[256], buf[4096];
	struct stat a, b;
	ssize_t n;
	size_t i;

	if (!status_field(t->pid, 0, "State:", v, sizeof(v)))
		return fail(r, -ESRCH, "no process with pid %d", t->pid);
	if (v[0] == 'T' || v[0] == 't')
		return fail(r, -EBUSY, "the process is stopped (%s): resume it first", v);
	if (status_field(t->pid, 0, "Seccomp:", v, sizeof(v)) && atoi(v) == 1)
		return fail(r, -ENOTSUP, "the process runs under seccomp's strict mode");
	if (status_field(t->pid, 0, "x86_Thread_features:", v, sizeof(v)) && strstr(v, "shstk"))
		return fail(r, -ENOTSUP, "the process uses shadow stacks (CET): a remote call would break them");
	/* AT_SECURE: setuid, setgid or file capabilities at its exec */
	snprintf(path, sizeof(path), "/proc/%d/auxv", t->pid);
	n = read_small(path, buf, sizeof(buf));
	for (i = 0; n > 0 && i + 16 <= (size_t)n; i += 16) {
		uint64_t type, val;

		memcpy(&type, buf + i, 8);
		memcpy(&val, buf + i + 8, 8);
		if (type == AT_SECURE && val)
			return fail(r, -ENOTSUP, "the process runs a setuid, setgid or capability program (AT_SECURE)");
	}
	/* the library's path must name the same file in the process */
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", t->pid);
	if (stat(path, &a) || stat("/proc/self/ns/mnt", &b) || a.st_ino != b.st_ino || a.st_dev != b.st_dev)
		return fail(r, -ENOTSUP, "the process runs in another mount namespace (a container)");
	snprintf(path, sizeof(path), "/proc/%d/root", t->pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n != 1 || buf[0] != '/')
		return fail(r, -ENOTSUP, "the process runs under another root directory (chroot)");
	return 0;
}

/* Another tracer on any thread: say which. */
static int tracers_check(struct target *t, struct inject_result *r)
{
	char path[64], v[64];
	struct dirent *d;
	DIR *dir;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", t->pid);
	dir = opendir(path);
	if (!dir)
		return fail(r, -ESRCH, "no process with pid %d", t->pid);
	while (!err && (d = readdir(dir))) {
		pid_t tid = atoi(d->d_name);

		if (tid > 0 && status_field(t->pid, tid, "TracerPid:", v, sizeof(v)) && atoi(v) != 0)
			err = fail(r, -EBUSY, "thread %d is traced by pid %s (a debugger or another tracer)", tid, v);
	}
	closedir(dir);
	return err;
}

/* The address at which the process maps file offset OFF of the object
 * mapped as M's file, or 0. */
static uint64_t file_addr(const struct target *t, const struct proc_map *m, uint64_t off)
{
	size_t i;

	for (i = 0; i < t->nmaps; i++) {
		const struct proc_map *x = &t->maps[i];

		if (x->ino == m->ino && x->dev == m->dev && off >= x->offset && off - x->offset < x->end - x->start)
			return x->start + (off - x->offset);
	}
	return 0;
}

static void ranges_of_file(const struct target *t, const struct proc_map *m, bool exec_only, struct inject_range *out,
			   size_t *n)
{
	size_t i;

	for (i = 0; i < t->nmaps && *n < INJECT_RANGES_MAX; i++)
		if (t->maps[i].ino == m->ino && t->maps[i].dev == m->dev && (!exec_only || t->maps[i].exec))
			out[(*n)++] = (struct inject_range){ t->maps[i].start, t->maps[i].end };
}

/* malloc.c's exported functions: libc's allocator lies between them. */
static const char *const malloc_c_syms[] = {
	"malloc", "free", "calloc", "realloc", "memalign", "valloc", "pvalloc", "aligned_alloc",
	"posix_memalign", "malloc_usable_size", "malloc_trim", "mallinfo2", "malloc_stats", "malloc_info",
	"mallopt", "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc", "__libc_memalign",
};

#define NSYMS(a) (sizeof(a) / sizeof((a)[0]))

/* libc's functions the injection calls, its allocator's span and
 * __restore_rt. */
static int libc_read(struct target *t, const struct proc_map *libc, struct inject_result *r)
{
	static const char *const need[] = { "pthread_create", "dlopen", "dlsym", "dlerror", "pthread_detach",
					    "pthread_self", "gnu_get_libc_version" };
	struct elf_sym_want want[NSYMS(need) + NSYMS(malloc_c_syms)];
	uint64_t *fn[] = { &t->fn_create, &t->fn_dlopen, &t->fn_dlsym, &t->fn_dlerror, &t->fn_detach, &t->fn_self };
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t i, k;
	int fd = proc_map_open(t->pid, libc);

	if (fd < 0)
		return fail(r, -EIO, "cannot open the process's libc: %s", strerror(errno));
	for (i = 0; i < NSYMS(need); i++)
		want[i] = (struct elf_sym_want){ .name = need[i], .dynsym_only = true };
	for (k = 0; k < NSYMS(malloc_c_syms); k++)
		want[i + k] = (struct elf_sym_want){ .name = malloc_c_syms[k], .dynsym_only = true };
	elf_symbols_find(fd, want, NSYMS(want));
	close(fd);
	if (!want[6].found)
		return fail(r, -ENOTSUP, "%s is not glibc's libc", libc->path);
	for (i = 0; i < NSYMS(fn); i++) {
		if (!want[i].found || !(*fn[i] = file_addr(t, libc, want[i].file_off)))
			return fail(r, -ENOTSUP, "the process's glibc is older than 2.34 (%s is not in libc.so.6)",
				    need[i]);
	}
	t->libc_text = t->fn_create;
	for (k = 0; k < NSYMS(malloc_c_syms); k++) {
		struct elf_sym_want *w = &want[NSYMS(need) + k];
		uint64_t a = w->found ? file_addr(t, libc, w->file_off) : 0;

		if (!a)
			continue;
		lo = a < lo ? a : lo;
		hi = a + w->size > hi ? a + w->size : hi;
	}
	if (hi > lo && t->layout.nalloc < INJECT_RANGES_MAX)
		t->layout.alloc[t->layout.nalloc++] = (struct inject_range){ lo, hi };
	/* __restore_rt, by its bytes, in libc's code as mapped */
	for (i = 0; i < t->nmaps; i++) {
		const struct proc_map *m = &t->maps[i];
		static const unsigned char pat[] = { 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05 };
		size_t len = m->end - m->start, j;
		unsigned char *buf;
		struct iovec local, remote;

		if (m->ino != libc->ino || m->dev != libc->dev || !m->exec)
			continue;
		buf = malloc(len);
		if (!buf)
			return fail(r, -ENOMEM, "out of memory");
		local = (struct iovec){ buf, len };
		remote = (struct iovec){ (void *)m->start, len };
		if (process_vm_readv(t->pid, &local, 1, &remote, 1, 0) == (ssize_t)len)
			for (j = 0; j + sizeof(pat) <= len && t->layout.nrestore < 4; j++)
				if (buf[j] == 0x48 && !memcmp(buf + j, pat, sizeof(pat)))
					t->layout.restore_rt[t->layout.nrestore++] = m->start + j;
		free(buf);
	}
	if (!t->layout.nrestore)
		return fail(r, -ENOTSUP, "cannot find __restore_rt in the process's libc (signal frames unknown)");
	return 0;
}

/* Objects other than libc that define malloc: their code may hold the
 * allocator's locks.  The program itself defining it cannot be routed. */
static int allocators_read(struct target *t, struct inject_result *r)
{
	char exe[64];
	struct stat est;
	size_t i, k;

	snprintf(exe, sizeof(exe), "/proc/%d/exe", t->pid);
	if (stat(exe, &est))
		memset(&est, 0, sizeof(est));
	for (i = 0; i < t->nmaps; i++) {
		const struct proc_map *m = &t->maps[i];
		struct elf_sym_want w = { .name = "malloc", .dynsym_only = true };
		const char *b = base_of(m->path);
		int fd;

		if (!m->exec || m->path[0] != '/' || !strcmp(b, "libc.so.6") || !strncmp(b, "ld-linux", 8))
			continue;
		for (k = 0; k < i; k++)
			if (t->maps[k].exec && t->maps[k].ino == m->ino && t->maps[k].dev == m->dev)
				break;
		if (k < i || (fd = proc_map_open(t->pid, m)) < 0)
			continue;
		elf_symbols_find(fd, &w, 1);
		close(fd);
		if (!w.found)
			continue;
		if (m->ino == est.st_ino && m->dev == proc_kdev(major(est.st_dev), minor(est.st_dev)))
			return fail(r, -ENOTSUP, "the program defines malloc itself: its own calls cannot be routed");
		ranges_of_file(t, m, true, t->layout.alloc, &t->layout.nalloc);
	}
	return 0;
}

/* Where the cave goes: a CAVE_LEN run of zeros, 64-byte aligned, between
 * the end of an executable segment's file contents and the end of its
 * mapping (libc's first, then any other object's). */
static int inject_cave_find(struct target *t, const struct proc_map *libc, struct inject_result *r)
{
	if (cave_find(t->pid, t->maps, t->nmaps, libc, CAVE_LEN, "dwlkcav1", &t->cave))
		return fail(r, -ENOTSUP, "no executable mapping has %zu bytes of padding for the injector's code",
			    CAVE_LEN);
	return 0;
}

static int target_read(struct target *t, struct inject_result *r)
{
	const struct proc_map *libc = NULL;
	size_t i;
	int err = proc_maps_read(t->pid, false, &t->maps, &t->nmaps);

	if (err)
		return fail(r, err == -ENOENT ? -ESRCH : err, "cannot read the process's mappings: %s", strerror(-err));
	for (i = 0; i < t->nmaps; i++) {
		const struct proc_map *m = &t->maps[i];
		const char *b = base_of(m->path);

		if (m->path[0] != '/')
			continue;
		if (!strncmp(b, DWLEAK_PRELOAD_NAME, strlen(DWLEAK_PRELOAD_NAME)) ||
		    (m->ino == t->lib_st.st_ino &&
		     m->dev == proc_kdev(major(t->lib_st.st_dev), minor(t->lib_st.st_dev))))
			return fail(r, -EEXIST, "%s is loaded in the process already", m->path);
		if (!strcmp(b, "libc.so.6") && !libc)
			libc = m;
	}
	if (!libc) {
		for (i = 0; i < t->nmaps; i++)
			if (strstr(t->maps[i].path, "musl"))
				return fail(r, -ENOTSUP, "the process uses musl (%s), not glibc", t->maps[i].path);
		return fail(r, -ENOTSUP, "a static program (no libc.so.6 mapped): it cannot load a library");
	}
	ranges_of_file(t, libc, false, t->layout.libc, &t->layout.nlibc);
	for (i = 0; i < t->nmaps; i++)
		if (t->maps[i].path[0] == '/' && !strncmp(base_of(t->maps[i].path), "ld-linux", 8)) {
			ranges_of_file(t, &t->maps[i], false, t->layout.loader, &t->layout.nloader);
			break;
		}
	t->layout.stack_need = 64 << 10;
	err = libc_read(t, libc, r);
	err = err ?: allocators_read(t, r);
	return err ?: inject_cave_find(t, libc, r);
}

/* --- Threads --- */

/* The mapping of the target that holds A (re-read when a thread was
 * created since), or NULL. */
static const struct proc_map *map_of(struct target *t, uint64_t a)
{
	ssize_t i = proc_maps_find(t->maps, t->nmaps, a);

	if (i < 0) {
		proc_maps_free(t->maps, t->nmaps);
		t->maps = NULL;
		t->nmaps = 0;
		if (proc_maps_read(t->pid, false, &t->maps, &t->nmaps))
			return NULL;
		i = proc_maps_find(t->maps, t->nmaps, a);
	}
	return i < 0 ? NULL : &t->maps[i];
}

/* Reads the live words of the stack from SP up (at most STACK_SCAN_MAX
 * bytes) into a malloc'd *WORDS.  Returns their number (0: none). */
static size_t stack_read(struct target *t, uint64_t sp, uint64_t **words, uint64_t *room)
{
	const struct proc_map *m = map_of(t, sp);
	struct iovec local, remote;
	size_t len;
	ssize_t got;

	*words = NULL;
	*room = 0;
	if (!m)
		return 0;
	*room = !strcmp(m->path, "[stack]") ? UINT64_MAX / 2 : sp - m->start; /* the main stack grows */
	len = m->end - sp < STACK_SCAN_MAX ? m->end - sp : STACK_SCAN_MAX;
	len &= ~7ul;
	*words = malloc(len ? len : 8);
	if (!*words)
		return 0;
	local = (struct iovec){ *words, len };
	remote = (struct iovec){ (void *)sp, len };
	got = process_vm_readv(t->pid, &local, 1, &remote, 1, 0);
	return got > 0 ? (size_t)got / 8 : 0;
}

/* What /proc/PID/task/TID/syscall says: -2 running, -1 blocked outside a
 * system call, else the number; ARGS and SP filled when blocked. */
static long task_syscall(pid_t pid, pid_t tid, uint64_t args[6], uint64_t *sp)
{
	char path[96], buf[512];
	unsigned long long v[9];
	long nr;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	if (read_small(path, buf, sizeof(buf)) <= 0 || !strncmp(buf, "running", 7))
		return -2;
	if (sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx %llx %llx", &nr, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &v[6], &v[7]) == 9) {
		memcpy(args, v, 6 * sizeof(uint64_t));
		*sp = v[6];
		return nr;
	}
	if (sscanf(buf, "%ld %llx", &nr, &v[6]) == 2)
		*sp = v[6];
	return -1;
}

/* A thread blocked inside a signal handler that interrupted libc, the
 * loader or the allocator may hold a lock the call needs, and may hold it
 * as long as it likes: no thread is safe then.  Read without stopping it
 * (it is blocked: its stack does not change). */
static bool handler_hazard(struct target *t, pid_t tid, uint64_t sp, char *why, size_t whylen)
{
	uint64_t *w, room, rip;
	size_t n = stack_read(t, sp, &w, &room), i, k;
	bool hazard = false;

	for (i = 0; i < n && !hazard; i++)
		for (k = 0; k < t->layout.nrestore && !hazard; k++)
			if (w[i] == t->layout.restore_rt[k] && inject_sigframe_rip(w, n, i, &rip) &&
			    (inject_in_ranges(t->layout.libc, t->layout.nlibc, rip) ||
			     inject_in_ranges(t->layout.alloc, t->layout.nalloc, rip) ||
			     inject_in_ranges(t->layout.loader, t->layout.nloader, rip))) {
				snprintf(why, whylen,
					 "thread %d waits inside a signal handler that interrupted %s at 0x%llx", tid,
					 inject_in_ranges(t->layout.alloc, t->layout.nalloc, rip) ? "the allocator"
					 : inject_in_ranges(t->layout.loader, t->layout.nloader, rip)
						 ? "the dynamic linker"
						 : "libc",
					 (unsigned long long)rip);
				hazard = true;
			}
	free(w);
	return hazard;
}

struct candidate {
	pid_t tid;
	int rank; /* lower first */
};

static int candidate_cmp(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;

	return x->rank - y->rank;
}

/* The threads worth stopping, best first: blocked in a wait that
 * restarts unseen (read, nanosleep, poll, futex...), then running ones,
 * then epoll waits (interrupting one makes it return EINTR).  Threads
 * blocked elsewhere cannot pass and are not stopped at all.  Returns the
 * number, 0 with WHY set when a hazard forbids every thread, or -errno. */
static int candidates_list(struct target *t, struct candidate **out, char *why, size_t whylen)
{
	char path[64];
	struct candidate *c = NULL;
	struct dirent *d;
	size_t n = 0, cap = 0;
	DIR *dir;

	*out = NULL;
	snprintf(path, sizeof(path), "/proc/%d/task", t->pid);
	dir = opendir(path);
	if (!dir)
		return -ESRCH;
	while ((d = readdir(dir))) {
		pid_t tid = atoi(d->d_name);
		uint64_t args[6] = { 0 }, sp = 0;
		long nr;
		int rank;

		if (tid <= 0)
			continue;
		nr = task_syscall(t->pid, tid, args, &sp);
		if (nr >= -1 && sp && handler_hazard(t, tid, sp, why, whylen)) {
			closedir(dir);
			free(c);
			return 0;
		}
		if (nr == -2)
			rank = 1;
		else if (nr < 0 || inject_syscall_judge(nr, args, &t->layout) != INJECT_SAFE)
			continue;
		else
			rank = nr == SYS_epoll_wait || nr == SYS_epoll_pwait || nr == SYS_epoll_pwait2 ? 2 : 0;
		if (n == cap) {
			struct candidate *g = realloc(c, (cap = cap ? cap * 2 : 16) * sizeof(*c));

			if (!g) {
				closedir(dir);
				free(c);
				return -ENOMEM;
			}
			c = g;
		}
		c[n++] = (struct candidate){ tid, rank };
	}
	closedir(dir);
	if (n)
		qsort(c, n, sizeof(*c), candidate_cmp);
	*out = c;
	if (!n)
		snprintf(why, whylen, "every thread is busy in a system call that is not a wait");
	return (int)n;
}

/* One thread's frames, walked by libdwfl: whether one is the allocator's. */
struct frames_walk {
	const struct inject_layout *l;
	bool in_alloc;
	unsigned frames;
};

static int frame_seen(Dwfl_Frame *f, void *arg)
{
	struct frames_walk *w = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(f, &pc, &activation))
		return DWARF_CB_ABORT;
	/* a return address names the call before it */
	if (inject_in_ranges(w->l->alloc, w->l->nalloc, activation ? pc : pc - 1)) {
		w->in_alloc = true;
		return DWARF_CB_ABORT;
	}
	w->frames++;
	return DWARF_CB_OK;
}

/*
 * The raw scan of thread TID's stack (inject_thread_judge) found a word
 * that points into the allocator's code: a return address of a call in
 * progress, or a stale copy left in a slot no frame uses now (a sleeping
 * thread's stack holds many, from the calls it made before).  Walking its
 * frames with their CFI (libdwfl, through the ptrace stop the injector
 * holds) tells them apart.  True only when the walk reaches the thread's
 * outermost frame and no frame is the allocator's; false when any frame
 * is, or when the walk cannot be finished (the raw scan's verdict stands).
 */
static bool frames_clear_of_allocator(const struct target *t, pid_t tid)
{
	static const Dwfl_Callbacks cb = {
		.find_elf = dwfl_linux_proc_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
	};
	struct frames_walk w = { .l = &t->layout };
	Dwfl *dwfl = dwfl_begin(&cb);
	int rc = -1;

	if (!dwfl)
		return false;
	if (!dwfl_linux_proc_report(dwfl, t->pid) && !dwfl_report_end(dwfl, NULL, NULL) &&
	    !dwfl_linux_proc_attach(dwfl, t->pid, true))
		rc = dwfl_getthread_frames(dwfl, tid, frame_seen, &w);
	dwfl_end(dwfl);
	/* 0: the walk ended at the outermost frame (the abort of a frame in the
	 * allocator gives DWARF_CB_ABORT, an unwinding error -1) */
	return rc == 0 && !w.in_alloc && w.frames > 0;
}


/* Seizes thread TID and waits until PTRACE_INTERRUPT stopped it; a signal
 * arriving meanwhile is passed on.  Returns 0, -EBUSY for a group stop
 * (job control: the thread is detached, the stop kept), or -errno. */
static int thread_stop(pid_t tid, double deadline)
{
	int status, err;

	if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD))
		return -errno;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0))
		return -errno;
	for (;;) {
		/* a thread in uninterruptible sleep stops when it wakes: wait */
		err = cave_wait_stop(tid, deadline + 2000, &status);
		if (err)
			return err;
		if (status >> 16 == PTRACE_EVENT_STOP) {
			if (WSTOPSIG(status) == SIGTRAP)
				return 0;
			ptrace(PTRACE_DETACH, tid, 0, 0);
			return -EBUSY;
		}
		/* a signal for the thread: delivered, the interrupt still pending */
		if (ptrace(PTRACE_CONT, tid, 0, (void *)(long)WSTOPSIG(status)))
			return -errno;
	}
}

static void view_of(const struct user_regs_struct *g, struct inject_thread_view *v)
{
	*v = (struct inject_thread_view){ .rip = g->rip, .rsp = g->rsp, .rax = g->rax, .orig_rax = (int64_t)g->orig_rax,
					  .args = { g->rdi, g->rsi, g->rdx, g->r10, g->r8, g->r9 } };
}

/* --- The injection in the chosen thread --- */

struct saved {
	struct user_regs_struct regs;
	uint64_t mask;
	unsigned char *xsave; /* XSAVE_MAX bytes, 64-aligned */
	size_t xsave_len;
	/* where and how it resumes when it restores itself: its system call
	 * restarted the way the kernel restarts it (rip back on the syscall
	 * instruction, rax its number or restart_syscall's) */
	uint64_t resume_rip, resume_rax;
	int64_t exact_nr; /* at the marker's entry stop: the call to run (-1: none) */
};

static void saved_prepare(struct saved *s)
{
	struct user_regs_struct r;

	cave_resume_regs(&s->regs, &r, &s->exact_nr);
	s->resume_rip = r.rip;
	s->resume_rax = r.rax;
}

/* The thread as it resumes by itself (an abort): registers only. */
static void regs_resume(const struct saved *s, struct user_regs_struct *g)
{
	*g = s->regs;
	g->rip = s->resume_rip;
	g->rax = s->resume_rax;
	g->orig_rax = (uint64_t)-1;
}

/* The registers the restore code loads (IR_*), with the resume state. */
static void ir_fill(const struct saved *s, uint64_t ir[IR_COUNT])
{
	struct user_regs_struct g;

	regs_resume(s, &g);
	cave_regs_pack(&g, ir);
}

static int vm_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len }, remote = { (void *)addr, len };

	return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EIO;
}

static int vm_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)addr, len };

	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EIO;
}

static void phase(const struct inject_opts *o, enum inject_phase p, pid_t tid)
{
	if (o->pause)
		o->pause(o->pause_arg, p, tid);
}

/* The seccomp filters of thread TID (stopped), judged. */
static int seccomp_check(struct target *t, pid_t tid, struct inject_result *r)
{
	struct seccomp_filters f;
	char why[256];
	int err = seccomp_filters_read(t->pid, tid, &f);

	if (err == -ENOTSUP)
		err = fail(r, -ENOTSUP, "the process runs under seccomp's strict mode");
	else if (err == -ENOMEM)
		err = fail(r, -ENOMEM, "out of memory");
	else if (err)
		err = fail(r, -ENOTSUP, "cannot read the process's seccomp filters: %s", strerror(-err));
	else if (f.n && (err = inject_seccomp_judge((const struct sock_filter *const *)f.prog, f.len, f.n,
						    t->cave + CAVE_OFF(inject_cave_syscall), t->libc_text, why,
						    sizeof(why))))
		err = fail(r, err == -EPERM ? -ENOTSUP : err, "%s", why);
	seccomp_filters_free(&f);
	return err;
}

/* Resumes a syscall-stopped thread to its next stop, passing on signals
 * (SIGSETXID, the only one not blocked), until a syscall stop.  Returns 0
 * with its registers in *G, or -errno. */
static int to_syscall_stop(pid_t tid, double deadline, struct user_regs_struct *g)
{
	int status, sig = 0, err;

	for (;;) {
		if (ptrace(PTRACE_SYSCALL, tid, 0, (void *)(long)sig))
			return -errno;
		err = cave_wait_stop(tid, deadline, &status);
		if (err)
			return err;
		sig = 0;
		if (WSTOPSIG(status) == (SIGTRAP | 0x80))
			return ptrace(PTRACE_GETREGS, tid, 0, g) ? -errno : 0;
		if (status >> 16 == 0)
			sig = WSTOPSIG(status); /* a signal: delivered at the resume */
	}
}

/* Puts thread TID back as it resumes by itself and lets it go. */
static void thread_abort(pid_t tid, const struct saved *s, bool xstate)
{
	struct user_regs_struct g;
	struct iovec io = { s->xsave, s->xsave_len };

	regs_resume(s, &g);
	ptrace(PTRACE_SETREGS, tid, 0, &g);
	if (xstate)
		ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &io);
	ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(s->mask), &s->mask);
	ptrace(PTRACE_DETACH, tid, 0, 0);
}

static int inject_in(struct target *t, pid_t tid, struct saved *s, const struct inject_opts *o,
		     struct inject_result *r)
{
	unsigned char cave[4096] __attribute__((aligned(8)));
	unsigned char *data = NULL;
	struct user_regs_struct g;
	struct iovec io;
	uint64_t ir[IR_COUNT], blocked = ~0ull, addr, mask_b;
	double t_call, deadline;
	int err;

	/* 1. the state to restore */
	io = (struct iovec){ s->xsave, XSAVE_MAX };
	if (ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(s->mask), &s->mask) ||
	    ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &io)) {
		err = fail(r, -ENOTSUP, "cannot read thread %d's signal mask or XSAVE state: %s", tid, strerror(errno));
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return err;
	}
	s->xsave_len = io.iov_len;
	saved_prepare(s);
	err = seccomp_check(t, tid, r);
	if (err) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return err;
	}
	phase(o, INJECT_PHASE_STOPPED, tid);

	/* 2. the cave, before the thread runs any of it */
	memcpy(cave, inject_cave_start, CAVE_LEN);
	memcpy(cave + CAVE_CREATE, &t->fn_create, 8);
	memcpy(cave + CAVE_RESUME_A, &s->resume_rip, 8);
	memcpy(cave + CAVE_RESUME_B, &s->resume_rip, 8);
	memcpy(cave + CAVE_SIGMASK_A, &s->mask, 8);
	ir_fill(s, ir);
	memcpy(cave + CAVE_REGS_A, ir, sizeof(ir));
	err = cave_write(t->pid, t->cave, cave, CAVE_LEN);
	if (err) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return fail(r, -ENOTSUP, "cannot write the injector's code into the process (/proc/%d/mem: %s)", t->pid,
			    strerror(-err));
	}

	/* 3. mmap of the data page, from the cave; registers first, then the
	 * mask (the cave's fall-through restores both) */
	g = s->regs;
	g.rip = t->cave + CAVE_OFF(inject_cave_syscall);
	g.rax = SYS_mmap;
	g.rdi = 0;
	g.rsi = DATA_SIZE;
	g.rdx = PROT_READ | PROT_WRITE;
	g.r10 = MAP_PRIVATE | MAP_ANONYMOUS;
	g.r8 = (uint64_t)-1;
	g.r9 = 0;
	g.orig_rax = (uint64_t)-1;
	blocked &= ~(1ull << (SIGSETXID - 1));
	if (ptrace(PTRACE_SETREGS, tid, 0, &g) ||
	    ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(blocked), &blocked)) {
		err = fail(r, -EIO, "cannot set thread %d's registers: %s", tid, strerror(errno));
		thread_abort(tid, s, false);
		return err;
	}
	deadline = cave_now_ms() + 2000;
	err = to_syscall_stop(tid, deadline, &g);
	if (!err)
		phase(o, INJECT_PHASE_SYSCALL, tid);
	err = err ?: to_syscall_stop(tid, deadline, &g);
	if (err) {
		if (err != -ESRCH)
			thread_abort(tid, s, false);
		return fail(r, err, "the injected mmap in thread %d did not complete: %s", tid, strerror(-err));
	}
	addr = g.rax;
	if ((int64_t)addr < 0 && (int64_t)addr > -4096) {
		thread_abort(tid, s, false);
		return fail(r, -ENOMEM, "mmap in the process failed: %s", strerror((int)-(int64_t)addr));
	}

	/* 4. the data page: what the new thread needs, the full restore */
	data = aligned_alloc(64, DATA_SIZE);
	if (!data) {
		thread_abort(tid, s, false);
		return fail(r, -ENOMEM, "out of memory");
	}
	memset(data, 0, DATA_SIZE);
	memcpy(data + D_MAGIC, "dwlkdat1", 8);
	memcpy(data + D_DLOPEN, &t->fn_dlopen, 8);
	memcpy(data + D_DLSYM, &t->fn_dlsym, 8);
	memcpy(data + D_DLERROR, &t->fn_dlerror, 8);
	memcpy(data + D_PTHREAD_DETACH, &t->fn_detach, 8);
	memcpy(data + D_PTHREAD_SELF, &t->fn_self, 8);
	mask_b = s->mask;
	memcpy(data + D_SIGMASK, &mask_b, 8);
	snprintf((char *)data + D_SYM, 32, "%s", DWLEAK_PRELOAD_INJECTED_START);
	snprintf((char *)data + D_PATH, D_PATH_MAX, "%s", t->lib);
	memcpy(data + D_REGS, ir, sizeof(ir));
	memcpy(data + D_XSAVE, s->xsave, s->xsave_len);
	err = vm_write(t->pid, addr, data, DATA_SIZE);
	err = err ?: cave_write(t->pid, t->cave + CAVE_DATA, &addr, 8);
	if (err) {
		free(data);
		thread_abort(tid, s, false);
		return fail(r, -EIO, "cannot write the injector's data into the process");
	}

	/* 5. the call: pthread_create(&thread, NULL, cave thread, data), on
	 * the thread's stack below its red zone, under an ABI-clean FPU */
	g = s->regs;
	g.rip = t->cave + CAVE_OFF(inject_cave_call);
	g.rsp = (s->regs.rsp - 128 - CALL_FRAME) & ~15ull;
	g.rdi = addr + D_THREAD;
	g.rsi = 0;
	g.rdx = t->cave + CAVE_OFF(inject_cave_thread);
	g.rcx = addr;
	g.rax = 0;
	g.orig_rax = (uint64_t)-1;
	g.eflags &= ~0x500ull; /* DF and TF */
	memset(data, 0, s->xsave_len);
	data[0] = 0x7f;	       /* FCW 0x037f */
	data[1] = 0x03;
	memcpy(data + 24, &(uint32_t){ 0x1f80 }, 4); /* MXCSR */
	io = (struct iovec){ data, s->xsave_len };
	if (ptrace(PTRACE_SETREGS, tid, 0, &g) || ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &io)) {
		err = fail(r, -EIO, "cannot set thread %d for the call: %s", tid, strerror(errno));
		free(data);
		thread_abort(tid, s, true);
		return err;
	}
	free(data);
	phase(o, INJECT_PHASE_CALLING, tid);
	t_call = cave_now_ms();
	r->ms_stopped = t_call - r->ms_stopped;

	/* 6. until the marker: the cave's mask-restoring system call */
	deadline = cave_now_ms() + (o->call_ms ? o->call_ms : 5000);
	for (;;) {
		err = to_syscall_stop(tid, deadline, &g);
		if (err == -ESRCH)
			return fail(r, err, "the process ended during the injection");
		if (err == -ETIMEDOUT) {
			int status;

			/* let it finish alone: it restores itself after the call */
			if (!ptrace(PTRACE_INTERRUPT, tid, 0, 0) && !cave_wait_stop(tid, cave_now_ms() + 2000, &status))
				ptrace(PTRACE_DETACH, tid, 0, 0);
			return fail(r, -ETIMEDOUT,
				    "thread %d has not returned from the injected pthread_create after %u ms (a lock it "
				    "needs is held by another thread); it resumes where it was once it returns",
				    tid, o->call_ms ? o->call_ms : 5000);
		}
		if (err)
			return fail(r, err, "lost thread %d during the call: %s", tid, strerror(-err));
		if (g.rip == t->cave + CAVE_OFF(inject_cave_marker) + 2 && g.orig_rax == SYS_rt_sigprocmask)
			break;
	}

	/* 7. back exactly as it was: the system call it was in runs again
	 * from here (pending signals interrupt it as they would have) */
	io = (struct iovec){ s->xsave, s->xsave_len };
	g = s->regs;
	g.orig_rax = (uint64_t)s->exact_nr;
	if (ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &io) ||
	    ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(s->mask), &s->mask) || ptrace(PTRACE_SETREGS, tid, 0, &g)) {
		/* it restores itself from the marker on */
		ptrace(PTRACE_DETACH, tid, 0, 0);
	} else {
		ptrace(PTRACE_DETACH, tid, 0, 0);
	}
	r->ms_call = cave_now_ms() - t_call;
	phase(o, INJECT_PHASE_RESTORED, tid);

	/* 8. the new thread's outcome */
	{
		int32_t create_rc = 0, entry_rc = 0;
		uint32_t status = 0;
		double t0 = cave_now_ms();
		char msg[D_ERR_MAX];

		deadline = t0 + (o->load_ms ? o->load_ms : 10000);
		if (vm_read(t->pid, addr + D_CREATE_RC, &create_rc, 4))
			return fail(r, -ESRCH, "the process ended during the injection");
		if (create_rc)
			return fail(r, -EPROTO, "pthread_create failed in the process: %s", strerror(create_rc));
		for (;;) {
			if (vm_read(t->pid, addr + D_STATUS, &status, 4))
				return fail(r, -ESRCH, "the process ended during the load");
			if (status != INJECT_ST_RUNNING || cave_now_ms() > deadline)
				break;
			usleep(200);
		}
		r->ms_load = cave_now_ms() - t0;
		vm_read(t->pid, addr + D_ENTRY_RC, &entry_rc, 4);
		r->entry_rc = entry_rc;
		switch (status) {
		case INJECT_ST_OK:
			if (entry_rc)
				return fail(r, -EPROTO, "the library loaded, but its routing failed: %s",
					    strerror(-entry_rc));
			return 0;
		case INJECT_ST_DLOPEN_FAILED:
			memset(msg, 0, sizeof(msg));
			vm_read(t->pid, addr + D_ERR, msg, sizeof(msg) - 1);
			return fail(r, -EPROTO, "dlopen of the library failed in the process: %s", msg);
		case INJECT_ST_NO_ENTRY:
			return fail(r, -EPROTO, "the library has no %s (another version?)", DWLEAK_PRELOAD_INJECTED_START);
		default:
			return fail(r, -ETIMEDOUT,
				    "the library was not loaded after %u ms (another thread holds the dynamic linker's "
				    "lock?); it may still load",
				    o->load_ms ? o->load_ms : 10000);
		}
	}
}

/* The library's mapping after the load. */
static uint64_t lib_base(pid_t pid, const struct stat *st)
{
	struct proc_map *maps;
	uint64_t base = 0;
	size_t n, i;

	if (proc_maps_read(pid, false, &maps, &n))
		return 0;
	for (i = 0; i < n && !base; i++)
		if (maps[i].ino == st->st_ino && maps[i].dev == proc_kdev(major(st->st_dev), minor(st->st_dev)))
			base = maps[i].start;
	proc_maps_free(maps, n);
	return base;
}

int inject_library(pid_t pid, const char *library_path, const struct inject_opts *opts, struct inject_result *res)
{
	static const struct inject_opts none;
	const struct inject_opts *o = opts ? opts : &none;
	struct target t = { .pid = pid, .lib = library_path };
	struct saved s = { 0 };
	unsigned verdicts[INJECT_VERDICT_COUNT] = { 0 };
	char hazard[256] = "";
	double t0 = cave_now_ms(), deadline = t0 + (o->safe_point_ms ? o->safe_point_ms : 3000);
	unsigned seed = (unsigned)getpid() ^ (unsigned)t0;
	bool chosen = false;
	int err;

	memset(res, 0, sizeof(*res));
	if (library_path[0] != '/')
		return fail(res, -EINVAL, "the library's path must be absolute");
	s.xsave = aligned_alloc(64, XSAVE_MAX);
	if (!s.xsave)
		return fail(res, -ENOMEM, "out of memory");
	err = library_check(&t, res);
	err = err ?: process_check(&t, res);
	err = err ?: tracers_check(&t, res);
	err = err ?: target_read(&t, res);
	while (!err) {
		struct candidate *c;
		int n = candidates_list(&t, &c, hazard, sizeof(hazard)), i;

		if (n < 0) {
			err = fail(res, n, "cannot list the process's threads: %s", strerror(-n));
			break;
		}
		for (i = 0; i < n; i++) {
			struct inject_thread_view v;
			enum inject_verdict verdict;
			uint64_t *words;

			err = thread_stop(c[i].tid, deadline);
			res->threads_tried++;
			if (err == -ESRCH || err == -EBUSY) {
				if (err == -EBUSY) {
					fail(res, -EBUSY, "the process is being stopped (job control)");
					break;
				}
				err = 0;
				continue;
			}
			if (err == -EPERM) {
				err = fail(res, -EBUSY, "thread %d is traced by someone else", c[i].tid);
				break;
			}
			if (err) {
				err = fail(res, err, "cannot stop thread %d: %s", c[i].tid, strerror(-err));
				break;
			}
			res->ms_stopped = cave_now_ms();
			if (ptrace(PTRACE_GETREGS, c[i].tid, 0, &s.regs)) {
				ptrace(PTRACE_DETACH, c[i].tid, 0, 0);
				continue;
			}
			view_of(&s.regs, &v);
			v.nstack = stack_read(&t, s.regs.rsp, &words, &v.stack_room);
			v.stack = words;
			verdict = inject_thread_judge(&v, &t.layout);
			free(words);
			if (verdict == INJECT_ALLOCATOR_ON_STACK && frames_clear_of_allocator(&t, c[i].tid))
				verdict = INJECT_SAFE; /* stale copies, no frame of the allocator */
			if (verdict != INJECT_SAFE) {
				verdicts[verdict]++;
				ptrace(PTRACE_DETACH, c[i].tid, 0, 0);
				continue;
			}
			res->tid = c[i].tid;
			err = inject_in(&t, c[i].tid, &s, o, res);
			chosen = true;
			break;
		}
		free(c);
		if (chosen || err || res->reason)
			break;
		if (cave_now_ms() > deadline) {
			char why[512] = "";
			size_t k, len = 0;

			for (k = 0; k < INJECT_VERDICT_COUNT; k++)
				if (verdicts[k])
					len += (size_t)snprintf(why + len, len < sizeof(why) ? sizeof(why) - len : 0,
								"%s%u %s", len ? ", " : "", verdicts[k],
								inject_verdict_why((enum inject_verdict)k));
			err = fail(res, -EBUSY, "no thread reached a safe point in %u ms: %s%s%s",
				   o->safe_point_ms ? o->safe_point_ms : 3000, hazard, *hazard && *why ? "; " : "",
				   *why ? why : (*hazard ? "" : "no thread could be examined"));
			break;
		}
		hazard[0] = 0;
		usleep(10000 + (unsigned)(rand_r(&seed) % 30000));
	}
	if (!err && res->reason && !chosen)
		err = -EBUSY;
	if (!err)
		res->lib_base = lib_base(pid, &t.lib_st);
	res->ms_total = cave_now_ms() - t0;
	proc_maps_free(t.maps, t.nmaps);
	free(s.xsave);
	return err;
}
