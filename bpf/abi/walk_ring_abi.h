/* The layout of the preload library's per-thread rings of walked records
 * (preload/walk_ring.c writes them in its own memory; target/walk_ring_read.c
 * drains them with process_vm_readv): issue 24's hot path kept in the
 * process, no kernel entry per allocator call.  A contract between the
 * library, which writes, and dwleak, which reads it as untrusted bytes and
 * writes back two kinds of word (a ring's tail, a slot handed back).
 * Fixed-width types only; every struct's size is asserted.  Include-only. */
#ifndef DWLEAK_WALK_RING_ABI_H
#define DWLEAK_WALK_RING_ABI_H

#include <linux/types.h>

/*
 * How dwleak finds them: the control block's rings_addr (preload.h) holds
 * the address of the library's struct walk_ring_dir, its own static
 * variable, fixed at load.  The directory names up to WALK_RING_SLOTS
 * rings, one per thread that recorded, each a private anonymous mapping
 * of its own (page-aligned, MADV_WIPEONFORK: a fork's child and the leak
 * check's snapshot see it zeroed, so neither inherits the parent's records
 * nor finds block addresses in them): a struct walk_ring_header, then
 * 2^data_bits bytes of records at WALK_RING_DATA_OFFSET, then
 * WALK_RING_SCRATCH_BYTES of the thread's own (its remembered walks:
 * stack words and return addresses), which dwleak never reads and its
 * leak check counts, like the rest of the mapping, as the library's
 * memory, not the program's (WALK_RING_MAP_BYTES).
 *
 * Positions.  HEAD, PUBLISHED and TAIL are absolute byte positions (they
 * only grow; a record at position P lies at offset P & MASK of the data
 * area), so full and empty are never confused and a ring reused by
 * another thread goes on from where it was.  Always
 *     tail <= published <= head,   head - tail <= 2^data_bits.
 *   head       the writer's: reserved up to here (a compare-exchange, so a
 *              signal handler of the same thread that records in the
 *              middle of a record reserves after it)
 *   published  the writer's: every record below it is whole.  A thread's
 *              outermost record (not one of a signal handler made inside
 *              another) raises it to HEAD once written, as perf's ring does
 *              with nested NMIs; it goes down only when a
 *              record is taken back (see Taking back)
 *   tail       dwleak's: records below it are read; the writer never
 *              overwrites them (a record that does not fit is dropped and
 *              counted in DROPPED, the writer never waits)
 *   claimed    dwleak's: records below it may have been read (it is
 *              written before they are, see Cancelling); claimed >= tail
 * dwleak reads the header (one read); when there is something to read it
 * writes CLAIMED = PUBLISHED as read (P0), fences, reads the header again
 * (P2: PUBLISHED may have gone down and up meanwhile, see Taking back),
 * then reads [tail, min(P0, P2)) (later reads: separate reads are
 * ordered; a record that crosses P0 where P2 is above it is left for the
 * next drain), and writes TAIL back: 8 bytes each, through /proc/PID/mem,
 * while the slot is LIVE.
 *
 * Records.  Each is a struct walk_ring_record and its NFRAMES pcs, 40 +
 * 8 * NFRAMES bytes (8-byte aligned), never across the end of the data
 * area: a record that would be is put at offset 0 after a pad record
 * (type WALK_RING_REC_PAD, its check word only) that fills the rest.  A
 * record's CHECK word is WALK_RING_CHECK(position, type), written last,
 * so a record read at the wrong place, or left from an earlier lap, is
 * told from the one expected.
 *
 * Ordering across threads.  Each record carries the TSC (rdtscp: invariant
 * and synchronized across CPUs on x86-64): a free is recorded before the
 * block is released, an allocation after the allocator returned it, so
 * for one address a free's tsc is below that of the allocation that
 * reuses it, whatever threads made them.  Within a ring records are in
 * reservation order (a signal handler's may come between two tscs of the
 * interrupted thread).  dwleak's rule: a free of an address it holds no
 * block for is held back until every ring was drained past its tsc
 * (every LIVE ring's published records read, and the drain started after
 * that tsc); an allocation of that address with an earlier tsc, read in
 * the meantime from any ring, is cancelled by it; a held free that meets
 * no such allocation is a free of a block from before the trace.
 *
 * Cancelling.  Most blocks live a few microseconds: an allocation freed
 * before dwleak read it need not reach dwleak at all.  The library keeps,
 * process-wide, where each recent allocation's record is (its slot and
 * position); a free of that block (in any thread) changes the record's
 * check word from ALLOC to CANCELLING with a compare-exchange, when its
 * position is at or above CLAIMED, writes the time since the allocation
 * (its tsc minus the record's, saturated) into the record's PAD and makes
 * it CANCELLED (release), and then reads CLAIMED again: still at
 * or below the position, the free writes no record (dwleak, which writes
 * CLAIMED before it reads, will read the record cancelled); above it,
 * dwleak may have read the record before it was cancelled, so the free
 * is recorded as well (a free of a block dwleak may not hold: harmless,
 * by the ordering rule below).  Both sides fence between their write and
 * their read (a store-load order), so one of them sees the other's.  The
 * stamp keeps a drain's view whole: a block freed after the drain began
 * (its record cancelled between the header's read and the claim) is
 * still an allocation up to the drain's time, its free at TSC + PAD.  A
 * CANCELLING record (the free is under way, for nanoseconds) ends that
 * drain's reading of its ring, and is read again by the next.  The
 * control block turns cancelling on (control.rings_cancel).
 *
 * Taking back.  Most of those frees come right after their allocation,
 * in the same thread: the record is the last one of the thread's own
 * ring.  Where the control block allows it (control.rings_cancel ==
 * RETRACT: the library is the only one recording the process's calls,
 * so a pair that leaves no trace loses nothing), such a free takes the
 * record back instead of cancelling it, and the next record is written
 * where it was: dwleak reads nothing of the pair, and the thread writes
 * into the same few cache lines.  A record that defines a stack name is
 * never taken back (later records may name it): it is cancelled.  The
 * thread, outside any record of its own (nest 0: PUBLISHED == HEAD == the
 * record's end):
 *     published = pos  (sequentially consistent: a store-load order)
 *     if CLAIMED <= pos:  head = pos  (a compare-exchange: a signal
 *                         handler that reserved meanwhile keeps it)
 *     else, or when head moved:  the record is cancelled as above and
 *                         PUBLISHED raised to HEAD again
 * dwleak's claim (CLAIMED = P0, a store-load fence, then the second header
 * read) makes either the thread see CLAIMED above the record (it takes
 * nothing back), or dwleak see PUBLISHED at or below it (P2), and read no
 * byte of what is written there next; below min(P0, P2) every record is
 * whole.  RETRACTED counts the records taken back.
 *
 * Slots.  A thread claims a FREE slot on its first record: compare-
 * exchange of TID from 0 to its own, then (reusing the slot's ring when it
 * has one, else mapping one, RING written) the ring's header set up,
 * TAIL = CLAIMED = HEAD = PUBLISHED included (the only time the library
 * writes TAIL or CLAIMED: no reader drains a slot that is not LIVE), then STATE = LIVE
 * (release).  A thread never gives its slot back itself (it cannot know
 * it is ending); dwleak does, for a thread that no longer exists
 * (/proc/PID/task/TID gone), once it read what it wants of the ring:
 *     slot.state = FREE;  slot.tid = 0;  dir.reclaimed += 1
 * in that order (target/walk_ring_read.h's walk_ring_reclaim_plan gives
 * the writes; records left unread are lost, the next owner starts at
 * PUBLISHED).  The ring stays mapped for the next thread.  Threads that
 * found no free slot (counted in dir.no_slot, their records dropped) look
 * again only when RECLAIMED changes.  In a fork's child the library frees
 * every slot itself (its threads are gone there).
 */
#define WALK_RING_DIR_MAGIC 0x726964726b6c7764ull  /* "dwlkrdir", little-endian */
#define WALK_RING_MAGIC 0x676e69726b6c7764ull	   /* "dwlkring", little-endian */
#define WALK_RING_VERSION 5 /* 2: CLAIMED and CANCELLED records; 3: taking back, RETRACTED; 4: the
			     * scratch area, REMEMBERED; 5: stacks named once (FLAGS) */

/* The directory's slots: threads recording at one time. */
#define WALK_RING_SLOTS 256
/* Bounds of a ring's data area, 2^data_bits bytes: at least two records
 * of DWLEAK_MAX_FRAMES frames (1,056 bytes each): 4 KiB; at most 64 MiB. */
#define WALK_RING_BITS_MIN 12
#define WALK_RING_BITS_MAX 26
/* The size new rings get unless dwleak wrote another (dir.data_bits):
 * 1 MiB, about 5,000 records of 20 frames. */
#define WALK_RING_BITS_DEFAULT 20
/* Where the data area starts in a ring's mapping. */
#define WALK_RING_DATA_OFFSET 256
/* The thread's scratch memory after the data area (the library's walk
 * memo, preload/walk.h), and the whole mapping of a ring of 2^BITS bytes
 * of data. */
#define WALK_RING_SCRATCH_BYTES (64u << 10)
#define WALK_RING_MAP_BYTES(bits) (WALK_RING_DATA_OFFSET + (1ull << (bits)) + WALK_RING_SCRATCH_BYTES)
/* A ring's address: aligned to this at least (the library's are page-
 * aligned), below WALK_RING_ADDR_END. */
#define WALK_RING_ALIGN 64
#define WALK_RING_ADDR_MIN 4096ull
#define WALK_RING_ADDR_END (1ull << 56)

enum walk_ring_slot_state {
	WALK_RING_SLOT_FREE = 0,	/* no thread (TID 0), or a thread setting it up (TID set) */
	WALK_RING_SLOT_LIVE = 1,	/* TID's ring at RING: dwleak drains it */
};

struct walk_ring_slot {
	__u64 ring;  /* the ring's header; 0: none mapped yet */
	__u32 tid;   /* the thread that owns it; 0: free */
	__u32 state; /* enum walk_ring_slot_state */
};

_Static_assert(sizeof(struct walk_ring_slot) == 16, "walk_ring_slot layout");

struct walk_ring_dir {
	__u64 magic;	    /* WALK_RING_DIR_MAGIC */
	__u32 version;	    /* WALK_RING_VERSION */
	__u32 nslots;	    /* WALK_RING_SLOTS */
	__u32 slot_size;    /* sizeof(struct walk_ring_slot) */
	__u32 header_size;  /* sizeof(struct walk_ring_header) */
	__u32 record_size;  /* sizeof(struct walk_ring_record) */
	__u32 data_bits;    /* new rings' data area, 2^data_bits bytes; dwleak may write it
			     * (the library clamps it to the bounds) */
	__u64 pad0[4];
	/* counters (relaxed), their own line: records dropped for want of a ring */
	__u64 no_slot;	    /* every slot taken */
	__u64 no_map;	    /* a ring could not be mapped (no memory, a seccomp filter) */
	__u64 no_claim;	    /* a signal handler recorded while its thread claimed a slot */
	__u64 reclaimed;    /* dwleak's: slots it handed back (see above) */
	/* the library's: why it went back to its sites for good, enum
	 * dwleak_preload_rings_stopped (bpf/abi/preload.h; 0: it walks).  It
	 * stops walking in the process before it lets a seccomp filter in
	 * (the walk makes system calls inside allocator calls: a new thread's
	 * ring, its stack's bounds, a wait for room, which a filter may
	 * punish with SIGSYS); every later call fires its site.  Here, where
	 * dwleak reads at every drain. */
	__u64 stopped;
	/* dwleak's: 1 once a drain that began after STOPPED was set read and
	 * applied every record (the library waits for it, up to 200 ms,
	 * before its first call at a site) */
	__u64 stopped_acked;
	__u64 pad1[2];
	struct walk_ring_slot slot[WALK_RING_SLOTS];
};

_Static_assert(sizeof(struct walk_ring_dir) == 128 + 16 * WALK_RING_SLOTS, "walk_ring_dir layout");
_Static_assert(__builtin_offsetof(struct walk_ring_dir, no_slot) == 64, "counters on their own line");
_Static_assert(__builtin_offsetof(struct walk_ring_dir, slot) == 128, "slots after the counters");

struct walk_ring_header {
	/* set when a thread claims the ring */
	__u64 magic;	    /* WALK_RING_MAGIC */
	__u32 version;	    /* WALK_RING_VERSION */
	__u32 data_bits;    /* the data area: 2^data_bits bytes at WALK_RING_DATA_OFFSET */
	__u32 tid;	    /* the owner, as in its slot */
	__u32 life;	    /* claims of this ring so far: a new owner changes it */
	__u64 pad0[5];
	/* the writer's line */
	__u64 head;
	__u64 published;
	__u64 mask;	    /* 2^data_bits - 1 */
	__u64 records;	    /* records written (relaxed) */
	__u64 dropped;	    /* records dropped: the ring was full (dwleak slower than the thread) */
	__u64 retracted;    /* records taken back by their frees (relaxed; see Taking back) */
	__u64 remembered;   /* allocations whose walk the thread's memo answered (relaxed) */
	__u64 pad1;
	/* dwleak's line */
	__u64 tail;
	__u64 claimed;	    /* see Cancelling (the library sets it to TAIL at a claim) */
	__u64 pad2[6];
	__u64 pad3[8];
};

_Static_assert(sizeof(struct walk_ring_header) == WALK_RING_DATA_OFFSET, "walk_ring_header layout");
_Static_assert(__builtin_offsetof(struct walk_ring_header, head) == 64, "the writer's line");
_Static_assert(__builtin_offsetof(struct walk_ring_header, tail) == 128, "dwleak's line");

enum walk_ring_type {
	WALK_RING_REC_NONE = 0,	    /* never written: not a record */
	WALK_RING_REC_ALLOC = 1,	    /* ADDR now holds SIZE bytes; the pcs are its allocation's walk */
	WALK_RING_REC_FREE = 2,	    /* ADDR released (free, delete) */
	WALK_RING_REC_REALLOC_FREE = 3, /* ADDR given to realloc: moved or released */
	WALK_RING_REC_PAD = 4,	    /* the rest of the data area is unused: go on at offset 0 */
	WALK_RING_REC_CANCELLED = 5,    /* an ALLOC its process freed before dwleak claimed it */
	WALK_RING_REC_CANCELLING = 6,   /* ... being stamped with the free's tsc: read it later */
	WALK_RING_REC_TYPES,
};

/* A record's check word: its absolute position (the low 56 bits) and its
 * type. */
#define WALK_RING_CHECK(pos, type) (((__u64)(pos) << 8) | (__u64)(type))
#define WALK_RING_CHECK_POS(check) ((check) >> 8)
#define WALK_RING_CHECK_TYPE(check) ((check) & 0xff)
#define WALK_RING_POS_MASK ((1ull << 56) - 1)

struct walk_ring_record {
	__u64 check;	/* WALK_RING_CHECK(position, type), written last */
	__u8 nframes;	/* <= DWLEAK_MAX_FRAMES; 0 for a free */
	__u8 kind;	/* enum alloc_kind of the call */
	__u8 end;	/* enum walk_end: why the walk stopped */
	__u8 flags;	/* WALK_RING_FLAG_*: a frame-pointer walk; a stack named (see Stacks) */
	__u32 pad;	/* 0 in a free; CANCELLED: the free's tsc minus TSC (see Cancelling) */
	__u64 tsc;	/* rdtscp: when (see Ordering above) */
	__u64 addr;	/* the block, never 0 */
	__u64 size;	/* bytes asked for (an allocation); 0 for a free */
	__u64 pcs[];	/* NFRAMES, as struct stack_trace's (dwleak.h) */
};

_Static_assert(sizeof(struct walk_ring_record) == 40, "walk_ring_record layout");

/*
 * Stacks named once.  Most allocations come from a few call sites: a
 * thread's walks repeat (the library's memo of whole walks answers most
 * of them), and writing the same frames again and again is most of what
 * a record costs the process (a record of 20 frames fills three cache
 * lines the ring streams through) and most of what dwleak reads.  So an
 * ALLOC record may name its stack: STACK_DEF with its frames says that
 * stack STACK_SLOT(flags) of this ring is now these frames (and this
 * record's KIND and END); a later ALLOC record of the same ring with
 * STACK_REF and no frames (NFRAMES 0) has the frames of that name's last
 * definition, and the same KIND and END.  A definition stays a record of
 * the stream: a cancelled one still defines (dwleak reads its frames),
 * and one is never taken back (see Taking back).  A ring's names hold for
 * the owner and the tracer that wrote and read them: the library defines
 * a name again once the ring has a new owner (LIFE) or the control block
 * a new GENERATION (a new tracer, which never read the old definitions),
 * so a reader that finds a name it has no definition of (a record left
 * from before it attached, or a corrupt ring) loses that record's stack
 * only, and counts it.  Frees carry no name.
 */
#define WALK_RING_FLAG_FP 0x01	      /* a frame-pointer walk (else DWARF) */
#define WALK_RING_FLAG_STACK_DEF 0x02 /* the frames define stack STACK_SLOT */
#define WALK_RING_FLAG_STACK_REF 0x04 /* no frames: those of stack STACK_SLOT */
#define WALK_RING_FLAGS_NAMED (WALK_RING_FLAG_STACK_DEF | WALK_RING_FLAG_STACK_REF)
#define WALK_RING_STACK_SLOT_SHIFT 3
#define WALK_RING_STACK_SLOTS 32 /* names per ring */
#define WALK_RING_STACK_SLOT(flags) ((__u32)(flags) >> WALK_RING_STACK_SLOT_SHIFT)

/* A record of N frames, in bytes. */
#define WALK_RING_RECORD_BYTES(n) (sizeof(struct walk_ring_record) + 8 * (__u64)(n))

#endif
