/* dwleak agent's run: its parts made in order, one poll loop in one
 * thread over the session's ring buffers, the HTTP server, the watcher
 * and a signalfd, and a clean end that leaves every process running:
 *
 *   checks (root, --report-dir) -> targets resolved -> the session (its
 *   programs loaded) -> the watcher (exec, fork, exit, OOM) -> HTTP bound
 *   -> the members now taken -> "agent listening" -> the loop (SIGHUP:
 *   targets again) -> SIGTERM / SIGINT: HTTP closed, every probe
 *   detached, exit 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "options.h"

/* The longest the loop sleeps: records are drained (the ring wakes the
 * loop only every so many of them), tables rescanned, processes found
 * by the /proc scan at least this often. */
#define LOOP_MAX_MS 250
/* While a process waits in its dynamic linker: how soon it is looked at
 * again (it settles within milliseconds). */
#define PENDING_MS 5
/* How often every traced process's objects are looked at again beside
 * what the dynamic linker's hook announces (the session's default: 1 s). */
#define AGENT_RESCAN_S 10.0
/* Freed memory the agent keeps for its next report: blocks under this size
 * come from the heap (glibc's default mmaps them from 128 KiB, a threshold
 * that rises to 32 MiB as such blocks are freed), and this much free at
 * the heap's top is not given back (default 128 KiB, then twice the mmap
 * threshold). */
#define AGENT_HEAP_KEEP (64 << 20)

void agent_say(const char *fmt, ...)
{
	va_list ap;

	fputs("dwleak: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

double agent_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The session's messages.  Its "tracing pid N" line is for the trace
 * command's scripts; the agent says a line of its own per process. */
static void session_said(void *ctx, enum session_level level, const char *text)
{
	(void)ctx;
	if (level == SESSION_INFO && !strncmp(text, "tracing pid ", 12))
		return;
	fprintf(stderr, "dwleak: %s%s\n",
		level == SESSION_WARNING ? "warning: " : level == SESSION_NOTE ? "note: " : "", text);
}

/*
 * The targets as ENV gives them, resolved now into *OUT.  At the start
 * (RELOAD false) a target that does not resolve is a usage error (said);
 * at SIGHUP it is said and left out, the others kept.  Returns 0 or an
 * exit status.
 */
static int targets_resolve(const struct agent_env *env, bool reload, struct agent_targets **out)
{
	struct agent_targets *t;
	char why[512];
	int err;

	err = agent_targets_new(NULL, &t);
	if (err) {
		agent_say("agent: cannot read the cgroup mounts: %s", strerror(-err));
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < env->ntargets; i++) {
		const struct agent_target_arg *g = &env->targets[i];

		why[0] = '\0';
		switch (g->kind) {
		case AGENT_TARGET_PID:
			err = agent_targets_add_pid(t, (pid_t)atoi(g->text), why, sizeof(why));
			break;
		case AGENT_TARGET_COMM:
			err = agent_targets_add_comm(t, g->text, why, sizeof(why));
			break;
		case AGENT_TARGET_UNIT:
			err = agent_targets_add_unit(t, g->text, why, sizeof(why));
			break;
		default:
			err = agent_targets_add_cgroup(t, g->text, why, sizeof(why));
			break;
		}
		if (err && !reload) {
			fprintf(stderr, "dwleak agent: %s %s: %s\n", agent_target_options[g->kind], g->text,
				why[0] ? why : strerror(-err));
			agent_targets_free(t);
			return EXIT_USAGE;
		}
		if (err)
			agent_say("warning: %s %s left out: %s", agent_target_options[g->kind], g->text,
				  why[0] ? why : strerror(-err));
		else if (why[0] && !reload)
			agent_say("note: %s %s: %s", agent_target_options[g->kind], g->text, why);
	}
	*out = t;
	return 0;
}

/* --report-dir must be a directory the agent can write: said now, not
 * when a process is being killed. */
static int report_dir_check(const char *dir)
{
	struct stat st;

	if (!dir)
		return 0;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "dwleak agent: --report-dir %s: %s\n", dir,
			errno && !S_ISDIR(st.st_mode) ? strerror(errno) : "not a directory");
		return EXIT_USAGE;
	}
	if (access(dir, W_OK | X_OK)) {
		fprintf(stderr, "dwleak agent: --report-dir %s: cannot write there: %s\n", dir, strerror(errno));
		return EXIT_USAGE;
	}
	return 0;
}

/* SIGHUP, SIGTERM and SIGINT as a descriptor of the loop. */
static int signals_open(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* SIGHUP: the targets resolved again (a unit started since, a cgroup made)
 * and their members taken; what is traced stays traced. */
static void reload(struct agent *a)
{
	struct agent_targets *t;

	if (targets_resolve(a->env, true, &t))
		return;
	agent_targets_free(a->targets);
	a->targets = t;
	agent_members_take(a);
	agent_say("agent: targets reloaded (SIGHUP): %zu processes traced, %zu skipped", a->nprocs, a->nskipped);
}

static void signals_run(struct agent *a)
{
	struct signalfd_siginfo si;

	while (read(a->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP)
			reload(a);
		else
			a->stop = true;
	}
}

/* How each kind of event is watched, in one line. */
static void watch_say(const struct agent_watch *w)
{
	struct agent_watch_info wi;

	agent_watch_info_get(w, &wi);
	agent_say("agent: new programs: %s; exits: %s; forks: %s; OOM kills: %s", wi.how[WATCH_EVENT_EXEC],
		  wi.how[WATCH_EVENT_EXIT], wi.how[WATCH_EVENT_FORK], wi.how[WATCH_EVENT_VICTIM]);
}

/* The loop, until SIGTERM or SIGINT.  Returns 0 or a negative errno when
 * a part broke. */
static int loop_run(struct agent *a)
{
	struct pollfd fds[4] = {
		{ .fd = session_fd(a->s), .events = POLLIN },
		{ .fd = agent_http_fd(a->http), .events = POLLIN },
		{ .fd = agent_watch_fd(a->watch), .events = POLLIN },
		{ .fd = a->sigfd, .events = POLLIN },
	};
	int err;

	while (!a->stop) {
		double now = agent_now();
		int timeout = LOOP_MAX_MS, t = agent_http_timeout_ms(a->http);

		if (t >= 0 && t < timeout)
			timeout = t;
		if (a->next_tick - now < timeout / 1000.0)
			timeout = a->next_tick > now ? (int)((a->next_tick - now) * 1000) + 1 : 0;
		if (a->npending && timeout > PENDING_MS)
			timeout = PENDING_MS;
		if (poll(fds, 4, timeout) < 0 && errno != EINTR)
			return -errno;
		signals_run(a);
		/* processes first: an exit's last records are applied by the
		 * session's own drain inside session_exited */
		err = agent_watch_run(a->watch);
		if (err < 0)
			return err;
		err = session_poll(a->s, 0);
		if (err < 0)
			return err;
		agent_pending_run(a);
		if (agent_http_run(a->http))
			return -EIO;
		now = agent_now();
		if (now >= a->next_tick) {
			agent_books_tick(a, now);
			agent_linger_end(a, now);
			a->next_tick = now + a->env->tick_s;
		}
	}
	return 0;
}

/* The session's settings: sampled or exact, at the library's sites or
 * with uprobes; never ptrace (the agent hears of forks, execs and exits
 * from its watcher, and a debugger can still attach); the leak check
 * when every block is traced, or sampled with --leak-check-every (the
 * library then indexes every block, which costs each call a little: not
 * without being asked). */
static void settings_of(const struct agent_env *env, struct session_settings *set)
{
	*set = (struct session_settings){
		.sample_bytes = (uint64_t)env->sample_bytes,
		.leak_check = env->sample_bytes == 0 || env->leak_check_every_s > 0,
		.unwind = UNWIND_MODE_DWARF,
		.unwind_name = "dwarf",
		.walk_in_process = env->walk_process,
		.debug_dirs = env->debug_dirs,
		.exits_from_host = true,
		/* the agent injects itself (agent_life.c), where the way in
		 * is chosen: a failed injection is a skip unless --uprobes */
		.no_inject = true,
		/* the linker's hook announces new objects: a full look at
		 * hundreds of processes' mappings every second is what an idle
		 * agent would spend its time on */
		.rescan_s = AGENT_RESCAN_S,
		.uprobe_session = -1,
		.preempt_guard = -1,
	};
}

int agent_run(const struct agent_env *env)
{
	static const double pause_bounds[] = AGENT_PAUSE_BOUNDS;
	const struct session_log log = { NULL, session_said };
	struct agent_watch_callbacks cb;
	struct agent_watch_settings ws = { 0 };
	struct agent_http_config hc = { .listen = env->listen, .token_file = env->token_file };
	struct agent_http_handlers h;
	struct agent a = { .env = env, .sigfd = -1, .inject = !env->no_inject };
	char why[512];
	int err, ret = EXIT_USAGE;

	/* A scrape builds a report of every stack in fresh memory (10,000
	 * stacks: ~24 MiB of frames and encoding) and frees it; glibc would
	 * give it back to the kernel each time (mmap'd chunks, or the heap's
	 * top trimmed), and the next scrape fault it in again, 6,000 page
	 * faults, a quarter of a scrape's CPU here.  Up to AGENT_HEAP_KEEP of
	 * freed memory stays in the heap instead, for the next report: the
	 * agent's RSS includes it (bench/run_agent_bench.sh measures both). */
	mallopt(M_MMAP_THRESHOLD, AGENT_HEAP_KEEP);
	mallopt(M_TRIM_THRESHOLD, AGENT_HEAP_KEEP);

	/* phase: checks */
	if (!probes_privileged()) {
		fprintf(stderr, "dwleak: needs CAP_BPF and CAP_PERFMON (run as root)\n");
		return EXIT_USAGE;
	}
	unsetenv("DEBUGINFOD_URLS"); /* no network lookups behind the user's back */
	if (report_dir_check(env->report_dir) || targets_resolve(env, false, &a.targets))
		return EXIT_USAGE;
	a.pause = (struct agent_histogram){ pause_bounds, AGENT_PAUSE_NBOUNDS, a.pause_counts, 0 };
	a.sigfd = signals_open();
	if (a.sigfd < 0) {
		agent_say("agent: cannot take signals: %s", strerror(errno));
		goto out;
	}

	/* phase: the session, its programs loaded */
	settings_of(env, &a.set);
	if (session_new(&a.set, &log, &a.s))
		goto out; /* said why */
	session_poll(a.s, 0); /* its wakeups made: session_fd() is valid from here */

	/* phase: the watcher, before the members are listed, so that a
	 * process starting meanwhile is heard of */
	cb = (struct agent_watch_callbacks){ .ctx = &a, .exec = agent_on_exec, .exit = agent_on_exit,
					     .victim = agent_on_victim, .fork = agent_on_fork };
	err = agent_watch_open(&ws, &cb, &a.watch, why, sizeof(why));
	if (err) {
		agent_say("agent: cannot watch processes: %s", why);
		goto out;
	}
	watch_say(a.watch);

	/* phase: HTTP */
	agent_routes_init(&a, &h);
	err = agent_http_open(&hc, &h, &a.http, why, sizeof(why));
	if (err) {
		fprintf(stderr, "dwleak agent: %s\n", why);
		goto out;
	}

	/* phase: what runs now */
	agent_members_take(&a);
	if (!env->report_dir)
		agent_say("note: agent: no --report-dir: an OOM kill of a traced process is logged, no report written");
	agent_say("agent listening on %s (%zu processes traced, %zu skipped; %s)", agent_http_address(a.http),
		  a.nprocs, a.nskipped, env->sample_bytes ? "sampled" : "every allocation traced");
	if (env->sample_bytes)
		agent_say("agent: one allocation per %lld bytes sampled on average; SIGHUP reloads the targets, "
			  "SIGTERM detaches", env->sample_bytes);

	/* phase: the loop */
	a.next_tick = agent_now() + env->tick_s;
	err = loop_run(&a);
	if (err) {
		agent_say("agent: stopped: %s", strerror(-err));
		goto out;
	}
	ret = 0;
out:
	/* detach: the HTTP server first (no request sees a half-freed
	 * session), then every probe; what runs runs on */
	agent_http_close(a.http);
	agent_watch_close(a.watch);
	if (!ret)
		agent_say("agent: detached from %zu processes, which run on", a.nprocs);
	agent_procs_free(&a); /* their reports' names are the symbolizer's */
	session_free(a.s);
	agent_targets_free(a.targets);
	if (a.sigfd >= 0)
		close(a.sigfd);
	return ret;
}
