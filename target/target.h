/* The traced process: checking a pid, and starting a command held just
 * before its execve (so probes are in place for its first instruction). */
#ifndef DWLEAK_TARGET_H
#define DWLEAK_TARGET_H

#include <stdbool.h>
#include <sys/types.h>

struct target {
	pid_t pid;
	bool spawned;	   /* started by us (-- CMD) */
	int release_fd;	   /* write end of the pipe the child waits on; -1 after release */
	bool exited;
	int exit_status;   /* wait status, when spawned and exited */
	char *command;	   /* for reports: the command line, or /proc/PID/cmdline */
};

/* Checks that PID is a live user-space process.  Returns 0, or -ESRCH (no
 * such process, or a zombie), -EINVAL (a kernel thread), with a message in
 * *WHY. */
int target_check_pid(pid_t pid, const char **why);

/* Forks ARGV[0] held before execve, to run in environment ENVP (NULL:
 * this process's); target_release() lets it run.  Returns 0 or a
 * negative errno. */
int target_spawn(struct target *t, char **argv, char **envp);
int target_release(struct target *t);

/* The command line of PID from /proc (arguments joined by spaces),
 * malloc'd; "?" when it cannot be read, NULL when out of memory. */
char *target_cmdline(pid_t pid);

/* Fills T for an existing PID. */
int target_attach(struct target *t, pid_t pid);

/* Ends a spawned target that was never released (setup failed); one that
 * runs is left running. */
void target_abort(struct target *t);

void target_free(struct target *t);

/*
 * Checks that PROG (a resolved path) is an ELF program, which dwleak --
 * CMD can probe from its first instruction: a script would only exec its
 * interpreter later.  Returns 0; -ENOEXEC when it is not ELF, with
 * *SCRIPT set to its "#!..." first line (malloc'd) when it is a script,
 * else NULL; or -errno when it cannot be read.
 */
int target_program_check(const char *prog, char **script);

/* Resolves CMD like execvp would (PATH search); malloc'd, or NULL. */
char *target_which(const char *cmd);

#endif
