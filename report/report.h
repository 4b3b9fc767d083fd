/* The leak report: one plain data model that the live trace and `dwleak
 * symbolize` fill in and every format writes.  write.h holds the table of
 * formats and report_write(), the one entry point to the writers. */
#ifndef DWLEAK_REPORT_H
#define DWLEAK_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/*
 * One frame of a stack.  Every pointer is borrowed: the report never owns or
 * frees strings, the caller keeps them alive until the writers return.
 * ADDRESS is always meaningful; ELF_ADDRESS only when MODULE is set.  An
 * inlined frame shares ADDRESS with the frame after it (its caller) and has
 * no meaningful OFFSET.
 */
struct report_frame {
	uint64_t address;     /* runtime address */
	uint64_t elf_address; /* same place in MODULE's ELF virtual address space */
	const char *module;   /* path of the mapped object, NULL when no mapping is known */
	const char *build_id; /* lowercase hex, NULL when unknown */
	const char *function; /* demangled name, NULL when no symbol is known */
	uint64_t offset;      /* address - start of FUNCTION, bytes */
	const char *file;     /* source file, NULL without line information */
	int line;             /* source line, 0 (or negative) = unknown */
	bool inlined;         /* inlined into the next (outer) frame */
};

/*
 * The outstanding allocations made from one call stack.  FRAMES are innermost
 * first (the allocator, then its callers).  FP_FRAMES is the frame-pointer
 * walk of the same site and is only written when the report's unwind mode is
 * "both".  TRUNCATED and UNWIND_ERROR say how a walk that did not reach the
 * outermost frame ended; both may be unset for a complete walk.
 */
struct report_stack {
	uint64_t bytes;
	uint64_t allocations;
	const char *allocator;         /* "malloc", "calloc", "operator new", ...; NULL = unknown */
	const struct report_frame *frames;
	size_t nframes;
	const struct report_frame *fp_frames;
	size_t nfp_frames;
	bool fp_complete;              /* the FP walk ended at rbp 0, the psABI's end of the chain */
	long fp_divergence;            /* --unwind both: index in FRAMES of the first frame the
					  FP walk lacks, -1 = the walks agree (set by fp_compare) */
	bool truncated;                /* the walk hit the depth limit (after NFRAMES frames) */
	const char *unwind_error;      /* NULL, or why the walk stopped early */
	double oldest_age_s;           /* age of the oldest allocation, seconds; NAN = unknown */
	double growth_bytes_per_s;     /* since the previous interval report; NAN = unknown */
};

/*
 * Counts over the whole trace, not only the stacks a report shows.  STACKS is
 * the number of distinct stacks with outstanding allocations.
 */
struct report_totals {
	uint64_t outstanding_bytes;
	uint64_t outstanding_allocations;
	uint64_t stacks;
	uint64_t dropped_events;   /* events lost (ring buffer or map full) */
	uint64_t truncated_stacks; /* walks stopped by the depth limit */
	uint64_t unwind_errors;    /* walks stopped by a missing rule or unreadable memory */
};

/* Comparison mode's answer to "which library should I rebuild with
 * -fno-omit-frame-pointer?" (cli/compare.c fills it). */
struct report_fp_module {
	const char *module;	/* whose function kept no frame pointer; NULL = unknown */
	uint64_t stacks;	/* stacks where the FP walk lost frames there */
	uint64_t bytes;		/* their outstanding bytes */
	uint64_t frames_lost;
};

struct report_fp_summary {
	bool present;
	uint64_t stacks;	/* stacks compared */
	uint64_t agreeing;	/* of which the two walks agree */
	uint64_t frames_lost;
	struct report_fp_module *modules; /* most bytes first */
	size_t nmodules;
};

/* What one suppression rule left out of the report. */
struct report_suppressed {
	const char *rule;	 /* "FILE:LINE" */
	const char *description; /* the rule's comment, or NULL */
	uint64_t stacks, bytes, allocations;
};

/*
 * A whole report.  STACKS may be in any order: the writers show them by bytes,
 * largest first, ties by allocations, then in the order given.  The
 * COUNTER_NAMES/COUNTER_VALUES arrays (NCOUNTERS each) are extra named
 * counters (per-reason BPF give-ups and the like); text shows the non-zero
 * ones in its footer, JSON all of them in a top-level "counters" object.
 */
struct report {
	int pid;
	const char *command;  /* path of the traced program, NULL = unknown */
	const char *unwind;   /* "dwarf", "fp" or "both" */
	double duration_s;    /* time traced so far, seconds */
	time_t timestamp;     /* wall clock of the text header; 0 = now */
	struct report_totals totals;
	struct report_stack *stacks;
	size_t nstacks;
	const char *const *counter_names;
	const uint64_t *counter_values;
	size_t ncounters;
	const struct report_fp_summary *fp; /* --unwind both, else NULL */
	uint64_t sample_bytes; /* --sample-bytes: bytes and counts are estimates; 0 = exact */
	const struct report_suppressed *suppressed; /* rules that matched (not in totals) */
	size_t nsuppressed;
};

/* The "dwleak_report" value of the JSON format: what json_write.c writes
 * and json_read.c reads; a change that old readers cannot read bumps it. */
#define REPORT_JSON_VERSION 1

/*
 * Sorts R->stacks in place by bytes descending, ties by allocations
 * descending, remaining ties keeping their order (stable).
 * Returns 0, or -ENOMEM (R is then unchanged).
 */
int report_sort(struct report *r);

/*
 * Sets *OUT to a malloc'd array of pointers to all of R's stacks in the
 * writers' order (report_sort's, without moving R->stacks); NULL when
 * there are none.  The caller frees *OUT.  Returns 0 or -ENOMEM.
 */
int report_stacks_ordered(const struct report *r, const struct report_stack ***out);

/*
 * Sets totals.outstanding_bytes, outstanding_allocations and stacks from
 * R->stacks, and truncated_stacks and unwind_errors to the number of stacks
 * that are truncated or carry an unwind_error.  dropped_events is left alone;
 * a caller with better counts (the BPF per-reason counters) sets them after.
 */
void report_totals_from_stacks(struct report *r);

/*
 * The writers of three formats (pprof.h and svg.h have the others).  New
 * callers go through report_write() (write.h); these stay public for the
 * callers that have not moved to it yet.
 *
 * Each writer writes R to F, showing at most TOP stacks (0 = all) in the
 * order report_sort() gives, without modifying R.  Nothing is written to F
 * before the order is known, so -ENOMEM leaves F untouched.
 * Return 0, -ENOMEM, or -EIO when F reports an error.
 *
 * report_write_text: memleak-like text, a header, one block per stack
 *   (frames indented, innermost first) and a footer with the totals.
 * report_write_json: the JSON object of SPEC.md, ending in a newline.
 * report_write_folded: one line per stack, "outer;...;inner BYTES", for
 *   FlameGraph, inferno and speedscope.
 */
int report_write_text(FILE *f, const struct report *r, unsigned int top);
int report_write_json(FILE *f, const struct report *r, unsigned int top);
int report_write_folded(FILE *f, const struct report *r, unsigned int top);

/*
 * Formats BYTES for people ("480 B", "12.5 KiB", "3.0 GiB") into BUF of
 * SIZE bytes (24 is always enough).  Returns BUF.
 */
char *report_human_bytes(char *buf, size_t size, double bytes);

#endif
