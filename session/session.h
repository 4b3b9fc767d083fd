/* The live tracing session that `dwleak -p`, `dwleak -- CMD` and the agent
 * run: it owns the processes and their ledgers, the BPF programs, the
 * walker and its tables, the walked stacks, the report builder's inputs
 * and the clock.  Its host (cli/, the agent) gives it settings and a
 * sink for messages, drives it with session_poll, and asks it for
 * reports; the session never prints and never reads the command line.
 *
 *   session_new -> session_attach / session_spawn -> session_poll ... ->
 *   session_report (any number of times) -> session_free */
#ifndef DWLEAK_SESSION_H
#define DWLEAK_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "build.h"
#include "log.h"
#include "probes.h"
#include "proc.h"
#include "stack_store.h"
#include "suppress.h"
#include "target.h"
#include "unwinder.h"

/* What the session is asked to do, each with its meaning in SPEC.md. */
struct session_settings {
	uint64_t sample_bytes;	  /* --sample-bytes: 0 = every allocation */
	bool mmap;		  /* --mmap */
	bool leak_check;	  /* --leak-check */
	bool follow_forks;	  /* follow forks and execs with ptrace (a spawned command
				   * itself is always followed: its exec and exit) */
	bool no_preload;	  /* --no-preload */
	bool no_inject;		  /* --no-inject: a running process without the library is
				   * traced with uprobes, the library not loaded into it */
	uint32_t unwind;	  /* enum unwind_mode */
	bool walk_in_process;	  /* --walk process: at the preload library's sites, the
				   * library walks (dwarf or fp) and records into rings
				   * dwleak drains; the kernel walks with --unwind both */
	const char *unwind_name;  /* its name, for reports */
	uint64_t min_age_ns;	  /* --min-age */
	bool growth;		  /* reports carry growth since the previous one (--interval) */
	const char **debug_dirs;  /* --debug-dir, NULL-terminated (may be NULL), borrowed */
	const struct sym_fetch *fetch; /* debuginfod lookups when frames are named (NULL: none) */
	struct suppressions *supp; /* applied to reports (borrowed; NULL = none) */
	double rescan_s;	  /* every live process's objects are looked at again this
				   * often (0: every second): the dynamic linker's hook says
				   * when objects come, this catches what it does not (a
				   * process whose hook could not be probed); the agent,
				   * with hundreds of processes, looks less often */
	bool exits_from_host;	  /* the host learns of exits itself and hands them over
				   * (session_exited): without ptrace, the session does
				   * not probe its first process with kill(0) (the agent,
				   * whose first process is just one of many) */
	/* knobs for tests and bench/ (see cli/cmd_trace.c) */
	int uprobe_session;
	int preempt_guard;
	bool bench_no_walk;
	uint32_t stacks_max;
	bool leak_check_stop;	  /* the leak check keeps a running process stopped while
				   * its memory is read (no copy-on-write snapshot) */
};

struct session;

/*
 * A new session in *OUT as SET says (SET and its strings are borrowed and
 * must outlive it), telling LOG what the user must know: the table cache,
 * the walker, the symbolizer, the stack store, the BPF programs loaded.
 * No process yet.  Returns 0 or a negative errno (said through LOG); free
 * with session_free either way.
 */
int session_new(const struct session_settings *set, const struct session_log *log, struct session **out);
void session_free(struct session *s);

/* -p: traces running process PID (seized with ptrace too when following
 * forks).  Returns 0 once it is traced, or a negative errno (said). */
int session_attach(struct session *s, pid_t pid);

/*
 * Loads the preload library into running process PID and routes its
 * allocator calls through it (target/inject.c), so that a session_attach
 * after finds it at the library's sites.  session_attach does this itself
 * unless the settings say no_inject; a host that chooses the way in per
 * process (the agent) sets no_inject and calls this.  *MS: the injection's
 * milliseconds (-1 when not done).  Returns 0, -EEXIST when the library
 * is loaded already (not a failure), or a negative errno with *WHY
 * (malloc'd, the caller frees) saying why it could not be done safely.
 */
int session_inject(struct session *s, pid_t pid, double *ms, char **why);

/* -- CMD: starts ARGV (ARGV[0] looked up in PATH) with the preload library
 * in LD_PRELOAD unless told not to, followed from its first instruction.
 * Returns 0 or a negative errno (said). */
int session_spawn(struct session *s, char *const *argv);

/*
 * Waits up to TIMEOUT_MS for events and handles them all: records into
 * the ledgers, forks, execs, the linker's stops, exits, leak checks at
 * exit, tables for objects that came (all of them every second).
 * Returns 1 while something is left to trace, 0 once every followed
 * process has ended, or a negative errno when the session cannot go on.
 * EINTR ends the wait early and is no error.
 */
int session_poll(struct session *s, int timeout_ms);

/* The file descriptor session_poll waits on (readable when there is
 * something to handle), for a host that waits on more than the session. */
int session_fd(const struct session *s);

/* Whether a process is traced yet (the "tracing" line was said). */
bool session_traced(const struct session *s);

/* The processes (read only), and the one dwleak started or attached to. */
const struct procs *session_procs(const struct session *s);
const struct target *session_target(const struct session *s);

/* When the first process was traced (CLOCK_MONOTONIC s); 0: none yet. */
double session_traced_since(const struct session *s);

/* PID (not followed with ptrace: the agent learns of exits from its
 * watcher) exited with wait status STATUS (0 when not known): its last
 * records applied, its probes and slot given back, its mappings kept to
 * name its frames, its ledger sealed.  Its leak check, if one is due, must
 * have run before.  Nothing happens for a pid the session does not have. */
void session_exited(struct session *s, pid_t pid, int status);

/* Forgets PID, which exited, once its last report is out: its ledger,
 * mappings and (when no process of its image is left) its stacks freed.
 * Returns 0, -ENOENT or -EBUSY (it has not exited). */
int session_forget(struct session *s, pid_t pid);

/* --leak-check of PID now (it runs: stopped for the check).  Returns 0,
 * -ENOENT, or what the check failed with (also said). */
int session_leak_check(struct session *s, pid_t pid);

/* What a report covers. */
struct session_report_opts {
	bool check_first; /* with --leak-check, check the running processes first */
	pid_t pid;	  /* only this process (0: every one) */
	/* with PID: report these aggregated stacks of it (session_aggregate's,
	 * which the host may have kept or cut down: the agent's peak and its
	 * --max-stacks) instead of its ledger's now; borrowed.  Their ids
	 * must still be in the stack store: the process's image has not
	 * ended, or they are what its ledger still names. */
	const struct ledger_stacks *stacks;
	/* growth of each stack since this state (growth.h) instead of the
	 * session's own between reports (--interval); the report overwrites
	 * it with its own stacks, as it does the session's */
	struct growth *growth;
};

/*
 * PID's outstanding allocations now (every record applied first),
 * aggregated by stack with the session's --min-age and --sample-bytes,
 * into OUT (empty on entry; free with ledger_stacks_free, also after an
 * error): what a host keeps between reports.  Returns 0, -ENOENT (no such
 * process) or -ENOMEM.
 */
int session_aggregate(struct session *s, pid_t pid, struct ledger_stacks *out);

/*
 * A report of what is outstanding now into *OUT (free with
 * session_report_free, also after an error), as O says (NULL: check first,
 * every process): every record applied and every walk moved out of the
 * kernel before it is built.  COUNTERS (CNT_COUNT values) gets the
 * programs' counters with the ledgers' added.  Returns 0, -ENOENT (O's pid
 * is not traced) or another negative errno.
 */
struct session_report {
	struct built b;
	uint64_t counters[CNT_COUNT];
	char **notes; /* strings B borrows (why blocks have no kind), one per process */
	size_t nnotes;
};

int session_report(struct session *s, const struct session_report_opts *o, struct session_report *out);
void session_report_free(struct session_report *r);

/* Every record applied and every walk moved out of the kernel into the
 * stack store, as before a report: what a host does once before it reads
 * several processes' aggregates and their stacks' ends. */
void session_sync(struct session *s);

/* The programs' counters now (CNT_COUNT values, bpf/abi/dwleak.h), for a
 * host that counts without a report: a report's dropped_events are
 * CNT_RING_FULL + CNT_EVENTS_LOST and its processes' lost records. */
void session_counters(const struct session *s, uint64_t counters[CNT_COUNT]);

/* Whether a report would say the walk of stack ID ended early (its
 * unwind_error; a truncated walk is no error): a walk error, a special
 * id, or a walk the store does not have. */
bool session_stack_error(const struct session *s, uint64_t id);

/* The parts' own statistics, for --stats. */
struct session_stats {
	struct unwinder_stats unwinder;
	struct probes_info probes;
	struct probes_stacks_stats kernel_stacks;
	struct probes_drain_stats kernel_drains;
	struct stack_store_stats stacks;
};

void session_stats(const struct session *s, struct session_stats *out);

#endif
