/* A traced process's walk in the process: its library asked to record
 * into rings, its unwind image handed over, its rings drained into its
 * ledger in causal order (see proc_rings.h). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "constants.h"
#include "dwleak.h"
#include "preload.h"
#include "proc_rings.h"

#define CTL_FIELD(f) offsetof(struct dwleak_preload_control, f)

/* An arena holds the first image and room for a few rebuilt ones (each
 * goes to a new offset: a thread may still walk the one before). */
#define ARENA_MIN (1ull << 20)
#define ARENA_IMAGES 4

/* The invariant TSC, as the library's records carry it (rdtscp: after the
 * instructions before it, as there).  arm64's counterpart is the virtual
 * counter (CNTVCT_EL0, after an isb), which the library's arm64 build
 * stamps its records with (preload/walk_ring.c). */
static uint64_t tsc_now(void)
{
#if defined(__aarch64__)
	uint64_t v;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
#else
	uint32_t lo, hi, aux;

	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	return (uint64_t)hi << 32 | lo;
#endif
}

/* The directory's STOPPED word as R->stopped keeps it (the process wrote
 * it: a value past any reason is kept as the largest, still a stop). */
static uint32_t stop_reason(uint64_t word)
{
	return word > UINT32_MAX ? UINT32_MAX : (uint32_t)word;
}

uint64_t proc_rings_clock(void)
{
	return tsc_now();
}

static int ctl_put(const struct proc_rings_io *io, pid_t pid, const struct proc_rings *r, size_t off,
		   const void *v, size_t len)
{
	return io->mem_write(io->ctx, pid, r->ctl + off, v, len);
}

uint64_t proc_rings_stack_id(uint32_t image, uint32_t kind, uint32_t end, bool fp, const uint64_t *pcs,
			     uint32_t nframes)
{
	uint64_t h = (fp ? DWLEAK_FP_STACK_ID_SEED : FNV64_OFFSET) ^ kind ^ ((uint64_t)image << 32);
	uint32_t i;

	/* the DWARF walk hashes each pc without its DWLEAK_FRAME_EXACT mark
	 * (bpf/walk.bpf.h: the register, not the stored frame); the FP walk
	 * stores what it hashes */
	for (i = 0; i < nframes; i++)
		h = (h ^ (fp ? pcs[i] : pcs[i] & ~DWLEAK_FRAME_EXACT)) * FNV64_PRIME;
	h = (h ^ end) * FNV64_PRIME;
	h ^= h >> 29;
	return h;
}

/* Arena bytes for an image of LEN: room for ARENA_IMAGES of its size,
 * whole MiBs. */
static uint64_t arena_for(size_t len)
{
	uint64_t want = (uint64_t)len * ARENA_IMAGES;

	return want < ARENA_MIN ? ARENA_MIN : (want + ARENA_MIN - 1) & ~(ARENA_MIN - 1);
}

/* Builds PID's image and, when no arena it has can hold it, asks for a
 * larger one. */
static int image_prepare(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid)
{
	void *blob = NULL;
	size_t len = 0;
	uint64_t want;
	int err = io->image_build(io->ctx, pid, &blob, &len);

	if (err)
		return err;
	free(r->blob);
	r->blob = blob;
	r->blob_len = len;
	want = arena_for(len);
	/* the arena in use cannot take this image and one more of its size:
	 * a new one, unless one asked for already (larger than the arena in
	 * use: the library maps it at its next call) holds this image.
	 * Asked a handover early, so that the library has mapped it by the
	 * next dlopen, whose image then goes in at the linker's stop (asked
	 * only when the arena is full, the new object's first calls ran with
	 * the old image until the next drain).  It was asked only when the
	 * image outgrew the last request, so an arena filled by images of one
	 * size was never replaced and no image was handed over after it
	 * (python importing a dozen extension modules walked the later ones'
	 * code with its fourth image: "no unwind table for this object") */
	if (r->next_off + 2 * len > r->arena_len && (r->arena_request <= r->arena_len || want > r->arena_request)) {
		/* a new arena, twice the last one at least: the old one stays
		 * mapped in the process, its images in use until replaced */
		if (want < r->arena_request * 2)
			want = r->arena_request * 2;
		r->arena_request = want;
		err = ctl_put(io, pid, r, CTL_FIELD(image_arena_request), &r->arena_request, sizeof(r->arena_request));
	}
	return err;
}

int proc_rings_start(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid, uint64_t ctl, uint32_t mode,
		     uint32_t ring_bits, uint32_t image_seed, bool alone)
{
	struct dwleak_preload_control c;
#if defined(__aarch64__)
	/* not on arm64 yet: with them, a threaded program under tcmalloc
	 * (its tc_* API probed beside the library) hung in the guest
	 * (vm/check_arm64.sh's preload_probe exact_tcmalloc, at its fork
	 * test), not understood yet; every free is recorded there */
	uint32_t cancel_word = DWLEAK_PRELOAD_CANCEL_NONE;
#else
	/* alone, a pair taken back leaves nothing any other record needs */
	uint32_t cancel_word = alone ? DWLEAK_PRELOAD_CANCEL_RETRACT : DWLEAK_PRELOAD_CANCEL_STAMPED;
#endif
	int err;

	memset(r, 0, sizeof(*r));
	if (!io->mem_read || !io->mem_write || !io->image_build || !ctl ||
	    (mode != DWLEAK_PRELOAD_WALK_DWARF && mode != DWLEAK_PRELOAD_WALK_FP))
		return -EINVAL;
	/* the library's walk opens /proc/self/maps, maps rings and an arena:
	 * a filter may kill the process for that, so none is risked */
	if (io->seccomp_mode && io->seccomp_mode(io->ctx, pid) != 0)
		return -EPERM;
	r->ctl = ctl;
	r->image_seed = image_seed;
	err = io->mem_read(io->ctx, pid, ctl, &c, sizeof(c));
	if (err)
		return err;
	if (c.magic != DWLEAK_PRELOAD_MAGIC || c.version != DWLEAK_PRELOAD_VERSION)
		return -EPROTO;
	/* the directory's address is published by a constructor of the
	 * library: not yet in a process held at its linker's stop (found by
	 * the first drain then) */
	r->dir = c.rings_addr;
	r->ring_bits = ring_bits;
	/* an arena the process has from an earlier session is used again,
	 * past what that session wrote (its images may still be walked) */
	r->arena_addr = c.image_arena_addr;
	r->arena_len = c.image_arena_len;
	r->arena_request = c.image_arena_request;
	r->next_off = c.image_arena_addr ? (c.image_off + c.image_len + 63) & ~63ull : 0;
	r->gen = c.image_gen;
	r->drain = calloc(1, sizeof(*r->drain));
	if (!r->drain)
		return -ENOMEM;
	if (r->dir)
		err = io->mem_write(io->ctx, pid, r->dir + offsetof(struct walk_ring_dir, data_bits), &ring_bits,
				    sizeof(ring_bits));
	if (!err && mode == DWLEAK_PRELOAD_WALK_DWARF)
		err = image_prepare(io, r, pid);
	err = err ?: ctl_put(io, pid, r, CTL_FIELD(rings_cancel), &cancel_word, sizeof(cancel_word));
	err = err ?: ctl_put(io, pid, r, CTL_FIELD(rings_request), &mode, sizeof(mode));
	if (err) {
		proc_rings_free(r);
		return err;
	}
	r->mode = mode;
	r->alone = alone;
	r->recording = mode == DWLEAK_PRELOAD_WALK_FP; /* no image to wait for */
	return 0;
}


/* Writes the image built into the arena, when the library mapped one that
 * holds it: the blob, then off and len, then the generation. */
static int image_handover(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid)
{
	struct dwleak_preload_control c;
	uint64_t off;
	uint32_t gen;
	int err;

	/* nothing to hand over or learn: the directory known, no image
	 * waiting, the last one written taken (or FP: none) */
	if (r->dir && !r->blob && r->installed == r->gen && !r->image_err)
		return 0;
	err = io->mem_read(io->ctx, pid, r->ctl, &c, sizeof(c));
	if (err)
		return err;
	r->installed = c.image_installed;
	r->image_err = c.image_error;
	if (!r->dir && c.rings_addr) {
		/* its new rings' size, before most of its threads claim one */
		r->dir = c.rings_addr;
		err = io->mem_write(io->ctx, pid, r->dir + offsetof(struct walk_ring_dir, data_bits), &r->ring_bits,
				    sizeof(r->ring_bits));
		if (err)
			return err;
	}
	if (!r->blob)
		return 0;
	if (c.image_arena_addr != r->arena_addr) { /* a new arena: from its start */
		r->arena_addr = c.image_arena_addr;
		r->arena_len = c.image_arena_len;
		r->next_off = 0;
	}
	off = r->next_off;
	if (!r->arena_addr || off + r->blob_len > r->arena_len)
		return 0; /* asked for; not mapped yet */
	gen = c.image_gen + 1;
	err = io->mem_write(io->ctx, pid, r->arena_addr + off, r->blob, r->blob_len);
	err = err ?: ctl_put(io, pid, r, CTL_FIELD(image_off), &off, sizeof(off));
	err = err ?: ctl_put(io, pid, r, CTL_FIELD(image_len), &(uint64_t){ r->blob_len }, sizeof(uint64_t));
	/* the library keeps its last failure: cleared, so that one read after
	 * this generation is this one's */
	err = err ?: ctl_put(io, pid, r, CTL_FIELD(image_error), &(int32_t){ 0 }, sizeof(int32_t));
	err = err ?: ctl_put(io, pid, r, CTL_FIELD(image_gen), &gen, sizeof(gen));
	if (err)
		return err;
	r->gen = gen;
	r->recording = true; /* the library walks into its rings from its next call */
	r->next_off = (off + r->blob_len + 63) & ~63ull;
	free(r->blob);
	r->blob = NULL;
	r->blob_len = 0;
	return 0;
}

int proc_rings_image(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid)
{
	int err;

	if (r->mode != DWLEAK_PRELOAD_WALK_DWARF)
		return 0;
	/* handed over at once when the arena holds it: a process stopped at
	 * its linker's stop then walks the objects it just loaded from its
	 * first call into them */
	err = image_prepare(io, r, pid);
	err = err ?: image_handover(io, r, pid);
	/* its memory is not where it was: most often it exec'd (the refresh
	 * came before the exec was told; its rings then start anew).  The
	 * image stays pending: the next drain hands it over, or says so when
	 * the fault outlasts any exec's telling (proc_rings_drain) */
	return err == -EFAULT || err == -EIO ? 0 : err;
}

struct drain_ctx {
	const struct proc_rings_io *io;
	struct proc_rings *r;
	pid_t pid;
	struct stack_store *stacks;
	int err;
	uint64_t cut;	       /* the drain's time: records below it are applied now */
	struct stack_trace st; /* a stack being stored (large: not zeroed a record) */
};

static int read_mem(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct drain_ctx *d = ctx;

	return d->io->mem_read(d->io->ctx, d->pid, addr, buf, len);
}

static int write_mem(void *ctx, uint64_t addr, const void *buf, size_t len)
{
	struct drain_ctx *d = ctx;

	return d->io->mem_write(d->io->ctx, d->pid, addr, buf, len);
}

static int held_push(struct proc_rings *r, const struct ring_held *h)
{
	if (r->nheld == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 4096;
		struct ring_held *v = realloc(r->held, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		r->held = v;
		r->cap = cap;
		free(r->merge); /* sized anew when a sort needs it */
		r->merge = NULL;
	}
	r->held[r->nheld++] = *h;
	return 0;
}

/* ID stored first (or again, after a miss of IDS_SEEN): its names to warm. */
static void fresh_push(struct proc_rings *r, uint64_t id)
{
	if (r->nfresh == r->fresh_cap) {
		size_t cap = r->fresh_cap ? r->fresh_cap * 2 : 256;
		uint64_t *v = realloc(r->fresh, cap * sizeof(*v));

		if (!v)
			return; /* named by the report instead */
		r->fresh = v;
		r->fresh_cap = cap;
	}
	r->fresh[r->nfresh++] = id;
}

size_t proc_rings_fresh(const struct proc_rings *r, const uint64_t **ids)
{
	*ids = r->fresh;
	return r->nfresh;
}

void proc_rings_fresh_done(struct proc_rings *r, size_t n)
{
	if (n >= r->nfresh) {
		r->nfresh = 0;
		return;
	}
	memmove(r->fresh, r->fresh + n, (r->nfresh - n) * sizeof(*r->fresh));
	r->nfresh -= n;
}

/* Allocation record REC (its ring's time in H) held: its stack id, the
 * stack stored unless it was already. */
static int ring_alloc_held(struct drain_ctx *d, const struct walk_ring_rec *rec, const struct ring_held *h0)
{
	struct proc_rings *r = d->r;
	struct ring_held h = *h0;
	uint64_t *seen;

	h.type = AEV_ALLOC;
	if (rec->named == WALK_RING_FLAG_STACK_REF && !rec->nframes) {
		/* a name with no definition this dwleak read: the block is
		 * kept, its stack lost (counted: unnamed) */
		h.stack_id = DWLEAK_STACK_NOT_STORED;
		h.seq = r->seq++;
		return held_push(r, &h);
	}
	h.stack_id = proc_rings_stack_id(r->image_seed, rec->kind, rec->end, rec->fp, rec->pcs, rec->nframes);
	/* a stack stored already (the common case: a few call sites
	 * allocate most) is not copied again */
	seen = &r->ids_seen[h.stack_id & (RINGS_IDS_SEEN - 1)];
	if (*seen != h.stack_id) {
		struct stack_trace *st = &d->st;

		st->nframes = (uint8_t)rec->nframes;
		st->end = (uint8_t)rec->end;
		st->kind = (uint8_t)rec->kind;
		st->fp = (uint8_t)rec->fp;
		st->image = r->image_seed;
		memcpy(st->pcs, rec->pcs, rec->nframes * sizeof(*rec->pcs));
		if (stack_store_put(d->stacks, h.stack_id, st)) {
			h.stack_id = DWLEAK_STACK_NOT_STORED; /* no memory: counted as the kernel's would be */
		} else {
			*seen = h.stack_id;
			fresh_push(r, h.stack_id);
		}
	}
	h.seq = r->seq++;
	return held_push(r, &h);
}

static int on_record(void *ctx, const struct walk_ring_rec *rec0)
{
	struct drain_ctx *d = ctx;
	struct proc_rings *r = d->r;
	struct ring_held h = { .tsc = rec0->tsc, .addr = rec0->addr, .size = rec0->size, .kind = rec0->kind };
	struct walk_ring_rec named;
	const struct walk_ring_rec *rec = rec0;

	/* a stack named once in its ring (walk_ring_abi.h): a definition
	 * kept, cancelled or not; a use given its frames */
	if (rec0->named) {
		int err = -ENOMEM;

		named = *rec0;
		if (!r->names)
			r->names = walk_ring_names_new();
		if (r->names)
			err = walk_ring_names_resolve(r->names, &named);
		if (err && rec0->named == WALK_RING_FLAG_STACK_REF)
			r->unnamed++;
		rec = &named;
	}

	/* a ring's records stay in its order: a thread that moved to a CPU
	 * whose TSC lags (a VM's vCPUs may) would read a smaller tsc for a
	 * later record, and a reuse of a block sorted before its free would
	 * take the new block away.  So a ring's tsc never goes down. */
	if (rec->slot < WALK_RING_SLOTS) {
		if (h.tsc < r->slot_tsc[rec->slot])
			h.tsc = r->slot_tsc[rec->slot];
		r->slot_tsc[rec->slot] = h.tsc;
	}

	/* An allocation freed before dwleak read it (walk_ring_abi.h's
	 * Cancelling).  Freed before the drain's time: nothing to apply when
	 * only the library records (not even to order); else a free at the
	 * free's time, for a block a probe beside it recorded there.
	 * Allocated before the drain's time and freed after it (cancelled
	 * while the drain read the header): an allocation now, as a record
	 * read then would have been, and its free held for its time.  Both
	 * after it: alone, nothing, as the two records would be next time;
	 * beside probes, the free held for its time: a probe's record of the
	 * block made after the drain's time is read by the next drain (a
	 * complement probe inside the library's forwarded call records the
	 * allocation the library cancelled: mimalloc's posix_memalign calls
	 * mi_posix_memalign), and the free must follow it.
	 * Both before it, beside probes, but none has recorded anything
	 * since the library began to write its rings (KERNEL_BESIDE): as
	 * alone, exactly.  A probe's record of that address would have to
	 * come between the allocation and the free, after the rings began,
	 * and before this drain's time; the kernel's records up to that time
	 * were read before these (session_drain), and none was there. */
	if (rec->type == WALK_RING_REC_CANCELLED) {
		struct ring_held f = h;
		bool straddles;
		int err = 0;

		r->cancelled++;
		f.type = AEV_FREE;
		f.tsc = rec->freed_tsc < h.tsc ? h.tsc : rec->freed_tsc;
		straddles = h.tsc < d->cut && f.tsc >= d->cut;
		if (straddles) {
			err = ring_alloc_held(d, rec, &h);
			r->straddled++;
		}
		if (!err && (straddles || (!r->alone && (r->kernel_beside || f.tsc >= d->cut)))) {
			f.seq = r->seq++;
			err = held_push(r, &f);
		}
		return err;
	}
	if (rec->type == WALK_RING_REC_ALLOC)
		return ring_alloc_held(d, rec, &h);
	h.type = rec->type == WALK_RING_REC_REALLOC_FREE ? AEV_REALLOC_FREE : AEV_FREE;
	h.seq = r->seq++;
	return held_push(r, &h);
}

/* Ordered by tsc; records of one tsc keep the order they were read in
 * (a ring's order), told by their index. */
static int held_cmp(const void *a, const void *b)
{
	const struct ring_held *x = a, *y = b;

	if (x->tsc != y->tsc)
		return x->tsc < y->tsc ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Where the sorted run of V that starts at I ends (N: the end of V). */
static size_t run_end(const struct ring_held *v, size_t i, size_t n)
{
	for (i++; i < n && held_cmp(&v[i - 1], &v[i]) < 0; i++)
		;
	return i;
}

/*
 * Sorts R's held records by tsc (then seq).  They come as a few sorted
 * runs: what the last drain kept, then each ring's records in its order
 * (a ring's tsc never goes down, on_record sees to it): runs next to each
 * other are merged, pass after pass, O(n log runs) with inline compares,
 * where qsort was O(n log n) with a call per compare (the 2-thread bench
 * did not move with it: the drain's cost is elsewhere, bench/results.md).
 * Falls back to qsort without memory for the merge.
 */
static void held_sort(struct proc_rings *r)
{
	struct ring_held *src = r->held, *dst, *t;
	size_t n = r->nheld, i, m, a, b, e, k, runs;

	if (run_end(src, 0, n) == n)
		return; /* one thread's records: sorted already */
	if (!r->merge && !(r->merge = malloc(r->cap * sizeof(*r->merge)))) {
		qsort(r->held, r->nheld, sizeof(*r->held), held_cmp);
		return;
	}
	dst = r->merge;
	do {
		for (i = 0, runs = 0; i < n; i = e, runs++) {
			m = run_end(src, i, n); /* [i, m) and [m, e): two runs */
			e = m < n ? run_end(src, m, n) : n;
			for (a = i, b = m, k = i; a < m && b < e; k++)
				dst[k] = held_cmp(&src[b], &src[a]) < 0 ? src[b++] : src[a++];
			memcpy(dst + k, src + a, (m - a) * sizeof(*src)); /* what is left of one of them */
			k += m - a;
			memcpy(dst + k, src + b, (e - b) * sizeof(*src));
		}
		t = src, src = dst, dst = t;
	} while (runs > 1);
	r->held = src; /* the two arrays trade places: both CAP entries */
	r->merge = dst;
}

/* Applies the held records below tsc LIMIT (all of them: ~0) to L, in
 * tsc order, and keeps the rest. */
static void held_apply(struct proc_rings *r, struct ledger *l, uint64_t limit)
{
	size_t i, keep = 0;

	if (!r->nheld)
		return;
	held_sort(r);
	for (i = 0; i < r->nheld; i++) {
		const struct ring_held *h = &r->held[i];

		if (h->tsc >= limit) {
			r->held[keep++] = *h;
			continue;
		}
		if (h->type == AEV_ALLOC) {
			struct alloc_event a = { .type = AEV_ALLOC, .kind = h->kind, .addr = h->addr, .size = h->size,
						 .stack_id = h->stack_id };

			ledger_record(l, &a, sizeof(a));
		} else {
			struct free_event f = { .type = h->type, .addr = h->addr };

			ledger_record(l, &f, sizeof(f));
		}
		r->records++;
	}
	r->nheld = keep;
}

/* How full the fullest ring was when the drain D read it: its unread
 * bytes (cancelled and taken-back records' too: they fill it all the
 * same), parts per million of its size. */
static void fill_measure(struct proc_rings *r, const struct walk_ring_drain *d)
{
	uint64_t most = 0, ppm;
	uint32_t i;

	for (i = 0; i < d->n; i++) {
		const struct walk_ring_ring *g = &d->ring[i];

		if (g->err || g->data_bits < WALK_RING_BITS_MIN || g->data_bits > WALK_RING_BITS_MAX ||
		    g->published < g->tail)
			continue;
		ppm = g->published - g->tail >= (1ull << g->data_bits)
			      ? 1000000
			      : ((g->published - g->tail) * 1000000) >> g->data_bits;
		most = ppm > most ? ppm : most;
	}
	r->fill_ppm = (uint32_t)most;
}

/* The counts of what the library could not record, from the drain. */
static void drops_count(struct proc_rings *r, const struct walk_ring_drain *d)
{
	uint32_t i;

	r->no_ring = d->no_slot + d->no_map + d->no_claim;
	for (i = 0; i < d->n; i++) {
		const struct walk_ring_ring *g = &d->ring[i];
		uint32_t s = g->slot;

		if (s >= WALK_RING_SLOTS)
			continue;
		if (g->life != r->slot_life[s]) { /* a new owner starts from 0 */
			r->slot_life[s] = g->life;
			r->slot_dropped[s] = 0;
			r->slot_retracted[s] = 0;
			r->slot_remembered[s] = 0;
		}
		if (g->dropped > r->slot_dropped[s]) {
			r->dropped += g->dropped - r->slot_dropped[s];
			r->slot_dropped[s] = g->dropped;
		}
		if (g->retracted > r->slot_retracted[s]) {
			r->retracted += g->retracted - r->slot_retracted[s];
			r->slot_retracted[s] = g->retracted;
		}
		if (g->remembered > r->slot_remembered[s]) {
			r->remembered += g->remembered - r->slot_remembered[s];
			r->slot_remembered[s] = g->remembered;
		}
		/* a read that failed is the process gone, not a corrupt ring */
		if (g->err == -EPROTO || g->err == -EBADMSG) {
			r->bad++;
			if (!r->ring_why[0])
				snprintf(r->ring_why, sizeof(r->ring_why), "thread %u's ring: %s", g->tid,
					 g->why[0] ? g->why : strerror(-g->err));
		}
	}
}

/* Tails written back; the slots of threads that ended handed back.  A
 * thread found gone after a drain may have written records the drain did
 * not see (published after its ring was read): its slot is handed back
 * by the next drain, which started after the thread ended and so read
 * all it wrote. */
static int rings_release(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid)
{
	struct walk_ring_drain *d = r->drain;
	struct walk_ring_write w[3];
	char path[64];
	uint64_t addr, value;
	uint32_t i;
	int err = 0, n, k;

	for (i = 0; i < d->n && !err; i++) {
		const struct walk_ring_ring *g = &d->ring[i];
		uint32_t s = g->slot < WALK_RING_SLOTS ? g->slot : 0;

		if (walk_ring_tail_write(g, &addr, &value))
			err = io->mem_write(io->ctx, pid, addr, &value, sizeof(value));
		snprintf(path, sizeof(path), "/proc/%d/task/%u", (int)pid, g->tid);
		if (err || !access(path, F_OK))
			continue;
		if (r->slot_ended[s] != g->tid) {
			r->slot_ended[s] = g->tid; /* the next drain hands it back */
			continue;
		}
		if ((n = walk_ring_reclaim_plan(d, g, w)) < 0)
			continue;
		for (k = 0; k < n && !err; k++)
			err = io->mem_write(io->ctx, pid, w[k].addr, &w[k].value, w[k].len);
		r->slot_ended[s] = 0;
		r->reclaimed++;
		d->reclaimed++; /* the directory's count moved: the next plan must see it */
	}
	return err;
}

int proc_rings_drain(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid, struct ledger *l,
		     struct stack_store *stacks, uint64_t now_ns, bool final, uint64_t before)
{
	struct drain_ctx d = { .io = io, .r = r, .pid = pid, .stacks = stacks };
	uint64_t start;
	int err;

	if (!r->mode || r->err)
		return r->err;
	err = image_handover(io, r, pid);
	if (err == -EFAULT || err == -EIO) {
		/* its memory is not where it was: most often an exec replaced
		 * it (told after this drain, and the rings then start anew);
		 * else it unmapped what its library holds, said when that
		 * lasts past any exec's telling */
		if (!r->fault_ns)
			r->fault_ns = now_ns ? now_ns : 1;
		if (!final && now_ns - r->fault_ns < RINGS_FAULT_SAY_NS)
			return 0;
	} else if (!err) {
		r->fault_ns = 0;
	}
	if (err && err != -ESRCH && err != -ENOENT && !r->why[0])
		snprintf(r->why, sizeof(r->why), "handing the unwind image over failed: %s", strerror(-err));
	if (!r->dir) /* not published yet: nothing recorded either */
		return 0;
	start = tsc_now();
	d.cut = final ? UINT64_MAX : start < before ? start : before;
	err = walk_ring_drain(read_mem, write_mem, &d, r->dir, on_record, &d, r->drain);
	r->drains++;
	if (err < 0) {
		if (err != -ESRCH && err != -ENOENT && err != -EFAULT) {
			r->err = err;
			snprintf(r->why, sizeof(r->why), "its rings' directory: %s", r->drain->why);
		}
	} else {
		drops_count(r, r->drain);
		fill_measure(r, r->drain);
		if (!r->stopped && r->drain->stopped)
			r->stopped = stop_reason(r->drain->stopped);
	}
	l->now_ns = now_ns;
	/* stopped: the library went back to its sites before this drain
	 * began (it stored the word first), so this drain read every record
	 * its rings will hold, all applied now, before any site record that
	 * follows; the library waits for the acknowledgement below */
	held_apply(r, l, r->stopped ? UINT64_MAX : d.cut);
	if (r->stopped && !r->stopped_acked && !err) {
		uint64_t one = 1;

		r->stopped_acked = true;
		(void)io->mem_write(io->ctx, pid, r->dir + offsetof(struct walk_ring_dir, stopped_acked), &one,
				    sizeof(one));
	}
	if (err > 0) /* the callback's: no memory */
		err = -ENOMEM;
	if (!err)
		err = rings_release(io, r, pid);
	return err;
}

void proc_rings_gone(struct proc_rings *r, struct ledger *l, uint64_t now_ns)
{
	if (!r->mode)
		return;
	l->now_ns = now_ns;
	held_apply(r, l, UINT64_MAX);
}

void proc_rings_site_record(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid, struct ledger *l)
{
	uint64_t stopped = 0;

	/* read after the library began to write its rings: a cancelled
	 * block's free must be applied from now on (on_record) */
	if (r->mode && r->recording)
		r->kernel_beside = true;

	/* nothing held: nothing to apply first (and no read of the process
	 * per site record, which a process could fire at will) */
	if (!r->mode || !r->nheld)
		return;
	/* the drain that acknowledged the stop applied everything (the
	 * library waits for that, up to 200 ms); past that wait, the
	 * directory says it, while the process lives.  Read again only
	 * RINGS_STOP_READ_NS after the last read: a site record made after a
	 * stop dwleak did not acknowledge comes 200 ms after the stop's word,
	 * so a read that recent saw it; per record, a mimalloc process's
	 * complement probes (a record per aligned call) made the kernel's
	 * batch a system call each, and the drain tens of ms long */
	if (!r->stopped) {
		uint64_t now = session_now_ns();

		if (r->stop_read_ns && now - r->stop_read_ns < RINGS_STOP_READ_NS)
			return;
		r->stop_read_ns = now;
		if (!r->dir || !io->mem_read ||
		    io->mem_read(io->ctx, pid, r->dir + offsetof(struct walk_ring_dir, stopped), &stopped,
				 sizeof(stopped)) ||
		    !stopped)
			return;
		r->stopped = stop_reason(stopped);
	}
	held_apply(r, l, UINT64_MAX);
}

void proc_rings_free(struct proc_rings *r)
{
	walk_ring_names_free(r->names);
	r->names = NULL;
	free(r->fresh);
	r->fresh = NULL;
	r->nfresh = r->fresh_cap = 0;
	free(r->blob);
	free(r->held);
	free(r->merge);
	r->merge = NULL;
	free(r->drain);
	r->blob = NULL;
	r->held = NULL;
	r->drain = NULL;
	r->nheld = r->cap = 0;
	r->mode = 0;
}
