/* The preload library's walks of its own process's stacks: the DWARF walk
 * with the kernel program's step (bpf/abi/unwind_step.h, aarch64's
 * unwind_step_a64.h) over an unwind
 * image, the frame-pointer walk, the registers of a point and the
 * thread's stack bounds.  What this build gives the step: reads checked
 * against the stack's bounds (the walk never faults), a table's pages,
 * rows and rules straight from the image; and in front of the rule
 * search, the image's lock-free pc -> rule cache (the kernel program's
 * rule_cache is per CPU; here every thread shares one). */
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>

#include "unwind_step.h" /* the table search both machines use, and x86_64's step */
#if defined(__aarch64__)
#include <elf.h>
#include <sys/auxv.h>

#include "unwind_step_a64.h"
#endif
#include "raw_syscall.h"
#include "walk.h"

/* --- The image: checked once, trusted by the walks ---------------------- */

/* Whether [OFF, OFF + COUNT * SIZE) lies in an image of LEN bytes past its
 * header, OFF aligned (no product or sum may wrap: COUNT < 2^32, SIZE
 * small). */
static int part_ok(uint64_t off, uint64_t count, uint64_t size, uint64_t hdr, uint64_t len)
{
	return off % UNWIND_IMAGE_ALIGN == 0 && off >= hdr && off <= len && count * size <= len - off;
}

int walk_image_check(const void *blob, size_t len, struct walk_image *out)
{
	const struct unwind_image_header *h = blob;
	const uint8_t *base = blob;
	const struct unwind_image_mapping *m;
	const struct unwind_image_table *t;
	uint64_t hdr = sizeof(*h);
	uint32_t i, j;

	if (!blob || (uintptr_t)blob % UNWIND_IMAGE_ALIGN || len < sizeof(*h))
		return -EINVAL;
	if (h->magic != UNWIND_IMAGE_MAGIC || h->version != UNWIND_IMAGE_VERSION || h->header_bytes != hdr)
		return -EPROTO;
	if (h->total_bytes != len || !part_ok(h->mappings_off, h->nmappings, sizeof(*m), hdr, len) ||
	    !part_ok(h->tables_off, h->ntables, sizeof(*t), hdr, len))
		return -EBADMSG;
	m = (const struct unwind_image_mapping *)(base + h->mappings_off);
	t = (const struct unwind_image_table *)(base + h->tables_off);
	for (i = 0; i < h->nmappings; i++)
		if (m[i].start >= m[i].end || m[i].table >= h->ntables ||
		    (i + 1 < h->nmappings && m[i].end > m[i + 1].start))
			return -EBADMSG;
	for (i = 0; i < h->ntables; i++) {
		const struct unwind_page *pages;
		const struct unwind_row *rows;

		if (!part_ok(t[i].pages_off, t[i].npages, sizeof(struct unwind_page), hdr, len) ||
		    !part_ok(t[i].rows_off, t[i].nrows, sizeof(struct unwind_row), hdr, len) ||
		    !part_ok(t[i].rules_off, t[i].nrules, sizeof(struct unwind_rule), hdr, len) ||
		    t[i].first_page + t[i].npages < t[i].first_page)
			return -EBADMSG;
		/* only now: an offset past the blob makes no pointer */
		pages = (const struct unwind_page *)(base + t[i].pages_off);
		rows = (const struct unwind_row *)(base + t[i].rows_off);
		for (j = 0; j < t[i].npages; j++)
			if (pages[j].first_row > t[i].nrows || pages[j].nrows > t[i].nrows - pages[j].first_row)
				return -EBADMSG;
		for (j = 0; j < t[i].nrows; j++)
			if (rows[j].rule >= t[i].nrules)
				return -EBADMSG;
	}
	out->base = base;
	out->maps = m;
	out->tables = t;
	out->nmappings = h->nmappings;
	out->ntables = h->ntables;
	out->cache = 0; /* a new image starts without one: the installer gives it */
	out->cache_bits = 0;
	out->pad = 0;
	return 0;
}

/* --- The rule cache (walk.h has the slot's layout) ------------------------ */

int walk_image_cache(struct walk_image *img, void *mem, size_t len)
{
	uint32_t bits = WALK_CACHE_MIN_BITS;
	uint64_t *slots = mem;
	size_t i;

	if (!mem) {
		img->cache = 0;
		img->cache_bits = 0;
		return 0;
	}
	if ((uintptr_t)mem % 8 || len / 8 < (1ul << WALK_CACHE_MIN_BITS))
		return -EINVAL;
	while (bits < WALK_CACHE_MAX_BITS && len / 8 >= (2ul << bits))
		bits++;
	/* word by word as the walks read them: no libc in the library's
	 * walk code, and a slot is never anything but a whole entry */
	for (i = 0; i < (1ul << bits); i++)
		__atomic_store_n(&slots[i], 0, __ATOMIC_RELAXED);
	img->cache = slots;
	img->cache_bits = bits;
	return (int)(1u << bits);
}

/* --- The step's table hooks: the image's arrays --------------------------- */

/* A table, as this build finds one: its entry in a checked image. */
struct unwind_table_ref {
	const uint8_t *base;
	const struct unwind_image_table *t;
};

static inline const struct unwind_page *image_page(const struct unwind_table_ref *r, __u64 page)
{
	if (page - r->t->first_page >= r->t->npages) /* below first_page wraps far above */
		return 0;
	return (const struct unwind_page *)(r->base + r->t->pages_off) + (page - r->t->first_page);
}

/* The check made every page's rows and every row's rule lie in range; the
 * bounds here are the hooks' contract, and cost a compare. */
static inline const struct unwind_row *image_row(const struct unwind_table_ref *r, __u32 idx)
{
	return idx < r->t->nrows ? (const struct unwind_row *)(r->base + r->t->rows_off) + idx : 0;
}

static inline const struct unwind_rule *image_rule(const struct unwind_table_ref *r, __u32 idx)
{
	return idx < r->t->nrules ? (const struct unwind_rule *)(r->base + r->t->rules_off) + idx : 0;
}

static const struct unwind_table_ops image_ops = { image_page, image_row, image_rule };

/* --- The step's memory hooks: reads inside the stack's bounds ------------- */

/* One walk: the step's registers first (x86_64's hooks find the rest
 * from them), and the bounds every read is checked against. */
struct walk_state {
#if defined(__x86_64__)
	struct unwind_regs r;
#else
	struct unwind_regs_a64 r;
#endif
	uint64_t lo;
	uint64_t hi_word; /* the last address an 8-byte read may start at, + 1 */
#if defined(__x86_64__)
	/* walk_dwarf_memo's record of what the walk read (walk_memo_ops) */
	struct walk_memo_entry *rec_e; /* the entry it is written into */
	uint64_t sp0;
	uint64_t bp_addr;  /* where the rbp restored last came from */
	uint32_t rec;	   /* still to be remembered */
	uint32_t nrec;	   /* words read so far */
	uint32_t bp_reg;   /* rbp is still the start's */
	uint32_t bp_unrec; /* rbp was restored from BP_ADDR and is not recorded yet */
	uint32_t use_bp0;  /* a rule used the start's rbp */
	uint32_t pad;
#endif
};

/* The word at ADDR, if it lies inside the bounds.  Not checked by ASan in
 * the tests: the word may be anywhere in a stack, in an instrumented
 * frame's red zone too, which is memory all the same; the bounds are
 * what keeps the read safe, and the fuzzer puts guard pages around them. */
__attribute__((no_sanitize_address)) static inline int stack_word(uint64_t lo, uint64_t hi_word, uint64_t addr,
								  __u64 *dst)
{
	if (addr - lo >= hi_word - lo) /* below lo wraps far above */
		return WALK_ERR_READ;
	__builtin_memcpy(dst, (const void *)(uintptr_t)addr, sizeof(*dst));
	return 0;
}

#if defined(__x86_64__)
static inline int walk_read(struct unwind_regs *r, __u64 *dst, __u64 addr, enum unwind_word what)
{
	const struct walk_state *w = (const struct walk_state *)r;

	(void)what;
	return stack_word(w->lo, w->hi_word, addr, dst);
}

/* Nothing to remember of the words read (the kernel program's walk_memo
 * records them) nor of rbp's use. */
static inline void walk_note(struct unwind_regs *r, __u64 addr, __u64 val, enum unwind_word what)
{
	(void)r;
	(void)addr;
	(void)val;
	(void)what;
}

static inline void walk_bp_use(struct unwind_regs *r)
{
	(void)r;
}

static const struct unwind_step_ops walk_ops = { walk_read, walk_note, walk_bp_use };

/* The same walk, recording for the memo (walk.h): every word a step read,
 * but the rbp restored at a CFA, which is recorded only when a rule uses
 * it (the kernel program's bp_restored and bp_use). */
static inline void memo_record(struct walk_state *w, uint64_t addr, uint64_t val)
{
	uint64_t off = addr - w->sp0; /* below sp0 wraps far above 4 GiB */
	uint32_t k = w->nrec++;

	if (!w->rec)
		return;
	if (k >= WALK_MEMO_WORDS || off > 0xffffffffull) {
		w->rec = 0;
		return;
	}
	w->rec_e->off[k] = (uint32_t)off;
	w->rec_e->val[k] = val;
}

static inline void memo_note(struct unwind_regs *r, __u64 addr, __u64 val, enum unwind_word what)
{
	struct walk_state *w = (struct walk_state *)r;

	if (what == UNWIND_WORD_BP_AT_CFA) {
		w->bp_reg = 0;
		w->bp_addr = addr;
		w->bp_unrec = 1;
		return;
	}
	memo_record(w, addr, val);
	if (what == UNWIND_WORD_BP_AT_BP || what == UNWIND_WORD_SIG_BP) {
		w->bp_reg = 0;
		w->bp_unrec = 0; /* recorded */
	}
}

static inline void memo_bp_use(struct unwind_regs *r)
{
	struct walk_state *w = (struct walk_state *)r;

	w->use_bp0 |= w->bp_reg;
	if (w->bp_unrec) {
		w->bp_unrec = 0;
		memo_record(w, w->bp_addr, r->bp);
	}
}

static const struct unwind_step_ops walk_memo_ops = { walk_read, memo_note, memo_bp_use };

/* The walk's start: REGS as the step's registers. */
static inline void state_init(struct walk_state *w, const struct walk_regs *regs)
{
	w->r.pc = regs->pc;
	w->r.sp = regs->sp;
	w->r.bp = regs->bp;
	w->r.bp_ok = 1;
	w->r.exact_pc = regs->exact_pc;
}

static inline uint64_t state_lookup(const struct walk_state *w)
{
	return unwind_lookup_pc(&w->r);
}

/* Steps W by RULE: 1 when W is now its caller's frame, else 0 with *END.
 * MEMO (a constant): recording what it reads for the memo. */
static inline __attribute__((always_inline)) int state_step(struct walk_state *w, const struct unwind_rule *rule,
							    __u32 *end, const int memo)
{
	const struct unwind_step_ops *ops = memo ? &walk_memo_ops : &walk_ops;
	int ret;

	/* the common rules inline, the others (and a refused read) stepped */
	ret = unwind_step_try(&w->r, rule, end, ops);
	if (ret == UNWIND_STEP_DECLINED)
		ret = unwind_step(&w->r, rule, end, ops);
	return ret == UNWIND_STEP_NEXT;
}

/* No rule at W's pc: 1 when W was stepped all the same, else 0 (*END set
 * by the search, or here).  x86_64's signal trampoline has its CFI. */
static inline int state_no_rule(struct walk_state *w, __u32 *end)
{
	(void)w;
	(void)end;
	return 0;
}
#else
/* The vdso's code, [lo, hi): where the kernel's sigreturn trampoline is,
 * the one code a walk reads (its two instructions, to know it), since the
 * image has no table for it.  Found once from the auxiliary vector and
 * the vdso's program headers (no allocation, no system call); hi is 0
 * while unknown (published after lo, with release), lo == hi == 1 when
 * there is none. */
static uint64_t vdso_lo, vdso_hi;

static void vdso_find(uint64_t *lo, uint64_t *hi)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
	uint64_t first = UINT64_MAX, end = 0;
	const Elf64_Phdr *ph;
	uint32_t i;

	*lo = *hi = 1;
	if (!eh || __builtin_memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_phentsize != sizeof(*ph) || eh->e_phnum > 16)
		return;
	ph = (const Elf64_Phdr *)((const uint8_t *)eh + eh->e_phoff);
	for (i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD) {
			first = ph[i].p_vaddr < first ? ph[i].p_vaddr : first;
			end = ph[i].p_vaddr + ph[i].p_memsz > end ? ph[i].p_vaddr + ph[i].p_memsz : end;
		}
	if (end <= first || end - first > (1u << 20))
		return;
	*lo = (uint64_t)(uintptr_t)eh;
	*hi = *lo + (end - first);
}

/* Whether the 8 bytes at ADDR are the vdso's code. */
static int vdso_code(uint64_t addr)
{
	uint64_t hi = __atomic_load_n(&vdso_hi, __ATOMIC_ACQUIRE), lo = __atomic_load_n(&vdso_lo, __ATOMIC_RELAXED);

	if (!hi) { /* first use: any thread may find it, each finds the same */
		vdso_find(&lo, &hi);
		__atomic_store_n(&vdso_lo, lo, __ATOMIC_RELAXED);
		__atomic_store_n(&vdso_hi, hi, __ATOMIC_RELEASE);
	}
	return addr >= lo && addr + 8 <= hi && addr + 8 > addr;
}

/* A read inside the stack's bounds, or else of the vdso's code (the
 * sigreturn trampoline's instructions: unwind_a64_signal reads them at
 * pc), which only a read the stack refused asks about. */
static int walk_read_a64(void *arg, __u64 *dst, __u64 addr)
{
	const struct walk_state *w = arg;
	int err = stack_word(w->lo, w->hi_word, addr, dst);

	if (err && vdso_code(addr)) {
		__builtin_memcpy(dst, (const void *)(uintptr_t)addr, sizeof(*dst));
		return 0;
	}
	return err;
}

static const struct unwind_step_a64_ops walk_ops = { walk_read_a64 };

/* The walk's start: REGS as the step's registers; x30 (LR) trusted only
 * at an entry (exact_pc), where nothing has overwritten it yet. */
static inline void state_init(struct walk_state *w, const struct walk_regs *regs)
{
	w->r.pc = regs->pc;
	w->r.sp = regs->sp;
	w->r.fp = regs->bp;
	w->r.fp_ok = 1;
	w->r.lr = unwind_a64_strip(regs->lr, WALK_A64_PAC_MASK);
	w->r.lr_ok = regs->exact_pc;
	w->r.exact_pc = regs->exact_pc;
	w->r.pac_mask = WALK_A64_PAC_MASK;
	w->r.pac_stripped = 0;
}

static inline uint64_t state_lookup(const struct walk_state *w)
{
	return unwind_a64_lookup_pc(&w->r);
}

static inline int state_step(struct walk_state *w, const struct unwind_rule *rule, __u32 *end, const int memo)
{
	(void)memo; /* no memo on aarch64 */
	return !unwind_step_a64(&w->r, rule, end, &walk_ops, w);
}

/* No rule at W's pc: the kernel's sigreturn trampoline has no CFI on
 * arm64, and is known by its instructions (as the kernel program's walk
 * knows it); anything else ends the walk with the search's reason. */
static inline int state_no_rule(struct walk_state *w, __u32 *end)
{
	__u32 why = *end;
	int ret = unwind_a64_signal(&w->r, end, &walk_ops, w);

	if (ret < 0)
		*end = why;
	return ret == 0;
}
#endif

/* --- The DWARF walk ------------------------------------------------------- */

/* The index of the mapping holding PC, or -1: a binary search over the
 * sorted mappings, after the one the walk found last (*MEMO), which the
 * next frame is most often in. */
static inline long mapping_find(const struct walk_image *img, uint64_t pc, long *memo)
{
	const struct unwind_image_mapping *m = img->maps;
	uint32_t lo = 0, hi = img->nmappings, mid;

	if (*memo >= 0 && pc - m[*memo].start < m[*memo].end - m[*memo].start)
		return *memo;
	while (lo < hi) { /* the first mapping starting after pc */
		mid = lo + (hi - lo) / 2;
		if (m[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || pc >= m[lo - 1].end)
		return -1;
	*memo = lo - 1;
	return *memo;
}

/* The rule at runtime address LOOKUP and the index of its table
 * (*TABLE), or NULL with *END set. */
static inline const struct unwind_rule *rule_at(const struct walk_image *img, uint64_t lookup, long *memo,
						uint32_t *table, __u32 *end)
{
	const struct unwind_image_mapping *m;
	const struct unwind_rule *rule;
	struct unwind_table_ref ref;
	long i = mapping_find(img, lookup, memo);

	if (i < 0) {
		*end = WALK_ERR_NO_MAPPING;
		return 0;
	}
	m = &img->maps[i];
	*table = m->table;
	ref.base = img->base;
	ref.t = &img->tables[m->table];
	rule = unwind_rule_find(&ref, &image_ops, lookup - m->bias);
	if (!rule || rule->cfa_type == UNWIND_CFA_NONE) {
		*end = WALK_ERR_NO_FDE;
		return 0;
	}
	return rule;
}

/* The stack's bounds as the reads test them: a word read at A needs
 * A + 8 <= hi. */
static inline void bounds_set(const struct walk_bounds *b, uint64_t *lo, uint64_t *hi_word)
{
	*lo = b->lo;
	*hi_word = b->hi >= b->lo + 8 ? b->hi - 7 : b->lo; /* none readable: empty */
}

/* Where a lookup pc's entry goes in a cache of 2^BITS slots: *SLOT, or
 * NULL (a pc past 47 bits is not cached); the word's top bits, from
 * bit 16 + BITS on, that name the pc (*WANT, the in-use bit with the
 * tag). */
static inline uint64_t *cache_slot(uint64_t *cache, uint32_t bits, uint64_t pc, uint64_t *want)
{
	if (pc >> WALK_CACHE_PC_BITS)
		return 0;
	*want = (pc | 1ull << WALK_CACHE_PC_BITS) >> bits; /* the tag: pc's top bits, and the in-use bit */
	return &cache[WALK_CACHE_SLOT(pc, bits)];
}

/* The table a walk's last cached rule came from: its index, rules and
 * their count, in registers.  Frames come in runs from one object, and
 * while the table is the last one the rule's address needs no load of the
 * table's entry: the test is a branch, which the CPU predicts, where the
 * load would sit on the chain of dependent loads a warm frame is. */
struct table_memo {
	uint32_t table; /* UINT32_MAX: none yet */
	uint32_t nrules;
	const struct unwind_rule *rules;
};

/* The rule the word WORD at a slot gives, if it is the entry WANT names
 * and its table and rule lie inside IMG (a word another thread wrote
 * half-way is never seen, but memory given as a cache is not trusted
 * either); else NULL. */
static inline const struct unwind_rule *cache_rule(const struct walk_image *img, uint32_t bits, uint64_t word,
						   uint64_t want, struct table_memo *tm)
{
	const struct unwind_image_table *t;
	uint32_t table, idx;

	if (word >> (16 + bits) != want)
		return 0;
	table = (uint32_t)(word >> 16) & ((1u << bits) - 1);
	idx = (uint32_t)word & 0xffff;
	if (table != tm->table) {
		if (table >= img->ntables)
			return 0;
		t = &img->tables[table];
		tm->table = table;
		tm->nrules = t->nrules;
		tm->rules = (const struct unwind_rule *)(img->base + t->rules_off);
	}
	if (idx >= tm->nrules)
		return 0;
	return tm->rules + idx;
}

/* The DWARF walk from W (its registers and bounds set): RECORD (a
 * constant) steps with the memo's recording hooks. */
static inline __attribute__((always_inline)) uint32_t walk_from(const struct walk_image *img, struct walk_state *wp,
								 struct walk_frames *f, const int record)
{
	struct walk_state w = *wp; /* in registers and the frame, not behind a pointer */
	const struct unwind_rule *rule;
	uint64_t *const cache = img->cache, *slot, want = 0, lookup;
	const uint32_t bits = img->cache_bits;
	struct table_memo tm = { UINT32_MAX, 0, 0 };
	long memo = -1;
	uint32_t n = 0, misses = 0, table;
	__u32 end = WALK_END_TRUNCATED;

	while (n < DWLEAK_MAX_FRAMES) {
		f->pcs[n] = w.r.pc | (n && w.r.exact_pc ? DWLEAK_FRAME_EXACT : 0);
		n++;
		lookup = state_lookup(&w);
		slot = cache ? cache_slot(cache, bits, lookup, &want) : 0;
		rule = slot ? cache_rule(img, bits, __atomic_load_n(slot, __ATOMIC_RELAXED), want, &tm) : 0;
		if (!rule) {
			misses++;
			rule = rule_at(img, lookup, &memo, &table, &end);
			if (!rule) {
				if (state_no_rule(&w, &end)) {
					end = WALK_END_TRUNCATED; /* what the loop's end says */
					continue;
				}
				break;
			}
			/* a table past the slot's field is searched every time */
			if (slot && table < (1u << bits))
				__atomic_store_n(slot,
						 want << (16 + bits) | (uint64_t)table << 16 |
							 (uint64_t)(rule - (const struct unwind_rule *)(img->base +
												 img->tables[table].rules_off)),
						 __ATOMIC_RELAXED);
		}
		if (rule->cfa_type == UNWIND_CFA_SIGNAL)
			f->pcs[n - 1] |= DWLEAK_FRAME_EXACT; /* the trampoline's first byte, not a return */
		if (!state_step(&w, rule, &end, record))
			break;
	}
	f->n = n;
	f->end = end;
	f->cache_misses = misses;
	f->remembered = 0;
	f->name = NULL;
	*wp = w;
	return n;
}

uint32_t walk_dwarf(const struct walk_image *img, const struct walk_regs *regs, const struct walk_bounds *b,
		    struct walk_frames *f)
{
	struct walk_state w;

	state_init(&w, regs);
	bounds_set(b, &w.lo, &w.hi_word);
	return walk_from(img, &w, f, 0);
}

/* --- Whole walks remembered (walk.h) -------------------------------------- */

#if defined(__x86_64__)
#define WALK_MEMO_SET_BITS 4 /* sets of two entries */
_Static_assert(WALK_MEMO_ENTRIES == 2 << WALK_MEMO_SET_BITS, "the memo's sets");
_Static_assert(WALK_MEMO_FRAMES <= DWLEAK_MAX_FRAMES, "a remembered walk fits walk_frames");

/* The first entry of the set of a walk starting at SP with return
 * address RA at it (the other is the next one). */
static inline uint32_t memo_set(uint64_t sp, uint64_t ra)
{
	return 2 * (uint32_t)(((ra ^ sp * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull) >> (64 - WALK_MEMO_SET_BITS));
}

/* Whether E is a walk from REGS with IMG in bounds LO..HI_WORD (B) whose
 * every word still holds its value.  E's bytes are not trusted: each
 * word is read inside the bounds, as the walk would. */
__attribute__((no_sanitize_address)) static inline int memo_match(const struct walk_memo_entry *e,
								   const struct walk_image *img,
								   const struct walk_regs *regs,
								   const struct walk_bounds *b, uint64_t lo,
								   uint64_t hi_word)
{
	uint32_t i, nwords = e->nwords;
	__u64 v;

	if (e->pc0 != regs->pc || e->sp0 != regs->sp || e->image != img || e->lo != b->lo || e->hi != b->hi ||
	    e->exact_pc != regs->exact_pc || (e->use_bp0 && e->bp0 != regs->bp) || nwords > WALK_MEMO_WORDS ||
	    !e->n || e->n > WALK_MEMO_FRAMES)
		return 0;
	for (i = 0; i < nwords; i++)
		if (stack_word(lo, hi_word, regs->sp + e->off[i], &v) || v != e->val[i])
			return 0;
	return 1;
}

uint32_t walk_dwarf_memo(const struct walk_image *img, const struct walk_regs *regs, const struct walk_bounds *b,
			 struct walk_memo *m, struct walk_frames *f)
{
	struct walk_memo_entry *e;
	struct walk_state w;
	uint64_t lo, hi_word;
	__u64 ra;
	uint32_t n;

	bounds_set(b, &lo, &hi_word);
	/* the word at sp (the return address at an entry) picks the entry:
	 * two callers' walks from one sp do not take each other's */
	if (!m || stack_word(lo, hi_word, regs->sp, &ra))
		return walk_dwarf(img, regs, b, f);
	e = &m->e[memo_set(regs->sp, ra)];
	m->clock++;
	if (memo_match(e, img, regs, b, lo, hi_word) || memo_match(++e, img, regs, b, lo, hi_word)) {
		__builtin_memcpy(f->pcs, e->pcs, e->n * sizeof(f->pcs[0]));
		f->n = e->n;
		f->end = e->end;
		f->cache_misses = 0;
		f->remembered = 1;
		e->used = m->clock;
		f->name = &e->name;
		return f->n;
	}
	/* E is the set's second: the first goes if it was used less lately */
	if ((int32_t)(e[-1].used - e->used) < 0)
		e--;
	e->used = m->clock;
	e->pc0 = 0; /* empty while the walk writes its words into it */
	e->name.epoch = 0; /* new frames: not written yet */
	e->name.slot = (uint32_t)(e - m->e);
	state_init(&w, regs);
	w.lo = lo;
	w.hi_word = hi_word;
	w.rec_e = e;
	w.sp0 = regs->sp;
	w.bp_addr = 0;
	w.rec = 1;
	w.nrec = 0;
	w.bp_reg = 1;
	w.bp_unrec = 0;
	w.use_bp0 = 0;
	w.pad = 0;
	n = walk_from(img, &w, f, 1);
	if (w.rec && w.nrec <= WALK_MEMO_WORDS && n <= WALK_MEMO_FRAMES &&
	    (f->end == WALK_END_OK || f->end == WALK_END_ZERO_RA || f->end == WALK_END_TRUNCATED)) {
		e->sp0 = regs->sp;
		e->bp0 = regs->bp;
		e->lo = b->lo;
		e->hi = b->hi;
		e->image = img;
		e->exact_pc = regs->exact_pc;
		e->use_bp0 = w.use_bp0;
		e->nwords = w.nrec;
		e->n = n;
		e->end = f->end;
		__builtin_memcpy(e->pcs, f->pcs, n * sizeof(f->pcs[0]));
		e->pc0 = regs->pc; /* last: whole */
		f->name = &e->name;
	}
	return n;
}
#else
uint32_t walk_dwarf_memo(const struct walk_image *img, const struct walk_regs *regs, const struct walk_bounds *b,
			 struct walk_memo *m, struct walk_frames *f)
{
	(void)m; /* its step notes no words: every walk is made */
	return walk_dwarf(img, regs, b, f);
}
#endif

/* --- The frame-pointer walk ------------------------------------------------ */

/* A return address the frame-pointer walk found, as a code address: the
 * frame records {previous frame pointer, return address} are laid out
 * alike on both machines, aarch64's addresses maybe signed. */
#if defined(__x86_64__)
#define FP_CODE_ADDR(ra) (ra)
#else
#define FP_CODE_ADDR(ra) unwind_a64_strip(ra, WALK_A64_PAC_MASK)
#endif

uint32_t walk_fp(const struct walk_regs *regs, const struct walk_bounds *b, struct walk_frames *f)
{
	uint64_t lo, hi_word, bp = regs->bp;
	__u64 ra, next;
	uint32_t n = 0;

	bounds_set(b, &lo, &hi_word);
	f->pcs[n++] = regs->pc;
	f->end = WALK_END_TRUNCATED;
	/* at a function's entry its frame is not set up: its caller's return
	 * address is at sp (as perf takes it at a uprobe since Linux 6.11),
	 * or in x30 (aarch64) */
	if (regs->exact_pc) {
#if defined(__x86_64__)
		if (stack_word(lo, hi_word, regs->sp, &ra)) {
			f->end = WALK_ERR_READ;
			goto out;
		}
#else
		ra = regs->lr;
#endif
		f->pcs[n++] = FP_CODE_ADDR(ra);
	}
	for (;;) {
		if (n >= DWLEAK_MAX_FRAMES) {
			f->end = WALK_END_TRUNCATED;
			break;
		}
		if (!bp) {
			f->end = WALK_END_OK;
			break;
		}
		if (stack_word(lo, hi_word, bp + 8, &ra) || stack_word(lo, hi_word, bp, &next)) {
			f->end = WALK_ERR_READ;
			break;
		}
		ra = FP_CODE_ADDR(ra);
		if (!ra) {
			f->end = WALK_END_ZERO_RA;
			break;
		}
		f->pcs[n++] = ra;
		if (!next) {
			f->end = WALK_END_OK; /* rbp 0: the psABI's end of the frame chain (_start) */
			break;
		}
		if (next <= bp) {
			f->end = WALK_ERR_RBP_UNKNOWN; /* the chain must climb the stack */
			break;
		}
		bp = next;
	}
out: __attribute__((unused)); /* no read before the chain on aarch64 */
	f->n = n;
	f->cache_misses = 0;
	f->remembered = 0;
	f->name = NULL;
	return n;
}

/* --- The registers of a point ------------------------------------------- */

/* With CFI of its own, so that a walk may start inside it too. */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl walk_regs_capture\n"
	".hidden walk_regs_capture\n"
	".type walk_regs_capture, @function\n"
	"walk_regs_capture:\n"
	".cfi_startproc\n"
	"	movq (%rsp), %rax\n"  /* pc: the return address into the caller */
	"	movq %rax, 0(%rdi)\n"
	"	leaq 8(%rsp), %rax\n" /* sp: the caller's rsp once this returns */
	"	movq %rax, 8(%rdi)\n"
	"	movq %rbp, 16(%rdi)\n"
	"	movq $0, 24(%rdi)\n" /* exact_pc 0, pad 0 */
	"	movq $0, 32(%rdi)\n" /* lr: none on x86_64 */
	"	ret\n"
	".cfi_endproc\n"
	".size walk_regs_capture, .-walk_regs_capture\n");
#else
__asm__(".text\n"
	".globl walk_regs_capture\n"
	".hidden walk_regs_capture\n"
	".type walk_regs_capture, %function\n"
	"walk_regs_capture:\n"
	".cfi_startproc\n"
	"	str x30, [x0, #0]\n" /* pc: the return address into the caller */
	"	mov x9, sp\n"	       /* sp: the caller's, which bl left as it was */
	"	str x9, [x0, #8]\n"
	"	str x29, [x0, #16]\n"
	"	str xzr, [x0, #24]\n" /* exact_pc 0, pad 0 */
	"	str xzr, [x0, #32]\n" /* lr: what x30 holds after the return is pc, no caller's */
	"	ret\n"
	".cfi_endproc\n"
	".size walk_regs_capture, .-walk_regs_capture\n");
#endif

_Static_assert(__builtin_offsetof(struct walk_regs, pc) == 0 && __builtin_offsetof(struct walk_regs, sp) == 8 &&
		       __builtin_offsetof(struct walk_regs, bp) == 16 &&
		       __builtin_offsetof(struct walk_regs, exact_pc) == 24 &&
		       __builtin_offsetof(struct walk_regs, lr) == 32 && sizeof(struct walk_regs) == 40,
	       "walk_regs_capture's stores");

/* --- The thread's stack ---------------------------------------------------- */

/* Raw system calls (raw_syscall.h): no errno written, nothing a program
 * may interpose. */
static long sys3(long nr, long a, long b, long c)
{
	return raw_syscall6(nr, a, b, c, 0, 0, 0);
}

/* The last stack found, per thread: initial-exec, like the library's
 * other TLS, so that reaching it never allocates.  Its two words change
 * together only under THREAD_STACK_SEQ (odd while they change): a signal
 * handler of the thread that walks between the two stores, or between the
 * two loads of a reader it interrupted, would otherwise take a low bound
 * of one mapping and a high bound of another (the main stack and an
 * alternate signal stack), a range that may cross unmapped memory the
 * walk would then read.  A reader that sees the count move or odd reads
 * the maps again itself.  (Signal fences: only this thread writes them.) */
static __thread struct walk_bounds thread_stack __attribute__((tls_model("initial-exec")));
static __thread uint32_t thread_stack_seq __attribute__((tls_model("initial-exec")));

/* How far a /proc/PID/maps line's parse is: its start address, its end,
 * or the rest of the line. */
enum maps_field { MAPS_START, MAPS_END, MAPS_REST };

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int walk_stack_bounds(uint64_t sp, struct walk_bounds *out)
{
	char buf[1024];
	enum maps_field field = MAPS_START;
	uint64_t start = 0, end = 0;
	struct walk_bounds known;
	uint32_t seq = thread_stack_seq;
	long fd, got, i;
	int d, err = -ENOENT;

	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	known = thread_stack;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!(seq & 1) && seq == thread_stack_seq && sp - known.lo < known.hi - known.lo) {
		*out = known;
		return 0;
	}
	fd = sys3(SYS_openat, AT_FDCWD, (long)"/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return (int)fd;
	/* streamed: a line of any length costs no buffer, only its first two
	 * fields are parsed */
	while (err == -ENOENT && (got = sys3(SYS_read, fd, (long)buf, sizeof(buf))) > 0) {
		for (i = 0; i < got; i++) {
			char c = buf[i];

			if (c == '\n') {
				field = MAPS_START;
				start = end = 0;
			} else if (field == MAPS_START) {
				if (c == '-')
					field = MAPS_END;
				else if ((d = hex_digit(c)) >= 0)
					start = start << 4 | (uint64_t)d;
			} else if (field == MAPS_END) {
				if ((d = hex_digit(c)) >= 0) {
					end = end << 4 | (uint64_t)d;
					continue;
				}
				field = MAPS_REST;
				if (sp >= start && sp < end) {
					thread_stack_seq++;
					__atomic_signal_fence(__ATOMIC_SEQ_CST);
					thread_stack.lo = start;
					thread_stack.hi = end;
					__atomic_signal_fence(__ATOMIC_SEQ_CST);
					thread_stack_seq++;
					err = 0;
					break;
				}
			}
		}
	}
	if (err == -ENOENT && got < 0)
		err = (int)got;
	sys3(SYS_close, fd, 0, 0);
	if (!err) {
		out->lo = start;
		out->hi = end;
	}
	return err;
}
