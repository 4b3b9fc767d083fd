/* The injector's pure judgements (inject_safe.h): a thread's safe point,
 * and the seccomp filters against the calls the injection makes. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <linux/audit.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "inject_safe.h"
#include "seccomp_eval.h"

#define INJECT_VERDICT_WHY(id, why) [id] = why,
static const char *const verdict_why[] = { INJECT_VERDICTS(INJECT_VERDICT_WHY) };
#undef INJECT_VERDICT_WHY

const char *inject_verdict_why(enum inject_verdict v)
{
	return (unsigned)v < INJECT_VERDICT_COUNT ? verdict_why[v] : "?";
}

bool inject_in_ranges(const struct inject_range *r, size_t n, uint64_t a)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (a >= r[i].lo && a < r[i].hi)
			return true;
	return false;
}

/* The kernel's "interrupted, restart me" codes, as a syscall's rax. */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

enum inject_verdict inject_syscall_judge(int64_t nr, const uint64_t args[6], const struct inject_layout *l)
{
	switch (nr) {
	case SYS_read:
	case SYS_readv:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_recvmmsg:
	case SYS_poll:
	case SYS_select:
	case SYS_epoll_wait:
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
	case SYS_accept:
	case SYS_accept4:
	case SYS_wait4:
	case SYS_waitid:
	case SYS_pause:
		return INJECT_SAFE;
	case SYS_ppoll:
		return args[3] ? INJECT_MASK_SWAPPED : INJECT_SAFE;
	case SYS_epoll_pwait:
	case SYS_epoll_pwait2:
		return args[4] ? INJECT_MASK_SWAPPED : INJECT_SAFE;
	case SYS_pselect6:
		return args[5] ? INJECT_MASK_SWAPPED : INJECT_SAFE; /* a {sigset, size} pair, or NULL */
	case SYS_rt_sigsuspend:
	case SYS_rt_sigtimedwait:
		return INJECT_MASK_SWAPPED;
	case SYS_futex:
		/* libc's and the loader's own locks live in their data; a
		 * program's mutexes and conditions elsewhere */
		if (inject_in_ranges(l->libc, l->nlibc, args[0]) || inject_in_ranges(l->loader, l->nloader, args[0]))
			return INJECT_LOCK_WAIT;
		return INJECT_SAFE;
	default:
		return INJECT_SYSCALL_BUSY;
	}
}

static bool restart_code(uint64_t rax)
{
	int64_t r = (int64_t)rax;

	return r == -ERESTARTSYS || r == -ERESTARTNOINTR || r == -ERESTARTNOHAND || r == -ERESTART_RESTARTBLOCK;
}

/* Whether an allocator may wait in system call NR while it holds one of
 * its locks: a spin lock's back-off sleeps (tcmalloc's), a mutex waits in
 * futex.  No allocator reads, polls or accepts: threads blocked there are
 * not searched for allocator frames, whose stale copies in unused stack
 * slots (a buffer read() fills) would refuse every thread. */
static bool allocator_may_wait_in(int64_t nr)
{
	return nr == SYS_futex || nr == SYS_nanosleep || nr == SYS_clock_nanosleep || nr == SYS_sched_yield;
}

enum inject_verdict inject_thread_judge(const struct inject_thread_view *t, const struct inject_layout *l)
{
	enum inject_verdict v;
	bool scan_alloc = true;
	size_t i, k;

	if (t->orig_rax >= 0 && restart_code(t->rax)) {
		scan_alloc = allocator_may_wait_in(t->orig_rax);
		v = inject_syscall_judge(t->orig_rax, t->args, l);
		if (v != INJECT_SAFE)
			return v;
	} else if (inject_in_ranges(l->libc, l->nlibc, t->rip)) {
		return INJECT_IN_LIBC;
	} else if (inject_in_ranges(l->loader, l->nloader, t->rip)) {
		return INJECT_IN_LOADER;
	} else if (inject_in_ranges(l->alloc, l->nalloc, t->rip)) {
		return INJECT_IN_ALLOCATOR;
	}
	for (i = 0; i < t->nstack; i++) {
		for (k = 0; k < l->nrestore; k++)
			if (t->stack[i] == l->restore_rt[k])
				return INJECT_SIGNAL_HANDLER;
		if (scan_alloc && inject_in_ranges(l->alloc, l->nalloc, t->stack[i]))
			return INJECT_ALLOCATOR_ON_STACK;
	}
	if (t->stack_room < l->stack_need)
		return INJECT_STACK_LOW;
	return INJECT_SAFE;
}

bool inject_sigframe_rip(const uint64_t *stack, size_t n, size_t i, uint64_t *rip)
{
	/* struct rt_sigframe { char *pretcode; struct ucontext uc; ... }:
	 * uc_flags, uc_link, uc_stack (24 bytes), then uc_mcontext.gregs[],
	 * REG_RIP the 17th (x86_64 sigcontext: r8..r15, rdi, rsi, rbp, rbx,
	 * rdx, rax, rcx, rsp, rip) */
	size_t at = i + 1 + 5 + 16;

	if (i >= n || at >= n)
		return false;
	*rip = stack[at];
	return true;
}

/* --- seccomp --- */

#define MMAP_ANON (MAP_PRIVATE | MAP_ANONYMOUS)
#define RTLD_FILE_MAP (MAP_PRIVATE | MAP_DENYWRITE)

static const struct inject_call calls[] = {
	/* the injector's own, from the cave */
	{ SYS_mmap, { 0, 0x8000, PROT_READ | PROT_WRITE, MMAP_ANON, (uint64_t)-1, 0 }, INJECT_NEED_MUST, true,
	  "mmap of the injector's data page" },
	{ SYS_rt_sigprocmask, { 2, 0, 0, 8, 0, 0 }, INJECT_NEED_MUST, true, "rt_sigprocmask restoring the thread's mask" },
	/* pthread_create in the chosen thread */
	{ SYS_rt_sigaction, { 33, 0, 0, 8, 0, 0 }, INJECT_NEED_SOFT, false, "rt_sigaction (glibc's first thread)" },
	{ SYS_rt_sigprocmask, { 0, 0, 0, 8, 0, 0 }, INJECT_NEED_MUST, false, "rt_sigprocmask" },
	{ SYS_mmap, { 0, 0x801000, PROT_NONE, MMAP_ANON | MAP_STACK, (uint64_t)-1, 0 }, INJECT_NEED_MUST, false,
	  "mmap of a thread stack" },
	{ SYS_mprotect, { 0, 0x800000, PROT_READ | PROT_WRITE, 0, 0, 0 }, INJECT_NEED_MUST, false,
	  "mprotect of a thread stack" },
	{ SYS_clone3, { 0, 88, 0, 0, 0, 0 }, INJECT_NEED_MUST, false, "clone3" },
	/* the new thread's start and the library's load */
	{ SYS_rseq, { 0, 0x20, 0, 0x53053053, 0, 0 }, INJECT_NEED_SOFT, false, "rseq" },
	{ SYS_set_robust_list, { 0, 24, 0, 0, 0, 0 }, INJECT_NEED_SOFT, false, "set_robust_list" },
	{ SYS_rt_sigprocmask, { 2, 0, 0, 8, 0, 0 }, INJECT_NEED_MUST, false, "rt_sigprocmask (SIG_SETMASK)" },
	{ SYS_mmap, { 0, 0x8000000, PROT_NONE, MMAP_ANON | MAP_NORESERVE, (uint64_t)-1, 0 }, INJECT_NEED_MUST, false,
	  "mmap of a malloc arena" },
	{ SYS_munmap, { 0, 0x1000000, 0, 0, 0, 0 }, INJECT_NEED_MUST, false, "munmap" },
	{ SYS_mprotect, { 0, 0x21000, PROT_READ | PROT_WRITE, 0, 0, 0 }, INJECT_NEED_MUST, false,
	  "mprotect of a malloc arena" },
	{ SYS_openat, { (uint64_t)-100, 0, 02000000 /* O_RDONLY|O_CLOEXEC */, 0, 0, 0 }, INJECT_NEED_MUST, false,
	  "openat of the library" },
	{ SYS_read, { 3, 0, 832, 0, 0, 0 }, INJECT_NEED_MUST, false, "read of its ELF header" },
	{ SYS_newfstatat, { 3, 0, 0, 0x1000 /* AT_EMPTY_PATH */, 0, 0 }, INJECT_NEED_MUST, false, "newfstatat" },
	{ SYS_mmap, { 0, 0x10000, PROT_READ, RTLD_FILE_MAP, 3, 0 }, INJECT_NEED_MUST, false, "mmap of the library" },
	{ SYS_mmap, { 0, 0x4000, PROT_READ | PROT_EXEC, RTLD_FILE_MAP | MAP_FIXED, 3, 0x2000 }, INJECT_NEED_MUST, false,
	  "mmap of the library's code" },
	{ SYS_mmap, { 0, 0x2000, PROT_READ | PROT_WRITE, RTLD_FILE_MAP | MAP_FIXED, 3, 0x8000 }, INJECT_NEED_MUST, false,
	  "mmap of the library's data" },
	{ SYS_mmap, { 0, 0x1000, PROT_READ | PROT_WRITE, MMAP_ANON | MAP_FIXED, (uint64_t)-1, 0 }, INJECT_NEED_MUST,
	  false, "mmap of the library's bss" },
	{ SYS_close, { 3, 0, 0, 0, 0, 0 }, INJECT_NEED_MUST, false, "close" },
	{ SYS_mprotect, { 0, 0x1000, PROT_READ, 0, 0, 0 }, INJECT_NEED_MUST, false, "mprotect of RELRO" },
	{ SYS_mprotect, { 0, 0x4000, PROT_READ | PROT_WRITE, 0, 0, 0 }, INJECT_NEED_MUST, false,
	  "mprotect of a GOT while routing" },
	{ SYS_futex, { 0, FUTEX_WAKE_OP_PRIVATE, 0, 0, 0, 0 }, INJECT_NEED_MUST, false, "futex (WAKE_OP: RELRO's state)" },
	{ SYS_futex, { 0, FUTEX_WAIT_PRIVATE, 2, 0, 0, 0 }, INJECT_NEED_MUST, false, "futex (a lock)" },
	{ SYS_futex, { 0, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0 }, INJECT_NEED_MUST, false, "futex (a lock)" },
	{ SYS_madvise, { 0, 0x1000, MADV_WIPEONFORK, 0, 0, 0 }, INJECT_NEED_SOFT, false, "madvise (MADV_WIPEONFORK)" },
	{ SYS_getrandom, { 0, 8, 1 /* GRND_NONBLOCK */, 0, 0, 0 }, INJECT_NEED_SOFT, false, "getrandom (malloc)" },
	{ SYS_mincore, { 0, 0x1000, 0, 0, 0, 0 }, INJECT_NEED_SOFT, false, "mincore (the sites' check)" },
	{ SYS_madvise, { 0, 0x7fb000, MADV_DONTNEED, 0, 0, 0 }, INJECT_NEED_SOFT, false, "madvise (a thread's end)" },
	{ SYS_exit, { 0, 0, 0, 0, 0, 0 }, INJECT_NEED_MUST, false, "exit (the new thread's end)" },
};

const struct inject_call *inject_calls(size_t *n)
{
	*n = sizeof(calls) / sizeof(calls[0]);
	return calls;
}

static const char *fate_name(enum seccomp_fate f)
{
	return f == SECCOMP_KILLS ? "kill the process" : f == SECCOMP_SIGNALS ? "send it SIGSYS" : "fail";
}

int inject_seccomp_judge(const struct sock_filter *const *progs, const size_t *lens, size_t nprogs, uint64_t cave_ip,
			 uint64_t libc_ip, char *why, size_t whylen)
{
	const struct inject_call *c;
	size_t ncalls, i, k;
	bool clone_fallback = false;

	c = inject_calls(&ncalls);
	for (i = 0; i < ncalls; i++) {
		struct seccomp_eval_data d = { .nr = c[i].nr, .arch = AUDIT_ARCH_X86_64,
					       .ip = c[i].at_cave ? cave_ip : libc_ip };
		uint32_t all = SECCOMP_RET_ALLOW, ret;
		enum seccomp_fate fate;
		int err;

		memcpy(d.args, c[i].args, sizeof(d.args));
		for (k = 0; k < nprogs; k++) {
			if (seccomp_eval(progs[k], lens[k], &d, &ret)) {
				snprintf(why, whylen, "seccomp filter %zu of %zu cannot be evaluated", k + 1, nprogs);
				return -EINVAL;
			}
			all = seccomp_eval_combine(all, ret);
		}
		fate = seccomp_fate_of(all, &err);
		if (fate == SECCOMP_RUNS)
			continue;
		/* glibc falls back to clone when clone3 fails with ENOSYS */
		if (c[i].nr == SYS_clone3 && fate == SECCOMP_FAILS && err == ENOSYS && !clone_fallback) {
			struct seccomp_eval_data cl = { .nr = SYS_clone, .arch = AUDIT_ARCH_X86_64, .ip = libc_ip,
							.args = { 0x3d0f00 /* pthread_create's flags */ } };

			all = SECCOMP_RET_ALLOW;
			for (k = 0; k < nprogs; k++)
				if (!seccomp_eval(progs[k], lens[k], &cl, &ret))
					all = seccomp_eval_combine(all, ret);
			clone_fallback = seccomp_fate_of(all, NULL) == SECCOMP_RUNS;
			if (clone_fallback)
				continue;
			snprintf(why, whylen, "a seccomp filter denies clone3 (ENOSYS) and clone");
			return -EPERM;
		}
		if (fate == SECCOMP_FAILS && c[i].need == INJECT_NEED_SOFT)
			continue;
		if (fate == SECCOMP_FAILS)
			snprintf(why, whylen, "a seccomp filter makes %s fail (%s)", c[i].what,
				 err ? strerrorname_np(err) ?: "an errno" : "a supervisor answers");
		else
			snprintf(why, whylen, "a seccomp filter would %s at %s", fate_name(fate), c[i].what);
		return -EPERM;
	}
	return 0;
}
