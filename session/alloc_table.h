/* The outstanding allocations of the traced process, kept in user space
 * from the BPF program's alloc_events records (see unwinder/dwleak.h):
 * an open-addressing hash table keyed by address that grows as needed, so
 * no allocation is ever dropped for want of room. */
#ifndef DWLEAK_ALLOC_TABLE_H
#define DWLEAK_ALLOC_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct alloc_rec {
	uint64_t addr; /* 0 = empty slot */
	uint64_t size;
	uint64_t stack_id;
	uint64_t fp_stack_id;
	uint64_t ts;   /* CLOCK_MONOTONIC ns when user space read the record */
	uint32_t kind; /* enum alloc_kind */
	uint16_t leak; /* --leak-check: 1 + enum leak_kind of the last check; 0 = not classified */
	uint16_t leak_unsure; /* that kind came through memory the check cannot vouch for */
	uint64_t resident; /* --leak-check: bytes of it in RAM, */
	uint64_t swapped;  /* in swap (the rest never touched), at the last check */
};

/* Addresses whose entry was removed, replaced or resized while logging
 * was on: a leak check builds its index before it stops the process and
 * learns from this which of the indexed blocks changed meanwhile. */
struct alloc_table_log {
	uint64_t *addrs;
	size_t n, cap;
	bool on;
	bool lost; /* an address could not be logged (no memory): trust no index */
};

struct alloc_table {
	struct alloc_rec *slots;
	size_t cap; /* a power of two, or 0 */
	size_t n;
	struct alloc_table_log log;
	/* what the records said that the table could not apply as is */
	uint64_t replaced;     /* an address allocated again without a free seen */
	uint64_t free_unknown; /* a free of an address not in the table */
	uint64_t resized;      /* in-place resizes applied */
};

/* Records REC (its addr must not be 0); an entry already at that address
 * is replaced and counted.  Returns 0 or -ENOMEM. */
int alloc_table_add(struct alloc_table *t, const struct alloc_rec *rec);
/* Forgets ADDR; returns 0, or -ENOENT (counted) when it was not there. */
int alloc_table_remove(struct alloc_table *t, uint64_t addr);
/* ADDR now holds SIZE bytes; returns 0 or -ENOENT. */
int alloc_table_resize(struct alloc_table *t, uint64_t addr, uint64_t size);
const struct alloc_rec *alloc_table_find(const struct alloc_table *t, uint64_t addr);
/* The entry at ADDR, to update in place (valid until the next add or
 * remove, which may move entries), or NULL. */
struct alloc_rec *alloc_table_get(struct alloc_table *t, uint64_t addr);
/* Starts (emptying it) or stops the change log T->log. */
void alloc_table_log_start(struct alloc_table *t);
void alloc_table_log_stop(struct alloc_table *t);
/* Frees the table and its log. */
void alloc_table_free(struct alloc_table *t);

/* Iteration: for (i = 0; i < t->cap; i++) if (t->slots[i].addr) ... */

#endif
