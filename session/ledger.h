/* The ledger: what the traced process has outstanding, kept in user space
 * from the probes' records (allocations and frees, --mmap regions), and
 * its aggregation by stack for the reports: min-age, the oldest age, and
 * the unbiased estimates of --sample-bytes.  Once the process has exited
 * its blocks are folded into per-stack sums (ledger_seal), which is all
 * a report needs of them.  No BPF here: records arrive as bytes, so the
 * ledger is tested with fake ones. */
#ifndef DWLEAK_LEDGER_H
#define DWLEAK_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc_table.h"
#include "dwleak.h"
#include "leakcheck.h"
#include "mmap_regions.h"

#define LEDGER_REALLOC_RING 16

/* Outstanding allocations of one stack (or one pair of stacks: with
 * --unwind both they are grouped by the DWARF and FP walks together). */
struct ledger_stack {
	uint64_t stack_id;
	uint64_t fp_stack_id;
	uint64_t bytes;
	uint64_t count;
	double est_bytes;  /* --sample-bytes: unbiased estimates; else = bytes */
	double est_count;  /* and = count */
	/* --sample-bytes: the estimated variance of EST_BYTES (Horvitz-Thompson:
	 * each block of SIZE bytes sampled with probability p = 1/w adds
	 * (w^2 - w) SIZE^2); 0 when exact */
	double var_bytes;
	uint64_t oldest_ts; /* CLOCK_MONOTONIC ns of the oldest allocation */
	uint64_t newest_ts; /* and of the newest: when the stack last grew (the agent's
			     * --max-stacks folds the least recently grown) */
	uint32_t kind;	    /* enum alloc_kind of the call that made them */
	/* --leak-check: what the last check found of them (blocks allocated
	 * since are in none of these), by enum leak_kind, and where the
	 * classified bytes were */
	bool checked;
	uint64_t leak_bytes[LEAK_KIND_COUNT];
	uint64_t leak_count[LEAK_KIND_COUNT];
	/* the same bytes as estimates of all the stack's blocks of each kind
	 * (each block weighted as in EST_BYTES), and their variance */
	double est_leak_bytes[LEAK_KIND_COUNT];
	double var_leak_bytes[LEAK_KIND_COUNT];
	uint64_t unsure_bytes, unsure_count; /* of those, kinds through unsure roots */
	uint64_t resident, swapped, untouched;
};

/* An open-addressing table of ledger_stack, by (stack_id, fp_stack_id);
 * slots with count 0 are empty.  Iterate over slots[0..cap). */
struct ledger_stacks {
	struct ledger_stack *slots;
	size_t cap; /* a power of two, or 0 */
	size_t n;
};

struct ledger {
	struct alloc_table allocs;   /* outstanding allocations by address */
	struct mmap_regions regions; /* --mmap: the program's own anonymous regions */
	/* --leak-check: the memory the allocator obtained from the kernel for
	 * itself while traced (mmap, mremap and brk made inside its calls),
	 * less what was unmapped or taken over by the program since: there,
	 * only the tracked blocks are the program's.  Never what it held
	 * before the trace began (before -p, or in a fork's parent). */
	struct mmap_regions alloc_memory;
	/* the program break as last seen (0: not known yet); the break moves
	 * by brk, and what the allocator adds is its memory */
	uint64_t brk;
	/* The allocator held memory before the trace began (dwleak -p, a
	 * fork's child), which may hold blocks that are still live: it stays
	 * a root for the leak check.  Of it, the blocks seen freed since are
	 * known dead (a freed block still holds the pointers it had), and
	 * kept here (address, size) until the address is allocated again. */
	bool partial;
	struct alloc_table freed;
	/* partial: what was unmapped since (a freed block's memory there may
	 * be anybody's now: a thread's stack, the program's own mapping) */
	struct mmap_regions unmapped;
	uint64_t oom;		     /* records not applied: out of memory */
	int mmap_err;		     /* the first failure applying an mmap event */
	uint64_t now_ns;	     /* CLOCK_MONOTONIC ns stamped on new allocations */
	/* addresses realloc was given last: realloc(p, 0) frees p itself, and
	 * that free of a block already forgotten is not one of an untracked
	 * block (a ring; a miss only counts one free too many) */
	uint64_t realloc_freed[LEDGER_REALLOC_RING];
	unsigned int realloc_next;
	/* ledger_seal: the blocks folded into sums by stack (the ones too
	 * young then stay in ALLOCS) */
	bool sealed;
	struct ledger_stacks folded;
};

/* Applies one alloc_events record of SIZE bytes (struct alloc_event or
 * struct free_event, by type); short or unknown records are ignored.
 * New allocations are stamped with L->now_ns (the caller sets it to when
 * it started reading the records). */
void ledger_record(struct ledger *l, const void *data, size_t size);

/* Applies one memory syscall's event (--mmap; the allocator's memory):
 * the program's own regions with --mmap (E->by MMAP_BY_PROGRAM), the
 * allocator's memory for the leak check (the program's maps and unmaps
 * take memory out of it). */
void ledger_mmap(struct ledger *l, const struct mmap_event *e);

/* --leak-check.  The check indexes the blocks first and logs what
 * changes meanwhile (ledger_changes_start/stop: L->allocs.log); then it
 * gives each indexed block (ADDR, SIZE, indexed at SNAP_NS) its kind
 * (enum leak_kind; UNSURE: reached only through memory the check cannot
 * vouch for) and where its bytes are (RESIDENT, SWAPPED).  A block freed
 * or made again since it was indexed is not the one judged: left alone. */
void ledger_changes_start(struct ledger *l);
void ledger_changes_stop(struct ledger *l);
void ledger_verdict(struct ledger *l, uint64_t addr, uint64_t size, uint64_t snap_ns, unsigned int kind, bool unsure);
void ledger_residency(struct ledger *l, uint64_t addr, uint64_t size, uint64_t snap_ns, uint64_t resident,
		      uint64_t swapped);

void ledger_free(struct ledger *l);

/*
 * Seals L, whose process exited (its last records applied, its last leak
 * check done): every allocation at least MIN_AGE_NS old at NOW_NS is
 * folded into the sums by stack that ledger_aggregate starts from, as it
 * would have counted it (weighed for --sample-bytes N = SAMPLE_BYTES),
 * and its record freed; a younger one stays a record, since a later
 * report may be the first to find it old enough.  Called once; records
 * applied after it are ignored.  Returns 0, or -ENOMEM (L unchanged).
 */
int ledger_seal(struct ledger *l, uint64_t now_ns, uint64_t min_age_ns, uint64_t sample_bytes);

/* Calls EACH with CTX for every stack id an outstanding allocation or
 * region of L names (each id of a pair; an id may come more than once). */
void ledger_stack_ids(const struct ledger *l, void (*each)(void *ctx, uint64_t id), void *ctx);

/*
 * Aggregates L by stack into OUT (empty on entry; free with
 * ledger_stacks_free): every allocation and --mmap region at least
 * MIN_AGE_NS old at NOW_NS.  With SAMPLE_BYTES N > 0 each allocation of
 * size s was sampled with probability 1 - exp(-s/N) and is weighed by its
 * inverse in the estimates.  Returns 0 or -ENOMEM.
 */
int ledger_aggregate(const struct ledger *l, uint64_t now_ns, uint64_t min_age_ns, uint64_t sample_bytes,
		     struct ledger_stacks *out);

void ledger_stacks_free(struct ledger_stacks *s);

#endif
