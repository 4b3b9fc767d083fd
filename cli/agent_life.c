/* Processes coming and going, as the agent sees them: how each one a
 * target matches is reached (the library's sites, injection, uprobes) or
 * why it is skipped; a process caught inside its dynamic linker waited
 * for; an exec that ends an image (and may start a traceable one), a
 * fork whose child the targets match, an exit reported once more and then
 * forgotten, an OOM victim handed to agent_oom.c. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "objects.h"
#include "preload_sites.h"

/* How long a process may stay inside its dynamic linker before it is
 * taken as it is (a loader that never says RT_CONSISTENT). */
#define PENDING_MAX_S 2.0
/* An ended process stays at least this long after /metrics served its
 * last numbers, so a report asked for right after still finds it. */
#define LINGER_MIN_S 2.0

struct agent_proc *agent_proc_find(const struct agent *a, pid_t pid)
{
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i]->pid == pid)
			return a->procs[i];
	return NULL;
}

const struct agent_skip *agent_skip_find(const struct agent *a, pid_t pid)
{
	for (size_t i = 0; i < a->nskipped; i++)
		if (a->skipped[i].pid == pid)
			return &a->skipped[i];
	return NULL;
}

static ssize_t pending_find(const struct agent *a, pid_t pid)
{
	for (size_t i = 0; i < a->npending; i++)
		if (a->pending[i].pid == pid)
			return (ssize_t)i;
	return -1;
}

/* Grows *V (of *CAP elements of SIZE) to hold N + 1.  0 or -ENOMEM. */
static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? *cap * 2 : 16;
	void *g;

	if (n < *cap)
		return 0;
	g = realloc(*v, c * size);
	if (!g)
		return -ENOMEM;
	*v = g;
	*cap = c;
	return 0;
}

/* PID's comm into COMM (16 bytes); "?" when it is gone. */
static void comm_read(pid_t pid, char comm[16])
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, comm, 15) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		strcpy(comm, "?");
		return;
	}
	comm[n] = '\0';
	if (comm[n - 1] == '\n')
		comm[n - 1] = '\0';
}

/* The session's process PID (the newest), or NULL. */
static const struct proc *session_proc(const struct agent *a, pid_t pid)
{
	const struct procs *ps = session_procs(a->s);

	for (size_t i = ps->n; i-- > 0;)
		if (ps->v[i]->pid == pid)
			return ps->v[i];
	return NULL;
}

/* --- Skipped processes --- */

/* Lists PID as skipped for WHY (taken), followed for its exec and exit. */
static void skip_add(struct agent *a, pid_t pid, const char *comm, char *why)
{
	if (!why || grow((void **)&a->skipped, &a->skipped_cap, a->nskipped, sizeof(*a->skipped))) {
		free(why);
		return;
	}
	if (agent_watch_follow(a->watch, pid) == -ESRCH) {
		free(why); /* ended already */
		return;
	}
	a->skipped[a->nskipped] = (struct agent_skip){ .pid = pid, .why = why };
	snprintf(a->skipped[a->nskipped].comm, sizeof(a->skipped[0].comm), "%s", comm);
	a->nskipped++;
}

static void skip_remove(struct agent *a, pid_t pid)
{
	for (size_t i = 0; i < a->nskipped; i++) {
		if (a->skipped[i].pid != pid)
			continue;
		free(a->skipped[i].why);
		a->skipped[i] = a->skipped[--a->nskipped];
		return;
	}
}

/* --- How a process is reached --- */

enum agent_way agent_way_in(const struct agent *a, pid_t pid, char **why)
{
	struct proc_objects o;
	struct preload_sites ps;
	char *swhy = NULL, *reason = NULL;
	int err, r;

	*why = NULL;
	err = proc_objects_of_pid(pid, &o);
	if (err) {
		r = asprintf(why, "cannot read its objects: %s", strerror(-err));
		if (r < 0)
			*why = NULL;
		return AGENT_WAY_SKIP;
	}
	err = preload_sites_find(o.paths, o.names, o.n, &ps, &swhy);
	proc_objects_free(&o);
	if (!err) {
		preload_sites_free(&ps);
		return AGENT_WAY_PRELOAD;
	}
	if (err == -ENOENT)
		r = asprintf(&reason, "it runs without the preload library (start it with LD_PRELOAD=$(dwleak preload))");
	else
		r = asprintf(&reason, "it has the preload library, but its sites would not see every allocator call "
				      "(%s)", swhy ? swhy : strerror(-err));
	free(swhy);
	if (r < 0)
		reason = NULL;
	/* issue 22: a process without the library gets it injected, then
	 * is traced at its sites like one started with it */
	if (a->inject) {
		*why = reason;
		return AGENT_WAY_INJECT;
	}
	if (a->env->uprobes)
		r = asprintf(why, "%s: traced with uprobes (--uprobes), a trap per allocator call", reason);
	else
		r = asprintf(why, "%s; --uprobes would trace it with uprobes, a trap per allocator call", reason);
	if (r < 0)
		*why = NULL;
	free(reason);
	return a->env->uprobes ? AGENT_WAY_UPROBES : AGENT_WAY_SKIP;
}

/* P's trace ends: the session told (its last records applied, its
 * ledger sealed, its probes and slot given back), its peak report named
 * first while its image's stacks are all there. */
static void trace_end(struct agent *a, struct agent_proc *p, int status)
{
	agent_books_final(a, p);
	session_exited(a->s, p->pid, status);
	p->exited = true;
	p->status = status;
	p->t_exited = agent_now();
}

/* Forgets P now (the session's process and the agent's books). */
static void proc_drop(struct agent *a, struct agent_proc *p)
{
	session_forget(a->s, p->pid);
	for (size_t i = 0; i < a->nprocs; i++) {
		if (a->procs[i] != p)
			continue;
		a->procs[i] = a->procs[--a->nprocs];
		break;
	}
	agent_books_free(p);
}

static void children_take(struct agent *a, pid_t pid);

/* Attaches PID, which MATCHED a target and whose dynamic linker has
 * settled: traced, or skipped with why. */
static int attach(struct agent *a, pid_t pid, const char *matched)
{
	enum agent_way way;
	struct agent_proc *p;
	const struct proc *sp;
	char comm[16], *why = NULL;
	double t0 = agent_now();
	int err;

	comm_read(pid, comm);
	way = agent_way_in(a, pid, &why);
	if (way == AGENT_WAY_INJECT) {
		char *ijwhy = NULL;
		double ms = -1;

		free(why);
		why = NULL;
		err = session_inject(a->s, pid, &ms, &ijwhy);
		if (!err && asprintf(&why, "at the preload library's sites, injected in %.0f ms", ms) < 0)
			why = NULL;
		else if (err == -EEXIST && asprintf(&why, "at the preload library's sites, injected before") < 0)
			why = NULL;
		else if (err && err != -EEXIST) {
			way = a->env->uprobes ? AGENT_WAY_UPROBES : AGENT_WAY_SKIP;
			if (asprintf(&why, "the preload library cannot be loaded into it (%s)%s", ijwhy ? ijwhy : strerror(-err),
				     a->env->uprobes ? ": traced with uprobes (--uprobes), a trap per allocator call"
						     : "; --uprobes would trace it with uprobes, a trap per allocator call") < 0)
				why = NULL;
		}
		free(ijwhy);
	}
	if (way == AGENT_WAY_SKIP) {
		agent_say("not tracing pid %d (%s, %s): %s", (int)pid, comm, matched, why ? why : "out of memory");
		skip_add(a, pid, comm, why);
		return 0;
	}
	err = session_attach(a->s, pid);
	sp = session_proc(a, pid);
	if (err || !sp || !sp->probed || sp->untraced) {
		/* the session said why; what it holds of PID is let go */
		char *reason = NULL;

		if (asprintf(&reason, "%s", sp && sp->untraced ? sp->untraced : err ? strerror(-err) : "not probed") < 0)
			reason = NULL;
		if (sp) {
			session_exited(a->s, pid, 0);
			session_forget(a->s, pid);
		}
		skip_add(a, pid, comm, reason);
		free(why);
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->matched = strdup(matched)) ||
	    grow((void **)&a->procs, &a->procs_cap, a->nprocs, sizeof(*a->procs)) || agent_books_open(a, p)) {
		if (p)
			free(p->matched);
		free(p);
		free(why);
		session_exited(a->s, pid, 0);
		session_forget(a->s, pid);
		return -ENOMEM;
	}
	p->pid = pid;
	memcpy(p->comm, comm, sizeof(p->comm));
	p->preload = sp->preload;
	p->t_attached = agent_now();
	p->status = -1;
	p->memcg = agent_memcg_of(pid, NULL);
	a->procs[a->nprocs++] = p;
	agent_say("tracing pid %d (%s, %s) %s; %.0f ms", (int)pid, comm, matched,
		  sp->injected && why	 ? why
		  : p->preload		 ? "at its preload library's sites"
		  : way == AGENT_WAY_INJECT ? "with uprobes: the library loaded into it does not serve"
		  : why			 ? why
					 : "with uprobes",
		  (agent_now() - t0) * 1e3);
	free(why);
	err = agent_watch_follow(a->watch, pid);
	if (err == -ESRCH) {
		/* it ended while being attached: its exit is now */
		struct agent_exit x = { .pid = pid, .status = -1 };

		agent_on_exit(a, &x);
	} else if (err) {
		agent_say("warning: cannot watch pid %d's exit: %s; it is reported until the agent stops", (int)pid,
			  strerror(-err));
	} else {
		children_take(a, pid);
	}
	return 0;
}

/*
 * The children PID forked before the agent followed it (a pre-forking
 * server forks its workers first thing, before it could be attached):
 * their fork events were never sent, so they are found in
 * /proc/PID/task/TID/children; one forked after the follow is an event.
 */
static void children_take(struct agent *a, pid_t pid)
{
	char path[384], dirpath[64], *text = NULL;
	struct agent_match m;
	struct dirent *de;
	size_t cap = 0;
	DIR *d;

	snprintf(dirpath, sizeof(dirpath), "/proc/%d/task", (int)pid);
	d = opendir(dirpath);
	while (d && (de = readdir(d))) {
		FILE *f;
		char *tok, *save = NULL;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/children", dirpath, de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (getline(&text, &cap, f) > 0) {
			for (tok = strtok_r(text, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
				pid_t child = (pid_t)atoi(tok);
				char comm[16], matched[300];

				comm_read(child, comm);
				if (child <= 0 || agent_targets_match_exec(a->targets, child, comm, &m) != 1)
					continue;
				snprintf(matched, sizeof(matched), "%s %s, forked by %d", agent_target_options[m.kind],
					 m.text, (int)pid);
				agent_consider(a, child, matched);
			}
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	free(text);
}

int agent_consider(struct agent *a, pid_t pid, const char *matched)
{
	struct agent_proc *p = agent_proc_find(a, pid);
	int settled;

	if (pid == getpid() || (p && !p->exited) || agent_skip_find(a, pid) || pending_find(a, pid) >= 0)
		return 0;
	if (p)
		proc_drop(a, p); /* an ended process whose pid came back: the old one goes now */
	settled = proc_linker_settled(pid);
	if (settled < 0)
		return 0; /* gone */
	if (!settled) {
		char *m = strdup(matched);

		if (!m || grow((void **)&a->pending, &a->pending_cap, a->npending, sizeof(*a->pending))) {
			free(m);
			return -ENOMEM;
		}
		a->pending[a->npending++] = (struct agent_pending){ .pid = pid, .since = agent_now(), .matched = m };
		return 0;
	}
	return attach(a, pid, matched);
}

void agent_pending_run(struct agent *a)
{
	double now = agent_now();

	for (size_t i = 0; i < a->npending;) {
		struct agent_pending q = a->pending[i];
		int settled = proc_linker_settled(q.pid);

		if (settled == 0 && now - q.since < PENDING_MAX_S) {
			i++;
			continue;
		}
		a->pending[i] = a->pending[--a->npending];
		if (settled >= 0)
			attach(a, q.pid, q.matched);
		free(q.matched);
	}
}

void agent_members_take(struct agent *a)
{
	struct agent_match m;
	pid_t *pids = NULL;
	size_t n = 0;
	int err = agent_targets_members(a->targets, &pids, &n);

	if (err)
		agent_say("warning: agent: cannot list the targets' processes: %s", strerror(-err));
	for (size_t i = 0; i < n; i++) {
		char matched[300];

		if (agent_targets_match_pid(a->targets, pids[i], &m) != 1)
			continue;
		snprintf(matched, sizeof(matched), "%s %s", agent_target_options[m.kind], m.text);
		agent_consider(a, pids[i], matched);
	}
	free(pids);
}

/* --- The watcher's events --- */

void agent_on_exec(void *ctx, const struct agent_exec *e)
{
	struct agent *a = ctx;
	struct agent_proc *p = agent_proc_find(a, e->pid);
	bool known = agent_skip_find(a, e->pid) != NULL;
	struct agent_match m;
	char matched[300];
	ssize_t k = pending_find(a, e->pid);

	if (p && !p->exited) {
		/* a new image: the old one's blocks went with it, so its trace
		 * ends with nothing to report; the new program may be another
		 * way in (with or without the library) */
		agent_say("pid %d (%s) exec'd %s: its old image's trace ends", (int)e->pid, p->comm, e->comm);
		trace_end(a, p, 0);
		proc_drop(a, p);
		known = true;
	} else if (p) {
		proc_drop(a, p); /* an ended one whose pid came back */
	}
	skip_remove(a, e->pid);
	if (k >= 0) {
		free(a->pending[k].matched);
		a->pending[k] = a->pending[--a->npending];
	}
	if (agent_targets_match_exec(a->targets, e->pid, e->comm, &m) != 1) {
		if (known)
			agent_watch_unfollow(a->watch, e->pid);
		return;
	}
	snprintf(matched, sizeof(matched), "%s %s", agent_target_options[m.kind], m.text);
	agent_consider(a, e->pid, matched);
}

void agent_on_fork(void *ctx, const struct agent_fork *f)
{
	struct agent *a = ctx;
	struct agent_proc *parent = agent_proc_find(a, f->ppid);
	struct agent_match m;
	char matched[300];

	/* only the children of what the targets matched are reported */
	if ((!parent || parent->exited) && !agent_skip_find(a, f->ppid))
		return;
	if (agent_targets_match_exec(a->targets, f->pid, f->comm, &m) != 1)
		return;
	snprintf(matched, sizeof(matched), "%s %s, forked by %d", agent_target_options[m.kind], m.text, (int)f->ppid);
	agent_consider(a, f->pid, matched);
}

/* "exit status N", "killed by signal N (NAME)" or "status unknown". */
static const char *status_text(int status, char *buf, size_t len)
{
	if (status < 0)
		snprintf(buf, len, "status unknown");
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
	return buf;
}

void agent_on_exit(void *ctx, const struct agent_exit *e)
{
	struct agent *a = ctx;
	struct agent_proc *p = agent_proc_find(a, e->pid);
	ssize_t k = pending_find(a, e->pid);
	char st[96];

	skip_remove(a, e->pid);
	if (k >= 0) {
		free(a->pending[k].matched);
		a->pending[k] = a->pending[--a->npending];
	}
	if (!p || p->exited)
		return;
	trace_end(a, p, e->status);
	agent_say("pid %d (%s) ended (%s): its last numbers stay in /metrics and the reports until the next scrape",
		  (int)p->pid, p->comm, status_text(e->status, st, sizeof(st)));
}

void agent_on_victim(void *ctx, const struct agent_victim *v)
{
	struct agent *a = ctx;
	struct agent_proc *p = agent_proc_find(a, v->pid);
	const struct agent_skip *sk = agent_skip_find(a, v->pid);

	if (p && !p->oom) {
		p->oom = true;
		agent_oom_report(a, p, v);
	} else if (sk) {
		agent_say("the OOM killer picked pid %d (%s), which is not traced (%s): no report", (int)v->pid, sk->comm,
			  sk->why);
	}
}

void agent_linger_end(struct agent *a, double now)
{
	for (size_t i = 0; i < a->nprocs;) {
		struct agent_proc *p = a->procs[i];
		double since = now - p->t_exited;

		if (!p->exited || (!(p->final_scraped && since >= LINGER_MIN_S) && since < a->env->linger_s)) {
			i++;
			continue;
		}
		proc_drop(a, p); /* moves the last one here */
	}
}

void agent_procs_free(struct agent *a)
{
	for (size_t i = 0; i < a->nprocs; i++)
		agent_books_free(a->procs[i]);
	free(a->procs);
	for (size_t i = 0; i < a->nskipped; i++)
		free(a->skipped[i].why);
	free(a->skipped);
	for (size_t i = 0; i < a->npending; i++)
		free(a->pending[i].matched);
	free(a->pending);
	a->procs = NULL;
	a->nprocs = a->nskipped = a->npending = 0;
}
