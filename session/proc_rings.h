/* A traced process's walk in the process (issue 24): asking its preload
 * library to walk each traced call's stack itself and write it into its
 * per-thread rings (bpf/abi/walk_ring_abi.h) instead of firing its sites,
 * handing the library the unwind image its DWARF walk needs
 * (bpf/abi/preload.h's image arena), and draining the rings into the
 * process's ledger in an order that is causal.  The state is a part of
 * struct proc, written only through these functions, which proc.c calls.
 * Every byte read from the process is untrusted (target/walk_ring_read.c
 * checks the rings); what it costs is that process's records only. */
#ifndef DWLEAK_SESSION_PROC_RINGS_H
#define DWLEAK_SESSION_PROC_RINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ledger.h"
#include "stack_store.h"
#include "walk_ring_read.h"

/* What proc_rings needs of the outside (struct proc_services carries
 * them; a NULL one turns rings off).  CTX is given back to each; int ones
 * return 0 or a negative errno. */
struct proc_rings_io {
	void *ctx;
	/* LEN bytes of PID's memory at ADDR, all or an error
	 * (process_vm_readv; /proc/PID/mem for the writes) */
	int (*mem_read)(void *ctx, pid_t pid, uint64_t addr, void *buf, size_t len);
	int (*mem_write)(void *ctx, pid_t pid, uint64_t addr, const void *buf, size_t len);
	/* PID's unwind image from the walker's tables (unwinder_image_build):
	 * *BLOB malloc'd, the caller's */
	int (*image_build)(void *ctx, pid_t pid, void **blob, size_t *len);
	/* PID's seccomp mode (/proc/PID/status: 0 none, 1 strict, 2 filter),
	 * or a negative errno; may be NULL (taken as none) */
	int (*seccomp_mode)(void *ctx, pid_t pid);
};

#define RINGS_IDS_SEEN 4096
/* How long a process's memory may be found not where its library's was
 * before that is said: an exec is told within a poll, a few ms */
#define RINGS_FAULT_SAY_NS (100ull * 1000 * 1000)

/* How long proc_rings_site_record trusts its last read of the directory's
 * STOPPED word: well under the library's 200 ms wait for the drain that
 * acknowledges a stop */
#define RINGS_STOP_READ_NS (50ull * 1000 * 1000)

/* A record read and not yet applied: held until it is known that no
 * record it depends on can still come (see proc_rings_drain). */
struct ring_held {
	uint64_t tsc;
	uint64_t addr;
	uint64_t size;
	uint64_t stack_id;
	uint64_t seq;  /* the order it was read in: a ring's order among equal tscs */
	uint32_t type; /* enum alloc_event_type */
	uint32_t kind; /* enum alloc_kind */
};

struct proc_rings {
	uint32_t mode;	     /* enum dwleak_preload_walk asked for; 0: rings off */
	bool alone;	     /* only the library records the process's calls (no uprobe beside it) */
	uint32_t image_seed; /* the process's image (stack ids are seeded with it) */
	uint64_t ctl;	     /* the control block's address */
	uint64_t dir;	     /* the rings' directory's (0: not published yet) */
	uint32_t ring_bits;  /* the size asked for new rings */
	/* the unwind image (DWARF): built and not yet handed over, or NULL */
	void *blob;
	size_t blob_len;
	uint64_t arena_addr, arena_len, next_off, arena_request;
	uint32_t gen;	     /* the last image generation written */
	uint32_t installed;  /* the library's image_installed, as last read */
	uint32_t stopped;    /* the directory's stopped word, once seen (0: still walking) */
	/* the library may be writing its rings (an image handed over; the FP
	 * walk from the start), and a kernel record of the process (a probe
	 * beside the library, a site) was applied since: a cancelled block's
	 * free is applied, not forgotten (on_record) */
	bool recording;
	bool kernel_beside;
	bool stopped_acked;  /* the directory's stopped_acked written */
	uint64_t stop_read_ns; /* session_now_ns of proc_rings_site_record's last read of STOPPED */
	int image_err;	     /* the library's image_error, as last read */
	/* records read, not applied yet, by tsc once sorted */
	struct ring_held *held;
	size_t nheld, cap;
	struct ring_held *merge; /* CAP entries: the sort's other half (NULL until two runs met) */
	uint64_t seq;
	/* what each slot's ring had dropped when last read, per owner */
	uint64_t slot_dropped[WALK_RING_SLOTS];
	uint64_t slot_retracted[WALK_RING_SLOTS]; /* ... and taken back */
	uint64_t slot_remembered[WALK_RING_SLOTS]; /* ... and walks its memo answered */
	uint32_t slot_life[WALK_RING_SLOTS];
	/* the tsc of the last record read from each slot's ring: a ring's
	 * records are applied in its order whatever the CPUs' TSCs say */
	uint64_t slot_tsc[WALK_RING_SLOTS];
	/* the thread a slot's owner was found ended by a drain (0: none): its
	 * slot is handed back by a later drain, which read all it wrote */
	uint32_t slot_ended[WALK_RING_SLOTS];
	struct walk_ring_drain *drain; /* the last drain (large: kept, not on the stack) */
	struct walk_ring_names *names; /* its rings' stack names (made at the first) */
	/* stack ids stored already, by their low bits (a miss stores again:
	 * the store keeps one copy) */
	uint64_t ids_seen[RINGS_IDS_SEEN];
	/* totals */
	uint64_t records;     /* applied to the ledger */
	uint64_t cancelled;   /* allocations the process freed before they were read (cancelled) */
	uint64_t straddled;   /* ... of them allocated before a drain's time, freed after it */
	uint64_t retracted;   /* allocations taken back by their frees (the library's count:
			       * nothing of them was read) */
	uint64_t remembered;  /* allocations whose walk a thread's memo answered (the library's count) */
	uint64_t unnamed;     /* allocations that named a stack no record read defined (their
			       * stacks lost: written before this dwleak read the ring, or corrupt) */
	uint64_t dropped;     /* the library could not record them: rings full */
	uint64_t no_ring;     /* ... no ring (no slot, no mapping, a handler in a claim) */
	uint64_t bad;	      /* drains that found a ring corrupt (records of theirs lost) */
	uint64_t unapplied;   /* records held when the process ended unread (none unless it
			       * ended without a last drain) */
	uint64_t reclaimed;   /* slots of ended threads handed back */
	uint64_t drains;
	uint32_t fill_ppm;    /* the last drain: its fullest ring's unread bytes, parts per
			       * million of the ring (how soon the next drain is due) */
	/* stack ids stored for the first time since the report's names were
	 * last warmed with them (proc_rings_fresh): the session names their
	 * frames while the process runs, so that the report finds the
	 * symbolizer's caches warm */
	uint64_t *fresh;
	size_t nfresh, fresh_cap;
	uint64_t fault_ns;    /* when its memory was first found not there (0: it is) */
	int err;	      /* the first error that stopped a drain (0: none) */
	char why[192];	      /* and what it was */
	char ring_why[192];   /* what the first corrupt ring had (bad: how many) */
};

/*
 * Turns the walk in the process on in PID, whose library's control block
 * is at CTL: its new rings' size (2^RING_BITS bytes of records), MODE
 * (DWLEAK_PRELOAD_WALK_DWARF or _FP) asked for, and for DWARF its unwind
 * image built and an arena asked for (handed over by proc_rings_drain
 * once the library mapped it; until then the library fires its sites).
 * IMAGE_SEED: the process's image.  Frees may cancel records not read
 * yet (walk_ring_abi.h); ALONE: the library sees every allocator call of
 * PID (no uprobe beside its sites), so a cancelled block is forgotten
 * whole, and a free of its thread's last record takes it back (on
 * x86_64); else its free is applied (a probe may have recorded the
 * block).  Returns 0, or a negative errno (R
 * then off: the sites serve, as without rings): -EPERM for a process
 * under a seccomp filter (the library's walk makes system calls of its
 * own, openat of /proc/self/maps among them, which a filter may punish).
 */
int proc_rings_start(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid, uint64_t ctl, uint32_t mode,
		     uint32_t ring_bits, uint32_t image_seed, bool alone);

/* PID's objects changed and their tables were loaded: a new image is
 * built, and handed over now if the library's arena holds it (else at a
 * drain once it mapped a larger one).  Returns 0 or a negative errno
 * (the old image stays in use); 0 too when PID's memory faults (it
 * exec'd, not told yet): the image waits for the next drain, which says
 * a fault that lasts. */
int proc_rings_image(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid);

/*
 * Hands over an image the library can take now, then drains PID's rings:
 * each record's stack stored in STACKS under the id the kernel program
 * would give the same walk (seeded with the process's image), then the
 * records applied to L in tsc order.  A record is applied only when its
 * tsc is below the drain's start (or FINAL: the process is stopped for
 * good): any record it depends on (the allocation before a free of its
 * block, the free before the block's reuse) was published before it was
 * written, so before this drain read its ring; later ones wait for the
 * next drain.  Frees of blocks the ledger never had are dropped by the
 * ledger as ever.  Slots of threads that ended are handed back.
 * BEFORE (UINT64_MAX: none) lowers that bound to a time of
 * proc_rings_clock taken before the kernel's records (the library's
 * sites) were last read: a ring record below it may follow one of them,
 * which must be applied first (a call at a site while another thread's
 * calls are walked in the process, around the image's install).
 * NOW_NS stamps new allocations.  Returns 0, or a negative errno when the
 * process's memory could not be read (gone: -ESRCH) or its directory is
 * corrupt (R->why says what; its rings are not read again).
 */
int proc_rings_drain(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid, struct ledger *l,
		     struct stack_store *stacks, uint64_t now_ns, bool final, uint64_t before);

/* PID is gone without a last drain (-p, not its parent: its exit is
 * learnt from kill(2), after the reaping): every record R holds is
 * applied to L (all its records were read already, or are lost with its
 * memory; the library waits at exit() until dwleak read them), after the
 * kernel's last records of it.  The process's memory is not touched (its
 * pid may be another's now). */
void proc_rings_gone(struct proc_rings *r, struct ledger *l, uint64_t now_ns);

/* The clock the library stamps its records with (the TSC), for
 * proc_rings_drain's BEFORE. */
uint64_t proc_rings_clock(void);

/* A record of PID came from its library's sites (the kernel's walk)
 * while R holds ring records: when the library stopped walking in the
 * process for good (bpf/abi/walk_ring_abi.h, the directory's STOPPED: it
 * waited until dwleak read its rings before its first such call), every
 * record held is older than this one and is applied to L now; R->stopped
 * then says why.  Otherwise (a call that chose its site just before the
 * image was installed) nothing is done.  The drains learn the stop; past
 * the library's wait for them, a read of that word for a site record
 * while records are held, at most every RINGS_STOP_READ_NS, until the
 * stop is seen. */
void proc_rings_site_record(const struct proc_rings_io *io, struct proc_rings *r, pid_t pid, struct ledger *l);

/* The stack id the kernel program gives a walk of KIND in a process of
 * image IMAGE with these NFRAMES PCS (as struct stack_trace's), ended by
 * END; FP: a frame-pointer walk (bpf/walk.bpf.h's and bpf/fp_walk.bpf.h's
 * hashes).  Never an id at or below DWLEAK_STACK_SPECIAL_MAX. */
uint64_t proc_rings_stack_id(uint32_t image, uint32_t kind, uint32_t end, bool fp, const uint64_t *pcs,
			     uint32_t nframes);

/* The stack ids R stored first since the last proc_rings_fresh_done, at
 * *IDS (R's; valid until R's next drain).  Returns how many.  An id
 * missed (no memory to note it) only leaves its names to the report. */
size_t proc_rings_fresh(const struct proc_rings *r, const uint64_t **ids);

/* The first N of them (all of them, when N is more) need no warming. */
void proc_rings_fresh_done(struct proc_rings *r, size_t n);

/* Frees what R holds (the process needs nothing written back). */
void proc_rings_free(struct proc_rings *r);

#endif
