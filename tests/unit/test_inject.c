/* The injector's pure parts (target/seccomp_eval.c, target/inject_safe.c):
 * the classic-BPF evaluator against the kernel itself (filters installed
 * in forked children, which then make the system call: the action they
 * meet must be the evaluator's), and the judgements of a thread's safe
 * point and of a process's filters on synthetic input. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "inject_safe.h"
#include "seccomp_eval.h"

#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LD_ARG(i) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define JEQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))

/* Filters of the shapes programs install: libseccomp's and systemd's (an
 * arch check, a dispatch on the number, argument tests), and one using
 * the scratch memory, X and ALU. */
static struct sock_filter allowlist[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	JEQ(AUDIT_ARCH_X86_64, 1, 0),
	RET(SECCOMP_RET_KILL_PROCESS),
	LD_NR,
	JEQ(SYS_getpid, 4, 0),
	JEQ(SYS_getppid, 3, 0),
	JEQ(SYS_exit_group, 2, 0),
	JEQ(SYS_write, 1, 0),
	RET(SECCOMP_RET_ERRNO | 1001),
	RET(SECCOMP_RET_ALLOW),
};

static struct sock_filter args_filter[] = {
	LD_NR,
	JEQ(SYS_getuid, 0, 5),
	LD_ARG(0),
	BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x4, 0, 1), /* like PROT_EXEC */
	RET(SECCOMP_RET_ERRNO | 1002),
	BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 1000, 0, 1),
	RET(SECCOMP_RET_TRAP),
	RET(SECCOMP_RET_ALLOW),
};

static struct sock_filter alu_filter[] = {
	LD_NR,
	JEQ(SYS_exit_group, 0, 1), /* the child's way out */
	RET(SECCOMP_RET_ALLOW),
	BPF_STMT(BPF_ST, 3),
	LD_ARG(1),
	BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff),
	BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 7),
	BPF_STMT(BPF_MISC | BPF_TAX, 0),
	BPF_STMT(BPF_LD | BPF_MEM, 3),
	BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
	BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 4),
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 8, 0, 1),
	RET(SECCOMP_RET_ERRNO | 1003),
	BPF_STMT(BPF_LD | BPF_MEM, 3),
	JEQ(SYS_gettid, 0, 1),
	RET(SECCOMP_RET_ERRNO | 1004),
	RET(SECCOMP_RET_ALLOW),
};

static void on_sigsys(int sig)
{
	(void)sig;
	_exit(42);
}

/* What the kernel does with syscall NR(ARGS) under filter F: 0 runs, an
 * errno in 1000..1100, -1 killed (SIGSYS), -2 trapped. */
static int kernel_fate(struct sock_filter *f, unsigned short n, long nr, const uint64_t args[6])
{
	struct sock_fprog prog = { n, f };
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (!pid) {
		long r;

		signal(SIGSYS, on_sigsys);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(3);
		r = syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]);
		/* exit_group itself: the sanitizers' exit path makes calls the filter denies */
		syscall(SYS_exit_group, r == -1 && errno >= 1000 && errno < 1100 ? errno - 900 : 0);
		abort();
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	if (WIFSIGNALED(status))
		return WTERMSIG(status) == SIGSYS ? -1 : -3;
	if (WEXITSTATUS(status) == 42)
		return -2;
	CHECK(WEXITSTATUS(status) != 3, "installing a filter");
	return WEXITSTATUS(status) ? WEXITSTATUS(status) + 900 : 0;
}

static int eval_fate(struct sock_filter *f, unsigned short n, long nr, const uint64_t args[6])
{
	struct seccomp_eval_data d = { .nr = (int32_t)nr, .arch = AUDIT_ARCH_X86_64 };
	uint32_t ret;
	int err;

	memcpy(d.args, args, sizeof(d.args));
	CHECK(seccomp_eval(f, n, &d, &ret) == 0, "evaluating");
	switch (seccomp_fate_of(ret, &err)) {
	case SECCOMP_RUNS:
		return 0;
	case SECCOMP_FAILS:
		return err;
	case SECCOMP_SIGNALS:
		return -2;
	default:
		return -1;
	}
}

static void test_against_kernel(void)
{
	static const long nrs[] = { SYS_getpid, SYS_getppid, SYS_getuid, SYS_gettid, SYS_getgid, SYS_geteuid };
	struct { struct sock_filter *f; unsigned short n; } filters[] = {
		{ allowlist, N(allowlist) }, { args_filter, N(args_filter) }, { alu_filter, N(alu_filter) },
	};
	uint64_t seed = 0x1234567, args[6];
	int checked = 0;

	for (size_t k = 0; k < N(filters); k++) {
		for (int i = 0; i < 40; i++) {
			long nr = nrs[check_xorshift64(&seed) % N(nrs)];
			int want, got;

			for (int a = 0; a < 6; a++)
				args[a] = check_xorshift64(&seed) % 4 ? check_xorshift64(&seed) % 2048 : check_xorshift64(&seed);
			want = kernel_fate(filters[k].f, filters[k].n, nr, args);
			got = eval_fate(filters[k].f, filters[k].n, nr, args);
			EXPECT(want == got, "filter %zu, syscall %ld, arg0 %#llx arg1 %#llx: the kernel %d, the evaluator %d", k,
			       nr, (unsigned long long)args[0], (unsigned long long)args[1], want, got);
			checked++;
		}
	}
	printf("ok: the evaluator agrees with the kernel on %d calls under %zu filters\n", checked, N(filters));
}

static void test_invalid(void)
{
	struct sock_filter jump_out[] = { BPF_JUMP(BPF_JMP | BPF_JA, 5, 0, 0), RET(0) };
	struct sock_filter bad_load[] = { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 64), RET(0) };
	struct sock_filter unaligned[] = { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2), RET(0) };
	struct sock_filter no_ret[] = { LD_NR };
	struct sock_filter mem_unset[] = { BPF_STMT(BPF_LD | BPF_MEM, 2), RET(0) };
	struct sock_filter div0[] = { BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0), RET(0) };
	struct sock_filter mod[] = { BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, 3), RET(0) };
	struct sock_filter divx[] = { BPF_STMT(BPF_LDX | BPF_IMM, 0), BPF_STMT(BPF_ALU | BPF_DIV | BPF_X, 0),
				       RET(SECCOMP_RET_ALLOW) };
	struct seccomp_eval_data d = { 0 };
	uint32_t ret = 7;

	EXPECT(seccomp_eval(jump_out, N(jump_out), &d, &ret) == -EINVAL);
	EXPECT(seccomp_eval(bad_load, N(bad_load), &d, &ret) == -EINVAL);
	EXPECT(seccomp_eval(unaligned, N(unaligned), &d, &ret) == -EINVAL);
	EXPECT(seccomp_eval(no_ret, N(no_ret), &d, &ret) == -EINVAL);
	EXPECT(seccomp_eval(mem_unset, N(mem_unset), &d, &ret) == -EINVAL);
	EXPECT(seccomp_eval(div0, N(div0), &d, &ret) == -EINVAL);
	EXPECT(seccomp_eval(mod, N(mod), &d, &ret) == -EINVAL, "BPF_MOD: seccomp does not accept it");
	EXPECT(seccomp_eval(NULL, 0, &d, &ret) == -EINVAL);
	EXPECT(seccomp_eval(divx, N(divx), &d, &ret) == 0 && ret == 0, "a division by X = 0 returns 0 (kill)");
	EXPECT(seccomp_eval_combine(SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS) == SECCOMP_RET_KILL_PROCESS);
	EXPECT(seccomp_eval_combine(SECCOMP_RET_ERRNO | 5, SECCOMP_RET_TRAP) == SECCOMP_RET_TRAP);
	EXPECT(seccomp_eval_combine(SECCOMP_RET_LOG, SECCOMP_RET_ERRNO | 5) == (SECCOMP_RET_ERRNO | 5));
	printf("ok: programs the kernel refuses are refused\n");
}

static void test_judge_filters(void)
{
	struct sock_filter allow_all[] = { RET(SECCOMP_RET_ALLOW) };
	struct sock_filter kill_clone[] = { LD_NR, JEQ(SYS_clone3, 2, 0), JEQ(SYS_clone, 1, 0),
					    RET(SECCOMP_RET_ALLOW), RET(SECCOMP_RET_KILL_PROCESS) };
	struct sock_filter enosys_clone3[] = { LD_NR, JEQ(SYS_clone3, 0, 1), RET(SECCOMP_RET_ERRNO | ENOSYS),
					       RET(SECCOMP_RET_ALLOW) };
	struct sock_filter eperm_rseq[] = { LD_NR, JEQ(SYS_rseq, 0, 1), RET(SECCOMP_RET_ERRNO | EPERM),
					    RET(SECCOMP_RET_ALLOW) };
	struct sock_filter eperm_openat[] = { LD_NR, JEQ(SYS_openat, 0, 1), RET(SECCOMP_RET_ERRNO | EPERM),
					      RET(SECCOMP_RET_ALLOW) };
	struct sock_filter trap_mincore[] = { LD_NR, JEQ(SYS_mincore, 0, 1), RET(SECCOMP_RET_TRAP),
					      RET(SECCOMP_RET_ALLOW) };
	const struct sock_filter *p[2];
	size_t len[2];
	char why[256];

#define JUDGE(a, b) \
	(p[0] = a, len[0] = N(a), p[1] = b, len[1] = N(b), inject_seccomp_judge(p, len, 2, 0x1000, 0x2000, why, sizeof(why)))
	EXPECT(JUDGE(allow_all, allow_all) == 0);
	EXPECT(JUDGE(allow_all, kill_clone) == -EPERM && strstr(why, "kill the process at clone3"), "%s", why);
	EXPECT(JUDGE(enosys_clone3, allow_all) == 0, "clone3 ENOSYS: glibc falls back to clone");
	EXPECT(JUDGE(enosys_clone3, kill_clone) == -EPERM, "%s", why);
	EXPECT(JUDGE(eperm_rseq, allow_all) == 0, "rseq may fail");
	EXPECT(JUDGE(eperm_openat, allow_all) == -EPERM && strstr(why, "openat of the library fail (EPERM)"), "%s", why);
	EXPECT(JUDGE(trap_mincore, allow_all) == -EPERM && strstr(why, "SIGSYS"), "a trap refuses even a soft call: %s",
	       why);
	printf("ok: filters judged against the injection's calls\n");
}

static void test_threads(void)
{
	struct inject_layout l = {
		.libc = { { 0x7000, 0x9000 } }, .nlibc = 1,
		.loader = { { 0xa000, 0xb000 } }, .nloader = 1,
		.alloc = { { 0x7100, 0x7200 }, { 0xc000, 0xd000 } }, .nalloc = 2,
		.restore_rt = { 0x8050 }, .nrestore = 1,
		.stack_need = 4096,
	};
	uint64_t clean[4] = { 1, 2, 0x401000, 3 }, in_alloc[4] = { 1, 0xc123, 2, 3 }, frame[64] = { 0 };
	struct inject_thread_view user = { .rip = 0x401000, .rsp = 0x10000, .orig_rax = -1, .stack = clean,
					   .nstack = 4, .stack_room = 1 << 20 };
	struct inject_thread_view v;
	uint64_t rip;

#define SYSCALL_VIEW(nr, a0, stk)                                                                        \
	((struct inject_thread_view){ .rip = 0x7500, .rsp = 0x10000, .rax = (uint64_t)-512, .orig_rax = (nr), \
				      .args = { (a0) }, .stack = (stk), .nstack = 4, .stack_room = 1 << 20 })
	EXPECT(inject_thread_judge(&user, &l) == INJECT_SAFE);
	v = user, v.rip = 0x7800;
	EXPECT(inject_thread_judge(&v, &l) == INJECT_IN_LIBC);
	v = user, v.rip = 0xa100;
	EXPECT(inject_thread_judge(&v, &l) == INJECT_IN_LOADER);
	v = user, v.rip = 0xc100;
	EXPECT(inject_thread_judge(&v, &l) == INJECT_IN_ALLOCATOR);
	v = user, v.stack = in_alloc;
	EXPECT(inject_thread_judge(&v, &l) == INJECT_ALLOCATOR_ON_STACK);
	v = user, v.stack_room = 100;
	EXPECT(inject_thread_judge(&v, &l) == INJECT_STACK_LOW);
	v = SYSCALL_VIEW(SYS_read, 0, clean);
	EXPECT(inject_thread_judge(&v, &l) == INJECT_SAFE, "blocked in read, pc in libc's wrapper");
	v = SYSCALL_VIEW(SYS_read, 0, in_alloc);
	EXPECT(inject_thread_judge(&v, &l) == INJECT_SAFE, "no allocator waits in read: stale words are not frames");
	v = SYSCALL_VIEW(SYS_nanosleep, 0, in_alloc);
	EXPECT(inject_thread_judge(&v, &l) == INJECT_ALLOCATOR_ON_STACK, "a spin lock's back-off sleeps");
	v = SYSCALL_VIEW(SYS_futex, 0x8800, clean);
	EXPECT(inject_thread_judge(&v, &l) == INJECT_LOCK_WAIT, "a lock in libc's data");
	v = SYSCALL_VIEW(SYS_futex, 0xa800, clean);
	EXPECT(inject_thread_judge(&v, &l) == INJECT_LOCK_WAIT, "a lock in the loader's data");
	v = SYSCALL_VIEW(SYS_futex, 0x55000, clean);
	EXPECT(inject_thread_judge(&v, &l) == INJECT_SAFE, "a program's mutex");
	v = SYSCALL_VIEW(SYS_write, 0, clean);
	EXPECT(inject_thread_judge(&v, &l) == INJECT_SYSCALL_BUSY);
	v = SYSCALL_VIEW(SYS_rt_sigsuspend, 0, clean);
	EXPECT(inject_thread_judge(&v, &l) == INJECT_MASK_SWAPPED);
	v = SYSCALL_VIEW(SYS_ppoll, 0, clean), v.args[3] = 0x1234;
	EXPECT(inject_thread_judge(&v, &l) == INJECT_MASK_SWAPPED, "ppoll with a mask");
	v = SYSCALL_VIEW(SYS_ppoll, 0, clean);
	EXPECT(inject_thread_judge(&v, &l) == INJECT_SAFE, "ppoll without one");
	/* stopped right after a system call returned: user code rules */
	v = SYSCALL_VIEW(SYS_write, 0, clean), v.rax = 5;
	EXPECT(inject_thread_judge(&v, &l) == INJECT_IN_LIBC);
	/* a signal frame: its __restore_rt, and the pc it interrupted */
	frame[10] = 0x8050;
	frame[10 + 22] = 0x7150;
	v = user, v.stack = frame, v.nstack = 64;
	EXPECT(inject_thread_judge(&v, &l) == INJECT_SIGNAL_HANDLER);
	EXPECT(inject_sigframe_rip(frame, 64, 10, &rip) && rip == 0x7150);
	EXPECT(!inject_sigframe_rip(frame, 30, 10, &rip), "a frame past the words read");
	EXPECT(strcmp(inject_verdict_why(INJECT_IN_LIBC), "running inside libc") == 0);
	printf("ok: threads judged\n");
}

int main(void)
{
	test_invalid();
	test_against_kernel();
	test_judge_filters();
	test_threads();
	return check_status();
}
