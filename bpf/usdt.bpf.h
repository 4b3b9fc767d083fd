/* The preload library's probe sites (bpf/abi/preload.h): dwleak:alloc
 * after an allocation returned, dwleak:free before a block is released.
 * The library has already decided what fires (sampling, nesting), so an
 * allocation site makes the record and the walk, nothing else: no pending
 * call, no return probe.  The walk starts where the library's caller
 * called it, as if at the entry of the allocator function the library
 * forwarded to: the same frames, and the same stack id, a uprobe at that
 * function's entry gets, and no frame of the library.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_USDT_BPF_H
#define DWLEAK_USDT_BPF_H

#include "arch.bpf.h"
#include "maps.bpf.h"
#include "guard.bpf.h"
#include "snap.bpf.h"
#include "mappings.bpf.h"
#include "calls.bpf.h"
#include "preload.h"

/* The registers the walk starts from: rip the allocator function, rsp
 * the slot of the return address into the library's caller, rbp the
 * caller's (the library never changes rbp: built with -ffixed-rbp).  Per
 * CPU, as walk_dispatch reads registers through a struct pt_regs, which
 * the BPF stack has no room for beside the walk's own state; filled and
 * read between walker_enter and walker_leave only. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pt_regs);
} site_regs SEC(".maps");

/* dwleak:alloc fired: ptr, size, kind, the function forwarded to, the
 * caller's stack pointer (arguments 1-5; the sixth, the return address
 * into the caller, is read by arch_site_regs where it is not at [sp]). */
static __always_inline int site_alloc(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), ptr = PT_REGS_PARM1(ctx), size = PT_REGS_PARM2(ctx);
	__u64 real = PT_REGS_PARM4(ctx), sp = PT_REGS_PARM5(ctx), stack_id = 0, fp_stack_id = 0;
	__u32 kind = (__u32)PT_REGS_PARM3(ctx), tgid = DWLEAK_COOKIE_TGID(cookie), zero = 0;
	struct snap_ctx sn = {};
	struct thread_state *ts;
	struct pt_regs *regs;
	bool own;

	if (!probe_in_target(cookie) || !ptr || kind >= ALLOC_KIND_COUNT)
		return 0;
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts)
		return 0;
	count(CNT_ALLOC_CALLS);
	own = walker_enter();
	regs = own ? bpf_map_lookup_elem(&site_regs, &zero) : NULL;
	if (regs) {
		arch_site_regs(regs, ctx, real, sp);
		sn.limit = stack_limit(ts, sp);
		sn.want = ts->snap_hint;
		snap_take(&sn, sp);
		walk_dispatch(regs, kind, tgid, ts, &sn, true, &stack_id, &fp_stack_id);
		stack_learn(ts, &sn);
		if (unwind_mode & UNWIND_MODE_DWARF)
			ts->snap_hint = sn.want < STACK_SNAP - 512 ? (sn.want + 512) & ~255ull : STACK_SNAP;
	} else {
		walk_dispatch(ctx, kind, tgid, ts, &sn, false, &stack_id, &fp_stack_id);
	}
	if (own)
		walker_leave();
	emit_alloc(AEV_ALLOC, tgid, ptr, size, stack_id, fp_stack_id, kind);
	return 0;
}

/* dwleak:free fired: ptr, and whether realloc was given it. */
static __always_inline int site_free(struct pt_regs *ctx, __u64 ptr, __u64 how)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);

	if (!ptr || !probe_in_target(cookie))
		return 0;
	count(CNT_FREE_CALLS);
	emit_free(how == DWLEAK_PRELOAD_REALLOC_FREE ? AEV_REALLOC_FREE : AEV_FREE, DWLEAK_COOKIE_TGID(cookie), ptr);
	return 0;
}

#endif
