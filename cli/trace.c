/* The trace command (`dwleak -p PID`, `dwleak -- CMD`) on top of the live
 * session (session/): its options turned into the session's settings,
 * what the session says printed, the poll run until the duration ends,
 * the tree ends or a signal comes, --interval reports, the final report
 * where -o says, --stats, and dwleak's exit status:
 *
 *   checks -> suppressions -> the session (programs loaded) -> the
 *   target (a pid, or the command) -> poll -> final report -> verdict.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "output.h"
#include "preload_env.h"
#include "session.h"
#include "stats.h"
#include "trace_target.h"

/* How long one poll waits for events at most: the longest a deadline, an
 * --interval report or a signal waits to be noticed. */
#define POLL_MS 100

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* The session's messages, on stderr. */
static void say(void *ctx, enum session_level level, const char *text)
{
	(void)ctx;
	fprintf(stderr, "dwleak: %s%s\n", level == SESSION_WARNING ? "warning: " : level == SESSION_NOTE ? "note: " : "",
		text);
}

/* The default rules, then each --suppressions file in order; with --stats,
 * what each file gave (memcheck's files hold suppressions of other kinds,
 * which dwleak passes over). */
static int suppressions_setup(const struct env *env, struct suppressions *supp)
{
	char *err = NULL;
	size_t i, rules, skipped;
	int ret = 0;

	if (!env->no_default_suppressions)
		ret = suppressions_add_defaults(supp);
	for (i = 0; !ret && i < env->nsuppressions; i++) {
		rules = supp->n;
		skipped = supp->skipped;
		ret = suppressions_load(supp, env->suppressions[i], &err);
		if (!ret && env->stats)
			fprintf(stderr,
				"dwleak: stats: suppressions %s: %zu rule(s), %zu memcheck suppression(s) of other "
				"tools or kinds than Memcheck:Leak skipped\n",
				env->suppressions[i], supp->n - rules, supp->skipped - skipped);
	}
	if (ret)
		fprintf(stderr, "dwleak: %s\n", err ? err : strerror(-ret));
	free(err);
	return ret;
}

/* --- Reports --- */

/* What --fail-on-leak counts: every outstanding byte, or with
 * --leak-check what is definitely or indirectly lost (LeakSanitizer's
 * rule: memory globals still hold at exit needs no suppression) and what
 * no check classified, which may be lost as well: a verdict that could
 * not be reached is no pass. */
static uint64_t leaked_bytes(const struct report *r)
{
	if (!r->leak_check.present)
		return r->totals.outstanding_bytes;
	return r->leak_check.kinds[REPORT_LEAK_DEFINITELY_LOST].bytes +
	       r->leak_check.kinds[REPORT_LEAK_INDIRECTLY_LOST].bytes + r->leak_check.unclassified.bytes;
}

/* --stats, after the final report. */
static void stats_say(const struct env *env, const struct session *s, const uint64_t *counters)
{
	const struct procs *ps = session_procs(s);
	struct session_stats st;
	size_t i;

	session_stats(s, &st);
	/* the uprobe sites, for a first process traced with them (a process
	 * with the library is traced at its own two sites) */
	stats_print(stderr, &st.unwinder, &st.probes, ps->n && !ps->v[0]->preload ? &ps->v[0]->alloc : NULL,
		    counters);
	stats_print_stacks(stderr, &st.kernel_stacks, &st.stacks);
	stats_print_drains(stderr, &st.kernel_drains);
	for (i = 0; i < ps->n; i++)
		if (ps->v[i]->rings.drains)
			stats_print_rings(stderr, ps->v[i]->pid, &ps->v[i]->rings);
	for (i = 0; env->leak_check && i < ps->n; i++)
		stats_print_leak_check(stderr, ps->v[i]->pid, &ps->v[i]->check, ps->v[i]->checks,
				       ps->v[i]->checks_changed);
}

/* Writes a report of what is outstanding now to F: the final one (in
 * --format, then --stats), or an --interval one (text).  Returns 0, 1
 * when the final report is over --fail-on-leak, or a negative errno. */
static int report_now(const struct env *env, struct session *s, FILE *f, bool final)
{
	struct session_report sr;
	const struct report *r = &sr.b.r;
	int err = session_report(s, NULL, &sr);

	if (!err) {
		err = report_write(f, final ? env->format : REPORT_FORMAT_TEXT, r, (unsigned int)env->top);
		fflush(f);
	}
	if (final && env->stats)
		stats_say(env, s, sr.counters);
	if (final && env->fail_on_leak && !err && leaked_bytes(r) <= (uint64_t)env->fail_bytes &&
	    r->leak_check.unsure.bytes)
		fprintf(stderr, "dwleak: warning: --fail-on-leak passes, but %llu bytes in %llu blocks were reached "
				"only through memory the allocator held before dwleak attached (its free lists and "
				"caches, or blocks allocated before): they may be lost; run the program under dwleak -- "
				"CMD for an exact verdict\n",
			(unsigned long long)r->leak_check.unsure.bytes, (unsigned long long)r->leak_check.unsure.allocations);
	if (final && env->fail_on_leak && !err && leaked_bytes(r) > (uint64_t)env->fail_bytes) {
		if (r->leak_check.unclassified.bytes)
			fprintf(stderr, "dwleak: %llu bytes in %llu blocks were never classified by a leak check "
					"(the report says why): --fail-on-leak counts them as lost\n",
				(unsigned long long)r->leak_check.unclassified.bytes,
				(unsigned long long)r->leak_check.unclassified.allocations);
		err = 1;
	}
	session_report_free(&sr);
	return err;
}

/* What the preload libraries could not do (sampled allocations they had
 * no room to remember), and with --stats their counters. */
static void preload_say(const struct env *env, const struct session *s)
{
	struct preload_counts c;

	preload_counts_read(session_procs(s), &c);
	if (c.set_full)
		fprintf(stderr, "dwleak: warning: the preload library could not remember %llu sampled allocations "
				"(no memory for its set of sampled blocks): they are not in the report\n",
			(unsigned long long)c.set_full);
	if (env->stats && c.procs)
		fprintf(stderr, "dwleak: stats: %zu process(es) traced at the preload library's sites; in the %zu "
				"still running: %llu calls nested in another allocator call, %llu sampled "
				"allocations not remembered\n", c.procs, c.read, (unsigned long long)c.nested,
			(unsigned long long)c.set_full);
}

/* --- The end --- */

/* How the command ended, said on stderr; with -p, only that it exited. */
static void exit_status_say(const struct session *s)
{
	const struct procs *ps = session_procs(s);
	const struct target *tgt = session_target(s);
	const struct proc *top = ps->n ? ps->v[0] : NULL;
	int st;

	if (!top)
		return;
	if (!top->exited) {
		if (tgt->spawned && tgt->release_fd < 0)
			fprintf(stderr, "dwleak: stopped tracing; %s (pid %d) keeps running\n", top->command,
				top->pid);
		return;
	}
	st = top->exit_status;
	if (!tgt->spawned)
		fprintf(stderr, "dwleak: pid %d (%s) exited; reporting what it never freed\n", top->pid,
			top->command);
	else if (WIFEXITED(st))
		fprintf(stderr, "dwleak: %s exited with status %d\n", tgt->command, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		fprintf(stderr, "dwleak: %s was killed by signal %d (%s)\n", tgt->command, WTERMSIG(st),
			strsignal(WTERMSIG(st)));
}

/* A failing command is never a pass: dwleak exits with its status (128+N
 * for signal N), after the report; 0 when it succeeded (or with -p). */
static int command_status(const struct session *s)
{
	const struct procs *ps = session_procs(s);
	const struct proc *top = ps->n ? ps->v[0] : NULL;

	if (!session_target(s)->spawned || !top || !top->exited)
		return 0;
	if (WIFEXITED(top->exit_status))
		return WEXITSTATUS(top->exit_status);
	if (WIFSIGNALED(top->exit_status))
		return 128 + WTERMSIG(top->exit_status);
	return 0;
}

/* The first untraced process and how many more there are, for the one
 * line that closes a trace with some. */
static const struct proc *first_untraced(const struct session *s, size_t *more)
{
	const struct procs *ps = session_procs(s);
	const struct proc *first = NULL;
	size_t i, n = 0;

	for (i = 0; i < ps->n; i++) {
		if (!ps->v[i]->untraced)
			continue;
		if (!first)
			first = ps->v[i];
		n++;
	}
	*more = n ? n - 1 : 0;
	return first;
}

/*
 * dwleak's exit status, once the report is written.  A command that fails
 * is never a pass: its status (128+N for signal N) wins.  Then
 * --fail-on-leak: 1 when what was traced leaked over the threshold (OVER);
 * else, when part of the tree was not traced, its leaks are unknown and
 * it cannot pass either: 2, with one line saying what and what to do,
 * unless --allow-untraced accepts that.  Without --fail-on-leak there is
 * no verdict to give: 0, and the untraced part said.
 */
static int trace_verdict(const struct env *env, const struct session *s, bool over)
{
	size_t more;
	const struct proc *u = first_untraced(s, &more);
	int status = command_status(s);
	char others[96] = "";

	/* sampled, a process whose check failed has no classified block, and
	 * its sample may hold none that would count: unknown, not a pass */
	if (!u && env->fail_on_leak && env->leak_check && env->sample_bytes && !env->allow_untraced && !status &&
	    !over) {
		const struct procs *ps = session_procs(s);

		for (size_t i = 0; i < ps->n; i++) {
			const struct proc *p = ps->v[i];

			if (p->untraced || !p->check_err || p->check_err == -ESRCH || p->check.done)
				continue;
			fprintf(stderr, "dwleak: --fail-on-leak cannot pass: the leak check of pid %d (%s) failed (%s), "
					"so what it leaked is unknown; give --allow-untraced to accept this\n",
				p->pid, p->command ? p->command : "?",
				p->check.no_index[0] ? p->check.no_index : strerror(-p->check_err));
			return EXIT_USAGE;
		}
	}
	if (!u)
		return status ?: over ? EXIT_LEAK : 0;
	if (more)
		snprintf(others, sizeof(others), ", nor %s %zu more process%s", more == 1 ? "was" : "were", more,
			 more == 1 ? "" : "es");
	if (env->fail_on_leak && !env->allow_untraced && !status && !over) {
		fprintf(stderr, "dwleak: --fail-on-leak cannot pass: pid %d (%s) was not traced (%s)%s, so what %s "
				"leaked is unknown (the report lists each process and why); trace programs built "
				"with symbols or dynamically linked, or give --allow-untraced to accept this\n",
			u->pid, u->command ? u->command : "?", u->untraced, others, more ? "they" : "it");
		return EXIT_USAGE;
	}
	fprintf(stderr, "dwleak: warning: pid %d (%s) was not traced (%s)%s: what %s allocated is not in the "
			"report (which lists each process and why)\n",
		u->pid, u->command ? u->command : "?", u->untraced, others, more ? "they" : "it");
	return status ?: over ? EXIT_LEAK : 0;
}

/* --- The run --- */

/* Polls until the duration ends, the last process exits or a signal
 * comes; --interval reports to STREAM meanwhile. */
static int poll_run(const struct env *env, struct session *s, FILE *stream)
{
	double t0 = session_now_s(), deadline = env->duration_s > 0 ? t0 + env->duration_s : 0;
	double next_report = env->interval_s > 0 ? t0 + env->interval_s : 0, now;
	int alive = 1;

	while (!stop_signal && alive > 0) {
		alive = session_poll(s, POLL_MS);
		if (alive <= 0)
			break;
		now = session_now_s();
		if (next_report && now >= next_report) {
			next_report += env->interval_s;
			report_now(env, s, stream, false);
		}
		if (deadline && now >= deadline)
			break;
	}
	return alive < 0 ? alive : 0;
}

/* The session's settings from the command line's. */
static void settings_of(const struct env *env, struct suppressions *supp, struct session_settings *set)
{
	*set = (struct session_settings){
		.sample_bytes = (uint64_t)env->sample_bytes,
		.mmap = env->mmap,
		.leak_check = env->leak_check,
		.follow_forks = env->follow_forks,
		.no_preload = env->no_preload,
		.no_inject = env->no_inject,
		.unwind = env->unwind,
		.walk_in_process = env->walk_in_process,
		.unwind_name = unwind_mode_name(env->unwind),
		.min_age_ns = (uint64_t)(env->min_age_s * 1e9),
		.growth = env->interval_s > 0,
		.debug_dirs = env->debug_dirs,
		.fetch = &env->fetch,
		.supp = supp,
		.uprobe_session = env->uprobe_session,
		.preempt_guard = env->preempt_guard,
		.bench_no_walk = env->bench_no_walk,
		.stacks_max = env->stacks_max,
		.leak_check_stop = env->leak_check_stop,
	};
}

/* Opens -o (or the standard stream) before anything runs, refusing a
 * binary format on a terminal.  Returns 0 or -1 (said). */
static int output_ready(const struct env *env, FILE *std, struct output *out)
{
	if (output_open(env->output, std, out))
		return -1;
	if (!report_format_is_binary(env->format) || !output_is_terminal(out))
		return 0;
	if (env->output)
		fprintf(stderr, "dwleak: --format %s is binary (gzip-compressed protobuf) and -o %s is a terminal it "
				"would garble: give -o a file name\n", report_format_name(env->format), env->output);
	else
		fprintf(stderr, "dwleak: --format %s is binary (gzip-compressed protobuf) and would garble the "
				"terminal: give -o FILE, or redirect stdout to a file or a pipe\n",
			report_format_name(env->format));
	output_discard(out);
	return -1;
}

int trace_run(const struct env *env)
{
	const struct session_log log = { NULL, say };
	struct suppressions supp = { 0 };
	struct session_settings set;
	struct session *s = NULL;
	int err, werr = 0, ret = EXIT_USAGE;
	struct output out = { 0 };
	FILE *stream;

	/* phase: checks, and a bad suppressions file is a usage error before
	 * anything runs */
	if (!probes_privileged()) {
		fprintf(stderr, "dwleak: needs CAP_BPF and CAP_PERFMON (run as root)\n");
		return EXIT_USAGE;
	}
	/* DEBUGINFOD_URLS is the user's to set: when it is, the report fetches
	 * missing debug information from those servers (report/symbolize.h),
	 * as gdb and valgrind do; unset, as Debian leaves it, nothing is
	 * fetched.  The traced command gets the environment as it was. */
	/* the first SIGINT or SIGTERM asks for the report; without SA_RESTART
	 * a blocking call returns EINTR instead of waiting on; a second one
	 * (SA_RESETHAND) ends dwleak at once: the kernel detaches every
	 * tracee and its links, so nothing is left stopped or probed */
	sigaction(SIGINT, &(struct sigaction){ .sa_handler = on_signal, .sa_flags = SA_RESETHAND }, NULL);
	sigaction(SIGTERM, &(struct sigaction){ .sa_handler = on_signal, .sa_flags = SA_RESETHAND }, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* -- CMD: the command's stdout is the command's (a pipe into jq, a
	 * file it writes): the report goes to stderr, as valgrind's does */
	stream = env->cmd ? stderr : stdout;
	if (output_ready(env, stream, &out))
		return EXIT_USAGE;
	if (suppressions_setup(env, &supp))
		goto out;

	/* phase: the session (its programs), then the target */
	settings_of(env, &supp, &set);
	if (session_new(&set, &log, &s))
		goto out;
	if (env->cmd)
		err = trace_command_check(env) ?: session_spawn(s, env->cmd);
	else
		err = trace_pid_check(env) ?: session_attach(s, (pid_t)env->pid);
	if (err || (!env->cmd && !session_traced(s)))
		goto out; /* said why */

	/* phase: poll */
	err = poll_run(env, s, stream);
	if (err)
		fprintf(stderr, "dwleak: polling failed: %s; reporting what was seen\n", strerror(-err));
	exit_status_say(s);

	/* phase: final report */
	preload_say(env, s);
	err = report_now(env, s, out.f, true);
	if (err >= 0)
		werr = output_commit(&out);
	err = werr ?: err;
	if (err < 0) {
		fprintf(stderr, "dwleak: cannot write the report%s%s: %s\n", env->output ? " to " : "",
			env->output ? env->output : "", strerror(-err));
		goto out;
	}
	ret = trace_verdict(env, s, err == 1);
out:
	output_discard(&out);
	session_free(s);
	suppressions_free(&supp);
	return ret;
}
