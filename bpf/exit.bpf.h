/* exit(): a process about to run its atexit handlers and destructors,
 * stopped so the leak check sees its memory intact, as memcheck and
 * LeakSanitizer do at exit.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_EXIT_BPF_H
#define DWLEAK_EXIT_BPF_H

#include "maps.bpf.h"
#include "calls.bpf.h"


/*
 * The entry of exit() in a process traced with --leak-check: tell user
 * space, and stop the calling thread (under ptrace: a signal-delivery-stop
 * the tracer resumes without the signal) until the check is done.  Only
 * processes registered with PROC_STOP_AT_EXIT: no stop without a tracer
 * that resumes.
 */
static __always_inline int process_exiting(struct pt_regs *ctx)
{
	__u32 tgid = current_tgid();
	struct proc_info *pi = bpf_map_lookup_elem(&procs, &tgid);
	struct event *e;

	if (!pi || !(pi->flags & PROC_STOP_AT_EXIT))
		return 0;
	e = event_new(EVENT_EXITING, tgid);
	if (!e)
		return 0;
	e->stopped = 1;
	/* at the entry: registers other than the callee-saved ones are dead,
	 * and so is the stack below the return address */
	e->pc = PT_REGS_SP(ctx);
	e->tid = (__u32)bpf_get_current_pid_tgid();
	bpf_ringbuf_submit(e, 0);
	bpf_send_signal_thread(DWLEAK_STOP_SIGNAL);
	return 0;
}

#endif
