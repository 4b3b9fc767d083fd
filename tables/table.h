/* The table compiler's API: an ELF object's DWARF CFI (.eh_frame, and
 * .debug_frame from the object or its separate debug file) in, one compact
 * sorted unwind table (unwind_format.h) out.  No BPF, no process knowledge. */
#ifndef DWLEAK_TABLE_H
#define DWLEAK_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind_format.h"

#define TABLE_BUILD_ID_MAX 64

/*
 * One object's compiled table.  pages[i] describes ELF page first_page + i;
 * rows are sorted by address and no two adjacent rows in a page carry the
 * same rule.  Everything is owned by the table and freed by table_free().
 */
struct unwind_table {
	uint64_t first_page; /* ELF vaddr >> UNWIND_PAGE_SHIFT of pages[0] */
	uint32_t npages;
	uint32_t nrows;
	uint32_t nrules;
	struct unwind_page *pages;
	struct unwind_row *rows;
	struct unwind_rule *rules;

	/* What the compile saw, for reports and --verify's summary. */
	uint32_t nfdes;		/* FDEs used (after dropping duplicates) */
	uint32_t nfdes_eh;	/* of which from .eh_frame */
	uint32_t nfdes_debug;	/* of which from .debug_frame */
	uint32_t nfdes_bad;	/* FDEs skipped: malformed or outside the object */
	uint64_t covered_bytes;	/* code bytes covered by some FDE */
	uint64_t supported_bytes; /* of those, bytes whose rule the walker handles */
	uint8_t build_id[TABLE_BUILD_ID_MAX];
	uint32_t build_id_len;	/* 0 = the object has no NT_GNU_BUILD_ID */
	uint32_t arch;		/* enum unwind_arch: the object's machine */
};

/* Options for table_compile_fd(); a zeroed struct is the default. */
struct table_opts {
	/* Separate debug file to take .debug_frame from as well (may be NULL).
	 * Its FDEs only fill ranges that .eh_frame does not cover. */
	const char *debug_path;
};

/*
 * Compile the CFI of the ELF object open at FD (read with pread, never
 * mapped, so a file truncated meanwhile gives -EIO instead of SIGBUS; the
 * fd's offset is not used and the fd stays open and owned by the caller).
 * OPTS->debug_path is opened without blocking and must be a regular file.
 * Every size the files declare (sections, compressed sections' ch_size) is
 * checked against the file and what real CFI can be before anything is
 * allocated for it (table_input.h).
 * On success stores a new table at *OUT and returns 0.  Returns a negative
 * errno on failure: -ENOEXEC not a regular ELF object or malformed beyond
 * use, -ENODATA the object has no CFI at all, -EISDIR a directory, -EFBIG a
 * section claims more than real CFI can be, -EIO the file shrank or could
 * not be read, -ENOMEM.  table_last_error() then says what was wrong, for
 * the caller to print.
 */
int table_compile_fd(int fd, const struct table_opts *opts, struct unwind_table **out);

/* Same, opening PATH read-only first (without blocking: a FIFO is refused). */
int table_compile_path(const char *path, const struct table_opts *opts, struct unwind_table **out);

/* Same, on an ELF image in memory (the fuzzer's entry point). */
int table_compile_mem(const void *image, size_t size, const struct table_opts *opts,
		      struct unwind_table **out);

/* Frees a table; NULL is fine. */
void table_free(struct unwind_table *t);

/*
 * The rule in force at ELF address ADDR, or NULL when ADDR is outside every
 * page.  When START/END are non-NULL they receive the half-open address
 * range of the row that holds ADDR.
 */
const struct unwind_rule *table_lookup(const struct unwind_table *t, uint64_t addr,
				       uint64_t *start, uint64_t *end);

/* One row expanded to absolute addresses, for printing and verifying. */
struct table_span {
	uint64_t start; /* first ELF address of the row */
	uint64_t end;	/* one past its last address */
	const struct unwind_rule *rule;
};

/*
 * Calls FN once per row in address order with the row's span; rows that
 * continue a rule across a page boundary are joined into one span, and spans
 * of UNWIND_CFA_NONE (gaps between FDEs) are skipped.  Stops early and
 * returns FN's value when it is non-zero; returns 0 otherwise.
 */
int table_for_each_span(const struct unwind_table *t,
			int (*fn)(const struct table_span *span, void *arg), void *arg);

/* Bytes the walker needs for this table: rows, non-empty page entries
 * (counted with their 8-byte map key) and the rule array. */
uint64_t table_walker_bytes(const struct unwind_table *t);

/* True when the walker can unwind through RULE (not NONE/UNSUPPORTED and
 * the caller's rbp is not an unsupported expression). */
bool table_rule_supported(const struct unwind_rule *rule);

/* Writes a human-readable form of RULE, of a table for ARCH (enum
 * unwind_arch), into BUF: "cfa=rsp+16 rbp=[cfa-16]" on x86_64,
 * "cfa=sp+16 x29=[cfa-16] ra=[cfa-8]" on aarch64. */
void table_rule_format(const struct unwind_rule *rule, uint32_t arch, char *buf, size_t len);

/* Message describing the last failure in this thread (never NULL). */
const char *table_last_error(void);

#endif
