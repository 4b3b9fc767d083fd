/* Each traced process's life, and the only writer of a struct proc:
 * probed when found running (-p), when it execs a static program, or when
 * the dynamic linker stops it with every initial object mapped (before
 * any of its code ran: glibc's malloc is first called after that point);
 * at the preload library's sites when it has them, else with uprobes; a
 * fork's child probed like its parent before its first instruction;
 * tables refreshed when objects come; checked for leaks at exit();
 * everything released at exit (what the report still needs copied out
 * first: its mappings, its blocks folded into sums, its image's stacks
 * the store keeps).  A process whose image cannot be traced is said,
 * listed in the report, and still followed: what it forks and execs may
 * be traceable, and -- CMD waits for it like any other. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "proc.h"
#include "proc_notes.h"

#define say(sv, level, ...) session_say((sv)->log, level, __VA_ARGS__)

/* A new process PID, forked by PARENT (0: none traced), with an empty
 * ledger and no slot, appended to PS.  NULL when out of memory. */
static struct proc *proc_new(struct procs *ps, pid_t pid, pid_t parent)
{
	struct proc *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pid = pid;
	p->parent = parent;
	p->slot = DWLEAK_NO_SLOT;
	if (procs_append(ps, p)) {
		free(p);
		return NULL;
	}
	return p;
}

/* Forgets P's preload sites (its image is gone, or they cannot serve). */
static void sites_forget(struct proc *p)
{
	proc_rings_free(&p->rings);
	p->preload = false;
	p->injected = false;
	preload_sites_free(&p->sites);
}

/* Releases what P holds in the programs and the walker: no probe, no
 * slot, no stop is asked of it. */
static void untraced_release(const struct proc_services *sv, struct proc *p)
{
	sv->remove(sv->ctx, &p->pp);
	sv->slot_release(sv->ctx, p->slot);
	p->slot = DWLEAK_NO_SLOT;
	p->probed = false;
	p->awaiting_linker = false;
}

/* P's image cannot be traced: said now, and in the report.  It stays
 * followed (ptrace is not let go): its children are traced when they can
 * be, its next exec is tried again, and -- CMD waits for its exit.  FIRST:
 * P is what -p was given, so nothing else is left to trace. */
static void __attribute__((format(printf, 4, 5)))
untraced(const struct proc_services *sv, struct proc *p, bool first, const char *fmt, ...)
{
	va_list ap;
	char *why = NULL;

	va_start(ap, fmt);
	if (vasprintf(&why, fmt, ap) < 0)
		why = NULL;
	va_end(ap);
	if (first)
		say(sv, SESSION_ERROR, "cannot trace pid %d (%s): %s", p->pid, p->command ? p->command : "?",
		    why ? why : "out of memory");
	else
		say(sv, SESSION_WARNING, "not tracing pid %d (%s): %s; what it allocates is not in the report%s",
		    p->pid, p->command ? p->command : "?", why ? why : "out of memory",
		    sv->set->following ? " (what it starts is still followed)" : "");
	free(p->untraced);
	p->untraced = why ? why : strdup("?");
	untraced_release(sv, p);
}

/* Says once that P's library took an image: from then on it walks. */
static void rings_walking_say(const struct proc_services *sv, struct proc *p)
{
	if (p->walk_said || !p->rings.installed)
		return;
	p->walk_said = true;
	if (sv->walking)
		sv->walking(sv->ctx, p);
}

/* Why P's tables are looked at: its first probe, an event of its (a
 * dlopen, dlclose: an injected library routes the objects loaded since),
 * or the periodic look at every process, which changes nothing of P's
 * when it finds its objects as they were (a new image every second cost
 * the process its rule cache and remembered walks, and a route request a
 * pass over every object's GOT). */
enum refresh_why { REFRESH_FIRST, REFRESH_EVENT, REFRESH_RESCAN };

/* Loads the tables of the objects P maps and republishes its mappings. */
static int tables_refresh(const struct proc_services *sv, struct proc *p, enum refresh_why why)
{
	uint32_t dropped = 0;
	int err = sv->tables(sv->ctx, p->pid, p->slot, &dropped), changed = err == 1;

	if (err > 0)
		err = 0;
	if (dropped > p->table_dropped)
		p->table_dropped = dropped; /* the most any publish left out */
	if (why == REFRESH_RESCAN && !changed && !err) {
		rings_walking_say(sv, p);
		return 0;
	}
	p->maps_gen++; /* its mappings as the map holds them may have changed */
	if (why != REFRESH_FIRST && p->injected)
		sv->route(sv->ctx, p->pid, &p->sites); /* the objects loaded since, routed too */
	/* the library's walk needs them too: its image anew (handed over now,
	 * while a process stopped at its linker's stop waits) */
	if (!err && p->rings.mode && (err = proc_rings_image(&sv->rings_io, &p->rings, p->pid)) && err != -ESRCH &&
	    err != -ENOENT) /* gone, or exec'ing: its exec or exit is told next */
		say(sv, SESSION_WARNING, "pid %d: cannot build its new unwind image (%s): its walks end in what it "
		    "mapped since", p->pid, strerror(-err));
	rings_walking_say(sv, p);
	return err == -ESRCH || err == -ENOENT ? 0 : err;
}

/* --leak-check with ptrace: P stops at exit() for its check, before its
 * atexit handlers and destructors free what globals still hold. */
static void exit_probe(const struct proc_services *sv, struct proc *p)
{
	const char *path;
	uint64_t off;

	if (!sv->set->leak_check || !sv->set->following)
		return;
	if (proc_objects_function(&p->objs, "exit", &path, &off) || sv->attach_exit(sv->ctx, &p->pp, path, off))
		say(sv, SESSION_WARNING, "cannot probe exit() in pid %d (%s): its leak check runs when it exits, after "
		    "its atexit handlers", p->pid, p->command);
}

/* The walk in the process, asked of P's library at its sites (--walk
 * process); on failure said, and the sites serve as without it. */
static void rings_start(const struct proc_services *sv, struct proc *p)
{
	uint64_t ctl;
	int err;

	if (!sv->set->walk_rings || !sv->control_addr)
		return;
	ctl = sv->control_addr(sv->ctx, p->pid, &p->sites);
	err = proc_rings_start(&sv->rings_io, &p->rings, p->pid, ctl, sv->set->walk_rings, sv->set->ring_bits,
			       p->image, p->sites_alone);
	if (err == -EPERM)
		say(sv, SESSION_NOTE, "pid %d (%s) runs under a seccomp filter: its stacks are walked at its library's "
		    "sites by the kernel, not in the process (whose walk makes system calls a filter may punish)",
		    p->pid, p->command ? p->command : "?");
	else if (err)
		say(sv, SESSION_NOTE, "pid %d: cannot walk in the process (%s): its stacks are walked at its library's "
		    "sites by the kernel", p->pid, strerror(-err));
	else if (sv->set->walk_rings == DWLEAK_PRELOAD_WALK_FP)
		sv->walking ? sv->walking(sv->ctx, p) : (void)0;
}

/* Drains P's rings into its ledger (FINAL: it is stopped for good or
 * gone: every record read is applied); a failure said once. */
static void rings_drain(const struct proc_services *sv, struct proc *p, bool final, uint64_t before)
{
	bool said = p->rings.why[0], ring_said = p->rings.ring_why[0];
	int err, image_err = p->rings.image_err;

	if (!p->rings.mode)
		return;
	err = proc_rings_drain(&sv->rings_io, &p->rings, p->pid, &p->ledger, sv->stacks, session_now_ns(), final, before);
	if (!said && p->rings.why[0])
		say(sv, SESSION_WARNING, "pid %d (%s): %s; what its library records from now on is lost", p->pid,
		    p->command ? p->command : "?", p->rings.why);
	if (!ring_said && p->rings.ring_why[0])
		say(sv, SESSION_WARNING, "pid %d (%s) wrote over its own ring of walked records (%s): what that ring "
		    "holds is lost to its report", p->pid, p->command ? p->command : "?", p->rings.ring_why);
	rings_walking_say(sv, p);
	if (p->rings.image_err && p->rings.image_err != image_err)
		say(sv, SESSION_WARNING, "pid %d (%s): its library refused the unwind image (%s): its stacks are "
		    "walked at its sites by the kernel", p->pid, p->command ? p->command : "?",
		    strerror(-p->rings.image_err));
	(void)err;
}

uint64_t procs_rings_drain(const struct proc_services *sv, struct procs *ps, uint64_t before, uint32_t *fill_ppm)
{
	uint64_t had, read = 0;
	uint32_t fill = 0;
	size_t i;

	for (i = 0; i < ps->n; i++) {
		struct proc *p = ps->v[i];

		if (p->exited || !p->rings.mode)
			continue;
		had = p->rings.records + p->rings.nheld;
		rings_drain(sv, p, false, before);
		read += p->rings.records + p->rings.nheld - had;
		fill = p->rings.fill_ppm > fill ? p->rings.fill_ppm : fill;
	}
	if (fill_ppm)
		*fill_ppm = fill;
	return read;
}

/* Writes P's control block and attaches its sites; on failure says why
 * and leaves P for uprobes.  Returns 0 or 1. */
static int sites_attach(const struct proc_services *sv, struct proc *p, bool fork_child)
{
	int err = sv->attach_sites(sv->ctx, &p->pp, p->pid, &p->sites, &p->alloc, fork_child, &p->sites_alone);

	if (!err) {
		p->preload = true;
		rings_start(sv, p);
		return 0;
	}
	sv->detach(sv->ctx, &p->pp);
	say(sv, SESSION_NOTE, "pid %d: cannot use the sites of %s (%s): tracing it with uprobes", p->pid,
	    p->sites.name, strerror(-err));
	sites_forget(p);
	return 1;
}

/* At P's preload library's sites, when its objects include the library
 * and the sites see every allocator call.  Returns 0 (P->preload set), 1
 * when P is for uprobes (no library, --no-preload, --mmap, or the sites
 * cannot serve: said), or -ENOMEM. */
static int preload_attach(const struct proc_services *sv, struct proc *p)
{
	char *why = NULL;
	int err;

	sites_forget(p);
	/* --mmap tells the allocator's own mmaps from the program's by the
	 * allocator calls pending in the kernel program: uprobes only */
	if (sv->set->no_preload || sv->set->mmap)
		return 1;
	err = sv->sites_find(sv->ctx, &p->objs, &p->sites, &why);
	if (err == -ENOENT || err == -ENOTSUP) {
		/* not first in lookup order: loaded while it ran, and routed? */
		char *gaps = NULL;

		sites_forget(p);
		if (!sv->sites_find_injected(sv->ctx, p->pid, &p->objs, &p->sites, &gaps)) {
			free(why);
			if (gaps)
				say(sv, SESSION_WARNING, "pid %d: the preload library loaded into it does not see every "
				    "allocator call (%s): what passes by it is not traced", p->pid, gaps);
			free(gaps);
			if (sites_attach(sv, p, false))
				return 1;
			p->injected = true;
			return 0;
		}
	}
	if (err == -ENOENT)
		return 1;
	if (err == -ENOMEM)
		return err;
	if (err) {
		say(sv, SESSION_NOTE, "pid %d has %s, but its sites would not see every allocator call: %s; tracing it "
		    "with uprobes", p->pid, DWLEAK_PRELOAD_NAME, why ? why : "?");
		free(why);
		sites_forget(p);
		return 1;
	}
	return sites_attach(sv, p, false);
}

static int proc_probe(const struct proc_services *sv, struct proc *p, bool first);

/*
 * A process not followed with ptrace that waits for its dynamic linker
 * (its exec was told by a tracepoint, and nothing holds it): probed as
 * soon as its objects include its allocator, whether or not the linker's
 * hook was attached in time to say so.  Returns 0 or -ENOMEM.
 */
static int linker_done(const struct proc_services *sv, struct proc *p)
{
	struct proc_objects o;
	struct allocator a;
	bool ready;

	if (sv->set->following || !p->awaiting_linker)
		return 0;
	if (sv->objects(sv->ctx, p->pid, &o))
		return 0;
	ready = !sv->allocator(sv->ctx, &o, &a);
	if (ready)
		allocator_free(&a);
	proc_objects_free(&o);
	return ready && proc_probe(sv, p, false) == -ENOMEM ? -ENOMEM : 0;
}

/* P's objects are all mapped: find its allocator, load the tables and
 * probe it.  Returns 0, or a negative errno after letting P go. */
static int proc_probe(const struct proc_services *sv, struct proc *p, bool first)
{
	char what[PATH_MAX + 64] = "";
	int err;

	proc_objects_free(&p->objs);
	allocator_free(&p->alloc);
	err = sv->objects(sv->ctx, p->pid, &p->objs);
	if (err == -ENOENT || err == -ESRCH)
		return err; /* gone: its exit comes next */
	if (!err && p->objs.nreplaced)
		say(sv, SESSION_NOTE, "%zu file(s) pid %d maps were replaced on disk since it mapped them (%s%s): "
		    "dwleak reads and probes the copies the process maps", p->objs.nreplaced, p->pid,
		    p->objs.first_replaced, p->objs.nreplaced > 1 ? ", ..." : "");
	err = err ?: sv->allocator(sv->ctx, &p->objs, &p->alloc);
	if (err == -ENOENT) {
		untraced(sv, p, first, "no object it maps defines malloc (a static program without symbols?)");
		return err;
	}
	if (err) {
		untraced(sv, p, first, "cannot find its allocator: %s", strerror(-err));
		return err;
	}
	proc_notes_probed(sv, p);
	err = tables_refresh(sv, p, REFRESH_FIRST);
	if (err)
		say(sv, SESSION_WARNING, "loading unwind tables for pid %d failed: %s", p->pid, strerror(-err));
	/* at the preload library's sites when it can, else uprobes */
	err = preload_attach(sv, p);
	if (err < 0)
		return err;
	err = err ? sv->attach_allocator(sv->ctx, &p->pp, &p->alloc, what, sizeof(what)) : 0;
	if (err) {
		untraced(sv, p, first, "cannot attach %s: %s", what, strerror(-err));
		return err;
	}
	p->probed = true;
	p->awaiting_linker = false;
	exit_probe(sv, p);
	sv->traced(sv->ctx, p);
	return 0;
}

/* Registers P with the programs: its slot, its image (P->image, given by
 * the caller), its linker hook (stopping at it when followed with
 * ptrace). */
static int proc_register(const struct proc_services *sv, struct proc *p, bool first)
{
	unsigned int flags = 0;
	int err;

	/* stops need a tracer that resumes: ptrace */
	if (sv->set->following)
		flags = PROC_STOP_AT_DL_STATE | (sv->set->leak_check ? PROC_STOP_AT_EXIT : 0);
	if (p->slot == DWLEAK_NO_SLOT)
		p->slot = sv->slot_take(sv->ctx, p->pid);
	if (p->slot == DWLEAK_NO_SLOT && !p->no_slot) {
		p->no_slot = true;
		say(sv, SESSION_NOTE, "pid %d (%s): more than %d processes are alive at once, and it gets no mapping "
		    "table: its walks look each mapping up in the kernel (slower, and it fails while another "
		    "thread holds the mmap lock: walk_err_vma_busy)", p->pid, p->command ? p->command : "?",
		    DWLEAK_MAX_PROC_SLOTS);
	}
	err = sv->add(sv->ctx, &p->pp, p->pid, p->slot, p->image, &p->objs.dl, flags);
	if (err == -E2BIG)
		untraced(sv, p, first, "more than %d processes are traced at once", DWLEAK_MAX_PROCS);
	else if (err)
		untraced(sv, p, first, "cannot register it with the BPF programs: %s", strerror(-err));
	return err;
}

int proc_attach_running(const struct proc_services *sv, struct procs *ps, pid_t pid)
{
	struct proc *p = proc_new(ps, pid, 0);
	int err;

	if (!p)
		return -ENOMEM;
	p->command = sv->cmdline(sv->ctx, pid);
	p->ledger.partial = true; /* what it allocated before is not known */
	err = sv->objects(sv->ctx, pid, &p->objs);
	err = err ?: stack_store_image_new(sv->stacks, &p->image);
	err = err ?: proc_register(sv, p, true);
	if (err)
		return err;
	if (sv->attach_linker(sv->ctx, &p->pp, &p->objs.dl) && p->objs.dl.path)
		say(sv, SESSION_WARNING, "cannot probe %s's _dl_debug_state; libraries pid %d loads later are found by "
		    "a rescan every second", p->objs.dl.path, pid);
	return proc_probe(sv, p, true);
}

int proc_spawned(struct procs *ps, pid_t pid, const char *command)
{
	struct proc *p = proc_new(ps, pid, 0);

	if (!p)
		return -ENOMEM;
	p->command = strdup(command);
	return p->command ? 0 : -ENOMEM;
}

int proc_on_exec(const struct proc_services *sv, struct procs *ps, pid_t pid)
{
	struct proc *p = procs_find(ps, pid);
	int err;

	if (!p && !(p = proc_new(ps, pid, 0)))
		return -ENOMEM;
	/* a new image: what kept the old one from being traced (a static
	 * shell) may not hold for it (the dynamic program it runs); and the
	 * old image's blocks are gone with it, so nothing untraced is lost */
	free(p->untraced);
	p->untraced = NULL;
	/* the old image is gone, and with it every block it had, its
	 * mappings and (when no other process has it) its stacks */
	sv->detach(sv->ctx, &p->pp);
	sv->thread_forget(sv->ctx, pid);
	ledger_free(&p->ledger);
	memset(&p->ledger, 0, sizeof(p->ledger));
	procs_image_leave(sv, ps, p);
	p->image = 0;
	sv->mappings_take(sv->ctx, pid, NULL, NULL);
	allocator_free(&p->alloc);
	sites_forget(p);
	p->probed = false;
	p->vfork_child = false;
	free(p->command);
	p->command = sv->cmdline(sv->ctx, pid);
	/* the kernel mapped the program and its interpreter, nothing else yet */
	proc_objects_free(&p->objs);
	err = sv->objects(sv->ctx, pid, &p->objs);
	if (err)
		return err == -ENOENT || err == -ESRCH ? 0 : err;
	err = stack_store_image_new(sv->stacks, &p->image);
	if (err)
		return err;
	if (proc_register(sv, p, false))
		return 0;
	if (!p->objs.dl.found) /* a static program: everything is mapped */
		return proc_probe(sv, p, false) == -ENOMEM ? -ENOMEM : 0;
	err = sv->attach_linker(sv->ctx, &p->pp, &p->objs.dl);
	if (err) {
		untraced(sv, p, false, "cannot probe its dynamic linker %s: %s", p->objs.dl.path, strerror(-err));
		return 0;
	}
	p->awaiting_linker = true;
	tables_refresh(sv, p, REFRESH_FIRST); /* the program's and the linker's, for the first walks */
	/* without ptrace nothing holds it: its linker may be done already */
	return linker_done(sv, p);
}

int proc_on_stop(const struct proc_services *sv, struct procs *ps, pid_t pid)
{
	struct proc *p = procs_find(ps, pid);
	int err;

	if (!p || p->untraced)
		return 0;
	if (p->exit_called && !p->check.done) {
		proc_leak_check(sv, p, "at exit()");
		return 0;
	}
	if (p->awaiting_linker)
		return proc_probe(sv, p, false) == -ENOMEM ? -ENOMEM : 0;
	err = tables_refresh(sv, p, REFRESH_EVENT); /* dlopen, dlclose */
	if (err)
		say(sv, SESSION_WARNING, "loading new unwind tables for pid %d failed: %s", pid, strerror(-err));
	return 0;
}

int proc_on_fork(const struct proc_services *sv, struct procs *ps, pid_t parent, pid_t child, bool vfork)
{
	struct proc *pp = procs_find(ps, parent), *c = proc_new(ps, child, parent);
	char what[PATH_MAX + 64] = "";
	int err;

	if (!c)
		return -ENOMEM;
	c->command = strdup(pp && pp->command ? pp->command : "?");
	c->vfork_child = vfork;
	if (!pp || pp->untraced) {
		/* its parent's image, untraced for the same reason; said in the
		 * report if it ends so, not now: a shell's child usually execs
		 * a program next, and that one is tried again */
		c->untraced = strdup(pp && pp->untraced ? pp->untraced : "forked by a process dwleak does not know");
		return c->untraced ? 0 : -ENOMEM;
	}
	/* a vfork child borrows its parent's memory until it execs (its exec
	 * is followed) or exits: it allocates nothing of its own */
	if (vfork)
		return 0;
	/* the child's break is its parent's; what the parent's allocator had
	 * mapped is the child's too, but holds the parent's blocks, which the
	 * child's ledger does not know: not the child's allocator memory */
	c->ledger.brk = pp->ledger.brk;
	c->ledger.partial = true;
	err = proc_objects_copy(&c->objs, &pp->objs);
	err = err ?: pp->probed ? allocator_copy(&c->alloc, &pp->alloc) : 0;
	if (err)
		return err;
	/* the same program at the same addresses: its walks make its
	 * parent's stack ids, and the image lives while either does */
	c->image = pp->image;
	if (proc_register(sv, c, false)) {
		c->image = 0;
		return 0;
	}
	stack_store_image_join(sv->stacks, c->image);
	sv->attach_linker(sv->ctx, &c->pp, &c->objs.dl);
	c->awaiting_linker = pp->awaiting_linker;
	if (pp->probed) {
		/* the child's copy of the library needs its own links and control */
		err = 1;
		if (pp->preload) {
			if (preload_sites_copy(&c->sites, &pp->sites))
				return -ENOMEM;
			err = sites_attach(sv, c, true);
			c->injected = !err && pp->injected;
		}
		err = err ? sv->attach_allocator(sv->ctx, &c->pp, &c->alloc, what, sizeof(what)) : 0;
		if (err) {
			untraced(sv, c, false, "cannot attach %s: %s", what, strerror(-err));
			return 0;
		}
		c->probed = true;
		exit_probe(sv, c);
	}
	/* the same files mapped at the same places: the tables are loaded */
	sv->tables(sv->ctx, child, c->slot, NULL);
	return 0;
}

void proc_leak_check(const struct proc_services *sv, struct proc *p, const char *when)
{
	const struct leak_scan_exit *exiting = p->exit_called && !p->check.done ? &p->exit_at : NULL;
	int err;

	if (!sv->set->leak_check || p->untraced || !p->probed)
		return;
	err = sv->leak_scan(sv->ctx, p->pid, p->exited, &p->alloc, &p->ledger, p->preload ? &p->sites : NULL, exiting,
			    p->rings.mode ? &p->rings : NULL, &p->check);
	p->check_err = err;
	if (!err) {
		p->checks++;
		p->checks_changed += p->check.changed;
	}
	proc_notes_checked(sv, p, when);
}

void proc_on_exiting(const struct proc_services *sv, struct procs *ps, pid_t pid, pid_t tid)
{
	struct proc *p = procs_find(ps, pid);

	/* exiting without exit() (_exit, a signal): the memory is still
	 * there, if not every thread's registers */
	if (p)
		rings_drain(sv, p, true, UINT64_MAX); /* its memory is still there: the last records */
	if (!p || p->check.done || !sv->set->leak_check)
		return;
	p->exit_called = true;
	p->exit_at = (struct leak_scan_exit){ .tid = tid };
	proc_leak_check(sv, p, "as it exits");
}

void proc_on_exit(const struct proc_services *sv, struct procs *ps, pid_t pid, int status)
{
	struct proc *p = procs_find(ps, pid);
	int err;

	if (!p)
		return;
	/* what its rings held is read already (its memory is gone): applied */
	rings_drain(sv, p, true, UINT64_MAX);
	proc_rings_free(&p->rings);
	p->exited = true;
	p->exit_status = status;
	sv->remove(sv->ctx, &p->pp);
	sv->slot_release(sv->ctx, p->slot);
	p->slot = DWLEAK_NO_SLOT;
	if (p->untraced) {
		/* nothing of it was traced since its image could not be: no
		 * mappings nor blocks to keep, only its image to leave */
		procs_image_leave(sv, ps, p);
		return;
	}
	/* what names its frames in the report, out of the kernel's map */
	free(p->maps);
	p->maps = NULL;
	p->nmaps = 0;
	err = sv->mappings_take(sv->ctx, pid, &p->maps, &p->nmaps);
	p->maps_kept = !err;
	if (err)
		say(sv, SESSION_WARNING, "cannot read the mappings of pid %d (%s), which exited: %s; its frames are "
		    "reported as addresses", pid, p->command ? p->command : "?", strerror(-err));
	proc_objects_free(&p->objs);
	/* its records are all applied and its leak check done: its blocks
	 * are sums by stack from now on */
	if (ledger_seal(&p->ledger, session_now_ns(), sv->set->min_age_ns, sv->set->sample_bytes))
		say(sv, SESSION_WARNING, "out of memory folding the blocks of pid %d (%s), which exited: they are kept "
		    "one by one", pid, p->command ? p->command : "?");
	procs_image_leave(sv, ps, p);
}

bool proc_top_alive(struct procs *ps)
{
	struct proc *top = ps->n ? ps->v[0] : NULL;

	if (top && !top->exited && kill(top->pid, 0) && errno == ESRCH)
		top->exited = true;
	return top && !top->exited;
}

void proc_top_gone(struct procs *ps)
{
	struct proc *top = ps->n ? ps->v[0] : NULL;

	if (top && top->exited)
		proc_rings_gone(&top->rings, &top->ledger, session_now_ns());
}

void proc_record(const struct proc_services *sv, struct procs *ps, uint64_t now_ns, const void *data, size_t size)
{
	const struct free_event *f = data;
	struct proc *p;

	if (size < sizeof(*f) || !(p = procs_find(ps, (pid_t)f->tgid)))
		return;
	proc_rings_site_record(&sv->rings_io, &p->rings, p->pid, &p->ledger);
	if (p->rings.stopped && !p->walk_stop_said) {
		p->walk_stop_said = true;
		say(sv, SESSION_NOTE, "pid %d (%s) installed a seccomp filter: its library stopped walking in the "
		    "process first, and its stacks are walked at its sites by the kernel from then on", p->pid,
		    p->command ? p->command : "?");
	}
	p->ledger.now_ns = now_ns;
	ledger_record(&p->ledger, data, size);
}

void proc_mmap(struct procs *ps, const struct mmap_event *e)
{
	struct proc *p = procs_find(ps, (pid_t)e->tgid);

	if (p)
		ledger_mmap(&p->ledger, e);
}

void proc_objects_changed(struct procs *ps, uint32_t tgid)
{
	struct proc *p = procs_find(ps, (pid_t)tgid);

	if (p)
		p->refresh = true;
}

void proc_exit_called(struct procs *ps, uint32_t tgid, pid_t tid, uint64_t sp)
{
	struct proc *p = procs_find(ps, (pid_t)tgid);

	if (p) {
		p->exit_called = true;
		p->exit_at = (struct leak_scan_exit){ .tid = tid, .sp = sp };
	}
}

void procs_names_warm(const struct proc_services *sv, struct procs *ps, double until)
{
	const uint64_t *ids;
	size_t i, n;

	for (i = 0; sv->names_warm && i < ps->n; i++) {
		struct proc *p = ps->v[i];

		if (p->exited || p->untraced || !(n = proc_rings_fresh(&p->rings, &ids)))
			continue;
		proc_rings_fresh_done(&p->rings, sv->names_warm(sv->ctx, p, ids, n, until));
		if (session_now_s() >= until)
			return;
	}
}

void proc_tables_due(const struct proc_services *sv, struct procs *ps, bool all)
{
	size_t i;
	int err;

	for (i = 0; i < ps->n; i++) {
		struct proc *p = ps->v[i];
		bool event = p->refresh; /* else the periodic rescan */

		if (p->exited || p->untraced || !(event || all))
			continue;
		p->refresh = false;
		if (p->awaiting_linker) {
			linker_done(sv, p);
			continue;
		}
		err = tables_refresh(sv, p, event ? REFRESH_EVENT : REFRESH_RESCAN);
		if (err)
			say(sv, SESSION_WARNING, "loading new unwind tables for pid %d failed: %s", p->pid,
			    strerror(-err));

	}
}



int proc_forget(const struct proc_services *sv, struct procs *ps, pid_t pid)
{
	struct proc *p = procs_find(ps, pid);
	uint32_t img;

	if (!p)
		return -ENOENT;
	if (!p->exited)
		return -EBUSY;
	img = p->image;
	procs_remove(ps, p);
	proc_free(p);
	procs_image_forget(sv, ps, img);
	return 0;
}
