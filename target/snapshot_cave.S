/* The code the leak check's snapshot (snapshot.c) places in a process's
 * cave (cave.h): one system call in a stopped thread, set up through
 * ptrace (rax, the arguments, rip at an entry), watched with PTRACE_SYSCALL
 * and taken back by dwleak at its syscall-exit stop.  Should dwleak die
 * first (SIGKILL), the thread falls through: its signal mask and
 * registers from the cave's slots, and on where it was (SNAP_RESUME: the
 * system call it was interrupted in made again).  Data here, never run in
 * dwleak.  Two entries:
 *
 *  snapshot_cave_clone    clone(); in the copy (rax 0), exit_group(0)
 *          at once: a copy whose tracer is gone must never run the
 *          program (a second server on the same sockets)
 *  snapshot_cave_syscall  any other call (wait4) */
#include "inject_abi.h"
#include "snapshot_abi.h"
#include "cave_macros.inc"

	.section .rodata.dwleak_snapshot_cave, "a", @progbits
	.balign 64
	.globl snapshot_cave_start, snapshot_cave_end, snapshot_cave_clone, snapshot_cave_syscall
	.hidden snapshot_cave_start, snapshot_cave_end, snapshot_cave_clone, snapshot_cave_syscall
snapshot_cave_start:
.Lcave:
	.ascii "dwlksnp1"
	.fill SNAP_CODE - 8, 1, 0

snapshot_cave_clone:
	syscall
	test %rax, %rax
	jnz .Lrestore
	mov $231, %eax			/* exit_group(0) */
	xor %edi, %edi
	syscall
	mov $60, %eax			/* exit(0), should a filter fail exit_group */
	xor %edi, %edi
	syscall
1:	pause
	jmp 1b

snapshot_cave_syscall:
	syscall
.Lrestore:
	SETMASK (.Lcave + SNAP_SIGMASK)(%rip)
	syscall
	lea (.Lcave + SNAP_REGS)(%rip), %rax
	RESTORE (.Lcave + SNAP_RESUME)
	.balign 8
snapshot_cave_end:

	.section .note.GNU-stack, "", @progbits
