/* The oracle for the table compiler: asks libdw (an independent DWARF CFI
 * interpreter) what rule holds at each span of a compiled table, translates
 * libdw's answer into the rule the walker would need, and reports every
 * address where the two differ.  Used by `dwleak tables --verify` and tests. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>

#include "elf_image.h"
#include "table_verify.h"

/* x86_64 DWARF register numbers (System V psABI, figure 3.36). */
#define DWREG_RBX 3
#define DWREG_RBP 6
#define DWREG_RSP 7
#define DWREG_RA 16 /* return address column */

/* aarch64's (AAPCS64 DWARF). */
#define DWREG_A64_X29 29
#define DWREG_A64_X30 30 /* the link register, the return address column */
#define DWREG_A64_SP 31

#define VERIFY_TEXT_MAX 512 /* rule text plus libdw's raw ops */
#define VERIFY_ERROR_MAX 256

static __thread char verify_error[VERIFY_ERROR_MAX];

static int verify_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(verify_error, sizeof(verify_error), fmt, ap);
	va_end(ap);
	return err;
}

const char *table_verify_last_error(void)
{
	return verify_error[0] ? verify_error : "no error";
}

/*
 * How libdw 0.188 answers, learned by experiment on libc, gcc -O2 output and
 * glibc's __restore_rt (and matching libdw/frame_register.c):
 *
 * dwarf_cfi_addrframe() fails with "no matching address range" when no FDE
 * covers the address; libdw.h exports no DWARF_E_* codes, so that case is
 * recognised by its (untranslated: only cli/ could set a locale) message.
 *
 * dwarf_frame_cfa():
 *   DW_CFA_def_cfa reg,off      -> 1 op: DW_OP_bregx number=reg number2=off
 *   DW_CFA_def_cfa_expression E -> E itself, e.g. DW_OP_breg7 160; DW_OP_deref
 *                                  (breg0..31 carry the offset in number)
 *
 * dwarf_frame_register(), always returning 0 for a valid regno:
 *   undefined (DW_CFA_undefined, or not mentioned and not same-value in the
 *             ABI's initial rules)  -> nops 0, *ops == ops_mem
 *   same value (DW_CFA_same_value, or x86_64 ABI default for rbp)
 *                                  -> nops 0, *ops == NULL
 *   offset(N)                      -> *ops == ops_mem: DW_OP_call_frame_cfa,
 *             then DW_OP_plus_uconst number=(Dwarf_Word)N when N != 0
 *             (so the return address is CFA; plus_uconst -8)
 *   val_offset(N)                  -> the same followed by DW_OP_stack_value
 *             (rsp's rule: DW_OP_call_frame_cfa; DW_OP_stack_value)
 *   expression(E)                  -> *ops internal (never ops_mem), 1 + len(E)
 *             ops: a synthetic DW_OP_call_frame_cfa (offset field
 *             (Dwarf_Word)-1) because the rule pushes the CFA, then E
 *             (__restore_rt's rbp: DW_OP_call_frame_cfa; DW_OP_breg7 120)
 */
#define LIBDW_NO_MATCH_MSG "no matching address range"

/* The CFI sources in the compiler's order of precedence. */
enum cfi_source {
	SRC_EH,		/* the object's .eh_frame */
	SRC_DEBUG,	/* the object's .debug_frame */
	SRC_SEPARATE,	/* the separate debug file's .debug_frame */
	SRC_COUNT,
};

/* libdw handles over the object and its debug file; any may be NULL.
 * cfi[SRC_EH] is ours to end, the others belong to their Dwarf. */
struct libdw_sources {
	uint32_t arch; /* enum unwind_arch of the table checked */
	Elf *elf;
	Dwarf *dwarf;
	int sep_fd;
	Elf *sep_elf;
	Dwarf *sep_dwarf;
	Dwarf_CFI *cfi[SRC_COUNT];
};

/* One register's rule as dwarf_frame_register() gives it.  OPS may point
 * into MEM, so a reg_loc must not be copied once filled. */
struct reg_loc {
	int rc;
	Dwarf_Op mem[3];
	Dwarf_Op *ops;
	size_t nops;
};

enum reg_kind {
	REG_ERROR,	/* libdw failed */
	REG_UNDEFINED,
	REG_SAME,
	REG_CFA_OFFSET, /* offset(N): saved at CFA + N */
	REG_EXPR_BREG,	/* expression(DW_OP_bregR N): saved at R + N */
	REG_OTHER,
};

/* What libdw says at one address, as the rule it implies. */
struct oracle_answer {
	struct unwind_rule rule;
	bool sigframe_unexpected; /* a signal frame laid out unlike rt_sigframe */
	bool libdw_error;	  /* libdw could not decode the CFI there */
	char raw[VERIFY_TEXT_MAX];
};

struct verify_ctx {
	const struct unwind_table *t;
	struct libdw_sources *src;
	struct table_verify_result *res;
	table_verify_mismatch_fn on_mismatch;
	void *arg;
	uint64_t prev_end; /* end of the previous span; 0 before the first */
};

/* Appends to BUF (LEN bytes, NUL-terminated) without overflowing it. */
static void text_append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* True for DW_OP_breg0..31 and DW_OP_bregx; stores register and offset. */
static bool op_breg(const Dwarf_Op *op, unsigned int *reg, int64_t *off)
{
	if (op->atom >= DW_OP_breg0 && op->atom <= DW_OP_breg31) {
		*reg = op->atom - DW_OP_breg0;
		*off = (int64_t)op->number;
		return true;
	}
	if (op->atom == DW_OP_bregx) {
		*reg = (unsigned int)op->number;
		*off = (int64_t)op->number2;
		return true;
	}
	return false;
}

static bool op_is_breg(const Dwarf_Op *op, unsigned int reg, int64_t off)
{
	unsigned int r;
	int64_t o;

	return op_breg(op, &r, &o) && r == reg && o == off;
}

static bool fits_s32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

static void ops_format(char *buf, size_t len, const Dwarf_Op *ops, size_t nops)
{
	unsigned int reg;
	int64_t off;
	size_t i;

	for (i = 0; i < nops; i++) {
		const Dwarf_Op *op = &ops[i];
		const char *sep = i ? "; " : "";

		if (op_breg(op, &reg, &off))
			text_append(buf, len, "%sbreg%u %lld", sep, reg, (long long)off);
		else if (op->atom >= DW_OP_lit0 && op->atom <= DW_OP_lit31)
			text_append(buf, len, "%slit%u", sep, op->atom - DW_OP_lit0);
		else if (op->atom == DW_OP_plus_uconst)
			text_append(buf, len, "%splus_uconst %lld", sep, (long long)op->number);
		else if (op->atom == DW_OP_call_frame_cfa)
			text_append(buf, len, "%scall_frame_cfa", sep);
		else if (op->atom == DW_OP_deref)
			text_append(buf, len, "%sderef", sep);
		else if (op->atom == DW_OP_stack_value)
			text_append(buf, len, "%sstack_value", sep);
		else
			text_append(buf, len, "%sop%#x", sep, op->atom);
	}
}

static void reg_format(char *buf, size_t len, const char *name, const struct reg_loc *r)
{
	text_append(buf, len, " %s=", name);
	if (r->rc != 0)
		text_append(buf, len, "error");
	else if (r->nops == 0)
		text_append(buf, len, r->ops ? "undefined" : "same");
	else
		ops_format(buf, len, r->ops, r->nops);
}

static void reg_fetch(Dwarf_Frame *frame, int regno, struct reg_loc *r)
{
	r->ops = NULL;
	r->nops = 0;
	r->rc = dwarf_frame_register(frame, regno, r->mem, &r->ops, &r->nops);
}

/* Classifies R (see the comment on libdw's encodings); *REG and *OFF get the
 * base register and offset of REG_EXPR_BREG, *OFF the N of REG_CFA_OFFSET. */
static enum reg_kind reg_classify(const struct reg_loc *r, unsigned int *reg, int64_t *off)
{
	*reg = 0;
	*off = 0;
	if (r->rc != 0)
		return REG_ERROR;
	if (r->nops == 0)
		return r->ops ? REG_UNDEFINED : REG_SAME;
	if (r->ops[0].atom != DW_OP_call_frame_cfa)
		return REG_OTHER;
	if (r->ops == r->mem) {
		if (r->nops == 1)
			return REG_CFA_OFFSET;
		if (r->nops == 2 && r->ops[1].atom == DW_OP_plus_uconst) {
			*off = (int64_t)r->ops[1].number;
			return REG_CFA_OFFSET;
		}
		return REG_OTHER;
	}
	if (r->nops == 2 && op_breg(&r->ops[1], reg, off))
		return REG_EXPR_BREG;
	return REG_OTHER;
}

static bool reg_is_expr_breg(const struct reg_loc *r, unsigned int reg, int64_t off)
{
	unsigned int r_reg;
	int64_t r_off;

	return reg_classify(r, &r_reg, &r_off) == REG_EXPR_BREG && r_reg == reg && r_off == off;
}

/* The .plt CFA expression: rsp + A + ((rip & 15) >= K ? 8 : 0), K 11 or 10. */
static bool cfa_is_plt(const Dwarf_Op *ops, size_t nops, int64_t *off, unsigned int *k)
{
	static const uint8_t tail[] = { DW_OP_and, 0, DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus };
	size_t i;

	if (nops != 9 || !op_breg(&ops[0], k, off) || *k != DWREG_RSP ||
	    !op_is_breg(&ops[1], DWREG_RA, 0) || ops[2].atom != DW_OP_lit15)
		return false;
	if (ops[4].atom != DW_OP_lit11 && ops[4].atom != DW_OP_lit10)
		return false;
	*k = ops[4].atom - DW_OP_lit0;
	for (i = 0; i < sizeof(tail); i++)
		if (tail[i] && ops[3 + i].atom != tail[i])
			return false;
	return true;
}

/* The CFA rule libdw's CFA expression implies, into RULE's cfa fields. */
static void cfa_translate(const Dwarf_Op *ops, size_t nops, struct unwind_rule *rule)
{
	unsigned int reg;
	int64_t off = 0;

	rule->cfa_type = UNWIND_CFA_UNSUPPORTED;
	if (nops == 1 && op_breg(&ops[0], &reg, &off)) {
		if (reg == DWREG_RSP)
			rule->cfa_type = UNWIND_CFA_RSP;
		else if (reg == DWREG_RBP)
			rule->cfa_type = UNWIND_CFA_RBP;
		else if (reg == DWREG_RBX)
			rule->cfa_type = UNWIND_CFA_RBX;
	} else if (nops == 2 && op_breg(&ops[0], &reg, &off) && reg == DWREG_RBP &&
		   ops[1].atom == DW_OP_deref) {
		rule->cfa_type = UNWIND_CFA_DEREF_RBP;
	} else if (cfa_is_plt(ops, nops, &off, &reg)) {
		rule->cfa_type = reg == 11 ? UNWIND_CFA_PLT11 : UNWIND_CFA_PLT10;
	}
	if (rule->cfa_type == UNWIND_CFA_UNSUPPORTED || !fits_s32(off)) {
		rule->cfa_type = UNWIND_CFA_UNSUPPORTED;
		return;
	}
	rule->cfa_off = (int32_t)off;
}

/* The caller's-register rule (rbp or rbx, same encoding) that libdw's
 * rule R implies, into *TYPE and *OUT_OFF. */
static void callee_saved_translate(const struct reg_loc *r, uint8_t *type, int32_t *out_off)
{
	unsigned int reg;
	int64_t off;

	switch (reg_classify(r, &reg, &off)) {
	case REG_SAME:
		*type = UNWIND_RBP_SAME;
		return;
	case REG_UNDEFINED:
		*type = UNWIND_RBP_UNDEFINED;
		return;
	case REG_CFA_OFFSET:
		*type = UNWIND_RBP_CFA;
		break;
	case REG_EXPR_BREG:
		*type = reg == DWREG_RBP ? UNWIND_RBP_AT_RBP : UNWIND_RBP_UNSUPPORTED;
		break;
	default:
		*type = UNWIND_RBP_UNSUPPORTED;
		return;
	}
	if (*type == UNWIND_RBP_UNSUPPORTED || !fits_s32(off)) {
		*type = UNWIND_RBP_UNSUPPORTED;
		return;
	}
	*out_off = (int32_t)off;
}

/* True when libdw's signal-frame rules are the rt_sigframe offsets the
 * walker hard-codes for UNWIND_CFA_SIGNAL. */
static bool sigframe_as_assumed(const Dwarf_Op *cfa, size_t ncfa, const struct reg_loc *ra,
				const struct reg_loc *rbp)
{
	return ncfa == 2 && op_is_breg(&cfa[0], DWREG_RSP, UNWIND_SIGFRAME_RSP) &&
	       cfa[1].atom == DW_OP_deref &&
	       reg_is_expr_breg(ra, DWREG_RSP, UNWIND_SIGFRAME_RIP) &&
	       reg_is_expr_breg(rbp, DWREG_RSP, UNWIND_SIGFRAME_RBP);
}

/* Starts ANS's raw text with libdw's frame: signal or not, its CFA. */
static void raw_begin(struct oracle_answer *ans, bool signalp, int cfa_rc, const Dwarf_Op *cfa, size_t ncfa)
{
	text_append(ans->raw, sizeof(ans->raw), "libdw:%s cfa=", signalp ? " signal" : "");
	if (cfa_rc != 0 || ncfa == 0)
		text_append(ans->raw, sizeof(ans->raw), "none");
	else
		ops_format(ans->raw, sizeof(ans->raw), cfa, ncfa);
}

/* Translates the frame libdw found into ANS (already zeroed). */
static void frame_translate(Dwarf_Frame *frame, struct oracle_answer *ans)
{
	struct reg_loc ra, rbp, rbx;
	Dwarf_Op *cfa = NULL;
	size_t ncfa = 0;
	Dwarf_Addr start, end;
	bool signalp = false;
	unsigned int reg;
	int64_t off;
	int cfa_rc;

	dwarf_frame_info(frame, &start, &end, &signalp);
	cfa_rc = dwarf_frame_cfa(frame, &cfa, &ncfa);
	reg_fetch(frame, DWREG_RA, &ra);
	reg_fetch(frame, DWREG_RBP, &rbp);
	reg_fetch(frame, DWREG_RBX, &rbx);

	raw_begin(ans, signalp, cfa_rc, cfa, ncfa);
	reg_format(ans->raw, sizeof(ans->raw), "ra", &ra);
	reg_format(ans->raw, sizeof(ans->raw), "rbp", &rbp);
	reg_format(ans->raw, sizeof(ans->raw), "rbx", &rbx);

	if (signalp) {
		ans->rule.cfa_type = UNWIND_CFA_SIGNAL;
		ans->sigframe_unexpected = !sigframe_as_assumed(cfa, ncfa, &ra, &rbp);
		return;
	}
	switch (reg_classify(&ra, &reg, &off)) {
	case REG_UNDEFINED:
		ans->rule.cfa_type = UNWIND_CFA_END;
		return;
	case REG_CFA_OFFSET:
		if (off == -8)
			break;
		/* fall through */
	default:
		ans->rule.cfa_type = UNWIND_CFA_UNSUPPORTED;
		return;
	}
	if (cfa_rc != 0 || ncfa == 0) {
		ans->rule.cfa_type = UNWIND_CFA_UNSUPPORTED;
		return;
	}
	cfa_translate(cfa, ncfa, &ans->rule);
	if (ans->rule.cfa_type == UNWIND_CFA_UNSUPPORTED)
		return;
	callee_saved_translate(&rbp, &ans->rule.rbp_type, &ans->rule.rbp_off);
	callee_saved_translate(&rbx, &ans->rule.rbx_type, &ans->rule.rbx_off);
}

/*
 * The same on aarch64 (unwind_format.h: the CFA from sp or x29, x29's rule
 * in rbp's fields, the return address's in rbx's).  libdw 0.188 takes
 * DW_CFA_AARCH64_negate_ra_state and keeps nothing of it, so a rule's
 * UNWIND_RULE_RA_SIGNED has no oracle here and is not compared.
 */
static void frame_translate_a64(Dwarf_Frame *frame, struct oracle_answer *ans)
{
	struct reg_loc ra, fp;
	Dwarf_Op *cfa = NULL;
	size_t ncfa = 0;
	Dwarf_Addr start, end;
	bool signalp = false;
	unsigned int reg, cfa_reg;
	int64_t off, cfa_off;
	enum reg_kind ra_kind;
	int cfa_rc;

	dwarf_frame_info(frame, &start, &end, &signalp);
	cfa_rc = dwarf_frame_cfa(frame, &cfa, &ncfa);
	reg_fetch(frame, DWREG_A64_X30, &ra);
	reg_fetch(frame, DWREG_A64_X29, &fp);

	raw_begin(ans, signalp, cfa_rc, cfa, ncfa);
	reg_format(ans->raw, sizeof(ans->raw), "x30", &ra);
	reg_format(ans->raw, sizeof(ans->raw), "x29", &fp);

	ra_kind = reg_classify(&ra, &reg, &off);
	if (!signalp && ra_kind == REG_UNDEFINED) {
		ans->rule.cfa_type = UNWIND_CFA_END;
		return;
	}
	ans->rule.cfa_type = UNWIND_CFA_UNSUPPORTED;
	if (signalp || cfa_rc != 0 || ncfa != 1 || !op_breg(&cfa[0], &cfa_reg, &cfa_off) ||
	    (cfa_reg != DWREG_A64_SP && cfa_reg != DWREG_A64_X29) || !fits_s32(cfa_off))
		return;
	if (ra_kind == REG_SAME) {
		ans->rule.rbx_type = UNWIND_RBP_SAME;
	} else if (ra_kind == REG_CFA_OFFSET && fits_s32(off)) {
		ans->rule.rbx_type = UNWIND_RBP_CFA;
		ans->rule.rbx_off = (int32_t)off;
	} else {
		return;
	}
	ans->rule.cfa_type = cfa_reg == DWREG_A64_SP ? UNWIND_CFA_RSP : UNWIND_CFA_RBP;
	ans->rule.cfa_off = (int32_t)cfa_off;
	if (reg_classify(&fp, &reg, &off) == REG_EXPR_BREG) /* x86's rbp-relative form only */
		ans->rule.rbp_type = UNWIND_RBP_UNSUPPORTED;
	else
		callee_saved_translate(&fp, &ans->rule.rbp_type, &ans->rule.rbp_off);
}

static bool libdw_no_match(int err)
{
	const char *msg = dwarf_errmsg(err);

	return msg && strcmp(msg, LIBDW_NO_MATCH_MSG) == 0;
}

/* Asks the sources in precedence order what holds at ADDR. */
static void oracle_ask(struct libdw_sources *src, uint64_t addr, struct oracle_answer *ans)
{
	Dwarf_Frame *frame;
	int i, err, first_err = 0;

	memset(ans, 0, sizeof(*ans));
	for (i = 0; i < SRC_COUNT; i++) {
		if (!src->cfi[i])
			continue;
		if (dwarf_cfi_addrframe(src->cfi[i], addr, &frame) == 0) {
			if (src->arch == UNWIND_ARCH_AARCH64)
				frame_translate_a64(frame, ans);
			else
				frame_translate(frame, ans);
			free(frame);
			return;
		}
		err = dwarf_errno();
		if (!libdw_no_match(err) && !first_err)
			first_err = err;
	}
	ans->rule.cfa_type = UNWIND_CFA_NONE;
	if (first_err) {
		ans->libdw_error = true;
		snprintf(ans->raw, sizeof(ans->raw), "libdw: %s", dwarf_errmsg(first_err));
	} else {
		snprintf(ans->raw, sizeof(ans->raw), "libdw: no FDE");
	}
}

static bool cfa_type_has_frame(uint8_t cfa_type)
{
	switch (cfa_type) {
	case UNWIND_CFA_RSP:
	case UNWIND_CFA_RBP:
	case UNWIND_CFA_RBX:
	case UNWIND_CFA_PLT11:
	case UNWIND_CFA_PLT10:
	case UNWIND_CFA_DEREF_RBP:
		return true;
	default:
		return false;
	}
}

/* Compares only what the walker reads for the expected rule's kind. */
static bool rules_agree(const struct unwind_rule *ours, const struct oracle_answer *ans)
{
	const struct unwind_rule *exp = &ans->rule;

	if (ans->libdw_error || ans->sigframe_unexpected || ours->cfa_type != exp->cfa_type)
		return false;
	if (!cfa_type_has_frame(exp->cfa_type))
		return true;
	if (ours->cfa_off != exp->cfa_off || ours->rbp_type != exp->rbp_type)
		return false;
	/* elfutils' x86_64 ABI CFI (backends/x86_64_cfi.c) marks DWARF register
	 * 0 (rax) same-value where the comment says %rbx (3), so libdw answers
	 * "undefined" for an rbx no CFI mentions, which the psABI makes
	 * callee-saved, i.e. same value.  Accept ours as same there. */
	if (ours->rbx_type != exp->rbx_type &&
	    !(exp->rbx_type == UNWIND_RBP_UNDEFINED && ours->rbx_type == UNWIND_RBP_SAME))
		return false;
	if ((exp->rbp_type == UNWIND_RBP_CFA || exp->rbp_type == UNWIND_RBP_AT_RBP) &&
	    ours->rbp_off != exp->rbp_off)
		return false;
	if ((exp->rbx_type == UNWIND_RBP_CFA || exp->rbx_type == UNWIND_RBP_AT_RBP) &&
	    ours->rbx_off != exp->rbx_off)
		return false;
	return true;
}

static void report_mismatch(struct verify_ctx *ctx, uint64_t addr, const struct unwind_rule *ours,
			    const struct oracle_answer *ans)
{
	static const struct unwind_rule none = { .cfa_type = UNWIND_CFA_NONE };
	char ours_text[VERIFY_TEXT_MAX], theirs[VERIFY_TEXT_MAX];

	ctx->res->mismatches++;
	if (ans->libdw_error)
		ctx->res->libdw_errors++;
	if (!ctx->on_mismatch)
		return;
	table_rule_format(ours ? ours : &none, ctx->t->arch, ours_text, sizeof(ours_text));
	theirs[0] = '\0';
	if (!ans->libdw_error)
		table_rule_format(&ans->rule, ctx->t->arch, theirs, sizeof(theirs));
	if (ans->sigframe_unexpected)
		text_append(theirs, sizeof(theirs), " (not the rt_sigframe layout)");
	text_append(theirs, sizeof(theirs), "%s[%s]", theirs[0] ? " " : "", ans->raw);
	ctx->on_mismatch(ctx->arg, addr, ours_text, theirs);
}

static void check_addr(struct verify_ctx *ctx, uint64_t addr, const struct unwind_rule *ours)
{
	struct oracle_answer ans;

	ctx->res->addrs++;
	oracle_ask(ctx->src, addr, &ans);
	if (ours ? !rules_agree(ours, &ans) : ans.rule.cfa_type != UNWIND_CFA_NONE || ans.libdw_error)
		report_mismatch(ctx, addr, ours, &ans);
}

static int check_span(const struct table_span *span, void *arg)
{
	struct verify_ctx *ctx = arg;

	if (ctx->prev_end && span->start > ctx->prev_end) {
		ctx->res->gaps++;
		check_addr(ctx, ctx->prev_end, NULL);
	}
	ctx->prev_end = span->end;
	ctx->res->spans++;
	check_addr(ctx, span->start, span->rule);
	if (span->end - 1 > span->start)
		check_addr(ctx, span->end - 1, span->rule);
	return 0;
}

/*
 * The reverse check: every FDE of every source, found by walking the raw
 * section with dwarf_next_cfi(), must be in the table at its first byte
 * unless it lies outside the object's PT_LOAD segments (then the compiler
 * drops it on purpose).  libdw leaves pointer decoding to the caller, so the
 * CIE's 'R' encoding is applied here; FDEs with encodings other than
 * absolute or pc-relative fixed-size pointers are not checked.
 */

/* Reads a pointer encoded with ENC at *P, advancing *P; FIELD_ADDR is the
 * pointer's own ELF address, the base of DW_EH_PE_pcrel. */
static bool pointer_read(const uint8_t **p, const uint8_t *end, uint8_t enc,
			 uint64_t field_addr, uint64_t *out)
{
	size_t size, i;
	uint64_t v = 0;
	bool is_signed = enc & 0x08;

	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		size = 8;
		break;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		size = 4;
		break;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		size = 2;
		break;
	default:
		return false;
	}
	if ((size_t)(end - *p) < size || (enc & DW_EH_PE_indirect))
		return false;
	for (i = 0; i < size; i++)
		v |= (uint64_t)(*p)[i] << (8 * i);
	if (is_signed && size < 8 && (v >> (8 * size - 1)) & 1)
		v |= ~0ull << (8 * size);
	if ((enc & 0x70) == DW_EH_PE_pcrel)
		v += field_addr;
	else if (enc & 0x70)
		return false;
	*p += size;
	*out = v;
	return true;
}

/* The encoding of FDE addresses the CIE declares ('R'); absptr without one. */
static bool cie_fde_encoding(const Dwarf_CIE *cie, uint8_t *enc)
{
	const uint8_t *d = cie->augmentation_data;
	const uint8_t *end = d ? d + cie->augmentation_data_size : d;
	const char *a = cie->augmentation;
	uint64_t skip;

	*enc = DW_EH_PE_absptr;
	if (a[0] != 'z')
		return a[0] == '\0';
	for (a++; *a; a++) {
		if (*a == 'S' || *a == 'B')
			continue;
		if (d >= end)
			return false;
		switch (*a) {
		case 'R':
			*enc = *d++;
			break;
		case 'L':
			d++;
			break;
		case 'P': /* personality encoding, then the pointer: skip both */
			d++;
			if (d >= end || !pointer_read(&d, end, d[-1] & 0x0f, 0, &skip))
				return false;
			break;
		default:
			return false;
		}
	}
	return true;
}

/* True when ADDR is inside one of ELF's PT_LOAD segments. */
static bool addr_loaded(Elf *elf, uint64_t addr)
{
	GElf_Phdr ph;
	size_t i, n;

	if (elf_getphdrnum(elf, &n))
		return false;
	for (i = 0; i < n; i++)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    addr >= ph.p_vaddr && addr - ph.p_vaddr < ph.p_memsz)
			return true;
	return false;
}

/* One raw CFI section being walked. */
struct cfi_raw {
	const unsigned char *ident;
	Elf_Data *data;
	uint64_t addr; /* sh_addr, for pc-relative pointers */
	bool eh;
};

/* Decodes the start of FDE; false when it cannot be or covers no code. */
static bool fde_start(const struct cfi_raw *raw, const Dwarf_FDE *fde, uint64_t *start)
{
	const uint8_t *base = raw->data->d_buf, *p = fde->start;
	Dwarf_CFI_Entry cie;
	Dwarf_Off next;
	uint64_t len;
	uint8_t enc;

	if (dwarf_next_cfi(raw->ident, raw->data, raw->eh, fde->CIE_pointer, &next, &cie) != 0 ||
	    !dwarf_cfi_cie_p(&cie) || !cie_fde_encoding(&cie.cie, &enc))
		return false;
	if (!pointer_read(&p, fde->end, enc, raw->addr + (uint64_t)(p - base), start))
		return false;
	return pointer_read(&p, fde->end, enc & 0x0f, 0, &len) && len > 0;
}

static void check_fde_starts(struct verify_ctx *ctx, const struct cfi_raw *raw)
{
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry entry;
	uint64_t start;
	int rc;

	for (;; off = next) {
		next = off;
		rc = dwarf_next_cfi(raw->ident, raw->data, raw->eh, off, &next, &entry);
		if (rc == 1 || (rc < 0 && (next == (Dwarf_Off)-1 || next <= off)))
			break;
		if (rc < 0 || dwarf_cfi_cie_p(&entry) || !fde_start(raw, &entry.fde, &start))
			continue;
		if (!addr_loaded(ctx->src->elf, start))
			continue;
		ctx->res->fde_starts++;
		check_addr(ctx, start, table_lookup(ctx->t, start, NULL, NULL));
	}
}

/* Finds section NAME of ELF with contents (decompressed if need be). */
static bool section_raw(Elf *elf, const char *name, bool eh, struct cfi_raw *raw)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	const char *sname;
	size_t shstrndx;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		sname = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!sname || strcmp(sname, name))
			continue;
		if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
			return false;
		raw->data = elf_getdata(scn, NULL);
		raw->ident = (const unsigned char *)elf_getident(elf, NULL);
		raw->addr = sh.sh_addr;
		raw->eh = eh;
		return raw->data && raw->data->d_buf && raw->ident;
	}
	return false;
}

static void check_all_fde_starts(struct verify_ctx *ctx)
{
	struct cfi_raw raw;

	if (section_raw(ctx->src->elf, ".eh_frame", true, &raw))
		check_fde_starts(ctx, &raw);
	if (section_raw(ctx->src->elf, ".debug_frame", false, &raw))
		check_fde_starts(ctx, &raw);
	if (section_raw(ctx->src->sep_elf, ".debug_frame", false, &raw))
		check_fde_starts(ctx, &raw);
}

static void sources_close(struct libdw_sources *s)
{
	if (s->cfi[SRC_EH])
		dwarf_cfi_end(s->cfi[SRC_EH]);
	dwarf_end(s->dwarf);
	dwarf_end(s->sep_dwarf);
	elf_end(s->elf);
	elf_end(s->sep_elf);
	if (s->sep_fd >= 0)
		close(s->sep_fd);
}

/* Opens the separate debug file's .debug_frame, if it has one. */
static int sources_open_separate(struct libdw_sources *s, const char *path)
{
	int err;

	s->sep_fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not hang us */
	if (s->sep_fd < 0) {
		err = -errno;
		return verify_fail(err, "cannot open debug file %s: %s", path, strerror(-err));
	}
	s->sep_elf = elf_begin(s->sep_fd, ELF_C_READ, NULL);
	if (!s->sep_elf || elf_kind(s->sep_elf) != ELF_K_ELF)
		return verify_fail(-ENOEXEC, "debug file %s is not an ELF object", path);
	s->sep_dwarf = dwarf_begin_elf(s->sep_elf, DWARF_C_READ, NULL);
	if (s->sep_dwarf)
		s->cfi[SRC_SEPARATE] = dwarf_getcfi(s->sep_dwarf);
	return 0;
}

/* Opens every CFI source libdw finds; absent sections are not errors. */
static int sources_open(struct libdw_sources *s, int fd, const char *debug_path)
{
	elf_version(EV_CURRENT);
	s->elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!s->elf || elf_kind(s->elf) != ELF_K_ELF)
		return verify_fail(-ENOEXEC, "libelf cannot read the object: %s", elf_errmsg(-1));
	s->cfi[SRC_EH] = dwarf_getcfi_elf(s->elf);
	s->dwarf = dwarf_begin_elf(s->elf, DWARF_C_READ, NULL);
	if (s->dwarf)
		s->cfi[SRC_DEBUG] = dwarf_getcfi(s->dwarf);
	if (debug_path)
		return sources_open_separate(s, debug_path);
	return 0;
}

static void result_init(struct table_verify_result *res, const struct unwind_table *t)
{
	memset(res, 0, sizeof(*res));
	res->nfdes = t->nfdes;
	res->nrows = t->nrows;
	res->walker_bytes = table_walker_bytes(t);
	res->covered_bytes = t->covered_bytes;
	res->supported_bytes = t->supported_bytes;
}

/* The table's architecture must be the file's: each is read in its own. */
static int machine_check(const struct libdw_sources *s)
{
	GElf_Ehdr eh;

	if (!gelf_getehdr(s->elf, &eh))
		return verify_fail(-EINVAL, "libdw cannot read the ELF header: %s", elf_errmsg(-1));
	if (elf_machine_arch(eh.e_machine) != (int)s->arch)
		return verify_fail(-EINVAL, "the table is for another architecture than the file (ELF machine %u)",
				   eh.e_machine);
	return 0;
}

int table_verify(int fd, const struct table_opts *opts, const struct unwind_table *t,
		 struct table_verify_result *res, table_verify_mismatch_fn on_mismatch,
		 void *arg)
{
	struct libdw_sources src = { .arch = t->arch, .sep_fd = -1 };
	struct verify_ctx ctx = {
		.t = t, .src = &src, .res = res, .on_mismatch = on_mismatch, .arg = arg,
	};
	int ret;

	verify_error[0] = '\0';
	result_init(res, t);
	ret = sources_open(&src, fd, opts ? opts->debug_path : NULL);
	if (ret)
		goto out;
	ret = machine_check(&src);
	if (ret)
		goto out;
	ret = table_for_each_span(t, check_span, &ctx);
	if (ret == 0)
		check_all_fde_starts(&ctx);
out:
	sources_close(&src);
	return ret;
}
