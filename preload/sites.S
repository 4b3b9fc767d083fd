/* The preload library's two probe sites (bpf/abi/preload.h says what
 * their arguments are), their USDT notes and semaphores.
 *
 * Each site is a function of its own whose first instruction is the
 * 5-byte NOP `nopl 0x0(%rax,%rax,1)` (0f 1f 44 00 00), written as bytes:
 * assemblers shorten the displacement-0 form to 4 bytes.  Linux 6.18
 * optimizes a uprobe on exactly that NOP once it was hit (commit
 * ba2bfc97b462 "uprobes/x86: Add support to optimize uprobes"; can_optimize()
 * in arch/x86/kernel/uprobes.c compares the probed bytes with x86_nops[5]
 * and wants all 5 on one page): it rewrites it into `call` to its
 * [uprobes-trampoline] page, which saves rcx, r11 and rax on the stack and
 * enters the kernel with the `uprobe` system call (336 on x86_64), no trap.
 *
 * That call writes below the stack pointer: 8 bytes of return address,
 * then 24 of saved registers, so it clobbers the red zone (the 128 bytes
 * below rsp that x86-64 leaf functions use without moving rsp) of the
 * function holding the NOP.  Here nothing lives there: the NOP is the
 * first instruction of a function reached by `call`, so at the NOP rsp
 * points at that call's return address and every byte below belongs to
 * no one (the caller made a call, and a call leaves nothing live below
 * the caller's rsp either, by the psABI); the site functions touch no
 * register and no memory.  tests/preload_red_zone.sh shows a function
 * with live red-zone data next to a site staying correct while the site is
 * hot, and the same data clobbered at a NOP placed inline, as a check that
 * the test can see it.
 *
 * Seccomp: the same kernel excepts `uprobe` (and `uretprobe`, 335) from
 * every seccomp filter ("seccomp: passthrough uprobe systemcall without
 * filtering", merged with the optimization: seccomp_uprobe_exception() in
 * seccomp_is_const_allow(), and strict mode's list), so a filter that
 * denies system calls it does not know cannot break a hot site: measured
 * with filters denying 335 and 336 by errno and by killing
 * (tests/preload_seccomp.sh).  Called from anywhere but a trampoline the
 * system call fails with ENXIO; it is never called from here.
 *
 * Fork: the trampoline page is VM_DONTCOPY, the call to it is not (see
 * boot.c for what the library does about it).
 *
 * aarch64 (issue 26): the site is `nop` then `ret`.  arm64 has no
 * optimized uprobes: a probe there is a BRK trap, and the kernel emulates
 * a probed `nop` (arch/arm64/kernel/probes/simulate-insn.c: simulate_nop)
 * instead of single-stepping it out of line, the cheaper of its two
 * paths.  Nothing is written below sp, and the call that reached the site
 * put its return address in x30, which the site's `ret` uses.
 *
 * The notes follow SystemTap's sys/sdt.h layout (what bpftrace usdt:,
 * perf and libbpf read): type 3, name "stapsdt", then the site's address,
 * the address of .stapsdt.base (for prelinked objects), the semaphore's
 * address, provider, name and argument string.  The semaphores are the
 * 2-byte counters the kernel increments in every process a probe with
 * ref_ctr_offset is attached to; they sit in .probes, a writable section
 * with file contents (the kernel finds a counter by its file offset in a
 * private writable file mapping, so not in .bss).  The library fires a
 * site only while its semaphore is non-zero.
 */

#if defined(__x86_64__)
/* written as bytes: an assembler shortens the displacement-0 form */
#define SITE_NOP .byte 0x0f, 0x1f, 0x44, 0x00, 0x00
#define SITE_RET ret
#define SITE_ALIGN 4	/* 16 bytes: the 5-byte NOP then never crosses a page */
#define ALLOC_ARGS "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9"
#define FREE_ARGS "8@%rdi 8@%rsi"
#elif defined(__aarch64__)
#define SITE_NOP nop
#define SITE_RET ret
#define SITE_ALIGN 2
#define ALLOC_ARGS "8@x0 8@x1 8@x2 8@x3 8@x4 8@x5"
#define FREE_ARGS "8@x0 8@x1"
#else
#error "the preload library's sites are written for x86_64 and aarch64"
#endif

/* SITE(symbol, probe name, semaphore, argument string) */
.macro SITE sym, name, sem, args
	.text
	.p2align SITE_ALIGN
	.globl \sym
	.hidden \sym
	.type \sym, %function
\sym:
	.cfi_startproc
990:	SITE_NOP
	SITE_RET
	.cfi_endproc
	.size \sym, . - \sym

	.pushsection .note.stapsdt, "", "note"
	.balign 4
	.4byte 992f - 991f, 994f - 993f, 3
991:	.asciz "stapsdt"
992:	.balign 4
993:	.8byte 990b
	.8byte _.stapsdt.base
	.8byte \sem
	.asciz "dwleak"
	.asciz "\name"
	.asciz "\args"
994:	.balign 4
	.popsection

	.pushsection .probes, "aw", %progbits
	.balign 2
	.globl \sem
	.hidden \sem
	.type \sem, %object
\sem:	.2byte 0
	.size \sem, 2
	.popsection
.endm

SITE dwleak_site_alloc, alloc, dwleak_alloc_semaphore, ALLOC_ARGS
SITE dwleak_site_free, free, dwleak_free_semaphore, FREE_ARGS

	.pushsection .stapsdt.base, "aG", %progbits, .stapsdt.base, comdat
	.weak _.stapsdt.base
	.hidden _.stapsdt.base
_.stapsdt.base:
	.space 1
	.size _.stapsdt.base, 1
	.popsection

	.section .note.GNU-stack, "", %progbits
