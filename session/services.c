/* What a process's life is given (proc.h's struct proc_services), wired to
 * the session's real parts: the target's files (target/), the walker
 * (unwinder/), the BPF programs (bpf/probes), the leak check.  Each is a
 * thin wrapper; proc.c decides, these only do. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "leak_scan.h"
#include "names.h"
#include "seccomp_filters.h"
#include "session_private.h"

static struct session *of(void *ctx)
{
	return ctx;
}

static char *sv_cmdline(void *ctx, pid_t pid)
{
	(void)ctx;
	return target_cmdline(pid);
}

static int sv_objects(void *ctx, pid_t pid, struct proc_objects *out)
{
	(void)ctx;
	return proc_objects_of_pid(pid, out);
}

static int sv_allocator(void *ctx, const struct proc_objects *o, struct allocator *out)
{
	(void)ctx;
	return allocator_detect(o->paths, o->names, o->n, o->npreload, out);
}

static int sv_sites_find(void *ctx, const struct proc_objects *o, struct preload_sites *out, char **why)
{
	(void)ctx;
	return preload_sites_find(o->paths, o->names, o->n, out, why);
}

/* Which of the allocator calls of a process the injected library's last
 * routing pass misses (C: its control block), malloc'd, or NULL. */
static char *route_gaps(const struct dwleak_preload_control *c)
{
	char *why = NULL;

	if (c->route_done == c->route_request && !c->route_deferred && !c->route_unreadable &&
	    !c->route_elsewhere && !c->route_failed)
		return NULL;
	if (asprintf(&why, "of %u objects: %u left for a later pass, %u unreadable, %u slots bound elsewhere, "
			   "%u slots it could not write%s", c->route_objects, c->route_deferred, c->route_unreadable,
		     c->route_elsewhere, c->route_failed,
		     c->route_done != c->route_request ? "; a routing pass is pending" : "") < 0)
		why = NULL;
	return why;
}

static int sv_sites_find_injected(void *ctx, pid_t pid, const struct proc_objects *o, struct preload_sites *out,
				  char **why)
{
	struct dwleak_preload_control c;
	char *not_sites = NULL;
	int err;

	(void)ctx;
	*why = NULL;
	err = preload_sites_find_injected(o->paths, o->names, o->n, out, &not_sites);
	free(not_sites);
	if (err)
		return err == -ENOMEM ? err : -ENOENT;
	/* loaded some other way (LD_PRELOAD, but not first): not routed */
	if (preload_control_read(pid, out, &c) || !c.injected) {
		preload_sites_free(out);
		return -ENOENT;
	}
	*why = route_gaps(&c);
	return 0;
}

static int sv_route(void *ctx, pid_t pid, const struct preload_sites *sites)
{
	(void)ctx;
	return preload_route_request(pid, sites);
}

static uint32_t sv_slot_take(void *ctx, pid_t pid)
{
	return unwinder_slot_take(of(ctx)->uw, pid);
}

static void sv_slot_release(void *ctx, uint32_t slot)
{
	unwinder_slot_release(of(ctx)->uw, slot);
}

/* Says, once each, which objects got no unwind table. */
static void tables_warn(struct session *s)
{
	struct unwind_object *o;
	size_t i;

	for (i = 0; i < unwinder_count(s->uw); i++) {
		o = unwinder_object(s->uw, i);
		if (o->error && !o->loaded && o->error_msg && o->error != -ENODATA)
			session_say(&s->log, SESSION_WARNING, "no unwind table for %s: %s; stacks through it will stop "
				    "there", o->path, o->error_msg);
		if (o->error_msg)
			o->error = o->error ? o->error : -EIO; /* warn once */
		free(o->error_msg);
		o->error_msg = NULL;
	}
}

static int sv_tables(void *ctx, pid_t pid, uint32_t slot, uint32_t *dropped)
{
	struct session *s = of(ctx);
	int err = unwinder_add_process(s->uw, pid);

	if (err && err != -ENOENT)
		return err;
	err = unwinder_load_pending(s->uw);
	tables_warn(s);
	if (err < 0)
		return err;
	err = unwinder_publish(s->uw, pid, slot, dropped);
	if (err == 1)
		probes_tables_changed(s->probes);
	return err == -ENOENT ? 0 : err; /* 1: changed */
}

static int sv_add(void *ctx, struct probes_proc *pp, pid_t pid, uint32_t slot, uint32_t image,
		  const struct dl_hook *dl, unsigned int flags)
{
	return probes_proc_add(of(ctx)->probes, pp, pid, slot, image, dl, flags);
}

static void sv_remove(void *ctx, struct probes_proc *pp)
{
	probes_proc_remove(of(ctx)->probes, pp);
}

static void sv_detach(void *ctx, struct probes_proc *pp)
{
	probes_proc_detach(of(ctx)->probes, pp);
}

static int sv_attach_linker(void *ctx, struct probes_proc *pp, const struct dl_hook *dl)
{
	return probes_proc_attach_linker(of(ctx)->probes, pp, dl);
}

static int sv_attach_allocator(void *ctx, struct probes_proc *pp, const struct allocator *a, char *what, size_t len)
{
	return probes_proc_attach(of(ctx)->probes, pp, a, what, len);
}

/* The allocator functions the library does not see (a pointer from
 * dlsym): uprobes, as without the library. */
static int complement_attach(struct session *s, struct probes_proc *pp, const struct allocator *a, bool *alone)
{
	char what[PATH_MAX + 64] = "";
	struct allocator rest;
	size_t i, n = 0;
	int err = preload_complement(a, &rest);

	if (err)
		return err;
	for (i = 0; i < rest.nobjs; i++)
		n += rest.objs[i].nfuncs;
	err = n ? probes_proc_attach(s->probes, pp, &rest, what, sizeof(what)) : 0;
	allocator_free(&rest);
	*alone = n == 0;
	return err;
}

static int sv_attach_sites(void *ctx, struct probes_proc *pp, pid_t pid, const struct preload_sites *sites,
			   const struct allocator *a, bool fork_child, bool *alone)
{
	struct session *s = of(ctx);
	/* a sampled trace's leak check reads the library's index of every
	 * block: a new one, but for a fork child's copy */
	int err = preload_control_write(pid, sites, s->set->sample_bytes, s->set->leak_check && s->set->sample_bytes,
					!fork_child);

	*alone = false;
	err = err ?: complement_attach(s, pp, a, alone);
	return err ?: probes_proc_attach_preload(s->probes, pp, sites, preload_control_addr(pid, sites));
}

static int sv_attach_exit(void *ctx, struct probes_proc *pp, const char *path, uint64_t off)
{
	return probes_proc_attach_exit(of(ctx)->probes, pp, path, off);
}

static void sv_thread_forget(void *ctx, pid_t pid)
{
	probes_thread_forget(of(ctx)->probes, pid);
}

static int sv_mappings_take(void *ctx, pid_t pid, struct probes_mapping **maps, size_t *n)
{
	return probes_mappings_take(of(ctx)->probes, (uint32_t)pid, maps, n);
}

static void sv_stacks_move(void *ctx)
{
	session_stacks_move(of(ctx));
}

static void drain_cb(void *ctx)
{
	session_drain(ctx);
}

static int sv_leak_scan(void *ctx, pid_t pid, bool exited, const struct allocator *alloc, struct ledger *ledger,
			const struct preload_sites *sites, const struct leak_scan_exit *exiting,
			const struct proc_rings *rings, struct leak_scan_result *out)
{
	struct session *s = of(ctx);
	struct dwleak_preload_control c;
	uint64_t index = 0;
	uint32_t index_gen = 0;
	int err;

	/* a sampled trace's ledger holds only the sample: every block comes
	 * from the library's index, which a process traced with uprobes has
	 * not */
	if (s->set->sample_bytes && !exited) {
		if (!sites)
			return -ENOTSUP;
		err = preload_control_read(pid, sites, &c);
		if (err)
			return err;
		if (!c.index_request || !c.index_addr)
			return -ENOTSUP;
		index = c.index_addr;
		index_gen = c.index_gen;
	}
	/* a process that exited is no tracee any more: seized for the check
	 * (and gone: -ESRCH) */
	return leak_scan_process(exited ? NULL : s->tracees, pid, alloc, ledger, exiting, !s->set->leak_check_stop,
				 index, index_gen, rings, drain_cb, s, out);
}

/* The walk in the process (proc_rings.h): the target's memory read with
 * process_vm_readv (no descriptor), written through /proc/PID/mem (as
 * the control block is); its image from the walker's tables. */
static int sv_mem_read(void *ctx, pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t got;

	(void)ctx;
	got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (got < 0)
		return -errno;
	return (size_t)got == len ? 0 : -EFAULT;
}

static int sv_mem_write(void *ctx, pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	char path[64];
	ssize_t put;
	int fd, err = 0;

	(void)ctx;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	put = pwrite(fd, buf, len, (off_t)addr);
	if (put < 0)
		err = -errno;
	else if ((size_t)put != len)
		err = -EFAULT;
	close(fd);
	return err;
}

static int sv_image_build(void *ctx, pid_t pid, void **blob, size_t *len)
{
	return unwinder_image_build(of(ctx)->uw, pid, blob, len, NULL);
}

static int sv_seccomp_mode(void *ctx, pid_t pid)
{
	(void)ctx;
	return seccomp_mode(pid, pid);
}

static uint64_t sv_control_addr(void *ctx, pid_t pid, const struct preload_sites *sites)
{
	(void)ctx;
	return preload_control_addr(pid, sites);
}

/* Every stack the report names passes through the program (main), its
 * C library (__libc_start_main) and mostly its allocator's object: their
 * symbols and debug information are opened ahead (symbolizer_prepare),
 * while the command runs, instead of after it ends. */
static void names_prepare(struct session *s, const struct proc *p)
{
	const char *want[3] = { p->objs.n ? p->objs.paths[0] : NULL, NULL,
				p->alloc.nobjs ? p->alloc.objs[0].path : NULL };
	struct stat w, st;
	uint64_t off;
	size_t i, k;

	if (proc_objects_function(&p->objs, "__libc_start_main", &want[1], &off))
		want[1] = NULL;
	for (k = 0; k < 3; k++) {
		if (!want[k] || stat(want[k], &w))
			continue;
		for (i = 0; i < unwinder_count(s->uw); i++) {
			const struct unwind_object *o = unwinder_object(s->uw, i);

			if (o->fd >= 0 && !fstat(o->fd, &st) && st.st_dev == w.st_dev && st.st_ino == w.st_ino) {
				symbolizer_prepare(s->sym, o->path, o->fd);
				break;
			}
		}
	}
}

static size_t sv_names_warm(void *ctx, struct proc *p, const uint64_t *ids, size_t n, double until)
{
	struct session *s = of(ctx);
	struct stack_names names;
	struct stack_source src;
	struct stack_trace st;
	size_t i = 0;

	/* the mappings map holds every process's: read (a walk over all of
	 * it) once per change of P's, not at every wakeup */
	if (!p->warm_maps || p->warm_gen != p->maps_gen) {
		struct probes_mapping *maps;
		size_t nmaps;

		if (probes_mappings(s->probes, (uint32_t)p->pid, &maps, &nmaps))
			return 0; /* the report names them */
		free(p->warm_maps);
		p->warm_maps = maps;
		p->warm_nmaps = nmaps;
		p->warm_gen = p->maps_gen;
	}
	if (stack_names_open(&names, s->stacks, s->probes, s->uw, s->sym, (uint32_t)p->pid, true, p->warm_maps,
			     p->warm_nmaps, &src))
		return 0;
	for (; i < n && session_now_s() < until; i++)
		if (!stack_store_get(s->stacks, ids[i], &st) && stack_names_warm(&names, &st))
			break;
	stack_names_free(&names);
	return i;
}

/* The first process traced: the line scripts wait for; a later one whose
 * allocator differs from the first's gets a line of its own. */
static void sv_traced(void *ctx, const struct proc *p)
{
	struct session *s = of(ctx);
	struct unwinder_stats us;
	char how[64];

	names_prepare(s, p);

	if (s->announced && s->first_alloc && p->alloc.description && strcmp(s->first_alloc, p->alloc.description))
		session_say(&s->log, SESSION_INFO, "pid %d (%s) allocates with %s%s", p->pid, p->command,
			    p->injected ? "preload (injected), " : p->preload ? "preload, " : "", p->alloc.description);
	if (s->announced)
		return;
	s->announced = true;
	s->first_alloc = p->alloc.description ? strdup(p->alloc.description) : NULL;
	s->t_traced = session_now_s();
	unwinder_stats(s->uw, &us);
	if (p->injected && s->inject_ms >= 0)
		snprintf(how, sizeof(how), "preload, injected in %.0f ms, ", s->inject_ms);
	else if (p->injected)
		snprintf(how, sizeof(how), "preload, injected before, ");
	else
		snprintf(how, sizeof(how), "%s", p->preload ? "preload, " : "");
	session_say(&s->log, SESSION_INFO, "tracing pid %d (%s%s; %u tables, %.0f ms to attach); Ctrl-C to stop",
		    p->pid, how, p->alloc.description, us.loaded, (s->t_traced - s->t_start) * 1e3);
}

/* The first process that walks in itself, said once: the others of a
 * tree do as it does (--stats counts each). */
static void sv_walking(void *ctx, const struct proc *p)
{
	struct session *s = of(ctx);

	if (s->walking_said)
		return;
	s->walking_said = true;
	session_say(&s->log, SESSION_INFO, "pid %d (%s) walks its stacks in the process%s", p->pid,
		    p->command ? p->command : "?",
		    s->pset.walk_rings == DWLEAK_PRELOAD_WALK_FP ? " (frame pointers)" : "");
}

void session_services_init(struct session *s)
{
	s->sv = (struct proc_services){
		.ctx = s,
		.set = &s->pset,
		.log = &s->log,
		.stacks = s->stacks,
		.cmdline = sv_cmdline,
		.objects = sv_objects,
		.allocator = sv_allocator,
		.sites_find = sv_sites_find,
		.sites_find_injected = sv_sites_find_injected,
		.route = sv_route,
		.slot_take = sv_slot_take,
		.slot_release = sv_slot_release,
		.tables = sv_tables,
		.add = sv_add,
		.remove = sv_remove,
		.detach = sv_detach,
		.attach_linker = sv_attach_linker,
		.attach_allocator = sv_attach_allocator,
		.attach_sites = sv_attach_sites,
		.attach_exit = sv_attach_exit,
		.thread_forget = sv_thread_forget,
		.mappings_take = sv_mappings_take,
		.stacks_move = sv_stacks_move,
		.leak_scan = sv_leak_scan,
		.traced = sv_traced,
		.walking = sv_walking,
		.names_warm = sv_names_warm,
		.rings_io = { .ctx = s, .mem_read = sv_mem_read, .mem_write = sv_mem_write,
			      .image_build = sv_image_build, .seccomp_mode = sv_seccomp_mode },
		.control_addr = sv_control_addr,
	};
}
