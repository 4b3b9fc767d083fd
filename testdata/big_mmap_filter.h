/* The seccomp filter two test programs install (sig_in_malloc, seccomp_late):
 * ACTION (SECCOMP_RET_TRAP, SECCOMP_RET_KILL_PROCESS...) for every
 * mmap(len >= 1 MiB, flags == MAP_PRIVATE | MAP_ANONYMOUS), what glibc's
 * malloc maps for a large block and what the preload library maps for a
 * thread's ring; everything else allowed.  Header-only: each program is
 * one file. */
#ifndef DWLEAK_TESTDATA_BIG_MMAP_FILTER_H
#define DWLEAK_TESTDATA_BIG_MMAP_FILTER_H

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Installs it (no_new_privs first), with prctl(PR_SET_SECCOMP), or with
 * syscall(SYS_seccomp) when VIA_SYSCALL (libseccomp's way).  Returns 0 or
 * -1 with errno. */
static inline int big_mmap_filter_install(uint32_t action, int via_syscall)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 1u << 20, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MAP_PRIVATE | MAP_ANONYMOUS, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, action),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	if (via_syscall)
		return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

#endif
