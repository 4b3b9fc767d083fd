/* Classic BPF as seccomp runs it (kernel/seccomp.c seccomp_check_filter
 * and the cBPF rules of net/core/filter.c bpf_check_classic): the opcodes
 * seccomp accepts, each load bounded to struct seccomp_data, each jump
 * forward and inside the program, so one run takes at most N steps. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <linux/seccomp.h>

#include "seccomp_eval.h"

#define DATA_SIZE 64u /* sizeof(struct seccomp_data) */

_Static_assert(sizeof(struct seccomp_eval_data) == DATA_SIZE, "seccomp_data layout");

/* The 32-bit word at byte offset K of D, as the kernel loads it (host
 * order: x86_64 is little-endian, so ip and the args are low word first). */
static uint32_t data_word(const struct seccomp_eval_data *d, uint32_t k)
{
	unsigned char b[DATA_SIZE];
	uint32_t w;

	memcpy(b, &d->nr, 4);
	memcpy(b + 4, &d->arch, 4);
	memcpy(b + 8, &d->ip, 8);
	memcpy(b + 16, d->args, sizeof(d->args));
	memcpy(&w, b + k, 4);
	return w;
}

static int alu(uint16_t op, uint32_t *a, uint32_t v, int is_k)
{
	switch (op) {
	case BPF_ADD:
		*a += v;
		break;
	case BPF_SUB:
		*a -= v;
		break;
	case BPF_MUL:
		*a *= v;
		break;
	case BPF_DIV:
		if (!v) {
			if (is_k)
				return -EINVAL; /* refused when the filter is loaded */
			return 1;		/* the program ends, returning 0 */
		}
		*a /= v;
		break;
	case BPF_AND:
		*a &= v;
		break;
	case BPF_OR:
		*a |= v;
		break;
	case BPF_XOR:
		*a ^= v;
		break;
	case BPF_LSH:
		if (is_k && v >= 32)
			return -EINVAL;
		*a = v >= 32 ? 0 : *a << v; /* X >= 32: eBPF's 32-bit shift, as converted */
		break;
	case BPF_RSH:
		if (is_k && v >= 32)
			return -EINVAL;
		*a = v >= 32 ? 0 : *a >> v;
		break;
	case BPF_NEG:
		*a = -*a;
		break;
	default:
		return -EINVAL; /* BPF_MOD and the rest: not accepted by seccomp */
	}
	return 0;
}

int seccomp_eval(const struct sock_filter *prog, size_t n, const struct seccomp_eval_data *d, uint32_t *ret)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS];
	uint16_t written = 0; /* bit K: mem[K] stored */
	size_t pc = 0;
	int r;

	if (!n || n > SECCOMP_EVAL_MAX_INSNS)
		return -EINVAL;
	memset(mem, 0, sizeof(mem));
	while (pc < n) {
		const struct sock_filter *f = &prog[pc++];
		uint32_t k = f->k, v;

		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (k >= DATA_SIZE || (k & 3))
				return -EINVAL;
			a = data_word(d, k);
			break;
		case BPF_LD | BPF_W | BPF_LEN:
			a = DATA_SIZE;
			break;
		case BPF_LDX | BPF_W | BPF_LEN:
			x = DATA_SIZE;
			break;
		case BPF_LD | BPF_IMM:
			a = k;
			break;
		case BPF_LDX | BPF_IMM:
			x = k;
			break;
		case BPF_LD | BPF_MEM:
		case BPF_LDX | BPF_MEM:
			if (k >= BPF_MEMWORDS || !(written & (1u << k)))
				return -EINVAL; /* the kernel refuses loads of unwritten words */
			*(f->code == (BPF_LD | BPF_MEM) ? &a : &x) = mem[k];
			break;
		case BPF_ST:
		case BPF_STX:
			if (k >= BPF_MEMWORDS)
				return -EINVAL;
			mem[k] = f->code == BPF_ST ? a : x;
			written |= (uint16_t)(1u << k);
			break;
		case BPF_MISC | BPF_TAX:
			x = a;
			break;
		case BPF_MISC | BPF_TXA:
			a = x;
			break;
		case BPF_RET | BPF_K:
			*ret = k;
			return 0;
		case BPF_RET | BPF_A:
			*ret = a;
			return 0;
		case BPF_JMP | BPF_JA:
			if (k >= n - pc)
				return -EINVAL;
			pc += k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
		case BPF_JMP | BPF_JEQ | BPF_X:
		case BPF_JMP | BPF_JGE | BPF_K:
		case BPF_JMP | BPF_JGE | BPF_X:
		case BPF_JMP | BPF_JGT | BPF_K:
		case BPF_JMP | BPF_JGT | BPF_X:
		case BPF_JMP | BPF_JSET | BPF_K:
		case BPF_JMP | BPF_JSET | BPF_X: {
			bool taken;

			if (f->jt >= n - pc || f->jf >= n - pc)
				return -EINVAL;
			v = BPF_SRC(f->code) == BPF_X ? x : k;
			switch (BPF_OP(f->code)) {
			case BPF_JEQ:
				taken = a == v;
				break;
			case BPF_JGE:
				taken = a >= v;
				break;
			case BPF_JGT:
				taken = a > v;
				break;
			default:
				taken = (a & v) != 0;
				break;
			}
			pc += taken ? f->jt : f->jf;
			break;
		}
		default:
			if (BPF_CLASS(f->code) != BPF_ALU ||
			    (BPF_OP(f->code) == BPF_NEG ? f->code != (BPF_ALU | BPF_NEG) : 0))
				return -EINVAL;
			r = alu(BPF_OP(f->code), &a, BPF_SRC(f->code) == BPF_X ? x : k,
				BPF_SRC(f->code) == BPF_K && BPF_OP(f->code) != BPF_NEG);
			if (r < 0)
				return r;
			if (r > 0) {
				*ret = 0;
				return 0;
			}
			break;
		}
	}
	return -EINVAL; /* ran off the end: the kernel wants a RET last */
}

/* The kernel's ACTION_ONLY(): the action, signed, so that KILL_PROCESS
 * (0x80000000) sorts first. */
static int32_t action_only(uint32_t ret)
{
	return (int32_t)(ret & SECCOMP_RET_ACTION_FULL);
}

uint32_t seccomp_eval_combine(uint32_t a, uint32_t b)
{
	return action_only(b) < action_only(a) ? b : a;
}

enum seccomp_fate seccomp_fate_of(uint32_t ret, int *err)
{
	uint32_t action = ret & SECCOMP_RET_ACTION_FULL;

	if (err)
		*err = 0;
	switch (action) {
	case SECCOMP_RET_ALLOW:
	case SECCOMP_RET_LOG:
		return SECCOMP_RUNS;
	case SECCOMP_RET_ERRNO:
		if (err)
			*err = (int)(ret & SECCOMP_RET_DATA);
		return SECCOMP_FAILS;
	case SECCOMP_RET_TRACE:
		if (err)
			*err = ENOSYS;
		return SECCOMP_FAILS;
	case SECCOMP_RET_USER_NOTIF:
		return SECCOMP_FAILS;
	case SECCOMP_RET_TRAP:
		return SECCOMP_SIGNALS;
	default:
		return SECCOMP_KILLS; /* KILL_THREAD, KILL_PROCESS and unknown actions (the kernel kills) */
	}
}
