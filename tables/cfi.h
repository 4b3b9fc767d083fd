/* DWARF call-frame information (.eh_frame / .debug_frame) parser and CFA
 * program interpreter.  It reads CIEs and FDEs from untrusted bytes and
 * turns each FDE into address ranges with the rule the walker uses, for
 * x86_64 or aarch64 (unwind_format.h says what the fields mean on each). */
#ifndef DWLEAK_CFI_H
#define DWLEAK_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind_format.h"

/* One CFI section.  ADDR is its ELF address (for pc-relative pointers). */
struct cfi_section {
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	bool is_eh; /* .eh_frame (else .debug_frame: different CIE ids and pointers) */
	uint8_t arch; /* enum unwind_arch: which registers the rules name */
};

/* An FDE as found in the section: the code range and where it starts. */
struct cfi_fde {
	uint64_t start;
	uint64_t end;
	size_t offset; /* of the FDE's length field in the section */
	uint8_t source; /* caller's tag (which section), copied through */
};

/*
 * Lists the FDEs of SEC.  For .eh_frame with a usable .eh_frame_hdr
 * (HDR non-NULL), the header's sorted table is the list, as the runtime
 * unwinder and libdw use it; otherwise the section is scanned.  Appends to
 * *FDES (a malloc'd array of *N entries, capacity *CAP).  FDEs that cannot be
 * parsed are skipped and counted in *BAD.  Returns 0 or -ENOMEM; a section
 * that is garbage from its start yields no FDEs and *BAD > 0.
 */
int cfi_list_fdes(const struct cfi_section *sec, const uint8_t *hdr, size_t hdr_size,
		  uint64_t hdr_addr, uint8_t source, struct cfi_fde **fdes, size_t *n,
		  size_t *cap, size_t *bad);

/*
 * The address of .eh_frame that the .eh_frame_hdr HDR (HDR_SIZE bytes, at
 * ELF address HDR_ADDR) points to, in *FRAME: how the runtime's unwinder
 * finds .eh_frame from PT_GNU_EH_FRAME alone.  Returns 0, or -EINVAL when
 * the header is not version 1 or its pointer cannot be read.
 */
int cfi_hdr_frame_addr(const uint8_t *hdr, size_t hdr_size, uint64_t hdr_addr, uint64_t *frame);

/* Called for each row of an FDE, in address order, with [start, end). */
typedef int (*cfi_row_fn)(uint64_t start, uint64_t end, const struct unwind_rule *rule,
			  void *arg);

/*
 * Runs the CIE's initial instructions and FDE's CFA program, calling FN for
 * each resulting row clipped to the FDE's range.  Returns 0, FN's non-zero
 * value, or -EINVAL when the FDE or its CIE is malformed (rows emitted
 * before the error stand; the caller decides).
 */
int cfi_fde_rows(const struct cfi_section *sec, const struct cfi_fde *fde, cfi_row_fn fn, void *arg);

#endif
