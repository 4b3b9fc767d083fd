/* The report builder: the ledger's stacks -> a struct report the writers
 * take.  It names every walked frame through a stack_source (the live
 * trace's stack store and symbolizer, or a unit test's fake walks), says
 * how each walk ended, applies growth since the previous report,
 * suppressions and the frame-pointer comparison, and says each thing the
 * trace lost, or limit it hit, on a line of its own. */
#ifndef DWLEAK_BUILD_H
#define DWLEAK_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dwleak.h"
#include "frames.h"
#include "growth.h"
#include "leakcheck.h"
#include "ledger.h"
#include "report.h"
#include "suppress.h"

/* Where walks and names come from. */
struct stack_source {
	void *ctx;
	/* the walk stored under ID: 0, or -ENOENT when there is none */
	int (*walk)(void *ctx, uint64_t id, struct stack_trace *out);
	/* appends the frames of runtime address PC to A (several when debug
	 * information describes inlined calls); RETURN_ADDR: PC is a return
	 * address, named by its call.  Returns 0 or -ENOMEM. */
	int (*name)(void *ctx, struct frame_arena *a, uint64_t pc, bool return_addr);
};


/* One process's part of a report: its aggregated stacks, named through
 * its stack source. */
struct build_proc {
	int pid;
	const char *command;
	const struct ledger_stacks *stacks;
	const struct stack_source *src;
	int ppid;			  /* the traced process that forked it; 0 = none */
	enum report_process_state state; /* running, ended (WAIT_STATUS), not followed */
	int wait_status;
	const char *reason;		  /* why its allocations are not traced; NULL: traced */
	const char *unchecked;		  /* --leak-check: why blocks have no kind; NULL */
	uint64_t records_lost;		  /* its records the ledger could not apply (no memory) */
	uint32_t mappings_beyond_table;	  /* executable mappings its walker table had no room for */
	/* --walk process: calls its library could not record (its rings
	 * full, no ring for a thread), records of rings found corrupt
	 * (rings), and why its rings are no longer read (NULL: they are) */
	uint64_t ring_dropped;
	uint64_t ring_no_ring;
	uint64_t ring_bad;
	const char *ring_why;
};

struct build_opts {
	int pid;		/* the process dwleak started or attached to */
	const char *command;
	uint32_t unwind_mode;	/* enum unwind_mode */
	const char *unwind_name; /* "dwarf", "fp" or "both", for the report */
	uint64_t sample_bytes;	/* the stacks hold estimates */
	double now_s;		/* CLOCK_MONOTONIC seconds of this report */
	uint64_t now_ns;	/* the same, in ns (ages) */
	double duration_s;	/* traced so far */
	struct growth *growth;	/* --interval: growth since the last report; NULL = none */
	struct suppressions *supp;   /* NULL = none; its rule counts are reset and refilled */
	const uint64_t *counters;    /* CNT_COUNT values, or NULL */
	const char *const *counter_names; /* CNT_COUNT names for the report */
	uint64_t lost_records;	/* records no process's ledger could apply (out of memory) */
	/* limits hit on the user side, said with the losses */
	uint32_t tables_dropped;	/* unwind tables that did not fit the walker's maps */
	uint32_t procs_without_table;	/* processes given no mapping-table slot */
	uint64_t mappings_unrecorded;	/* mappings user space could not record for naming */
	/* --leak-check: every stack gets its kinds (the blocks the checks
	 * classified; what came after is unclassified), and the report the
	 * checks' memory read, longest pause and RSS account */
	bool leak_check;
	uint64_t scanned_bytes;
	double pause_ms;
	double scan_ms;	/* the longest scan */
	unsigned checks, snapshot_checks;
	/* checks that read the library's index of every block (a sampled
	 * trace), and their totals, exact where the stacks hold estimates */
	unsigned indexed_checks;
	struct leakcheck_totals indexed;
	struct report_rss rss;
};

struct built {
	struct report r;
	struct report_stack *stacks;
	struct frame_arena arena;
	struct frame_span *spans; /* per stack: its frames, then its FP walk's */
	struct report_fp_summary fp;
	struct report_suppressed *supp;
	struct report_process *processes;
	struct report_loss *losses;
	size_t nlosses, losses_cap;
	uint64_t counters[CNT_COUNT];
	struct pc_memo *pcs;		  /* while building: the pcs of one process named */
	struct {			  /* the last module asked about: the preload library's? */
		const char *module;
		bool is;
	} preload_seen;
};

/*
 * Builds into B (free with build_free, also after an error) the report of
 * the aggregated stacks of the N processes PROCS, naming frames through
 * each one's source, as O says.  Every string B->r holds is owned by B or
 * borrowed from O and PROCS, which must outlive it.  Returns 0 or -ENOMEM.
 */
int build_report(const struct build_proc *procs, size_t n, const struct build_opts *o, struct built *b);

void build_free(struct built *b);

/* Adds to B's report a loss line TEXT (copied) of WHAT, for process PID (0:
 * the trace as a whole), COUNT things of BYTES bytes (0 when they are no
 * allocations): for what was lost after the report was built, such as
 * debug information a lookup made while naming its frames did not get.
 * Returns 0 or -ENOMEM. */
int build_loss_add(struct built *b, const char *what, int pid, uint64_t count, uint64_t bytes, const char *text);

#endif
