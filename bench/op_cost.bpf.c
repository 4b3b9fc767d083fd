// SPDX-License-Identifier: GPL-2.0
/* The BPF side of bench/op_cost.c: one uprobe program that does one
 * operation of the kind dwleak's programs do (which, says the rodata
 * variable op), so its cost inside a real uprobe, on this machine, can be
 * read from the kernel's run-time statistics. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "op_cost.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 op = OP_EMPTY;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[4096]);
} buf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} hash SEC(".maps");

__u64 sink;

/* bpf_probe_read_user of N bytes at ADDR into the per-CPU buffer
 * (dwleak's stack snapshot). */
static __always_inline void read_to_buf(__u64 addr, __u32 n)
{
	__u32 zero = 0;
	void *b = bpf_map_lookup_elem(&buf, &zero);

	if (b && n <= 4096)
		bpf_probe_read_user(b, n, (void *)addr);
}

SEC("uprobe")
int op_run(struct pt_regs *ctx)
{
	__u64 v = 0, *p;
	__u32 zero = 0;

	switch (op) {
	case OP_EMPTY:
		break;
	case OP_PID_TGID:
		sink = bpf_get_current_pid_tgid();
		break;
	case OP_TASK_BTF:
		sink = (__u64)bpf_get_current_task_btf();
		break;
	case OP_ATTACH_COOKIE:
		sink = bpf_get_attach_cookie(ctx);
		break;
	case OP_KTIME:
		sink = bpf_ktime_get_ns();
		break;
	case OP_PERCPU_LOOKUP:
		p = bpf_map_lookup_elem(&counter, &zero);
		if (p)
			*p += 1;
		break;
	case OP_TASK_STORAGE:
		p = bpf_task_storage_get(&state, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (p)
			*p += 1;
		break;
	case OP_RING_RECORD:
		p = bpf_ringbuf_reserve(&ring, 32, 0);
		if (p) {
			p[0] = 1;
			bpf_ringbuf_submit(p, BPF_RB_NO_WAKEUP);
		}
		break;
	case OP_RING_QUERY:
		sink = bpf_ringbuf_query(&ring, BPF_RB_AVAIL_DATA);
		break;
	case OP_HASH_UPDATE_DELETE:
		v = PT_REGS_SP(ctx);
		bpf_map_update_elem(&hash, &v, &v, BPF_ANY);
		bpf_map_delete_elem(&hash, &v);
		break;
	case OP_READ_8_STACK:
		bpf_probe_read_user(&v, sizeof(v), (void *)PT_REGS_SP(ctx));
		sink = v;
		break;
	case OP_READ_64:
		read_to_buf(PT_REGS_SP(ctx), 64);
		break;
	case OP_READ_256:
		read_to_buf(PT_REGS_SP(ctx), 256);
		break;
	case OP_READ_1024:
		read_to_buf(PT_REGS_SP(ctx), 1024);
		break;
	case OP_READ_4096:
		/* the whole page the stack pointer is in: present, and mapped */
		read_to_buf(PT_REGS_SP(ctx) & ~4095ull, 4096);
		break;
	}
	return 0;
}
