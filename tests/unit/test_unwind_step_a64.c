/* The aarch64 walk step (bpf/abi/unwind_step_a64.h) on this x86 host, on
 * a stack laid out in a buffer: every rule of testdata's libpac_a64.so
 * (compiled by tables/, checked against libdw and its disassembly by
 * tests/tables_arm64.sh) applied to a frame saved the way the rule says,
 * the return address carrying a pointer authentication code; x30 trusted
 * in the innermost frame only; a frame from x29 with x29 lost; the
 * kernel's signal frame by its trampoline's two instructions; unreadable
 * words and the outermost frame.  The guest (make check-arm64) checks the
 * same step against gdb on real processes; this keeps it checked in CI. */
#include "check.h"

#include "table.h"
#include "unwind_step_a64.h"

#define STACK_BASE 0x7ffff0000000ull
#define STACK_WORDS 1024
#define PAC_MASK 0x007f000000000000ull

static uint64_t stack[STACK_WORDS];

static int stack_read(void *arg, __u64 *dst, __u64 addr)
{
	(void)arg;
	if (addr < STACK_BASE || addr + 8 > STACK_BASE + sizeof(stack) || (addr & 7))
		return WALK_ERR_READ;
	*dst = stack[(addr - STACK_BASE) / 8];
	return 0;
}

static void stack_put(uint64_t addr, uint64_t val)
{
	CHECK(addr >= STACK_BASE && addr + 8 <= STACK_BASE + sizeof(stack) && !(addr & 7), "%#llx",
	      (unsigned long long)addr);
	stack[(addr - STACK_BASE) / 8] = val;
}

static const struct unwind_step_a64_ops ops = { .read = stack_read };

/* Every rule of the table, stepped from an innermost frame laid out as it
 * says: the CFA from sp or x29, the return address in x30 or saved at
 * the CFA, signed where the rule says so. */
static void rules_of_real_table(const char *path)
{
	struct unwind_table *t = NULL;
	uint32_t i, saved = 0, in_lr = 0, signed_rules = 0;

	CHECK(!table_compile_path(path, NULL, &t), "%s: %s", path, table_last_error());
	CHECK(t->arch == UNWIND_ARCH_AARCH64, "%s is not aarch64", path);
	for (i = 0; i < t->nrules; i++) {
		const struct unwind_rule *rule = &t->rules[i];
		struct unwind_regs_a64 r = { 0 };
		const uint64_t ra = 0x0000aaaa00001234ull, code = 0x002a000000000000ull;
		uint64_t cfa, fp = STACK_BASE + 2048, caller_fp = STACK_BASE + 3072;
		int is_signed = !!(rule->flags & UNWIND_RULE_RA_SIGNED);
		__u32 end = 0;

		if (rule->cfa_type != UNWIND_CFA_RSP && rule->cfa_type != UNWIND_CFA_RBP)
			continue;
		memset(stack, 0, sizeof(stack));
		r.pc = 0x0000aaaa00005000ull;
		r.sp = STACK_BASE + 512;
		r.fp = fp;
		r.fp_ok = 1;
		r.lr = 0xdead; /* not the return address unless the rule says x30 */
		r.lr_ok = 1;
		r.exact_pc = 1;
		r.pac_mask = PAC_MASK;
		cfa = (rule->cfa_type == UNWIND_CFA_RSP ? r.sp : fp) + (int64_t)rule->cfa_off;
		if (rule->rbx_type == UNWIND_RBP_CFA) {
			stack_put(cfa + (int64_t)rule->rbx_off, is_signed ? ra | code : ra);
			saved++;
		} else if (rule->rbx_type == UNWIND_RBP_SAME) {
			r.lr = is_signed ? ra | code : ra;
			in_lr++;
		} else {
			continue;
		}
		if (rule->rbp_type == UNWIND_RBP_CFA)
			stack_put(cfa + (int64_t)rule->rbp_off, caller_fp);
		EXPECT(!unwind_step_a64(&r, rule, &end, &ops, NULL), "rule %u: ended %u", i, end);
		EXPECT(r.pc == ra, "rule %u: pc %#llx, want %#llx", i, (unsigned long long)r.pc,
		       (unsigned long long)ra);
		EXPECT(r.sp == cfa, "rule %u: sp %#llx, want the CFA %#llx", i, (unsigned long long)r.sp,
		       (unsigned long long)cfa);
		if (rule->rbp_type == UNWIND_RBP_CFA)
			EXPECT(r.fp == caller_fp && r.fp_ok, "rule %u: x29 %#llx", i, (unsigned long long)r.fp);
		else if (rule->rbp_type == UNWIND_RBP_SAME)
			EXPECT(r.fp == fp && r.fp_ok, "rule %u: x29 changed", i);
		EXPECT(!r.lr_ok && !r.exact_pc, "rule %u: x30 still trusted in the caller", i);
		EXPECT(r.pac_stripped == (unsigned)is_signed, "rule %u: %u codes stripped", i, r.pac_stripped);
		signed_rules += is_signed;
	}
	/* libpac_a64.so: clang keeps x29 as the frame pointer on aarch64 */
	CHECK(saved >= 1 && in_lr >= 2 && signed_rules >= 2,
	      "%s: %u rules with the return address saved, %u in x30, %u signed", path, saved, in_lr,
	      signed_rules);
	printf("ok: %s: %u rules stepped (%u return addresses saved, %u in x30, %u signed and stripped)\n", path,
	       saved + in_lr, saved, in_lr, signed_rules);
	table_free(t);
}

/* A leaf (the return address still in x30): the innermost frame takes
 * x30; any other frame cannot know it. */
static void leaf_rule(void)
{
	const struct unwind_rule leaf = { .cfa_type = UNWIND_CFA_RSP, .cfa_off = 0, .rbx_type = UNWIND_RBP_SAME };
	struct unwind_regs_a64 r = { .pc = 0x400000, .sp = STACK_BASE + 64, .lr = 0x0022aaaa00000040ull,
				     .lr_ok = 1, .exact_pc = 1, .pac_mask = PAC_MASK };
	__u32 end = 0;

	EXPECT(!unwind_step_a64(&r, &leaf, &end, &ops, NULL));
	EXPECT(r.pc == 0x0000aaaa00000040ull && r.sp == STACK_BASE + 64, "pc %#llx", (unsigned long long)r.pc);
	EXPECT(unwind_step_a64(&r, &leaf, &end, &ops, NULL) && end == WALK_ERR_UNSUPPORTED,
	       "a caller's frame took x30: end %u", end);
	printf("ok: x30 is the return address of the innermost frame only\n");
}

/* CFA = x29 + 16 needs x29; lost, the walk says so. */
static void fp_rule(void)
{
	const struct unwind_rule rule = { .cfa_type = UNWIND_CFA_RBP, .cfa_off = 16, .rbx_type = UNWIND_RBP_CFA,
					  .rbx_off = -8, .rbp_type = UNWIND_RBP_CFA, .rbp_off = -16 };
	struct unwind_regs_a64 r = { .pc = 0x400000, .sp = STACK_BASE, .fp = STACK_BASE + 256, .fp_ok = 1 };
	__u32 end = 0;

	memset(stack, 0, sizeof(stack));
	stack_put(STACK_BASE + 256, STACK_BASE + 512);	 /* the caller's x29 */
	stack_put(STACK_BASE + 264, 0x0000aaaa00000080ull); /* the return address */
	EXPECT(!unwind_step_a64(&r, &rule, &end, &ops, NULL), "end %u", end);
	EXPECT(r.pc == 0x0000aaaa00000080ull && r.sp == STACK_BASE + 272 && r.fp == STACK_BASE + 512);
	r.fp_ok = 0;
	EXPECT(unwind_step_a64(&r, &rule, &end, &ops, NULL) && end == WALK_ERR_RBP_UNKNOWN, "end %u", end);
	/* a frame record out of reach */
	r.fp_ok = 1;
	r.fp = STACK_BASE - 4096;
	EXPECT(unwind_step_a64(&r, &rule, &end, &ops, NULL) && end == WALK_ERR_READ, "end %u", end);
	printf("ok: a CFA from x29, x29 lost, a frame record unreadable\n");
}

/* The sigreturn trampoline: the interrupted context, every register. */
static void signal_frame(void)
{
	struct unwind_regs_a64 r = { .pc = STACK_BASE + 8, .sp = STACK_BASE + 1024, .pac_mask = PAC_MASK };
	__u32 end = 0;

	memset(stack, 0, sizeof(stack));
	stack_put(STACK_BASE + 8, UNWIND_A64_SIGRETURN_INSNS); /* the "code" at pc */
	stack_put(r.sp + UNWIND_A64_SIGFRAME_PC, 0x0000aaaa00000100ull);
	stack_put(r.sp + UNWIND_A64_SIGFRAME_SP, STACK_BASE + 3000 - 3000 % 16);
	stack_put(r.sp + UNWIND_A64_SIGFRAME_X29, STACK_BASE + 4000);
	stack_put(r.sp + UNWIND_A64_SIGFRAME_X30, 0x0011aaaa00000200ull);
	EXPECT(unwind_a64_signal(&r, &end, &ops, NULL) == 0, "end %u", end);
	EXPECT(r.pc == 0x0000aaaa00000100ull && r.exact_pc, "pc %#llx", (unsigned long long)r.pc);
	EXPECT(r.sp == STACK_BASE + 3000 - 3000 % 16 && r.fp == STACK_BASE + 4000 && r.fp_ok);
	EXPECT(r.lr == 0x0000aaaa00000200ull && r.lr_ok, "x30 %#llx", (unsigned long long)r.lr);
	/* any other code at pc is not a signal frame, and R stays */
	r.pc = STACK_BASE + 16;
	EXPECT(unwind_a64_signal(&r, &end, &ops, NULL) == -1 && r.pc == STACK_BASE + 16);
	/* nor is a pc whose code cannot be read */
	r.pc = 0x1000;
	EXPECT(unwind_a64_signal(&r, &end, &ops, NULL) == -1);
	printf("ok: the signal frame by its trampoline's instructions, all registers restored\n");
}

/* The outermost frame and a return address of 0. */
static void ends(void)
{
	const struct unwind_rule outermost = { .cfa_type = UNWIND_CFA_END };
	const struct unwind_rule nofde = { .cfa_type = UNWIND_CFA_NONE };
	const struct unwind_rule saved = { .cfa_type = UNWIND_CFA_RSP, .cfa_off = 16, .rbx_type = UNWIND_RBP_CFA,
					   .rbx_off = -8 };
	struct unwind_regs_a64 r = { .sp = STACK_BASE };
	__u32 end = 0;

	EXPECT(unwind_step_a64(&r, &outermost, &end, &ops, NULL) && end == WALK_END_OK);
	EXPECT(unwind_step_a64(&r, &nofde, &end, &ops, NULL) && end == WALK_ERR_NO_FDE);
	memset(stack, 0, sizeof(stack));
	EXPECT(unwind_step_a64(&r, &saved, &end, &ops, NULL) && end == WALK_END_ZERO_RA, "end %u", end);
	printf("ok: the outermost frame, no FDE, a zero return address\n");
}

/* The frame-pointer walk: the x29 chain of frame records, x29 0 ends it,
 * a chain pointing down the stack stops it. */
static void fp_chain(void)
{
	struct unwind_regs_a64 r = { .pc = 0x400000, .sp = STACK_BASE, .fp = STACK_BASE + 64, .fp_ok = 1,
				     .pac_mask = PAC_MASK };
	__u32 end = 0;

	memset(stack, 0, sizeof(stack));
	stack_put(STACK_BASE + 64, STACK_BASE + 256);		 /* record 1: the next x29 */
	stack_put(STACK_BASE + 72, 0x0033aaaa00000300ull);	 /* signed return address */
	stack_put(STACK_BASE + 256, 0);				 /* record 2: the end */
	stack_put(STACK_BASE + 264, 0x0000aaaa00000400ull);
	EXPECT(!unwind_step_a64_fp(&r, &end, &ops, NULL));
	EXPECT(r.pc == 0x0000aaaa00000300ull && r.sp == STACK_BASE + 80 && r.fp == STACK_BASE + 256,
	       "pc %#llx", (unsigned long long)r.pc);
	EXPECT(!unwind_step_a64_fp(&r, &end, &ops, NULL) && r.pc == 0x0000aaaa00000400ull);
	EXPECT(unwind_step_a64_fp(&r, &end, &ops, NULL) && end == WALK_END_OK, "x29 0: end %u", end);
	r.fp = STACK_BASE + 8; /* below sp now: not a frame record */
	EXPECT(unwind_step_a64_fp(&r, &end, &ops, NULL) && end == WALK_ERR_READ, "end %u", end);
	printf("ok: the x29 chain, its end, a chain going down the stack\n");
}

int main(void)
{
	const char *td = getenv("TESTDATA");
	char path[4096];

	CHECK(td, "TESTDATA is not set (run through tests/run.sh)");
	snprintf(path, sizeof(path), "%s/libpac_a64.so", td);
	rules_of_real_table(path);
	leaf_rule();
	fp_rule();
	signal_frame();
	ends();
	fp_chain();
	return check_status();
}
