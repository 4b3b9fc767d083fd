/* The memory syscalls of a traced process: mmap, munmap, mremap, brk.
 * With --mmap, the anonymous regions the program maps itself, outside the
 * allocator, each with the stack that made it.  With --leak-check, which
 * memory the allocator obtained from the kernel itself (made while one of
 * its calls is in progress on the thread): the leak check reads only the
 * live blocks there, never the allocator's free memory or bookkeeping.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_MMAP_BPF_H
#define DWLEAK_MMAP_BPF_H

#include "arch.bpf.h"
#include "maps.bpf.h"
#include "guard.bpf.h"
#include "snap.bpf.h"
#include "mappings.bpf.h"
#include "walk.bpf.h"
#include "fp_walk.bpf.h"
#include "calls.bpf.h"
#include "preload.h"

#define MAP_ANONYMOUS 0x20

/*
 * Whether the calling thread of a process traced at the preload library's
 * sites is inside an allocator call: the library counts its calls in
 * progress in a thread-local word, at the offset from the thread pointer
 * its control block (at PI->preload_control) gives.  Two small reads of
 * user memory, on memory syscalls only.
 */
static __always_inline bool preload_call_pending(const struct proc_info *pi)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__s32 off = 0;
	__u32 depth = 0;

	if (!pi->preload_control ||
	    bpf_probe_read_user(&off, sizeof(off),
				(void *)(pi->preload_control + __builtin_offsetof(struct dwleak_preload_control,
										 depth_tls))) ||
	    !off)
		return false;
	if (bpf_probe_read_user(&depth, sizeof(depth), (void *)(ARCH_THREAD_POINTER(task) + (__s64)off)))
		return false;
	return depth != 0;
}

/*
 * Called on every syscall's entry, filtered to the traced processes; REGS
 * are the user registers at the syscall, so the walker starts from the
 * calling code.  A call made inside an allocator call (glibc's malloc
 * growing its heap, mapping a large block or a thread's arena; realloc's
 * mremap; jemalloc mapping an extent) is the allocator's: --mmap skips
 * it, the leak check learns its memory from it.
 */
static __always_inline int mmap_syscall_enter(struct pt_regs *regs, long id)
{
	struct thread_state *ts;
	__u32 tgid = current_tgid();
	struct snap_ctx sn = {};
	struct proc_info *pi;
	__u64 flags;
	bool own, in_alloc;

	if ((!track_mmap && !track_alloc_memory) ||
	    (id != NR_MMAP && id != NR_MUNMAP && id != NR_MREMAP && id != NR_BRK) ||
	    !(pi = bpf_map_lookup_elem(&procs, &tgid)))
		return 0;
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts)
		return 0;
	ts->sc.nr = 0;
	sn.limit = stack_limit(ts, regs->sp);
	pending_prune(ts, regs->sp, 0);
	flags = ARCH_SYSCALL_ARG4(regs);
	/* a file mapping is never the allocator's memory nor a leak */
	if (id == NR_MMAP && !(flags & MAP_ANONYMOUS))
		return 0;
	in_alloc = ts->depth || preload_call_pending(pi);
	ts->sc.addr = ARCH_SYSCALL_ARG1(regs);
	ts->sc.len = ARCH_SYSCALL_ARG2(regs);
	ts->sc.new_len = ARCH_SYSCALL_ARG3(regs);
	ts->sc.stack_id = 0;
	ts->sc.fp_stack_id = 0;
	if (in_alloc) {
		count(CNT_MMAP_IN_ALLOC);
		if (!track_alloc_memory)
			return 0;
		count(CNT_ALLOC_MEMORY_CALLS);
		ts->sc.by = MMAP_BY_ALLOCATOR;
	} else if (track_mmap && id != NR_BRK) {
		count(CNT_MMAP_CALLS);
		ts->sc.by = MMAP_BY_PROGRAM;
		if (id == NR_MMAP) {
			own = walker_enter();
			walk_dispatch(regs, ALLOC_MMAP, tgid, ts, &sn, own, &ts->sc.stack_id, &ts->sc.fp_stack_id);
			if (own)
				walker_leave();
			stack_learn(ts, &sn);
		}
	} else if (track_alloc_memory) {
		count(CNT_PROGRAM_MEMORY_CALLS);
		ts->sc.by = MMAP_BY_PROGRAM_UNTRACKED;
	} else {
		return 0;
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

	if (!track_mmap && !track_alloc_memory)
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
	e->addr = nr == NR_MMAP || nr == NR_BRK ? (__u64)ret : ts->sc.addr;
	e->len = ts->sc.len;
	e->new_addr = nr == NR_MREMAP ? (__u64)ret : 0;
	e->new_len = nr == NR_MREMAP ? ts->sc.new_len : 0;
	e->stack_id = ts->sc.stack_id;
	e->fp_stack_id = ts->sc.fp_stack_id;
	e->ts = bpf_ktime_get_ns();
	e->op = nr == NR_MMAP	 ? MMAP_OP_MAP
		: nr == NR_MUNMAP ? MMAP_OP_UNMAP
		: nr == NR_BRK	 ? MMAP_OP_BRK
				 : MMAP_OP_REMAP;
	e->tgid = current_tgid();
	e->by = ts->sc.by;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

#endif
