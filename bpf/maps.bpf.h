/* Every map of the kernel program, in one place: what each holds, why it
 * has its type and size, and which ones user space sizes before load.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_MAPS_BPF_H
#define DWLEAK_MAPS_BPF_H

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

/* The traced processes (filled by user space): where each one's mapping
 * table is, and its dynamic linker's hook.  Looked up once per thread
 * (thread_state.proc_slot), at each _dl_debug_state and --mmap syscall. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DWLEAK_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct proc_info);
} procs SEC(".maps");

/* Each slot's executable mappings, kept by user space in two buffers
 * (2 * slot and 2 * slot + 1): it rewrites the one not in use, then flips
 * the slot's proc_maps_cur, so a walker never reads a table half
 * rewritten.  Arrays, not a hash keyed by tgid: their lookups compile to
 * an address computation, and the search (proc_map_find) makes one per
 * step. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * DWLEAK_MAX_PROC_SLOTS);
	__type(key, __u32);
	__type(value, struct proc_mappings);
} proc_maps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DWLEAK_MAX_PROC_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} proc_maps_cur SEC(".maps");

/* rows and rules are sized from user space before load, from the tables
 * it compiled and with room for libraries loaded later; user space maps
 * them and writes a table's rows in place (a batch update went through
 * the syscall an element at a time: ~60 ms of a python trace's start). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_row);
} rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
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

/* Walked stacks by id, until user space moves them out (stacks.bpf.h);
 * resized from user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
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

/*
 * rule_cache, walk_memo and stack_seen are per CPU, each CPU a slice of
 * one plain array: slot I of this CPU's is key cpu << BITS | I, the array
 * made (1 << BITS) x the possible CPUs long by user space (probes.c) before
 * it loads.  A BPF per-CPU array allocates each element on its own: these
 * three took 21 ms of every start.  A uprobe program runs with migration
 * disabled, so its CPU does not change under it (guard.bpf.h: preemption).
 */
static __always_inline __u32 cpu_slot(__u32 i, __u32 bits)
{
	return bpf_get_smp_processor_id() << bits | i;
}

struct rule_cache_slot {
	__u64 pc;	/* the address looked up; 0 = empty */
	__u32 gen;	/* rule_gen when filled */
	__u32 tgid;	/* in which process: another may map other code there */
	struct unwind_rule rule;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
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
	__u32 tgid;	/* the process it walked */
	__u32 image;	/* and its image, which seeds stack_id: an exec keeps the pid */
	__u32 off[WALK_MEMO_WORDS]; /* bytes above sp0 */
	__u64 val[WALK_MEMO_WORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << WALK_MEMO_BITS);
	__type(key, __u32);
	__type(value, struct walk_memo);
} walk_memo SEC(".maps");

/* Stack ids this CPU already stored in the stacks map, so a known stack
 * costs no map update (never emptied while tracing: user space may have
 * moved the entry out since, and keeps it; see stacks.bpf.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
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

/* Programs using the walker's per-CPU buffers on this CPU: see
 * walker_enter (guard.bpf.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} walker_users SEC(".maps");

/* Every part counts through these (enum dwleak_counter). */
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

/* A zeroed struct event of TYPE for process TGID, reserved in the events
 * ring, or NULL when the ring is full (counted: CNT_EVENTS_LOST). */
static __always_inline struct event *event_new(__u32 type, __u32 tgid)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(CNT_EVENTS_LOST);
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = type;
	e->tgid = tgid;
	return e;
}

#endif
