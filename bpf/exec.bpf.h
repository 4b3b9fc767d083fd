/* execve() in a traced process: its image is replaced.  A process dwleak
 * follows with ptrace reports it there; one traced without ptrace (-p,
 * the agent) is told through this event, so its old image's probes,
 * blocks and stacks are let go and its new image is probed.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_EXEC_BPF_H
#define DWLEAK_EXEC_BPF_H

#include "maps.bpf.h"
#include "calls.bpf.h"

/* After a successful exec, in the new image, on the thread that exec'd
 * (now the thread group's leader): only registered processes. */
static __always_inline int process_exec(void)
{
	__u32 tgid = current_tgid();
	struct event *e;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	e = event_new(EVENT_EXEC, tgid);
	if (!e)
		return 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

#endif
