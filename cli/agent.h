/* `dwleak agent`: the long-running service that joins the agent's parts
 * (agent/: HTTP, metrics, targets, the exec/exit/fork/OOM watcher, the
 * stack table, the growth history) to one live session.  Its files:
 *
 *   cmd_agent.c     the command line (struct agent_env) and --help
 *   agent_run.c     setup, the one poll loop in one thread, signals, the end
 *   agent_life.c    processes coming and going: how each is reached (or why
 *                   not), attached, exec'd, forked, ended, forgotten
 *   agent_books.c   what the agent keeps per process between reports (the
 *                   peak, the growth history, leak checks) and its reports,
 *                   the least recently grown stacks past --max-stacks
 *                   folded into [evicted]
 *   agent_routes.c  the HTTP routes: pprof, /report, /metrics, /leak-check
 *   agent_oom.c     the report written when the OOM killer picks a process
 *
 * Only this command prints: the session's messages come through its
 * struct session_log, the agent/ layer's as return values and WHY text. */
#ifndef DWLEAK_CLI_AGENT_H
#define DWLEAK_CLI_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "history.h"
#include "http.h"
#include "metrics.h"
#include "proc_watch.h"
#include "session.h"
#include "targets.h"

/* The agent's defaults (SPEC.md, "Agent", where it says). */
#define AGENT_SAMPLE_BYTES_DEFAULT 524288
#define AGENT_MAX_STACKS_DEFAULT 10000

/* One --pid/--comm/--unit/--cgroup as given. */
struct agent_target_arg {
	enum agent_target_kind kind;
	const char *text;
};

/* The agent's settings, each with its default (cmd_agent.c). */
struct agent_env {
	struct agent_target_arg *targets; /* in the order given (malloc'd array) */
	size_t ntargets;
	const char *listen;	      /* --listen: AGENT_HTTP_LISTEN_DEFAULT */
	const char *token_file;	      /* --auth-token-file: NULL = none */
	const char *report_dir;	      /* --report-dir: NULL = OOM kills only logged */
	long long sample_bytes;	      /* --sample-bytes: AGENT_SAMPLE_BYTES_DEFAULT */
	bool uprobes;		      /* --uprobes: trace processes without the library */
	bool no_inject;		      /* --no-inject: never load the library into a process */
	bool walk_process;	      /* --walk process: in the processes' own rings */
	double leak_check_every_s;    /* --leak-check-every: 0 = only when asked */
	long long max_stacks;	      /* --max-stacks: per process; 0 = no bound */
	const char **debug_dirs;      /* --debug-dir, NULL-terminated (may be NULL) */
	size_t ndebug_dirs;
	/* knobs for tests and bench/ (environment, see cmd_agent.c) */
	double tick_s;		      /* DWLEAK_AGENT_TICK_S: the books are looked at (1) */
	double history_s;	      /* DWLEAK_AGENT_HISTORY_S: a growth snapshot every (30) */
	double linger_s;	      /* DWLEAK_AGENT_LINGER_S: an ended process stays at most (120) */
	double peak_every_s;	      /* DWLEAK_AGENT_PEAK_S: a new peak snapshot at most every (10) */
};

/* How a process is reached (agent_way_in). */
enum agent_way {
	AGENT_WAY_PRELOAD, /* at its preload library's sites */
	AGENT_WAY_INJECT,  /* the library loaded into it first (session_inject), then its sites */
	AGENT_WAY_UPROBES, /* uprobes on its allocator (--uprobes) */
	AGENT_WAY_SKIP,	   /* not traced: the reason says why */
};

/* A peak snapshot: the process's aggregated stacks (dense: every slot
 * used, the most recently grown --max-stacks of them) when its total was
 * the highest seen at a snapshot, and what did not fit. */
struct agent_peak {
	struct ledger_stack *st;
	size_t n;
	uint64_t total;		  /* its outstanding bytes then */
	double t;		  /* CLOCK_MONOTONIC s */
	time_t wall;
	struct ledger_stack evicted; /* sums of the stacks left out (count = their number) */
	uint64_t evicted_stacks;
};

/* One report the agent serves or writes: the session's, with the least
 * recently grown stacks past --max-stacks folded into one [evicted]
 * stack (its frame static, its bytes in the totals). */
struct agent_report {
	struct session_report sr;
	const struct report *r;	  /* &sr.b.r, or a process's kept final peak report */
	const char *comm;	  /* its process's comm (the pprof label) */
	uint64_t evicted_stacks;
};

/* A process the agent traces, alive or ended and not yet forgotten. */
struct agent_proc {
	pid_t pid;
	char comm[16];
	char *matched;		  /* the target it matched ("--comm nginx") */
	bool preload;		  /* at its library's sites (else uprobes) */
	double t_attached;	  /* CLOCK_MONOTONIC s */
	bool exited;
	int status;		  /* wait status, -1 unknown */
	double t_exited;
	bool final_scraped;	  /* /metrics served its last numbers */
	char *memcg;		  /* its memory cgroup's directory when attached (OOM: its
				   * limit), NULL when not found */
	struct agent_history *hist; /* its growth */
	uint64_t total;		  /* outstanding bytes at the last look */
	uint64_t peak;		  /* the highest seen */
	struct agent_peak pk;	  /* the heap then (st NULL: none kept yet) */
	struct agent_report *peak_final; /* the peak report made at its exit, when its image's
					  * stacks may go: the frames named while they could be */
	double t_check;		  /* its last leak check (CLOCK_MONOTONIC s; 0: none) */
	double t_check_wall;	  /* the same, Unix time */
	bool checked;
	bool oom;		  /* the OOM killer picked it; its report is written */
};

/* A process a target matched that the agent does not trace, and why:
 * followed all the same, for its exec (a new program may have the
 * library) and its exit. */
struct agent_skip {
	pid_t pid;
	char comm[16];
	char *why;
};

/* A process caught inside its dynamic linker after an exec: looked at
 * again until its initial objects are all mapped. */
struct agent_pending {
	pid_t pid;
	double since;
	char *matched;
};

struct agent {
	const struct agent_env *env;
	struct session_settings set;
	struct session *s;
	struct agent_targets *targets;
	struct agent_watch *watch;
	struct agent_http *http;
	bool inject;		      /* processes without the library get it injected (not
				       * --no-inject) */
	struct agent_proc **procs;
	size_t nprocs, procs_cap;
	struct agent_skip *skipped;
	size_t nskipped, skipped_cap;
	struct agent_pending *pending;
	size_t npending, pending_cap;
	double next_tick;
	/* --leak-check-every and POST /leak-check: the pauses */
	uint64_t pause_counts[AGENT_PAUSE_NBOUNDS + 1];
	struct agent_histogram pause;
	bool stop;
	int sigfd;
};

/* --- cmd_agent.c --- */

/* `dwleak agent ARGS`: parses, runs, returns the exit status. */
int cmd_agent(int argc, char **argv);

/* --- agent_run.c --- */

/* Runs the agent as ENV says until SIGTERM or SIGINT; the exit status. */
int agent_run(const struct agent_env *env);

/* The agent's log: one line on stderr, "dwleak: " and FMT. */
void agent_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* CLOCK_MONOTONIC seconds. */
double agent_now(void);

/* --- agent_life.c --- */

/* The traced process PID (alive or ended), or NULL. */
struct agent_proc *agent_proc_find(const struct agent *a, pid_t pid);

/* The skipped process PID, or NULL. */
const struct agent_skip *agent_skip_find(const struct agent *a, pid_t pid);

/*
 * The one place the agent chooses how process PID is reached: at its
 * preload library's sites when it has the library and they see every
 * allocator call; injected when A->inject (and, should that fail,
 * attach falls back to uprobes with --uprobes, else skips); with uprobes
 * when --uprobes says so; else skipped.  *WHY (malloc'd, the caller frees)
 * says why when it is not the library's sites.
 */
enum agent_way agent_way_in(const struct agent *a, pid_t pid, char **why);

/* Takes process PID, which target MATCHED ("--comm x"), when it is not
 * taken already: traced as agent_way_in says, or skipped (said).  A
 * process still in its dynamic linker waits in A->pending.  Returns 0 or
 * -ENOMEM. */
int agent_consider(struct agent *a, pid_t pid, const char *matched);

/* Every process a target matches now (at the start, and at SIGHUP: the
 * traced ones stay). */
void agent_members_take(struct agent *a);

/* The pending processes whose dynamic linker has settled, taken. */
void agent_pending_run(struct agent *a);

/* The watcher's callbacks (CTX is the agent). */
void agent_on_exec(void *ctx, const struct agent_exec *e);
void agent_on_fork(void *ctx, const struct agent_fork *f);
void agent_on_exit(void *ctx, const struct agent_exit *e);
void agent_on_victim(void *ctx, const struct agent_victim *v);

/* Forgets the ended processes whose last numbers were served (or that
 * waited long enough), and frees what the agent kept of them. */
void agent_linger_end(struct agent *a, double now);

/* Frees every process's books (the session is the caller's to free). */
void agent_procs_free(struct agent *a);

/* --- agent_books.c --- */

/* A new process's books (its history).  Returns 0 or -ENOMEM. */
int agent_books_open(struct agent *a, struct agent_proc *p);
void agent_books_free(struct agent_proc *p);

/* The periodic look at every live process: its total, a peak snapshot
 * when it is the highest seen (throttled), a growth snapshot when due,
 * its --leak-check-every check when due. */
void agent_books_tick(struct agent *a, double now);

/* P is about to be said ended to the session: its peak report named now,
 * while its image's stacks are all still in the store. */
void agent_books_final(struct agent *a, struct agent_proc *p);

/*
 * The report of P into *OUT (free with agent_report_free): its heap now,
 * or with PEAK its peak snapshot (its heap now when none was kept), its
 * stacks past --max-stacks folded into [evicted]; GROWTH (may be NULL) as
 * session_report_opts says.  Returns 0 or a negative errno.
 */
int agent_report_build(struct agent *a, struct agent_proc *p, bool peak, struct growth *growth,
		       struct agent_report *out);
void agent_report_free(struct agent_report *r);

/* P's numbers for /metrics (its aggregate now, not a named report).
 * Returns 0 or a negative errno. */
int agent_books_metrics(struct agent *a, struct agent_proc *p, struct agent_metrics_proc *out);

/* One leak check of P now (POST /leak-check, --leak-check-every); its
 * pause into the histogram.  Returns 0 or what session_leak_check gives. */
int agent_books_leak_check(struct agent *a, struct agent_proc *p);

/* --- agent_routes.c --- */

/* The HTTP routes, wired to A. */
void agent_routes_init(struct agent *a, struct agent_http_handlers *h);

/* --- agent_oom.c --- */

/* The OOM killer picked traced process P (V: the watcher's event): its
 * RSS and cgroup limit read now, then a JSON and a text report written to
 * --report-dir (said in the log either way). */
void agent_oom_report(struct agent *a, struct agent_proc *p, const struct agent_victim *v);

/* The memory cgroup directory of PID (v1 memory controller, else v2), or
 * NULL; malloc'd.  AT_ROOT (may be NULL) is set when that directory is
 * its hierarchy's root: where v1 shows any exiting task ("/" in
 * /proc/PID/cgroup once PF_EXITING is set, while its RSS is still
 * readable), so an OOM victim's own cgroup is the one read earlier. */
char *agent_memcg_of(pid_t pid, bool *at_root);

#endif
