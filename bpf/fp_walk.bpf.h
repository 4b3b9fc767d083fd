/* The frame-pointer walk (--unwind fp/both): the rbp (x29) chain, as
 * frame-pointer tools walk it, for comparison with the DWARF walk.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_FP_WALK_BPF_H
#define DWLEAK_FP_WALK_BPF_H

#include "constants.h"
#include "arch.bpf.h"
#include "maps.bpf.h"
#include "snap.bpf.h"
#include "stacks.bpf.h"


struct fp_ctx {
	__u64 bp;
	__u64 hash;
	__u32 n;
	__u32 end;
	struct snap_ctx snap;
};

/* One frame of the rbp chain: the return address sits above the saved
 * rbp, as every frame-pointer unwinder (perf, bpf_get_stack) assumes. */
static long fp_step(__u64 i, struct fp_ctx *f)
{
	struct stack_trace *st;
	__u64 ra, next;
	__u32 zero = 0, n = f->n;

	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 1;
	if (n >= DWLEAK_MAX_FRAMES) {
		f->end = WALK_END_TRUNCATED;
		return 1;
	}
	if (!f->bp) {
		f->end = WALK_END_OK;
		return 1;
	}
	if (snap_read(&f->snap, &ra, f->bp + 8) || snap_read(&f->snap, &next, f->bp)) {
		f->end = WALK_ERR_READ;
		return 1;
	}
	ra = ARCH_CODE_ADDR(ra);
	if (!ra) {
		f->end = WALK_END_ZERO_RA;
		return 1;
	}
	st->pcs[n] = ra;
	f->n = n + 1;
	f->hash = (f->hash ^ ra) * FNV64_PRIME;
	if (!next) {
		f->end = WALK_END_OK; /* rbp 0: the psABI's end of the frame chain (_start) */
		return 1;
	}
	if (next <= f->bp) {
		f->end = WALK_ERR_RBP_UNKNOWN; /* the chain must climb the stack */
		return 1;
	}
	f->bp = next;
	return 0;
}

/* Walks rbp from the probe.  Like perf since Linux 6.11 for uprobes at a
 * function's entry, the return address at [rsp] is taken as the caller's
 * frame first (no frame has been set up there yet).  Not inlined: called
 * from one place (walk_dispatch), clang would copy it into every program,
 * for a walk made only for comparison.  Returns the stack id (seeded with
 * IMAGE, as stack_walk's), or DWLEAK_STACK_NOT_STORED. */
static __noinline __u64 fp_walk(struct pt_regs *ctx, __u32 kind, __u32 image, struct snap_ctx *sn)
{
	struct fp_ctx f = { .bp = ARCH_FP(ctx), .hash = DWLEAK_FP_STACK_ID_SEED ^ kind ^ ((__u64)image << 32), .n = 2,
			    .snap = *sn };
	struct stack_trace *st;
	__u32 zero = 0;
	__u64 ra;

	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 0;
	st->pcs[0] = PT_REGS_IP(ctx);
	ra = arch_fp_entry_ra(ctx, &f.snap);
	st->pcs[1] = ra;
	f.hash = ((f.hash ^ st->pcs[0]) * FNV64_PRIME ^ ra) * FNV64_PRIME;
	f.end = WALK_END_TRUNCATED;
	bpf_loop(DWLEAK_MAX_FRAMES, fp_step, &f, 0);
	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 0;
	st->nframes = f.n;
	st->end = f.end;
	st->kind = kind;
	st->fp = 1;
	st->image = image;
	f.hash = (f.hash ^ f.end) * FNV64_PRIME;
	f.hash ^= f.hash >> 29;
	count(CNT_FP_WALKS);
	count_n(CNT_FP_FRAMES, f.n - 2); /* the walked ones, past ip and [rsp] */
	*sn = f.snap;
	return stack_store(f.hash, st);
}

#endif
