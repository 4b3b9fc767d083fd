/* Reading the user stack: each probe copies the top of the stack once
 * into a per-CPU snapshot, and both walkers take their words from it.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_SNAP_BPF_H
#define DWLEAK_SNAP_BPF_H

#include "constants.h"
#include "maps.bpf.h"

/* A read of user memory costs ~100 ns here whatever its size up to a few
 * hundred bytes (4 KiB: ~145 ns), so each probe reads the stack once, into
 * a per-CPU snapshot, and both walkers read from that.  A read that runs
 * off the end of the mapping faults and costs ~1 us, so reads stop at the
 * end of the thread's stack mapping when it is known, else at the end of
 * the page they start in. */
struct snap_ctx {
	__u64 base;  /* user address of stack_snap's first byte */
	__u64 len;   /* bytes copied there; 0 = none */
	__u64 limit; /* readable up to here (the stack mapping's end: stack_limit); 0 = not known */
	__u64 failed; /* a read up to limit failed: limit was lowered to its page */
	__u64 want;   /* bytes the next read takes (the thread's last walk needed
		       * about that many); 0 = STACK_SNAP */
};

static __always_inline int read_u64(__u64 *dst, __u64 addr)
{
	return bpf_probe_read_user(dst, sizeof(*dst), (const void *)addr);
}

/* Copies user memory from ADDR up into the snapshot: up to STACK_SNAP
 * bytes, not past what is known to be mapped. */
static __always_inline int snap_take(struct snap_ctx *sn, __u64 addr)
{
	struct stack_snap *snap;
	__u32 zero = 0;
	__u64 len;

	sn->len = 0;
	snap = bpf_map_lookup_elem(&stack_snap, &zero);
	if (!snap)
		return -1;
	count(CNT_STACK_READS);
	len = (sn->limit > addr ? sn->limit : (addr | (DWLEAK_PAGE_SIZE - 1)) + 1) - addr;
	if (sn->want && len > sn->want)
		len = sn->want;
	sn->want = 0; /* a walk that goes on past it reads as much as it can */
	if (len > STACK_SNAP)
		len = STACK_SNAP;
	if (len < 8)
		len = 8;
	if (bpf_probe_read_user(snap->data, len, (void *)addr)) {
		/* a mapped page not present (never touched): the page ADDR is
		 * in is; read that, and go no further from now on */
		sn->limit = (addr | (DWLEAK_PAGE_SIZE - 1)) + 1;
		sn->failed = 1;
		len = sn->limit - addr;
		if (len > STACK_SNAP)
			len = STACK_SNAP;
		if (len < 8)
			len = 8;
		if (bpf_probe_read_user(snap->data, len, (void *)addr))
			return -1;
	}
	sn->base = addr;
	sn->len = len;
	return 0;
}

/* The u64 at ADDR from SNAP, the snapshot SN describes; -1 when it is
 * not in it. */
static __always_inline int snap_word(const struct stack_snap *snap, const struct snap_ctx *sn, __u64 *dst,
				     __u64 addr)
{
	__u64 off = addr - sn->base;

	if (addr < sn->base || off + 8 > sn->len || off > STACK_SNAP - 8)
		return -1;
	__builtin_memcpy(dst, &snap->data[off & (STACK_SNAP - 1)], 8);
	return 0;
}

static __always_inline int snap_copy(struct snap_ctx *sn, __u64 *dst, __u64 addr)
{
	struct stack_snap *snap;
	__u32 zero = 0;

	snap = bpf_map_lookup_elem(&stack_snap, &zero);
	return snap ? snap_word(snap, sn, dst, addr) : -1;
}

/* The u64 at ADDR: from the snapshot, else from a new snapshot taken at
 * ADDR (walks climb the stack, so the next reads land in it too), else
 * with a read of its own.  Global, so the verifier checks it once, not at
 * every call site of both walkers. */
__noinline int snap_read(struct snap_ctx *sn, __u64 *dst, __u64 addr)
{
	if (!sn || !dst)
		return -1;
	if (!snap_copy(sn, dst, addr))
		return 0;
	if (!snap_take(sn, addr) && !snap_copy(sn, dst, addr))
		return 0;
	return read_u64(dst, addr);
}

#endif
