/* Which processes the agent traces: --pid, --comm NAME, --unit
 * NAME.service and --cgroup PATH (cgroup v2, or a v1 hierarchy on hybrid
 * hosts), resolved once against the mount table, then asked three ways:
 * is this running process a target, which processes are targets now, and
 * is this process that just exec'd one.  Every file is read under a root
 * directory, so the unit tests run on fake /proc and /sys trees. */
#ifndef DWLEAK_AGENT_TARGETS_H
#define DWLEAK_AGENT_TARGETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The kinds of target, one list: X(ID, OPTION). */
#define AGENT_TARGET_KINDS(X)      \
	X(PID, "--pid")            \
	X(COMM, "--comm")          \
	X(UNIT, "--unit")          \
	X(CGROUP, "--cgroup")

enum agent_target_kind {
#define AGENT_TARGET_KIND_ENUM(id, option) AGENT_TARGET_##id,
	AGENT_TARGET_KINDS(AGENT_TARGET_KIND_ENUM)
#undef AGENT_TARGET_KIND_ENUM
	AGENT_TARGET_KIND_COUNT
};

/* Each kind's option ("--comm"), indexed by enum agent_target_kind. */
extern const char *const agent_target_options[AGENT_TARGET_KIND_COUNT];

/* A process's comm is at most this long (TASK_COMM_LEN - 1): a longer
 * --comm matches on its first 15 bytes, as the kernel keeps them. */
#define AGENT_COMM_MAX 15

/* One line of /proc/PID/cgroup: "ID:CONTROLLERS:PATH". */
struct agent_cgroup_line {
	unsigned int id;         /* 0 for cgroup v2 */
	const char *controllers; /* "memory", "cpu,cpuacct", "name=systemd", "" (v2); not NUL-ended */
	size_t controllers_len;
	const char *path;        /* "/system.slice/x.service"; not NUL-ended */
	size_t path_len;
};

/*
 * Calls FN(CTX, LINE) for each line of a /proc/PID/cgroup text (LEN bytes,
 * no NUL needed), stopping when FN returns non-zero and returning that.
 * A line that is not ID:CONTROLLERS:/PATH makes it return -EPROTO.
 * Pure (fuzzed: fuzz_agent).
 */
int agent_cgroup_lines(const char *text, size_t len,
		       int (*fn)(void *ctx, const struct agent_cgroup_line *line), void *ctx);

/* One cgroup file system of a mount table. */
struct agent_cgroup_mount {
	char *point;   /* where it is mounted, unescaped ("/sys/fs/cgroup/memory") */
	char *root;    /* the directory of the hierarchy mounted there ("/" mostly) */
	bool v2;       /* cgroup2 */
	char *options; /* the super options ("rw,memory", "rw,xattr,name=systemd") */
};

/*
 * Parses a mountinfo text (LEN bytes) into the cgroup and cgroup2 mounts
 * (*OUT malloc'd, *N of them; free with agent_cgroup_mounts_free).  Lines
 * of other file systems are skipped; a cgroup line that is not as the
 * kernel writes it is -EPROTO.  Returns 0, -EPROTO or -ENOMEM.  Pure
 * (fuzzed: fuzz_agent).
 */
int agent_mountinfo_parse(const char *text, size_t len, struct agent_cgroup_mount **out, size_t *n);
void agent_cgroup_mounts_free(struct agent_cgroup_mount *m, size_t n);

struct agent_targets;

/*
 * Makes an empty set of targets whose files are read under ROOT (NULL or
 * "/": the real ones; else a directory holding proc/ and sys/), with the
 * cgroup mounts read from ROOT/proc/self/mountinfo.  Returns 0 and *OUT,
 * or a negative errno.  Free with agent_targets_free().
 */
int agent_targets_new(const char *root, struct agent_targets **out);
void agent_targets_free(struct agent_targets *t);

/*
 * Add one target each (repeatable).  The text is checked and resolved now:
 *  - pid: a running process (-ESRCH otherwise);
 *  - comm: 1 to 255 bytes without '/' or newline; more than 15 match on
 *    their first 15 (agent_targets_add_comm says so in WHY, and returns 0);
 *  - unit: NAME.service (NAME@INSTANCE.service too), found where systemd
 *    puts it: /system.slice/NAME.service (an instance in
 *    /system.slice/system-NAME.slice/) in the cgroup v2 tree (on hybrid
 *    hosts mounted at /sys/fs/cgroup/unified) and in the v1 name=systemd
 *    hierarchy, whichever are mounted; the unit need not run yet;
 *  - cgroup: an existing directory in a cgroup or cgroup2 mount, any
 *    hierarchy; its descendants count too.
 * Return 0, or a negative errno with WHY (WHYLEN bytes) saying what is
 * wrong; WHY may also hold a note on success (empty otherwise).
 */
int agent_targets_add_pid(struct agent_targets *t, pid_t pid, char *why, size_t whylen);
int agent_targets_add_comm(struct agent_targets *t, const char *name, char *why, size_t whylen);
int agent_targets_add_unit(struct agent_targets *t, const char *unit, char *why, size_t whylen);
int agent_targets_add_cgroup(struct agent_targets *t, const char *path, char *why, size_t whylen);

/* How many targets T holds. */
size_t agent_targets_count(const struct agent_targets *t);

/* Which target matched a process, and its text ("--unit nginx.service"). */
struct agent_match {
	size_t target;             /* index in the order added */
	enum agent_target_kind kind;
	const char *text;          /* T's: the option's value */
};

/*
 * Whether running process PID is a target: its pid, its comm
 * (ROOT/proc/PID/comm), or its cgroup (ROOT/proc/PID/cgroup) in a unit's
 * or cgroup's tree.  Returns 1 with *M set (the first --pid or --comm
 * target that matches, else the first --unit or --cgroup one: those need
 * its cgroup file read), 0, or a negative errno (-ENOENT: no such process
 * now).
 */
int agent_targets_match_pid(const struct agent_targets *t, pid_t pid, struct agent_match *m);

/*
 * The same for a process that just exec'd, as the watcher reports it:
 * COMM (its new comm, at most 16 bytes, NUL-ended or not) is compared
 * first; its cgroup is read only when a unit or cgroup target needs it.
 */
int agent_targets_match_exec(const struct agent_targets *t, pid_t pid, const char *comm, struct agent_match *m);

/*
 * Every process that is a target now, each once, ascending: the --pid
 * ones alive, every process of ROOT/proc whose comm matches, and the
 * cgroup.procs of every unit's and cgroup's directory and its
 * descendants.  Sets *PIDS (malloc'd, the caller frees) and *N.  Returns
 * 0 or a negative errno.
 */
int agent_targets_members(const struct agent_targets *t, pid_t **pids, size_t *n);

#endif
