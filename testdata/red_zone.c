/* The red zone next to a probe site, for tests/preload_red_zone.sh.
 * Linux 6.18 makes a hot uprobe on a 5-byte NOP a `call` to its
 * trampoline, which writes below rsp: it clobbers the x86-64 red zone
 * (the 128 bytes below rsp a leaf function may use without moving rsp)
 * of the function holding the NOP.
 *
 * leaf_inline (the control): a leaf that keeps 16 words in its red zone
 * across a NOP placed inline, as a USDT probe normally is (note
 * redzone:inline).  With that site hot, the trampoline's call clobbers
 * some of them: the test can see it.
 *
 * user_site (the preload library's way): the same 16 words, live across a
 * call of dwleak_site_alloc, the library's own site (preload/sites.S,
 * linked in: note dwleak:alloc), a function whose first instruction is
 * the NOP.  A function that makes a call keeps nothing in its red zone
 * across it (the psABI), so the compiler moves rsp below its words first,
 * and the trampoline's writes land below them.
 *
 * usage: red_zone SECONDS.  Waits until a tracer attached to dwleak:alloc
 * (its semaphore), then calls both for SECONDS and prints how many calls
 * found their words changed, and whether the trampoline is mapped (the
 * sites were hot and optimized, not trapped). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void dwleak_site_alloc(void *ptr, uint64_t size, uint64_t kind, void *real, uint64_t caller_sp);
extern volatile uint16_t dwleak_alloc_semaphore;

/* long leaf_inline(long seed): writes seed+1 .. seed+16 at -8 .. -128
 * (%rsp), passes the inline NOP, returns how many words changed. */
__asm__(".text\n"
	".globl leaf_inline\n"
	".type leaf_inline, @function\n"
	".p2align 4\n"
	"leaf_inline:\n"
	".cfi_startproc\n"
	".irp i, 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\n"
	"	lea \\i(%rdi), %rdx\n"
	"	mov %rdx, -(\\i*8)(%rsp)\n"
	".endr\n"
	"990:	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"	xor %eax, %eax\n"
	".irp i, 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\n"
	"	lea \\i(%rdi), %rdx\n"
	"	cmp %rdx, -(\\i*8)(%rsp)\n"
	"	setne %cl\n"
	"	movzbl %cl, %ecx\n"
	"	add %rcx, %rax\n"
	".endr\n"
	"	ret\n"
	".cfi_endproc\n"
	".size leaf_inline, . - leaf_inline\n"
	".pushsection .note.stapsdt, \"\", \"note\"\n"
	".balign 4\n"
	".4byte 992f - 991f, 994f - 993f, 3\n"
	"991: .asciz \"stapsdt\"\n"
	"992: .balign 4\n"
	"993: .8byte 990b\n"
	".8byte _.stapsdt.base\n"
	".8byte 0\n"
	".asciz \"redzone\"\n"
	".asciz \"inline\"\n"
	".asciz \"\"\n"
	"994: .balign 4\n"
	".popsection\n");
long leaf_inline(long seed);

/* The same words, in a C function that calls the site in between. */
__attribute__((noinline)) long user_site(long seed)
{
	volatile long words[16];
	long bad = 0;
	int i;

	for (i = 0; i < 16; i++)
		words[i] = seed + i + 1;
	dwleak_site_alloc((void *)1, 16, 0, (void *)user_site, 0);
	for (i = 0; i < 16; i++)
		bad += words[i] != seed + i + 1;
	return bad;
}

static int trampoline_mapped(void)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, "[uprobes-trampoline]") != NULL;
	if (f)
		fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2;
	long calls = 0, bad_inline = 0, bad_site = 0, seed = 1000;
	struct timespec t0, t;

	for (int i = 0; i < 3000 && !dwleak_alloc_semaphore; i++)
		usleep(10000);
	if (!dwleak_alloc_semaphore) {
		printf("red_zone: no tracer attached to dwleak:alloc\n");
		return 2;
	}
	usleep(200000); /* the other probe too */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int k = 0; k < 1000; k++, seed += 17) {
			bad_inline += leaf_inline(seed) != 0;
			bad_site += user_site(seed) != 0;
			calls++;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	printf("red_zone: %ld calls each; words changed: inline NOP %ld calls, site function %ld calls; "
	       "trampoline %s\n", calls, bad_inline, bad_site, trampoline_mapped() ? "mapped" : "not mapped");
	return 0;
}
