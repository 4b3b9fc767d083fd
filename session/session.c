/* The session's lifecycle: its parts made and loaded (the table cache,
 * the walker, the symbolizer, the stack store, the BPF programs), the
 * target found or started, the programs' and ptrace's events handed to
 * the processes' lives (proc.c), walked stacks moved out of the kernel,
 * tables refreshed, and everything given back at the end.
 *
 *   new: parts -> programs loaded (no process yet)
 *   attach / spawn: a pid probed where it runs, or a command forked,
 *     held, seized with ptrace and released (its exec is the first event)
 *   poll: records into each process's ledger; forks, execs, the linker's
 *     stops and exits; tables for new objects
 *   free: every process's programs entry, the tracees let go (what still
 *     runs runs on, untraced), the parts */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"
#include "inject.h"
#include "preload.h"
#include "preload_env.h"
#include "preload_path.h"
#include "session_private.h"

/* Every live process's tables are looked at again this often, unless the
 * settings say (rescan_s). */
#define RESCAN_INTERVAL_S 1.0
/* The report's names, made ahead while the processes run (procs_names_warm):
 * from this long after the first process was traced (its start-up, when
 * most new stacks come, is its own), handing at most this long of each
 * wakeup to the symbolizer's thread (a mapping lookup and a queued item
 * per frame of each new stack; the thread names them on the other CPU). */
#define NAMES_WARM_AFTER_S 0.1
#define NAMES_WARM_SLICE_S 0.002
/* --walk process: how often the libraries' rings are drained, and their
 * size (2^SESSION_RING_BITS bytes a thread that allocates, touched as it
 * fills): a thread that allocates three million times a second, 100-200
 * bytes a record, fills 2 MiB in 4-6 ms, then waits for dwleak (the
 * library's walk_ring_wait_ms) rather than drop; a service of a hundred
 * allocating threads holds 200 MiB of rings in an exact trace.  A sampled
 * one (512 KiB: a sampled call per 512 KiB allocated) writes a few
 * thousand records a second at most: 64 KiB a thread, 6.4 MiB.
 * The pace: the fullest ring about a quarter full when read
 * (RINGS_FILL_TARGET_PPM), from how full the last drain found it and how
 * long after the one before it ran, every RINGS_BUSY_MS at the fastest
 * (also while drains apply thousands of records, or find a ring half
 * full) and every RINGS_IDLE_MS at the slowest.  Each drain wakes dwleak
 * and reads the process's memory (process_vm_readv takes its mm's lock):
 * redis under load, drained every 5 ms, kept heaptrack -p's throughput
 * (0.98x of it), every 20 ms 1.03x. */
#define RINGS_START_MS 5
#define RINGS_IDLE_MS 20
#define RINGS_BUSY_MS 1
#define RINGS_BUSY_RECORDS 4096
#define RINGS_FILL_TARGET_PPM 250000
#define SESSION_RING_BITS 21
#define SESSION_RING_BITS_SAMPLED 16

extern char **environ;

/* --- The programs' events --- */

static void on_record(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;

	proc_record(&s->sv, &s->procs, s->records_now, data, size);
}

static void on_mmap(void *ctx, const struct mmap_event *e)
{
	struct session *s = ctx;

	proc_mmap(&s->procs, e);
}

static void on_objects_changed(void *ctx, uint32_t tgid, bool stopped)
{
	struct session *s = ctx;

	/* a stop is handled when ptrace reports it (TRACEE_STOP_ASKED) */
	(void)stopped;
	proc_objects_changed(&s->procs, tgid);
}

static void on_exiting(void *ctx, uint32_t tgid, pid_t tid, uint64_t sp)
{
	struct session *s = ctx;

	proc_exit_called(&s->procs, tgid, tid, sp);
}

/* An exec of a process not followed with ptrace: queued, handled once the
 * records before it are applied (session_poll). */
static void on_exec(void *ctx, uint32_t tgid)
{
	struct session *s = ctx;

	if (s->tracees)
		return; /* every process is followed with ptrace, which reports it stopped */
	if (s->nexecs == s->execs_cap) {
		size_t cap = s->execs_cap ? 2 * s->execs_cap : 8;
		pid_t *g = realloc(s->execs, cap * sizeof(*g));

		if (!g) {
			s->exec_lost = true;
			return;
		}
		s->execs = g;
		s->execs_cap = cap;
	}
	s->execs[s->nexecs++] = (pid_t)tgid;
}

/* The execs queued by on_exec. */
static int execs_handle(struct session *s)
{
	size_t i;
	int err = 0;

	if (s->exec_lost) {
		session_say(&s->log, SESSION_WARNING, "out of memory noting an exec: a process's new image may be "
			    "traced late or with its old image's probes");
		s->exec_lost = false;
	}
	for (i = 0; i < s->nexecs && !err; i++)
		err = proc_on_exec(&s->sv, &s->procs, s->execs[i]);
	s->nexecs = 0;
	return err;
}

/* The rings' drain timer (see RINGS_FILL_TARGET_PPM), after a drain that
 * applied READ records and found the fullest ring FILL_PPM full: the time
 * since the drain before, scaled to the target fill. */
static void rings_pace(struct session *s, uint64_t read, uint32_t fill_ppm)
{
	uint64_t now = session_now_ns(), since = s->rings_last_ns && now > s->rings_last_ns ? now - s->rings_last_ns : 0;
	struct itimerspec every;
	uint64_t due;
	long ms;

	s->rings_last_ns = now;
	if (read >= RINGS_BUSY_RECORDS || fill_ppm >= 2 * RINGS_FILL_TARGET_PPM) {
		ms = RINGS_BUSY_MS;
	} else if (!fill_ppm || !since) {
		ms = fill_ppm ? s->rings_ms : RINGS_IDLE_MS;
	} else {
		due = since * RINGS_FILL_TARGET_PPM / fill_ppm / 1000000; /* ms */
		ms = due < RINGS_BUSY_MS ? RINGS_BUSY_MS : due > RINGS_IDLE_MS ? RINGS_IDLE_MS : (long)due;
	}
	if (s->timerfd < 0 || ms == s->rings_ms)
		return;
	s->rings_ms = ms;
	every = (struct itimerspec){ .it_interval = { 0, ms * 1000000L }, .it_value = { 0, ms * 1000000L } };
	timerfd_settime(s->timerfd, 0, &every, NULL);
}

void session_drain(struct session *s)
{
	/* the rings' records are applied only below this time, taken before
	 * the kernel's records are read: a call made at a site (before its
	 * process's image was installed, or by a thread that chose its site
	 * just before) is in the kernel's buffer before any ring record that
	 * follows it is stamped, and is applied first */
	uint64_t before = proc_rings_clock();
	uint32_t fill_ppm = 0;
	uint64_t read;

	s->records_now = session_now_ns();
	/* a kernel record still being written keeps the ones after it unread
	 * (a record of this cut among them, maybe): no ring record is applied
	 * now, all wait for a drain that read the kernel's up to its cut */
	if (probes_drain(s->probes) == -EAGAIN)
		before = 0;
	read = procs_rings_drain(&s->sv, &s->procs, before, &fill_ppm);
	rings_pace(s, read, fill_ppm);
}

static int stack_put(void *ctx, uint64_t id, const struct stack_trace *st)
{
	return stack_store_put(ctx, id, st);
}

int session_stacks_move(struct session *s)
{
	long n = probes_stacks_move(s->probes, stack_put, s->stacks);

	if (n < 0 && !s->stacks_move_failed) {
		/* what stays in the kernel map is moved at the next try; a walk
		 * the store had no memory for is lost, and its allocations go
		 * without a stack (counted at the report) */
		session_say(&s->log, SESSION_WARNING, "moving walked stacks out of the BPF map failed: %s",
			    strerror((int)-n));
		s->stacks_move_failed = true;
	}
	return n < 0 ? (int)n : 0;
}

/* From the poll: moves the walks out when the kernel map is half full. */
static void stacks_pressure(struct session *s)
{
	uint64_t cap, held = probes_stacks_held(s->probes, &cap, NULL);

	if (2 * held >= cap)
		session_stacks_move(s);
}

/* --- Setup --- */

/* Opens, configures and loads the programs and the tables known now. */
static int probes_setup(struct session *s)
{
	const struct session_settings *set = s->set;
	struct probes_settings ps = {
		.sample_bytes = set->sample_bytes,
		.mmap = set->mmap,
		.alloc_memory = set->leak_check,
		.unwind_mode = set->unwind,
		.session = set->uprobe_session,
		.guard = set->preempt_guard,
		.no_walk = set->bench_no_walk,
		.preload = !set->no_preload,
		.stacks_max = set->stacks_max,
	};
	struct probes_events ev = { s, on_record, on_mmap, on_objects_changed, on_exiting, on_exec };
	struct unwinder_maps maps;
	int err;

	unwinder_needs(s->uw, &ps.rows, &ps.rules);
	err = probes_open(&ps, &ev, &s->probes);
	if (err) {
		session_say(&s->log, SESSION_ERROR, "cannot load the BPF program: %s; the kernel needs BTF, BPF and "
			    "uprobes (run with DWLEAK_DEBUG=1 to see the verifier)", strerror(-err));
		return err;
	}
	probes_unwinder_maps(s->probes, &maps);
	unwinder_set_maps(s->uw, &maps);
	/* a process traced without ptrace that execs: told by a tracepoint */
	if (probes_attach_exec(s->probes))
		session_say(&s->log, SESSION_WARNING, "cannot attach to the sched_process_exec tracepoint: a process "
			    "traced without ptrace (-p) that execs keeps its old image's probes and blocks");
	err = probes_attach_syscalls(s->probes);
	if (err)
		session_say(&s->log, SESSION_ERROR, "cannot attach to the syscall tracepoints for %s: %s; the kernel "
			    "needs BTF raw tracepoints", set->mmap ? "--mmap" : "--leak-check", strerror(-err));
	return err;
}

int session_new(const struct session_settings *set, const struct session_log *log, struct session **out)
{
	struct session *s = calloc(1, sizeof(*s));
	sigset_t chld;
	int err;

	*out = s;
	if (!s)
		return -ENOMEM;
	s->set = set;
	s->log = *log;
	s->tgt.release_fd = -1;
	s->ep = s->sigfd = s->timerfd = -1;
	s->t_start = session_now_s();
	s->pset = (struct proc_settings){
		.following = false, /* until the target says (attach, spawn) */
		.leak_check = set->leak_check,
		.no_preload = set->no_preload,
		.mmap = set->mmap,
		.sample_bytes = set->sample_bytes,
		.min_age_ns = set->min_age_ns,
		.walk_rings = !set->walk_in_process	    ? DWLEAK_PRELOAD_WALK_NONE
			      : set->unwind == UNWIND_MODE_DWARF ? DWLEAK_PRELOAD_WALK_DWARF
			      : set->unwind == UNWIND_MODE_FP	    ? DWLEAK_PRELOAD_WALK_FP
								    : DWLEAK_PRELOAD_WALK_NONE,
		/* a sampled trace records a few thousand calls a second at most */
		.ring_bits = set->sample_bytes ? SESSION_RING_BITS_SAMPLED : SESSION_RING_BITS,
	};
	/* tracees' stops come as SIGCHLD, read from a signalfd */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	if (table_cache_open(NULL, &s->cache))
		session_say(&s->log, SESSION_WARNING, "not using the table cache: %s", table_cache_why());
	err = unwinder_new(s->cache, set->debug_dirs, &s->uw);
	/* the DWARF walk in the process needs the tables the walker loads,
	 * for the images handed to the libraries */
	if (!err && s->pset.walk_rings == DWLEAK_PRELOAD_WALK_DWARF)
		unwinder_keep_tables(s->uw, true);
	err = err ?: symbolizer_new(set->debug_dirs, &s->sym);
	if (!err && set->fetch)
		symbolizer_set_fetch(s->sym, set->fetch);
	err = err ?: stack_store_new(&s->stacks);
	if (err) {
		session_say(&s->log, SESSION_ERROR, "cannot set up: %s", strerror(-err));
		return err;
	}
	session_services_init(s);
	return probes_setup(s);
}

/* Starts following the target with ptrace (its forks and execs too when
 * the settings say so; exit stops with --leak-check). */
static int following(struct session *s)
{
	/* an exit stop is where a process walking in itself is last drained */
	struct tracee_options to = { .follow = s->set->follow_forks,
				     .exit_stops = s->set->leak_check || s->pset.walk_rings };
	int err;

	if (s->tracees)
		return 0;
	err = tracee_set_new(&to, &s->tracees);
	s->pset.following = !err;
	return err;
}

int session_inject(struct session *s, pid_t pid, double *ms, char **why)
{
	struct inject_result res = { 0 };
	char *lib = NULL;
	int err, r;

	*why = NULL;
	*ms = -1;
	err = preload_library_path(&lib);
	if (err) {
		r = asprintf(why, "%s not found next to dwleak (DWLEAK_PRELOAD_LIB names it)", DWLEAK_PRELOAD_NAME);
		if (r < 0)
			*why = NULL;
		return err;
	}
	err = inject_library(pid, lib, NULL, &res);
	free(lib);
	if (!err)
		*ms = res.ms_total;
	if (err && err != -EEXIST) {
		*why = res.reason;
		res.reason = NULL;
		if (!*why && asprintf(why, "%s", strerror(-err)) < 0)
			*why = NULL;
	}
	inject_result_free(&res);
	s->inject_ms = *ms;
	return err;
}

/* -p on a process without the preload library: loads it into the process
 * before ptrace holds it, so that it is traced at the library's sites;
 * where that cannot be done, says why (it is then traced with uprobes).
 * Nothing to do with --no-inject, --no-preload, --mmap. */
static void inject(struct session *s, pid_t pid)
{
	char *why = NULL;
	double ms;
	int err;

	if (s->set->no_inject || s->set->no_preload || s->set->mmap)
		return;
	err = session_inject(s, pid, &ms, &why);
	if (err && err != -EEXIST)
		session_say(&s->log, SESSION_NOTE, "pid %d: cannot load the preload library into it: %s; tracing it "
			    "with uprobes (every allocator call traps: slower)", pid, why ? why : strerror(-err));
	free(why);
}

int session_attach(struct session *s, pid_t pid)
{
	int err = 0;

	if (!s->tgt.pid && (err = target_attach(&s->tgt, pid)))
		return err;
	inject(s, pid); /* it takes no ptrace hold of its own: before ours */
	if (s->set->follow_forks && (err = following(s)))
		return err;
	if (s->tracees && (err = tracee_seize_process(s->tracees, pid))) {
		session_say(&s->log, SESSION_ERROR, "cannot follow pid %d's forks with ptrace: %s%s", pid,
			    strerror(-err), err == -EPERM ? " (is a debugger attached? see TracerPid in /proc/PID/status)"
							  : "");
		return err;
	}
	return proc_attach_running(&s->sv, &s->procs, pid);
}

int session_spawn(struct session *s, char *const *argv)
{
	char **envp;
	int err = following(s);

	if (err)
		return err;
	/* LD_PRELOAD: the library first */
	envp = session_preload_environ(argv[0], s->set->no_preload, s->set->mmap, environ, &s->log);
	err = target_spawn(&s->tgt, (char **)argv, envp);
	session_preload_environ_free(envp);
	if (err)
		return err;
	err = proc_spawned(&s->procs, s->tgt.pid, s->tgt.command);
	if (err)
		return err;
	err = tracee_seize_thread(s->tracees, s->tgt.pid, s->tgt.pid);
	if (err) {
		session_say(&s->log, SESSION_ERROR, "cannot follow %s with ptrace: %s (kernel.yama.ptrace_scope=3 "
			    "forbids it)", argv[0], strerror(-err));
		return err;
	}
	if (target_release(&s->tgt)) {
		session_say(&s->log, SESSION_ERROR, "cannot start %s", argv[0]);
		return -EIO;
	}
	return 0;
}

/* --- Polling --- */

/* Handles what ptrace reports until nothing is pending.  Returns 0, or a
 * negative errno when the session cannot go on. */
static int tracee_events(struct session *s)
{
	struct tracee_event ev;
	int ret, err = 0;

	while (!err && (ret = tracee_next(s->tracees, &ev)) > 0) {
		switch (ev.kind) {
		case TRACEE_FORK:
			err = proc_on_fork(&s->sv, &s->procs, ev.pid, ev.child, ev.vfork);
			/* traced or not, the child stays followed: it runs on */
			if (procs_find(&s->procs, ev.child))
				tracee_resume(s->tracees, ev.child);
			tracee_resume(s->tracees, ev.tid);
			break;
		case TRACEE_EXEC:
			session_drain(s); /* the old image's, dropped with it */
			err = proc_on_exec(&s->sv, &s->procs, ev.pid);
			tracee_resume(s->tracees, ev.tid);
			break;
		case TRACEE_STOP_ASKED:
			session_drain(s); /* and the events: which stop this is */
			err = proc_on_stop(&s->sv, &s->procs, ev.pid);
			tracee_resume(s->tracees, ev.tid);
			break;
		case TRACEE_EXITING:
			proc_on_exiting(&s->sv, &s->procs, ev.pid, ev.tid);
			tracee_resume(s->tracees, ev.tid);
			break;
		case TRACEE_EXIT:
			session_drain(s); /* its last records, before its pid can be reused */
			proc_on_exit(&s->sv, &s->procs, ev.pid, ev.status);
			break;
		default:
			tracee_resume(s->tracees, ev.tid);
		}
	}
	return err ?: (ret < 0 ? ret : 0);
}

static double rescan_interval(const struct session *s)
{
	return s->set->rescan_s > 0 ? s->set->rescan_s : RESCAN_INTERVAL_S;
}

/* An epoll set of the programs' events and, when following, SIGCHLD (a
 * tracee stopped or exited: it waits for us, so no timer delay). */
static int wakeups_open(struct session *s)
{
	struct epoll_event e = { .events = EPOLLIN };
	sigset_t chld;

	s->ep = epoll_create1(EPOLL_CLOEXEC);
	if (s->ep < 0)
		return -errno;
	e.data.fd = probes_epoll_fd(s->probes);
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, e.data.fd, &e))
		return -errno;
	if (s->tracees) {
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		s->sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
		e.data.fd = s->sigfd;
		if (s->sigfd < 0 || epoll_ctl(s->ep, EPOLL_CTL_ADD, s->sigfd, &e))
			return -errno;
	}
	if (s->pset.walk_rings) {
		struct itimerspec every = { .it_interval = { 0, RINGS_START_MS * 1000000L },
					    .it_value = { 0, RINGS_START_MS * 1000000L } };

		s->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		e.data.fd = s->timerfd;
		s->rings_ms = RINGS_START_MS;
		if (s->timerfd < 0 || timerfd_settime(s->timerfd, 0, &every, NULL) ||
		    epoll_ctl(s->ep, EPOLL_CTL_ADD, s->timerfd, &e))
			return -errno;
	}
	s->next_scan = session_now_s() + rescan_interval(s);
	return 0;
}

int session_fd(const struct session *s)
{
	return s->ep;
}

int session_poll(struct session *s, int timeout_ms)
{
	struct epoll_event evs[4];
	struct signalfd_siginfo si;
	uint64_t ticks;
	double now;
	int err = 0;

	if (s->ep < 0 && (err = wakeups_open(s)))
		return err;
	if (epoll_wait(s->ep, evs, 4, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	while (s->sigfd >= 0 && read(s->sigfd, &si, sizeof(si)) == sizeof(si))
		;
	if (s->timerfd >= 0 && read(s->timerfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		return -errno;
	probes_poll(s->probes, 0);
	session_drain(s); /* alloc_events records come without wakeups */
	if (s->tracees)
		err = tracee_events(s);
	err = err ?: execs_handle(s);
	stacks_pressure(s);
	now = session_now_s();
	proc_tables_due(&s->sv, &s->procs, now >= s->next_scan);
	if (now >= s->next_scan)
		s->next_scan = now + rescan_interval(s);
	/* the report's names made while the processes run (by the
	 * symbolizer's thread), past their first moments, which are theirs */
	if (s->t_traced && now >= s->t_traced + NAMES_WARM_AFTER_S)
		procs_names_warm(&s->sv, &s->procs, now + NAMES_WARM_SLICE_S);
	if (err)
		return err;
	if (s->tracees)
		return procs_alive(&s->procs) > 0;
	/* the host says the exits (session_exited): a process it did not
	 * hear of yet is alive, whatever kill(0) says meanwhile */
	if (s->set->exits_from_host)
		return 1;
	if (proc_top_alive(&s->procs))
		return 1;
	/* its library's last ring records may wait for a drain's time that
	 * never comes (read while the last drain ran, then it exited): applied
	 * after the kernel's last records of it */
	session_drain(s);
	proc_top_gone(&s->procs);
	return 0;
}

void session_exited(struct session *s, pid_t pid, int status)
{
	const struct proc *p = procs_find(&s->procs, pid);

	if (!p || p->exited)
		return;
	session_drain(s); /* its last records, before its pid can be reused */
	proc_on_exit(&s->sv, &s->procs, pid, status);
}

int session_forget(struct session *s, pid_t pid)
{
	return proc_forget(&s->sv, &s->procs, pid);
}

int session_leak_check(struct session *s, pid_t pid)
{
	struct proc *p = procs_find(&s->procs, pid);

	if (!p)
		return -ENOENT;
	proc_leak_check(&s->sv, p, "asked for");
	return p->check_err;
}

/* --- What the host reads --- */

bool session_traced(const struct session *s)
{
	return s->announced;
}

const struct procs *session_procs(const struct session *s)
{
	return &s->procs;
}

const struct target *session_target(const struct session *s)
{
	return &s->tgt;
}

double session_traced_since(const struct session *s)
{
	return s->t_traced;
}

void session_stats(const struct session *s, struct session_stats *out)
{
	memset(out, 0, sizeof(*out));
	unwinder_stats(s->uw, &out->unwinder);
	probes_info(s->probes, &out->probes);
	probes_stacks_stats(s->probes, &out->kernel_stacks);
	probes_drain_stats(s->probes, &out->kernel_drains);
	stack_store_stats(s->stacks, &out->stacks);
}

/* --- The end --- */

void session_free(struct session *s)
{
	if (!s)
		return;
	if (s->sigfd >= 0)
		close(s->sigfd);
	if (s->timerfd >= 0)
		close(s->timerfd);
	if (s->ep >= 0)
		close(s->ep);
	if (s->probes)
		proc_release_all(&s->sv, &s->procs);
	tracee_set_free(s->tracees); /* what still runs runs on, untraced */
	probes_close(s->probes);
	procs_free(&s->procs);
	stack_store_free(s->stacks);
	growth_free(&s->growth);
	free(s->execs);
	free(s->first_alloc);
	symbolizer_free(s->sym);
	unwinder_free(s->uw);
	table_cache_close(s->cache);
	target_abort(&s->tgt);
	target_free(&s->tgt);
	free(s);
}
