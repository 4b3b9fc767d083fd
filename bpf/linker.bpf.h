/* The dynamic linker's debugger hook: objects were mapped or unmapped, so
 * user space must load their tables before their code allocates.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_LINKER_BPF_H
#define DWLEAK_LINKER_BPF_H

#include "maps.bpf.h"
#include "calls.bpf.h"

#define RT_CONSISTENT 0		 /* struct r_debug's r_state: link map consistent */
#define R_DEBUG_STATE_OFF 24	 /* offsetof(struct r_debug, r_state) on x86_64 */

/*
 * The dynamic linker calls _dl_debug_state (the debugger hook) before and
 * after it maps or unmaps objects, at start-up and at every dlopen and
 * dlclose.  After (r_state RT_CONSISTENT) we tell user space to load the
 * new objects' tables (at start-up, also to find the allocator and probe
 * it: glibc's malloc is first called after this point); where user space
 * asked for it (PROC_STOP_AT_DL_STATE: processes it follows with ptrace),
 * the calling thread also stops until that is done, so even the first
 * allocation from new code has a complete stack.  No stop without a
 * delivered event: nobody would resume it.
 */
static __always_inline int linker_state_changed(struct pt_regs *ctx)
{
	__u32 tgid = current_tgid();
	struct proc_info *pi = bpf_map_lookup_elem(&procs, &tgid);
	int state = RT_CONSISTENT;
	struct event *e;
	__u64 bias;
	bool stop;

	if (!pi || !pi->dl_state_vaddr)
		return 0;
	bias = PT_REGS_IP(ctx) - pi->dl_state_vaddr;
	if (pi->r_debug_vaddr &&
	    !bpf_probe_read_user(&state, sizeof(state), (void *)(bias + pi->r_debug_vaddr + R_DEBUG_STATE_OFF)) &&
	    state != RT_CONSISTENT)
		return 0;
	stop = pi->flags & PROC_STOP_AT_DL_STATE;
	e = event_new(EVENT_MAPS_CHANGED, tgid);
	if (!e)
		return 0;
	e->stopped = stop;
	bpf_ringbuf_submit(e, 0);
	/* this thread only: under ptrace, the tracer sees its
	 * signal-delivery-stop (si_code SI_KERNEL) and resumes it without
	 * the signal; the other threads run on */
	if (stop)
		bpf_send_signal_thread(DWLEAK_STOP_SIGNAL);
	return 0;
}

#endif
