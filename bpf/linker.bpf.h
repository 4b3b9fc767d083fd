/* The dynamic linker's debugger hook: objects were mapped or unmapped, so
 * user space must load their tables before their code allocates.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_LINKER_BPF_H
#define DWLEAK_LINKER_BPF_H

#include "maps.bpf.h"
#include "calls.bpf.h"

#define SIGSTOP 19
#define RT_CONSISTENT 0		 /* struct r_debug's r_state: link map consistent */
#define R_DEBUG_STATE_OFF 24	 /* offsetof(struct r_debug, r_state) on x86_64 */

/*
 * The dynamic linker calls _dl_debug_state (the debugger hook) before and
 * after it maps or unmaps objects, at start-up and at every dlopen and
 * dlclose.  After (r_state RT_CONSISTENT) we tell user space to load the
 * new objects' tables; for a command we started, we also stop it until
 * that is done, so even the first allocation from new code has a complete
 * stack.  No stop without a delivered event: nobody would resume it.
 */
static __always_inline int linker_state_changed(struct pt_regs *ctx)
{
	__u64 bias = PT_REGS_IP(ctx) - dl_state_vaddr;
	struct event *e;
	int state = RT_CONSISTENT;

	if (current_tgid() != target_tgid)
		return 0;
	if (r_debug_vaddr &&
	    !bpf_probe_read_user(&state, sizeof(state), (void *)(bias + r_debug_vaddr + R_DEBUG_STATE_OFF)) &&
	    state != RT_CONSISTENT)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_EVENTS_LOST);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = EVENT_MAPS_CHANGED;
	e->tgid = target_tgid;
	e->stopped = stop_on_dl_state;
	bpf_ringbuf_submit(e, 0);
	if (stop_on_dl_state)
		bpf_send_signal(SIGSTOP);
	return 0;
}

#endif
