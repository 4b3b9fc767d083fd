/* Allocator bookkeeping: each call's entry and return, paired per thread
 * (pending calls, nesting, sampling), the records that tell user space
 * what now holds what, and the one walk dispatch every probe that walks
 * goes through.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_CALLS_BPF_H
#define DWLEAK_CALLS_BPF_H

#include "arch.bpf.h"
#include "maps.bpf.h"
#include "guard.bpf.h"
#include "snap.bpf.h"
#include "mappings.bpf.h"
#include "walk.bpf.h"
#include "fp_walk.bpf.h"

/* Records go without a wakeup: user space drains the ring on a timer, and
 * is woken only after every alloc_ring_wake records this CPU wrote. */
static __always_inline __u64 ring_flags(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&ring_records, &zero);

	if (n && !(++*n & (alloc_ring_wake - 1)))
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

static void emit_alloc(__u32 type, __u32 tgid, __u64 addr, __u64 size, __u64 stack_id, __u64 fp_stack_id,
		       __u32 kind)
{
	struct alloc_event *e = bpf_ringbuf_reserve(&alloc_events, sizeof(*e), 0);

	if (!e) {
		count(CNT_RING_FULL);
		return;
	}
	e->type = type;
	e->kind = kind;
	e->tgid = tgid;
	e->pad = 0;
	e->addr = addr;
	e->size = size;
	e->stack_id = stack_id;
	e->fp_stack_id = fp_stack_id;
	bpf_ringbuf_submit(e, ring_flags());
}

/* ADDR is released in process TGID (TYPE AEV_FREE), or given to realloc
 * (AEV_REALLOC_FREE): sent before the allocator can hand the block out
 * again. */
static void emit_free(__u32 type, __u32 tgid, __u64 addr)
{
	struct free_event *e = bpf_ringbuf_reserve(&alloc_events, sizeof(*e), 0);

	if (!e) {
		count(CNT_RING_FULL);
		return;
	}
	e->type = type;
	e->tgid = tgid;
	e->addr = addr;
	bpf_ringbuf_submit(e, ring_flags());
}

static __always_inline __u32 current_tgid(void)
{
	return bpf_get_current_pid_tgid() >> 32;
}

/* Whether an allocator probe fired in the process its link was made for
 * (COOKIE says which; see tgid_by_link). */
static __always_inline bool probe_in_target(__u64 cookie)
{
	return tgid_by_link || current_tgid() == DWLEAK_COOKIE_TGID(cookie);
}

/* Drops pending calls that cannot be live any more: the stack grows down,
 * so a call still running lies above SP; at SP itself only a tail call
 * (whose return slot then holds a uretprobe trampoline, not the saved
 * address) is live.  Stale entries come from a return we never saw, e.g.
 * a call already running when the return probe was attached. */
static void pending_prune(struct thread_state *ts, __u64 sp, __u64 ra)
{
	struct pending_call *top;
	__u32 i, d;

	for (i = 0; i < DWLEAK_MAX_PENDING; i++) {
		d = ts->depth;
		if (d == 0 || d > DWLEAK_MAX_PENDING)
			return;
		top = &ts->calls[(d - 1) & (DWLEAK_MAX_PENDING - 1)];
		if (top->ra_addr > sp || (top->ra_addr == sp && ra != top->ra))
			return;
		ts->depth = d - 1;
		count(CNT_PENDING_LOST);
	}
}

/* A call is nested (counted by its outer call) when it comes from inside
 * an allocator function (realloc calling malloc, operator new calling
 * malloc), or is a tail call reusing the return slot of the call just
 * made (operator new[] jumping to operator new).  A return address inside
 * an allocator function means a call of it is running, pending or not. */
static int call_nested(struct thread_state *ts, __u64 sp, __u64 ra, __u64 func)
{
	__u32 i, d = ts->depth;

	for (i = 0; i < DWLEAK_SKIPPED_FUNCS; i++)
		if (ra >= ts->skipped[i].start && ra < ts->skipped[i].end)
			return 1;
	if (ts->skip_sp == sp && ts->skip_ra == ra && ts->skip_func != func)
		return 1;
	if (d == 0 || d > DWLEAK_MAX_PENDING)
		return 0;
	if (ts->calls[(d - 1) & (DWLEAK_MAX_PENDING - 1)].ra_addr == sp)
		return 1;
	for (i = 0; i < DWLEAK_MAX_PENDING && i < d; i++) {
		if (ra >= ts->calls[i].func_start && ra < ts->calls[i].func_end)
			return 1;
	}
	return 0;
}

/* A call that cancelled its return probe: remember what call_nested needs. */
static void skip_remember(struct thread_state *ts, __u64 sp, __u64 ra, __u64 start, __u64 end)
{
	__u32 i;

	ts->skip_sp = sp;
	ts->skip_ra = ra;
	ts->skip_func = start;
	for (i = 0; i < DWLEAK_SKIPPED_FUNCS; i++)
		if (ts->skipped[i].start == start)
			return;
	i = ts->skip_next++ & (DWLEAK_SKIPPED_FUNCS - 1);
	ts->skipped[i].start = start;
	ts->skipped[i].end = end;
}

static __u64 sample_gap(void)
{
	__u32 i = bpf_get_prandom_u32() & (DWLEAK_SAMPLE_GAPS - 1);
	__u64 *gap = bpf_map_lookup_elem(&sample_gaps, &i);

	return gap ? *gap : sample_bytes;
}

/*
 * --sample-bytes: sample points fall on the thread's allocated bytes as a
 * Poisson process of rate 1/N (exponential gaps); an allocation is sampled
 * when a point falls in it, with probability 1 - exp(-size/N), which user
 * space divides by to estimate without bias.  By memorylessness, the next
 * point after a sampled allocation is a fresh gap past its end.
 */
static int sample_take(struct thread_state *ts, __u64 size)
{
	if (!sample_bytes)
		return 1;
	if (!ts->sample_init) {
		ts->sample_left = (__s64)sample_gap();
		ts->sample_init = 1;
	}
	ts->sample_left -= (__s64)size;
	if (ts->sample_left > 0)
		return 0;
	ts->sample_left = (__s64)sample_gap();
	return 1;
}

/*
 * The one place that decides which walks a probe makes, for every probe
 * that walks: none when the walker's buffers are busy (counted), none
 * under DWLEAK_BENCH_NO_WALK, else the DWARF walk, the frame-pointer walk
 * or both (--unwind); and what stack ids stand for walks not made.  TS is
 * the calling thread's state: its process's slot and image (looked up
 * once per thread).
 * OWN: the caller holds the buffers (walker_enter) and leaves them after;
 * it may have taken the snapshot SN already, and gets it back as the
 * walks left it.  *STACK_ID and *FP_STACK_ID come in 0; an id no walk
 * gives stays 0 (setting both here as well only makes clang lay out
 * alloc_enter differently).
 */
static __always_inline void walk_dispatch(struct pt_regs *regs, __u32 kind, __u32 tgid, struct thread_state *ts,
					  struct snap_ctx *sn, bool own, __u64 *stack_id, __u64 *fp_stack_id)
{
	__u32 pslot;

	if (!own) {
		count(CNT_WALKER_BUSY);
		*stack_id = DWLEAK_STACK_WALKER_BUSY;
		*fp_stack_id = (unwind_mode & UNWIND_MODE_FP) ? DWLEAK_STACK_WALKER_BUSY : 0;
		return;
	}
	if (bench_no_walk) {
		*stack_id = DWLEAK_STACK_NOT_WALKED;
		return;
	}
	pslot = thread_proc_slot(ts, tgid);
	if (unwind_mode & UNWIND_MODE_DWARF)
		*stack_id = stack_walk(regs, kind, tgid, pslot, ts->image, sn);
	if (unwind_mode & UNWIND_MODE_FP)
		*fp_stack_id = fp_walk(regs, kind, ts->image, sn);
	if (!(unwind_mode & UNWIND_MODE_DWARF))
		*stack_id = *fp_stack_id;
}

/* An allocator call's entry.  Returns 1 when nothing is left to do at its
 * return (SESSION: the return probe can be cancelled), else 0. */
static __always_inline int alloc_enter(struct pt_regs *ctx, __u64 cookie, __u64 size, __u64 arg,
				       bool session)
{
	__u32 kind = DWLEAK_COOKIE_KIND(cookie);
	struct thread_state *ts;
	struct pending_call *c;
	__u32 tgid = DWLEAK_COOKIE_TGID(cookie), d;
	__u64 sp = PT_REGS_SP(ctx), ra = 0;
	struct snap_ctx sn = {};
	bool own;

	if (!probe_in_target(cookie))
		return 0;
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts)
		return 0;
	/* one read of user memory: the whole stack top for the walk, which
	 * holds the return address; with sampling most calls are not walked,
	 * so just the return address */
	sn.limit = stack_limit(ts, sp);
	sn.want = ts->snap_hint;
	/* unsampled calls are not walked: they need no walker buffers */
	own = !sample_bytes && walker_enter();
	arch_entry_ra(ctx, &sn, own, &ra);
	pending_prune(ts, sp, ra);
	d = ts->depth;
	if (d >= DWLEAK_MAX_PENDING) {
		count(CNT_PENDING_FULL);
		return 0;
	}
	c = &ts->calls[d & (DWLEAK_MAX_PENDING - 1)];
	c->ra_addr = sp;
	c->ra = ra;
	c->size = size;
	c->arg = arg;
	c->kind = kind;
	c->func_start = PT_REGS_IP(ctx);
	c->func_end = c->func_start + (DWLEAK_COOKIE_SIZE(cookie) ?: 1);
	c->outer = !call_nested(ts, sp, ra, c->func_start);
	c->stack_id = 0;
	c->fp_stack_id = 0;
	c->sampled = !c->outer || sample_take(ts, size);
	/* realloc's old block is forgotten now, before realloc can release
	 * it for another thread to get (if realloc then fails, the block
	 * stays forgotten: counted in failed_allocs) */
	if (c->outer && arg &&
	    (kind == ALLOC_REALLOC || kind == ALLOC_REALLOCARRAY || kind == ALLOC_RALLOCX))
		emit_free(AEV_REALLOC_FREE, tgid, arg);
	if (c->outer && !c->sampled) {
		count(CNT_UNSAMPLED);
	} else if (c->outer) {
		count(CNT_ALLOC_CALLS);
		if (sample_bytes)
			own = walker_enter();
		walk_dispatch(ctx, kind, tgid, ts, &sn, own, &c->stack_id, &c->fp_stack_id);
	} else {
		count(CNT_NESTED_CALLS);
	}
	if (own)
		walker_leave();
	stack_learn(ts, &sn);
	if (own && c->outer && c->sampled && (unwind_mode & UNWIND_MODE_DWARF))
		ts->snap_hint = sn.want < STACK_SNAP - 512 ? (sn.want + 512) & ~255ull : STACK_SNAP;
	/* xallocx reports at its return whether it resized, sampled or not */
	if (session && (!c->outer || !c->sampled) && kind != ALLOC_XALLOCX) {
		skip_remember(ts, sp, ra, c->func_start, c->func_end);
		return 1;
	}
	ts->depth = d + 1;
	return 0;
}

/* The call in C, in process TGID, returned RET: tell user space what now
 * holds what. */
static void alloc_done(struct pending_call *c, __u32 tgid, __u64 ret)
{
	__u64 addr = ret;

	switch (c->kind) {
	case ALLOC_XALLOCX:
		/* returns the real size; at least SIZE means the resize happened
		 * (sampled or not: the block may be a sampled one) */
		if (ret >= c->size)
			emit_alloc(AEV_RESIZE, tgid, c->arg, c->size, 0, 0, c->kind);
		return;
	case ALLOC_REALLOC:
	case ALLOC_REALLOCARRAY:
		/* realloc(p, 0) frees p and returns NULL (glibc): not a failure */
		if (!ret && !(c->size == 0 && c->arg))
			count(CNT_FAILED_ALLOCS);
		break;
	case ALLOC_POSIX_MEMALIGN:
		if ((int)ret != 0 || read_u64(&addr, c->arg)) {
			count(CNT_FAILED_ALLOCS);
			return;
		}
		break;
	default:
		if (!ret)
			count(CNT_FAILED_ALLOCS);
		break;
	}
	if (addr && c->sampled)
		emit_alloc(AEV_ALLOC, tgid, addr, c->size, c->stack_id, c->fp_stack_id, c->kind);
}

static __always_inline int alloc_return(struct pt_regs *ctx, __u64 ret)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), sp = PT_REGS_SP(ctx);
	struct pending_call c;
	struct thread_state *ts;
	__u32 i, d;

	if (!probe_in_target(cookie))
		return 0;
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (!ts)
		return 0;
	d = ts->depth;
	/* the matching entry is the innermost whose return slot sp just popped;
	 * entries above it belong to calls left by longjmp */
	for (i = 0; i < DWLEAK_MAX_PENDING; i++) {
		__u32 k = (d - 1 - i) & (DWLEAK_MAX_PENDING - 1);

		if (i >= d)
			break;
		if (ARCH_RETURN_SP(ts->calls[k].ra_addr) != sp)
			continue;
		c = ts->calls[k];
		ts->depth = d - 1 - i;
		if (c.outer)
			alloc_done(&c, DWLEAK_COOKIE_TGID(cookie), ret);
		return 0;
	}
	count(CNT_PENDING_LOST);
	return 0;
}

/* n * size, saturated: an overflowing request fails in the allocator. */
static __always_inline __u64 mul_sat(__u64 n, __u64 size)
{
	__u64 limit;

	if (!size)
		return 0;
	limit = ~0ull / size;
	/* keep clang from turning the check into a 128-bit multiply (__multi3),
	 * which BPF has no instruction for (clang 14) */
	asm volatile("" : "+r"(limit));
	return n > limit ? ~0ull : n * size;
}

/* One entry program serves every allocator function (one verification at
 * load); the attach cookie says which function fired and its size.  One
 * call site of alloc_enter, inlined: a BPF-to-BPF call costs a return
 * thunk (~10-20 ns) on these CPUs. */
static __always_inline int alloc_entry(struct pt_regs *ctx, bool session)
{
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx), a3 = PT_REGS_PARM3(ctx);
	__u64 cookie = bpf_get_attach_cookie(ctx), size, arg = 0;

	switch (DWLEAK_COOKIE_KIND(cookie)) {
	case ALLOC_CALLOC:
		size = mul_sat(a1, a2);
		break;
	case ALLOC_REALLOC:
	case ALLOC_RALLOCX:
	case ALLOC_XALLOCX:
		size = a2;
		arg = a1;
		break;
	case ALLOC_REALLOCARRAY:
		size = mul_sat(a2, a3);
		arg = a1;
		break;
	case ALLOC_POSIX_MEMALIGN:
		size = a3;
		arg = a1;
		break;
	case ALLOC_ALIGNED_ALLOC:
	case ALLOC_MEMALIGN:
		size = a2;
		break;
	case ALLOC_MALLOC:
	case ALLOC_VALLOC:
	case ALLOC_PVALLOC:
	case ALLOC_NEW:
	case ALLOC_NEW_ARRAY:
	case ALLOC_MALLOCX:
		size = a1;
		break;
	default:
		return 0;
	}
	return alloc_enter(ctx, cookie, size, arg, session);
}

#endif
