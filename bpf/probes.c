/* The user side of dwleak's BPF programs: the skeleton's one includer.
 * Phases, each a function: choose how to probe (probe_mode_choose,
 * guard_choose), open and configure (settings_apply: rodata and map
 * sizes), load, attach (allocator functions, the --mmap tracepoints, the
 * dynamic linker's hook), then poll the two ring buffers into the
 * caller's callbacks, and move out the stacks and mappings, and read the
 * counters, the reports are built from. */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocator.h"
#include "attach.h"
#include "dwleak.skel.h"
#include "preload_sites.h"
#include "probes.h"
#include "unwinder.h"

/* Map sizes.  Rows and rules get room for libraries loaded after attach;
 * what still does not fit is counted (unwinder_stats.dropped_full).  The
 * stacks map holds walks only until user space moves them out (at every
 * image's end and when it is half full), so it needs room for what the
 * programs store between two moves, not for a whole trace's. */
#define ROWS_MIN (1u << 21)
#define RULES_MIN (1u << 16)
#define STACKS_MAX (1u << 14)
/* Entries read per batch when a map is moved or read out. */
#define MAP_BATCH 256
/* The alloc_events ring: 32 MiB holds ~800,000 records, a few tenths of a
 * second of the fastest allocation loop; the reader is woken after the
 * CPUs together wrote at most a quarter of it (ring_wake_records), and
 * drains it on its own timer anyway. */
#define ALLOC_RING_BYTES (32u << 20)

/*
 * The uprobe path's allocator-entry program (alloc_enter_any, or
 * alloc_session) is, with the preload library's site program, one of the
 * two the kernel takes longest to verify (~60 ms each here), and only a
 * process traced without the library needs it.  With the library on, it
 * loads late: in an object of its own sharing every map of the first
 * (bpf_map__reuse_fd), in a thread started once the first is loaded, so
 * that its verification runs while the command starts instead of before
 * it; the first process traced with uprobes waits for it (entry_ready).
 * (The site program is needed within tens of ms, when the command's
 * dynamic linker is done: loaded late too, it made the start slower.)
 * Without the library it loads with the first object.
 */
struct probes_entry {
	struct dwleak_bpf *skel; /* the late object, NULL when none */
	pthread_t thread;
	bool running; /* THREAD started and not joined */
	int err;      /* the late object's load: 0 or a negative errno */
};

/* An array map mapped into dwleak: element I at MEM + I * STRIDE. */
struct probes_array_mem {
	void *mem;
	size_t len;
	size_t stride;
};

struct probes {
	struct dwleak_bpf *skel;
	struct ring_buffer *rb;
	struct probes_settings set;
	struct probes_events ev;
	bool multi; /* uprobe_multi links work here (attach_multi_supported) */
	struct bpf_link *mmap_links[2];
	struct bpf_link *exec_link;	/* probes_attach_exec */
	struct probes_info info;
	bool session; /* allocator entry and return as one uprobe session program */
	uint32_t rows_cap, rules_cap;
	/* rows and rules mapped into dwleak (NULL: written by batch updates) */
	struct probes_array_mem rows_mem, rules_mem;
	struct probes_stacks_stats stacks; /* moves of the stacks map */
	struct probes_entry entry;
	/* alloc_events' consumer and producer positions (its first two
	 * pages), mapped read-only: libbpf 1.1 reads them but does not tell */
	const uint64_t *alloc_cons, *alloc_prod;
	size_t page;
	struct probes_drain_stats drains;
};

bool probes_privileged(void)
{
	unsigned long long eff = 0;
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	f = fopen("/proc/self/status", "re");
	if (!f)
		return geteuid() == 0;
	while (getline(&line, &cap, f) > 0)
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	free(line);
	fclose(f);
	/* CAP_SYS_ADMIN (21), or CAP_BPF (39) with CAP_PERFMON (38) */
	return (eff >> 21 & 1) || ((eff >> 39 & 1) && (eff >> 38 & 1));
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level != LIBBPF_WARN && !getenv("DWLEAK_DEBUG"))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/*
 * How allocator calls are probed.  A uprobe session (Linux 6.13+) lets a
 * call that needs nothing at its return (not sampled, or nested) cancel
 * its return probe, but costs every probe a kfunc call to tell entry from
 * return; without --sample-bytes nearly every call needs its return, so
 * separate entry and return programs are cheaper.  settings.session forces
 * the choice (DWLEAK_UPROBE_SESSION, for tests and bench/).  uprobe_multi
 * links made with a pid run programs only in that process since Linux
 * 6.12 (earlier, in any process sharing its mm), so from there the
 * programs skip the check.
 */
static void probe_mode_choose(struct probes *p)
{
	bool multi = p->multi, want = p->set.session >= 0 ? p->set.session == 1 : p->set.sample_bytes > 0;
	const char *why;

	/* the session probe attaches and detaches a link (tens of ms): only
	 * when sessions would be used */
	p->session = multi && want && attach_session_supported();
	if (!multi)
		why = "no uprobe_multi in this kernel";
	else if (want && !p->session)
		why = "no uprobe sessions in this kernel";
	else if (p->set.session == 0)
		why = "DWLEAK_UPROBE_SESSION=0 (any value but 1)";
	else if (p->set.session == 1)
		why = "DWLEAK_UPROBE_SESSION=1: a call needing nothing at its return skips the return probe";
	else if (want)
		why = "--sample-bytes: an unsampled call skips the return probe";
	else
		why = "every call needs its return without --sample-bytes, and sessions cost each probe a kfunc call";
	p->info.why = why;
	p->info.mode = p->session ? "uprobe sessions"
		       : multi	  ? "uprobe_multi entry and return probes"
				  : "perf-event entry and return probes";
	p->info.tgid_by_link = multi && kernel_at_least(6, 12);
}

/* Whether the programs must guard the walker's per-CPU buffers (see
 * walker_enter in the kernel program): where the kernel may preempt them,
 * unless settings.guard forces it (DWLEAK_PREEMPT_GUARD). */
static void guard_choose(struct probes *p)
{
	preempt_info_read(&p->info.preempt);
	p->info.guard = preempt_model_preempts_bpf(p->info.preempt.model) ? PREEMPT_GUARD_ON : PREEMPT_GUARD_OFF;
	if (p->set.guard >= 0) {
		p->info.guard = (enum preempt_guard)p->set.guard;
		p->info.guard_forced = true;
	}
}

/* Records per CPU between wakeups of the alloc_events reader: a power of
 * two, so that all CPUs together fill at most a quarter of the ring with
 * the largest records before the reader is woken. */
static uint64_t ring_wake_records(void)
{
	int ncpu = libbpf_num_possible_cpus(); /* each counts its own records */
	uint64_t n = ALLOC_RING_BYTES / 4 / (sizeof(struct alloc_event) + 8) / (uint64_t)(ncpu > 0 ? ncpu : 1);
	uint64_t k = 1;

	while (k * 2 <= n)
		k *= 2;
	return k;
}

/* The exponential distribution of mean N, as DWLEAK_SAMPLE_GAPS equally
 * likely quantiles: the walker picks one at random for each gap between
 * sample points. */
static int sample_gaps_fill(int fd, double n)
{
	uint32_t i;
	uint64_t gap;

	for (i = 0; i < DWLEAK_SAMPLE_GAPS; i++) {
		gap = (uint64_t)llround(-log((i + 0.5) / DWLEAK_SAMPLE_GAPS) * n);
		if (bpf_map_update_elem(fd, &i, &gap, BPF_ANY))
			return -errno;
	}
	return 0;
}

/* MAP (one CPU's slice long in the object: maps.bpf.h's cpu_slot) made
 * one slice per possible CPU long. */
static int percpu_slices(struct bpf_map *map)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t n = bpf_map__max_entries(map);

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	if (n * (uint64_t)ncpu > UINT32_MAX)
		return -E2BIG;
	return bpf_map__set_max_entries(map, (uint32_t)(n * (uint64_t)ncpu));
}

/* Rodata, which programs load, and map sizes: everything fixed at load. */
static int settings_apply(struct probes *p)
{
	struct dwleak_bpf *s = p->skel;
	uint64_t rows, rules;
	int err;

	/* one of the two ways to probe allocator calls is loaded; with the
	 * library on, its entry program late (struct probes_entry) */
	bpf_program__set_autoload(s->progs.alloc_session, p->session && !p->set.preload);
	bpf_program__set_autoload(s->progs.alloc_enter_any, !p->session && !p->set.preload);
	bpf_program__set_autoload(s->progs.alloc_exit, !p->session);
	if (p->session)
		attach_prepare_session(s->progs.alloc_session);
	if (p->multi) {
		struct attach_set multi = { .multi = true };

		attach_prepare(&multi, s->progs.alloc_enter_any);
		attach_prepare(&multi, s->progs.alloc_exit);
		attach_prepare(&multi, s->progs.free_enter);
		attach_prepare(&multi, s->progs.dl_state);
		attach_prepare(&multi, s->progs.exit_enter);
		attach_prepare(&multi, s->progs.preload_alloc);
		attach_prepare(&multi, s->progs.preload_free);
	}
	/* the preload library's sites, unless --no-preload */
	bpf_program__set_autoload(s->progs.preload_alloc, p->set.preload);
	bpf_program__set_autoload(s->progs.preload_free, p->set.preload);
	/* the syscall tracepoints are loaded (and verified) only for --mmap
	 * and the allocator's memory: they run on every syscall of the system */
	bpf_program__set_autoload(s->progs.mmap_enter, p->set.mmap || p->set.alloc_memory);
	bpf_program__set_autoload(s->progs.mmap_exit, p->set.mmap || p->set.alloc_memory);
	s->rodata->sample_bytes = p->set.sample_bytes;
	s->rodata->track_mmap = p->set.mmap;
	s->rodata->track_alloc_memory = p->set.alloc_memory;
	s->rodata->alloc_ring_wake = ring_wake_records();
	s->rodata->tgid_by_link = p->info.tgid_by_link;
	s->rodata->guard_preempt = p->info.guard;
	s->rodata->bench_no_walk = p->set.no_walk;
	s->rodata->unwind_mode = p->set.unwind_mode;
	rows = p->set.rows * 2 > ROWS_MIN ? p->set.rows * 2 : ROWS_MIN;
	rules = p->set.rules * 2 > RULES_MIN ? p->set.rules * 2 : RULES_MIN;
	p->rows_cap = (uint32_t)rows;
	p->rules_cap = (uint32_t)rules;
	err = bpf_map__set_max_entries(s->maps.rows, p->rows_cap);
	err = err ?: bpf_map__set_max_entries(s->maps.rules, p->rules_cap);
	err = err ?: bpf_map__set_max_entries(s->maps.alloc_events, ALLOC_RING_BYTES);
	p->stacks.cap = p->set.stacks_max ? p->set.stacks_max : STACKS_MAX;
	err = err ?: bpf_map__set_max_entries(s->maps.stacks, (uint32_t)p->stacks.cap);
	/* the walker's per-CPU caches: one slice of each array per CPU */
	err = err ?: percpu_slices(s->maps.rule_cache);
	err = err ?: percpu_slices(s->maps.walk_memo);
	err = err ?: percpu_slices(s->maps.stack_seen);
	return err;
}

static int on_alloc_record(void *ctx, void *data, size_t size)
{
	struct probes *p = ctx;

	if (p->ev.record)
		p->ev.record(p->ev.ctx, data, size);
	return 0;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct probes *p = ctx;
	const struct event *e = data;

	if (size < sizeof(*e))
		return 0;
	if (e->type == EVENT_MMAP && size >= sizeof(struct mmap_event)) {
		if (p->ev.mmap)
			p->ev.mmap(p->ev.ctx, data);
	} else if (e->type == EVENT_EXEC) {
		if (p->ev.exec)
			p->ev.exec(p->ev.ctx, e->tgid);
	} else if (e->type == EVENT_EXITING && p->ev.exiting) {
		p->ev.exiting(p->ev.ctx, e->tgid, (pid_t)e->tid, e->pc);
	} else if ((e->type == EVENT_NEED_TABLE || e->type == EVENT_MAPS_CHANGED) && p->ev.objects_changed) {
		p->ev.objects_changed(p->ev.ctx, e->tgid, e->type == EVENT_MAPS_CHANGED && e->stopped);
	}
	return 0;
}

/* Maps alloc_events' position pages read-only into P (left NULL when
 * the kernel refuses: probes_drain then cannot tell a short read). */
static void alloc_pos_map(struct probes *p)
{
	int fd = bpf_map__fd(p->skel->maps.alloc_events);
	void *cons, *prod;

	p->page = (size_t)sysconf(_SC_PAGESIZE);
	cons = mmap(NULL, p->page, PROT_READ, MAP_SHARED, fd, 0);
	prod = mmap(NULL, p->page, PROT_READ, MAP_SHARED, fd, (off_t)p->page);
	if (cons == MAP_FAILED || prod == MAP_FAILED) {
		if (cons != MAP_FAILED)
			munmap(cons, p->page);
		if (prod != MAP_FAILED)
			munmap(prod, p->page);
		return;
	}
	p->alloc_cons = cons;
	p->alloc_prod = prod;
}

/* MAP (an array made BPF_F_MMAPABLE) mapped into dwleak, into *M; left
 * unmapped (batch updates then) when the kernel refuses. */
static void array_mem_map(const struct bpf_map *map, struct probes_array_mem *m)
{
	/* an array's elements are 8-byte aligned (the kernel's elem_size) */
	size_t stride = (bpf_map__value_size(map) + 7) & ~7u, len = stride * bpf_map__max_entries(map);
	long page = sysconf(_SC_PAGESIZE);
	void *mem;

	len = (len + page - 1) & ~(size_t)(page - 1);
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(map), 0);
	if (mem == MAP_FAILED)
		return;
	*m = (struct probes_array_mem){ mem, len, stride };
}

static struct bpf_program *entry_program(const struct probes *p, const struct dwleak_bpf *s)
{
	return p->session ? s->progs.alloc_session : s->progs.alloc_enter_any;
}

static void *entry_load(void *arg)
{
	struct probes *p = arg;

	/* only a CPU nothing else wants, until a process needs the program
	 * (entry_ready) */
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &(struct sched_param){ 0 });
	p->entry.err = dwleak_bpf__load(p->entry.skel);
	return NULL;
}

static void entry_join(struct probes *p)
{
	if (!p->entry.running)
		return;
	pthread_setschedparam(p->entry.thread, SCHED_OTHER, &(struct sched_param){ 0 });
	pthread_join(p->entry.thread, NULL);
	p->entry.running = false;
}

/* Opens the late object (P's loaded maps, only the entry program to
 * load) and starts loading it in a thread (in this one when no thread
 * can be made).  Returns 0 or a negative errno (nothing left running). */
static int entry_start(struct probes *p)
{
	struct dwleak_bpf *s = dwleak_bpf__open();
	struct bpf_map *mine, *theirs = NULL;
	struct bpf_program *prog;
	int err = 0;

	if (!s)
		return -errno ?: -ENOMEM;
	bpf_object__for_each_program(prog, s->obj)
		bpf_program__set_autoload(prog, prog == entry_program(p, s));
	if (p->session)
		attach_prepare_session(entry_program(p, s));
	else if (p->multi)
		attach_prepare(&(struct attach_set){ .multi = true }, entry_program(p, s));
	/* the same object, so the same maps in the same order */
	bpf_object__for_each_map(mine, s->obj) {
		theirs = bpf_object__next_map(p->skel->obj, theirs);
		if (!theirs || strcmp(bpf_map__name(mine), bpf_map__name(theirs))) {
			err = -EINVAL;
			break;
		}
		if (bpf_map__reuse_fd(mine, bpf_map__fd(theirs))) {
			err = -errno ?: -EINVAL;
			break;
		}
	}
	if (err) {
		dwleak_bpf__destroy(s);
		return err;
	}
	p->entry.skel = s;
	p->entry.running = !pthread_create(&p->entry.thread, NULL, entry_load, p);
	if (!p->entry.running)
		p->entry.err = dwleak_bpf__load(p->entry.skel);
	return 0;
}

/* The entry program, loaded (waiting for the late object while it
 * loads), at *PROG.  Returns 0 or why it could not be loaded. */
static int entry_ready(struct probes *p, struct bpf_program **prog)
{
	entry_join(p);
	if (!p->entry.skel) {
		*prog = entry_program(p, p->skel);
		return 0;
	}
	*prog = p->entry.err ? NULL : entry_program(p, p->entry.skel);
	return p->entry.err;
}

int probes_open(const struct probes_settings *s, const struct probes_events *ev, struct probes **out)
{
	struct probes *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return -ENOMEM;
	p->set = *s;
	p->ev = *ev;
	libbpf_set_print(libbpf_print);
	p->multi = attach_multi_supported();
	probe_mode_choose(p);
	guard_choose(p);
	p->skel = dwleak_bpf__open();
	err = p->skel ? settings_apply(p) : -errno;
	err = err ?: dwleak_bpf__load(p->skel);
	if (!err && s->preload)
		err = entry_start(p);
	if (!err && s->sample_bytes)
		err = sample_gaps_fill(bpf_map__fd(p->skel->maps.sample_gaps), (double)s->sample_bytes);
	if (!err) {
		array_mem_map(p->skel->maps.rows, &p->rows_mem);
		array_mem_map(p->skel->maps.rules, &p->rules_mem);
	}
	if (!err) {
		p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.events), on_event, p, NULL);
		if (!p->rb ||
		    ring_buffer__add(p->rb, bpf_map__fd(p->skel->maps.alloc_events), on_alloc_record, p))
			err = -errno ?: -ENOMEM;
	}
	if (!err)
		alloc_pos_map(p);
	if (err) {
		probes_close(p);
		return err;
	}
	*out = p;
	return 0;
}

void probes_unwinder_maps(const struct probes *p, struct unwinder_maps *out)
{
	const struct dwleak_bpf *s = p->skel;

	*out = (struct unwinder_maps){
		.tables = bpf_map__fd(s->maps.tables),
		.pages = bpf_map__fd(s->maps.pages),
		.rows = bpf_map__fd(s->maps.rows),
		.rules = bpf_map__fd(s->maps.rules),
		.rows_cap = p->rows_cap,
		.rules_cap = p->rules_cap,
		.rows_mem = p->rows_mem.mem,
		.rows_stride = p->rows_mem.stride,
		.rules_mem = p->rules_mem.mem,
		.rules_stride = p->rules_mem.stride,
		.pages_cap = bpf_map__max_entries(s->maps.pages),
		.proc_maps = bpf_map__fd(s->maps.proc_maps),
		.proc_maps_cur = bpf_map__fd(s->maps.proc_maps_cur),
		.mappings = bpf_map__fd(s->maps.mappings),
	};
}

/* One allocator object's probes for PP's process: its returns (RETURNS),
 * or its entries and frees.  The cookie tells the shared programs which
 * function fired, and in which process. */
static int object_attach(struct probes *p, struct probes_proc *pp, const struct alloc_object *o, bool returns)
{
	uint64_t *offs = calloc(4 * (o->nfuncs + 1), sizeof(*offs));
	uint64_t *cookies = offs + o->nfuncs + 1, *free_offs = cookies + o->nfuncs + 1;
	uint64_t *free_cookies = free_offs + o->nfuncs + 1;
	struct dwleak_bpf *s = p->skel;
	struct bpf_program *entry = NULL;
	struct attach_set *links = &pp->links;
	pid_t pid = pp->pid;
	size_t i, n = 0, nf = 0;
	int err = 0;

	if (!offs)
		return -ENOMEM;
	for (i = 0; i < o->nfuncs; i++) {
		const struct alloc_func *f = &o->funcs[i];

		if (alloc_kind_frees(f->kind)) {
			free_offs[nf] = f->file_off + f->site_off;
			free_cookies[nf++] = DWLEAK_COOKIE(f->kind, f->size, (uint32_t)pid);
		} else {
			offs[n] = f->file_off;
			cookies[n++] = DWLEAK_COOKIE(f->kind, f->size, (uint32_t)pid);
		}
	}
	if (n && returns == p->session)
		err = entry_ready(p, &entry);
	if (!err && returns && p->session && n)
		err = attach_session(links, entry, o->path, pid, offs, cookies, n);
	else if (returns && !p->session && n)
		err = attach_uprobes(links, s->progs.alloc_exit, o->path, pid, offs, cookies, n, true);
	if (!err && !returns && n && !p->session)
		err = attach_uprobes(links, entry, o->path, pid, offs, cookies, n, false);
	if (!returns && !err && nf)
		err = attach_uprobes(links, s->progs.free_enter, o->path, pid, free_offs, free_cookies, nf, false);
	free(offs);
	return err;
}

int probes_attach_syscalls(struct probes *p)
{
	if (!p->set.mmap && !p->set.alloc_memory)
		return 0;
	p->mmap_links[0] = bpf_program__attach(p->skel->progs.mmap_enter);
	p->mmap_links[1] = p->mmap_links[0] ? bpf_program__attach(p->skel->progs.mmap_exit) : NULL;
	return p->mmap_links[1] ? 0 : -errno;
}

int probes_attach_exec(struct probes *p)
{
	if (p->exec_link)
		return 0;
	p->exec_link = bpf_program__attach(p->skel->progs.proc_exec);
	return p->exec_link ? 0 : -errno;
}

int probes_proc_add(struct probes *p, struct probes_proc *pp, pid_t pid, uint32_t slot, uint32_t image,
		    const struct dl_hook *dl, unsigned int flags)
{
	struct proc_info pi = { .slot = slot, .flags = flags & PROC_STOP_AT_EXIT, .image = image };
	uint32_t key = (uint32_t)pid;

	if (dl && dl->found) {
		pi.dl_state_vaddr = dl->state_vaddr;
		pi.r_debug_vaddr = dl->r_debug_vaddr;
		pi.flags = flags;
	}
	if (bpf_map_update_elem(bpf_map__fd(p->skel->maps.procs), &key, &pi, BPF_ANY))
		return errno == E2BIG || errno == ENOSPC ? -E2BIG : -errno;
	pp->pid = pid;
	pp->added = true;
	pp->links.multi = p->multi;
	return 0;
}

int probes_proc_attach_exit(struct probes *p, struct probes_proc *pp, const char *path, uint64_t off)
{
	return attach_uprobes(&pp->links, p->skel->progs.exit_enter, path, pp->pid, &off, NULL, 1, false);
}

int probes_proc_attach_linker(struct probes *p, struct probes_proc *pp, const struct dl_hook *dl)
{
	if (!dl || !dl->found || !dl->state_off || !dl->path)
		return -ENOENT;
	return attach_uprobes(&pp->links, p->skel->progs.dl_state, dl->path, pp->pid, &dl->state_off, NULL, 1,
			      false);
}

int probes_proc_attach(struct probes *p, struct probes_proc *pp, const struct allocator *a, char *what,
		       size_t len)
{
	size_t i;
	int pass, err;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < a->nobjs; i++) {
			err = object_attach(p, pp, &a->objs[i], pass == 0);
			if (err) {
				snprintf(what, len, "uprobes to %s%s", a->objs[i].name,
					 p->entry.err ? " (the kernel did not load dwleak's uprobe program; run with "
							"DWLEAK_DEBUG=1 to see the verifier)"
						      : "");
				return err;
			}
		}
	}
	return 0;
}

int probes_proc_attach_preload(struct probes *p, struct probes_proc *pp, const struct preload_sites *s,
			       uint64_t control)
{
	uint64_t cookie = DWLEAK_COOKIE(ALLOC_MALLOC, 0, (uint32_t)pp->pid);
	size_t nfds = pp->links.nfds, nlinks = pp->links.nlinks;
	int fd = bpf_map__fd(p->skel->maps.procs), err;
	uint32_t key = (uint32_t)pp->pid;
	struct proc_info pi;

	if (!p->set.preload)
		return -EOPNOTSUPP;
	/* before the sites fire: the allocator's first memory syscalls are
	 * told apart from the start */
	if (pp->added && !bpf_map_lookup_elem(fd, &key, &pi)) {
		pi.preload_control = control;
		bpf_map_update_elem(fd, &key, &pi, BPF_EXIST);
	}
	err = attach_usdt(&pp->links, p->skel->progs.preload_free, s->path, pp->pid, s->free_off, s->free_sem_off,
			  cookie);
	err = err ?: attach_usdt(&pp->links, p->skel->progs.preload_alloc, s->path, pp->pid, s->alloc_off,
				 s->alloc_sem_off, cookie);
	if (err)
		attach_truncate(&pp->links, nfds, nlinks);
	return err;
}

void probes_proc_detach(struct probes *p, struct probes_proc *pp)
{
	(void)p;
	attach_close_async(&pp->links);
}

void probes_proc_remove(struct probes *p, struct probes_proc *pp)
{
	uint32_t key = (uint32_t)pp->pid;

	probes_proc_detach(p, pp);
	if (pp->added)
		bpf_map_delete_elem(bpf_map__fd(p->skel->maps.procs), &key);
	pp->added = false;
}

int probes_thread_forget(struct probes *p, pid_t tid)
{
	int pidfd = (int)syscall(SYS_pidfd_open, tid, 0), err = 0;

	if (pidfd < 0)
		return -errno;
	if (bpf_map_delete_elem(bpf_map__fd(p->skel->maps.threads), &pidfd) && errno != ENOENT)
		err = -errno;
	close(pidfd);
	return err;
}

int probes_epoll_fd(const struct probes *p)
{
	return ring_buffer__epoll_fd(p->rb);
}

int probes_poll(struct probes *p, int timeout_ms)
{
	return ring_buffer__poll(p->rb, timeout_ms);
}

/* How long probes_drain waits for a record another CPU is still writing:
 * a program runs for microseconds, but its CPU may be taken from it (a
 * VM's vCPU descheduled by the host, or the task preempted) */
#define DRAIN_WAIT_TRIES 2000

int probes_drain(struct probes *p)
{
	uint64_t end = p->alloc_prod ? __atomic_load_n(p->alloc_prod, __ATOMIC_ACQUIRE) : 0;
	int tries;

	ring_buffer__consume(p->rb);
	p->drains.drains++;
	if (!p->alloc_prod)
		return 0;
	/* libbpf's consumer stops at the first record still reserved (its
	 * busy bit set), though records after it may be complete: every
	 * record reserved before END must be read for the caller's cut to
	 * hold, so wait for the one being written */
	for (tries = 0; __atomic_load_n(p->alloc_cons, __ATOMIC_ACQUIRE) < end; tries++) {
		if (tries == DRAIN_WAIT_TRIES) {
			p->drains.short_drains++;
			return -EAGAIN;
		}
		if (!tries)
			p->drains.waited++;
		sched_yield();
		ring_buffer__consume(p->rb);
	}
	return 0;
}

void probes_drain_stats(const struct probes *p, struct probes_drain_stats *out)
{
	*out = p->drains;
}

/*
 * Every entry of hash map FD (keys of KSZ bytes, values of VSZ), read in
 * batches (taken out as they are read, with TAKE) and given to EACH with
 * CTX.  An entry added meanwhile may be missed; none is given twice.
 * Returns how many were given, or a negative errno.
 */
static long map_batches(int fd, size_t ksz, size_t vsz, bool take,
			int (*each)(void *ctx, const void *key, const void *val), void *ctx)
{
	uint32_t chunk = MAP_BATCH, count, i;
	uint64_t in = 0, out = 0; /* the kernel's place in the map (a bucket) */
	char *keys = NULL, *vals = NULL;
	bool first = true;
	long n = 0;
	int err = 0;

	for (;;) {
		if (!keys) {
			keys = malloc(chunk * ksz);
			vals = malloc(chunk * vsz);
			if (!keys || !vals) {
				err = -ENOMEM;
				break;
			}
		}
		count = chunk;
		err = take ? bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in, &out, keys, vals, &count, NULL)
			   : bpf_map_lookup_batch(fd, first ? NULL : &in, &out, keys, vals, &count, NULL);
		err = err < 0 ? -errno : 0;
		if (err == -ENOSPC && !count) { /* one bucket holds more than CHUNK */
			free(keys);
			free(vals);
			keys = vals = NULL;
			chunk *= 2;
			continue;
		}
		for (i = 0; i < count && (!err || err == -ENOENT); i++) {
			int e = each(ctx, keys + i * ksz, vals + i * vsz);

			err = e ?: err;
			n++;
		}
		if (err)
			break;
		in = out;
		first = false;
	}
	free(keys);
	free(vals);
	return err == -ENOENT ? n : err;
}

/* The programs' counter WHICH, summed over CPUs (0 when unreadable). */
static uint64_t counter_sum(const struct probes *p, uint32_t which)
{
	int ncpu = libbpf_num_possible_cpus(), c;
	uint64_t *vals, sum = 0;

	vals = calloc(ncpu > 0 ? ncpu : 1, sizeof(*vals));
	if (vals && !bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.counters), &which, vals))
		for (c = 0; c < ncpu; c++)
			sum += vals[c];
	free(vals);
	return sum;
}

struct stacks_move {
	int (*put)(void *ctx, uint64_t id, const struct stack_trace *st);
	void *ctx;
};

static int stack_moved(void *ctx, const void *key, const void *val)
{
	struct stacks_move *m = ctx;
	uint64_t id;

	memcpy(&id, key, sizeof(id));
	return m->put(m->ctx, id, val);
}

uint64_t probes_stacks_held(struct probes *p, uint64_t *cap, uint64_t *peak)
{
	uint64_t stored = counter_sum(p, CNT_STACKS_STORED);
	uint64_t held = stored > p->stacks.moved ? stored - p->stacks.moved : 0;

	if (held > p->stacks.peak)
		p->stacks.peak = held;
	if (cap)
		*cap = p->stacks.cap;
	if (peak)
		*peak = p->stacks.peak;
	return held;
}

long probes_stacks_move(struct probes *p, int (*put)(void *ctx, uint64_t id, const struct stack_trace *st),
			void *ctx)
{
	struct stacks_move m = { put, ctx };
	long n;

	probes_stacks_held(p, NULL, NULL); /* the peak, before it empties */
	n = map_batches(bpf_map__fd(p->skel->maps.stacks), sizeof(uint64_t), sizeof(struct stack_trace), true,
			stack_moved, &m);
	if (n > 0)
		p->stacks.moved += (uint64_t)n;
	p->stacks.moves++;
	return n;
}

void probes_stacks_stats(const struct probes *p, struct probes_stacks_stats *out)
{
	*out = p->stacks;
}

void probes_counters(const struct probes *p, uint64_t *out)
{
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(p->skel->maps.counters);
	uint64_t *vals;
	uint32_t k;
	int c;

	memset(out, 0, CNT_COUNT * sizeof(*out));
	vals = calloc(ncpu > 0 ? ncpu : 1, sizeof(*vals));
	if (!vals)
		return;
	for (k = 0; k < CNT_COUNT; k++) {
		if (bpf_map_lookup_elem(fd, &k, vals))
			continue;
		for (c = 0; c < ncpu; c++)
			out[k] += vals[c];
	}
	free(vals);
}

/* One process's entries of the mappings map, as they are read. */
struct mappings_of {
	uint32_t tgid;
	struct probes_mapping *arr;
	struct mapping_key *keys;
	size_t n, cap;
};

static int mapping_read(void *ctx, const void *key, const void *val)
{
	struct mappings_of *m = ctx;
	const struct mapping_seen *v = val;
	struct mapping_key k;

	memcpy(&k, key, sizeof(k));
	if (k.tgid != m->tgid)
		return 0;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct probes_mapping *a = realloc(m->arr, cap * sizeof(*a));
		struct mapping_key *ks = a ? realloc(m->keys, cap * sizeof(*ks)) : NULL;

		if (a)
			m->arr = a;
		if (!ks)
			return -ENOMEM;
		m->keys = ks;
		m->cap = cap;
	}
	m->keys[m->n] = k;
	m->arr[m->n++] = (struct probes_mapping){ k.start, v->end, v->pgoff, v->file };
	return 0;
}

/* TGID's mappings into *M, one pass of batch reads over the map. */
static int mappings_read(const struct probes *p, uint32_t tgid, struct mappings_of *m)
{
	long n;

	memset(m, 0, sizeof(*m));
	m->tgid = tgid;
	n = map_batches(bpf_map__fd(p->skel->maps.mappings), sizeof(struct mapping_key),
			sizeof(struct mapping_seen), false, mapping_read, m);
	if (n < 0) {
		free(m->arr);
		free(m->keys);
		return (int)n;
	}
	return 0;
}

int probes_mappings(const struct probes *p, uint32_t tgid, struct probes_mapping **out, size_t *n)
{
	struct mappings_of m;
	int err = mappings_read(p, tgid, &m);

	if (err)
		return err;
	free(m.keys);
	*out = m.arr;
	*n = m.n;
	return 0;
}

int probes_mappings_take(struct probes *p, uint32_t tgid, struct probes_mapping **out, size_t *n)
{
	struct mappings_of m;
	uint32_t count;
	int err = mappings_read(p, tgid, &m);

	if (err)
		return err;
	count = (uint32_t)m.n;
	if (count && bpf_map_delete_batch(bpf_map__fd(p->skel->maps.mappings), m.keys, &count, NULL))
		err = -errno;
	free(m.keys);
	if (out && !err) {
		*out = m.arr;
		*n = m.n;
	} else {
		free(m.arr);
	}
	return err;
}

void probes_tables_changed(struct probes *p)
{
	__atomic_add_fetch(&p->skel->bss->rule_gen, 1, __ATOMIC_SEQ_CST);
}

void probes_info(const struct probes *p, struct probes_info *out)
{
	*out = p->info;
}

void probes_close(struct probes *p)
{
	if (!p)
		return;
	attach_close_wait();
	entry_join(p);
	dwleak_bpf__destroy(p->entry.skel);
	bpf_link__destroy(p->mmap_links[0]);
	bpf_link__destroy(p->mmap_links[1]);
	bpf_link__destroy(p->exec_link);
	ring_buffer__free(p->rb);
	if (p->alloc_cons) {
		munmap((void *)p->alloc_cons, p->page);
		munmap((void *)p->alloc_prod, p->page);
	}
	if (p->rows_mem.mem)
		munmap(p->rows_mem.mem, p->rows_mem.len);
	if (p->rules_mem.mem)
		munmap(p->rules_mem.mem, p->rules_mem.len);
	dwleak_bpf__destroy(p->skel);
	free(p);
}

#define COUNTER_NAME(e, name) [e] = name,
#define WALK_END_COUNTER_NAME(e, name, reason) [CNT_WALK_END_BASE + e] = name,
static const char *const counter_names[CNT_COUNT] = {
	DWLEAK_COUNTER_LIST(COUNTER_NAME, WALK_END_LIST(WALK_END_COUNTER_NAME))
};
#undef COUNTER_NAME
#undef WALK_END_COUNTER_NAME

#define WALK_END_REASON(e, name, reason) [e] = reason,
static const char *const walk_end_reasons[WALK_END_COUNT] = { WALK_END_LIST(WALK_END_REASON) };
#undef WALK_END_REASON

const char *probes_counter_name(unsigned int i)
{
	return i < CNT_COUNT ? counter_names[i] : NULL;
}

const char *probes_walk_end_reason(uint32_t end)
{
	return end < WALK_END_COUNT ? walk_end_reasons[end] : NULL;
}
