/* Option parsing shared by the small test programs, so every one of them
 * ends on its own: --iterations N, --interval-ms M, --delay-ms D plus a few
 * program-specific numbers.  Unknown options exit 2. */
#ifndef DWLEAK_TESTDATA_ARGS_H
#define DWLEAK_TESTDATA_ARGS_H

struct targs {
	long iterations;  /* allocations per leak site; 0 = forever (default 10) */
	long interval_ms; /* pause between allocations (default 100) */
	long delay_ms;	  /* pause before the first allocation (default 0) */
	long depth;	  /* deep_recursion: depth of the recursion (default 200) */
	const char *lib;  /* dlopen_main: library to load (default next to the exe) */
};

/* Fills *A from argv; prints usage and exits 2 on a bad option. */
void targs_parse(struct targs *a, int argc, char **argv);

/* Sleeps MS milliseconds (nothing for MS <= 0), resuming after signals. */
void pause_ms(long ms);

#endif
