/* Tracing a process: the settings the command line gives, and the tracer
 * that attaches, polls and reports (trace.c). */
#ifndef DWLEAK_TRACE_H
#define DWLEAK_TRACE_H

#include <stdbool.h>
#include <stddef.h>

#define EXIT_LEAK 1
#define EXIT_USAGE 2

/* Tracing settings, each with its default. */
struct env {
	long pid;		  /* -p: process to trace; 0 = start CMD instead */
	double duration_s;	  /* -d: 0 = until Ctrl-C, SIGTERM or the target exits */
	double interval_s;	  /* -i: 0 = only the final report */
	long top;		  /* -t: stacks per report, 0 = all (default 10) */
	const char *unwind;	  /* --unwind: dwarf (default), fp or both */
	double min_age_s;	  /* --min-age: 0 = every outstanding allocation */
	const char *format;	  /* --format: text (default), json, folded, pprof, svg */
	const char *output;	  /* -o: NULL = stdout */
	bool mmap;		  /* --mmap: also track anonymous mmap/munmap */
	long long sample_bytes;	  /* --sample-bytes: 0 = track every allocation */
	bool fail_on_leak;	  /* --fail-on-leak given */
	long long fail_bytes;	  /* its threshold (default 0) */
	const char *suppressions; /* --suppressions FILE */
	bool no_default_suppressions; /* --no-default-suppressions */
	const char **debug_dirs;  /* --debug-dir, NULL-terminated (may be NULL) */
	size_t ndebug_dirs;
	bool stats;		  /* --stats: print the walker's counters */
	char **cmd;		  /* after --: command to start; NULL with -p */
};

/* Runs a whole trace as ENV says; returns the process exit status. */
int trace_run(const struct env *env);

#endif
