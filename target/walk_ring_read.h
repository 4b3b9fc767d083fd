/* The preload library's per-thread rings of walked records
 * (bpf/abi/walk_ring_abi.h), drained by dwleak out of the running process:
 * the directory, each LIVE slot's ring header and its records from its
 * tail to its published head, every field checked, each valid record
 * handed to a callback.  The bytes are the process's, so untrusted: a
 * corrupt ring is an error of that ring (a message saying what was
 * wrong), never a crash, a read out of what it names, or an effect on
 * another ring.  Pure apart from its callbacks; fuzzed
 * (fuzz_walk_ring).  session/proc_rings.c drains with it. */
#ifndef DWLEAK_WALK_RING_READ_H
#define DWLEAK_WALK_RING_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "walk_ring_abi.h"

/* Reads LEN bytes of the process's memory at ADDR into BUF: 0, or a
 * negative errno (all of it or nothing).  Each call must read memory as
 * it is when called (process_vm_readv does): a ring's header is read
 * before its records, by an earlier call, and what the writer published
 * before that header read is then whole. */
typedef int (*walk_ring_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

/* Writes LEN bytes at BUF into the process's memory at ADDR: 0, or a
 * negative errno.  The drain writes one word with it per ring it reads
 * records of: the ring's CLAIMED (walk_ring_abi.h's Cancelling), before
 * it reads them. */
typedef int (*walk_ring_write_fn)(void *ctx, uint64_t addr, const void *buf, size_t len);

/* One record, as handed to the callback. */
struct walk_ring_rec {
	uint32_t slot;	  /* the directory's slot */
	uint32_t tid;	  /* the thread that wrote it */
	uint32_t type;	  /* WALK_RING_REC_ALLOC, _FREE, _REALLOC_FREE or _CANCELLED (an
			   * allocation freed before it was claimed, at FREED_TSC) */
	uint32_t kind;	  /* enum alloc_kind, < ALLOC_KIND_COUNT */
	uint32_t end;	  /* enum walk_end, < WALK_END_COUNT */
	uint32_t fp;	  /* 0 or 1 */
	uint32_t nframes; /* <= DWLEAK_MAX_FRAMES; 0 in a record that names its stack (see
			   * walk_ring_names_resolve) */
	uint32_t named;	  /* an allocation's: WALK_RING_FLAG_STACK_DEF (its frames define
			   * stack NAME of the ring), WALK_RING_FLAG_STACK_REF (it has those
			   * frames), or 0 */
	uint32_t name;	  /* < WALK_RING_STACK_SLOTS */
	uint32_t pad;
	uint64_t pos;	  /* its position in the ring */
	uint64_t tsc;	  /* when it was written (a CANCELLED one: its allocation's) */
	uint64_t freed_tsc; /* CANCELLED: when its free cancelled it (>= tsc); else 0 */
	uint64_t addr;	  /* not 0 */
	uint64_t size;
	const uint64_t *pcs; /* NFRAMES; valid during the call only */
};

/* Takes one record: 0 to go on, anything else to stop the drain there
 * (that record is not consumed: its ring's new tail stays before it). */
typedef int (*walk_ring_record_fn)(void *ctx, const struct walk_ring_rec *rec);

/* One LIVE slot's ring, drained. */
struct walk_ring_ring {
	uint32_t slot;
	uint32_t tid;	     /* the slot's */
	uint32_t life;	     /* the header's (a new owner changes it) */
	uint32_t data_bits;
	uint64_t ring;	     /* the header's address */
	uint64_t tail_addr;  /* where its TAIL is (walk_ring_tail_write) */
	uint64_t tail;	     /* as read */
	uint64_t new_tail;   /* past the last record consumed (TAIL when none) */
	uint64_t published;  /* as read (the lower of the two reads around the claim): NEW_TAIL
			      * reaches it when all was read */
	bool taken_back;     /* the second read's PUBLISHED was lower: records taken back */
	bool short_of;	     /* the second read's was higher: a record crossing PUBLISHED is
			      * the next drain's */
	uint64_t head;
	uint64_t records;    /* the header's counters: written, dropped (ring full), taken back,
			      * walks the thread's memo answered */
	uint64_t dropped;
	uint64_t retracted;
	uint64_t remembered;
	uint64_t delivered;  /* records handed to the callback by this drain */
	/* 0, or why this ring was not (fully) read: the callback's error,
	 * -ENODATA (its header reads 0: wiped, a fork's copy), -EPROTO (not a
	 * ring of this layout), -EBADMSG (a field, position or record out of
	 * bounds: WHY says which), or the read's error */
	int err;
	char why[124];
};

/* A drain of the directory. */
struct walk_ring_drain {
	uint64_t dir;	   /* its address */
	uint32_t n;	   /* entries of ring[]: the LIVE slots, in slot order */
	uint32_t data_bits; /* the directory's, for new rings */
	uint64_t no_slot, no_map, no_claim, reclaimed; /* its counters */
	uint64_t stopped;  /* its stopped word, as the process wrote it (untrusted) */
	uint64_t delivered; /* records handed on, every ring */
	uint32_t bad;	   /* rings with an error */
	/* FREE slots that keep their ring mapped (handed back, for the next
	 * thread to claim): where each ring is and its size, as its header
	 * says (bounds checked, nothing more), for a leak check to leave out
	 * of its roots (the stale records hold block addresses) */
	uint32_t nidle;
	struct walk_ring_idle {
		uint64_t ring;
		uint32_t data_bits;
		uint32_t pad;
	} idle[WALK_RING_SLOTS];
	struct walk_ring_ring ring[WALK_RING_SLOTS];
	char why[128];	   /* the directory's error, "" when read */
};

/* Records read per call of the read callback, at most. */
#define WALK_RING_READ_CHUNK 65536

/*
 * Reads the directory at DIR (through READ_MEM, RCTX), then each LIVE
 * slot's ring: its header, checked (magic, version, bits, mask, tid, tail
 * <= published <= head, head - tail <= the data size, positions 8-byte
 * aligned, no ring overlapping another or the directory), then, when it
 * has records, its CLAIMED written (WRITE_MEM, RCTX: PUBLISHED as read;
 * its failure is the ring's error, nothing of it read) and its header
 * read again (Taking back: the lower PUBLISHED of the two is read up to),
 * then its records from TAIL to PUBLISHED in chunks of WALK_RING_READ_CHUNK bytes, each
 * checked (its check word's position and type, a pad not at offset 0 nor
 * past PUBLISHED, a record within the data area and PUBLISHED, nframes,
 * kind, end, fp, pad, addr) and handed to ON_RECORD (CCTX) in ring order.
 * A ring's first bad record ends that ring (its err and why say what, its
 * new_tail stays before it); other rings go on.  WRITE_MEM NULL: nothing
 * claimed, for a reader that only looks (the library may cancel a record
 * such a reader reads as an allocation).
 * Fills *OUT (the caller's; large: WALK_RING_SLOTS rings).  Returns 0
 * when the directory was read (see each ring's err and OUT->bad), the
 * callback's nonzero result (the drain stopped there; rings after it not
 * read, n counts those read), or a negative errno with OUT->why: the
 * read's error, -EPROTO (no directory of this layout), -EBADMSG (its
 * address), -ENOMEM (a chunk buffer).
 */
int walk_ring_drain(walk_ring_read_fn read_mem, walk_ring_write_fn write_mem, void *rctx, uint64_t dir,
		    walk_ring_record_fn on_record, void *cctx, struct walk_ring_drain *out);

/* The tail write-back after a drain: whether ring R's TAIL must be
 * written (records were consumed): 1 with *ADDR (R->tail_addr) and
 * *VALUE (R->new_tail) to write, 8 bytes little-endian, through
 * /proc/PID/mem; 0 when nothing was consumed.  The writer frees the
 * records below it.  Write it only for a slot still LIVE with R's tid. */
int walk_ring_tail_write(const struct walk_ring_ring *r, uint64_t *addr, uint64_t *value);

/* One write into the process: LEN bytes (4 or 8) of VALUE at ADDR. */
struct walk_ring_write {
	uint64_t addr;
	uint64_t value;
	uint32_t len;
	uint32_t pad;
};

/*
 * Handing ring R's slot back (walk_ring_abi.h's Slots) once its thread no
 * longer exists: fills W with the writes to make, in order (the slot's
 * state FREE, its tid 0, the directory's reclaimed count + 1) and returns
 * their number, 3; or -EBUSY while R holds published records not yet
 * consumed and had no error (drain it again first).  D is the drain R
 * came from (its reclaimed count is the one increased).
 */
int walk_ring_reclaim_plan(const struct walk_ring_drain *d, const struct walk_ring_ring *r,
			   struct walk_ring_write w[3]);

/*
 * The stack names of one process's rings (walk_ring_abi.h's Stacks named
 * once), kept by its reader from drain to drain: each ring's definitions,
 * so that a record that names a stack is handed on with its frames.
 * walk_ring_names_new returns an empty set (NULL: no memory); free it with
 * walk_ring_names_free (NULL is fine).
 */
struct walk_ring_names;
struct walk_ring_names *walk_ring_names_new(void);
void walk_ring_names_free(struct walk_ring_names *n);

/*
 * Record REC as read (a drain's callback gets it; call this first, for
 * every record, cancelled ones included, in each ring's order): a
 * definition is kept (its frames copied); a record that names a stack
 * gets that definition's frames (REC->pcs and nframes, valid until the
 * name is defined again).  Returns 0; -ENOENT for a name with no
 * definition of the same kind and end in that ring (a record written
 * before this reader attached, or a corrupt ring: that record's stack is
 * lost, REC left with no frames); -ENOMEM for a definition that could not
 * be kept (its later names are -ENOENT).
 */
int walk_ring_names_resolve(struct walk_ring_names *n, struct walk_ring_rec *rec);

#endif
