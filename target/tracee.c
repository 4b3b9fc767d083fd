/* Process trees under ptrace: seizing, decoding wait statuses into the
 * few events dwleak acts on, and stopping a whole process.  Thread-level
 * stops (a new thread, a signal to pass on, job control) are handled here
 * and never reach the caller. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stop_signal.h"
#include "thread_regs.h"
#include "tracee.h"

enum thread_state {
	THREAD_RUNNING = 0,
	THREAD_NEW,	    /* created; its first stop not seen yet */
	THREAD_STOPPED,	    /* in a stop the caller or tracee_stop_process holds */
	THREAD_INTERRUPTED, /* asked to stop (PTRACE_INTERRUPT), not yet stopped */
};

struct thread {
	pid_t tid;
	pid_t tgid;
	enum thread_state state;
	bool held;	/* stopped by tracee_stop_process: resumed by tracee_resume_process */
	bool exiting;	/* its process's TRACEE_EXITING was reported */
};

/* A wait status that arrived for a thread we could not place yet, or
 * while tracee_stop_process waited for another process. */
struct early {
	pid_t tid;
	int status;
};

struct tracee_set {
	struct tracee_options opt;
	struct thread *threads;
	size_t n, cap;
	struct early *early;
	size_t nearly, capearly;
};

int tracee_set_new(const struct tracee_options *o, struct tracee_set **out)
{
	struct tracee_set *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->opt = *o;
	*out = s;
	return 0;
}

static long seize_options(const struct tracee_set *s)
{
	/* execs and threads always: a process's new image must be probed,
	 * and stopping it whole needs every thread */
	/* TRACESYSGOOD: nothing here resumes with PTRACE_SYSCALL, but the
	 * leak check's snapshot does (snapshot.c), and a tracee whose tracer
	 * dies at a syscall stop sends itself the stop's code as a signal:
	 * SIGTRAP would kill it, SIGTRAP | 0x80 is no signal */
	long o = PTRACE_O_TRACEEXEC | PTRACE_O_TRACECLONE | PTRACE_O_TRACESYSGOOD;

	if (s->opt.follow)
		o |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
	if (s->opt.exit_stops)
		o |= PTRACE_O_TRACEEXIT;
	return o;
}

static struct thread *thread_find(struct tracee_set *s, pid_t tid)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->threads[i].tid == tid)
			return &s->threads[i];
	return NULL;
}

static struct thread *thread_add(struct tracee_set *s, pid_t tid, pid_t tgid, enum thread_state st)
{
	struct thread *t = thread_find(s, tid);

	if (!t) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 16;
			struct thread *g = realloc(s->threads, cap * sizeof(*g));

			if (!g)
				return NULL;
			s->threads = g;
			s->cap = cap;
		}
		t = &s->threads[s->n++];
	}
	*t = (struct thread){ .tid = tid, .tgid = tgid, .state = st };
	return t;
}

static void thread_remove(struct tracee_set *s, pid_t tid)
{
	struct thread *t = thread_find(s, tid);

	if (t)
		*t = s->threads[--s->n];
}

static int early_push(struct tracee_set *s, pid_t tid, int status)
{
	if (s->nearly == s->capearly) {
		size_t cap = s->capearly ? s->capearly * 2 : 8;
		struct early *g = realloc(s->early, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		s->early = g;
		s->capearly = cap;
	}
	s->early[s->nearly++] = (struct early){ tid, status };
	return 0;
}

/* Takes the early status of TID, if one is kept; 1 when found. */
static int early_take(struct tracee_set *s, pid_t tid, int *status)
{
	size_t i;

	for (i = 0; i < s->nearly; i++) {
		if (s->early[i].tid != tid)
			continue;
		*status = s->early[i].status;
		memmove(&s->early[i], &s->early[i + 1], (s->nearly - i - 1) * sizeof(s->early[0]));
		s->nearly--;
		return 1;
	}
	return 0;
}

/* The first thread with a kept status that is known by now, or 0. */
static pid_t early_known(struct tracee_set *s)
{
	size_t i;

	for (i = 0; i < s->nearly; i++)
		if (thread_find(s, s->early[i].tid))
			return s->early[i].tid;
	return 0;
}

pid_t tracee_tgid_of(pid_t tid)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	pid_t tgid = -ESRCH;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0)
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	free(line);
	fclose(f);
	return tgid;
}

int tracee_seize_thread(struct tracee_set *s, pid_t pid, pid_t tid)
{
	if (ptrace(PTRACE_SEIZE, tid, 0, seize_options(s)))
		return -errno;
	return thread_add(s, tid, pid, THREAD_RUNNING) ? 0 : -ENOMEM;
}

/* The TracerPid of thread TID of PID, or 0. */
static pid_t tracer_of(pid_t pid, pid_t tid)
{
	char path[96], line[256];
	pid_t tracer = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "TracerPid: %d", &tracer) == 1)
			break;
	if (f)
		fclose(f);
	return tracer;
}

int tracee_seize_process(struct tracee_set *s, pid_t pid)
{
	char path[64];
	struct dirent *d;
	bool added;
	DIR *dir;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	/* threads created while we seize the others: look again until none is new */
	do {
		added = false;
		dir = opendir(path);
		if (!dir)
			return errno == ENOENT ? -ESRCH : -errno;
		while ((d = readdir(dir))) {
			pid_t tid = (pid_t)atoi(d->d_name);

			if (tid <= 0 || thread_find(s, tid))
				continue;
			err = tracee_seize_thread(s, pid, tid);
			if (err == -ESRCH)
				continue; /* exited meanwhile */
			if (err == -EPERM && tracer_of(pid, tid) == (pid_t)syscall(SYS_gettid))
				continue; /* made by a thread seized already: ours (PTRACE_O_TRACECLONE),
					   * its clone event adds it */
			if (err) {
				closedir(dir);
				return err;
			}
			added = true;
		}
		closedir(dir);
	} while (added);
	return thread_find(s, pid) ? 0 : -ESRCH;
}

/* Waits (blocking) for the first stop of new thread T, unless it came
 * already; returns the process's exit status in *EXIT_STATUS (and -ESRCH)
 * when it died instead. */
static int first_stop_wait(struct tracee_set *s, struct thread *t, int *exit_status)
{
	int status;
	pid_t tid = t->tid;

	if (t->state != THREAD_NEW)
		return 0;
	if (!early_take(s, tid, &status) && waitpid(tid, &status, __WALL) != tid)
		return -errno;
	t = thread_find(s, tid);
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		*exit_status = status;
		return -ESRCH;
	}
	t->state = THREAD_STOPPED;
	return 0;
}

/* PTRACE_EVENT_FORK/VFORK/CLONE from thread T: a new thread (resumed at
 * once) or a new process (reported, stopped). */
static int on_clone(struct tracee_set *s, struct thread *t, int event, struct tracee_event *ev)
{
	unsigned long msg = 0;
	pid_t child, ctgid, tid = t->tid, tgid = t->tgid;
	struct thread *c;
	int status = 0;

	if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg))
		return -errno;
	child = (pid_t)msg;
	ctgid = event == PTRACE_EVENT_CLONE ? tracee_tgid_of(child) : child;
	if (ctgid < 0)
		ctgid = child; /* gone already: its exit comes as a process's */
	c = thread_add(s, child, ctgid, THREAD_NEW);
	if (!c)
		return -ENOMEM;
	if (ctgid == tgid) { /* a thread */
		if (first_stop_wait(s, c, &status) == 0)
			tracee_resume(s, child);
		return tracee_resume(s, tid);
	}
	if (first_stop_wait(s, c, &status) == -ESRCH)
		thread_remove(s, child); /* reported as an exit by its own wait status: none comes now */
	thread_find(s, tid)->state = THREAD_STOPPED;
	*ev = (struct tracee_event){ .kind = TRACEE_FORK, .pid = tgid, .tid = tid, .child = child,
				     .vfork = event == PTRACE_EVENT_VFORK };
	return 1;
}

/* PTRACE_EVENT_EXEC: the thread now has the group's id; the others are gone. */
static int on_exec(struct tracee_set *s, struct thread *t, struct tracee_event *ev)
{
	pid_t tgid = t->tgid;
	size_t i = 0;

	while (i < s->n) {
		if (s->threads[i].tgid == tgid)
			s->threads[i] = s->threads[--s->n];
		else
			i++;
	}
	if (!thread_add(s, tgid, tgid, THREAD_STOPPED))
		return -ENOMEM;
	*ev = (struct tracee_event){ .kind = TRACEE_EXEC, .pid = tgid, .tid = tgid };
	return 1;
}

_Static_assert(DWLEAK_STOP_SIGNAL == SIGCONT, "the kernel program's stop signal is SIGCONT");

/* A signal-delivery-stop: ours (a BPF program's DWLEAK_STOP_SIGNAL, si_code
 * SI_KERNEL) is reported; any other signal goes on to the tracee. */
static int on_signal_stop(struct thread *t, int sig, struct tracee_event *ev)
{
	siginfo_t si;

	if (sig == DWLEAK_STOP_SIGNAL && !ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) && si.si_code == SI_KERNEL) {
		t->state = THREAD_STOPPED;
		*ev = (struct tracee_event){ .kind = TRACEE_STOP_ASKED, .pid = t->tgid, .tid = t->tid };
		return 1;
	}
	/* passed on; an interrupt asked for is still to come */
	if (t->state != THREAD_INTERRUPTED)
		t->state = THREAD_RUNNING;
	if (ptrace(PTRACE_CONT, t->tid, 0, sig) && errno != ESRCH)
		return -errno;
	return 0;
}

/* PTRACE_EVENT_STOP: the stop PTRACE_INTERRUPT asked for, a new tracee's
 * first stop, or a group stop (job control), which stays a stop. */
static int on_event_stop(struct thread *t, int sig)
{
	if (t->state == THREAD_INTERRUPTED || t->state == THREAD_NEW) {
		t->state = THREAD_STOPPED;
		return 0;
	}
	if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
		/* stopped by job control: it stays stopped, and a SIGCONT wakes it */
		if (ptrace(PTRACE_LISTEN, t->tid, 0, 0) && errno != ESRCH)
			return -errno;
		return 0;
	}
	if (ptrace(PTRACE_CONT, t->tid, 0, 0) && errno != ESRCH)
		return -errno;
	return 0;
}

/* Whether thread TID, stopped at its exit, is in the exit syscall (the
 * thread alone ends), not exit_group nor killed by a signal. */
static bool thread_in_exit_syscall(pid_t tid)
{
	int64_t nr;

	return !thread_regs_syscall(tid, &nr) && nr == SYS_exit;
}

/* One wait status of thread TID.  Returns 1 with a process-level event in
 * *EV, 0 when handled here, or a negative errno. */
static int status_handle(struct tracee_set *s, pid_t tid, int status, struct tracee_event *ev)
{
	struct thread *t = thread_find(s, tid);
	int event = status >> 16, sig;
	pid_t tgid;

	if (!t) /* a new tracee's first stop, before its parent's event */
		return early_push(s, tid, status);
	tgid = t->tgid;
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		thread_remove(s, tid);
		if (tid != tgid)
			return 0;
		*ev = (struct tracee_event){ .kind = TRACEE_EXIT, .pid = tgid, .tid = tid, .status = status };
		return 1;
	}
	if (!WIFSTOPPED(status))
		return 0;
	sig = WSTOPSIG(status);
	switch (event) {
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
	case PTRACE_EVENT_CLONE:
		return on_clone(s, t, event, ev);
	case PTRACE_EVENT_EXEC:
		return on_exec(s, t, ev);
	case PTRACE_EVENT_EXIT: {
		bool first = true, others = false;
		size_t i;

		for (i = 0; i < s->n; i++) {
			first &= !(s->threads[i].tgid == tgid && s->threads[i].exiting);
			others |= s->threads[i].tgid == tgid && s->threads[i].tid != tid;
		}
		/* one thread ending (pthread_exit: the exit syscall) while others
		 * run on is not its process's exit */
		if (others && thread_in_exit_syscall(tid))
			return tracee_resume(s, tid);
		t->exiting = true;
		if (!first)
			return tracee_resume(s, tid);
		t->state = THREAD_STOPPED;
		*ev = (struct tracee_event){ .kind = TRACEE_EXITING, .pid = tgid, .tid = tid };
		return 1;
	}
	case PTRACE_EVENT_STOP:
		return on_event_stop(t, sig);
	case 0:
		return on_signal_stop(t, sig, ev);
	default:
		return tracee_resume(s, tid);
	}
}

int tracee_next(struct tracee_set *s, struct tracee_event *ev)
{
	int status, ret;
	pid_t tid;

	ev->kind = TRACEE_NONE;
	for (;;) {
		/* statuses kept while tracee_stop_process waited go first */
		if ((tid = early_known(s)) > 0) {
			early_take(s, tid, &status);
		} else {
			tid = waitpid(-1, &status, __WALL | WNOHANG);
			if (tid == 0 || (tid < 0 && errno == ECHILD))
				return 0;
			if (tid < 0)
				return errno == EINTR ? 0 : -errno;
		}
		ret = status_handle(s, tid, status, ev);
		if (ret)
			return ret;
	}
}

int tracee_resume(struct tracee_set *s, pid_t tid)
{
	struct thread *t = thread_find(s, tid);
	int status = 0;

	if (t && first_stop_wait(s, t, &status) == -ESRCH)
		return -ESRCH;
	t = thread_find(s, tid);
	if (t) {
		t->state = THREAD_RUNNING;
		t->held = false;
	}
	if (ptrace(PTRACE_CONT, tid, 0, 0))
		return -errno;
	return 0;
}

/* True when every thread of PID is stopped. */
static bool all_stopped(const struct tracee_set *s, pid_t pid)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->threads[i].tgid == pid && s->threads[i].state != THREAD_STOPPED)
			return false;
	return true;
}

int tracee_stop_process(struct tracee_set *s, pid_t pid, pid_t **tids, size_t *n)
{
	struct tracee_event ev;
	size_t i, k = 0;
	int status, ret;
	pid_t tid;

	*tids = NULL;
	*n = 0;
	for (i = 0; i < s->n; i++) {
		struct thread *t = &s->threads[i];

		if (t->tgid != pid || t->state != THREAD_RUNNING)
			continue;
		if (ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) == 0) {
			t->state = THREAD_INTERRUPTED;
			t->held = true;
		}
	}
	while (!all_stopped(s, pid)) {
		tid = waitpid(-1, &status, __WALL);
		if (tid < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (thread_find(s, tid) && thread_find(s, tid)->tgid != pid) {
			ret = early_push(s, tid, status); /* another process's: later */
			if (ret)
				return ret;
			continue;
		}
		ret = status_handle(s, tid, status, &ev);
		if (ret < 0)
			return ret;
		if (ret == 1 && ev.kind == TRACEE_EXIT && ev.pid == pid)
			return -ESRCH;
		/* other events of PID while stopping it (a fork, an exec, an
		 * exit of one of its threads) leave their thread stopped */
	}
	*tids = calloc(s->n + 1, sizeof(**tids));
	if (!*tids)
		return -ENOMEM;
	for (i = 0; i < s->n; i++)
		if (s->threads[i].tgid == pid)
			(*tids)[k++] = s->threads[i].tid;
	*n = k;
	return 0;
}

int tracee_stop_thread(struct tracee_set *s, pid_t pid, pid_t *stopped)
{
	struct tracee_event ev;
	int status, ret;
	size_t i;

	for (i = 0; i < s->n; i++) {
		struct thread *t = &s->threads[i];
		pid_t tid = t->tid;

		if (t->tgid != pid || t->state != THREAD_RUNNING || ptrace(PTRACE_INTERRUPT, tid, 0, 0))
			continue;
		t->state = THREAD_INTERRUPTED;
		t->held = true;
		while ((t = thread_find(s, tid)) && t->state != THREAD_STOPPED) {
			if (waitpid(tid, &status, __WALL) != tid) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			ret = status_handle(s, tid, status, &ev);
			if (ret < 0)
				return ret;
			if (ret == 1 && ev.kind == TRACEE_EXIT && ev.pid == pid)
				return -ESRCH;
		}
		if (t) {
			*stopped = tid;
			return 0;
		}
		i = (size_t)-1; /* it ended, and the list changed: another */
	}
	return -ESRCH;
}

int tracee_resume_process(struct tracee_set *s, pid_t pid)
{
	size_t i;
	int err = 0;

	for (i = 0; i < s->n; i++) {
		struct thread *t = &s->threads[i];

		if (t->tgid != pid || !t->held)
			continue;
		t->held = false;
		t->state = THREAD_RUNNING;
		if (ptrace(PTRACE_CONT, t->tid, 0, 0) && errno != ESRCH && !err)
			err = -errno;
	}
	return err;
}

/* Detaches thread T: a running one is stopped first (PTRACE_DETACH needs
 * a stopped tracee). */
static void thread_detach(struct tracee_set *s, struct thread *t)
{
	int status;

	if (t->state == THREAD_RUNNING && ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) == 0) {
		/* wait for this thread's stop; other statuses are lost with the set */
		while (waitpid(t->tid, &status, __WALL) == t->tid) {
			if (WIFEXITED(status) || WIFSIGNALED(status))
				return;
			if (WIFSTOPPED(status))
				break;
		}
	}
	ptrace(PTRACE_DETACH, t->tid, 0, 0);
	(void)s;
}

void tracee_detach_process(struct tracee_set *s, pid_t pid)
{
	size_t i = 0;

	while (i < s->n) {
		if (s->threads[i].tgid == pid) {
			thread_detach(s, &s->threads[i]);
			s->threads[i] = s->threads[--s->n];
		} else {
			i++;
		}
	}
}

size_t tracee_count(const struct tracee_set *s)
{
	size_t i, n = 0;

	for (i = 0; i < s->n; i++)
		n += s->threads[i].tid == s->threads[i].tgid;
	return n;
}

void tracee_set_free(struct tracee_set *s)
{
	if (!s)
		return;
	while (s->n)
		tracee_detach_process(s, s->threads[0].tgid);
	free(s->threads);
	free(s->early);
	free(s);
}
