/* The stubs dlopen's and dlmopen's GOT slots lead to once the library
 * routes a process (route.c says why and how): they save the argument
 * registers, ask route_dl_enter what to do, and either jump to the real
 * function (the caller's return address possibly replaced by the address
 * of its call instruction) or, when this is that call instruction run
 * again after the real function returned, return its result to the
 * caller.  Hidden: nothing binds to them by name. */

	.text
	.globl route_dlopen_stub, route_dlmopen_stub
	.hidden route_dlopen_stub, route_dlmopen_stub, route_dl_enter

	.p2align 4
	.type route_dlopen_stub, @function
route_dlopen_stub:
	.cfi_startproc
	endbr64
	xor %r11d, %r11d		/* DL_OPEN */
	jmp 1f
	.cfi_endproc
	.size route_dlopen_stub, . - route_dlopen_stub

	.p2align 4
	.type route_dlmopen_stub, @function
route_dlmopen_stub:
	.cfi_startproc
	endbr64
	mov $1, %r11d			/* DL_MOPEN */
1:	/* rsp = E, [E] = the caller's return address; E % 16 == 8 */
	push %rdi
	.cfi_adjust_cfa_offset 8
	push %rsi
	.cfi_adjust_cfa_offset 8
	push %rdx
	.cfi_adjust_cfa_offset 8
	push %rcx
	.cfi_adjust_cfa_offset 8
	push %r8
	.cfi_adjust_cfa_offset 8
	push %r9
	.cfi_adjust_cfa_offset 8
	push %rax			/* the real function's result, on its return */
	.cfi_adjust_cfa_offset 8
	lea 56(%rsp), %rdi		/* E */
	mov %r11d, %esi
	call route_dl_enter		/* rsp % 16 == 0 here */
	mov %rax, %r11
	pop %rax
	.cfi_adjust_cfa_offset -8
	pop %r9
	.cfi_adjust_cfa_offset -8
	pop %r8
	.cfi_adjust_cfa_offset -8
	pop %rcx
	.cfi_adjust_cfa_offset -8
	pop %rdx
	.cfi_adjust_cfa_offset -8
	pop %rsi
	.cfi_adjust_cfa_offset -8
	pop %rdi
	.cfi_adjust_cfa_offset -8
	test %r11, %r11
	jz 2f
	jmp *%r11			/* the real dlopen or dlmopen */
2:	ret				/* the real one returned: rax is its result */
	.cfi_endproc
	.size route_dlmopen_stub, . - route_dlmopen_stub

	.section .note.GNU-stack, "", @progbits
