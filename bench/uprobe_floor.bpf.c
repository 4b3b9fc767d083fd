// SPDX-License-Identifier: GPL-2.0
/* The BPF side of bench/uprobe_floor.c, two program sets:
 *   floor_*  empty programs: what the traps at dwleak's own probe sites
 *            cost with nothing to do (the "own floor" rows);
 *   min_*    the least an exact tracer with stacks must do per malloc+free
 *            pair (the "exact-accounting minimum" rows): find the thread's
 *            state at entry and at return (the size is only known at
 *            entry, the pointer only at return), read the user stack
 *            once (8 bytes into the BPF stack, the cheapest read measured
 *            here), and write one record for the allocation and one for
 *            the free.  No walk, no counters, no nesting or sampling. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("uprobe")
int floor_entry(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int floor_return(void *ctx)
{
	return 0;
}

/* The same empty work as one uprobe session program (dwleak with
 * --sample-bytes): returning 0 keeps the return probe. */
SEC("uprobe")
int floor_session(void *ctx)
{
	return 0;
}

struct min_call {
	__u64 size;
	__u64 ra;
};

struct min_record {
	__u64 addr;
	__u64 size; /* 0: a free */
	__u64 ra;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct min_call);
} min_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} min_records SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(min_entry, __u64 size)
{
	struct min_call *c = bpf_task_storage_get(&min_calls, bpf_get_current_task_btf(), 0,
						  BPF_LOCAL_STORAGE_GET_F_CREATE);
	__u64 ra = 0;

	if (!c)
		return 0;
	bpf_probe_read_user(&ra, sizeof(ra), (void *)PT_REGS_SP(ctx));
	c->size = size;
	c->ra = ra;
	return 0;
}

static __always_inline void min_emit(__u64 addr, __u64 size, __u64 ra)
{
	struct min_record *r = bpf_ringbuf_reserve(&min_records, sizeof(*r), 0);

	if (!r)
		return;
	r->addr = addr;
	r->size = size;
	r->ra = ra;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("uretprobe")
int BPF_KRETPROBE(min_return, __u64 ret)
{
	struct min_call *c = bpf_task_storage_get(&min_calls, bpf_get_current_task_btf(), 0, 0);

	if (c && ret)
		min_emit(ret, c->size, c->ra);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(min_free, __u64 ptr)
{
	if (ptr)
		min_emit(ptr, 0, 0);
	return 0;
}

/* The same minimum as one uprobe session program: the size waits in the
 * session's cookie instead of thread state, the stack is read at the
 * return (the caller's frames are intact there). */
extern bool bpf_session_is_return(void) __ksym __weak;
extern __u64 *bpf_session_cookie(void) __ksym __weak;

SEC("uprobe")
int BPF_KPROBE(min_session, __u64 size)
{
	__u64 *cookie = bpf_session_cookie(), word = 0;

	if (!cookie)
		return 1;
	if (!bpf_session_is_return()) {
		*cookie = size;
		return 0;
	}
	bpf_probe_read_user(&word, sizeof(word), (void *)PT_REGS_SP(ctx));
	if (PT_REGS_RC(ctx))
		min_emit(PT_REGS_RC(ctx), *cookie, word);
	return 0;
}
