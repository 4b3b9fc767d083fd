/* `dwleak preload`: where the preload library is, for LD_PRELOAD lines
 * (`LD_PRELOAD=$(dwleak preload) ./server`, a systemd Environment= line),
 * found by target/preload_path.c. */
#ifndef DWLEAK_CMD_PRELOAD_H
#define DWLEAK_CMD_PRELOAD_H

/* Runs `dwleak preload` (ARGV from the word "preload"): prints the path
 * on stdout and returns 0, or says on stderr why not and returns 2. */
int cmd_preload(int argc, char **argv);

#endif
