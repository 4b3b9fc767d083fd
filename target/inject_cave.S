/* The code the injector (inject.c) copies into a target process's
 * executable padding, the "cave": position independent, every address
 * through the cave's slots (rip-relative) or the data page.  It is data
 * here (never run in dwleak).  Three entries:
 *
 *  inject_cave_syscall  one system call the injector makes in the chosen
 *          thread (rax and the arguments set through ptrace), watched
 *          with PTRACE_SYSCALL; the injector takes the thread back at the
 *          syscall-exit stop.  Should the injector die first (SIGKILL),
 *          the thread falls through to the first restore: its signal mask
 *          and registers from the cave (CAVE_SIGMASK_A, CAVE_REGS_A, the
 *          FPU state never changed), and on where it was (CAVE_RESUME_A).
 *  inject_cave_call     the remote call, pthread_create(D_THREAD, NULL,
 *          inject_cave_thread, data); then the mask is restored by a
 *          system call, the marker the injector waits for: it restores the
 *          thread itself at that syscall-entry stop, exactly (see
 *          inject.c).  Should it have died, the thread restores itself:
 *          its FPU/SSE/AVX state (xrstor, D_XSAVE), its registers
 *          (D_REGS), on to CAVE_RESUME_B.
 *  inject_cave_thread   the new thread: dlopen(D_PATH, RTLD_NOW), dlsym of
 *          the entry, the entry called, the outcome in D_STATUS (last),
 *          the thread detached; it returns and ends as any thread.
 *
 * The restore is cave_macros.inc's. */
#include "inject_abi.h"

#include "cave_macros.inc"


	.section .rodata.dwleak_inject_cave, "a", @progbits
	.balign 64
	.globl inject_cave_start, inject_cave_end
	.globl inject_cave_syscall, inject_cave_call, inject_cave_marker, inject_cave_thread
	.hidden inject_cave_start, inject_cave_end
	.hidden inject_cave_syscall, inject_cave_call, inject_cave_marker, inject_cave_thread
inject_cave_start:
.Lcave:
	.ascii "dwlkcav1"
	.fill CAVE_CODE - 8, 1, 0

inject_cave_syscall:
	syscall
	SETMASK (.Lcave + CAVE_SIGMASK_A)(%rip)
	syscall
	lea (.Lcave + CAVE_REGS_A)(%rip), %rax
	RESTORE (.Lcave + CAVE_RESUME_A)

inject_cave_call:
	call *(.Lcave + CAVE_CREATE)(%rip)
	mov (.Lcave + CAVE_DATA)(%rip), %r11
	mov %eax, D_CREATE_RC(%r11)
	movl $1, D_CREATE_DONE(%r11)
	SETMASK D_SIGMASK(%r11)
inject_cave_marker:
	syscall
	mov (.Lcave + CAVE_DATA)(%rip), %r11
	mov $-1, %eax
	mov $-1, %edx
	xrstor64 D_XSAVE(%r11)
	lea D_REGS(%r11), %rax
	RESTORE (.Lcave + CAVE_RESUME_B)

inject_cave_thread:
	endbr64
	push %rbx			/* rsp % 16 == 0 from here */
	mov %rdi, %rbx
	lea D_PATH(%rbx), %rdi
	mov $2, %esi			/* RTLD_NOW; RTLD_LOCAL: nothing of it enters the global scope */
	call *D_DLOPEN(%rbx)
	test %rax, %rax
	jz 3f
	mov %rax, D_HANDLE(%rbx)
	mov %rax, %rdi
	lea D_SYM(%rbx), %rsi
	call *D_DLSYM(%rbx)
	test %rax, %rax
	jz 2f
	call *%rax
	mov %eax, D_ENTRY_RC(%rbx)
	mov $INJECT_ST_OK, %eax
	jmp 5f
2:	mov $INJECT_ST_NO_ENTRY, %eax
	jmp 5f
3:	call *D_DLERROR(%rbx)
	test %rax, %rax
	jz 4f
	lea D_ERR(%rbx), %rdi
	mov $D_ERR_MAX - 1, %ecx
1:	movzbl (%rax), %edx
	mov %dl, (%rdi)
	test %dl, %dl
	jz 4f
	inc %rax
	inc %rdi
	dec %ecx
	jnz 1b
	movb $0, (%rdi)
4:	mov $INJECT_ST_DLOPEN_FAILED, %eax
5:	push %rax			/* the status */
	sub $8, %rsp
	call *D_PTHREAD_SELF(%rbx)
	mov %rax, %rdi
	call *D_PTHREAD_DETACH(%rbx)	/* no one joins it: its end frees it */
	add $8, %rsp
	pop %rax
	mov %eax, D_STATUS(%rbx)	/* last: the injector waits for it */
	pop %rbx
	xor %eax, %eax
	ret
	.balign 8
inject_cave_end:

	.section .note.GNU-stack, "", @progbits
