/* DWARF CFI reader: CIE/FDE parsing, pointer encodings, .eh_frame_hdr, and
 * the CFA program interpreter that turns an FDE into rows of
 * struct unwind_rule.  All input is untrusted: every read is bounds-checked
 * and a malformed entry fails that entry only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cfi.h"

/* DW_EH_PE_* pointer encodings (LSB Core, "DWARF Extensions"). */
#define PE_OMIT 0xff
#define PE_FORMAT 0x0f
#define PE_APPL 0x70
#define PE_INDIRECT 0x80
#define PE_absptr 0x00
#define PE_uleb128 0x01
#define PE_udata2 0x02
#define PE_udata4 0x03
#define PE_udata8 0x04
#define PE_sleb128 0x09
#define PE_sdata2 0x0a
#define PE_sdata4 0x0b
#define PE_sdata8 0x0c
#define PE_pcrel 0x10
#define PE_datarel 0x30

/* x86_64 DWARF register numbers. */
#define REG_RBX 3
#define REG_RBP 6
#define REG_RSP 7
#define REG_RIP 16

/* aarch64 DWARF register numbers (AAPCS64 DWARF, "DWARF register names"). */
#define A64_X29 29 /* the frame pointer */
#define A64_X30 30 /* the link register: the return address column */
#define A64_SP 31
#define CFA_AARCH64_negate_ra_state 0x2d /* DW_CFA_GNU_window_save's number */
#define REG_NONE UINT64_MAX

/* DW_OP_* used by the expressions the walker understands. */
#define OP_deref 0x06
#define OP_and 0x1a
#define OP_plus 0x22
#define OP_shl 0x24
#define OP_ge 0x2a
#define OP_lit3 0x33
#define OP_lit10 0x3a
#define OP_lit11 0x3b
#define OP_lit15 0x3f
#define OP_breg6 0x76
#define OP_breg7 0x77
#define OP_breg16 0x80

/* remember_state nests only a few levels in real code; a deeper stack is a
 * malformed (or hostile) FDE, which fails that FDE. */
#define CFI_MAX_STATE_DEPTH 64

struct reader {
	const uint8_t *p;
	const uint8_t *end;
	int bad;
};

static uint64_t rd_fixed(struct reader *r, unsigned int n)
{
	uint64_t v = 0;
	unsigned int i;

	if ((size_t)(r->end - r->p) < n) {
		r->bad = 1;
		r->p = r->end;
		return 0;
	}
	for (i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

/* LEB128: 7 bits a byte, low first; *SHIFT and *LAST tell the caller how
 * far it went and the sign bit's byte. */
static uint64_t rd_leb(struct reader *r, unsigned int *shift, uint8_t *last)
{
	uint64_t v = 0;
	uint8_t b;

	*shift = 0;
	do {
		if (r->p >= r->end) {
			r->bad = 1;
			*last = 0;
			return 0;
		}
		b = *r->p++;
		if (*shift < 64)
			v |= (uint64_t)(b & 0x7f) << *shift;
		*shift += 7;
	} while (b & 0x80);
	*last = b;
	return v;
}

static uint64_t rd_uleb(struct reader *r)
{
	unsigned int shift;
	uint8_t last;

	return rd_leb(r, &shift, &last);
}

static int64_t rd_sleb(struct reader *r)
{
	unsigned int shift;
	uint8_t last;
	uint64_t v = rd_leb(r, &shift, &last);

	if (shift < 64 && (last & 0x40))
		v |= ~0ull << shift;
	return (int64_t)v;
}

/* Reads a pointer in encoding ENC.  PC is the address the field itself has
 * (for pcrel), DATA the base for datarel (the .eh_frame_hdr). */
static uint64_t rd_ptr(struct reader *r, uint8_t enc, uint64_t pc, uint64_t data)
{
	uint64_t v;

	switch (enc & PE_FORMAT) {
	case PE_absptr:
	case PE_udata8:
	case PE_sdata8:
		v = rd_fixed(r, 8);
		break;
	case PE_udata4:
		v = rd_fixed(r, 4);
		break;
	case PE_sdata4:
		v = (uint64_t)(int64_t)(int32_t)rd_fixed(r, 4);
		break;
	case PE_udata2:
		v = rd_fixed(r, 2);
		break;
	case PE_sdata2:
		v = (uint64_t)(int64_t)(int16_t)rd_fixed(r, 2);
		break;
	case PE_uleb128:
		v = rd_uleb(r);
		break;
	case PE_sleb128:
		v = (uint64_t)rd_sleb(r);
		break;
	default:
		r->bad = 1;
		return 0;
	}
	switch (enc & PE_APPL) {
	case 0:
		break;
	case PE_pcrel:
		v += pc;
		break;
	case PE_datarel:
		v += data;
		break;
	default: /* textrel, funcrel, aligned: not used on x86_64 Linux */
		r->bad = 1;
	}
	if (enc & PE_INDIRECT)
		r->bad = 1; /* would need the loaded image */
	return v;
}

/* The address of the byte R is at, within SEC. */
static uint64_t rd_addr(const struct cfi_section *sec, const struct reader *r)
{
	return sec->addr + (uint64_t)(r->p - sec->data);
}

/* One CIE or FDE: its body after the id field, and its id. */
struct entry {
	size_t offset;
	const uint8_t *body;
	const uint8_t *end;
	int is_cie;
	uint64_t cie_offset; /* FDEs: section offset of their CIE */
	size_t next;	     /* offset of the following entry */
};

/* Returns 0, 1 at the end of the entries (terminator or end of section),
 * -EINVAL when the entry at OFF does not fit. */
static int entry_read(const struct cfi_section *sec, size_t off, struct entry *e)
{
	struct reader r = { sec->data + off, sec->data + sec->size, 0 };
	uint64_t len, id, id_off;
	int dwarf64 = 0;

	if (off >= sec->size)
		return 1;
	len = rd_fixed(&r, 4);
	if (r.bad)
		return -EINVAL;
	if (len == 0)
		return 1;
	if (len == 0xffffffffu) {
		dwarf64 = 1;
		len = rd_fixed(&r, 8);
	}
	if (r.bad || len > (uint64_t)(r.end - r.p))
		return -EINVAL;
	e->offset = off;
	e->end = r.p + len;
	e->next = (size_t)(e->end - sec->data);
	id_off = (uint64_t)(r.p - sec->data);
	r.end = e->end;
	id = rd_fixed(&r, dwarf64 ? 8 : 4);
	if (r.bad)
		return -EINVAL;
	e->body = r.p;
	if (sec->is_eh) {
		e->is_cie = id == 0;
		if (!e->is_cie && id > id_off)
			return -EINVAL;
		e->cie_offset = id_off - id;
	} else {
		e->is_cie = dwarf64 ? id == ~0ull : id == 0xffffffffu;
		e->cie_offset = id;
	}
	return 0;
}

struct cie {
	size_t offset;
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	uint8_t addr_size;
	int has_z;
	int signal;
	const uint8_t *insns;
	const uint8_t *insns_end;
};

static int cie_aug_data(const struct cfi_section *sec, struct reader *r, const char *aug,
			struct cie *c)
{
	struct reader a;
	uint64_t len;
	uint8_t enc;

	len = rd_uleb(r);
	if (r->bad || len > (uint64_t)(r->end - r->p))
		return -EINVAL;
	a.p = r->p;
	a.end = r->p + len;
	a.bad = 0;
	r->p = a.end;
	for (aug++; *aug; aug++) {
		switch (*aug) {
		case 'L':
			rd_fixed(&a, 1);
			break;
		case 'R':
			c->fde_enc = (uint8_t)rd_fixed(&a, 1);
			break;
		case 'P':
			enc = (uint8_t)rd_fixed(&a, 1);
			rd_ptr(&a, enc & ~PE_INDIRECT, rd_addr(sec, &a), 0);
			break;
		case 'S':
			c->signal = 1;
			break;
		case 'B': /* AArch64 BTI, MTE: no data */
		case 'G':
			break;
		default: /* unknown: the rest of the data is skipped by its length */
			return a.bad ? -EINVAL : 0;
		}
	}
	return a.bad ? -EINVAL : 0;
}

static int cie_parse(const struct cfi_section *sec, size_t off, struct cie *c)
{
	struct entry e;
	struct reader r;
	const char *aug;
	uint8_t version;
	int err;

	err = entry_read(sec, off, &e);
	if (err || !e.is_cie)
		return -EINVAL;
	memset(c, 0, sizeof(*c));
	c->offset = off;
	c->addr_size = 8;
	c->fde_enc = PE_absptr;
	r.p = e.body;
	r.end = e.end;
	r.bad = 0;
	version = (uint8_t)rd_fixed(&r, 1);
	if (version != 1 && version != 3 && version != 4)
		return -EINVAL;
	aug = (const char *)r.p;
	r.p = memchr(r.p, 0, (size_t)(r.end - r.p));
	if (!r.p)
		return -EINVAL;
	r.p++;
	if (aug[0] && aug[0] != 'z')
		return -EINVAL; /* "eh" and other pre-z forms: no way to find the data's end */
	if (version == 4) {
		c->addr_size = (uint8_t)rd_fixed(&r, 1);
		if (rd_fixed(&r, 1) != 0 || c->addr_size != 8)
			return -EINVAL;
	}
	c->code_align = rd_uleb(&r);
	c->data_align = rd_sleb(&r);
	c->ra_reg = version == 1 ? rd_fixed(&r, 1) : rd_uleb(&r);
	if (r.bad || c->code_align == 0)
		return -EINVAL;
	if (aug[0] == 'z') {
		c->has_z = 1;
		err = cie_aug_data(sec, &r, aug, c);
		if (err)
			return err;
	}
	c->insns = r.p;
	c->insns_end = r.end;
	return 0;
}

/* Parses the FDE at E (its CIE in C) far enough to know its range and
 * where its instructions are. */
static int fde_parse(const struct cfi_section *sec, const struct entry *e, const struct cie *c,
		     uint64_t *start, uint64_t *range, const uint8_t **insns)
{
	struct reader r = { e->body, e->end, 0 };
	uint64_t auglen;

	*start = rd_ptr(&r, c->fde_enc, rd_addr(sec, &r), 0);
	*range = rd_ptr(&r, c->fde_enc & PE_FORMAT, 0, 0);
	if (c->has_z) {
		auglen = rd_uleb(&r);
		if (auglen > (uint64_t)(r.end - r.p))
			return -EINVAL;
		r.p += auglen;
	}
	if (r.bad || *start + *range < *start)
		return -EINVAL;
	*insns = r.p;
	return 0;
}

/* Keeps the last CIE parsed: nearly every FDE of an object shares one. */
struct cie_cache {
	struct cie cie;
	int valid;
};

static const struct cie *cie_get(const struct cfi_section *sec, struct cie_cache *cc, size_t off)
{
	if (cc->valid && cc->cie.offset == off)
		return &cc->cie;
	cc->valid = cie_parse(sec, off, &cc->cie) == 0;
	return cc->valid ? &cc->cie : NULL;
}

static int fde_at(const struct cfi_section *sec, struct cie_cache *cc, size_t off,
		  struct cfi_fde *f)
{
	const struct cie *c;
	const uint8_t *insns;
	struct entry e;
	uint64_t start, range;

	if (entry_read(sec, off, &e) || e.is_cie || e.cie_offset >= sec->size)
		return -EINVAL;
	c = cie_get(sec, cc, e.cie_offset);
	if (!c || fde_parse(sec, &e, c, &start, &range, &insns))
		return -EINVAL;
	f->start = start;
	f->end = start + range;
	f->offset = off;
	return 0;
}

static int fde_push(struct cfi_fde **fdes, size_t *n, size_t *cap, const struct cfi_fde *f)
{
	struct cfi_fde *grown;
	size_t ncap;

	if (*n == *cap) {
		ncap = *cap ? *cap * 2 : 256;
		grown = realloc(*fdes, ncap * sizeof(**fdes));
		if (!grown)
			return -ENOMEM;
		*fdes = grown;
		*cap = ncap;
	}
	(*fdes)[(*n)++] = *f;
	return 0;
}

static int list_by_scan(const struct cfi_section *sec, uint8_t source, struct cfi_fde **fdes,
			size_t *n, size_t *cap, size_t *bad)
{
	struct cie_cache cc = { .valid = 0 };
	struct cfi_fde f = { .source = source };
	struct entry e;
	size_t off = 0;
	int err;

	for (;;) {
		err = entry_read(sec, off, &e);
		if (err == 1)
			return 0;
		if (err) {
			(*bad)++; /* lengths are broken: nothing after this can be found */
			return 0;
		}
		off = e.next;
		if (e.is_cie)
			continue;
		if (fde_at(sec, &cc, e.offset, &f)) {
			(*bad)++;
			continue;
		}
		err = fde_push(fdes, n, cap, &f);
		if (err)
			return err;
	}
}

/* Uses .eh_frame_hdr's binary-search table as the FDE list.  Returns 1
 * when the header is not usable (the caller scans instead). */
static int list_by_hdr(const struct cfi_section *sec, const uint8_t *hdr, size_t hdr_size,
		       uint64_t hdr_addr, uint8_t source, struct cfi_fde **fdes, size_t *n,
		       size_t *cap, size_t *bad)
{
	struct reader r = { hdr, hdr + hdr_size, 0 };
	struct cie_cache cc = { .valid = 0 };
	struct cfi_fde f = { .source = source };
	uint8_t ptr_enc, count_enc, table_enc;
	uint64_t frame, count, i, loc, addr, prev = 0;
	size_t first = *n;
	int err;

	if (rd_fixed(&r, 1) != 1)
		return 1;
	ptr_enc = (uint8_t)rd_fixed(&r, 1);
	count_enc = (uint8_t)rd_fixed(&r, 1);
	table_enc = (uint8_t)rd_fixed(&r, 1);
	if (r.bad || ptr_enc == PE_OMIT || count_enc == PE_OMIT || table_enc != (PE_datarel | PE_sdata4))
		return 1;
	frame = rd_ptr(&r, ptr_enc, hdr_addr + (uint64_t)(r.p - hdr), hdr_addr);
	count = rd_ptr(&r, count_enc, hdr_addr + (uint64_t)(r.p - hdr), hdr_addr);
	if (r.bad || frame != sec->addr || count > (uint64_t)(r.end - r.p) / 8)
		return 1;
	for (i = 0; i < count; i++) {
		loc = rd_ptr(&r, table_enc, 0, hdr_addr);
		addr = rd_ptr(&r, table_enc, 0, hdr_addr);
		if (i && loc < prev)
			goto unusable; /* unsorted: the runtime could not search it either */
		prev = loc;
		if (addr < sec->addr || addr - sec->addr >= sec->size ||
		    fde_at(sec, &cc, (size_t)(addr - sec->addr), &f) || f.start != loc) {
			(*bad)++;
			continue;
		}
		err = fde_push(fdes, n, cap, &f);
		if (err)
			return err;
	}
	return 0;
unusable:
	*n = first;
	return 1;
}

int cfi_hdr_frame_addr(const uint8_t *hdr, size_t hdr_size, uint64_t hdr_addr, uint64_t *frame)
{
	struct reader r = { hdr, hdr + hdr_size, 0 };
	uint8_t ptr_enc;

	if (rd_fixed(&r, 1) != 1)
		return -EINVAL; /* version 1 is the only one there is */
	ptr_enc = (uint8_t)rd_fixed(&r, 1);
	rd_fixed(&r, 2); /* the count's and the search table's encodings */
	if (r.bad || ptr_enc == PE_OMIT)
		return -EINVAL;
	*frame = rd_ptr(&r, ptr_enc, hdr_addr + (uint64_t)(r.p - hdr), hdr_addr);
	return r.bad ? -EINVAL : 0;
}

int cfi_list_fdes(const struct cfi_section *sec, const uint8_t *hdr, size_t hdr_size,
		  uint64_t hdr_addr, uint8_t source, struct cfi_fde **fdes, size_t *n,
		  size_t *cap, size_t *bad)
{
	size_t bad_hdr = 0;
	int err;

	if (sec->is_eh && hdr) {
		err = list_by_hdr(sec, hdr, hdr_size, hdr_addr, source, fdes, n, cap, &bad_hdr);
		if (err <= 0) {
			*bad += bad_hdr;
			return err;
		}
	}
	return list_by_scan(sec, source, fdes, n, cap, bad);
}

/* --- The CFA program interpreter --- */

enum rule_kind { RK_SAME, RK_UNDEF, RK_OFFSET, RK_VAL_OFFSET, RK_REG, RK_EXPR, RK_VAL_EXPR };

struct reg_rule {
	uint8_t kind;
	int64_t off;
	const uint8_t *expr;
	uint64_t len;
};

struct cfa_rule {
	int is_expr;
	uint64_t reg;
	int64_t off;
	const uint8_t *expr;
	uint64_t len;
};

/* Only the registers the walker can use are tracked: the CFA, rbp, rbx and
 * the return address column.  Rules for other registers are parsed and
 * dropped.  A CFA that became undefined (def_cfa_register or
 * def_cfa_offset applied to an expression: invalid DWARF, which libdw
 * refuses too) has is_expr == CFA_INVALID. */
#define CFA_INVALID 2

struct frame_state {
	struct cfa_rule cfa;
	struct reg_rule rbp; /* aarch64: x29 */
	struct reg_rule rbx; /* aarch64: not tracked */
	struct reg_rule ra;
	uint8_t ra_signed;   /* aarch64: DW_CFA_AARCH64_negate_ra_state's toggle */
};

struct interp {
	const struct cfi_section *sec;
	const struct cie *cie;
	const struct cfi_fde *fde;
	struct frame_state st;
	struct frame_state init; /* after the CIE's instructions: DW_CFA_restore's target */
	struct frame_state *stack;
	size_t depth;
	uint64_t loc;
	cfi_row_fn fn;
	void *arg;
};

static int expr_is(const uint8_t *e, uint64_t len, const uint8_t *want, size_t wlen)
{
	return len == wlen && (wlen == 0 || memcmp(e, want, wlen) == 0);
}

/* Matches "OP sleb" (one breg op, optionally followed by TAIL) and returns
 * the offset in *OFF. */
static int expr_breg(const uint8_t *e, uint64_t len, uint8_t op, const uint8_t *tail,
		     size_t tlen, int64_t *off)
{
	struct reader r = { e, e + len, 0 };

	if (len < 2 || e[0] != op)
		return 0;
	r.p++;
	*off = rd_sleb(&r);
	if (r.bad)
		return 0;
	return expr_is(r.p, (uint64_t)(r.end - r.p), tail, tlen);
}

static int fits32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

/* glibc's __restore_rt: CFA = *(rsp + 160), rip at rsp + 168, rbp at rsp + 120. */
static int signal_rules_match(const struct frame_state *s)
{
	static const uint8_t deref[] = { OP_deref };
	int64_t off;

	if (!s->cfa.is_expr || !expr_breg(s->cfa.expr, s->cfa.len, OP_breg7, deref, 1, &off) ||
	    off != UNWIND_SIGFRAME_RSP)
		return 0;
	if (s->ra.kind != RK_EXPR || !expr_breg(s->ra.expr, s->ra.len, OP_breg7, NULL, 0, &off) ||
	    off != UNWIND_SIGFRAME_RIP)
		return 0;
	if (s->rbp.kind != RK_EXPR || !expr_breg(s->rbp.expr, s->rbp.len, OP_breg7, NULL, 0, &off) ||
	    off != UNWIND_SIGFRAME_RBP)
		return 0;
	return 1;
}

static void cfa_to_rule(const struct cfa_rule *c, struct unwind_rule *r)
{
	static const uint8_t deref[] = { OP_deref };
	static const uint8_t plt_tail[2][8] = {
		{ OP_breg16, 0, OP_lit15, OP_and, OP_lit11, OP_ge, OP_lit3, OP_shl },
		{ OP_breg16, 0, OP_lit15, OP_and, OP_lit10, OP_ge, OP_lit3, OP_shl },
	};
	uint8_t tail[9];
	int64_t off = c->off;
	int i;

	r->cfa_type = UNWIND_CFA_UNSUPPORTED;
	if (c->is_expr == CFA_INVALID) {
		return;
	} else if (!c->is_expr) {
		if (c->reg == REG_RSP)
			r->cfa_type = UNWIND_CFA_RSP;
		else if (c->reg == REG_RBP)
			r->cfa_type = UNWIND_CFA_RBP;
		else if (c->reg == REG_RBX)
			r->cfa_type = UNWIND_CFA_RBX;
	} else if (expr_breg(c->expr, c->len, OP_breg7, NULL, 0, &off)) {
		r->cfa_type = UNWIND_CFA_RSP;
	} else if (expr_breg(c->expr, c->len, OP_breg6, NULL, 0, &off)) {
		r->cfa_type = UNWIND_CFA_RBP;
	} else if (expr_breg(c->expr, c->len, OP_breg6, deref, 1, &off)) {
		r->cfa_type = UNWIND_CFA_DEREF_RBP;
	} else {
		for (i = 0; i < 2; i++) {
			memcpy(tail, plt_tail[i], 8);
			tail[8] = OP_plus;
			if (expr_breg(c->expr, c->len, OP_breg7, tail, 9, &off)) {
				r->cfa_type = i == 0 ? UNWIND_CFA_PLT11 : UNWIND_CFA_PLT10;
				break;
			}
		}
	}
	if (r->cfa_type == UNWIND_CFA_UNSUPPORTED || !fits32(off)) {
		r->cfa_type = UNWIND_CFA_UNSUPPORTED;
		return;
	}
	r->cfa_off = (int32_t)off;
}

/* Where a callee-saved register (rbp or rbx) of the caller is. */
static void reg_to_rule(const struct reg_rule *b, uint8_t *type, int32_t *out_off)
{
	int64_t off = 0;

	switch (b->kind) {
	case RK_SAME:
		*type = UNWIND_RBP_SAME;
		return;
	case RK_UNDEF:
		*type = UNWIND_RBP_UNDEFINED;
		return;
	case RK_OFFSET:
		off = b->off;
		*type = UNWIND_RBP_CFA;
		break;
	case RK_EXPR:
		if (expr_breg(b->expr, b->len, OP_breg6, NULL, 0, &off)) {
			*type = UNWIND_RBP_AT_RBP;
			break;
		}
		/* fall through */
	default:
		*type = UNWIND_RBP_UNSUPPORTED;
		return;
	}
	if (!fits32(off)) {
		*type = UNWIND_RBP_UNSUPPORTED;
		return;
	}
	*out_off = (int32_t)off;
}

/* aarch64's rule: CFA from sp or x29, x29's rule, the return address's
 * (in x30 or saved at CFA + N), its signing; any other form unsupported
 * (signal frames are the vDSO's there, and not walked yet). */
static void state_to_rule_a64(const struct frame_state *s, int signal, struct unwind_rule *r)
{
	if (s->ra.kind == RK_UNDEF && !signal) {
		r->cfa_type = UNWIND_CFA_END;
		return;
	}
	r->cfa_type = UNWIND_CFA_UNSUPPORTED;
	if (signal || s->cfa.is_expr || !fits32(s->cfa.off) || (s->cfa.reg != A64_SP && s->cfa.reg != A64_X29))
		return;
	if (s->ra.kind == RK_SAME) {
		r->rbx_type = UNWIND_RBP_SAME;
	} else if (s->ra.kind == RK_OFFSET && fits32(s->ra.off)) {
		r->rbx_type = UNWIND_RBP_CFA;
		r->rbx_off = (int32_t)s->ra.off;
	} else {
		return;
	}
	r->cfa_type = s->cfa.reg == A64_SP ? UNWIND_CFA_RSP : UNWIND_CFA_RBP;
	r->cfa_off = (int32_t)s->cfa.off;
	if (s->rbp.kind == RK_EXPR) /* x86's rbp-relative save; none on aarch64 */
		r->rbp_type = UNWIND_RBP_UNSUPPORTED;
	else
		reg_to_rule(&s->rbp, &r->rbp_type, &r->rbp_off);
	r->flags = s->ra_signed ? UNWIND_RULE_RA_SIGNED : 0;
}

/* Translates the interpreter's state into the walker's rule for ARCH.
 * Rules are canonical (unused fields zero) so that equal meanings
 * deduplicate. */
static void state_to_rule(const struct frame_state *s, uint8_t arch, int signal, struct unwind_rule *r)
{
	memset(r, 0, sizeof(*r));
	if (arch == UNWIND_ARCH_AARCH64) {
		state_to_rule_a64(s, signal, r);
		return;
	}
	if (signal) {
		r->cfa_type = signal_rules_match(s) ? UNWIND_CFA_SIGNAL : UNWIND_CFA_UNSUPPORTED;
		return;
	}
	if (s->ra.kind == RK_UNDEF) {
		r->cfa_type = UNWIND_CFA_END;
		return;
	}
	if (s->ra.kind != RK_OFFSET || s->ra.off != -8) {
		r->cfa_type = UNWIND_CFA_UNSUPPORTED;
		return;
	}
	cfa_to_rule(&s->cfa, r);
	if (r->cfa_type == UNWIND_CFA_UNSUPPORTED) {
		r->cfa_off = 0;
		return;
	}
	reg_to_rule(&s->rbp, &r->rbp_type, &r->rbp_off);
	reg_to_rule(&s->rbx, &r->rbx_type, &r->rbx_off);
}

static int interp_emit(struct interp *in, uint64_t to)
{
	struct unwind_rule rule;
	uint64_t from = in->loc;

	if (to > in->fde->end)
		to = in->fde->end;
	if (to <= from)
		return 0;
	state_to_rule(&in->st, in->sec->arch, in->cie->signal, &rule);
	in->loc = to;
	return in->fn(from, to, &rule, in->arg);
}

/* The slot of S that tracks REG, or NULL: the return address column, the
 * frame pointer (rbp, x29) and on x86_64 rbx. */
static struct reg_rule *state_reg(const struct interp *in, struct frame_state *s, uint64_t reg)
{
	bool a64 = in->sec->arch == UNWIND_ARCH_AARCH64;

	if (reg == in->cie->ra_reg)
		return &s->ra;
	if (reg == (a64 ? A64_X29 : REG_RBP))
		return &s->rbp;
	if (reg == (a64 ? REG_NONE : REG_RBX))
		return &s->rbx;
	return NULL;
}

static struct reg_rule *interp_reg(struct interp *in, uint64_t reg)
{
	return state_reg(in, &in->st, reg);
}

static const struct reg_rule *init_reg(struct interp *in, uint64_t reg)
{
	return state_reg(in, &in->init, reg);
}

static void set_reg(struct interp *in, uint64_t reg, uint8_t kind, int64_t off,
		    const uint8_t *expr, uint64_t len)
{
	struct reg_rule *rr = interp_reg(in, reg);

	if (!rr)
		return;
	rr->kind = kind;
	rr->off = off;
	rr->expr = expr;
	rr->len = len;
}

static int interp_push(struct interp *in)
{
	struct frame_state *grown;

	if (in->depth >= CFI_MAX_STATE_DEPTH)
		return -EINVAL;
	grown = realloc(in->stack, (in->depth + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	in->stack = grown;
	in->stack[in->depth++] = in->st;
	return 0;
}

static int interp_advance(struct interp *in, uint64_t delta)
{
	uint64_t to;

	if (__builtin_mul_overflow(delta, in->cie->code_align, &delta) ||
	    __builtin_add_overflow(in->loc, delta, &to))
		return -EINVAL;
	return interp_emit(in, to);
}

static int block(struct reader *r, const uint8_t **expr, uint64_t *len)
{
	*len = rd_uleb(r);
	if (r->bad || *len > (uint64_t)(r->end - r->p))
		return -EINVAL;
	*expr = r->p;
	r->p += *len;
	return 0;
}

/* V times the data alignment factor; an overflow marks R bad (a hostile
 * FDE), the step then fails. */
static int64_t factored(struct reader *r, int64_t v, int64_t da)
{
	int64_t out;

	if (__builtin_mul_overflow(v, da, &out)) {
		r->bad = 1;
		return 0;
	}
	return out;
}

static int64_t negated(struct reader *r, int64_t v)
{
	if (v == INT64_MIN) {
		r->bad = 1;
		return 0;
	}
	return -v;
}

/* Executes one instruction.  Returns 0, a negative errno, or the row
 * callback's non-zero value. */
static int interp_step(struct interp *in, struct reader *r, int in_cie)
{
	const struct reg_rule *ir;
	const uint8_t *expr;
	int64_t da = in->cie->data_align;
	uint64_t reg, len, to;
	uint8_t op = (uint8_t)rd_fixed(r, 1);

	switch (op & 0xc0) {
	case 0x40: /* DW_CFA_advance_loc */
		return in_cie ? -EINVAL : interp_advance(in, op & 0x3f);
	case 0x80: /* DW_CFA_offset */
		set_reg(in, op & 0x3f, RK_OFFSET, factored(r, (int64_t)rd_uleb(r), da), NULL, 0);
		return 0;
	case 0xc0: /* DW_CFA_restore */
		ir = init_reg(in, op & 0x3f);
		if (ir && !in_cie)
			*interp_reg(in, op & 0x3f) = *ir;
		return 0;
	}
	switch (op) {
	case 0x00: /* nop */
		return 0;
	case 0x01: /* set_loc */
		to = rd_ptr(r, in->cie->fde_enc, rd_addr(in->sec, r), 0);
		if (in_cie || r->bad || to < in->loc)
			return -EINVAL;
		return interp_emit(in, to);
	case 0x02:
		return in_cie ? -EINVAL : interp_advance(in, rd_fixed(r, 1));
	case 0x03:
		return in_cie ? -EINVAL : interp_advance(in, rd_fixed(r, 2));
	case 0x04:
		return in_cie ? -EINVAL : interp_advance(in, rd_fixed(r, 4));
	case 0x05: /* offset_extended */
		reg = rd_uleb(r);
		set_reg(in, reg, RK_OFFSET, factored(r, (int64_t)rd_uleb(r), da), NULL, 0);
		return 0;
	case 0x06: /* restore_extended */
		reg = rd_uleb(r);
		ir = init_reg(in, reg);
		if (ir && !in_cie)
			*interp_reg(in, reg) = *ir;
		return 0;
	case 0x07: /* undefined */
		set_reg(in, rd_uleb(r), RK_UNDEF, 0, NULL, 0);
		return 0;
	case 0x08: /* same_value */
		set_reg(in, rd_uleb(r), RK_SAME, 0, NULL, 0);
		return 0;
	case 0x09: /* register */
		reg = rd_uleb(r);
		set_reg(in, reg, RK_REG, (int64_t)rd_uleb(r), NULL, 0);
		return 0;
	case 0x0a: /* remember_state */
		return interp_push(in);
	case 0x0b: /* restore_state */
		if (in->depth == 0)
			return -EINVAL;
		in->st = in->stack[--in->depth];
		return 0;
	case 0x0c: /* def_cfa */
		in->st.cfa.is_expr = 0;
		in->st.cfa.reg = rd_uleb(r);
		in->st.cfa.off = (int64_t)rd_uleb(r);
		return 0;
	case 0x0d: /* def_cfa_register */
		in->st.cfa.reg = rd_uleb(r);
		if (in->st.cfa.is_expr)
			in->st.cfa.is_expr = CFA_INVALID;
		return 0;
	case 0x0e: /* def_cfa_offset */
		in->st.cfa.off = (int64_t)rd_uleb(r);
		if (in->st.cfa.is_expr)
			in->st.cfa.is_expr = CFA_INVALID;
		return 0;
	case 0x0f: /* def_cfa_expression */
		in->st.cfa.is_expr = 1;
		return block(r, &in->st.cfa.expr, &in->st.cfa.len);
	case 0x10: /* expression */
	case 0x16: /* val_expression */
		reg = rd_uleb(r);
		if (block(r, &expr, &len))
			return -EINVAL;
		set_reg(in, reg, op == 0x10 ? RK_EXPR : RK_VAL_EXPR, 0, expr, len);
		return 0;
	case 0x11: /* offset_extended_sf */
		reg = rd_uleb(r);
		set_reg(in, reg, RK_OFFSET, factored(r, rd_sleb(r), da), NULL, 0);
		return 0;
	case 0x12: /* def_cfa_sf */
		in->st.cfa.is_expr = 0;
		in->st.cfa.reg = rd_uleb(r);
		in->st.cfa.off = factored(r, rd_sleb(r), da);
		return 0;
	case 0x13: /* def_cfa_offset_sf */
		in->st.cfa.off = factored(r, rd_sleb(r), da);
		if (in->st.cfa.is_expr)
			in->st.cfa.is_expr = CFA_INVALID;
		return 0;
	case 0x14: /* val_offset */
		reg = rd_uleb(r);
		set_reg(in, reg, RK_VAL_OFFSET, factored(r, (int64_t)rd_uleb(r), da), NULL, 0);
		return 0;
	case 0x15: /* val_offset_sf */
		reg = rd_uleb(r);
		set_reg(in, reg, RK_VAL_OFFSET, factored(r, rd_sleb(r), da), NULL, 0);
		return 0;
	case CFA_AARCH64_negate_ra_state: /* SPARC's window_save elsewhere */
		if (in->sec->arch != UNWIND_ARCH_AARCH64)
			return -EINVAL;
		in->st.ra_signed ^= 1;
		return 0;
	case 0x2e: /* GNU_args_size */
		rd_uleb(r);
		return 0;
	case 0x2f: /* GNU_negative_offset_extended */
		reg = rd_uleb(r);
		set_reg(in, reg, RK_OFFSET, negated(r, factored(r, (int64_t)rd_uleb(r), da)), NULL, 0);
		return 0;
	default:
		return -EINVAL;
	}
}

static int interp_run(struct interp *in, const uint8_t *p, const uint8_t *end, int in_cie)
{
	struct reader r = { p, end, 0 };
	int err;

	while (r.p < r.end) {
		err = interp_step(in, &r, in_cie);
		if (err)
			return err;
		if (r.bad)
			return -EINVAL;
	}
	return 0;
}

/* The psABI's state before any CIE instruction, as libdw's backends and
 * the kernel's expectations have it; x86_64: CFA = rsp + 8, return
 * address at CFA - 8, rbp preserved. */
static void state_init(struct frame_state *s, uint8_t arch)
{
	memset(s, 0, sizeof(*s));
	if (arch == UNWIND_ARCH_AARCH64) {
		/* AAPCS64: CFA = sp, x29 and x30 (the return address) as they
		 * are, as elfutils' aarch64 backend and gcc's CIEs have it */
		s->cfa.reg = A64_SP;
		s->rbp.kind = RK_SAME;
		s->rbx.kind = RK_SAME;
		s->ra.kind = RK_SAME;
		return;
	}
	s->cfa.reg = REG_RSP;
	s->cfa.off = 8;
	s->rbp.kind = RK_SAME;
	s->rbx.kind = RK_SAME;
	s->ra.kind = RK_OFFSET;
	s->ra.off = -8;
}

int cfi_fde_rows(const struct cfi_section *sec, const struct cfi_fde *fde, cfi_row_fn fn, void *arg)
{
	struct interp in = { .sec = sec, .fde = fde, .fn = fn, .arg = arg };
	const uint8_t *insns;
	struct cie cie;
	struct entry e;
	uint64_t start, range;
	int err;

	if (entry_read(sec, fde->offset, &e) || e.is_cie || e.cie_offset >= sec->size)
		return -EINVAL;
	if (cie_parse(sec, e.cie_offset, &cie))
		return -EINVAL;
	if (fde_parse(sec, &e, &cie, &start, &range, &insns))
		return -EINVAL;
	in.cie = &cie;
	in.loc = fde->start;
	state_init(&in.st, sec->arch);
	err = interp_run(&in, cie.insns, cie.insns_end, 1);
	if (err)
		goto out;
	in.init = in.st;
	in.depth = 0; /* a CIE's remember_state does not carry into FDEs */
	err = interp_run(&in, insns, e.end, 0);
	if (err)
		goto out;
	err = interp_emit(&in, fde->end);
out:
	free(in.stack);
	return err;
}
