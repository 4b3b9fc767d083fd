/* A traced process's whole life (session/proc.c) against fake services:
 * no root, no BPF, no real process.  The fake world says what each pid's
 * image is (static or dynamic, which allocator, whether it carries the
 * preload library, which step fails) and records what the life asked of
 * the programs and the walker, so each path is checked for what it
 * attached, what it gave back and what it said; ASan checks that every
 * path frees what it took.
 *
 * Cases: -p on a running process (uprobes; at the library's sites), a
 * command spawned and exec'd (static, dynamic at the linker's stop), fork
 * before and after the linker's stop, vfork then exec, an exec that
 * changes the allocator, a process whose preload sites vanish at its next
 * exec, sites that cannot be attached (uprobe fallback), an image that
 * cannot be traced and its children, the leak check at exit() and as it
 * exits, and exit giving back the slot, the programs entry and the image. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "proc.h"

/* A real object that exports exit(), for the leak check's exit probe. */
#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

/* What a pid's current image is, as the fake target tells it. */
struct image {
	const char *program;
	bool dynamic;	     /* has a dynamic linker: probed at its stop */
	const char *family;  /* its allocator; NULL: none found (-ENOENT) */
	bool library;	     /* carries the preload library, whose sites can serve */
	int attach_sites_err; /* the sites' attach fails so */
	bool injected;	     /* the library was loaded into it while it ran (not first) */
};

#define MAXPID 128

struct fake {
	const struct image *image[MAXPID]; /* by pid */
	bool gone[MAXPID];
	/* what the life asked */
	int slots_out, slots_taken;
	int added, removed;
	int attach_allocator, attach_sites, attach_linker, attach_exit, detach;
	int leak_scans, tables, traced, moves, forgets, mappings_taken, routes;
	int tables_ret; /* what tables returns: 1 the walker's view changed */
	int said[4];
	char last_said[512];
	uint32_t next_slot;
	struct proc_settings set;
	struct session_log log;
	struct proc_services sv;
	struct procs ps;
};

static struct fake *F(void *ctx)
{
	return ctx;
}

static void fk_say(void *ctx, enum session_level level, const char *text)
{
	struct fake *f = ctx;

	f->said[level]++;
	snprintf(f->last_said, sizeof(f->last_said), "%s", text);
}

static char *fk_cmdline(void *ctx, pid_t pid)
{
	const struct image *im = F(ctx)->image[pid];

	return im ? strdup(im->program) : NULL;
}

static char **strings(const char *a, const char *b)
{
	char **v = calloc(3, sizeof(*v));

	v[0] = strdup(a);
	v[1] = b ? strdup(b) : NULL;
	return v;
}

static int fk_objects(void *ctx, pid_t pid, struct proc_objects *out)
{
	struct fake *f = F(ctx);
	const struct image *im = f->image[pid];

	memset(out, 0, sizeof(*out));
	if (!im || f->gone[pid])
		return -ENOENT;
	out->paths = strings(im->program, LIBC);
	out->names = strings(im->program, LIBC);
	out->n = 2;
	if (im->dynamic) {
		out->dl.path = strdup("/lib64/ld-linux-x86-64.so.2");
		out->dl.found = true;
	}
	return 0;
}

static int fk_allocator(void *ctx, const struct proc_objects *objs, struct allocator *out)
{
	const struct image *im = NULL;
	size_t i;

	for (i = 0; i < MAXPID && !im; i++)
		if (F(ctx)->image[i] && !strcmp(F(ctx)->image[i]->program, objs->names[0]))
			im = F(ctx)->image[i];
	memset(out, 0, sizeof(*out));
	if (!im || !im->family)
		return -ENOENT;
	out->family = im->family;
	out->description = strdup(im->family);
	return 0;
}

static int fk_sites_find(void *ctx, const struct proc_objects *objs, struct preload_sites *out, char **why)
{
	const struct image *im = NULL;
	size_t i;

	(void)why;
	for (i = 0; i < MAXPID && !im; i++)
		if (F(ctx)->image[i] && !strcmp(F(ctx)->image[i]->program, objs->names[0]))
			im = F(ctx)->image[i];
	memset(out, 0, sizeof(*out));
	if (!im || !im->library)
		return -ENOENT;
	out->path = strdup("/fake/libdwleak-preload.so");
	out->name = strdup("/fake/libdwleak-preload.so");
	return 0;
}

/* No library is ever loaded into a fake process while it runs. */
static int fk_sites_find_injected(void *ctx, pid_t pid, const struct proc_objects *objs, struct preload_sites *out,
				  char **why)
{
	const struct image *im = F(ctx)->image[pid];

	(void)objs;
	memset(out, 0, sizeof(*out));
	*why = NULL;
	if (!im || !im->injected)
		return -ENOENT;
	out->path = strdup("/fake/libdwleak-preload.so");
	out->name = strdup("/fake/libdwleak-preload.so");
	return 0;
}

static int fk_route(void *ctx, pid_t pid, const struct preload_sites *s)
{
	(void)pid;
	(void)s;
	F(ctx)->routes++;
	return 0;
}

static uint32_t fk_slot_take(void *ctx, pid_t pid)
{
	(void)pid;
	F(ctx)->slots_out++;
	F(ctx)->slots_taken++;
	return F(ctx)->next_slot++;
}

static void fk_slot_release(void *ctx, uint32_t slot)
{
	if (slot != DWLEAK_NO_SLOT)
		F(ctx)->slots_out--;
}

static int fk_tables(void *ctx, pid_t pid, uint32_t slot, uint32_t *dropped)
{
	(void)pid;
	(void)slot;
	if (dropped)
		*dropped = 0;
	F(ctx)->tables++;
	return F(ctx)->tables_ret;
}

static int fk_add(void *ctx, struct probes_proc *pp, pid_t pid, uint32_t slot, uint32_t image,
		  const struct dl_hook *dl, unsigned int flags)
{
	(void)slot;
	(void)dl;
	(void)flags;
	CHECK(image != 0, "pid %d registered without an image", pid);
	if (!pp->added)
		F(ctx)->added++;
	pp->pid = pid;
	pp->added = true;
	return 0;
}

static void fk_remove(void *ctx, struct probes_proc *pp)
{
	if (pp->added)
		F(ctx)->removed++;
	pp->added = false;
}

static void fk_detach(void *ctx, struct probes_proc *pp)
{
	(void)pp;
	F(ctx)->detach++;
}

static int fk_attach_linker(void *ctx, struct probes_proc *pp, const struct dl_hook *dl)
{
	(void)pp;
	if (!dl->found)
		return -ENOENT;
	F(ctx)->attach_linker++;
	return 0;
}

static int fk_attach_allocator(void *ctx, struct probes_proc *pp, const struct allocator *a, char *what, size_t len)
{
	(void)pp;
	(void)a;
	snprintf(what, len, "malloc");
	F(ctx)->attach_allocator++;
	return 0;
}

static int fk_attach_sites(void *ctx, struct probes_proc *pp, pid_t pid, const struct preload_sites *s,
			   const struct allocator *a, bool fork_child, bool *alone)
{
	const struct image *im = F(ctx)->image[pid];

	(void)pp;
	(void)s;
	(void)a;
	(void)fork_child;
	*alone = true;
	F(ctx)->attach_sites++;
	return im ? im->attach_sites_err : -ESRCH;
}

static int fk_attach_exit(void *ctx, struct probes_proc *pp, const char *path, uint64_t off)
{
	(void)pp;
	CHECK(!strcmp(path, LIBC) && off, "exit() probed at %s+%llu", path, (unsigned long long)off);
	F(ctx)->attach_exit++;
	return 0;
}

static void fk_thread_forget(void *ctx, pid_t pid)
{
	(void)pid;
	F(ctx)->forgets++;
}

static int fk_mappings_take(void *ctx, pid_t pid, struct probes_mapping **maps, size_t *n)
{
	(void)pid;
	if (maps) {
		*maps = calloc(1, sizeof(**maps));
		*n = 1;
	}
	F(ctx)->mappings_taken++;
	return 0;
}

static void fk_stacks_move(void *ctx)
{
	F(ctx)->moves++;
}

/* The fake check calls every block definitely lost, through the ledger. */
static int fk_leak_scan(void *ctx, pid_t pid, bool exited, const struct allocator *alloc, struct ledger *l,
			const struct preload_sites *sites, const struct leak_scan_exit *exiting,
			const struct proc_rings *rings, struct leak_scan_result *out)
{
	(void)rings;
	size_t i;

	(void)pid;
	(void)exited;
	(void)alloc;
	(void)sites;
	(void)exiting;
	memset(out, 0, sizeof(*out));
	for (i = 0; i < l->allocs.cap; i++) {
		const struct alloc_rec *r = &l->allocs.slots[i];

		if (r->addr)
			ledger_verdict(l, r->addr, r->size, r->ts, LEAK_DEFINITELY_LOST, false);
	}
	out->done = true;
	F(ctx)->leak_scans++;
	return 0;
}

static void fk_traced(void *ctx, const struct proc *p)
{
	(void)p;
	F(ctx)->traced++;
}

static void fake_init(struct fake *f, bool following, bool leak_check)
{
	memset(f, 0, sizeof(*f));
	f->next_slot = 1;
	f->set = (struct proc_settings){ .following = following, .leak_check = leak_check };
	f->log = (struct session_log){ f, fk_say };
	CHECK(!stack_store_new(&f->sv.stacks));
	f->sv.ctx = f;
	f->sv.set = &f->set;
	f->sv.log = &f->log;
	f->sv.cmdline = fk_cmdline;
	f->sv.objects = fk_objects;
	f->sv.allocator = fk_allocator;
	f->sv.sites_find = fk_sites_find;
	f->sv.sites_find_injected = fk_sites_find_injected;
	f->sv.route = fk_route;
	f->sv.slot_take = fk_slot_take;
	f->sv.slot_release = fk_slot_release;
	f->sv.tables = fk_tables;
	f->sv.add = fk_add;
	f->sv.remove = fk_remove;
	f->sv.detach = fk_detach;
	f->sv.attach_linker = fk_attach_linker;
	f->sv.attach_allocator = fk_attach_allocator;
	f->sv.attach_sites = fk_attach_sites;
	f->sv.attach_exit = fk_attach_exit;
	f->sv.thread_forget = fk_thread_forget;
	f->sv.mappings_take = fk_mappings_take;
	f->sv.stacks_move = fk_stacks_move;
	f->sv.leak_scan = fk_leak_scan;
	f->sv.traced = fk_traced;
}

static void fake_end(struct fake *f)
{
	proc_release_all(&f->sv, &f->ps);
	EXPECT(f->added == f->removed, "%d programs entries added, %d removed", f->added, f->removed);
	procs_free(&f->ps);
	stack_store_free(f->sv.stacks);
}

/* One allocation record of SIZE bytes at ADDR by process PID. */
static void record(struct fake *f, pid_t pid, uint64_t addr, uint64_t size)
{
	struct alloc_event e = { 0 };

	e.type = AEV_ALLOC;
	e.tgid = (uint32_t)pid;
	e.addr = addr;
	e.size = size;
	e.stack_id = 7;
	proc_record(&f->sv, &f->ps, 1000, &e, sizeof(e));
}

static const struct image prog_glibc = { "/usr/bin/prog", true, "glibc", false, 0, false };
static const struct image prog_lib = { "/usr/bin/prog", true, "glibc", true, 0, false };
static const struct image prog_lib_broken = { "/usr/bin/prog", true, "glibc", true, -EINVAL, false };
static const struct image shell_static = { "/bin/busybox", false, NULL, false, 0, false };
static const struct image tool_static = { "/usr/bin/static-tool", false, "custom", false, 0, false };
static const struct image jemalloc_prog = { "/usr/bin/redis", true, "jemalloc", false, 0, false };
static const struct image redis_injected = { "/usr/bin/redis-server", true, "jemalloc", false, 0, true };

/* -p on a running process: uprobes, announced, registered once; its exit
 * gives back the slot and the entry. */
static void test_attach_running(void)
{
	struct fake f;
	struct proc *p;

	fake_init(&f, false, false);
	f.image[10] = &prog_glibc;
	CHECK(!proc_attach_running(&f.sv, &f.ps, 10));
	p = procs_find(&f.ps, 10);
	CHECK(p);
	EXPECT(p->probed && !p->preload && !p->untraced, "probed %d preload %d", p->probed, p->preload);
	EXPECT(p->ledger.partial, "a running process's ledger is partial");
	EXPECT(f.attach_allocator == 1 && f.attach_sites == 0 && f.traced == 1);
	EXPECT(f.attach_linker == 1, "its linker hooked for later dlopens");
	EXPECT(f.slots_out == 1 && f.added == 1);
	proc_on_exit(&f.sv, &f.ps, 10, 0);
	EXPECT(p->exited && f.slots_out == 0 && f.removed == 1);
	EXPECT(p->maps_kept && p->nmaps == 1, "its mappings kept to name its frames");
	EXPECT(f.moves == 1, "its image ended: the kernel map emptied (%d)", f.moves);
	fake_end(&f);
}

/* -p on a process that has the library: at its sites. */
static void test_attach_sites(void)
{
	struct fake f;
	struct proc *p;

	fake_init(&f, false, false);
	f.image[11] = &prog_lib;
	CHECK(!proc_attach_running(&f.sv, &f.ps, 11));
	p = procs_find(&f.ps, 11);
	EXPECT(p->probed && p->preload && f.attach_sites == 1 && f.attach_allocator == 0);
	fake_end(&f);
}

/* Sites that cannot be attached: said, and uprobes instead. */
static void test_sites_fallback(void)
{
	struct fake f;
	struct proc *p;

	fake_init(&f, false, false);
	f.image[12] = &prog_lib_broken;
	CHECK(!proc_attach_running(&f.sv, &f.ps, 12));
	p = procs_find(&f.ps, 12);
	EXPECT(p->probed && !p->preload && !p->sites.path, "uprobes, the sites forgotten");
	EXPECT(f.attach_sites == 1 && f.attach_allocator == 1 && f.detach == 1);
	EXPECT(f.said[SESSION_NOTE] == 1 && strstr(f.last_said, "tracing it with uprobes"), "said: %s",
	       f.last_said);
	fake_end(&f);
}

/* -p without ptrace: an exec told by the tracepoint drops the old image
 * and probes the new one as soon as its objects include an allocator
 * (nothing holds it at its linker's stop). */
static void test_exec_unfollowed(void)
{
	struct fake f;
	struct proc *p;

	fake_init(&f, false, false);
	f.image[17] = &prog_glibc;
	CHECK(!proc_attach_running(&f.sv, &f.ps, 17));
	p = procs_find(&f.ps, 17);
	record(&f, 17, 0x5000, 64);
	f.image[17] = &jemalloc_prog;
	CHECK(!proc_on_exec(&f.sv, &f.ps, 17));
	EXPECT(p->probed && !p->awaiting_linker && !strcmp(p->alloc.family, "jemalloc"),
	       "probed at once: probed %d awaiting %d", p->probed, p->awaiting_linker);
	EXPECT(p->ledger.allocs.n == 0, "the old image's blocks are gone with it");
	EXPECT(f.attach_allocator == 2);
	fake_end(&f);
}

/* -p on a process the library was loaded into: its sites, though the
 * library is not first in lookup order; new objects routed when its
 * linker says so; a fork's child inherits it. */
static void test_injected(void)
{
	struct fake f;
	struct proc *p, *c;

	fake_init(&f, true, false);
	f.image[15] = &redis_injected;
	CHECK(!proc_attach_running(&f.sv, &f.ps, 15));
	p = procs_find(&f.ps, 15);
	EXPECT(p->probed && p->preload && p->injected && f.attach_sites == 1 && f.attach_allocator == 0);
	proc_objects_changed(&f.ps, 15);
	proc_tables_due(&f.sv, &f.ps, false);
	EXPECT(f.routes == 1, "objects came: routed (%d)", f.routes);
	CHECK(!proc_on_stop(&f.sv, &f.ps, 15));
	EXPECT(f.routes == 2, "the linker stopped it: routed (%d)", f.routes);
	/* the periodic look at every process: routed only when the walker's
	 * view of it changed (a route request a second was a pass over every
	 * object's GOT in the process, a new image its walks gone cold) */
	proc_tables_due(&f.sv, &f.ps, true);
	EXPECT(f.routes == 2, "a rescan that found nothing new: not routed (%d)", f.routes);
	f.tables_ret = 1;
	proc_tables_due(&f.sv, &f.ps, true);
	EXPECT(f.routes == 3, "a rescan that found a new table: routed (%d)", f.routes);
	f.tables_ret = 0;
	f.image[16] = &redis_injected;
	CHECK(!proc_on_fork(&f.sv, &f.ps, 15, 16, false));
	c = procs_find(&f.ps, 16);
	EXPECT(c->probed && c->preload && c->injected, "the child has the library and its routing");
	f.image[15] = &prog_glibc; /* execs a program: the library is gone */
	CHECK(!proc_on_exec(&f.sv, &f.ps, 15));
	EXPECT(!p->injected && !p->preload);
	fake_end(&f);
}

/* -- CMD: spawned, exec'd into a dynamic program, probed at the linker's
 * stop; a fork before that stop waits for its own stop, a fork after it
 * is probed at once like its parent; exit gives everything back. */
static void test_spawn_fork(void)
{
	struct fake f;
	struct proc *parent, *early, *late;

	fake_init(&f, true, false);
	f.image[20] = &prog_glibc;
	CHECK(!proc_spawned(&f.ps, 20, "/usr/bin/prog"));
	CHECK(!proc_on_exec(&f.sv, &f.ps, 20));
	parent = procs_find(&f.ps, 20);
	EXPECT(parent->awaiting_linker && !parent->probed, "waits for the linker");
	/* fork before the linker's stop */
	f.image[21] = &prog_glibc;
	CHECK(!proc_on_fork(&f.sv, &f.ps, 20, 21, false));
	early = procs_find(&f.ps, 21);
	EXPECT(early->awaiting_linker && !early->probed && early->image == parent->image);
	CHECK(!proc_on_stop(&f.sv, &f.ps, 20));
	EXPECT(parent->probed && f.attach_allocator == 1, "probed at the stop");
	CHECK(!proc_on_stop(&f.sv, &f.ps, 21));
	EXPECT(early->probed && f.attach_allocator == 2, "the early child at its own stop");
	/* fork after: probed like its parent, no stop needed */
	f.image[22] = &prog_glibc;
	CHECK(!proc_on_fork(&f.sv, &f.ps, 20, 22, false));
	late = procs_find(&f.ps, 22);
	EXPECT(late->probed && !late->awaiting_linker && f.attach_allocator == 3);
	EXPECT(late->ledger.partial, "a fork's child holds its parent's blocks: partial");
	EXPECT(f.traced == 2, "announced for each probed at its stop (%d)", f.traced);
	proc_on_exit(&f.sv, &f.ps, 22, 0);
	proc_on_exit(&f.sv, &f.ps, 21, 0);
	EXPECT(f.moves == 0, "the image lives while its parent does");
	proc_on_exit(&f.sv, &f.ps, 20, 0);
	EXPECT(f.moves == 1, "the image ended with its last process");
	EXPECT(f.slots_out == 0 && f.added == 3 && f.removed == 3);
	EXPECT(procs_alive(&f.ps) == 0);
	fake_end(&f);
}

/* vfork: the child borrows the parent's memory, registers nothing until
 * it execs; its exec is of a static program, probed at once; an exec that
 * changes the allocator attaches the new one. */
static void test_vfork_exec(void)
{
	struct fake f;
	struct proc *c;
	int forgets;

	fake_init(&f, true, false);
	f.image[30] = &prog_glibc;
	CHECK(!proc_spawned(&f.ps, 30, "/usr/bin/prog"));
	CHECK(!proc_on_exec(&f.sv, &f.ps, 30));
	CHECK(!proc_on_stop(&f.sv, &f.ps, 30));
	CHECK(!proc_on_fork(&f.sv, &f.ps, 30, 31, true));
	c = procs_find(&f.ps, 31);
	EXPECT(c->vfork_child && !c->probed && f.added == 1, "a vfork child is only listed");
	f.image[31] = &tool_static;
	CHECK(!proc_on_exec(&f.sv, &f.ps, 31));
	EXPECT(c->probed && !c->vfork_child && !c->awaiting_linker, "a static program probed at its exec");
	EXPECT(!strcmp(c->alloc.family, "custom"));
	/* the parent execs a program with another allocator */
	f.image[30] = &jemalloc_prog;
	forgets = f.forgets;
	CHECK(!proc_on_exec(&f.sv, &f.ps, 30));
	EXPECT(!procs_find(&f.ps, 30)->probed && f.forgets == forgets + 1, "the old image's probes are gone");
	CHECK(!proc_on_stop(&f.sv, &f.ps, 30));
	EXPECT(!strcmp(procs_find(&f.ps, 30)->alloc.family, "jemalloc"));
	fake_end(&f);
}

/* An untraceable image (a static shell without symbols) is said, followed,
 * and its children are retried at their exec; its exec into the library's
 * program is at the sites, and the sites vanish at the next exec. */
static void test_untraced_and_sites_vanish(void)
{
	struct fake f;
	struct proc *sh, *c;

	fake_init(&f, true, false);
	f.image[40] = &shell_static;
	CHECK(!proc_spawned(&f.ps, 40, "/bin/busybox"));
	CHECK(!proc_on_exec(&f.sv, &f.ps, 40));
	sh = procs_find(&f.ps, 40);
	EXPECT(sh->untraced && !sh->probed && f.slots_out == 0, "untraced, its slot given back");
	EXPECT(f.said[SESSION_WARNING] == 1 && strstr(f.last_said, "what it starts is still followed"), "%s",
	       f.last_said);
	CHECK(!proc_on_fork(&f.sv, &f.ps, 40, 41, false));
	c = procs_find(&f.ps, 41);
	EXPECT(c->untraced && !c->probed, "its child inherits the reason");
	f.image[41] = &prog_lib;
	CHECK(!proc_on_exec(&f.sv, &f.ps, 41));
	EXPECT(!c->untraced, "an exec clears it");
	CHECK(!proc_on_stop(&f.sv, &f.ps, 41));
	EXPECT(c->probed && c->preload, "at the library's sites");
	f.image[41] = &prog_glibc; /* execs a program without the library */
	CHECK(!proc_on_exec(&f.sv, &f.ps, 41));
	EXPECT(!c->preload && !c->sites.path, "the sites are gone with the image");
	CHECK(!proc_on_stop(&f.sv, &f.ps, 41));
	EXPECT(c->probed && !c->preload && f.attach_allocator == 1, "uprobes now");
	EXPECT(procs_untraced(&f.ps) == 1);
	fake_end(&f);
}

/* --leak-check: exit() called -> the check at the stop, its verdicts
 * through the ledger; a process dying without exit() is checked as it
 * exits; a process already checked is not checked again; exit seals. */
static void test_leak_check_at_exit(void)
{
	struct fake f;
	struct proc *p, *q;

	fake_init(&f, true, true);
	f.image[50] = &prog_glibc;
	CHECK(!proc_spawned(&f.ps, 50, "/usr/bin/prog"));
	CHECK(!proc_on_exec(&f.sv, &f.ps, 50));
	CHECK(!proc_on_stop(&f.sv, &f.ps, 50));
	p = procs_find(&f.ps, 50);
	EXPECT(f.attach_exit == 1, "exit() probed");
	record(&f, 50, 0x1000, 40);
	record(&f, 50, 0x2000, 24);
	EXPECT(p->ledger.allocs.n == 2);
	proc_exit_called(&f.ps, 50, 50, 0x7ff0);
	CHECK(!proc_on_stop(&f.sv, &f.ps, 50));
	EXPECT(f.leak_scans == 1 && p->check.done, "checked at exit()");
	EXPECT(alloc_table_find(&p->ledger.allocs, 0x1000)->leak == 1 + LEAK_DEFINITELY_LOST, "verdict written");
	proc_on_exiting(&f.sv, &f.ps, 50, 50);
	EXPECT(f.leak_scans == 1, "not twice");
	proc_on_exit(&f.sv, &f.ps, 50, 0);
	EXPECT(p->ledger.sealed, "sealed into sums");
	/* without exit(): checked as it exits */
	f.image[51] = &prog_glibc;
	CHECK(!proc_on_fork(&f.sv, &f.ps, 50, 51, false));
	q = procs_find(&f.ps, 51);
	EXPECT(q->probed);
	proc_on_exiting(&f.sv, &f.ps, 51, 51);
	EXPECT(f.leak_scans == 2 && q->check.done);
	proc_on_exit(&f.sv, &f.ps, 51, 9);
	fake_end(&f);
}

/* -p on a pid that is gone, and on an image whose allocator cannot be
 * found: an error said as "cannot trace", nothing left held. */
static void test_attach_fails(void)
{
	struct fake f;

	fake_init(&f, false, false);
	f.image[60] = &shell_static;
	EXPECT(proc_attach_running(&f.sv, &f.ps, 60) == -ENOENT);
	EXPECT(f.said[SESSION_ERROR] == 1 && strstr(f.last_said, "cannot trace pid 60"), "%s", f.last_said);
	EXPECT(f.slots_out == 0, "its slot given back");
	f.gone[61] = true;
	f.image[61] = &prog_glibc;
	EXPECT(proc_attach_running(&f.sv, &f.ps, 61) < 0);
	fake_end(&f);
}

/* A long-running session forgets a process after its last report: not
 * while it lives; once it exited, freed (ASan), and its image's stacks
 * go only when no process of the image is left. */
static void test_forget(void)
{
	struct fake f;
	struct stack_trace w;
	struct proc *p;

	fake_init(&f, true, false);
	f.image[70] = &prog_glibc;
	CHECK(!proc_spawned(&f.ps, 70, "/usr/bin/prog"));
	CHECK(!proc_on_exec(&f.sv, &f.ps, 70));
	CHECK(!proc_on_stop(&f.sv, &f.ps, 70));
	f.image[71] = &prog_glibc;
	CHECK(!proc_on_fork(&f.sv, &f.ps, 70, 71, false));
	p = procs_find(&f.ps, 70);
	memset(&w, 0, sizeof(w));
	w.nframes = 1;
	w.image = p->image;
	CHECK(!stack_store_put(f.sv.stacks, 7, &w));
	record(&f, 70, 0x3000, 16); /* stack 7 */
	EXPECT(proc_forget(&f.sv, &f.ps, 70) == -EBUSY, "alive: not forgotten");
	EXPECT(proc_forget(&f.sv, &f.ps, 99) == -ENOENT);
	proc_on_exit(&f.sv, &f.ps, 70, 0);
	proc_on_exit(&f.sv, &f.ps, 71, 0);
	EXPECT(!stack_store_get(f.sv.stacks, 7, &w), "kept for the report: its block names it");
	EXPECT(!proc_forget(&f.sv, &f.ps, 70) && !procs_find(&f.ps, 70) && f.ps.n == 1);
	EXPECT(!stack_store_get(f.sv.stacks, 7, &w), "71 is of the same image: its stacks stay");
	EXPECT(!proc_forget(&f.sv, &f.ps, 71) && f.ps.n == 0);
	EXPECT(stack_store_get(f.sv.stacks, 7, &w) == -ENOENT, "the image's stacks are gone with it");
	fake_end(&f);
}

int main(void)
{
	test_forget();
	test_exec_unfollowed();
	test_injected();
	test_attach_running();
	test_attach_sites();
	test_sites_fallback();
	test_spawn_fork();
	test_vfork_exec();
	test_untraced_and_sites_vanish();
	test_leak_check_at_exit();
	test_attach_fails();
	if (!check_failures)
		printf("test_proc: all cases passed\n");
	return check_failures ? 1 : 0;
}
