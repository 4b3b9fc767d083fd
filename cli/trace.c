/* The tracer's lifecycle: the phases of `dwleak -p PID` and `dwleak --
 * CMD`, each a function, wiring the parts that own the state (target/,
 * unwinder/, bpf/probes, the processes and their ledgers, the report
 * builder):
 *
 *   checks -> probes loaded (no process yet) -> the target: a pid probed
 *   where it runs, or a command forked, held, seized with ptrace and
 *   released -> poll (records into each process's ledger; forks, execs,
 *   the linker's stops and exits through trace_procs.c; rescans;
 *   interval reports; signals) -> final report -> cleanup.
 *
 * struct tracer (tracer.h) holds the owners; only cli/ prints. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "leak_scan.h"
#include "ledger.h"
#include "output.h"
#include "stats.h"
#include "trace_names.h"
#include "trace_preload.h"
#include "trace_procs.h"
#include "trace_target.h"
#include "tracer.h"

#define RESCAN_INTERVAL_S 1.0
#define POLL_MS 100

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

uint64_t tracer_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* bpf_ktime_get_ns's clock */
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

double tracer_now_s(void)
{
	return (double)tracer_now_ns() / 1e9;
}

static int suppressions_setup(struct tracer *tr)
{
	char *err = NULL;
	int ret = 0;

	if (!tr->env->no_default_suppressions)
		ret = suppressions_add_defaults(&tr->supp);
	if (!ret && tr->env->suppressions)
		ret = suppressions_load(&tr->supp, tr->env->suppressions, &err);
	if (ret)
		fprintf(stderr, "dwleak: %s\n", err ? err : strerror(-ret));
	free(err);
	return ret;
}

/* --- The probes' events --- */

static uint64_t records_now; /* when the records being applied were drained */

static void on_record(void *ctx, const void *data, size_t size)
{
	const struct free_event *f = data;
	struct tracer *tr = ctx;
	struct proc *p;

	if (size < sizeof(*f) || !(p = procs_find(&tr->procs, (pid_t)f->tgid)))
		return;
	p->ledger.now_ns = records_now;
	ledger_record(&p->ledger, data, size);
}

static void on_mmap(void *ctx, const struct mmap_event *e)
{
	struct tracer *tr = ctx;
	struct proc *p = procs_find(&tr->procs, (pid_t)e->tgid);

	if (p)
		ledger_mmap(&p->ledger, e);
}

static void on_objects_changed(void *ctx, uint32_t tgid, bool stopped)
{
	struct tracer *tr = ctx;
	struct proc *p = procs_find(&tr->procs, (pid_t)tgid);

	/* a stop is handled when ptrace reports it (TRACEE_STOP_ASKED) */
	(void)stopped;
	if (p)
		p->refresh = true;
}

static void on_exiting(void *ctx, uint32_t tgid)
{
	struct tracer *tr = ctx;
	struct proc *p = procs_find(&tr->procs, (pid_t)tgid);

	if (p)
		p->exit_called = true;
}

/* Applies every record the probes have written so far. */
static void records_drain(struct tracer *tr)
{
	records_now = tracer_now_ns();
	probes_drain(tr->probes);
}

static void records_drain_cb(void *ctx)
{
	records_drain(ctx);
}

/* --leak-check of P now (WHEN says at what moment, for messages);
 * STOPPED: P is stopped already, in its exit. */
static void leak_check(struct tracer *tr, struct proc *p, const char *when, bool stopped)
{
	int err;

	if (!tr->env->leak_check || p->not_followed || !p->probed)
		return;
	err = leak_scan_process(p->exited ? NULL : tr->tracees, p, stopped, records_drain_cb, tr, &p->check);
	if (err && err != -ESRCH)
		fprintf(stderr, "dwleak: warning: the leak check of pid %d (%s) %s failed: %s%s\n", p->pid, p->command,
			when, strerror(-err),
			err == -EPERM ? " (another tracer, a debugger, holds it: see TracerPid in /proc/PID/status)" : "");
	/* what makes a verdict less sure is said, not only counted */
	if (!err && p->check.read.unreadable_bytes)
		fprintf(stderr, "dwleak: warning: the leak check of pid %d (%s) could not read %llu bytes of its "
				"memory: a pointer held only there was missed, so blocks may be called lost "
				"that are not (--stats has the details)\n",
			p->pid, p->command, (unsigned long long)p->check.read.unreadable_bytes);
	if (!err && p->check.scan.overlapping)
		fprintf(stderr, "dwleak: warning: the leak check of pid %d (%s) found %llu blocks overlapping "
				"others: frees were missed (dropped events?), each lower block was cut short\n",
			p->pid, p->command, (unsigned long long)p->check.scan.overlapping);
}

/* Phase: open, configure and load the programs and the tables known now. */
static int probes_setup(struct tracer *tr)
{
	const struct env *env = tr->env;
	struct probes_settings set = {
		.sample_bytes = (uint64_t)env->sample_bytes,
		.mmap = env->mmap,
		.unwind_mode = env->unwind,
		.session = env->uprobe_session,
		.guard = env->preempt_guard,
		.no_walk = env->bench_no_walk,
		.preload = !env->no_preload,
	};
	struct probes_events ev = { tr, on_record, on_mmap, on_objects_changed, on_exiting };
	struct unwinder_maps maps;
	int err;

	unwinder_needs(tr->uw, &set.rows, &set.rules);
	err = probes_open(&set, &ev, &tr->probes);
	if (err) {
		fprintf(stderr, "dwleak: cannot load the BPF program: %s; the kernel needs BTF, "
				"BPF and uprobes (run with DWLEAK_DEBUG=1 to see the verifier)\n",
			strerror(-err));
		return err;
	}
	probes_unwinder_maps(tr->probes, &maps);
	unwinder_set_maps(tr->uw, &maps);
	err = probes_attach_syscalls(tr->probes);
	if (err)
		fprintf(stderr, "dwleak: cannot attach to the syscall tracepoints for --mmap: %s; "
				"the kernel needs BTF raw tracepoints\n", strerror(-err));
	return err;
}

/* Phase: the target.  -p: probed where it runs (and seized, to follow its
 * forks); -- CMD: forked, held before its execve, seized, released: its
 * exec is the first event the poll loop handles. */
static int target_start(struct tracer *tr)
{
	const struct env *env = tr->env;
	struct tracee_options to = { .follow = env->follow_forks, .exit_stops = env->leak_check };
	int err;

	if ((env->cmd || env->follow_forks) && (err = tracee_set_new(&to, &tr->tracees)))
		return err;
	if (!env->cmd) {
		err = trace_pid_check(env) ?: target_attach(&tr->tgt, (pid_t)env->pid);
		if (!err && tr->tracees && (err = tracee_seize_process(tr->tracees, (pid_t)env->pid)))
			fprintf(stderr, "dwleak: cannot follow pid %ld's forks with ptrace: %s%s\n", env->pid,
				strerror(-err), err == -EPERM ? " (is a debugger attached? see TracerPid in "
								"/proc/PID/status)" : "");
		return err ?: proc_attach_running(tr, (pid_t)env->pid);
	}
	err = trace_command_check(env);
	if (!err) {
		char **envp = trace_preload_environ(env); /* LD_PRELOAD: the library first */

		err = target_spawn(&tr->tgt, env->cmd, envp);
		trace_preload_environ_free(envp);
	}
	if (err)
		return err;
	if (!procs_add(&tr->procs, tr->tgt.pid, 0))
		return -ENOMEM;
	tr->procs.v[0]->command = strdup(tr->tgt.command);
	err = tracee_seize_thread(tr->tracees, tr->tgt.pid, tr->tgt.pid);
	if (err) {
		fprintf(stderr, "dwleak: cannot follow %s with ptrace: %s (kernel.yama.ptrace_scope=3 forbids "
				"it)\n", env->cmd[0], strerror(-err));
		return err;
	}
	if (target_release(&tr->tgt)) {
		fprintf(stderr, "dwleak: cannot start %s\n", env->cmd[0]);
		return -EIO;
	}
	return 0;
}

/* --- Reports --- */

/* What --fail-on-leak counts: every outstanding byte, or with
 * --leak-check only what is definitely or indirectly lost (LeakSanitizer's
 * rule: memory globals still hold at exit needs no suppression). */
static uint64_t leaked_bytes(const struct report *r)
{
	if (!r->leak_check.present)
		return r->totals.outstanding_bytes;
	return r->leak_check.kinds[REPORT_LEAK_DEFINITELY_LOST].bytes +
	       r->leak_check.kinds[REPORT_LEAK_INDIRECTLY_LOST].bytes;
}

/* Adds process check C's memory read, pause and RSS account to O. */
static void leak_check_totals(struct build_opts *o, const struct leak_scan_result *c)
{
	static const enum report_rss_part part_of[PROC_RSS_PART_COUNT] = {
		[PROC_RSS_TRACKED] = REPORT_RSS_TRACKED_BLOCKS,
		[PROC_RSS_HEAP_UNTRACKED] = REPORT_RSS_ALLOCATOR_UNTRACKED,
		[PROC_RSS_STACKS] = REPORT_RSS_STACKS,
		[PROC_RSS_CODE] = REPORT_RSS_CODE_AND_DATA,
		[PROC_RSS_DATA] = REPORT_RSS_CODE_AND_DATA,
		[PROC_RSS_OTHER] = REPORT_RSS_OTHER_MAPPINGS,
	};
	size_t k;

	if (!c->done)
		return;
	o->scanned_bytes += c->scanned_bytes;
	if (c->pause_ms > o->pause_ms)
		o->pause_ms = c->pause_ms; /* the longest any process was stopped */
	if (!c->rss_known)
		return;
	o->rss.present = true;
	o->rss.rss_bytes += c->rss.rss;
	for (k = 0; k < PROC_RSS_PART_COUNT; k++)
		o->rss.parts[part_of[k]] += c->rss.bytes[k];
}

/* Writes a report of what is outstanding now to F: the final one (in
 * --format, then --stats), or an --interval one (text).  Returns 0, 1
 * when the final report is over --fail-on-leak, or a negative errno. */
static int report_now(struct tracer *tr, FILE *f, bool final)
{
	const struct env *env = tr->env;
	static const char *counter_names[CNT_COUNT];
	uint64_t counters[CNT_COUNT] = { 0 }, now = tracer_now_ns();
	size_t n = tr->procs.n, i;
	struct ledger_stacks *stacks = calloc(n + 1, sizeof(*stacks));
	struct trace_names *names = calloc(n + 1, sizeof(*names));
	struct stack_source *srcs = calloc(n + 1, sizeof(*srcs));
	struct build_proc *bps = calloc(n + 1, sizeof(*bps));
	struct build_opts o = {
		.pid = tr->tgt.pid,
		.command = tr->tgt.command,
		.unwind_mode = env->unwind,
		.unwind_name = unwind_mode_name(env->unwind),
		.sample_bytes = (uint64_t)env->sample_bytes,
		.now_s = (double)now / 1e9,
		.now_ns = now,
		.duration_s = (double)now / 1e9 - tr->t_traced,
		.growth = env->interval_s > 0 ? &tr->growth : NULL,
		.supp = &tr->supp,
		.counters = counters,
		.counter_names = counter_names,
	};
	struct built b = { 0 };
	int err = stacks && names && srcs && bps ? 0 : -ENOMEM;

	for (i = 0; i < CNT_COUNT; i++)
		counter_names[i] = probes_counter_name((unsigned int)i);
	/* --leak-check: the processes still running are checked now (those
	 * gone were checked when they exited) */
	for (i = 0; i < n; i++)
		if (!tr->procs.v[i]->exited)
			leak_check(tr, tr->procs.v[i], "before the report", false);
	records_drain(tr);
	probes_counters(tr->probes, counters);
	o.leak_check = env->leak_check;
	for (i = 0; env->leak_check && i < n; i++)
		leak_check_totals(&o, &tr->procs.v[i]->check);
	for (i = 0; !err && i < n; i++) {
		struct proc *p = tr->procs.v[i];

		/* counted where the records are applied */
		counters[CNT_FREE_UNKNOWN] += p->ledger.allocs.free_unknown;
		counters[CNT_REPLACED] += p->ledger.allocs.replaced;
		counters[CNT_RESIZED] += p->ledger.allocs.resized;
		o.lost_records += p->ledger.oom;
		err = ledger_aggregate(&p->ledger, now, (uint64_t)(env->min_age_s * 1e9), o.sample_bytes, &stacks[i]);
		err = err ?: trace_names_open(&names[i], tr->probes, tr->uw, tr->sym, (uint32_t)p->pid, &srcs[i]);
		bps[i] = (struct build_proc){ p->pid, p->command, &stacks[i], &srcs[i], p->parent,
					      p->not_followed ? REPORT_PROCESS_NOT_FOLLOWED
					      : p->exited     ? REPORT_PROCESS_ENDED
							      : REPORT_PROCESS_RUNNING,
					      p->exit_status, p->not_followed };
	}
	err = err ?: build_report(bps, n, &o, &b);
	if (!err) {
		err = report_write(f, final ? env->format : REPORT_FORMAT_TEXT, &b.r, (unsigned int)env->top);
		fflush(f);
	}
	if (final && env->stats) {
		struct unwinder_stats us;
		struct probes_info pi;

		unwinder_stats(tr->uw, &us);
		probes_info(tr->probes, &pi);
		/* the uprobe sites, for a first process traced with them (a
		 * process with the library is traced at its own two sites) */
		stats_print(stderr, &us, &pi, n && !tr->procs.v[0]->preload ? &tr->procs.v[0]->alloc : NULL,
			    counters);
		for (i = 0; env->leak_check && i < n; i++)
			stats_print_leak_check(stderr, tr->procs.v[i]->pid, &tr->procs.v[i]->check);
	}
	if (final && env->fail_on_leak && !err && leaked_bytes(&b.r) > (uint64_t)env->fail_bytes)
		err = 1;
	build_free(&b);
	for (i = 0; names && stacks && i < n; i++) {
		trace_names_free(&names[i]);
		ledger_stacks_free(&stacks[i]);
	}
	free(stacks);
	free(names);
	free(srcs);
	free(bps);
	return err;
}

/* --- Polling --- */

/* How the command ended, said on stderr; with -p, only that it exited. */
static void exit_status_say(const struct tracer *tr)
{
	const struct proc *top = tr->procs.n ? tr->procs.v[0] : NULL;
	int st;

	if (!top)
		return;
	if (!top->exited) {
		if (tr->tgt.spawned && tr->tgt.release_fd < 0)
			fprintf(stderr, "dwleak: stopped tracing; %s (pid %d) keeps running\n", top->command,
				top->pid);
		return;
	}
	st = top->exit_status;
	if (!tr->tgt.spawned)
		fprintf(stderr, "dwleak: pid %d (%s) exited; reporting what it never freed\n", top->pid,
			top->command);
	else if (WIFEXITED(st))
		fprintf(stderr, "dwleak: %s exited with status %d\n", tr->tgt.command, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		fprintf(stderr, "dwleak: %s was killed by signal %d (%s)\n", tr->tgt.command, WTERMSIG(st),
			strsignal(WTERMSIG(st)));
}

/*
 * With -- CMD, when tracing ended because the command itself was let go
 * (nothing in it can be traced: a static program without symbols), waits
 * for it to end: dwleak -- CMD then ends when CMD does and exits with its
 * status, as CMD alone would (a CI job must not pass, and go on, while a
 * static test binary runs and fails).  Not with --duration, which bounds
 * dwleak's run, nor after Ctrl-C or SIGTERM, which also end the wait.
 */
static void command_wait(struct tracer *tr)
{
	struct proc *top = tr->procs.n ? tr->procs.v[0] : NULL;
	int st;

	if (!tr->tgt.spawned || !top || top->exited || !top->not_followed || tr->env->duration_s > 0)
		return;
	/* it may have ended already, reaped by a wait for the tracees */
	if (tr->tracees && tracee_reaped(tr->tracees, top->pid, &st)) {
		top->exited = true;
		top->exit_status = st;
		return;
	}
	while (!stop_signal) {
		pid_t r = waitpid(top->pid, &st, 0); /* our child, untraced now */

		if (r == top->pid) {
			top->exited = true;
			top->exit_status = st;
			return;
		}
		if (r < 0 && errno != EINTR)
			return;
	}
}

/* A failing command is never a pass: dwleak exits with its status (128+N
 * for signal N), after the report; 0 when it succeeded (or with -p). */
static int command_status(const struct tracer *tr)
{
	const struct proc *top = tr->procs.n ? tr->procs.v[0] : NULL;

	if (!tr->tgt.spawned || !top || !top->exited)
		return 0;
	if (WIFEXITED(top->exit_status))
		return WEXITSTATUS(top->exit_status);
	if (WIFSIGNALED(top->exit_status))
		return 128 + WTERMSIG(top->exit_status);
	return 0;
}

/* Handles what ptrace reports until nothing is pending.  Returns 0, or a
 * negative errno when dwleak cannot go on. */
static int tracee_events(struct tracer *tr)
{
	struct tracee_event ev;
	struct proc *p;
	int ret, err = 0;

	while (!err && (ret = tracee_next(tr->tracees, &ev)) > 0) {
		switch (ev.kind) {
		case TRACEE_FORK:
			err = proc_on_fork(tr, ev.pid, ev.child, ev.vfork);
			if (procs_find(&tr->procs, ev.child) && !procs_find(&tr->procs, ev.child)->not_followed)
				tracee_resume(tr->tracees, ev.child);
			tracee_resume(tr->tracees, ev.tid);
			break;
		case TRACEE_EXEC:
			records_drain(tr); /* the old image's, dropped with it */
			err = proc_on_exec(tr, ev.pid);
			tracee_resume(tr->tracees, ev.tid);
			break;
		case TRACEE_STOP_ASKED:
			records_drain(tr); /* and the events: which stop this is */
			p = procs_find(&tr->procs, ev.pid);
			if (p && p->exit_called && !p->check.done)
				leak_check(tr, p, "at exit()", true);
			else
				err = proc_on_linker_stop(tr, ev.pid);
			tracee_resume(tr->tracees, ev.tid);
			break;
		case TRACEE_EXITING:
			/* exiting without exit() (_exit, a signal): the memory is
			 * still there, if not every thread's registers */
			p = procs_find(&tr->procs, ev.pid);
			if (p && !p->check.done)
				leak_check(tr, p, "as it exits", true);
			tracee_resume(tr->tracees, ev.tid);
			break;
		case TRACEE_EXIT:
			records_drain(tr); /* its last records, before its pid can be reused */
			proc_on_exit(tr, ev.pid, ev.status);
			break;
		default:
			tracee_resume(tr->tracees, ev.tid);
		}
	}
	return err ?: (ret < 0 ? ret : 0);
}

/* True while something is left to trace. */
static bool tree_alive(struct tracer *tr)
{
	struct proc *top = tr->procs.n ? tr->procs.v[0] : NULL;

	if (tr->tracees)
		return procs_alive(&tr->procs) > 0;
	if (top && !top->exited && kill(top->pid, 0) && errno == ESRCH)
		top->exited = true;
	return top && !top->exited;
}

/* Loads tables where objects changed, or everywhere when ALL. */
static void tables_refresh(struct tracer *tr, bool all)
{
	size_t i;
	int err;

	for (i = 0; i < tr->procs.n; i++) {
		struct proc *p = tr->procs.v[i];

		if (p->exited || p->not_followed || !(p->refresh || all))
			continue;
		p->refresh = false;
		err = proc_tables_refresh(tr, p);
		if (err)
			fprintf(stderr, "dwleak: warning: loading new unwind tables for pid %d failed: %s\n", p->pid,
				strerror(-err));
	}
}

/* An epoll set of the probes' events and, when following, SIGCHLD (a
 * tracee stopped or exited: it waits for us, so no timer delay). */
static int wakeups_open(struct tracer *tr, int *sigfd)
{
	struct epoll_event e = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC);
	sigset_t chld;

	*sigfd = -1;
	if (ep < 0)
		return -errno;
	e.data.fd = probes_epoll_fd(tr->probes);
	if (epoll_ctl(ep, EPOLL_CTL_ADD, e.data.fd, &e))
		goto fail;
	if (tr->tracees) {
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		*sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
		e.data.fd = *sigfd;
		if (*sigfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, *sigfd, &e))
			goto fail;
	}
	return ep;
fail:
	if (*sigfd >= 0)
		close(*sigfd);
	close(ep);
	return -errno;
}

/* Phase: poll until the duration ends, the last process exits or a signal
 * comes; rescans when objects change, --interval reports. */
static int poll_loop(struct tracer *tr)
{
	const struct env *env = tr->env;
	double t0 = tracer_now_s(), deadline = env->duration_s > 0 ? t0 + env->duration_s : 0;
	double next_report = env->interval_s > 0 ? t0 + env->interval_s : 0;
	double next_scan = t0 + RESCAN_INTERVAL_S, now;
	struct epoll_event evs[4];
	struct signalfd_siginfo si;
	int ep, sigfd, err = 0;

	ep = wakeups_open(tr, &sigfd);
	if (ep < 0)
		return ep;
	while (!stop_signal && !err) {
		if (epoll_wait(ep, evs, 4, POLL_MS) < 0 && errno != EINTR) {
			err = -errno;
			break;
		}
		while (sigfd >= 0 && read(sigfd, &si, sizeof(si)) == sizeof(si))
			;
		probes_poll(tr->probes, 0);
		records_drain(tr); /* alloc_events records come without wakeups */
		if (tr->tracees)
			err = tracee_events(tr);
		now = tracer_now_s();
		tables_refresh(tr, now >= next_scan);
		if (now >= next_scan)
			next_scan = now + RESCAN_INTERVAL_S;
		if (!tree_alive(tr))
			break;
		if (next_report && now >= next_report) {
			next_report += env->interval_s;
			report_now(tr, stdout, false);
		}
		if (deadline && now >= deadline)
			break;
	}
	if (sigfd >= 0)
		close(sigfd);
	close(ep);
	return err;
}

/* --- Lifecycle --- */

static void tracer_cleanup(struct tracer *tr)
{
	size_t i;

	for (i = 0; tr->probes && i < tr->procs.n; i++)
		probes_proc_remove(tr->probes, &tr->procs.v[i]->pp);
	tracee_set_free(tr->tracees); /* what still runs runs on, untraced */
	probes_close(tr->probes);
	procs_free(&tr->procs);
	suppressions_free(&tr->supp);
	growth_free(&tr->growth);
	free(tr->first_alloc);
	symbolizer_free(tr->sym);
	unwinder_free(tr->uw);
	table_cache_close(tr->cache);
	target_abort(&tr->tgt);
	target_free(&tr->tgt);
}

int trace_run(const struct env *env)
{
	struct tracer tr = { .env = env, .tgt = { .release_fd = -1 } };
	int err, werr = 0, ret = EXIT_USAGE;
	struct output out;
	sigset_t chld;

	/* phase: checks, and a bad suppressions file is a usage error before
	 * anything runs */
	if (!probes_privileged()) {
		fprintf(stderr, "dwleak: needs CAP_BPF and CAP_PERFMON (run as root)\n");
		return EXIT_USAGE;
	}
	unsetenv("DEBUGINFOD_URLS"); /* no network lookups behind the user's back */
	/* the first SIGINT or SIGTERM asks for the report; without SA_RESTART
	 * a blocking call returns EINTR instead of waiting on; a second one
	 * (SA_RESETHAND) ends dwleak at once: the kernel detaches every
	 * tracee and its links, so nothing is left stopped or probed */
	sigaction(SIGINT, &(struct sigaction){ .sa_handler = on_signal, .sa_flags = SA_RESETHAND }, NULL);
	sigaction(SIGTERM, &(struct sigaction){ .sa_handler = on_signal, .sa_flags = SA_RESETHAND }, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* tracees' stops come as SIGCHLD, read from a signalfd */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	tr.t_start = tracer_now_s();
	if (output_open(env->output, &out))
		return EXIT_USAGE;
	if (suppressions_setup(&tr))
		goto out;

	/* phase: the programs, then the target */
	if (table_cache_open(NULL, &tr.cache))
		fprintf(stderr, "dwleak: warning: not using the table cache: %s\n", table_cache_why());
	err = unwinder_new(tr.cache, env->debug_dirs, &tr.uw);
	err = err ?: symbolizer_new(env->debug_dirs, &tr.sym);
	if (err) {
		fprintf(stderr, "dwleak: cannot set up: %s\n", strerror(-err));
		goto out;
	}
	if (probes_setup(&tr) || target_start(&tr))
		goto out;
	if (!env->cmd && !tr.announced)
		goto out; /* -p: the process could not be probed (said why) */

	/* phase: poll */
	err = poll_loop(&tr);
	if (err)
		fprintf(stderr, "dwleak: polling failed: %s; reporting what was seen\n", strerror(-err));
	if (!tr.t_traced)
		tr.t_traced = tr.t_start;
	command_wait(&tr);
	exit_status_say(&tr);

	/* phase: final report */
	trace_preload_say(&tr);
	err = report_now(&tr, out.f, true);
	if (err >= 0)
		werr = output_commit(&out);
	err = werr ?: err;
	if (err < 0) {
		fprintf(stderr, "dwleak: cannot write the report%s%s: %s\n", env->output ? " to " : "",
			env->output ? env->output : "", strerror(-err));
		goto out;
	}
	ret = command_status(&tr) ?: (err == 1 ? EXIT_LEAK : 0);
out:
	output_discard(&out);
	tracer_cleanup(&tr);
	return ret;
}
