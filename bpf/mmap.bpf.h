/* --mmap: the anonymous mmap, munmap and mremap the program makes itself,
 * outside the allocator, each with the stack that made it.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_MMAP_BPF_H
#define DWLEAK_MMAP_BPF_H

#include "maps.bpf.h"
#include "guard.bpf.h"
#include "snap.bpf.h"
#include "mappings.bpf.h"
#include "walk.bpf.h"
#include "fp_walk.bpf.h"
#include "calls.bpf.h"

#define NR_MMAP 9		 /* x86_64 syscall numbers */
#define NR_MUNMAP 11
#define NR_MREMAP 25
#define MAP_ANONYMOUS 0x20

/*
 * Called on every syscall's entry, filtered to the target; REGS are the
 * user registers at the syscall, so the walker starts from the calling
 * code.  Calls made inside an allocator call (glibc's malloc mapping a
 * large block, realloc's mremap) belong to it and are skipped.
 */
static __always_inline int mmap_syscall_enter(struct pt_regs *regs, long id)
{
	struct thread_state *ts;
	__u32 tgid = current_tgid();
	struct snap_ctx sn = {};
	__u64 flags;
	bool own;

	if (!track_mmap || (id != NR_MMAP && id != NR_MUNMAP && id != NR_MREMAP) ||
	    !bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts)
		return 0;
	ts->sc.nr = 0;
	sn.limit = stack_limit(ts, regs->sp);
	pending_prune(ts, regs->sp, 0);
	if (ts->depth) {
		count(CNT_MMAP_IN_ALLOC);
		return 0;
	}
	flags = regs->r10;
	if (id == NR_MMAP && !(flags & MAP_ANONYMOUS))
		return 0;
	count(CNT_MMAP_CALLS);
	ts->sc.addr = regs->di;
	ts->sc.len = regs->si;
	ts->sc.new_len = regs->dx;
	ts->sc.stack_id = 0;
	ts->sc.fp_stack_id = 0;
	if (id == NR_MMAP) {
		own = walker_enter();
		walk_dispatch(regs, ALLOC_MMAP, tgid, ts, &sn, own, &ts->sc.stack_id, &ts->sc.fp_stack_id);
		if (own)
			walker_leave();
		stack_learn(ts, &sn);
	}
	ts->sc.nr = (__u32)id;
	return 0;
}

/* The syscall pending on this thread returned RET: what changed.  Only a
 * traced process's threads have a state with a syscall pending. */
static __always_inline int mmap_syscall_exit(long ret)
{
	struct thread_state *ts;
	struct mmap_event *e;
	__u32 nr;

	if (!track_mmap)
		return 0;
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (!ts || !ts->sc.nr)
		return 0;
	nr = ts->sc.nr;
	ts->sc.nr = 0;
	if (ret < 0 && ret > -4096)
		return 0; /* failed: nothing changed */
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_EVENTS_LOST);
		return 0;
	}
	e->type = EVENT_MMAP;
	e->addr = nr == NR_MMAP ? (__u64)ret : ts->sc.addr;
	e->len = ts->sc.len;
	e->new_addr = nr == NR_MREMAP ? (__u64)ret : 0;
	e->new_len = nr == NR_MREMAP ? ts->sc.new_len : 0;
	e->stack_id = ts->sc.stack_id;
	e->fp_stack_id = ts->sc.fp_stack_id;
	e->ts = bpf_ktime_get_ns();
	e->op = nr == NR_MMAP ? MMAP_OP_MAP : nr == NR_MUNMAP ? MMAP_OP_UNMAP : MMAP_OP_REMAP;
	e->tgid = current_tgid();
	e->pad = 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

#endif
