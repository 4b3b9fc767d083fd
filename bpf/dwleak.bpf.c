// SPDX-License-Identifier: GPL-2.0
/* dwleak's kernel side: allocator uprobes, the bookkeeping of outstanding
 * allocations, and the DWARF stack walker that reads the compact unwind
 * tables (base/unwind_format.h) user space loaded into maps.  This file
 * holds the settings and the programs; the logic is in the parts below. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "dwleak.h"
#include "unwind_format.h"

char LICENSE[] SEC("license") = "GPL";

/* Set through the skeleton's rodata before load.  The traced processes
 * are in the procs map, filled as they come. */
const volatile __u32 unwind_mode = UNWIND_MODE_DWARF; /* enum unwind_mode bits */
const volatile __u64 sample_bytes = 0; /* --sample-bytes N; 0 = every allocation */
const volatile __u32 track_mmap = 0;   /* --mmap */
/* --leak-check: the allocator's own memory syscalls (mmap.bpf.h) */
const volatile __u32 track_alloc_memory = 0;
/* Wake the alloc_events reader after every this many records a CPU wrote
 * (a power of two; user space sizes it to a quarter of the ring over all
 * CPUs); between wakeups it drains on its own timer, and records cost no
 * wakeup.  A per-CPU count, not bpf_ringbuf_query: a helper call costs
 * ~15-20 ns here, and there is one per record. */
const volatile __u64 alloc_ring_wake = 1 << 14;
/* The allocator probes are uprobe_multi links created with each traced
 * process's pid, which run programs only for its threads
 * (same_thread_group, Linux 6.12+): they need no tgid check of their own,
 * a helper call per probe.  Each link's cookie carries its process. */
const volatile __u32 tgid_by_link = 0;
const volatile __u32 guard_preempt = PREEMPT_GUARD_OFF; /* enum preempt_guard */
const volatile __u32 bench_no_walk = 0; /* everything but the walk (bench/) */

/* Bumped by user space whenever the target's mappings or tables change:
 * rule_cache entries of an older generation are misses. */
volatile __u32 rule_gen = 0;

/*
 * The parts, each a header with one concern, in the order they build on
 * each other (each also includes the parts it uses, under include guards).
 * They define functions, which headers otherwise should not: nothing
 * outside this program includes them, so the program stays ONE translation unit, in
 * which clang sees every static function and inlines as it did when all
 * was one file (`make bpf-insns` prints the same counts), and the verifier
 * still checks each global function once.  They use the settings above.
 */
#include "maps.bpf.h"	   /* every map, and the counters */
#include "guard.bpf.h"	   /* one program at a time in the walker's per-CPU buffers */
#include "snap.bpf.h"	   /* reading the user stack: the per-CPU snapshot */
#include "walk_ctx.bpf.h"  /* one DWARF walk's state */
#include "mappings.bpf.h"  /* pc -> mapping -> table -> rule; the stack's mapping */
#include "stacks.bpf.h"	   /* storing a walked stack */
#include "walk.bpf.h"	   /* the DWARF walk, its rule cache and walk memo */
#include "fp_walk.bpf.h"   /* the frame-pointer walk */
#include "calls.bpf.h"	   /* allocator bookkeeping, records, the one walk dispatch */
#include "mmap.bpf.h"	   /* --mmap: the memory syscalls */
#include "linker.bpf.h"	   /* the dynamic linker's hook */
#include "exit.bpf.h"	   /* exit(): the leak check's moment */
#include "exec.bpf.h"	   /* execve(): a process without ptrace changed its image */
#include "usdt.bpf.h"	   /* the preload library's sites */

SEC("uretprobe")
int BPF_KRETPROBE(alloc_exit, __u64 ret)
{
	return alloc_return(ctx, ret);
}

SEC("uprobe")
int BPF_KPROBE(alloc_enter_any)
{
	alloc_entry(ctx, false);
	return 0;
}

/*
 * The same, as one uprobe session program (Linux 6.13+), used instead of
 * alloc_enter_any + alloc_exit where the kernel has them: an entry that
 * returns 1 cancels the call's return probe, so calls not sampled and
 * nested calls cost one trap, not two.
 */
extern bool bpf_session_is_return(void) __ksym __weak;

SEC("uprobe")
int BPF_KPROBE(alloc_session)
{
	if (bpf_session_is_return())
		return alloc_return(ctx, PT_REGS_RC(ctx));
	return alloc_entry(ctx, true);
}

/* free, operator delete (every variant), sdallocx, dallocx: the pointer
 * is the first argument of all of them.  No check for a pending allocator
 * call here (it would cost a thread-storage lookup on every free): a free
 * made inside one (operator delete calling free) only repeats the same
 * address, which user space finds already gone. */
SEC("uprobe")
int BPF_KPROBE(free_enter, __u64 ptr)
{
	__u64 cookie;

	if (!ptr)
		return 0;
	cookie = bpf_get_attach_cookie(ctx);
	if (!probe_in_target(cookie))
		return 0;
	count(CNT_FREE_CALLS);
	emit_free(AEV_FREE, DWLEAK_COOKIE_TGID(cookie), ptr);
	return 0;
}

/* The preload library's sites (bpf/abi/preload.h), uprobes on 5-byte
 * NOPs that Linux 6.18+ enters by a system call, not a trap. */
SEC("uprobe")
int BPF_KPROBE(preload_alloc)
{
	return site_alloc(ctx);
}

SEC("uprobe")
int BPF_KPROBE(preload_free, __u64 ptr, __u64 how)
{
	return site_free(ctx, ptr, how);
}

/* _dl_debug_state: the dynamic linker (un)mapped objects. */
SEC("uprobe")
int BPF_KPROBE(dl_state)
{
	return linker_state_changed(ctx);
}

/* exit(): stopped for the leak check before atexit handlers run. */
SEC("uprobe")
int BPF_KPROBE(exit_enter)
{
	return process_exiting(ctx);
}

/* execve() of a registered process (BTF tracepoint: no tracefs needed). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(proc_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	return process_exec();
}

/* --mmap and --leak-check: BTF raw tracepoints (no tracefs needed) on every
 * syscall. */
SEC("tp_btf/sys_enter")
int BPF_PROG(mmap_enter, struct pt_regs *regs, long id)
{
	return mmap_syscall_enter(regs, id);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(mmap_exit, struct pt_regs *regs, long ret)
{
	return mmap_syscall_exit(ret);
}
