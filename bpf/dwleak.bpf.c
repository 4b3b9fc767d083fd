// SPDX-License-Identifier: GPL-2.0
/* dwleak's kernel side: allocator uprobes, the bookkeeping of outstanding
 * allocations, and the DWARF stack walker that reads the compact unwind
 * tables (tables/unwind_format.h) user space loaded into maps. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "dwleak.h"

char LICENSE[] SEC("license") = "GPL";

#define EBUSY 16 /* bpf_find_vma: mmap lock contended */
#define SIGSTOP 19
#define NR_MMAP 9		 /* x86_64 syscall numbers */
#define NR_MUNMAP 11
#define NR_MREMAP 25
#define MAP_ANONYMOUS 0x20
#define RT_CONSISTENT 0		 /* struct r_debug's r_state: link map consistent */
#define R_DEBUG_STATE_OFF 24	 /* offsetof(struct r_debug, r_state) on x86_64 */

/* Set through the skeleton's rodata before load. */
const volatile __u32 target_tgid = 0;
const volatile __u32 unwind_mode = UNWIND_MODE_DWARF; /* enum unwind_mode bits */
const volatile __u64 sample_bytes = 0; /* --sample-bytes N; 0 = every allocation */
const volatile __u32 track_mmap = 0;   /* --mmap */
/* The dynamic linker's _dl_debug_state and _r_debug (ELF addresses), and
 * whether to stop the process there until its new tables are loaded. */
const volatile __u64 dl_state_vaddr = 0;
const volatile __u64 r_debug_vaddr = 0;
const volatile __u32 stop_on_dl_state = 0;
/* Wake the alloc_events reader after every this many records a CPU wrote
 * (a power of two; user space sizes it to a quarter of the ring over all
 * CPUs); between wakeups it drains on its own timer, and records cost no
 * wakeup.  A per-CPU count, not bpf_ringbuf_query: a helper call costs
 * ~15-20 ns here, and there is one per record. */
const volatile __u64 alloc_ring_wake = 1 << 14;
/* The allocator probes are uprobe_multi links created with the target's
 * pid, which run programs only for its threads (same_thread_group, Linux
 * 6.12+): they need no tgid check of their own, a helper call per probe. */
const volatile __u32 tgid_by_link = 0;
const volatile __u32 guard_preempt = PREEMPT_GUARD_OFF; /* enum preempt_guard */
const volatile __u32 bench_no_walk = 0; /* everything but the walk (bench/) */

/* Bumped by user space whenever the target's mappings or tables change:
 * rule_cache entries of an older generation are misses. */
volatile __u32 rule_gen = 0;

/* --- Tables (filled by unwinder/) --- */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct file_key);
	__type(value, struct table_info);
} tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct page_key);
	__type(value, struct unwind_page);
} pages SEC(".maps");

/* The target's executable mappings, kept by user space in two buffers:
 * it rewrites the one not in use, then flips proc_maps_cur, so a walker
 * never reads a table half rewritten.  Arrays, not a hash keyed by tgid:
 * their lookups compile to an address computation, and the search below
 * makes one per step. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct proc_mappings);
} proc_maps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} proc_maps_cur SEC(".maps");

/* The mapping table in use for process TGID, or NULL. */
static __always_inline struct proc_mappings *proc_maps_get(__u32 tgid)
{
	__u32 zero = 0, *cur = bpf_map_lookup_elem(&proc_maps_cur, &zero), slot;
	struct proc_mappings *pm;

	if (!cur)
		return NULL;
	slot = *cur & 1;
	pm = bpf_map_lookup_elem(&proc_maps, &slot);
	return pm && pm->tgid == tgid ? pm : NULL;
}

/* rows and rules are sized from user space before load, from the tables
 * it compiled and with room for libraries loaded later. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_row);
} rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_rule);
} rules SEC(".maps");

/* --- Bookkeeping --- */

/* Records this CPU wrote to alloc_events (see alloc_ring_wake). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} ring_records SEC(".maps");

/* struct alloc_event / free_event records, in the order they happened. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 25); /* resized from user space */
} alloc_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16); /* resized from user space */
	__type(key, __u64);
	__type(value, struct stack_trace);
} stacks SEC(".maps");

/*
 * Per-CPU caches in front of the walker's searches and the stacks map.
 * Direct-mapped arrays: a slot is found by arithmetic (no hashing helper,
 * no lock), where a hash map lookup costs ~35 ns and an update ~130 ns.
 * Per CPU, so a slot is never read half written by another CPU.
 */
#define RULE_CACHE_BITS 13
#define STACK_SEEN_BITS 12

struct rule_cache_slot {
	__u64 pc;	/* the address looked up; 0 = empty */
	__u32 gen;	/* rule_gen when filled */
	__u32 pad;
	struct unwind_rule rule;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << RULE_CACHE_BITS);
	__type(key, __u32);
	__type(value, struct rule_cache_slot);
} rule_cache SEC(".maps");

/*
 * Whole walks, remembered per CPU by where they started.  A walk is a
 * function of its start (pc, rsp, and rbp when a rule used it before any
 * was restored from the stack), the rules (rule_gen) and the stack words
 * it read; a later walk from the same start whose words all still hold
 * the same values would repeat it exactly, so it is not made again: the
 * remembered words are compared instead (a loop allocating from one call
 * site costs a few compares, not a walk).  Walks that ended in an error,
 * met a uretprobe trampoline or left [rsp, rsp + 4 GiB) are not kept.
 */
#define WALK_MEMO_BITS 8
#define WALK_MEMO_WORDS 32

struct walk_memo {
	__u64 pc0;	/* 0 = empty (or being filled) */
	__u64 sp0;
	__u64 bp0;	/* compared only when use_bp0 */
	__u64 stack_id;
	__u32 gen;	/* rule_gen */
	__u32 nwords;
	__u32 nframes;
	__u8 use_bp0;
	__u8 end;
	__u16 pad;
	__u32 span;	/* bytes above sp0 the walk used (its last CFA) */
	__u32 pad2;
	__u32 off[WALK_MEMO_WORDS]; /* bytes above sp0 */
	__u64 val[WALK_MEMO_WORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << WALK_MEMO_BITS);
	__type(key, __u32);
	__type(value, struct walk_memo);
} walk_memo SEC(".maps");

/* Stack ids this CPU already stored in the stacks map (never emptied
 * while tracing), so a known stack costs no map update. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << STACK_SEEN_BITS);
	__type(key, __u32);
	__type(value, __u64);
} stack_seen SEC(".maps");

/* Mappings the walker met or user space published, so frames can be named
 * even after the target exited. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct mapping_key);
	__type(value, struct mapping_seen);
} mappings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} threads SEC(".maps");


struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_trace);
} scratch SEC(".maps");

/* Exponential gaps for --sample-bytes, in bytes (filled by user space). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DWLEAK_SAMPLE_GAPS);
	__type(key, __u32);
	__type(value, __u64);
} sample_gaps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

/* The top of the user stack, copied once per walk: one read of a few KiB
 * costs about what two 8-byte reads do, and a walk makes a dozen. */
#define STACK_SNAP 16384

struct stack_snap {
	__u8 data[STACK_SNAP];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_snap);
} stack_snap SEC(".maps");

/* Files already asked for, so a missing table is requested once. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct file_key);
	__type(value, __u8);
} requested SEC(".maps");

static __always_inline void count_n(__u32 which, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &which);

	if (v)
		*v += n;
}

static __always_inline void count(__u32 which)
{
	count_n(which, 1);
}

/*
 * The walker's per-CPU buffers (stack_snap, scratch) and caches
 * (rule_cache, walk_memo, stack_seen) assume one program at a time per
 * CPU.  Uprobe programs run with migration disabled, not preemption: on a
 * kernel that preempts kernel code (preempt=full or lazy, PREEMPT_RT), a
 * thread preempted inside the walker and another thread's probe on the
 * same CPU would share them, and a stack could come out wrong without a
 * sign.  There user space sets guard_preempt and the programs count
 * themselves in and out; one that finds the buffers in use skips its walk
 * (the allocation is kept, under DWLEAK_STACK_WALKER_BUSY, and counted).
 * Elsewhere the verifier drops the guard as dead code.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} walker_users SEC(".maps");

/* True when this program may use the walker's buffers; it must then call
 * walker_leave.  A caller that skips a walk for it counts CNT_WALKER_BUSY. */
static __always_inline bool walker_enter(void)
{
	__u32 zero = 0;
	__u64 *n;

	if (guard_preempt == PREEMPT_GUARD_OFF)
		return true;
	n = bpf_map_lookup_elem(&walker_users, &zero);
	if (guard_preempt == PREEMPT_GUARD_ON && n && __sync_fetch_and_add(n, 1) == 0)
		return true;
	if (guard_preempt == PREEMPT_GUARD_ON && n)
		__sync_fetch_and_add(n, -1);
	return false;
}

static __always_inline void walker_leave(void)
{
	__u32 zero = 0;
	__u64 *n;

	if (guard_preempt != PREEMPT_GUARD_ON)
		return;
	n = bpf_map_lookup_elem(&walker_users, &zero);
	if (n)
		__sync_fetch_and_add(n, -1);
}

/* --- Reading the user stack --- */

/* A read of user memory costs ~100 ns here whatever its size up to a few
 * hundred bytes (4 KiB: ~145 ns), so each probe reads the stack once, into
 * a per-CPU snapshot, and both walkers read from that.  A read that runs
 * off the end of the mapping faults and costs ~1 us, so reads stop at the
 * end of the thread's stack mapping when it is known, else at the end of
 * the page they start in. */
struct snap_ctx {
	__u64 base;  /* user address of stack_snap's first byte */
	__u64 len;   /* bytes copied there; 0 = none */
	__u64 limit; /* readable up to here (the stack mapping's end); 0 = not known */
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
	len = (sn->limit > addr ? sn->limit : (addr | 4095) + 1) - addr;
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
		sn->limit = (addr | 4095) + 1;
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

/* --- The walker --- */

struct vma_slot {
	__u64 start;
	__u64 end;
	__u64 bias; /* ELF address = pc - bias */
	__u32 table_id;
	__u32 rule_base;
	__u32 state; /* enum slot_state */
	__u32 pad;
};

enum slot_state { SLOT_EMPTY = 0, SLOT_TABLE, SLOT_NO_TABLE, SLOT_ANON };

struct walk_ctx {
	__u64 pc;
	__u64 sp;
	__u64 bp;
	__u64 hash;
	__u64 tramp;	 /* this mm's uretprobe trampoline, 0 if none */
	__u32 n;
	__u32 end;	 /* enum walk_end */
	__u32 bp_ok;	 /* the frame's rbp is known */
	__u32 exact_pc;	 /* pc is not a return address (first frame, after a signal) */
	__u32 tgid;
	__u32 next_slot;
	__u32 misses;	 /* rule_cache misses */
	__u32 memo_idx;	 /* walk_memo slot being filled */
	__u64 sp0;	 /* rsp at the start */
	__u32 nrec;	 /* words recorded in the slot */
	__u8 rec;	 /* still recording (the walk can be remembered) */
	__u8 bp_reg;	 /* bp is still the start's rbp register */
	__u8 use_bp0;	 /* a rule used it */
	__u8 bp_unrec;	 /* bp was restored from the stack word at bp_addr, and
			  * no rule has used it yet: not recorded (see bp_use) */
	__u64 bp_addr;
	struct snap_ctx snap;
	struct vma_slot slot[DWLEAK_VMA_CACHE];
};

struct vma_found {
	__u64 start;
	__u64 end;
	__u64 pgoff;
	struct file_key file;
	__u32 has_file;
};

static long vma_cb(struct task_struct *task, struct vm_area_struct *vma, struct vma_found *f)
{
	struct file *file = BPF_CORE_READ(vma, vm_file);

	f->start = BPF_CORE_READ(vma, vm_start);
	f->end = BPF_CORE_READ(vma, vm_end);
	f->pgoff = BPF_CORE_READ(vma, vm_pgoff) << 12;
	if (!file)
		return 0;
	f->file.ino = BPF_CORE_READ(file, f_inode, i_ino);
	f->file.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	f->has_file = 1;
	return 0;
}

static __always_inline void request_table(struct walk_ctx *w, struct vma_found *f, __u64 pc)
{
	struct event *e;
	__u8 one = 1;

	if (bpf_map_update_elem(&requested, &f->file, &one, BPF_NOEXIST))
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_EVENTS_LOST);
		bpf_map_delete_elem(&requested, &f->file);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = EVENT_NEED_TABLE;
	e->tgid = w->tgid;
	e->file = f->file;
	e->pc = pc;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void remember_mapping(struct walk_ctx *w, struct vma_found *f)
{
	struct mapping_key k = { .tgid = w->tgid, .start = f->start };
	struct mapping_seen v = { .end = f->end, .pgoff = f->pgoff, .file = f->file };

	if (!bpf_map_lookup_elem(&mappings, &k) && bpf_map_update_elem(&mappings, &k, &v, BPF_ANY))
		count(CNT_MAPPINGS_FULL);
}

/* A binary search's state, advanced one step at a time. */
struct search_ctx {
	__u32 lo;	/* ends as the number of entries at or before key */
	__u32 hi;
	__u32 base;	/* rows: first_row of the page */
	__u32 tgid;	/* mappings: the process */
	__u64 key;
};

static long map_search_step(__u64 i, struct search_ctx *c)
{
	struct proc_mappings *pm = proc_maps_get(c->tgid);
	__u32 mid;

	if (!pm || c->lo >= c->hi)
		return 1;
	mid = c->lo + (c->hi - c->lo) / 2;
	if (pm->m[mid & (DWLEAK_MAX_PROC_MAPPINGS - 1)].start <= c->key)
		c->lo = mid + 1;
	else
		c->hi = mid;
	return 0;
}

/* Index of the mapping of process TGID that holds PC, or -1. */
__noinline long proc_map_find(__u32 tgid, __u64 pc)
{
	struct proc_mappings *pm = proc_maps_get(tgid);
	struct search_ctx c = { .tgid = tgid, .key = pc };
	__u32 i;

	if (!pm)
		return -1;
	c.hi = pm->n < DWLEAK_MAX_PROC_MAPPINGS ? pm->n : DWLEAK_MAX_PROC_MAPPINGS;
	/* bpf_loop here: as a plain loop this search alone exceeds the
	 * verifier's limit (its state does not prune on Linux 6.18) */
	bpf_loop(DWLEAK_MAPPING_SEARCH_STEPS, map_search_step, &c, 0);
	if (c.lo == 0)
		return -1;
	i = (c.lo - 1) & (DWLEAK_MAX_PROC_MAPPINGS - 1);
	return pc < pm->m[i].end ? i : -1;
}

/* Looks PC up in the mappings user space told us about; fills slot S. */
static int slot_from_proc_maps(struct walk_ctx *w, __u64 pc, struct vma_slot *s)
{
	long i = proc_map_find(w->tgid, pc);
	struct proc_mappings *pm;
	struct proc_mapping *m;

	if (i < 0)
		return -1;
	pm = proc_maps_get(w->tgid);
	if (!pm)
		return -1;
	m = &pm->m[i & (DWLEAK_MAX_PROC_MAPPINGS - 1)];
	if (pc < m->start || pc >= m->end)
		return -1; /* user space republished twice during this lookup */
	s->start = m->start;
	s->end = m->end;
	s->bias = m->bias;
	s->table_id = m->table_id;
	s->rule_base = m->rule_base;
	s->state = SLOT_TABLE;
	return 0;
}

/* Fills a cache slot for the mapping holding PC: from the process's
 * mapping table, else from the kernel's VMA (a mapping user space has not
 * seen yet).  Returns the slot index, or -1 with w->end set. */
static int slot_fill(struct walk_ctx *w, __u64 pc)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct vma_found f = {};
	struct table_info *ti;
	struct vma_slot *s;
	__u64 off;
	__u32 i, idx;
	long err;

	idx = w->next_slot++ & (DWLEAK_VMA_CACHE - 1);
	s = &w->slot[idx];
	if (!slot_from_proc_maps(w, pc, s))
		return idx;
	err = bpf_find_vma(task, pc, vma_cb, &f, 0);
	if (err) {
		w->end = err == -EBUSY ? WALK_ERR_VMA_BUSY : WALK_ERR_NO_MAPPING;
		s->state = SLOT_EMPTY;
		return -1;
	}
	s->start = f.start;
	s->end = f.end;
	s->state = SLOT_ANON;
	if (!f.has_file)
		return idx;
	remember_mapping(w, &f);
	ti = bpf_map_lookup_elem(&tables, &f.file);
	if (!ti) {
		s->state = SLOT_NO_TABLE;
		request_table(w, &f, pc);
		return idx;
	}
	off = pc - f.start + f.pgoff;
	for (i = 0; i < DWLEAK_MAX_SEGMENTS && i < ti->nsegs; i++) {
		if (off < ti->segs[i].off_start || off >= ti->segs[i].off_end)
			continue;
		s->bias = f.start - f.pgoff - ti->segs[i].vaddr_delta;
		s->table_id = ti->table_id;
		s->rule_base = ti->rule_base;
		s->state = SLOT_TABLE;
		return idx;
	}
	s->state = SLOT_NO_TABLE; /* executable code outside the table's segments */
	return idx;
}

static int slot_find(struct walk_ctx *w, __u64 pc)
{
	int i;

	for (i = 0; i < DWLEAK_VMA_CACHE; i++) {
		if (w->slot[i].state != SLOT_EMPTY && pc >= w->slot[i].start && pc < w->slot[i].end)
			return i;
	}
	return slot_fill(w, pc);
}

/*
 * The searches are global (non-inlined) functions, verified once on their
 * own: inlined into the walker's bpf_loop callback, their loops exceeded
 * the verifier's 1M instruction limit (E2BIG on Linux 6.18).  The row
 * search runs as a plain bounded loop (cheaper than a bpf_loop callback
 * per step); the mapping search needs bpf_loop to verify.
 */

static long row_search_step(__u64 i, struct search_ctx *c)
{
	struct unwind_row *row;
	__u32 mid, idx;

	if (c->lo >= c->hi)
		return 1;
	mid = c->lo + (c->hi - c->lo) / 2;
	idx = c->base + mid;
	row = bpf_map_lookup_elem(&rows, &idx);
	if (!row)
		return 1;
	if (row->pc_low <= c->key)
		c->lo = mid + 1;
	else
		c->hi = mid;
	return 0;
}

/* Index of the row in force at ELF address PC in table TABLE_ID, or -1. */
__noinline long row_find(__u32 table_id, __u64 pc)
{
	struct page_key k = { .table_id = table_id, .page = (__u32)(pc >> UNWIND_PAGE_SHIFT) };
	struct search_ctx c = { .key = pc & (UNWIND_PAGE_SIZE - 1) };
	struct unwind_page *pg;

	pg = bpf_map_lookup_elem(&pages, &k);
	if (!pg)
		return -1;
	c.hi = pg->nrows;
	c.base = pg->first_row;
	/* a plain bounded loop: this function is verified on its own, and a
	 * bpf_loop callback per step cost ~20 ns x 17 a frame */
	for (int i = 0; i < DWLEAK_ROW_SEARCH_STEPS; i++)
		if (row_search_step(i, &c))
			break;
	if (c.lo == 0 || c.lo > pg->nrows)
		return -1;
	return c.base + c.lo - 1;
}

/* The rule for ELF address PC in table TABLE_ID, or NULL (no FDE). */
static struct unwind_rule *rule_find(__u32 table_id, __u32 rule_base, __u64 pc)
{
	struct unwind_row *row;
	long r = row_find(table_id, pc);
	__u32 idx;

	if (r < 0)
		return NULL;
	idx = (__u32)r;
	row = bpf_map_lookup_elem(&rows, &idx);
	if (!row)
		return NULL;
	idx = rule_base + row->rule;
	return bpf_map_lookup_elem(&rules, &idx);
}

/* Records in walk_memo slot IDX that word N, OFF bytes above the start's
 * rsp, held VAL.  Returns -1 when the walk cannot be remembered. */
__noinline int memo_note(__u32 idx, __u32 n, __u64 off, __u64 val)
{
	struct walk_memo *m = bpf_map_lookup_elem(&walk_memo, &idx);

	if (!m || n >= WALK_MEMO_WORDS || off > 0xffffffffull)
		return -1;
	/* hide the check from clang, which would drop the mask the verifier needs */
	asm volatile("" : "+r"(n));
	n &= WALK_MEMO_WORDS - 1;
	m->off[n] = (__u32)off;
	m->val[n] = val;
	return 0;
}

/* A walk's user-memory read, recorded for walk_memo. */
static __always_inline int walk_read(struct walk_ctx *w, __u64 *dst, __u64 addr)
{
	if (snap_read(&w->snap, dst, addr))
		return -1;
	if (w->rec && (addr < w->sp0 || memo_note(w->memo_idx, w->nrec, addr - w->sp0, *dst)))
		w->rec = 0;
	w->nrec++;
	return 0;
}

/*
 * The frame's rbp is about to be used by a rule: the stack word it was
 * restored from becomes one of the walk's inputs, so it is recorded for
 * walk_memo now.  Restored values no rule uses (rbp is a general register
 * in code built without frame pointers: python's interpreter saves a
 * different object pointer there at every call) are never recorded, so
 * they do not keep an identical walk from being remembered.
 */
static __always_inline void bp_use(struct walk_ctx *w)
{
	struct walk_memo *m;
	__u32 k = w->nrec;

	w->use_bp0 |= w->bp_reg;
	if (!w->bp_unrec)
		return;
	w->bp_unrec = 0;
	w->nrec = k + 1;
	if (!w->rec)
		return;
	m = bpf_map_lookup_elem(&walk_memo, &w->memo_idx);
	if (!m || k >= WALK_MEMO_WORDS || w->bp_addr < w->sp0 || w->bp_addr - w->sp0 > 0xffffffffull) {
		w->rec = 0;
		return;
	}
	m->off[k & (WALK_MEMO_WORDS - 1)] = (__u32)(w->bp_addr - w->sp0);
	m->val[k & (WALK_MEMO_WORDS - 1)] = w->bp;
}

/* The return address stored at ADDR.  While one of our uretprobes is
 * pending the stack holds the kernel's trampoline there instead; the real
 * address was saved at the probed call's entry. */
static int read_ra(struct walk_ctx *w, __u64 addr, __u64 *ra)
{
	struct thread_state *ts;
	int i;

	if (walk_read(w, ra, addr)) {
		w->end = WALK_ERR_READ;
		return -1;
	}
	if (!w->tramp || *ra != w->tramp)
		return 0;
	w->rec = 0; /* the recovered address comes from thread state, not the stack */
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (ts) {
		for (i = 0; i < DWLEAK_MAX_PENDING; i++) {
			if (i < ts->depth && ts->calls[i].ra_addr == addr) {
				*ra = ts->calls[i].ra;
				count(CNT_TRAMPOLINE_FIXED);
				return 0;
			}
		}
	}
	w->end = WALK_ERR_TRAMPOLINE;
	return -1;
}

/* The interrupted context saved by the kernel in the rt_sigframe. */
static int walk_signal(struct walk_ctx *w)
{
	__u64 sp = w->sp;

	if (walk_read(w, &w->pc, sp + UNWIND_SIGFRAME_RIP) || walk_read(w, &w->sp, sp + UNWIND_SIGFRAME_RSP) ||
	    walk_read(w, &w->bp, sp + UNWIND_SIGFRAME_RBP)) {
		w->end = WALK_ERR_READ;
		return -1;
	}
	w->bp_ok = 1;
	w->bp_reg = 0;
	w->bp_unrec = 0; /* read through walk_read: recorded */
	w->exact_pc = 1;
	return 0;
}

/* Computes the caller's frame from RULE.  Returns 1 to stop the walk.
 * Global, verified once: inlined into the walker's loop its branches
 * multiplied the walker's verification time several times over. */
__noinline int walk_apply(struct walk_ctx *w, struct unwind_rule *rule)
{
	__u64 cfa, ra, bp;

	if (!w || !rule)
		return 1;
	switch (rule->cfa_type) {
	case UNWIND_CFA_RSP:
		cfa = w->sp + rule->cfa_off;
		break;
	case UNWIND_CFA_RBP:
		if (!w->bp_ok)
			goto no_rbp;
		bp_use(w);
		cfa = w->bp + rule->cfa_off;
		break;
	case UNWIND_CFA_PLT11:
	case UNWIND_CFA_PLT10:
		cfa = w->sp + rule->cfa_off;
		if ((w->pc & 15) >= (rule->cfa_type == UNWIND_CFA_PLT11 ? 11 : 10))
			cfa += 8;
		break;
	case UNWIND_CFA_DEREF_RBP:
		if (!w->bp_ok)
			goto no_rbp;
		bp_use(w);
		if (walk_read(w, &cfa, w->bp + rule->cfa_off))
			goto bad_read;
		break;
	case UNWIND_CFA_END:
		w->end = WALK_END_OK;
		return 1;
	case UNWIND_CFA_SIGNAL:
		return walk_signal(w) ? 1 : 0;
	case UNWIND_CFA_NONE:
		w->end = WALK_ERR_NO_FDE;
		return 1;
	default:
		w->end = WALK_ERR_UNSUPPORTED;
		return 1;
	}
	if (read_ra(w, cfa - 8, &ra))
		return 1;
	switch (rule->rbp_type) {
	case UNWIND_RBP_SAME:
		break;
	case UNWIND_RBP_CFA:
		/* recorded only if a rule uses it (bp_use) */
		if (snap_read(&w->snap, &bp, cfa + rule->rbp_off))
			goto bad_read;
		w->bp = bp;
		w->bp_reg = 0;
		w->bp_addr = cfa + rule->rbp_off;
		w->bp_unrec = 1;
		break;
	case UNWIND_RBP_AT_RBP:
		bp_use(w);
		if (!w->bp_ok || walk_read(w, &bp, w->bp + rule->rbp_off)) {
			w->bp_ok = 0;
		} else {
			w->bp = bp;
			w->bp_reg = 0;
		}
		break;
	default:
		w->bp_ok = 0;
	}
	w->sp = cfa;
	w->pc = ra;
	w->exact_pc = 0;
	if (!ra) {
		w->end = WALK_END_ZERO_RA;
		return 1;
	}
	return 0;
no_rbp:
	w->end = WALK_ERR_RBP_UNKNOWN;
	return 1;
bad_read:
	w->end = WALK_ERR_READ;
	return 1;
}

static __always_inline struct rule_cache_slot *rule_cache_get(__u64 pc)
{
	__u32 i = (__u32)((pc * 0x9e3779b97f4a7c15ull) >> (64 - RULE_CACHE_BITS));

	return bpf_map_lookup_elem(&rule_cache, &i);
}

/* Copies the rule for runtime address LOOKUP, searched in the tables (a
 * miss in rule_cache), to OUT; returns -1 with w->end set when there is
 * none.  Global: verified once on its own, which keeps the walker's own
 * verification small. */
__noinline int rule_search(struct walk_ctx *w, __u64 lookup, struct unwind_rule *out)
{
	struct unwind_rule *rule;
	int s;

	if (!w || !out)
		return -1;
	s = slot_find(w, lookup);
	if (s < 0)
		return -1;
	s &= DWLEAK_VMA_CACHE - 1;
	if (w->slot[s].state == SLOT_ANON) {
		w->end = w->tramp && w->pc == w->tramp ? WALK_ERR_TRAMPOLINE : WALK_ERR_NO_MAPPING;
		return -1;
	}
	if (w->slot[s].state != SLOT_TABLE) {
		w->end = WALK_ERR_NO_TABLE;
		return -1;
	}
	rule = rule_find(w->slot[s].table_id, w->slot[s].rule_base, lookup - w->slot[s].bias);
	if (!rule) {
		w->end = WALK_ERR_NO_FDE;
		return -1;
	}
	*out = *rule;
	return 0;
}

/*
 * walk_apply's common cases, inline: CFA = rsp or rbp + offset, rbp kept
 * or restored from the frame, both words in the snapshot.  Each function
 * call costs a return thunk on these CPUs (SRSO mitigation: ~10-20 ns a
 * return), and walk_apply with the snapshot read and the memo record
 * inside made five of them a frame.  Returns 0 when it stepped (w->pc 0:
 * the end of the stack, w->end set), -1 to leave the frame to walk_apply
 * (nothing changed but use_bp0).
 */
static __always_inline int walk_fast(struct walk_ctx *w, struct unwind_rule *rule)
{
	__u64 cfa, ra, bp = 0;
	struct walk_memo *m;
	__u32 k;

	if (rule->rbp_type != UNWIND_RBP_SAME && rule->rbp_type != UNWIND_RBP_CFA)
		return -1;
	if (rule->cfa_type == UNWIND_CFA_RSP) {
		cfa = w->sp + rule->cfa_off;
	} else if (rule->cfa_type == UNWIND_CFA_RBP && w->bp_ok) {
		bp_use(w);
		cfa = w->bp + rule->cfa_off;
	} else {
		return -1;
	}
	if (snap_copy(&w->snap, &ra, cfa - 8) || (w->tramp && ra == w->tramp))
		return -1;
	if (rule->rbp_type == UNWIND_RBP_CFA && snap_copy(&w->snap, &bp, cfa + rule->rbp_off))
		return -1;
	if (w->rec) {
		k = w->nrec;
		m = bpf_map_lookup_elem(&walk_memo, &w->memo_idx);
		if (!m || k >= WALK_MEMO_WORDS || cfa - 8 < w->sp0 || cfa - w->sp0 > 0xffff0000ull) {
			w->rec = 0;
		} else {
			m->off[k & (WALK_MEMO_WORDS - 1)] = (__u32)(cfa - 8 - w->sp0);
			m->val[k & (WALK_MEMO_WORDS - 1)] = ra;
			w->nrec = k + 1;
		}
	}
	if (rule->rbp_type == UNWIND_RBP_CFA) {
		/* recorded only if a rule uses it (bp_use) */
		w->bp = bp;
		w->bp_reg = 0;
		w->bp_addr = cfa + rule->rbp_off;
		w->bp_unrec = 1;
	}
	w->sp = cfa;
	w->pc = ra;
	w->exact_pc = 0;
	if (!ra)
		w->end = WALK_END_ZERO_RA;
	return 0;
}

/* One frame: record pc, find its rule, step to the caller. */
static long walk_step(__u64 i, struct walk_ctx *w)
{
	struct rule_cache_slot *cs;
	struct unwind_rule rule;
	struct stack_trace *st;
	__u32 zero = 0, n = w->n, gen = rule_gen;
	__u64 lookup;

	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 1;
	if (n >= DWLEAK_MAX_FRAMES) {
		w->end = WALK_END_TRUNCATED;
		return 1;
	}
	st->pcs[n] = w->pc | (n && w->exact_pc ? DWLEAK_FRAME_EXACT : 0);
	w->n = n + 1;
	w->hash = (w->hash ^ w->pc) * 0x100000001b3ull;
	lookup = w->exact_pc ? w->pc : w->pc - 1;
	cs = rule_cache_get(lookup);
	if (cs && cs->pc == lookup && cs->gen == gen) {
		rule = cs->rule;
	} else {
		w->misses++;
		if (rule_search(w, lookup, &rule))
			return 1;
		if (cs) {
			cs->pc = lookup;
			cs->gen = gen;
			cs->rule = rule;
		}
	}
	if (rule.cfa_type == UNWIND_CFA_SIGNAL)
		st->pcs[n] |= DWLEAK_FRAME_EXACT; /* the trampoline's first byte, not a return */
	if (walk_fast(w, &rule) == 0)
		return w->pc ? 0 : 1;
	return walk_apply(w, &rule) ? 1 : 0;
}

/* Direct loads through the task's BTF pointers (the verifier guards them),
 * not BPF_CORE_READ: each of its bpf_probe_read_kernel calls costs ~40 ns. */
static __always_inline __u64 uretprobe_trampoline(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct xol_area *xol;
	struct mm_struct *mm;

	mm = task->mm;
	if (!mm)
		return 0;
	xol = mm->uprobes_state.xol_area;
	return xol ? xol->vaddr : 0;
}

/* Stores stack ST under ID in the stacks map, unless this CPU already did.
 * Returns 0 when the map holds it. */
static int stack_store(__u64 id, struct stack_trace *st)
{
	__u32 i = (__u32)(id >> (64 - STACK_SEEN_BITS));
	__u64 *seen = bpf_map_lookup_elem(&stack_seen, &i);

	if (seen && *seen == id)
		return 0;
	if (bpf_map_update_elem(&stacks, &id, st, BPF_NOEXIST) && !bpf_map_lookup_elem(&stacks, &id)) {
		count(CNT_STACKS_FULL);
		return -1;
	}
	if (seen)
		*seen = id;
	return 0;
}

static __always_inline __u32 walk_memo_idx(__u64 pc, __u64 sp)
{
	return (__u32)(((pc ^ (sp * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull) >> (64 - WALK_MEMO_BITS));
}

/* True when the walk remembered in slot IDX started at PC, SP, BP under
 * the rules in force now and every word it read still holds its value. */
__noinline int memo_match(__u32 idx, __u64 pc, __u64 sp, __u64 bp, struct snap_ctx *sn)
{
	struct walk_memo *m = bpf_map_lookup_elem(&walk_memo, &idx);
	struct stack_snap *snap;
	__u32 i, zero = 0;
	__u64 v;

	if (!m || !sn || m->pc0 != pc || m->sp0 != sp || m->gen != rule_gen || (m->use_bp0 && m->bp0 != bp))
		return 0;
	/* one lookup of the snapshot, not one a word: ~4 ns each */
	snap = bpf_map_lookup_elem(&stack_snap, &zero);
	if (!snap)
		return 0;
	for (i = 0; i < WALK_MEMO_WORDS; i++) {
		if (i >= m->nwords)
			return 1;
		/* a word past the snapshot: snap_read takes a new one */
		if (snap_word(snap, sn, &v, sp + m->off[i]) && snap_read(sn, &v, sp + m->off[i]))
			return 0;
		if (v != m->val[i])
			return 0;
	}
	return 1;
}

/* Walks the user stack from CTX (a walk_memo miss, slot MEMO_IDX), stores
 * it and remembers it in that slot when it can.  Returns the stack id. */
static __noinline __u64 stack_walk_full(struct pt_regs *ctx, __u32 kind, __u32 tgid, struct snap_ctx *sn,
					__u32 memo_idx)
{
	struct walk_ctx w = {};
	struct walk_memo *m;
	struct stack_trace *st;
	__u32 zero = 0, gen = rule_gen;

	w.pc = PT_REGS_IP(ctx);
	w.sp = PT_REGS_SP(ctx);
	w.bp = ctx->bp;
	w.memo_idx = memo_idx;
	m = bpf_map_lookup_elem(&walk_memo, &w.memo_idx);
	if (m)
		m->pc0 = 0; /* refilled below, if this walk can be remembered */
	w.sp0 = w.sp;
	w.rec = 1;
	w.bp_reg = 1;
	w.bp_ok = 1;
	w.exact_pc = 1;
	w.tgid = tgid;
	w.hash = 0xcbf29ce484222325ull ^ kind;
	w.tramp = uretprobe_trampoline();
	w.end = WALK_END_TRUNCATED;
	w.snap = *sn;
	bpf_loop(DWLEAK_MAX_FRAMES + 1, walk_step, &w, 0);
	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 0;
	st->nframes = w.n;
	st->end = w.end;
	st->kind = kind;
	st->fp = 0;
	w.hash = (w.hash ^ w.end) * 0x100000001b3ull;
	w.hash ^= w.hash >> 29;
	count(CNT_WALKS);
	count_n(CNT_FRAMES, w.n); /* once a walk, not a map lookup per frame */
	if (w.misses)
		count_n(CNT_RULE_CACHE_MISSES, w.misses);
	count(CNT_WALK_END_BASE + (w.end < WALK_END_COUNT ? w.end : WALK_ERR_READ));
	if (!stack_store(w.hash, st) && w.rec && w.nrec <= WALK_MEMO_WORDS && m &&
	    (w.end == WALK_END_OK || w.end == WALK_END_ZERO_RA || w.end == WALK_END_TRUNCATED)) {
		m->sp0 = w.sp0;
		m->bp0 = ctx->bp;
		m->use_bp0 = w.use_bp0;
		m->gen = gen;
		m->nwords = w.nrec;
		m->nframes = w.n;
		m->end = w.end;
		m->stack_id = w.hash;
		m->span = (__u32)(w.sp - w.sp0);
		m->pc0 = PT_REGS_IP(ctx);
	}
	*sn = w.snap; /* it may have moved up the stack */
	sn->want = w.sp - w.sp0; /* the last frame's CFA: as far as the walk read, about */
	return w.hash;
}

/* Walks the user stack at an allocator's entry and stores it.  Returns the
 * stack id (a hash of its frames, kind and end).  The remembered walk's
 * check is inline: it is the common case, and a call costs a return
 * thunk here. */
static __always_inline __u64 stack_walk(struct pt_regs *ctx, __u32 kind, __u32 tgid, struct snap_ctx *sn)
{
	__u64 pc = PT_REGS_IP(ctx), sp = PT_REGS_SP(ctx);
	__u32 idx = walk_memo_idx(pc, sp);
	struct walk_memo *m;

	if (memo_match(idx, pc, sp, ctx->bp, sn)) {
		m = bpf_map_lookup_elem(&walk_memo, &idx);
		if (m) {
			count(CNT_WALKS);
			count(CNT_WALKS_MEMO);
			count_n(CNT_FRAMES, m->nframes);
			count(CNT_WALK_END_BASE + (m->end < WALK_END_COUNT ? m->end : WALK_ERR_READ));
			sn->want = m->span; /* the next read's size, as after the walk */
			return m->stack_id;
		}
	}
	return stack_walk_full(ctx, kind, tgid, sn, idx);
}

/* --- The frame-pointer walk (--unwind fp/both), for comparison --- */

struct fp_ctx {
	__u64 bp;
	__u64 hash;
	__u32 n;
	__u32 end;
	struct snap_ctx snap;
};

/* One frame of the rbp chain: the return address sits above the saved
 * rbp, as every frame-pointer unwinder (perf, bpf_get_stack) assumes. */
static long fp_step(__u64 i, struct fp_ctx *f)
{
	struct stack_trace *st;
	__u64 ra, next;
	__u32 zero = 0, n = f->n;

	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 1;
	if (n >= DWLEAK_MAX_FRAMES) {
		f->end = WALK_END_TRUNCATED;
		return 1;
	}
	if (!f->bp) {
		f->end = WALK_END_OK;
		return 1;
	}
	if (snap_read(&f->snap, &ra, f->bp + 8) || snap_read(&f->snap, &next, f->bp)) {
		f->end = WALK_ERR_READ;
		return 1;
	}
	if (!ra) {
		f->end = WALK_END_ZERO_RA;
		return 1;
	}
	st->pcs[n] = ra;
	f->n = n + 1;
	f->hash = (f->hash ^ ra) * 0x100000001b3ull;
	if (!next) {
		f->end = WALK_END_OK; /* rbp 0: the psABI's end of the frame chain (_start) */
		return 1;
	}
	if (next <= f->bp) {
		f->end = WALK_ERR_RBP_UNKNOWN; /* the chain must climb the stack */
		return 1;
	}
	f->bp = next;
	return 0;
}

/* Walks rbp from the probe.  Like perf since Linux 6.11 for uprobes at a
 * function's entry, the return address at [rsp] is taken as the caller's
 * frame first (no frame has been set up there yet). */
static __u64 fp_walk(struct pt_regs *ctx, __u32 kind, struct snap_ctx *sn)
{
	struct fp_ctx f = { .bp = ctx->bp, .hash = 0x84222325cbf29ce4ull ^ kind, .n = 2, .snap = *sn };
	struct stack_trace *st;
	__u32 zero = 0;
	__u64 ra = 0;

	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 0;
	st->pcs[0] = PT_REGS_IP(ctx);
	snap_read(&f.snap, &ra, PT_REGS_SP(ctx));
	st->pcs[1] = ra;
	f.hash = ((f.hash ^ st->pcs[0]) * 0x100000001b3ull ^ ra) * 0x100000001b3ull;
	f.end = WALK_END_TRUNCATED;
	bpf_loop(DWLEAK_MAX_FRAMES, fp_step, &f, 0);
	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return 0;
	st->nframes = f.n;
	st->end = f.end;
	st->kind = kind;
	st->fp = 1;
	f.hash = (f.hash ^ f.end) * 0x100000001b3ull;
	f.hash ^= f.hash >> 29;
	count(CNT_FP_WALKS);
	count_n(CNT_FP_FRAMES, f.n - 2); /* the walked ones, past ip and [rsp] */
	stack_store(f.hash, st);
	*sn = f.snap;
	return f.hash;
}

/* --- Bookkeeping --- */

/* Records go without a wakeup: user space drains the ring on a timer, and
 * is woken only after every alloc_ring_wake records this CPU wrote. */
static __always_inline __u64 ring_flags(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&ring_records, &zero);

	if (n && !(++*n & (alloc_ring_wake - 1)))
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

static void emit_alloc(__u32 type, __u64 addr, __u64 size, __u64 stack_id, __u64 fp_stack_id, __u32 kind)
{
	struct alloc_event *e = bpf_ringbuf_reserve(&alloc_events, sizeof(*e), 0);

	if (!e) {
		count(CNT_RING_FULL);
		return;
	}
	e->type = type;
	e->kind = kind;
	e->addr = addr;
	e->size = size;
	e->stack_id = stack_id;
	e->fp_stack_id = fp_stack_id;
	bpf_ringbuf_submit(e, ring_flags());
}

/* ADDR is released (or, for realloc, about to be moved): sent before the
 * allocator can hand the block out again. */
static void emit_free(__u64 addr)
{
	struct free_event *e = bpf_ringbuf_reserve(&alloc_events, sizeof(*e), 0);

	if (!e) {
		count(CNT_RING_FULL);
		return;
	}
	e->type = AEV_FREE;
	e->pad = 0;
	e->addr = addr;
	bpf_ringbuf_submit(e, ring_flags());
}

static __always_inline __u32 current_tgid(void)
{
	return bpf_get_current_pid_tgid() >> 32;
}

/* Whether an allocator probe fired in the target (see tgid_by_link). */
static __always_inline bool probe_in_target(void)
{
	return tgid_by_link || current_tgid() == target_tgid;
}

/* Drops pending calls that cannot be live any more: the stack grows down,
 * so a call still running lies above SP; at SP itself only a tail call
 * (whose return slot then holds a uretprobe trampoline, not the saved
 * address) is live.  Stale entries come from a return we never saw, e.g.
 * a call already running when the return probe was attached. */
static void pending_prune(struct thread_state *ts, __u64 sp, __u64 ra)
{
	struct pending_call *top;
	__u32 i, d;

	for (i = 0; i < DWLEAK_MAX_PENDING; i++) {
		d = ts->depth;
		if (d == 0 || d > DWLEAK_MAX_PENDING)
			return;
		top = &ts->calls[(d - 1) & (DWLEAK_MAX_PENDING - 1)];
		if (top->ra_addr > sp || (top->ra_addr == sp && ra != top->ra))
			return;
		ts->depth = d - 1;
		count(CNT_PENDING_LOST);
	}
}

/* A call is nested (counted by its outer call) when it comes from inside
 * an allocator function (realloc calling malloc, operator new calling
 * malloc), or is a tail call reusing the return slot of the call just
 * made (operator new[] jumping to operator new).  A return address inside
 * an allocator function means a call of it is running, pending or not. */
static int call_nested(struct thread_state *ts, __u64 sp, __u64 ra, __u64 func)
{
	__u32 i, d = ts->depth;

	for (i = 0; i < DWLEAK_SKIPPED_FUNCS; i++)
		if (ra >= ts->skipped[i].start && ra < ts->skipped[i].end)
			return 1;
	if (ts->skip_sp == sp && ts->skip_ra == ra && ts->skip_func != func)
		return 1;
	if (d == 0 || d > DWLEAK_MAX_PENDING)
		return 0;
	if (ts->calls[(d - 1) & (DWLEAK_MAX_PENDING - 1)].ra_addr == sp)
		return 1;
	for (i = 0; i < DWLEAK_MAX_PENDING && i < d; i++) {
		if (ra >= ts->calls[i].func_start && ra < ts->calls[i].func_end)
			return 1;
	}
	return 0;
}

/* A call that cancelled its return probe: remember what call_nested needs. */
static void skip_remember(struct thread_state *ts, __u64 sp, __u64 ra, __u64 start, __u64 end)
{
	__u32 i;

	ts->skip_sp = sp;
	ts->skip_ra = ra;
	ts->skip_func = start;
	for (i = 0; i < DWLEAK_SKIPPED_FUNCS; i++)
		if (ts->skipped[i].start == start)
			return;
	i = ts->skip_next++ & (DWLEAK_SKIPPED_FUNCS - 1);
	ts->skipped[i].start = start;
	ts->skipped[i].end = end;
}

static __u64 sample_gap(void)
{
	__u32 i = bpf_get_prandom_u32() & (DWLEAK_SAMPLE_GAPS - 1);
	__u64 *gap = bpf_map_lookup_elem(&sample_gaps, &i);

	return gap ? *gap : sample_bytes;
}

/*
 * --sample-bytes: sample points fall on the thread's allocated bytes as a
 * Poisson process of rate 1/N (exponential gaps); an allocation is sampled
 * when a point falls in it, with probability 1 - exp(-size/N), which user
 * space divides by to estimate without bias.  By memorylessness, the next
 * point after a sampled allocation is a fresh gap past its end.
 */
static int sample_take(struct thread_state *ts, __u64 size)
{
	if (!sample_bytes)
		return 1;
	if (!ts->sample_init) {
		ts->sample_left = (__s64)sample_gap();
		ts->sample_init = 1;
	}
	ts->sample_left -= (__s64)size;
	if (ts->sample_left > 0)
		return 0;
	ts->sample_left = (__s64)sample_gap();
	return 1;
}

/* The end of the mapping that holds the thread's stack pointer SP, found
 * once per thread (and again when SP leaves it: a signal stack, growth),
 * so stack reads can go up to it without running off the end. */
static __u64 stack_limit(struct thread_state *ts, __u64 sp)
{
	struct vma_found f = {};

	if (sp >= ts->stack_lo && sp < ts->stack_hi) {
		if (!ts->read_hi)
			return ts->stack_hi;
		return sp < ts->read_hi ? ts->read_hi : 0;
	}
	ts->read_hi = 0;
	if (bpf_find_vma(bpf_get_current_task_btf(), sp, vma_cb, &f, 0)) {
		ts->stack_lo = ts->stack_hi = 0; /* busy: one page at a time this call */
		return 0;
	}
	ts->stack_lo = f.start;
	ts->stack_hi = f.end;
	return f.end;
}

/* Remembers where a read of this thread's stack failed (see snap_take). */
static __always_inline void stack_learn(struct thread_state *ts, struct snap_ctx *sn)
{
	if (sn->failed && (!ts->read_hi || sn->limit < ts->read_hi))
		ts->read_hi = sn->limit;
}

/* An allocator call's entry.  Returns 1 when nothing is left to do at its
 * return (SESSION: the return probe can be cancelled), else 0. */
static __always_inline int alloc_enter(struct pt_regs *ctx, __u64 cookie, __u64 size, __u64 arg,
				       bool session)
{
	__u32 kind = DWLEAK_COOKIE_KIND(cookie);
	struct thread_state *ts;
	struct pending_call *c;
	__u32 tgid = target_tgid, d;
	__u64 sp = PT_REGS_SP(ctx), ra = 0;
	struct snap_ctx sn = {};
	bool own;

	if (!probe_in_target())
		return 0;
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts)
		return 0;
	/* one read of user memory: the whole stack top for the walk, which
	 * holds the return address; with sampling most calls are not walked,
	 * so just the return address */
	sn.limit = stack_limit(ts, sp);
	sn.want = ts->snap_hint;
	/* unsampled calls are not walked: they need no walker buffers */
	own = !sample_bytes && walker_enter();
	if (own ? snap_take(&sn, sp) || snap_copy(&sn, &ra, sp) : read_u64(&ra, sp))
		ra = 0;
	pending_prune(ts, sp, ra);
	d = ts->depth;
	if (d >= DWLEAK_MAX_PENDING) {
		count(CNT_PENDING_FULL);
		return 0;
	}
	c = &ts->calls[d & (DWLEAK_MAX_PENDING - 1)];
	c->ra_addr = sp;
	c->ra = ra;
	c->size = size;
	c->arg = arg;
	c->kind = kind;
	c->func_start = PT_REGS_IP(ctx);
	c->func_end = c->func_start + (DWLEAK_COOKIE_SIZE(cookie) ?: 1);
	c->outer = !call_nested(ts, sp, ra, c->func_start);
	c->stack_id = 0;
	c->fp_stack_id = 0;
	c->sampled = !c->outer || sample_take(ts, size);
	/* realloc's old block is forgotten now, before realloc can release
	 * it for another thread to get (if realloc then fails, the block
	 * stays forgotten: counted in failed_allocs) */
	if (c->outer && arg &&
	    (kind == ALLOC_REALLOC || kind == ALLOC_REALLOCARRAY || kind == ALLOC_RALLOCX))
		emit_free(arg);
	if (c->outer && !c->sampled) {
		count(CNT_UNSAMPLED);
	} else if (c->outer) {
		count(CNT_ALLOC_CALLS);
		if (sample_bytes)
			own = walker_enter();
		if (!own) {
			count(CNT_WALKER_BUSY);
			c->stack_id = DWLEAK_STACK_WALKER_BUSY;
			c->fp_stack_id = (unwind_mode & UNWIND_MODE_FP) ? DWLEAK_STACK_WALKER_BUSY : 0;
		} else if (bench_no_walk) {
			c->stack_id = DWLEAK_STACK_NOT_WALKED;
		} else {
			if (unwind_mode & UNWIND_MODE_DWARF)
				c->stack_id = stack_walk(ctx, kind, tgid, &sn);
			if (unwind_mode & UNWIND_MODE_FP)
				c->fp_stack_id = fp_walk(ctx, kind, &sn);
			if (!(unwind_mode & UNWIND_MODE_DWARF))
				c->stack_id = c->fp_stack_id;
		}
	} else {
		count(CNT_NESTED_CALLS);
	}
	if (own)
		walker_leave();
	stack_learn(ts, &sn);
	if (own && c->outer && c->sampled && (unwind_mode & UNWIND_MODE_DWARF))
		ts->snap_hint = sn.want < STACK_SNAP - 512 ? (sn.want + 512) & ~255ull : STACK_SNAP;
	/* xallocx reports at its return whether it resized, sampled or not */
	if (session && (!c->outer || !c->sampled) && kind != ALLOC_XALLOCX) {
		skip_remember(ts, sp, ra, c->func_start, c->func_end);
		return 1;
	}
	ts->depth = d + 1;
	return 0;
}

/* The call in C returned RET: tell user space what now holds what. */
static void alloc_done(struct pending_call *c, __u64 ret)
{
	__u64 addr = ret;

	switch (c->kind) {
	case ALLOC_XALLOCX:
		/* returns the real size; at least SIZE means the resize happened
		 * (sampled or not: the block may be a sampled one) */
		if (ret >= c->size)
			emit_alloc(AEV_RESIZE, c->arg, c->size, 0, 0, c->kind);
		return;
	case ALLOC_REALLOC:
	case ALLOC_REALLOCARRAY:
		/* realloc(p, 0) frees p and returns NULL (glibc): not a failure */
		if (!ret && !(c->size == 0 && c->arg))
			count(CNT_FAILED_ALLOCS);
		break;
	case ALLOC_POSIX_MEMALIGN:
		if ((int)ret != 0 || read_u64(&addr, c->arg)) {
			count(CNT_FAILED_ALLOCS);
			return;
		}
		break;
	default:
		if (!ret)
			count(CNT_FAILED_ALLOCS);
		break;
	}
	if (addr && c->sampled)
		emit_alloc(AEV_ALLOC, addr, c->size, c->stack_id, c->fp_stack_id, c->kind);
}

static __always_inline int alloc_return(struct pt_regs *ctx, __u64 ret)
{
	struct pending_call c;
	struct thread_state *ts;
	__u64 sp = PT_REGS_SP(ctx);
	__u32 i, d;

	if (!probe_in_target())
		return 0;
	ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (!ts)
		return 0;
	d = ts->depth;
	/* the matching entry is the innermost whose return slot sp just popped;
	 * entries above it belong to calls left by longjmp */
	for (i = 0; i < DWLEAK_MAX_PENDING; i++) {
		__u32 k = (d - 1 - i) & (DWLEAK_MAX_PENDING - 1);

		if (i >= d)
			break;
		if (ts->calls[k].ra_addr + 8 != sp)
			continue;
		c = ts->calls[k];
		ts->depth = d - 1 - i;
		if (c.outer)
			alloc_done(&c, ret);
		return 0;
	}
	count(CNT_PENDING_LOST);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_exit, __u64 ret)
{
	return alloc_return(ctx, ret);
}

/* n * size, saturated: an overflowing request fails in the allocator. */
static __always_inline __u64 mul_sat(__u64 n, __u64 size)
{
	__u64 limit;

	if (!size)
		return 0;
	limit = ~0ull / size;
	/* keep clang from turning the check into a 128-bit multiply (__multi3),
	 * which BPF has no instruction for (clang 14) */
	asm volatile("" : "+r"(limit));
	return n > limit ? ~0ull : n * size;
}

/* One entry program serves every allocator function (one verification at
 * load); the attach cookie says which function fired and its size.  One
 * call site of alloc_enter, inlined: a BPF-to-BPF call costs a return
 * thunk (~10-20 ns) on these CPUs. */
static __always_inline int alloc_entry(struct pt_regs *ctx, bool session)
{
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx), a3 = PT_REGS_PARM3(ctx);
	__u64 cookie = bpf_get_attach_cookie(ctx), size, arg = 0;

	switch (DWLEAK_COOKIE_KIND(cookie)) {
	case ALLOC_CALLOC:
		size = mul_sat(a1, a2);
		break;
	case ALLOC_REALLOC:
	case ALLOC_RALLOCX:
	case ALLOC_XALLOCX:
		size = a2;
		arg = a1;
		break;
	case ALLOC_REALLOCARRAY:
		size = mul_sat(a2, a3);
		arg = a1;
		break;
	case ALLOC_POSIX_MEMALIGN:
		size = a3;
		arg = a1;
		break;
	case ALLOC_ALIGNED_ALLOC:
	case ALLOC_MEMALIGN:
		size = a2;
		break;
	case ALLOC_MALLOC:
	case ALLOC_VALLOC:
	case ALLOC_PVALLOC:
	case ALLOC_NEW:
	case ALLOC_NEW_ARRAY:
	case ALLOC_MALLOCX:
		size = a1;
		break;
	default:
		return 0;
	}
	return alloc_enter(ctx, cookie, size, arg, session);
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
	if (!ptr || !probe_in_target())
		return 0;
	count(CNT_FREE_CALLS);
	emit_free(ptr);
	return 0;
}

/*
 * The dynamic linker calls _dl_debug_state (the debugger hook) before and
 * after it maps or unmaps objects, at start-up and at every dlopen and
 * dlclose.  After (r_state RT_CONSISTENT) we tell user space to load the
 * new objects' tables; for a command we started, we also stop it until
 * that is done, so even the first allocation from new code has a complete
 * stack.  No stop without a delivered event: nobody would resume it.
 */
SEC("uprobe")
int BPF_KPROBE(dl_state)
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

/*
 * --mmap: anonymous mmap, munmap and mremap the program makes itself.  BTF
 * raw tracepoints (no tracefs needed) on every syscall, filtered to the
 * target; REGS are the user registers at the syscall, so the walker starts
 * from the calling code.  Calls made inside an allocator call (glibc's
 * malloc mapping a large block, realloc's mremap) belong to it and are
 * skipped.
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(mmap_enter, struct pt_regs *regs, long id)
{
	struct thread_state *ts;
	__u32 tgid = current_tgid();
	struct snap_ctx sn = {};
	__u64 flags;

	if (!track_mmap || tgid != target_tgid ||
	    (id != NR_MMAP && id != NR_MUNMAP && id != NR_MREMAP))
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
	if (id == NR_MMAP && !walker_enter()) {
		count(CNT_WALKER_BUSY);
		ts->sc.stack_id = DWLEAK_STACK_WALKER_BUSY;
		ts->sc.fp_stack_id = (unwind_mode & UNWIND_MODE_FP) ? DWLEAK_STACK_WALKER_BUSY : 0;
	} else if (id == NR_MMAP) {
		if (unwind_mode & UNWIND_MODE_DWARF)
			ts->sc.stack_id = stack_walk(regs, ALLOC_MMAP, tgid, &sn);
		if (unwind_mode & UNWIND_MODE_FP)
			ts->sc.fp_stack_id = fp_walk(regs, ALLOC_MMAP, &sn);
		if (!(unwind_mode & UNWIND_MODE_DWARF))
			ts->sc.stack_id = ts->sc.fp_stack_id;
		walker_leave();
		stack_learn(ts, &sn);
	}
	ts->sc.nr = (__u32)id;
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(mmap_exit, struct pt_regs *regs, long ret)
{
	struct thread_state *ts;
	struct mmap_event *e;
	__u32 nr;

	if (!track_mmap || current_tgid() != target_tgid)
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
	bpf_ringbuf_submit(e, 0);
	return 0;
}
