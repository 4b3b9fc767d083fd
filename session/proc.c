/* Each traced process's life, as the tracer follows it: probed when found
 * running (-p), when it execs a static program, or when the dynamic
 * linker stops it with every initial object mapped (before any of its
 * code ran: glibc's malloc is first called after that point); a fork's
 * child probed like its parent before its first instruction; tables
 * refreshed when objects come; everything released at exit (what the
 * report still needs copied out first: its mappings, its blocks folded
 * into sums, its image's stacks the store keeps).  A process whose image
 * cannot be traced is said, listed in the report, and still followed:
 * what it forks and execs may be traceable, and -- CMD waits for it like
 * any other. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf_symbols.h"
#include "trace_preload.h"
#include "trace_procs.h"
#include "trace_stacks.h"
#include "trace_target.h"

/* Releases what P holds in the programs and the walker: no probe, no
 * slot, no stop is asked of it. */
static void untraced_release(struct tracer *tr, struct proc *p)
{
	probes_proc_remove(tr->probes, &p->pp);
	unwinder_slot_release(tr->uw, p->slot);
	p->slot = DWLEAK_NO_SLOT;
	p->probed = false;
	p->awaiting_linker = false;
}

/* P's image cannot be traced: said now, and in the report.  It stays
 * followed (ptrace is not let go): its children are traced when they can
 * be, its next exec is tried again, and -- CMD waits for its exit. */
static void untraced(struct tracer *tr, struct proc *p, const char *fmt, ...)
{
	va_list ap;
	char *why = NULL;

	va_start(ap, fmt);
	if (vasprintf(&why, fmt, ap) < 0)
		why = NULL;
	va_end(ap);
	/* -p PID itself: nothing else to trace, dwleak ends (trace_run) */
	if (!tr->env->cmd && !tr->announced)
		fprintf(stderr, "dwleak: cannot trace pid %d (%s): %s\n", p->pid, p->command ? p->command : "?",
			why ? why : "out of memory");
	else
		fprintf(stderr, "dwleak: warning: not tracing pid %d (%s): %s; what it allocates is not in the "
				"report%s\n", p->pid, p->command ? p->command : "?", why ? why : "out of memory",
			tr->tracees ? " (what it starts is still followed)" : "");
	free(p->untraced);
	p->untraced = why ? why : strdup("?");
	untraced_release(tr, p);
}

int proc_tables_refresh(struct tracer *tr, struct proc *p)
{
	uint32_t dropped = 0;
	int err;

	err = unwinder_add_process(tr->uw, p->pid);
	if (err && err != -ENOENT)
		return err;
	err = unwinder_load_pending(tr->uw);
	trace_tables_warn(tr->uw);
	if (err < 0)
		return err;
	err = unwinder_publish(tr->uw, p->pid, p->slot, &dropped);
	if (dropped > p->table_dropped)
		p->table_dropped = dropped; /* the most any publish left out */
	if (err == 1)
		probes_tables_changed(tr->probes);
	return err == -ENOENT || err == 1 ? 0 : err;
}

/* The first process probed: the line scripts wait for; a later one whose
 * allocator differs from the first's gets a line of its own. */
static void announce(struct tracer *tr, const struct proc *p)
{
	struct unwinder_stats us;

	if (tr->announced && tr->first_alloc && p->alloc.description &&
	    strcmp(tr->first_alloc, p->alloc.description))
		fprintf(stderr, "dwleak: pid %d (%s) allocates with %s%s\n", p->pid, p->command,
			p->preload ? "preload, " : "", p->alloc.description);
	if (tr->announced)
		return;
	tr->announced = true;
	tr->first_alloc = p->alloc.description ? strdup(p->alloc.description) : NULL;
	tr->t_traced = tracer_now_s();
	unwinder_stats(tr->uw, &us);
	fprintf(stderr, "dwleak: tracing pid %d (%s%s; %u tables, %.0f ms to attach); Ctrl-C to stop\n", p->pid,
		p->preload ? "preload, " : "", p->alloc.description, us.loaded, (tr->t_traced - tr->t_start) * 1e3);
}

/* Says which allocator functions P calls that are not probed. */
static void not_covered_say(const struct proc *p)
{
	size_t i;

	for (i = 0; i < p->alloc.nnot_covered; i++)
		fprintf(stderr, "dwleak: warning: pid %d calls %s, which dwleak does not probe: what it "
				"allocates is not traced\n", p->pid, p->alloc.not_covered[i]);
}

/* A Go program's own heap is the Go runtime's: nothing of it passes
 * through malloc.  Says so once per program, the first time it is probed. */
static void go_heap_say(const struct proc *p)
{
	int fd = p->objs.n ? open(p->objs.paths[0], O_RDONLY | O_CLOEXEC) : -1;

	if (fd < 0)
		return;
	if (elf_has_section(fd, ".go.buildinfo") || elf_has_section(fd, ".gopclntab"))
		fprintf(stderr, "dwleak: note: pid %d (%s) is a Go program: its Go heap is managed by the Go "
				"runtime and is not traced; what its C code (cgo) allocates is\n", p->pid,
			p->objs.names[0]);
	close(fd);
}

/* --leak-check with ptrace: P stops at exit() for its check, before its
 * atexit handlers and destructors free what globals still hold. */
static void exit_probe(struct tracer *tr, struct proc *p)
{
	const char *path;
	uint64_t off;

	if (!tr->env->leak_check || !tr->tracees)
		return;
	if (proc_objects_function(&p->objs, "exit", &path, &off) ||
	    probes_proc_attach_exit(tr->probes, &p->pp, path, off))
		fprintf(stderr, "dwleak: warning: cannot probe exit() in pid %d (%s): its leak check runs when it "
				"exits, after its atexit handlers\n", p->pid, p->command);
}

/* P's objects are all mapped: find its allocator, load the tables and
 * probe it.  Returns 0, or a negative errno after letting P go. */
static int proc_probe(struct tracer *tr, struct proc *p)
{
	char what[PATH_MAX + 64] = "";
	int err;

	proc_objects_free(&p->objs);
	allocator_free(&p->alloc);
	err = proc_objects_of_pid(p->pid, &p->objs);
	if (err == -ENOENT || err == -ESRCH)
		return err; /* gone: its exit comes next */
	if (!err && p->objs.nreplaced)
		fprintf(stderr, "dwleak: note: %zu file(s) pid %d maps were replaced on disk since it mapped "
				"them (%s%s): dwleak reads and probes the copies the process maps\n",
			p->objs.nreplaced, p->pid, p->objs.first_replaced, p->objs.nreplaced > 1 ? ", ..." : "");
	err = err ?: allocator_detect(p->objs.paths, p->objs.names, p->objs.n, p->objs.npreload, &p->alloc);
	if (err == -ENOENT) {
		untraced(tr, p, "no object it maps defines malloc (a static program without symbols?)");
		return err;
	}
	if (err) {
		untraced(tr, p, "cannot find its allocator: %s", strerror(-err));
		return err;
	}
	not_covered_say(p);
	go_heap_say(p);
	err = proc_tables_refresh(tr, p);
	if (err)
		fprintf(stderr, "dwleak: warning: loading unwind tables for pid %d failed: %s\n", p->pid,
			strerror(-err));
	/* at the preload library's sites when it can, else uprobes */
	err = trace_preload_attach(tr, p);
	if (err < 0)
		return err;
	err = err ? probes_proc_attach(tr->probes, &p->pp, &p->alloc, what, sizeof(what)) : 0;
	if (err) {
		untraced(tr, p, "cannot attach %s: %s", what, strerror(-err));
		return err;
	}
	p->probed = true;
	p->awaiting_linker = false;
	exit_probe(tr, p);
	announce(tr, p);
	return 0;
}

/* Registers P with the programs: its slot, its image (P->image, given by
 * the caller), its linker hook (stopping at it when followed with
 * ptrace). */
static int proc_register(struct tracer *tr, struct proc *p)
{
	unsigned int flags = 0;
	int err;

	/* stops need a tracer that resumes: ptrace */
	if (tr->tracees)
		flags = PROC_STOP_AT_DL_STATE | (tr->env->leak_check ? PROC_STOP_AT_EXIT : 0);
	if (p->slot == DWLEAK_NO_SLOT)
		p->slot = unwinder_slot_take(tr->uw, p->pid);
	if (p->slot == DWLEAK_NO_SLOT && !p->no_slot) {
		p->no_slot = true;
		fprintf(stderr, "dwleak: note: pid %d (%s): more than %d processes are alive at once, and it gets "
				"no mapping table: its walks look each mapping up in the kernel (slower, and it fails "
				"while another thread holds the mmap lock: walk_err_vma_busy)\n",
			p->pid, p->command ? p->command : "?", DWLEAK_MAX_PROC_SLOTS);
	}
	err = probes_proc_add(tr->probes, &p->pp, p->pid, p->slot, p->image, &p->objs.dl, flags);
	if (err == -E2BIG)
		untraced(tr, p, "more than %d processes are traced at once", DWLEAK_MAX_PROCS);
	else if (err)
		untraced(tr, p, "cannot register it with the BPF programs: %s", strerror(-err));
	return err;
}

int proc_attach_running(struct tracer *tr, pid_t pid)
{
	struct proc *p = procs_add(&tr->procs, pid, 0);
	int err;

	if (!p)
		return -ENOMEM;
	p->command = target_cmdline(pid);
	p->ledger.partial = true; /* what it allocated before is not known */
	err = proc_objects_of_pid(pid, &p->objs);
	err = err ?: stack_store_image_new(tr->stacks, &p->image);
	err = err ?: proc_register(tr, p);
	if (err)
		return err;
	if (probes_proc_attach_linker(tr->probes, &p->pp, &p->objs.dl) && p->objs.dl.path)
		fprintf(stderr, "dwleak: warning: cannot probe %s's _dl_debug_state; libraries pid %d loads "
				"later are found by a rescan every second\n", p->objs.dl.path, pid);
	return proc_probe(tr, p);
}

int proc_on_exec(struct tracer *tr, pid_t pid)
{
	struct proc *p = procs_find(&tr->procs, pid);
	int err;

	if (!p && !(p = procs_add(&tr->procs, pid, 0)))
		return -ENOMEM;
	/* a new image: what kept the old one from being traced (a static
	 * shell) may not hold for it (the dynamic program it runs); and the
	 * old image's blocks are gone with it, so nothing untraced is lost */
	free(p->untraced);
	p->untraced = NULL;
	/* the old image is gone, and with it every block it had, its
	 * mappings and (when no other process has it) its stacks */
	probes_proc_detach(tr->probes, &p->pp);
	probes_thread_forget(tr->probes, pid);
	ledger_free(&p->ledger);
	memset(&p->ledger, 0, sizeof(p->ledger));
	trace_stacks_leave(tr, p);
	p->image = 0;
	probes_mappings_take(tr->probes, (uint32_t)pid, NULL, NULL);
	allocator_free(&p->alloc);
	trace_preload_forget(p);
	p->probed = false;
	p->vfork_child = false;
	free(p->command);
	p->command = target_cmdline(pid);
	/* the kernel mapped the program and its interpreter, nothing else yet */
	proc_objects_free(&p->objs);
	err = proc_objects_of_pid(pid, &p->objs);
	if (err)
		return err == -ENOENT ? 0 : err;
	err = stack_store_image_new(tr->stacks, &p->image);
	if (err)
		return err;
	err = proc_register(tr, p);
	if (err)
		return 0;
	if (!p->objs.dl.found) /* a static program: everything is mapped */
		return proc_probe(tr, p) == -ENOMEM ? -ENOMEM : 0;
	err = probes_proc_attach_linker(tr->probes, &p->pp, &p->objs.dl);
	if (err) {
		untraced(tr, p, "cannot probe its dynamic linker %s: %s", p->objs.dl.path, strerror(-err));
		return 0;
	}
	p->awaiting_linker = true;
	proc_tables_refresh(tr, p); /* the program's and the linker's, for the first walks */
	return 0;
}

int proc_on_linker_stop(struct tracer *tr, pid_t pid)
{
	struct proc *p = procs_find(&tr->procs, pid);
	int err;

	if (!p || p->untraced)
		return 0;
	if (p->awaiting_linker)
		return proc_probe(tr, p) == -ENOMEM ? -ENOMEM : 0;
	err = proc_tables_refresh(tr, p); /* dlopen, dlclose */
	if (err)
		fprintf(stderr, "dwleak: warning: loading new unwind tables for pid %d failed: %s\n", pid,
			strerror(-err));
	return 0;
}

int proc_on_fork(struct tracer *tr, pid_t parent, pid_t child, bool vfork)
{
	struct proc *pp = procs_find(&tr->procs, parent), *c = procs_add(&tr->procs, child, parent);
	char what[PATH_MAX + 64] = "";
	int err;

	if (!c)
		return -ENOMEM;
	c->command = strdup(pp && pp->command ? pp->command : "?");
	if (!pp || pp->untraced) {
		/* its parent's image, untraced for the same reason; said in the
		 * report if it ends so, not now: a shell's child usually execs
		 * a program next, and that one is tried again */
		c->untraced = strdup(pp && pp->untraced ? pp->untraced : "forked by a process dwleak does not know");
		c->vfork_child = vfork;
		return c->untraced ? 0 : -ENOMEM;
	}
	/* a vfork child borrows its parent's memory until it execs (its exec
	 * is followed) or exits: it allocates nothing of its own */
	c->vfork_child = vfork;
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
	if (proc_register(tr, c)) {
		c->image = 0;
		return 0;
	}
	stack_store_image_join(tr->stacks, c->image);
	probes_proc_attach_linker(tr->probes, &c->pp, &c->objs.dl);
	c->awaiting_linker = pp->awaiting_linker;
	if (pp->probed) {
		err = trace_preload_fork(tr, pp, c);
		if (err < 0)
			return err;
		err = err ? probes_proc_attach(tr->probes, &c->pp, &c->alloc, what, sizeof(what)) : 0;
		if (err) {
			untraced(tr, c, "cannot attach %s: %s", what, strerror(-err));
			return 0;
		}
		c->probed = true;
		exit_probe(tr, c);
	}
	/* the same files mapped at the same places: the tables are loaded */
	unwinder_publish(tr->uw, child, c->slot, NULL);
	return 0;
}

void proc_on_exit(struct tracer *tr, pid_t pid, int status)
{
	struct proc *p = procs_find(&tr->procs, pid);
	int err;

	if (!p)
		return;
	p->exited = true;
	p->exit_status = status;
	probes_proc_remove(tr->probes, &p->pp);
	unwinder_slot_release(tr->uw, p->slot);
	p->slot = DWLEAK_NO_SLOT;
	if (p->untraced) {
		/* nothing of it was traced since its image could not be: no
		 * mappings nor blocks to keep, only its image to leave */
		trace_stacks_leave(tr, p);
		return;
	}
	/* what names its frames in the report, out of the kernel's map */
	free(p->maps);
	p->maps = NULL;
	p->nmaps = 0;
	err = probes_mappings_take(tr->probes, (uint32_t)pid, &p->maps, &p->nmaps);
	p->maps_kept = !err;
	if (err)
		fprintf(stderr, "dwleak: warning: cannot read the mappings of pid %d (%s), which exited: %s; its "
				"frames are reported as addresses\n", pid, p->command ? p->command : "?",
			strerror(-err));
	proc_objects_free(&p->objs);
	/* its records are all applied and its leak check done: its blocks
	 * are sums by stack from now on */
	if (ledger_seal(&p->ledger, tracer_now_ns(), (uint64_t)(tr->env->min_age_s * 1e9),
			(uint64_t)tr->env->sample_bytes))
		fprintf(stderr, "dwleak: warning: out of memory folding the blocks of pid %d (%s), which exited: "
				"they are kept one by one\n", pid, p->command ? p->command : "?");
	trace_stacks_leave(tr, p);
}
