/* The trace's target phase: objects, allocator and tables of the process
 * dwleak traces, and their refresh as objects come and go. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "proc_maps.h"
#include "trace_target.h"

void trace_tables_warn(struct unwinder *uw)
{
	struct unwind_object *o;
	size_t i;

	for (i = 0; i < unwinder_count(uw); i++) {
		o = unwinder_object(uw, i);
		if (o->error && !o->loaded && o->error_msg && o->error != -ENODATA)
			fprintf(stderr, "dwleak: warning: no unwind table for %s: %s; "
					"stacks through it will stop there\n",
				o->path, o->error_msg);
		if (o->error_msg)
			o->error = o->error ? o->error : -EIO; /* warn once */
		free(o->error_msg);
		o->error_msg = NULL;
	}
}

/* dwleak -- CMD: the program CMD runs, checked, and the objects it will
 * map, with their tables in place before its first instruction. */
static int command_objects(const struct env *env, struct proc_objects *objs, struct unwinder *uw)
{
	const char *cmd = env->cmd[0];
	char *prog, *script = NULL;
	struct stat st;
	size_t i;
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
		fprintf(stderr, "dwleak: %s (%s) is a script (%s), not a program: dwleak -- CMD needs the "
				"ELF program itself, to probe its allocator from its first instruction; run the "
				"program directly (e.g. 'dwleak -- /usr/bin/python3 ...'), or start the script "
				"and attach with 'dwleak -p PID'\n", cmd, prog, script);
	} else if (err) {
		fprintf(stderr, "dwleak: %s (%s) is not an ELF program%s; dwleak -- CMD traces a program "
				"(or attach to a running one with 'dwleak -p PID')\n", cmd, prog,
			err != -ENOEXEC ? " (cannot read it)" : "");
	} else {
		err = proc_objects_of_program(prog, getenv("LD_PRELOAD"), objs);
	}
	free(script);
	free(prog);
	for (i = 0; !err && i < objs->n; i++) {
		struct file_key key;

		if (stat(objs->paths[i], &st))
			continue;
		key = (struct file_key){ proc_kdev(major(st.st_dev), minor(st.st_dev)), st.st_ino };
		err = unwinder_add(uw, &key, objs->paths[i], -1, NULL);
	}
	return err;
}

static int pid_objects(const struct env *env, struct target *t, struct proc_objects *objs)
{
	pid_t pid = (pid_t)env->pid;
	const char *why;
	int err;

	err = target_check_pid(pid, &why);
	if (err == -ESRCH && !strcmp(why, "no such process"))
		fprintf(stderr, "dwleak: no process with pid %d\n", pid);
	else if (err)
		fprintf(stderr, "dwleak: pid %d %s\n", pid, why);
	err = err ?: target_attach(t, pid);
	err = err ?: proc_objects_of_pid(pid, objs);
	if (!err && objs->nreplaced)
		fprintf(stderr, "dwleak: note: %zu file(s) pid %d maps were replaced on disk since it mapped "
				"them (%s%s): dwleak reads and probes the copies the process maps\n",
			objs->nreplaced, pid, objs->first_replaced, objs->nreplaced > 1 ? ", ..." : "");
	return err;
}

int trace_target_setup(const struct env *env, struct target *t, struct proc_objects *objs, struct allocator *a,
		       struct unwinder *uw)
{
	int err = env->cmd ? command_objects(env, objs, uw) : pid_objects(env, t, objs);

	if (!err) {
		err = allocator_detect(objs->paths, objs->names, objs->n, objs->npreload, a);
		if (err == -ENOENT)
			fprintf(stderr, "dwleak: no object in pid %d defines malloc; nothing to trace\n", t->pid);
		else if (err)
			fprintf(stderr, "dwleak: cannot find the allocator: %s\n", strerror(-err));
	}
	if (err)
		return err;
	if (env->cmd)
		return target_spawn(t, env->cmd);
	return unwinder_add_process(uw, t->pid);
}

int trace_tables_refresh(struct unwinder *uw, struct probes *p, pid_t pid)
{
	int err;

	err = unwinder_add_process(uw, pid);
	if (err && err != -ENOENT)
		return err;
	err = unwinder_load_pending(uw);
	trace_tables_warn(uw);
	if (err < 0)
		return err;
	err = unwinder_publish(uw, pid, NULL);
	if (err == 1)
		probes_tables_changed(p);
	return err == -ENOENT || err == 1 ? 0 : err;
}
