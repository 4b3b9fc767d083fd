/* Checks a compiled unwind table against libdw's own reading of the same
 * CFI.  libdw is an independent interpreter of .eh_frame/.debug_frame, so a
 * rule on which the two disagree is a compiler bug (or a libdw one) found
 * before the in-kernel walker trips over it. */
#ifndef DWLEAK_TABLE_VERIFY_H
#define DWLEAK_TABLE_VERIFY_H

#include <stdint.h>

#include "table.h"

/* What one verification run looked at.  The last block repeats the
 * table's own figures so that a report needs nothing but this struct. */
struct table_verify_result {
	uint64_t spans;		/* spans of the table compared */
	uint64_t addrs;		/* addresses at which libdw was asked */
	uint64_t gaps;		/* gaps between spans probed for missed FDEs */
	uint64_t fde_starts;	/* FDE first bytes (every CFI source) compared */
	uint64_t mismatches;	/* addresses where the table and libdw disagree */
	uint64_t libdw_errors;	/* of those, addresses libdw itself could not decode */

	uint32_t nfdes;		  /* = t->nfdes */
	uint32_t nrows;		  /* = t->nrows */
	uint64_t walker_bytes;	  /* = table_walker_bytes(t) */
	uint64_t covered_bytes;	  /* = t->covered_bytes */
	uint64_t supported_bytes; /* = t->supported_bytes */
};

/*
 * Called once per disagreement: ADDR is the ELF address, OURS the table's
 * rule and THEIRS the rule libdw's answer implies, followed by libdw's raw
 * answer in brackets.  Both strings live only for the duration of the call.
 */
typedef void (*table_verify_mismatch_fn)(void *arg, uint64_t addr, const char *ours,
					 const char *theirs);

/*
 * Verifies table T, compiled from the ELF object open at FD with OPTS (NULL
 * means defaults), against libdw.  For every span of T, libdw is asked at
 * the span's first and last byte, with the compiler's precedence: the
 * object's .eh_frame when it has an FDE there, else the object's
 * .debug_frame, else that of OPTS->debug_path.  The other way round, the
 * first byte of every gap between two spans and of every FDE of every
 * source (inside the object's PT_LOAD segments) is asked as well, so an FDE
 * the table dropped shows up as a mismatch.
 * The fd stays open and owned by the caller; its offset is not used.
 * ON_MISMATCH (may be NULL) gets ARG and each disagreement.
 * Fills *RES and returns 0 when the comparison ran (whatever its outcome:
 * look at res->mismatches), or a negative errno when it could not run:
 * -ENOEXEC FD is not an ELF object libelf can read, -ENOENT/-EACCES the
 * debug file cannot be opened, -ENOMEM.  table_verify_last_error() then
 * says why.
 */
int table_verify(int fd, const struct table_opts *opts, const struct unwind_table *t,
		 struct table_verify_result *res, table_verify_mismatch_fn on_mismatch,
		 void *arg);

/* Message describing the last table_verify() failure in this thread. */
const char *table_verify_last_error(void);

#endif
