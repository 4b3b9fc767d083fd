/* The preload library's stack walks of its own process (issue 24: one
 * walker, two builds): the DWARF walk with bpf/abi/unwind_step.h, the
 * step the kernel program takes, over an unwind image
 * (base/unwind_image.h), and the frame-pointer walk; the registers of a
 * point in the program, and the calling thread's stack bounds, which
 * every read of the walks is checked against.  No allocation, no libc
 * call and no system call on a walk: the library is the allocator's
 * caller. */
#ifndef DWLEAK_PRELOAD_WALK_H
#define DWLEAK_PRELOAD_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "dwleak.h"	  /* DWLEAK_MAX_FRAMES, DWLEAK_FRAME_EXACT, enum walk_end */
#include "unwind_image.h" /* base/ */

/* An image checked by walk_image_check: pointers into its blob, which the
 * caller keeps alive and unchanged while it walks with it; and its rule
 * cache (walk_image_cache), none until one is given. */
struct walk_image {
	const uint8_t *base;
	const struct unwind_image_mapping *maps;
	const struct unwind_image_table *tables;
	uint32_t nmappings;
	uint32_t ntables;
	uint64_t *cache;     /* 1 << cache_bits slots, or NULL: every rule searched */
	uint32_t cache_bits; /* WALK_CACHE_MIN_BITS..WALK_CACHE_MAX_BITS, 0 without */
	uint32_t pad;
};

/*
 * Checks the LEN bytes at BLOB against unwind_image.h's contract (the
 * header, every offset and count, the mappings' order, every page's rows
 * and every row's rule; BLOB itself 8-byte aligned) and on success fills
 * *OUT for the walks.  Reads BLOB only, within LEN.  Returns 0, -EINVAL
 * (BLOB NULL or misaligned, LEN shorter than the header), -EPROTO (not an
 * image of this version) or -EBADMSG (an offset, count or index out of
 * range, mappings out of order).  O(rows): made once, when an image is
 * installed, so that a walk checks nothing but its own bounds.
 */
int walk_image_check(const void *blob, size_t len, struct walk_image *out);

/*
 * The rule cache: a frame's rule found by its lookup pc in one load, not
 * by the mapping and row searches (a walk costs ~25 ns a frame without
 * it, most of it the row search).  Direct-mapped, slot by a hash of the
 * pc, shared by every thread that walks with the image and taken without
 * a lock: each slot is one aligned 64-bit word, read and written whole
 * (relaxed atomics), so a slot read while another thread writes it is the
 * old entry or the new one, each complete.  A slot names the rule by its
 * table and index in the image, so it holds for that image only, and is
 * bounds-checked (table < ntables, rule < the table's nrules) before it
 * is used: a slot out of range is a miss, searched and written again.
 *
 * A pc's slot, with B = cache_bits, is WALK_CACHE_SLOT(pc, B): its low B
 * bits xor the B above them (shifts and an xor, not a multiply: the slot's
 * address is on the walk's one chain of dependent loads, frame after
 * frame, where each cycle counts); its tag, pc >> B, and the slot name the
 * pc exactly.  The slot's word:
 *   bit 63           1: in use (a zero word is empty)
 *   bits 16+B .. 62  the tag
 *   bits 16 .. 15+B  the table's index in the image
 *   bits 0 .. 15     the rule's index in the table (rows name 16 bits)
 * So pcs at or above 2^47 (none in x86-64 user space) and tables at index
 * 2^B or above are never cached: their frames are searched every time,
 * counted in walk_frames.cache_misses.  Only rules a walk can step with
 * are written (a pc in no mapping or with no rule is searched again).
 */
#define WALK_CACHE_MIN_BITS 4  /* 16 slots, 16 tables: for tests that want evictions */
#define WALK_CACHE_MAX_BITS 20 /* 8 MiB; more memory is not used */
#define WALK_CACHE_PC_BITS 47
#define WALK_CACHE_SLOT(pc, bits) (((pc) ^ (pc) >> (bits)) & ((1ull << (bits)) - 1))

/*
 * Gives IMAGE (filled by walk_image_check) a rule cache in the LEN bytes
 * at MEM, which the caller owns and keeps while walks use IMAGE: the
 * largest power of two of 8-byte slots that fits, up to 1 <<
 * WALK_CACHE_MAX_BITS, every one emptied (so a new image starts cold).
 * MEM NULL (LEN ignored) takes the cache away.  Not while another thread
 * walks with IMAGE, and MEM not shared with another image's cache while a
 * walk with that one may run: its entries name the other image's rules.
 * Returns the number of slots (0 for MEM NULL), or -EINVAL: MEM not
 * 8-byte aligned or LEN below 8 << WALK_CACHE_MIN_BITS.
 */
int walk_image_cache(struct walk_image *image, void *mem, size_t len);

/* The registers a walk starts from: PC, and the frame's stack pointer
 * and frame pointer (rsp and rbp; aarch64: sp and x29).  exact_pc: PC is
 * not a return address (a function's first instruction, as at the kernel
 * program's probes, or an interrupted pc), so its rule is looked up at PC
 * itself, and the caller's return address is the word at SP (x86_64) or
 * LR (aarch64's x30, read only when exact_pc: no frame is set up yet); 0:
 * PC is a return address, looked up in the call before it. */
struct walk_regs {
	uint64_t pc;
	uint64_t sp;
	uint64_t bp;
	uint32_t exact_pc;
	uint32_t pad;
	uint64_t lr;
};

/* aarch64: the bits of a code address that hold a pointer authentication
 * code, cleared from every return address a walk recovers: bits 54..48,
 * the kernel's user instruction mask with 48-bit virtual addresses (the
 * kernel program's pac_mask, bpf/arch.bpf.h).  Clearing them from an
 * address that has no code changes nothing. */
#define WALK_A64_PAC_MASK 0x007f000000000000ull

/*
 * Stores in *OUT the registers of the function that calls it, as they
 * will be when this call returns: pc the return address (exact_pc 0), sp
 * the caller's stack pointer after the return, bp its rbp or x29
 * (untouched in the library: built -ffixed-rbp; aarch64's GCC never
 * allocates x29), lr 0.  Assembly; reads no memory but the return
 * address.
 */
void walk_regs_capture(struct walk_regs *out);

/* The stack memory a walk may read: [lo, hi). */
struct walk_bounds {
	uint64_t lo;
	uint64_t hi;
};

/*
 * The calling thread's stack: the mapping of /proc/self/maps that holds
 * SP (the caller's rsp, or any address on its stack), read with raw
 * openat/read system calls into a buffer on the stack (no allocation,
 * errno kept), remembered per thread (initial-exec TLS) and read again
 * only when SP leaves it (the main thread's stack grew, a signal's
 * alternate stack).  Not pthread_getattr_np: glibc (2.36) allocates in it
 * for every thread (the affinity mask) and reads the maps with stdio for
 * the main one.  Returns 0 with *OUT set, -ENOENT when no mapping holds
 * SP, or the negative errno of the open or read.
 */
int walk_stack_bounds(uint64_t sp, struct walk_bounds *out);

/* Where a walk's frames were last written whole into the thread's ring
 * (walk_ring.h's walk_ring_put, NAME; walk_ring_abi.h's Stacks named
 * once): kept with a remembered walk, forgotten when its memo entry takes
 * other frames. */
struct walk_stack_name {
	uint64_t epoch; /* the ring's stream they were written in (walk_ring_put's); 0: not written */
	uint32_t kind;	/* that record's kind */
	uint32_t slot;	/* the name: the memo entry's index */
};

/* A walk's frames: pcs[0] is the start's pc; each later one is a return
 * address, or, with DWLEAK_FRAME_EXACT set, a pc that is not one (a
 * signal trampoline's first byte, the pc it interrupted): the kernel
 * program's stack_trace.pcs.  END is why the walk stopped (enum
 * walk_end): WALK_END_TRUNCATED when DWLEAK_MAX_FRAMES were not enough,
 * counted by the caller.  cache_misses: the frames whose rule the DWARF
 * walk searched for (every frame without a cache; a slot empty, another
 * pc's, out of range or not cacheable), for the caller to count; 0 from
 * the FP walk.  remembered: 1 when walk_dwarf_memo took the frames from
 * its memo, else 0. */
struct walk_frames {
	uint64_t pcs[DWLEAK_MAX_FRAMES];
	uint32_t n;
	uint32_t end;
	uint32_t cache_misses;
	uint32_t remembered;
	struct walk_stack_name *name; /* the memo entry's name when it holds these frames, else NULL */
};

/*
 * The DWARF walk: from REGS, frame by frame with IMAGE's rules (checked by
 * walk_image_check) and bpf/abi/unwind_step.h's step, into *F.  Every
 * stack word it reads lies in B ([lo, hi), the thread's stack: a read
 * that would leave it ends the walk with WALK_ERR_READ, a signal frame's
 * too), so a walk never faults while B is mapped.  A pc in no mapping
 * ends it with WALK_ERR_NO_MAPPING, one with no rule with WALK_ERR_NO_FDE.
 * With IMAGE's cache, the frames are the same as without it; the rules it
 * searched for are written to it.  Returns F->n.
 */
uint32_t walk_dwarf(const struct walk_image *image, const struct walk_regs *regs, const struct walk_bounds *b,
		    struct walk_frames *f);

/*
 * Whole walks remembered, per thread: the kernel program's walk_memo
 * (bpf/walk.bpf.h) in the library.  A DWARF walk depends on nothing but
 * its start (pc, sp, and rbp if a rule used it before any frame restored
 * it), the image, the stack's bounds and the stack words it read (the rbp
 * a frame restored counts once a rule uses it: a general register in code
 * built without frame pointers, which changes at every call).  A walk
 * that starts where a remembered one did, with the same image and bounds,
 * and finds each of those words holding the value it read, has the same
 * frames: they are taken from the memo, one load and compare a word
 * instead of a rule's lookup and a step a frame.  Only walks that ended
 * well (WALK_END_OK, WALK_END_ZERO_RA, WALK_END_TRUNCATED) with at most
 * WALK_MEMO_FRAMES frames and WALK_MEMO_WORDS words read are kept: one
 * that ended in an error (a pc in no mapping, no rule, a read refused) is
 * made again.
 *
 * Two-way set-associative by the start's sp and the return address at
 * it (a service's request path allocates from a handful of places, whose
 * walks would evict each other in a direct-mapped memo: redis SET+GET
 * found 55% of its walks in eight direct-mapped entries), the entry of
 * the set used least recently replaced.  A memo belongs to one
 * thread (its walks only: no lock, no atomics) and must not be used by a
 * signal handler while its thread uses it: the caller's to ensure.  Zeroed
 * memory is an empty memo; any bytes are safe (an entry is used only when
 * its key and every word match, and a word is read only inside the walk's
 * bounds), so memory a thread that ended left is fine too.
 * x86_64: on aarch64 (its step notes no words) every walk is made.
 */
#define WALK_MEMO_ENTRIES 32  /* a power of two: 16 sets of two */
#define WALK_MEMO_WORDS 96    /* stack words a remembered walk read, at most */
#define WALK_MEMO_FRAMES 64   /* frames a remembered walk has, at most */

struct walk_memo_entry {
	uint64_t pc0;	      /* the start's pc; 0: empty */
	uint64_t sp0;
	uint64_t bp0;	      /* compared only when use_bp0 */
	uint64_t lo, hi;      /* the bounds it was walked in */
	const struct walk_image *image;
	uint32_t exact_pc;    /* the start's walk_regs.exact_pc */
	uint32_t use_bp0;     /* a rule used the start's rbp */
	uint32_t nwords;
	uint32_t n;	      /* its frames and end (walk_frames) */
	uint32_t end;
	uint32_t used;	      /* the memo's clock when last used: the older of a set goes */
	struct walk_stack_name name; /* the recorder's (walk_frames.name); epoch 0 when filled */
	uint32_t off[WALK_MEMO_WORDS]; /* each word read: its address - sp0 */
	uint64_t val[WALK_MEMO_WORDS]; /* ... and the value it held */
	uint64_t pcs[WALK_MEMO_FRAMES];
};

/* The memo; whether a walk came from it is F->remembered (the library
 * counts those in its ring's header). */
struct walk_memo {
	uint32_t clock;	 /* counts the memo's uses */
	uint32_t pad;
	struct walk_memo_entry e[WALK_MEMO_ENTRIES];
};

/*
 * walk_dwarf with the memo M (NULL: walk_dwarf): the remembered frames
 * when an entry matches (F->cache_misses 0, F->remembered 1), else the
 * walk made and remembered in its entry when it can be.  F's frames and
 * end are walk_dwarf's either way; F->name the entry's name when the
 * entry holds them (walk_ring_put names them), else NULL.  Returns F->n.
 */
uint32_t walk_dwarf_memo(const struct walk_image *image, const struct walk_regs *regs, const struct walk_bounds *b,
			 struct walk_memo *m, struct walk_frames *f);

/*
 * The frame-pointer walk (--unwind fp): pcs[0] REGS's pc, then (exact_pc)
 * the word at sp (aarch64: lr), then the rbp (x29) chain as the kernel program's fp_walk
 * takes it (the return address above each saved rbp; rbp 0 ends it, a
 * chain that does not climb the stack is WALK_ERR_RBP_UNKNOWN), every
 * read inside B.  Returns F->n.
 */
uint32_t walk_fp(const struct walk_regs *regs, const struct walk_bounds *b, struct walk_frames *f);

#endif
