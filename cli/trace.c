/* The tracer's lifecycle: the phases of `dwleak -p PID` and `dwleak --
 * CMD`, each a function, wiring the parts that own the state (target/,
 * unwinder/, bpf/probes, the ledger, the report builder):
 *
 *   check -> target (objects, allocator, tables) -> probes (load, fill the
 *   table maps, attach) -> release a started command -> poll (records into
 *   the ledger, table requests, rescans, interval reports, target exit,
 *   signals) -> final report -> cleanup.
 *
 * struct tracer holds the owners; only this file and the other cli/
 * files print. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "allocator.h"
#include "build.h"
#include "ledger.h"
#include "objects.h"
#include "output.h"
#include "probes.h"
#include "report.h"
#include "stats.h"
#include "suppress.h"
#include "symbolize.h"
#include "table_cache.h"
#include "target.h"
#include "trace.h"
#include "trace_names.h"
#include "trace_target.h"
#include "unwinder.h"

#define RESCAN_INTERVAL_S 1.0
#define POLL_MS 100

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* What the probes asked for since the poll loop last looked. */
struct pending {
	bool rescan; /* objects changed: load tables, republish mappings */
	bool resume; /* the target stopped itself until that is done */
};

struct tracer {
	const struct env *env;
	struct target tgt;	    /* the process */
	struct proc_objects objs;   /* its objects in lookup order, its dynamic linker */
	struct allocator alloc;	    /* who provides malloc and operator new, and where */
	struct table_cache *cache;
	struct unwinder *uw;	    /* the objects and their tables */
	struct symbolizer *sym;
	struct probes *probes;	    /* the BPF programs */
	struct ledger ledger;	    /* outstanding allocations */
	struct suppressions supp;
	struct growth growth;	    /* --interval: bytes per stack at the last report */
	struct pending pending;
	double t_start, t_traced;   /* CLOCK_MONOTONIC s: started, probes live */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* bpf_ktime_get_ns's clock */
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static double now_s(void)
{
	return (double)now_ns() / 1e9;
}

/* --- Checks before anything is touched --- */

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

static void on_record(void *ctx, const void *data, size_t size)
{
	struct tracer *tr = ctx;

	ledger_record(&tr->ledger, data, size);
}

static void on_mmap(void *ctx, const struct mmap_event *e)
{
	struct tracer *tr = ctx;

	ledger_mmap(&tr->ledger, e);
}

static void on_objects_changed(void *ctx, uint32_t tgid, bool stopped)
{
	struct tracer *tr = ctx;

	(void)tgid;
	tr->pending.rescan = true;
	tr->pending.resume |= stopped;
}

/* Applies every record the probes have written so far. */
static void records_drain(struct tracer *tr)
{
	tr->ledger.now_ns = now_ns();
	probes_drain(tr->probes);
}

/* Phase: open, configure and load the programs, and fill the table maps. */
static int probes_setup(struct tracer *tr)
{
	const struct env *env = tr->env;
	struct probes_settings set = {
		.pid = tr->tgt.pid,
		.sample_bytes = (uint64_t)env->sample_bytes,
		.mmap = env->mmap,
		.unwind_mode = env->unwind,
		.dl = &tr->objs.dl,
		.stop_at_dl_state = tr->tgt.spawned,
		.session = env->uprobe_session,
		.guard = env->preempt_guard,
		.no_walk = env->bench_no_walk,
	};
	struct probes_events ev = { tr, on_record, on_mmap, on_objects_changed };
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
	err = unwinder_load_pending(tr->uw);
	if (err < 0) {
		fprintf(stderr, "dwleak: cannot load unwind tables into BPF maps: %s\n", strerror(-err));
		return err;
	}
	trace_tables_warn(tr->uw);
	if (!env->cmd && unwinder_publish(tr->uw, tr->tgt.pid, NULL) < 0) {
		fprintf(stderr, "dwleak: cannot read the memory maps of pid %d\n", tr->tgt.pid);
		return -EIO;
	}
	return 0;
}

/* Phase: attach, then let a started command run. */
static int probes_go(struct tracer *tr)
{
	char what[PATH_MAX + 64] = "";
	int no_hook = 0, err;

	err = probes_attach(tr->probes, &tr->alloc, what, sizeof(what), &no_hook);
	if (err) {
		fprintf(stderr, "dwleak: cannot attach %s: %s\n", what, strerror(-err));
		return err;
	}
	if (no_hook)
		fprintf(stderr, "dwleak: warning: cannot probe %s's _dl_debug_state (%s); "
				"libraries loaded later are found by a rescan every %.0f s\n",
			tr->objs.dl.path, strerror(-no_hook), RESCAN_INTERVAL_S);
	if (target_release(&tr->tgt)) {
		fprintf(stderr, "dwleak: cannot start %s\n", tr->env->cmd[0]);
		return -EIO;
	}
	return 0;
}

/* --- Reports --- */

/* Writes a report of what is outstanding now to F: the final one (in
 * --format, then --stats), or an --interval one (text).  Returns 0, 1
 * when the final report is over --fail-on-leak, or a negative errno. */
static int report_now(struct tracer *tr, FILE *f, bool final)
{
	const struct env *env = tr->env;
	static const char *counter_names[CNT_COUNT];
	uint64_t counters[CNT_COUNT], now = now_ns();
	struct ledger_stacks stacks = { 0 };
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
		.lost_records = tr->ledger.oom,
	};
	struct stack_source src;
	struct trace_names names;
	struct built b = { 0 };
	unsigned int i;
	int err;

	for (i = 0; i < CNT_COUNT; i++)
		counter_names[i] = probes_counter_name(i);
	records_drain(tr);
	probes_counters(tr->probes, counters);
	/* counted where the records are applied */
	counters[CNT_FREE_UNKNOWN] = tr->ledger.allocs.free_unknown;
	counters[CNT_REPLACED] = tr->ledger.allocs.replaced;
	counters[CNT_RESIZED] = tr->ledger.allocs.resized;
	err = ledger_aggregate(&tr->ledger, now, (uint64_t)(env->min_age_s * 1e9), o.sample_bytes, &stacks);
	err = err ?: trace_names_open(&names, tr->probes, tr->uw, tr->sym, (uint32_t)tr->tgt.pid, &src);
	err = err ?: build_report(&stacks, &o, &src, &b);
	if (!err) {
		err = report_write(f, final ? env->format : REPORT_FORMAT_TEXT, &b.r, (unsigned int)env->top);
		fflush(f);
	}
	if (final && env->stats) {
		struct unwinder_stats us;
		struct probes_info pi;

		unwinder_stats(tr->uw, &us);
		probes_info(tr->probes, &pi);
		stats_print(stderr, &us, &pi, &tr->alloc, counters);
	}
	if (final && env->fail_on_leak && !err && b.r.totals.outstanding_bytes > (uint64_t)env->fail_bytes)
		err = 1;
	build_free(&b);
	trace_names_free(&names);
	ledger_stacks_free(&stacks);
	return err;
}

/* --- Polling --- */

static void exit_status_say(const struct target *t)
{
	int st = t->exit_status;

	if (t->spawned && !t->exited && t->release_fd < 0)
		fprintf(stderr, "dwleak: stopped tracing; %s (pid %d) keeps running\n", t->command, t->pid);
	if (!t->spawned && t->exited)
		fprintf(stderr, "dwleak: pid %d (%s) exited; reporting what it never freed\n", t->pid, t->command);
	if (!t->spawned || !t->exited)
		return;
	if (WIFEXITED(st))
		fprintf(stderr, "dwleak: %s exited with status %d\n", t->command, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		fprintf(stderr, "dwleak: %s was killed by signal %d (%s)\n", t->command, WTERMSIG(st),
			strsignal(WTERMSIG(st)));
}

/* A failing command is never a pass: dwleak exits with its status (128+N
 * for signal N), after the report; 0 when it succeeded (or with -p). */
static int command_status(const struct target *t)
{
	if (!t->spawned || !t->exited)
		return 0;
	if (WIFEXITED(t->exit_status))
		return WEXITSTATUS(t->exit_status);
	if (WIFSIGNALED(t->exit_status))
		return 128 + WTERMSIG(t->exit_status);
	return 0;
}

/* Phase: poll until the duration ends, the target exits or a signal
 * comes; rescans when objects change, --interval reports. */
static int poll_loop(struct tracer *tr)
{
	const struct env *env = tr->env;
	double deadline = env->duration_s > 0 ? tr->t_traced + env->duration_s : 0;
	double next_report = env->interval_s > 0 ? tr->t_traced + env->interval_s : 0;
	/* a started command maps its libraries right away: look soon, then
	 * back off to the steady interval */
	double scan_every = 0.02;
	double next_scan = tr->t_traced + scan_every;
	double now;
	int err;

	while (!stop_signal) {
		err = probes_poll(tr->probes, next_scan > now_s() + POLL_MS / 1e3 ? POLL_MS : 10);
		if (err < 0 && err != -EINTR)
			return err;
		records_drain(tr); /* alloc_events records come without wakeups */
		now = now_s();
		if (!target_alive(&tr->tgt))
			break;
		if (tr->pending.rescan || now >= next_scan) {
			tr->pending.rescan = false;
			scan_every = scan_every * 2 < RESCAN_INTERVAL_S ? scan_every * 2 : RESCAN_INTERVAL_S;
			next_scan = now + scan_every;
			err = trace_tables_refresh(tr->uw, tr->probes, tr->tgt.pid);
			if (err)
				fprintf(stderr, "dwleak: warning: loading new unwind tables failed: %s\n",
					strerror(-err));
			if (tr->pending.resume) {
				tr->pending.resume = false;
				kill(tr->tgt.pid, SIGCONT);
			}
		}
		if (next_report && now >= next_report) {
			next_report += env->interval_s;
			report_now(tr, stdout, false);
		}
		if (deadline && now >= deadline)
			break;
	}
	return 0;
}

/* --- Lifecycle --- */

static void tracer_cleanup(struct tracer *tr)
{
	probes_close(tr->probes);
	ledger_free(&tr->ledger);
	suppressions_free(&tr->supp);
	growth_free(&tr->growth);
	symbolizer_free(tr->sym);
	unwinder_free(tr->uw);
	table_cache_close(tr->cache);
	if (tr->tgt.spawned && !tr->tgt.exited && tr->tgt.release_fd < 0)
		kill(tr->tgt.pid, SIGCONT); /* never leave it stopped at a _dl_debug_state */
	target_abort(&tr->tgt);
	target_free(&tr->tgt);
	allocator_free(&tr->alloc);
	proc_objects_free(&tr->objs);
}

int trace_run(const struct env *env)
{
	struct tracer tr = { .env = env, .tgt = { .release_fd = -1 } };
	struct unwinder_stats us;
	int err, ret = EXIT_USAGE;
	FILE *out = NULL;

	/* phase: checks, and a bad suppressions file is a usage error before
	 * anything runs */
	if (!probes_privileged()) {
		fprintf(stderr, "dwleak: needs CAP_BPF and CAP_PERFMON (run as root)\n");
		return EXIT_USAGE;
	}
	unsetenv("DEBUGINFOD_URLS"); /* no network lookups behind the user's back */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	tr.t_start = now_s();
	out = output_open(env->output);
	if (!out)
		return EXIT_USAGE;
	if (suppressions_setup(&tr))
		goto out;

	/* phase: target and tables */
	table_cache_open(NULL, &tr.cache);
	err = unwinder_new(tr.cache, env->debug_dirs, &tr.uw);
	err = err ?: symbolizer_new(env->debug_dirs, &tr.sym);
	if (err) {
		fprintf(stderr, "dwleak: cannot set up: %s\n", strerror(-err));
		goto out;
	}
	if (trace_target_setup(env, &tr.tgt, &tr.objs, &tr.alloc, tr.uw))
		goto out;

	/* phase: probes loaded, tables in their maps, attached; the command runs */
	if (probes_setup(&tr) || probes_go(&tr))
		goto out;
	tr.t_traced = now_s();
	unwinder_stats(tr.uw, &us);
	fprintf(stderr, "dwleak: tracing pid %d (%s; %u tables, %.0f ms to attach); Ctrl-C to stop\n",
		tr.tgt.pid, tr.alloc.description, us.loaded, (tr.t_traced - tr.t_start) * 1e3);

	/* phase: poll */
	err = poll_loop(&tr);
	if (err)
		fprintf(stderr, "dwleak: polling failed: %s; reporting what was seen\n", strerror(-err));
	exit_status_say(&tr.tgt);

	/* phase: final report */
	err = report_now(&tr, out, true);
	if (err < 0) {
		fprintf(stderr, "dwleak: cannot write the report: %s\n", strerror(-err));
		goto out;
	}
	ret = command_status(&tr.tgt) ?: (err == 1 ? EXIT_LEAK : 0);
out:
	output_close(out);
	tracer_cleanup(&tr);
	return ret;
}
