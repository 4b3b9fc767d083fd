/* The trace command's checks of what it is asked to trace, with the
 * messages that go with them: a pid (alive, not a kernel thread, a zombie
 * or dwleak), or a command (found, runnable, a program or a script). */
#ifndef DWLEAK_TRACE_TARGET_H
#define DWLEAK_TRACE_TARGET_H

#include "trace.h"

/* Checks ENV's -p pid, saying what is wrong (no such process, a kernel
 * thread, a zombie, dwleak itself).  0 or a negative errno. */
int trace_pid_check(const struct env *env);

/* Checks ENV's command, saying what is wrong: it must exist, be
 * executable, and be an ELF program or a script (whose interpreter is
 * followed like any exec).  0 or a negative errno. */
int trace_command_check(const struct env *env);

#endif
