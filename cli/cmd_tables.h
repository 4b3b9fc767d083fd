/* `dwleak tables`: compile, print or verify the unwind tables of ELF files,
 * the debug aid for the table compiler and the CI check of its output. */
#ifndef DWLEAK_CMD_TABLES_H
#define DWLEAK_CMD_TABLES_H

/*
 * Runs `dwleak tables` with ARGC/ARGV starting at the word "tables".
 * Prints to stdout/stderr and returns the process exit status: 0 success,
 * 1 --verify found a mismatch, 2 a usage error or a file that could not be
 * read (every file is still tried).
 */
int cmd_tables(int argc, char **argv);

#endif
