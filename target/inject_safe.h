/* The injector's judgements, pure so that they are unit-tested on
 * synthetic input (tests/unit/test_inject.c): whether a stopped thread is
 * at a point where it may call pthread_create (it holds no lock the call
 * needs and is not inside a signal handler), and whether a process's
 * seccomp filters let through every system call the injection and the
 * library's load make.  inject.c gathers the input (registers, stack
 * words, mappings, filters) and acts on the verdicts. */
#ifndef DWLEAK_INJECT_SAFE_H
#define DWLEAK_INJECT_SAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>

struct inject_range {
	uint64_t lo, hi; /* [lo, hi) */
};

#define INJECT_RANGES_MAX 16

/* Where a thread must not be for the call, and how to recognise a signal
 * frame on its stack. */
struct inject_layout {
	/* every mapping of libc.so.6 and of the dynamic linker: code whose
	 * locks pthread_create may need, data holding those locks */
	struct inject_range libc[INJECT_RANGES_MAX], loader[INJECT_RANGES_MAX];
	size_t nlibc, nloader;
	/* code that may hold the allocator's locks: libc's malloc functions
	 * (the span of its exported ones: malloc.c is one unit), the text of
	 * a library that defines malloc (jemalloc, tcmalloc, mimalloc) */
	struct inject_range alloc[INJECT_RANGES_MAX];
	size_t nalloc;
	/* libc's __restore_rt (mov $15,%rax; syscall): the return address at
	 * the top of every rt_sigframe */
	uint64_t restore_rt[4];
	size_t nrestore;
	/* bytes of stack the call needs below the thread's stack pointer */
	uint64_t stack_need;
};

/* One thread, stopped (PTRACE_INTERRUPT): its registers and the live
 * words of its stack, from its stack pointer up. */
struct inject_thread_view {
	uint64_t rip, rsp, rax;
	int64_t orig_rax;     /* >= 0: stopped in (or right after) a system call */
	uint64_t args[6];     /* rdi, rsi, rdx, r10, r8, r9 */
	const uint64_t *stack;
	size_t nstack;
	uint64_t stack_room;  /* bytes of its stack mapping below rsp */
};

/* X(id, why): each verdict and the reason it gives, for messages. */
#define INJECT_VERDICTS(X)                                                                    \
	X(INJECT_SAFE, "at a safe point")                                                       \
	X(INJECT_IN_LIBC, "running inside libc")                                                \
	X(INJECT_IN_LOADER, "running inside the dynamic linker")                                \
	X(INJECT_IN_ALLOCATOR, "running inside the allocator")                                  \
	X(INJECT_SYSCALL_BUSY, "in a system call that is not a wait")                           \
	X(INJECT_LOCK_WAIT, "waiting for a lock of libc or the dynamic linker")                 \
	X(INJECT_MASK_SWAPPED, "waiting with a temporary signal mask")                          \
	X(INJECT_SIGNAL_HANDLER, "inside a signal handler")                                     \
	X(INJECT_ALLOCATOR_ON_STACK, "called from the allocator (a return address into it on its stack)") \
	X(INJECT_STACK_LOW, "too close to the end of its stack")

#define INJECT_VERDICT_ENUM(id, why) id,
enum inject_verdict { INJECT_VERDICTS(INJECT_VERDICT_ENUM) INJECT_VERDICT_COUNT };
#undef INJECT_VERDICT_ENUM

/* The reason a verdict gives ("running inside libc"). */
const char *inject_verdict_why(enum inject_verdict v);

/*
 * Whether thread T may make the remote call, given L:
 * - stopped in a system call that waits (read, recv*, poll, select,
 *   epoll_wait, nanosleep, clock_nanosleep, accept, wait4, waitid, pause;
 *   futex only on a word outside libc's and the loader's mappings: a
 *   program's mutex or condition, not a lock of theirs), not one that
 *   swaps the signal mask while it waits (rt_sigsuspend,
 *   rt_sigtimedwait, ppoll/pselect6/epoll_pwait with a mask: the mask to
 *   restore would be lost), or
 * - running its own code (rip outside libc, the loader and the allocator);
 * and in both cases no __restore_rt on its live stack (a signal handler
 * may have interrupted code holding a lock), no return address into the
 * allocator (it may hold the allocator's lock below; not looked for in a
 * thread blocked in a wait no allocator makes: read, poll, accept...),
 * and enough stack below rsp.
 */
enum inject_verdict inject_thread_judge(const struct inject_thread_view *t, const struct inject_layout *l);

/* Whether system call NR with ARGS is a wait the call may interrupt
 * (INJECT_SAFE), else why not. */
enum inject_verdict inject_syscall_judge(int64_t nr, const uint64_t args[6], const struct inject_layout *l);

/*
 * The interrupted pc of the rt_sigframe whose return address is
 * STACK[I] (the frame's uc_mcontext rip: 176 bytes above it).  Returns
 * false when the frame does not fit in STACK[0..N).
 */
bool inject_sigframe_rip(const uint64_t *stack, size_t n, size_t i, uint64_t *rip);

/* Whether A lies in one of R[0..N). */
bool inject_in_ranges(const struct inject_range *r, size_t n, uint64_t a);

/* --- seccomp ---
 * The system calls the injection makes in the chosen thread and that the
 * library's load makes in the new one, with realistic arguments.  MUST:
 * the injection cannot work when a filter denies it; SOFT: glibc or the
 * library goes on when it fails (rseq, set_robust_list, madvise...).
 * Any call a filter would kill or trap on refuses the injection. */
enum inject_need { INJECT_NEED_MUST, INJECT_NEED_SOFT };

struct inject_call {
	int nr;
	uint64_t args[6];
	enum inject_need need;
	bool at_cave; /* made from the cave's syscall instruction (else from libc's code) */
	const char *what;
};

/* The calls (static data); *N gets their number. */
const struct inject_call *inject_calls(size_t *n);

/*
 * Judges the process's filters PROGS[0..NPROGS) (each LENS[i]
 * instructions, as PTRACE_SECCOMP_GET_FILTER gives them) for every call
 * of inject_calls, made from CAVE_IP or LIBC_IP.  Returns 0 when the
 * injection may go on, -EPERM when a filter would stop it, with WHY
 * (WHYLEN bytes) saying which call and how, or -EINVAL when a filter
 * cannot be evaluated (WHY says which).
 */
int inject_seccomp_judge(const struct sock_filter *const *progs, const size_t *lens, size_t nprogs, uint64_t cave_ip,
			 uint64_t libc_ip, char *why, size_t whylen);

#endif
