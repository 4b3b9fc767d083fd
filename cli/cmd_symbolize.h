/* `dwleak symbolize`: names the frames of a JSON report afterwards, from
 * debug files the traced machine did not have (CI on stripped binaries). */
#ifndef DWLEAK_CMD_SYMBOLIZE_H
#define DWLEAK_CMD_SYMBOLIZE_H

/*
 * Runs `dwleak symbolize` with ARGC/ARGV starting at the word "symbolize".
 * Reads the report, writes it back with every frame it could resolve
 * renamed, and returns the process exit status: 0 success, 2 a usage
 * error, an unreadable or invalid report, or an unwritable output.
 */
int cmd_symbolize(int argc, char **argv);

#endif
