/* oracle_dead_reg: the textbook leak, for tests/oracle_memcheck.sh.
 *
 * Built -O0 (testdata/Makefile).  main keeps p only in its own frame and
 * returns; __libc_start_call_main then calls exit().  At exit()'s first
 * instruction p is still in a register: rcx, left there by malloc (glibc
 * 2.36, checked with gdb) and never overwritten, though caller-saved
 * registers are dead across the call to exit() (the x86-64 psABI: a
 * callee may clobber them, and exit never returns).  p's old slot in
 * main's frame is dead too: below the stack pointer.
 *
 * memcheck (--run-libc-freeres=no) and LeakSanitizer: 4,000 bytes in 1
 * block definitely lost; nothing else outstanding. */
#include <stdlib.h>
#include <string.h>

int main(void)
{
	char *p = malloc(4000);

	strcpy(p, "hi");
	return p[0] == 'x';
}
