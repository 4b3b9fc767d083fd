/* The trace command's checks of its target, with their messages. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "target.h"
#include "trace_target.h"
#include "tracee.h"

int trace_command_check(const struct env *env)
{
	const char *cmd = env->cmd[0];
	char *prog, *script = NULL;
	int err;

	prog = target_which(cmd);
	if (!prog) {
		fprintf(stderr, "dwleak: cannot find %s: %s\n", cmd,
			strchr(cmd, '/') ? "no such file" : "no such command in PATH");
		return -ENOENT;
	}
	if (access(prog, X_OK)) {
		err = -errno;
		fprintf(stderr, "dwleak: cannot run %s: %s\n", prog, strerror(-err));
	} else if ((err = target_program_check(prog, &script)) && script) {
		err = 0; /* its interpreter is exec'd, and followed */
	} else if (err) {
		fprintf(stderr, "dwleak: %s (%s) is not a program%s: neither ELF nor a script with a #! line\n",
			cmd, prog, err != -ENOEXEC ? " (cannot read it)" : "");
	}
	free(script);
	free(prog);
	return err;
}

int trace_pid_check(const struct env *env)
{
	pid_t pid = (pid_t)env->pid;
	const char *why;
	int err;

	err = target_check_pid(pid, &why);
	/* its own probes would fire on its own bookkeeping of them, and it
	 * cannot ptrace itself: say what it is, not "another tracer" */
	if (!err && (pid == getpid() || tracee_tgid_of(pid) == getpid())) {
		fprintf(stderr, "dwleak: cannot trace itself (pid %d is this dwleak): give the pid of another "
				"process\n", pid);
		return -EINVAL;
	}
	if (err == -ESRCH && !strcmp(why, "no such process"))
		fprintf(stderr, "dwleak: no process with pid %d\n", pid);
	else if (err)
		fprintf(stderr, "dwleak: pid %d %s\n", pid, why);
	return err;
}
