/* The trace command: the settings its command line gives (cmd_trace.c
 * parses them) and its run on a live session (trace.c). */
#ifndef DWLEAK_TRACE_H
#define DWLEAK_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "options.h"
#include "symbolize.h"
#include "write.h"

/* Tracing settings, each with its default. */
struct env {
	long pid;		  /* -p: process to trace; 0 = start CMD instead */
	double duration_s;	  /* -d: 0 = until Ctrl-C, SIGTERM or the target exits */
	double interval_s;	  /* -i: 0 = only the final report */
	long top;		  /* -t: stacks per report, 0 = all (default 10) */
	uint32_t unwind;	  /* --unwind: enum unwind_mode (default dwarf) */
	double min_age_s;	  /* --min-age: 0 = every outstanding allocation */
	enum report_format format; /* --format (default text) */
	const char *output;	  /* -o: NULL = stdout */
	bool mmap;		  /* --mmap: also track anonymous mmap/munmap */
	long long sample_bytes;	  /* --sample-bytes: 0 = track every allocation */
	bool fail_on_leak;	  /* --fail-on-leak given */
	long long fail_bytes;	  /* its threshold (default 0) */
	bool allow_untraced;	  /* --allow-untraced: --fail-on-leak may pass though part of
				   * the tree could not be traced */
	const char **suppressions; /* --suppressions FILE, each one given, in order */
	size_t nsuppressions;
	bool no_default_suppressions; /* --no-default-suppressions */
	const char **debug_dirs;  /* --debug-dir, NULL-terminated (may be NULL) */
	size_t ndebug_dirs;
	bool stats;		  /* --stats: print the walker's counters */
	bool leak_check;	  /* --leak-check: classify blocks by scanning memory */
	char **cmd;		  /* after --: command to start; NULL with -p */
	bool follow_forks;	  /* trace every process it forks or execs: default with
				   * -- CMD (--no-follow-forks: not); --follow-forks with -p */
	bool no_preload;	  /* --no-preload: -- CMD runs without the preload library,
				   * and no process is traced at its sites (uprobes only) */
	bool no_inject;		  /* --no-inject: -p never loads the library into a process */
	bool walk_in_process;	  /* --walk process: the library walks, into rings */
	struct sym_fetch fetch;	  /* debuginfod lookups at report time: DEBUGINFOD_URLS,
				   * DWLEAK_DEBUGINFOD_SECONDS (cli/fetch.h) */
	/* environment knobs for tests and bench/ */
	int uprobe_session;	  /* DWLEAK_UPROBE_SESSION: 1 or 0 forces; -1 = choose */
	int preempt_guard;	  /* DWLEAK_PREEMPT_GUARD: enum preempt_guard; -1 = choose */
	bool bench_no_walk;	  /* DWLEAK_BENCH_NO_WALK=1: no walks (bench/) */
	bool leak_check_stop;	  /* DWLEAK_LEAK_CHECK_STOP=1: no snapshot, the process stopped
				   * while its memory is read (bench/, tests) */
	uint32_t stacks_max;	  /* DWLEAK_STACKS_MAX=N: a stacks map of N entries (tests
				   * fill it on purpose); 0 = the default */
};

/* Parses the trace command's ARGV into ENV (free with cmd_trace_free).
 * Returns -1 to go on and trace, else the exit status to end with (0
 * after --help, EXIT_USAGE after a message). */
int cmd_trace_parse(struct env *env, int argc, char **argv);
void cmd_trace_free(struct env *env);

/* Runs a whole trace as ENV says; returns the process exit status. */
int trace_run(const struct env *env);

#endif
