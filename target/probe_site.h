/* Where to put a uprobe inside a function so the kernel can emulate the
 * probed instruction instead of single-stepping it out of line: a trap
 * that single-steps costs another trap (glibc's free starts with
 * `test %rdi,%rdi`, ~6 us a call here, against ~0.8 us at its `push`). */
#ifndef DWLEAK_PROBE_SITE_H
#define DWLEAK_PROBE_SITE_H

#include <stddef.h>
#include <stdint.h>

struct probe_site {
	uint64_t offset;   /* from the function's start; 0 = the entry */
	const char *why;   /* static text for --stats */
};

/*
 * Picks the site for an entry-only probe (no return probe, so the return
 * slot need not be untouched) of a function whose first argument is a
 * pointer that a NULL check may skip: CODE holds the function's first LEN
 * bytes, decoded from its start so the site is on an instruction boundary.
 * Moves past `[endbr64;] test %rdi,%rdi; je` to a following `push %reg`
 * (emulated; rdi and rsp still as at entry); otherwise stays at the entry.
 */
void probe_site_pick(const uint8_t *code, size_t len, struct probe_site *out);

#endif
