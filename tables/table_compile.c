/* The table compiler: gathers an object's FDEs (.eh_frame first, then
 * .debug_frame from the object and its separate debug file for code that
 * .eh_frame leaves uncovered), runs their CFA programs, deduplicates the
 * resulting rules and packs the rows into 64 KiB pages (unwind_format.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfi.h"
#include "constants.h"
#include "elf_image.h"
#include "table.h"
#include "table_input.h"

enum fde_source { SRC_EH = 0, SRC_DEBUG = 1, SRC_DEBUG_FILE = 2, SRC_COUNT };

static __thread char last_error[256];

void table_set_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
}

const char *table_last_error(void)
{
	return last_error[0] ? last_error : "no error";
}

/* A row before paging: [start, end) has rule RULE. */
struct span {
	uint64_t start;
	uint64_t end;
	uint32_t rule;
};

/* Rules deduplicated through an open-addressing hash of their bytes. */
struct rule_set {
	struct unwind_rule *rules;
	uint32_t n;
	uint32_t cap;
	uint32_t *slots; /* index + 1, 0 = empty */
	uint32_t nslots; /* power of two, at least twice the rules */
};

struct compile {
	struct rule_set rs;
	struct span *spans;
	size_t nspans;
	size_t cap;
	uint64_t clip_end; /* current FDE's end, clipped by the next FDE's start */
	uint64_t covered;
	uint64_t supported;
	int err;
};

/* FNV-1a over the rule's bytes, folded to 32 bits.  Only the rule set's
 * slots depend on it: rule numbers are given in order of first use. */
static uint32_t rule_hash(const struct unwind_rule *r)
{
	uint64_t h = FNV64_OFFSET;
	const uint8_t *p = (const uint8_t *)r;
	size_t i;

	for (i = 0; i < sizeof(*r); i++)
		h = (h ^ p[i]) * FNV64_PRIME;
	return (uint32_t)(h ^ (h >> 32));
}

static int rule_set_grow(struct rule_set *rs)
{
	uint32_t nslots = rs->nslots ? rs->nslots * 2 : 256;
	uint32_t *slots, i, j;

	slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (i = 0; i < rs->n; i++) {
		j = rule_hash(&rs->rules[i]) & (nslots - 1);
		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = i + 1;
	}
	free(rs->slots);
	rs->slots = slots;
	rs->nslots = nslots;
	return 0;
}

/* Returns the rule's index (adding it when new) or a negative errno. */
static int64_t rule_set_add(struct rule_set *rs, const struct unwind_rule *r)
{
	struct unwind_rule *grown;
	uint32_t j;

	if (2 * (rs->n + 1) > rs->nslots && rule_set_grow(rs))
		return -ENOMEM;
	j = rule_hash(r) & (rs->nslots - 1);
	for (; rs->slots[j]; j = (j + 1) & (rs->nslots - 1)) {
		if (!memcmp(&rs->rules[rs->slots[j] - 1], r, sizeof(*r)))
			return rs->slots[j] - 1;
	}
	if (rs->n == UNWIND_MAX_RULES)
		return -E2BIG;
	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? rs->cap * 2 : 64;
		grown = realloc(rs->rules, rs->cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		rs->rules = grown;
	}
	rs->rules[rs->n] = *r;
	rs->slots[j] = rs->n + 1;
	return rs->n++;
}

bool table_rule_supported(const struct unwind_rule *r)
{
	if (r->cfa_type == UNWIND_CFA_NONE || r->cfa_type >= UNWIND_CFA_UNSUPPORTED)
		return false;
	return r->rbp_type != UNWIND_RBP_UNSUPPORTED;
}

static int span_add(uint64_t start, uint64_t end, const struct unwind_rule *rule, void *arg)
{
	struct compile *c = arg;
	struct span *last, *grown;
	int64_t idx;

	if (end > c->clip_end)
		end = c->clip_end;
	if (start >= end)
		return 0;
	idx = rule_set_add(&c->rs, rule);
	if (idx < 0)
		return (int)idx;
	c->covered += end - start;
	if (table_rule_supported(rule))
		c->supported += end - start;
	last = c->nspans ? &c->spans[c->nspans - 1] : NULL;
	if (last && last->end == start && last->rule == idx) {
		last->end = end;
		return 0;
	}
	if (c->nspans == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 1024;
		grown = realloc(c->spans, c->cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		c->spans = grown;
	}
	c->spans[c->nspans++] = (struct span){ start, end, (uint32_t)idx };
	return 0;
}

static int fde_cmp(const void *a, const void *b)
{
	const struct cfi_fde *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->source != y->source)
		return x->source < y->source ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The CFI one compile reads: IN's sections, decompressed when they were
 * stored compressed, and the cfi_section views of them. */
struct inputs {
	const struct table_input *in;
	struct elf_section eh, hdr, df, dbg_df;
	struct cfi_section sec[SRC_COUNT];
	int have[SRC_COUNT];
};

static void inputs_close(struct inputs *in)
{
	elf_section_release(&in->eh);
	elf_section_release(&in->hdr);
	elf_section_release(&in->df);
	elf_section_release(&in->dbg_df);
}

static void cfi_from(struct inputs *in, enum fde_source src, const struct elf_section *s, int is_eh)
{
	in->sec[src] = (struct cfi_section){ s->data, s->size, s->addr, is_eh, table_input_arch(in->in) };
	in->have[src] = s->data != NULL && s->size > 0;
}

/* Decompresses STORED into *OUT (an absent section stays absent). */
static int inflate_part(const struct table_input *in, const struct elf_section *stored,
			struct elf_section *out, const char *file, const char *name)
{
	int err;

	memset(out, 0, sizeof(*out));
	if (!stored->data)
		return 0;
	err = elf_section_inflate(stored, in->cfi_limit, out);
	if (err == -EFBIG)
		table_set_error("%s%s claims %llu bytes decompressed, more than its %zu compressed bytes "
			  "could hold or than any real CFI (%llu for this object's code); refusing",
			  file, name, (unsigned long long)elf_section_claimed_size(stored),
			  stored->size, (unsigned long long)in->cfi_limit);
	else if (err == -ENOEXEC)
		table_set_error("%s%s is truncated or cannot be decompressed", file, name);
	return err;
}

static int inputs_open(struct inputs *in, const struct table_input *input)
{
	const struct table_input_file *obj = &input->obj, *dbg = &input->dbg;
	int err;

	memset(in, 0, sizeof(*in));
	in->in = input;
	err = inflate_part(input, &obj->sec[CFI_PART_EH_FRAME], &in->eh, "", ".eh_frame");
	err = err ?: inflate_part(input, &obj->sec[CFI_PART_DEBUG_FRAME], &in->df, "", ".debug_frame");
	if (err)
		return err;
	/* An .eh_frame_hdr that cannot be used only means scanning .eh_frame. */
	if (inflate_part(input, &obj->sec[CFI_PART_EH_FRAME_HDR], &in->hdr, "", ".eh_frame_hdr")) {
		last_error[0] = 0;
		memset(&in->hdr, 0, sizeof(in->hdr));
	}
	cfi_from(in, SRC_EH, &in->eh, 1);
	cfi_from(in, SRC_DEBUG, &in->df, 0);
	if (input->have_dbg) {
		err = inflate_part(input, &dbg->sec[CFI_PART_DEBUG_FRAME], &in->dbg_df,
				   "the debug file's ", ".debug_frame");
		if (err)
			return err;
		cfi_from(in, SRC_DEBUG_FILE, &in->dbg_df, 0);
	}
	return 0;
}

/* Collects FDEs from every source, keeping a .debug_frame FDE only where no
 * .eh_frame FDE overlaps it, and drops FDEs outside the loaded segments. */
static int fdes_collect(struct inputs *in, struct cfi_fde **out, size_t *n, size_t *bad)
{
	struct cfi_fde *fdes = NULL;
	size_t cap = 0, i, kept = 0, neh;
	int err, src;

	*n = 0;
	for (src = 0; src < SRC_COUNT; src++) {
		if (!in->have[src])
			continue;
		err = cfi_list_fdes(&in->sec[src], src == SRC_EH ? in->hdr.data : NULL,
				    in->hdr.size, in->hdr.addr, (uint8_t)src, &fdes, n, &cap, bad);
		if (err)
			goto fail;
	}
	for (i = 0; i < *n; i++) {
		if (fdes[i].start == fdes[i].end)
			continue; /* empty FDEs cover nothing */
		if (!elf_image_range_loaded(&in->in->obj.img, fdes[i].start, fdes[i].end)) {
			(*bad)++;
			continue;
		}
		fdes[kept++] = fdes[i];
	}
	*n = kept;
	if (*n)
		qsort(fdes, *n, sizeof(*fdes), fde_cmp);
	/* eh_frame FDEs are sorted among themselves now; drop debug FDEs that
	 * overlap one of them (eh_frame is what the code really runs with). */
	for (neh = 0, i = 0; i < *n; i++)
		neh += fdes[i].source == SRC_EH;
	if (neh < *n) {
		uint64_t eh_end = 0;
		size_t j, k = 0;

		for (j = 0; j < *n; j++) {
			if (fdes[j].source == SRC_EH) {
				eh_end = fdes[j].end > eh_end ? fdes[j].end : eh_end;
				fdes[k++] = fdes[j];
				continue;
			}
			if (fdes[j].start < eh_end || (j + 1 < *n && fdes[j + 1].source == SRC_EH &&
						       fdes[j + 1].start < fdes[j].end))
				continue;
			fdes[k++] = fdes[j];
		}
		*n = k;
	}
	*out = fdes;
	return 0;
fail:
	free(fdes);
	return err;
}

/* Runs every FDE's program into C's spans.  An FDE that overlaps the next
 * is cut where the next begins: a sorted-table lookup (the runtime's, and
 * libdw's) finds the later one there. */
static int fdes_compile(struct inputs *in, struct cfi_fde *fdes, size_t n, struct compile *c,
			struct unwind_table *t)
{
	size_t i;
	int err;

	for (i = 0; i < n; i++) {
		if (i + 1 < n && fdes[i + 1].start == fdes[i].start) {
			t->nfdes_bad++; /* duplicate: the first (eh_frame) one wins */
			fdes[i + 1] = fdes[i];
			continue;
		}
		c->clip_end = fdes[i].end;
		if (i + 1 < n && fdes[i + 1].start < c->clip_end)
			c->clip_end = fdes[i + 1].start;
		err = cfi_fde_rows(&in->sec[fdes[i].source], &fdes[i], span_add, c);
		if (err == -EINVAL) {
			t->nfdes_bad++;
			continue;
		}
		if (err)
			return err;
		t->nfdes++;
		if (fdes[i].source == SRC_EH)
			t->nfdes_eh++;
		else
			t->nfdes_debug++;
	}
	return 0;
}

/* Turns C's sorted spans into breakpoints: at each span's start its rule
 * begins, and where a covered stretch ends rule 0 (UNWIND_CFA_NONE) does. */
static struct unwind_row *breakpoints(const struct compile *c, uint64_t **addrs, size_t *n)
{
	struct unwind_row *bp = malloc(2 * c->nspans * sizeof(*bp));
	uint64_t *at = malloc(2 * c->nspans * sizeof(*at));
	size_t i, k = 0;

	if (!bp || !at) {
		free(bp);
		free(at);
		return NULL;
	}
	for (i = 0; i < c->nspans; i++) {
		at[k] = c->spans[i].start;
		bp[k++].rule = (uint16_t)c->spans[i].rule;
		if (i + 1 < c->nspans && c->spans[i + 1].start == c->spans[i].end)
			continue;
		at[k] = c->spans[i].end;
		bp[k++].rule = 0;
	}
	*addrs = at;
	*n = k;
	return bp;
}

/* Packs C's sorted spans into T's pages and rows.  Each page restates the
 * rule in force at its first byte (unless no FDE covers it), so a lookup
 * never looks at the page before; a page never starts with a rule-0 row. */
static int pages_build(const struct compile *c, struct unwind_table *t)
{
	struct unwind_row *bp;
	uint64_t first, last, page, pend, *at = NULL;
	size_t nbp, i = 0;
	uint16_t active = 0;
	int err = -ENOMEM;

	if (!c->nspans)
		return 0;
	first = c->spans[0].start >> UNWIND_PAGE_SHIFT;
	last = (c->spans[c->nspans - 1].end - 1) >> UNWIND_PAGE_SHIFT;
	if (last - first + 1 > TABLE_MAX_PAGES) {
		table_set_error("call-frame information spans %llu pages of address space; refusing",
			  (unsigned long long)(last - first + 1));
		return -E2BIG;
	}
	bp = breakpoints(c, &at, &nbp);
	if (!bp)
		return -ENOMEM;
	t->first_page = first;
	t->npages = (uint32_t)(last - first + 1);
	t->pages = calloc(t->npages, sizeof(*t->pages));
	t->rows = malloc((nbp + t->npages) * sizeof(*t->rows));
	if (!t->pages || !t->rows)
		goto out;
	for (page = first; page <= last; page++) {
		struct unwind_page *pg = &t->pages[page - first];

		pend = (page + 1) << UNWIND_PAGE_SHIFT;
		pg->first_row = t->nrows;
		if (active && (i == nbp || at[i] != page << UNWIND_PAGE_SHIFT))
			t->rows[t->nrows++] = (struct unwind_row){ 0, active };
		for (; i < nbp && at[i] < pend; i++) {
			active = bp[i].rule;
			if (t->nrows == pg->first_row && active == 0)
				continue;
			t->rows[t->nrows++] = (struct unwind_row){
				(uint16_t)(at[i] & (UNWIND_PAGE_SIZE - 1)), active };
		}
		pg->nrows = t->nrows - pg->first_row;
	}
	err = 0;
out:
	free(bp);
	free(at);
	return err;
}

int table_compile_input(const struct table_input *input, struct unwind_table **out)
{
	static const struct unwind_rule none = { 0 };
	struct compile c = { .err = 0 };
	struct cfi_fde *fdes = NULL;
	struct unwind_table *t;
	struct inputs in;
	size_t nfdes = 0, bad = 0;
	int err;

	last_error[0] = 0;
	*out = NULL;
	memset(&in, 0, sizeof(in));
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	err = inputs_open(&in, input);
	if (err)
		goto out;
	memcpy(t->build_id, input->build_id, input->build_id_len);
	t->build_id_len = input->build_id_len;
	t->arch = table_input_arch(input);
	err = -ENODATA;
	if (!in.have[SRC_EH] && !in.have[SRC_DEBUG] && !in.have[SRC_DEBUG_FILE]) {
		if (!input->obj.img.shnum) /* stripped of them: .eh_frame had to come through PT_GNU_EH_FRAME */
			table_set_error("no section headers and no PT_GNU_EH_FRAME segment: its call-frame "
					"information cannot be found, so walks stop at its frames");
		else
			table_set_error("no .eh_frame or .debug_frame (no call-frame information to unwind with)");
		goto out;
	}
	err = fdes_collect(&in, &fdes, &nfdes, &bad);
	if (err)
		goto out;
	t->nfdes_bad = (uint32_t)bad;
	if (rule_set_add(&c.rs, &none) != 0) { /* rule 0 is always "no CFI" */
		err = -ENOMEM;
		goto out;
	}
	err = fdes_compile(&in, fdes, nfdes, &c, t);
	if (err) {
		if (err == -E2BIG)
			table_set_error("more than %u distinct unwind rules", UNWIND_MAX_RULES);
		goto out;
	}
	if (!c.nspans) {
		err = t->nfdes_bad ? -ENOEXEC : -ENODATA;
		table_set_error(t->nfdes_bad ? "call-frame information is malformed: no usable FDE (%u bad)"
				       : "call-frame information has no FDE",
			  t->nfdes_bad);
		goto out;
	}
	err = pages_build(&c, t);
	if (err)
		goto out;
	t->covered_bytes = c.covered;
	t->supported_bytes = c.supported;
	t->rules = c.rs.rules;
	t->nrules = c.rs.n;
	c.rs.rules = NULL;
	*out = t;
	t = NULL;
out:
	if (err == -ENOMEM)
		table_set_error("out of memory");
	inputs_close(&in);
	free(fdes);
	free(c.spans);
	free(c.rs.rules);
	free(c.rs.slots);
	table_free(t);
	return err;
}

int table_compile_mem(const void *image, size_t size, const struct table_opts *opts,
		      struct unwind_table **out)
{
	struct table_input in;
	int err;

	*out = NULL;
	last_error[0] = 0;
	err = table_input_read_mem(image, size, opts, &in);
	if (err)
		return err;
	err = table_compile_input(&in, out);
	table_input_release(&in);
	return err;
}

int table_compile_fd(int fd, const struct table_opts *opts, struct unwind_table **out)
{
	struct table_input in;
	int err;

	*out = NULL;
	last_error[0] = 0;
	err = table_input_read_fd(fd, opts, &in);
	if (err)
		return err;
	err = table_compile_input(&in, out);
	table_input_release(&in);
	return err;
}

int table_compile_path(const char *path, const struct table_opts *opts, struct unwind_table **out)
{
	int fd, err;

	*out = NULL;
	/* O_NONBLOCK: opening a FIFO must not wait for a writer (it is then
	 * refused as not a regular file). */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		table_set_error("%s", strerror(errno));
		return err;
	}
	err = table_compile_fd(fd, opts, out);
	close(fd);
	return err;
}

void table_free(struct unwind_table *t)
{
	if (!t)
		return;
	free(t->pages);
	free(t->rows);
	free(t->rules);
	free(t);
}

/* Index of the last row of PG at or before OFF, or -1. */
static int64_t page_find(const struct unwind_table *t, const struct unwind_page *pg, uint16_t off)
{
	int64_t lo = 0, hi = (int64_t)pg->nrows - 1, mid, found = -1;

	while (lo <= hi) {
		mid = (lo + hi) / 2;
		if (t->rows[pg->first_row + mid].pc_low <= off) {
			found = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return found;
}

/* Address where row IDX of page PAGE (relative) ends: the next row's start,
 * or the page's end. */
static uint64_t row_end(const struct unwind_table *t, uint64_t page, const struct unwind_page *pg,
			uint32_t idx)
{
	if (idx + 1 < pg->nrows)
		return (page << UNWIND_PAGE_SHIFT) + t->rows[pg->first_row + idx + 1].pc_low;
	return (page + 1) << UNWIND_PAGE_SHIFT;
}

const struct unwind_rule *table_lookup(const struct unwind_table *t, uint64_t addr,
				       uint64_t *start, uint64_t *end)
{
	uint64_t page = addr >> UNWIND_PAGE_SHIFT;
	const struct unwind_page *pg;
	int64_t idx;

	if (page < t->first_page || page - t->first_page >= t->npages)
		return NULL;
	pg = &t->pages[page - t->first_page];
	idx = page_find(t, pg, (uint16_t)(addr & (UNWIND_PAGE_SIZE - 1)));
	if (idx < 0) {
		if (start)
			*start = page << UNWIND_PAGE_SHIFT;
		if (end)
			*end = pg->nrows ? (page << UNWIND_PAGE_SHIFT) + t->rows[pg->first_row].pc_low
					 : (page + 1) << UNWIND_PAGE_SHIFT;
		return &t->rules[0];
	}
	if (start)
		*start = (page << UNWIND_PAGE_SHIFT) + t->rows[pg->first_row + idx].pc_low;
	if (end)
		*end = row_end(t, page, pg, (uint32_t)idx);
	return &t->rules[t->rows[pg->first_row + idx].rule];
}

int table_for_each_span(const struct unwind_table *t,
			int (*fn)(const struct table_span *span, void *arg), void *arg)
{
	struct table_span cur = { 0, 0, NULL };
	uint32_t p, i;
	uint64_t page, s, e;
	int ret;

	for (p = 0; p < t->npages; p++) {
		const struct unwind_page *pg = &t->pages[p];

		page = t->first_page + p;
		for (i = 0; i < pg->nrows; i++) {
			const struct unwind_rule *rule = &t->rules[t->rows[pg->first_row + i].rule];

			s = (page << UNWIND_PAGE_SHIFT) + t->rows[pg->first_row + i].pc_low;
			e = row_end(t, page, pg, i);
			if (cur.rule == rule && cur.end == s) {
				cur.end = e; /* same rule restated at a page start */
				continue;
			}
			if (cur.rule && cur.rule->cfa_type != UNWIND_CFA_NONE) {
				ret = fn(&cur, arg);
				if (ret)
					return ret;
			}
			cur = (struct table_span){ s, e, rule };
		}
	}
	if (cur.rule && cur.rule->cfa_type != UNWIND_CFA_NONE)
		return fn(&cur, arg);
	return 0;
}

uint64_t table_walker_bytes(const struct unwind_table *t)
{
	uint64_t pages = 0;
	uint32_t i;

	for (i = 0; i < t->npages; i++)
		pages += t->pages[i].nrows != 0;
	return (uint64_t)t->nrows * sizeof(struct unwind_row) +
	       pages * (sizeof(struct unwind_page) + 8) +
	       (uint64_t)t->nrules * sizeof(struct unwind_rule);
}

static const char *const cfa_names[] = {
	[UNWIND_CFA_NONE] = "none",	      [UNWIND_CFA_RSP] = "rsp",
	[UNWIND_CFA_RBP] = "rbp",	      [UNWIND_CFA_PLT11] = "plt11",
	[UNWIND_CFA_PLT10] = "plt10",	      [UNWIND_CFA_DEREF_RBP] = "deref(rbp",
	[UNWIND_CFA_END] = "end-of-stack",    [UNWIND_CFA_SIGNAL] = "signal-frame",
	[UNWIND_CFA_RBX] = "rbx",	      [UNWIND_CFA_UNSUPPORTED] = "unsupported",
};

static void reg_format(uint8_t type, int32_t off, char *buf, size_t len)
{
	switch (type) {
	case UNWIND_RBP_SAME:
		snprintf(buf, len, "same");
		break;
	case UNWIND_RBP_CFA:
		snprintf(buf, len, "[cfa%+d]", off);
		break;
	case UNWIND_RBP_AT_RBP:
		snprintf(buf, len, "[rbp%+d]", off);
		break;
	case UNWIND_RBP_UNDEFINED:
		snprintf(buf, len, "undefined");
		break;
	default:
		snprintf(buf, len, "unsupported");
	}
}

/* aarch64's form: sp or x29, x29's rule, the return address's. */
static void rule_format_a64(const struct unwind_rule *r, char *buf, size_t len)
{
	char fp[32], ra[32];

	if (r->cfa_type != UNWIND_CFA_RSP && r->cfa_type != UNWIND_CFA_RBP) {
		snprintf(buf, len, "%s", r->cfa_type <= UNWIND_CFA_UNSUPPORTED ? cfa_names[r->cfa_type] : "invalid");
		return;
	}
	reg_format(r->rbp_type, r->rbp_off, fp, sizeof(fp));
	if (r->rbx_type == UNWIND_RBP_SAME)
		snprintf(ra, sizeof(ra), "x30");
	else
		reg_format(r->rbx_type, r->rbx_off, ra, sizeof(ra));
	snprintf(buf, len, "cfa=%s%+d x29=%s ra=%s%s", r->cfa_type == UNWIND_CFA_RSP ? "sp" : "x29", r->cfa_off, fp,
		 ra, r->flags & UNWIND_RULE_RA_SIGNED ? " signed" : "");
}

void table_rule_format(const struct unwind_rule *r, uint32_t arch, char *buf, size_t len)
{
	char rbp[32], rbx[40];
	const char *cfa = r->cfa_type <= UNWIND_CFA_UNSUPPORTED ? cfa_names[r->cfa_type] : "invalid";

	if (arch == UNWIND_ARCH_AARCH64) {
		rule_format_a64(r, buf, len);
		return;
	}
	reg_format(r->rbp_type, r->rbp_off, rbp, sizeof(rbp));
	rbx[0] = 0;
	if (r->rbx_type != UNWIND_RBP_SAME) {
		memcpy(rbx, " rbx=", 6);
		reg_format(r->rbx_type, r->rbx_off, rbx + 5, sizeof(rbx) - 5);
	}
	switch (r->cfa_type) {
	case UNWIND_CFA_RSP:
	case UNWIND_CFA_RBP:
	case UNWIND_CFA_RBX:
	case UNWIND_CFA_PLT11:
	case UNWIND_CFA_PLT10:
		snprintf(buf, len, "cfa=%s%+d rbp=%s%s", cfa, r->cfa_off, rbp, rbx);
		break;
	case UNWIND_CFA_DEREF_RBP:
		snprintf(buf, len, "cfa=%s%+d) rbp=%s%s", cfa, r->cfa_off, rbp, rbx);
		break;
	default:
		snprintf(buf, len, "%s", cfa);
	}
}
