/* One DWARF walk's state: its registers, the walk_memo slot it records
 * into, its stack snapshot and its cache of the mappings it met.  A type
 * of its own because two parts step it: mappings.bpf.h fills the cache,
 * walk.bpf.h the rest.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_WALK_CTX_BPF_H
#define DWLEAK_WALK_CTX_BPF_H

#include "snap.bpf.h"
#if defined(__TARGET_ARCH_arm64)
#include "unwind_step_a64.h"
/* the step's registers: pc, sp, x29, x30 (bpf/abi/unwind_step_a64.h) */
typedef struct unwind_regs_a64 walk_regs;
#else
#include "unwind_step.h"
/* the step's registers: pc, rsp, rbp (bpf/abi/unwind_step.h) */
typedef struct unwind_regs walk_regs;
#endif

/* A mapping the walk met (slot_fill). */
struct vma_slot {
	__u64 start;
	__u64 end;
	__u64 bias; /* ELF address = pc - bias */
	__u32 table_id;
	__u32 rule_base;
	__u32 state; /* enum slot_state */
	__u32 pad;
};

enum slot_state { SLOT_EMPTY = 0, SLOT_TABLE, SLOT_NO_TABLE, SLOT_ANON };

/* Where a walk starts: the registers at the probe, and whose they are. */
struct walk_start {
	__u64 pc;
	__u64 sp;
	__u64 bp; /* the frame register: rbp, or x29 */
	__u32 tgid;
	__u32 pslot; /* the process's proc_maps slot (thread_proc_slot), or DWLEAK_NO_SLOT */
	__u32 image; /* its proc_info.image: the stack id's seed */
	__u32 pad;
};

/* The shared step (bpf/abi/unwind_step.h) is given r; its hooks find the
 * rest of the walk from it (walk_of). */
struct walk_ctx {
	walk_regs r;	 /* the frame's registers: first, see walk_of */
	__u64 hash;
	__u64 tramp;	 /* this mm's uretprobe trampoline, 0 if none */
	__u32 n;
	__u32 end;	 /* enum walk_end */
	__u32 tgid;
	__u32 pslot;	 /* the process's proc_maps slot, or DWLEAK_NO_SLOT */
	__u32 next_slot;
	__u32 misses;	 /* rule_cache misses */
	__u32 memo_idx;	 /* walk_memo slot being filled */
	__u32 tramps;	 /* uretprobe trampolines met (arm64: matched by order) */
	__u64 sp0;	 /* rsp at the start */
	__u32 nrec;	 /* words recorded in the slot */
	__u8 rec;	 /* still recording (the walk can be remembered) */
	__u8 bp_reg;	 /* r.bp is still the start's rbp register */
	__u8 use_bp0;	 /* a rule used it */
	__u8 bp_unrec;	 /* r.bp was restored from the stack word at bp_addr, and
			  * no rule has used it yet: not recorded (see bp_use) */
	__u64 bp_addr;
	struct snap_ctx snap;
	struct vma_slot slot[DWLEAK_VMA_CACHE];
};

_Static_assert(__builtin_offsetof(struct walk_ctx, r) == 0, "walk_of casts the registers back");

/* The walk whose registers R are (a step's hooks are given R only). */
static __always_inline struct walk_ctx *walk_of(walk_regs *r)
{
	return (struct walk_ctx *)r;
}

#endif
