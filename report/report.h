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
	/* the name before demangling, as valgrind's suppressions name frames
	 * (struct sym_frame's symbol: "_ZN3Foo3barEv"), FUNCTION itself when
	 * that is the same; NULL when unknown (a report read from JSON) */
	const char *symbol;
};

/*
 * The leak check's kinds (SPEC.md, "Leak check"), memcheck's, in the order
 * its loss records and LEAK SUMMARY list them; one list:
 * X(ID, NAME, PHRASE): the enumerator is REPORT_LEAK_<ID>, NAME is the
 * JSON key, the pprof label value and the flame-graph box, PHRASE is
 * memcheck's words in the text report ("are definitely lost").
 */
#define REPORT_LEAK_KINDS(X)                                                  \
	/* no pointer to it anywhere */                                       \
	X(DEFINITELY_LOST, definitely_lost, "definitely lost")                \
	/* pointed to only from lost blocks */                                \
	X(INDIRECTLY_LOST, indirectly_lost, "indirectly lost")                \
	/* only pointers into its interior */                                 \
	X(POSSIBLY_LOST, possibly_lost, "possibly lost")                      \
	/* a pointer to its start from a root or a reachable block */        \
	X(REACHABLE, reachable, "still reachable")

enum report_leak_kind {
#define REPORT_LEAK_KIND_ENUM(id, name, phrase) REPORT_LEAK_##id,
	REPORT_LEAK_KINDS(REPORT_LEAK_KIND_ENUM)
#undef REPORT_LEAK_KIND_ENUM
	REPORT_LEAK_KIND_COUNT /* not a kind: how many there are */
};

/* Each kind's NAME and PHRASE (above), indexed by enum report_leak_kind. */
extern const char *const report_leak_kind_names[REPORT_LEAK_KIND_COUNT];
extern const char *const report_leak_kind_phrases[REPORT_LEAK_KIND_COUNT];

/* Outstanding bytes and allocations of one leak kind. */
struct report_leak_count {
	uint64_t bytes;
	uint64_t allocations;
};

/* Where a stack's outstanding bytes are (the pages under its blocks, from
 * /proc/PID/pagemap or mincore); the three add up to at most its bytes. */
struct report_residency {
	uint64_t resident;  /* in RAM: what the leak costs in RSS */
	uint64_t swapped;   /* in swap */
	uint64_t untouched; /* never written, so not backed by anything yet */
};

/*
 * The outstanding allocations made from one call stack.  FRAMES are innermost
 * first (the allocator, then its callers).  FP_FRAMES is the frame-pointer
 * walk of the same site and is only written when the report's unwind mode is
 * "both".  TRUNCATED and UNWIND_ERROR say how a walk that did not reach the
 * outermost frame ended; both may be unset for a complete walk.
 * PID and COMMAND name the process that made the allocations (0 and NULL:
 * the report's own pid and command); two processes never share a stack.
 * LEAK_KINDS, when HAS_LEAK_KINDS (a leak check ran), split BYTES and
 * ALLOCATIONS by kind; they add up to at most BYTES and ALLOCATIONS (what
 * was allocated after the check is in no kind).
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
	int pid;                       /* the process that allocated; 0 = the report's pid */
	const char *command;           /* its command; NULL = the report's (when PID is its) */
	/* --sample-bytes: the standard error of BYTES (an estimate), and of
	 * each kind's bytes in LEAK_KINDS; NAN when exact */
	double bytes_stderr;
	double leak_kinds_stderr[REPORT_LEAK_KIND_COUNT];
	bool has_leak_kinds;
	struct report_leak_count leak_kinds[REPORT_LEAK_KIND_COUNT];
	/* of those, the blocks whose kind came through memory the check cannot
	 * vouch for (the allocator's, held before the trace began: its free
	 * lists, or blocks allocated before): they may be lost */
	struct report_leak_count leak_unsure;
	bool has_residency;
	struct report_residency residency;
};

/*
 * Counts over the whole trace, not only the stacks a report shows.  STACKS is
 * the number of distinct stacks with outstanding allocations.
 */
struct report_totals {
	uint64_t outstanding_bytes;
	uint64_t outstanding_allocations;
	uint64_t stacks;
	uint64_t dropped_events;   /* records and events lost (a ring buffer full, no memory
				    * to apply them): what the report cannot count at all */
	uint64_t truncated_stacks; /* walks stopped by the depth limit */
	uint64_t unwind_errors;    /* walks stopped by a missing rule or unreadable memory */
};

/* Comparison mode's answer to "which library should I rebuild with
 * -fno-omit-frame-pointer?" (report/compare.c fills it). */
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

/*
 * One thing the trace lost, or one limit it hit, with its cause: a line of
 * its own in every report ("Lost: TEXT"), so nothing is lumped with
 * anything else.  WHAT names it for programs (the counter or limit:
 * "stacks_map_full", "alloc_events_lost", ...); TEXT is the whole line
 * for people, numbers included.
 */
struct report_loss {
	const char *what;
	int pid;	 /* the process it concerns; 0 = the trace as a whole */
	uint64_t count;	 /* how many (allocations, records, walks, mappings, processes) */
	uint64_t bytes;	 /* their bytes, when they are allocations; else 0 */
	const char *text;
};

/* What one suppression rule left out of the report. */
struct report_suppressed {
	const char *rule;	 /* "FILE:LINE" */
	const char *description; /* the rule's comment, or NULL */
	uint64_t stacks, bytes, allocations;
};

/*
 * How one process of the traced tree is doing when the report is taken.
 * ENDED: WAIT_STATUS is what waitpid() gave (WIFEXITED / WIFSIGNALED).
 * NOT_FOLLOWED: dwleak let it go (it runs on unseen), and REASON says why
 * ("setuid exec", "left the traced tree"); its stacks hold what was seen
 * before.  A RUNNING or ENDED process may be untraced too: dwleak follows
 * its life (its forks, execs and exit) but not what it allocates, and
 * REASON says why (report_process_traced()).  X(ID, NAME):
 * REPORT_PROCESS_<ID>, NAME is the JSON "state".
 */
#define REPORT_PROCESS_STATES(X)          \
	X(RUNNING, "running")             \
	X(ENDED, "ended")                 \
	X(NOT_FOLLOWED, "not_followed")

enum report_process_state {
#define REPORT_PROCESS_STATE_ENUM(id, name) REPORT_PROCESS_##id,
	REPORT_PROCESS_STATES(REPORT_PROCESS_STATE_ENUM)
#undef REPORT_PROCESS_STATE_ENUM
	REPORT_PROCESS_STATE_COUNT /* not a state: how many there are */
};

/*
 * One process of the traced tree (-- CMD mode follows every fork and exec).
 * BYTES and ALLOCATIONS are outstanding over all its stacks, the ones a
 * --top cut leaves out included (report_totals_from_stacks() sets them).
 */
struct report_process {
	int pid;
	int ppid;                 /* its parent; 0 = the root of the tree (or unknown) */
	const char *command;      /* path of the program it runs now; NULL = unknown */
	const char *comm;         /* its name, /proc/PID/comm (the pprof label comm);
				   * NULL = unknown */
	enum report_process_state state;
	int wait_status;          /* REPORT_PROCESS_ENDED: as waitpid() gives it */
	const char *reason;       /* why what it allocates is not traced (NOT_FOLLOWED: why
				   * it was let go); NULL: traced */
	/* --leak-check: why some of its blocks have no kind (its check failed,
	 * it ended before one could run, they came after it); NULL when every
	 * block it has was classified */
	const char *unchecked;
	uint64_t bytes;
	uint64_t allocations;
};

/* The leak check's totals over every stack (the report's, not only those a
 * --top cut shows): SPEC.md's totals.leak_check. */
struct report_leak_check {
	bool present;                 /* a leak check ran; nothing else here is set if not */
	struct report_leak_count kinds[REPORT_LEAK_KIND_COUNT];
	/* blocks no check classified (their process's UNCHECKED says why):
	 * never a pass, since any of them may be lost */
	struct report_leak_count unclassified;
	struct report_leak_count unsure; /* the stacks' leak_unsure, summed */
	/* KINDS are the checks' own totals over every block, exact (a sampled
	 * trace whose library indexed every block: the stacks' kinds are
	 * estimates from the sample), not the stacks' sums; EXACT_UNSURE is
	 * then the checks' unsure total */
	bool kinds_exact;
	struct report_leak_count exact_unsure;
	uint64_t scanned_bytes;       /* target memory read for pointers */
	double pause_ms;              /* how long the target was stopped; NAN = unknown */
	double scan_ms;               /* its memory read and scanned; NAN = unknown */
	bool snapshot;                /* every check read a copy-on-write snapshot while its
	                               * process ran on (the scan was not in the pause) */
};

/*
 * Where the target's RSS is: one list, X(ID, NAME, TEXT), the enumerator
 * REPORT_RSS_<ID>, NAME the JSON key, TEXT the text report's label.
 */
#define REPORT_RSS_PARTS(X)                                                            \
	/* resident pages under the live blocks dwleak tracks */                         \
	X(TRACKED_BLOCKS, tracked_blocks, "live tracked blocks")                           \
	/* resident heap and allocator arenas under no tracked block: free memory the */  \
	/* allocator keeps, its own metadata, blocks allocated before dwleak attached */  \
	X(ALLOCATOR_UNTRACKED, allocator_untracked, "allocator memory, no tracked block")  \
	/* thread stacks */                                                              \
	X(STACKS, stacks, "stacks")                                                        \
	/* file-backed code and data of the program and its libraries */                 \
	X(CODE_AND_DATA, code_and_data, "code and data")                                   \
	/* every other mapping (anonymous mmap outside the allocator, shared memory) */  \
	X(OTHER_MAPPINGS, other_mappings, "other mappings")

enum report_rss_part {
#define REPORT_RSS_PART_ENUM(id, name, text) REPORT_RSS_##id,
	REPORT_RSS_PARTS(REPORT_RSS_PART_ENUM)
#undef REPORT_RSS_PART_ENUM
	REPORT_RSS_PART_COUNT /* not a part: how many there are */
};

/* Each part's NAME and TEXT (above), indexed by enum report_rss_part. */
extern const char *const report_rss_part_names[REPORT_RSS_PART_COUNT];
extern const char *const report_rss_part_texts[REPORT_RSS_PART_COUNT];

/*
 * "RSS explained": the target's resident bytes by where they are, so that
 * RSS, the allocator's statistics and dwleak's outstanding bytes can be
 * told apart.  The parts add up to at most RSS_BYTES (what they leave is
 * shown as unaccounted).
 */
struct report_rss {
	bool present;
	uint64_t rss_bytes;                      /* the target's RSS (VmRSS) */
	uint64_t parts[REPORT_RSS_PART_COUNT];   /* bytes, indexed by enum report_rss_part */
};

/*
 * A whole report.  STACKS may be in any order: the writers show them by bytes,
 * largest first, ties by allocations, then in the order given.  The
 * COUNTER_NAMES/COUNTER_VALUES arrays (NCOUNTERS each) are extra named
 * counters (per-reason BPF give-ups and the like); text shows the non-zero
 * ones in its footer, JSON all of them in a top-level "counters" object.
 * PROCESSES lists the traced tree in any order (NULL and 0 for a report of
 * one process that says nothing more of it); PID and COMMAND are those of
 * the process dwleak started or attached to.
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
	struct report_process *processes;
	size_t nprocesses;
	const struct report_loss *losses; /* each cause of a loss, or limit hit */
	size_t nlosses;
	struct report_leak_check leak_check; /* --leak-check */
	struct report_rss rss;               /* RSS explained, when known */
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

/* Each state's NAME (above), indexed by enum report_process_state. */
extern const char *const report_process_state_names[REPORT_PROCESS_STATE_COUNT];

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
 * Also sets each of R->processes' bytes and allocations from the stacks
 * it made (report_stack_pid()), and, when every stack HAS_LEAK_KINDS and
 * R->leak_check is present, its kinds to the sums of the stacks'.
 */
void report_totals_from_stacks(struct report *r);

/* The pid that made stack S of R: S->pid, or R's own when S says none. */
int report_stack_pid(const struct report *r, const struct report_stack *s);

/* The command of stack S of R: S->command, else R's when S is R's process,
 * else NULL. */
const char *report_stack_command(const struct report *r, const struct report_stack *s);

/* Whether what process P allocates is in the report: it is followed and
 * nothing kept dwleak from tracing its allocator (REASON is NULL). */
bool report_process_traced(const struct report_process *p);

/* How many of R's processes are not traced (report_process_traced()):
 * what they allocated is missing from the report, which must say so. */
size_t report_untraced_count(const struct report *r);

/*
 * Whether R is about more than one process: its stacks come from more than
 * one pid, or it lists more than one process.  The writers then show each
 * stack under its process; with one process they write as they always did.
 */
bool report_is_multiprocess(const struct report *r);

/*
 * The part of stack S that no leak kind holds (what was allocated after the
 * check, or everything when S has no kinds), in *OUT.
 */
void report_stack_unclassified(const struct report_stack *s, struct report_leak_count *out);

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
