/* Which mapping holds an address: for a pc, its mapping (from the table
 * user space published for the process, else bpf_find_vma), that
 * mapping's unwind table and the row in force there (the lookup of
 * bpf/abi/unwind_step.h over the walker's maps); for the stack pointer,
 * the end of the stack, which bounds every read of it.
 * Part of dwleak.bpf.c's one translation unit (see there). */
#ifndef DWLEAK_MAPPINGS_BPF_H
#define DWLEAK_MAPPINGS_BPF_H

#include "constants.h"
#include "maps.bpf.h"
#include "walk_ctx.bpf.h"
#include "unwind_step.h"

#define EBUSY 16 /* bpf_find_vma: mmap lock contended */

/* The mapping table in use in slot PSLOT, when it is process TGID's; NULL
 * when the process has no slot (or user space is handing the slot over). */
static __always_inline struct proc_mappings *proc_maps_get(__u32 pslot, __u32 tgid)
{
	__u32 *cur, buf;
	struct proc_mappings *pm;

	if (pslot >= DWLEAK_MAX_PROC_SLOTS)
		return NULL;
	cur = bpf_map_lookup_elem(&proc_maps_cur, &pslot);
	if (!cur)
		return NULL;
	buf = 2 * pslot + (*cur & 1);
	pm = bpf_map_lookup_elem(&proc_maps, &buf);
	return pm && pm->tgid == tgid ? pm : NULL;
}

/* The proc_maps slot of the calling thread's process TGID, looked up in
 * the procs map once per thread and kept in its state TS, with the
 * process's image (ts->image; 0 when it is not in the map). */
static __always_inline __u32 thread_proc_slot(struct thread_state *ts, __u32 tgid)
{
	struct proc_info *pi;

	if (!ts->proc_slot) {
		pi = bpf_map_lookup_elem(&procs, &tgid);
		ts->proc_slot = (pi ? pi->slot : DWLEAK_NO_SLOT) + 1;
		ts->image = pi ? pi->image : 0;
	}
	return ts->proc_slot - 1;
}

/* What bpf_find_vma's callback (vma_cb) reports of a mapping. */
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
	f->pgoff = BPF_CORE_READ(vma, vm_pgoff) << DWLEAK_PAGE_SHIFT;
	if (!file)
		return 0;
	f->file.ino = BPF_CORE_READ(file, f_inode, i_ino);
	f->file.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	f->has_file = 1;
	return 0;
}

/* Asks user space for the table of F's file (met at PC), once per file. */
static __always_inline void request_table(struct walk_ctx *w, struct vma_found *f, __u64 pc)
{
	struct event *e;
	__u8 one = 1;

	if (bpf_map_update_elem(&requested, &f->file, &one, BPF_NOEXIST))
		return;
	e = event_new(EVENT_NEED_TABLE, w->tgid);
	if (!e) {
		bpf_map_delete_elem(&requested, &f->file);
		return;
	}
	e->file = f->file;
	e->pc = pc;
	bpf_ringbuf_submit(e, 0);
}

/* Keeps the mapping F for naming frames, even after the process exits. */
static __always_inline void remember_mapping(struct walk_ctx *w, struct vma_found *f)
{
	struct mapping_key k = { .tgid = w->tgid, .start = f->start };
	struct mapping_seen v = { .end = f->end, .pgoff = f->pgoff, .file = f->file };

	if (!bpf_map_lookup_elem(&mappings, &k) && bpf_map_update_elem(&mappings, &k, &v, BPF_ANY))
		count(CNT_MAPPINGS_FULL);
}

/*
 * The searches are global (non-inlined) functions, verified once on their
 * own: inlined into the walker's bpf_loop callback, their loops exceeded
 * the verifier's 1M instruction limit (E2BIG on Linux 6.18).  The row
 * search (row_find) runs as a plain bounded loop (cheaper than a bpf_loop
 * callback per step); the mapping search needs bpf_loop to verify.
 */
/* The mapping search's state, advanced one step at a time. */
struct search_ctx {
	__u32 lo;	/* ends as the number of mappings starting at or before key */
	__u32 hi;
	__u32 tgid;	/* the process */
	__u32 pslot;	/* its slot */
	__u64 key;
};

static long map_search_step(__u64 i, struct search_ctx *c)
{
	struct proc_mappings *pm = proc_maps_get(c->pslot, c->tgid);
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

/* Index of the mapping of process TGID (slot PSLOT) that holds PC, or -1. */
__noinline long proc_map_find(__u32 tgid, __u32 pslot, __u64 pc)
{
	struct proc_mappings *pm = proc_maps_get(pslot, tgid);
	struct search_ctx c = { .tgid = tgid, .pslot = pslot, .key = pc };
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
	long i = proc_map_find(w->tgid, w->pslot, pc);
	struct proc_mappings *pm;
	struct proc_mapping *m;

	if (i < 0)
		return -1;
	pm = proc_maps_get(w->pslot, w->tgid);
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

/* --- The rule at a pc: the shared lookup (bpf/abi/unwind_step.h) over
 * the pages, rows and rules maps --- */

/* A table in the maps: its pages are keyed by table_id, its rows are in
 * the global rows array (pages give global indexes), its rules from
 * rule_base on in the global rules array. */
struct unwind_table_ref {
	__u32 table_id;
	__u32 rule_base;
};

static __always_inline const struct unwind_page *table_page(const struct unwind_table_ref *t, __u64 page)
{
	struct page_key k = { .table_id = t->table_id, .page = (__u32)page };

	return bpf_map_lookup_elem(&pages, &k);
}

static __always_inline const struct unwind_row *table_row(const struct unwind_table_ref *t, __u32 idx)
{
	return bpf_map_lookup_elem(&rows, &idx);
}

static __always_inline const struct unwind_rule *table_rule(const struct unwind_table_ref *t, __u32 idx)
{
	__u32 i = t->rule_base + idx;

	return bpf_map_lookup_elem(&rules, &i);
}

/* Constant: the lookups below inline these hooks. */
static const struct unwind_table_ops table_ops = { table_page, table_row, table_rule };

/* Index of the row in force at ELF address PC in table TABLE_ID, or -1.
 * The binary search runs as a plain bounded loop: this function is
 * verified on its own, and a bpf_loop callback per step cost ~20 ns x 17
 * a frame. */
__noinline long row_find(__u32 table_id, __u64 pc)
{
	struct unwind_table_ref t = { .table_id = table_id };

	return unwind_row_find(&t, &table_ops, pc);
}

/* The rule for ELF address PC in table TABLE_ID, or NULL (no FDE). */
static const struct unwind_rule *rule_find(__u32 table_id, __u32 rule_base, __u64 pc)
{
	struct unwind_table_ref t = { .table_id = table_id, .rule_base = rule_base };
	long r = row_find(table_id, pc);

	if (r < 0)
		return NULL;
	return unwind_rule_of_row(&t, &table_ops, (__u32)r);
}

/* --- The thread's stack mapping: how far a stack read may go --- */

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


#endif
