/* The agent's watcher: the BPF tracepoints' events turned into the
 * callbacks' structs, and the fallbacks where a tracepoint is missing (a
 * /proc scan on a timer for new programs, pidfds for exits), all behind
 * one epoll descriptor. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "watch.h"
#include "proc_watch.h"

/* What an epoll event is about: the tag in the top byte, a pid below. */
#define TAG_RING (1ull << 56)
#define TAG_TIMER (2ull << 56)
#define TAG_PIDFD (3ull << 56)
#define TAG_MASK (0xffull << 56)
/* Processes followed through pidfds at once (the exit fallback). */
#define PIDFDS_MAX 4096
#define SCAN_MS_DEFAULT 1000

/* One process the /proc scan saw. */
struct seen {
	pid_t pid;
	char comm[16];
};

struct pidfd_entry {
	pid_t pid;
	int fd;
};

struct agent_watch {
	struct watch *bpf;        /* NULL when the BPF watcher could not start */
	struct agent_watch_callbacks cb;
	struct agent_watch_info info;
	int epfd, timerfd;
	char *proc;
	struct seen *seen;        /* the last scan, by pid */
	size_t nseen;
	bool scanned;             /* a first scan set the baseline */
	struct pidfd_entry *pidfds;
	size_t npidfds, pidfds_cap;
	uint64_t lost;            /* fallback events that could not be delivered */
	bool exit_all;            /* every exit is reported, followed or not */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void bpf_event(void *ctx, const struct watch_event *e)
{
	struct agent_watch *w = ctx;

	switch (e->type) {
	case WATCH_EVENT_EXEC:
		if (w->cb.exec) {
			struct agent_exec x = { .pid = (pid_t)e->pid, .ppid = (pid_t)e->ppid,
						.cgroup_id = e->cgroup_id, .time_ns = e->time_ns };

			memcpy(x.comm, e->comm, sizeof(x.comm) - 1);
			w->cb.exec(w->cb.ctx, &x);
		}
		break;
	case WATCH_EVENT_EXIT:
		/* once for a followed pid: the first of a duplicate (two threads
		 * ending at once) takes it out of the map */
		if ((watch_pid_remove(w->bpf, (pid_t)e->pid) == 0 || w->exit_all) && w->cb.exit) {
			struct agent_exit x = { .pid = (pid_t)e->pid, .status = e->exit_code, .time_ns = e->time_ns };

			w->cb.exit(w->cb.ctx, &x);
		}
		break;
	case WATCH_EVENT_FORK:
		if (w->cb.fork) {
			struct agent_fork x = { .pid = (pid_t)e->pid, .ppid = (pid_t)e->ppid, .cgroup_id = e->cgroup_id,
						.time_ns = e->time_ns };

			memcpy(x.comm, e->comm, sizeof(x.comm) - 1);
			w->cb.fork(w->cb.ctx, &x);
		}
		break;
	case WATCH_EVENT_VICTIM:
		if (w->cb.victim) {
			struct agent_victim v = { .pid = (pid_t)e->pid, .cgroup_id = e->cgroup_id,
						  .rss_bytes = e->rss_pages * (uint64_t)sysconf(_SC_PAGESIZE),
						  .uid = e->uid, .time_ns = e->time_ns };

			memcpy(v.comm, e->comm, sizeof(v.comm) - 1);
			w->cb.victim(w->cb.ctx, &v);
		}
		break;
	}
}

/* ---- The /proc scan (no exec tracepoint) ---- */

static int seen_cmp(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Reads PROC/PID/comm into COMM (16 bytes); false when it is gone. */
static bool comm_read(const char *proc, pid_t pid, char comm[16])
{
	char path[300];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%d/comm", proc, (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, comm, 15);
	close(fd);
	if (n < 0)
		return false;
	comm[n] = '\0';
	if (n && comm[n - 1] == '\n')
		comm[n - 1] = '\0';
	return true;
}

/* Whether PID is a kernel thread (or already gone): no exe link. */
static bool kernel_thread(const char *proc, pid_t pid)
{
	char path[300], target[8];

	snprintf(path, sizeof(path), "%s/%d/exe", proc, (int)pid);
	return readlink(path, target, sizeof(target)) < 0 && errno == ENOENT;
}

/* One scan: every process now; those new since the last scan, or whose
 * comm changed (an exec the scan could see), are reported as execs. */
static int scan(struct agent_watch *w)
{
	struct seen *now = NULL, *v;
	size_t n = 0, cap = 0, j = 0;
	struct dirent *de;
	DIR *d = opendir(w->proc);
	int delivered = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 512;
			v = realloc(now, cap * sizeof(*v));
			if (!v) {
				free(now);
				closedir(d);
				return -ENOMEM;
			}
			now = v;
		}
		now[n].pid = (pid_t)pid;
		if (comm_read(w->proc, (pid_t)pid, now[n].comm))
			n++;
	}
	closedir(d);
	qsort(now, n, sizeof(*now), seen_cmp);
	for (size_t i = 0; i < n && w->scanned; i++) {
		while (j < w->nseen && w->seen[j].pid < now[i].pid)
			j++;
		if (j < w->nseen && w->seen[j].pid == now[i].pid && !strcmp(w->seen[j].comm, now[i].comm))
			continue;
		/* a kernel thread renames itself (kworker/0:2-events): no program */
		if (kernel_thread(w->proc, now[i].pid))
			continue;
		if (w->cb.exec) {
			struct agent_exec x = { .pid = now[i].pid, .time_ns = now_ns() };

			memcpy(x.comm, now[i].comm, sizeof(x.comm));
			w->cb.exec(w->cb.ctx, &x);
		}
		delivered++;
	}
	free(w->seen);
	w->seen = now;
	w->nseen = n;
	w->scanned = true;
	return delivered;
}

/* Whether PID runs: its /proc/PID/stat exists and its state (after the
 * last ')') is not Z (zombie) or X (dead). */
static bool proc_alive(const char *proc, pid_t pid)
{
	char path[300], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%d/stat", proc, (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* ---- pidfds (no exit tracepoint) ---- */

static int pidfd_find(const struct agent_watch *w, pid_t pid)
{
	for (size_t i = 0; i < w->npidfds; i++)
		if (w->pidfds[i].pid == pid)
			return (int)i;
	return -1;
}

static void pidfd_drop(struct agent_watch *w, size_t i)
{
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->pidfds[i].fd, NULL);
	close(w->pidfds[i].fd);
	w->pidfds[i] = w->pidfds[--w->npidfds];
}

int agent_watch_follow(struct agent_watch *w, pid_t pid)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd;

	if (w->info.tracepoint[WATCH_EVENT_EXIT]) {
		int err = watch_pid_add(w->bpf, pid);

		/* in the map first, then alive: an exit after this is reported;
		 * one before it (a zombie included: its last thread has ended)
		 * never will be, so the caller hears of it now */
		if (!err && !proc_alive(w->proc, pid)) {
			watch_pid_remove(w->bpf, pid);
			return -ESRCH;
		}
		return err;
	}
	if (pidfd_find(w, pid) >= 0)
		return 0;
	if (w->npidfds == PIDFDS_MAX)
		return -E2BIG;
	if (w->npidfds == w->pidfds_cap) {
		size_t cap = w->pidfds_cap ? w->pidfds_cap * 2 : 16;
		struct pidfd_entry *v = realloc(w->pidfds, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->pidfds = v;
		w->pidfds_cap = cap;
	}
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return -errno;
	ev.data.u64 = TAG_PIDFD | (uint64_t)(uint32_t)pid;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int err = -errno;

		close(fd);
		return err;
	}
	w->pidfds[w->npidfds++] = (struct pidfd_entry){ pid, fd };
	return 0;
}

int agent_watch_unfollow(struct agent_watch *w, pid_t pid)
{
	int i;

	if (w->info.tracepoint[WATCH_EVENT_EXIT]) {
		int err = watch_pid_remove(w->bpf, pid);

		return err == -ENOENT ? 0 : err;
	}
	i = pidfd_find(w, pid);
	if (i >= 0)
		pidfd_drop(w, (size_t)i);
	return 0;
}

/* ---- Setup and the loop ---- */

int agent_watch_open(const struct agent_watch_settings *s, const struct agent_watch_callbacks *cb,
		     struct agent_watch **out, char *why, size_t whylen)
{
	struct watch_settings ws = { .disable = s->disable, .exit_all = s->exit_all };
	struct watch_info wi = { 0 };
	unsigned int scan_ms = s->scan_ms ? s->scan_ms : SCAN_MS_DEFAULT;
	struct epoll_event ev = { .events = EPOLLIN };
	char bpf_why[256] = "";
	struct agent_watch *w;
	int err, fd;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->cb = *cb;
	w->exit_all = s->exit_all;
	w->timerfd = -1;
	w->proc = strdup(s->proc ? s->proc : "/proc");
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!w->proc || w->epfd < 0) {
		err = w->proc ? -errno : -ENOMEM;
		snprintf(why, whylen, "cannot make the watcher's epoll set: %s", strerror(-err));
		goto fail;
	}
	err = watch_open(&ws, bpf_event, w, &w->bpf, bpf_why, sizeof(bpf_why));
	if (err)
		w->bpf = NULL; /* every kind falls back; bpf_why says why */
	else
		watch_info_get(w->bpf, &wi);
	for (int t = 0; t < WATCH_EVENT_COUNT; t++) {
		const char *cause = w->bpf ? wi.how[t] : bpf_why;

		w->info.tracepoint[t] = w->bpf && wi.live[t];
		if (w->info.tracepoint[t])
			snprintf(w->info.how[t], sizeof(w->info.how[t]), "BPF %s", wi.how[t]);
		else if (t == WATCH_EVENT_EXEC)
			snprintf(w->info.how[t], sizeof(w->info.how[t]),
				 "a scan of %s every %u ms, which sees new processes and changed names, not every "
				 "exec (%s)", w->proc, scan_ms, cause);
		else if (t == WATCH_EVENT_EXIT)
			snprintf(w->info.how[t], sizeof(w->info.how[t]), "a pidfd per followed process (%s)", cause);
		else if (t == WATCH_EVENT_FORK)
			snprintf(w->info.how[t], sizeof(w->info.how[t]), "%s (%s)",
				 w->info.tracepoint[WATCH_EVENT_EXEC]
					 ? "none: a followed process's new children are not seen until SIGHUP"
					 : "the /proc scan's new processes", cause);
		else
			snprintf(w->info.how[t], sizeof(w->info.how[t]), "none: no report at an OOM kill (%s)", cause);
	}
	fd = w->bpf ? watch_fd(w->bpf) : -1;
	if (fd >= 0) {
		ev.data.u64 = TAG_RING;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			err = -errno;
			snprintf(why, whylen, "cannot poll the watcher's ring buffer: %s", strerror(errno));
			goto fail;
		}
	}
	if (!w->info.tracepoint[WATCH_EVENT_EXEC]) {
		struct itimerspec its = { .it_interval = { scan_ms / 1000, (long)(scan_ms % 1000) * 1000000 } };

		its.it_value = its.it_interval;
		w->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		ev.data.u64 = TAG_TIMER;
		if (w->timerfd < 0 || timerfd_settime(w->timerfd, 0, &its, NULL) ||
		    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->timerfd, &ev)) {
			err = -errno;
			snprintf(why, whylen, "cannot set the /proc scan's timer: %s", strerror(errno));
			goto fail;
		}
		/* the baseline: what runs now is the caller's to list */
		err = scan(w);
		if (err < 0) {
			snprintf(why, whylen, "cannot scan %s: %s", w->proc, strerror(-err));
			goto fail;
		}
	}
	*out = w;
	return 0;
fail:
	agent_watch_close(w);
	return err;
}

int agent_watch_fd(const struct agent_watch *w)
{
	return w->epfd;
}

int agent_watch_run(struct agent_watch *w)
{
	struct epoll_event evs[16];
	int n, delivered = 0;

	while ((n = epoll_wait(w->epfd, evs, 16, 0)) > 0) {
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64 & TAG_MASK;
			int r = 0;

			if (tag == TAG_RING) {
				r = watch_consume(w->bpf);
			} else if (tag == TAG_TIMER) {
				uint64_t expirations;

				if (read(w->timerfd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
					return -errno;
				r = scan(w);
			} else if (tag == TAG_PIDFD) {
				pid_t pid = (pid_t)(evs[i].data.u64 & 0xffffffffu);
				int k = pidfd_find(w, pid);

				if (k >= 0) {
					struct agent_exit x = { .pid = pid, .status = -1, .time_ns = now_ns() };

					pidfd_drop(w, (size_t)k);
					if (w->cb.exit)
						w->cb.exit(w->cb.ctx, &x);
					r = 1;
				}
			}
			if (r < 0)
				return r;
			delivered += r;
		}
		if (n < 16)
			break;
	}
	if (n < 0 && errno != EINTR)
		return -errno;
	return delivered;
}

void agent_watch_info_get(const struct agent_watch *w, struct agent_watch_info *out)
{
	*out = w->info;
}

uint64_t agent_watch_lost(const struct agent_watch *w)
{
	uint64_t lost[WATCH_EVENT_COUNT], sum = w->lost;

	if (w->bpf && watch_lost_read(w->bpf, lost) == 0)
		for (int t = 0; t < WATCH_EVENT_COUNT; t++)
			sum += lost[t];
	return sum;
}

void agent_watch_close(struct agent_watch *w)
{
	if (!w)
		return;
	while (w->npidfds)
		pidfd_drop(w, w->npidfds - 1);
	free(w->pidfds);
	watch_close(w->bpf);
	if (w->timerfd >= 0)
		close(w->timerfd);
	if (w->epfd >= 0)
		close(w->epfd);
	free(w->seen);
	free(w->proc);
	free(w);
}
