/* `dwleak preload`: where the preload library is, for LD_PRELOAD lines
 * (`LD_PRELOAD=$(dwleak preload) ./server`, a systemd Environment= line),
 * and the same lookup for `dwleak -- CMD`, which preloads it. */
#ifndef DWLEAK_CMD_PRELOAD_H
#define DWLEAK_CMD_PRELOAD_H

/*
 * The absolute path of libdwleak-preload.so, malloc'd into *OUT: the file
 * $DWLEAK_PRELOAD_LIB names when set, else the first that exists of
 * DIR/libdwleak-preload.so, DIR/build/libdwleak-preload.so (dwleak run
 * from its source tree), DIR/../libdwleak-preload.so (the ASan build in
 * build/asan/) and DIR/../lib/dwleak/libdwleak-preload.so (installed),
 * DIR being the directory of dwleak's own executable.  Returns 0, -ENOENT
 * (none found; *OUT then NULL) or -ENOMEM.
 */
int preload_library_path(char **out);

/* Runs `dwleak preload` (ARGV from the word "preload"): prints the path
 * on stdout and returns 0, or says on stderr why not and returns 2. */
int cmd_preload(int argc, char **argv);

#endif
