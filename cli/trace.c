/* The tracer: attaches dwleak's BPF program to a process's allocator,
 * keeps the walker's unwind tables current as libraries come and go,
 * and turns the kernel's bookkeeping into symbolized reports.
 *
 * Lifecycle: check the target, compile tables, open/configure/load the
 * skeleton, fill the table maps, attach the probes, release a spawned
 * command, poll (table requests, rescans, interval reports, target exit,
 * signals), final report, cleanup. */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "allocator.h"
#include "attach.h"
#include "elf_symbols.h"
#include "link_map.h"
#include "mmap_regions.h"
#include "preempt.h"
#include "suppress.h"
#include "compare.h"
#include "flamegraph.h"
#include "pprof.h"
#include "dwleak.h"
#include "dwleak.skel.h"
#include "proc_maps.h"
#include "report.h"
#include "symbolize.h"
#include "alloc_table.h"
#include "table_cache.h"
#include "target.h"
#include "trace.h"
#include "unwinder.h"

/* Map sizes.  Rows and rules get room for libraries loaded after attach;
 * what still does not fit is counted (unwinder_stats.dropped_full). */
#define ROWS_MIN (1u << 21)
#define RULES_MIN (1u << 16)
#define STACKS_MAX (1u << 14)
/* The alloc_events ring: 32 MiB holds ~800,000 records, a few tenths of a
 * second of the fastest allocation loop; the reader is woken after the
 * CPUs together wrote at most a quarter of it (ring_wake_records), and
 * drains it every POLL_MS anyway. */
#define ALLOC_RING_BYTES (32u << 20)
#define RESCAN_INTERVAL_S 1.0
#define POLL_MS 100

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

struct tracer {
	const struct env *env;
	struct target tgt;
	struct dwleak_bpf *skel;
	struct ring_buffer *rb;
	struct unwinder *uw;
	struct table_cache *cache;
	struct symbolizer *sym;
	struct attach_set probes;
	bool session;	  /* allocator entry and return as one uprobe session program */
	const char *probe_why;	     /* why this way of probing (--stats) */
	bool tgid_by_link;	     /* the links filter by process (see dwleak.bpf.c) */
	struct preempt_info preempt; /* can the kernel preempt our programs? */
	enum preempt_guard guard;    /* so the walker's buffers are guarded */
	bool guard_forced;	     /* by DWLEAK_PREEMPT_GUARD */
	struct allocator alloc; /* who provides malloc and operator new, and where */
	char **lookup;	  /* the objects in symbol lookup order (a command's, from ldd) */
	char *ld_path;	  /* the dynamic linker, for the _dl_debug_state probe */
	struct elf_sym_want dl_syms[2]; /* _dl_debug_state, _r_debug */
	bool resume;	  /* the target stopped itself for us: SIGCONT after loading */
	struct mmap_regions regions; /* --mmap */
	struct alloc_table allocs;   /* outstanding allocations, from alloc_events */
	uint64_t allocs_oom;	     /* records not applied: out of memory */
	uint64_t now_ns;	     /* when the records being read were drained */
	struct suppressions supp;
	struct bpf_link *mmap_links[2];
	int mmap_err;	  /* first failure applying an mmap event */
	double t_start;
	double t_traced;
	uint32_t mappings_dropped; /* beyond DWLEAK_MAX_PROC_MAPPINGS (walker falls back) */
	bool rescan;
	/* bytes per stack at the previous interval report, for growth */
	uint64_t *prev_ids;
	int64_t *prev_bytes;
	size_t nprev;
	double t_prev;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !getenv("DWLEAK_DEBUG"))
		return 0;
	if (level == LIBBPF_INFO && !getenv("DWLEAK_DEBUG"))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* --- Checks before anything is touched --- */

static bool have_caps(void)
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

static int env_check(void)
{
	if (!have_caps()) {
		fprintf(stderr, "dwleak: needs CAP_BPF and CAP_PERFMON (run as root)\n");
		return -EPERM;
	}
	return 0;
}

/* --- The allocator --- */

static bool is_ld_so(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld-", 3);
}

/* Finds the dynamic linker's debugger hook; without it (a static program,
 * an unusual loader) new libraries are found by the periodic rescan. */
static void dl_hook_find(struct tracer *tr)
{
	int fd;

	tr->dl_syms[0].name = "_dl_debug_state";
	tr->dl_syms[1].name = "_r_debug";
	tr->dl_syms[1].data = true;
	if (!tr->ld_path)
		return;
	fd = open(tr->ld_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	elf_symbols_find(fd, tr->dl_syms, 2);
	close(fd);
}

/* How many objects an LD_PRELOAD value names (spaces or colons apart). */
static size_t preload_count(const char *v)
{
	size_t n = 0, len;

	while (v && *v) {
		v += strspn(v, " :");
		len = strcspn(v, " :");
		n += len > 0;
		v += len;
	}
	return n;
}

/*
 * Where to open, and attach uprobes to, the file process PID maps as NAME:
 * its mapping in /proc/PID/map_files, which leads to the very file the
 * process maps even when NAME has been replaced on disk since (a library
 * upgraded under a running service: the maps line says "(deleted)"), where
 * the path would lead to the new file, whose breakpoints the process never
 * meets.  Else NAME through /proc/PID/root.  Returns a malloc'd string.
 */
static char *mapped_file_path(pid_t pid, const struct proc_map *maps, size_t nmaps, const char *name,
			      bool *replaced)
{
	static const char deleted[] = " (deleted)";
	size_t len = strlen(name), i;
	char *out = NULL;

	for (i = 0; i < nmaps; i++) {
		const char *p = maps[i].path;

		if (strncmp(p, name, len) || (p[len] && strcmp(p + len, deleted)))
			continue;
		if (replaced)
			*replaced = p[len] != 0;
		if (asprintf(&out, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)maps[i].start,
			     (unsigned long long)maps[i].end) < 0)
			out = NULL;
		return out;
	}
	if (asprintf(&out, "/proc/%d/root%s", pid, name) < 0)
		out = NULL;
	return out;
}

/* The objects of process PID in lookup order: its link map when the
 * dynamic linker's _r_debug is readable, else the executable and the
 * mapped files in address order.  PATHS are reachable from here (see
 * mapped_file_path), NAMES as the process sees them. */
static int lookup_order_of_pid(struct tracer *tr, pid_t pid, char ***paths, char ***names,
			       size_t *n)
{
	const char *first_replaced = NULL;
	size_t nmaps, i, k = 0, nreplaced = 0;
	struct proc_map *maps;
	uint64_t ld_bias = 0;
	int err;

	err = proc_maps_read(pid, false, &maps, &nmaps);
	if (err)
		return err;
	for (i = 0; i < nmaps; i++) {
		if (maps[i].path[0] != '/' || !is_ld_so(maps[i].path))
			continue;
		if (!tr->ld_path)
			tr->ld_path = mapped_file_path(pid, maps, nmaps, maps[i].path, NULL);
		if (maps[i].offset == 0 && !ld_bias)
			ld_bias = maps[i].start;
	}
	dl_hook_find(tr);
	*names = NULL;
	if (!(tr->dl_syms[1].found && ld_bias &&
	      link_map_read(pid, ld_bias + tr->dl_syms[1].vaddr, names, n) == 0 && *n)) {
		/* no link map (static program, odd loader): maps order */
		*names = calloc(nmaps + 2, sizeof(**names));
		if (!*names) {
			proc_maps_free(maps, nmaps);
			return -ENOMEM;
		}
		for (i = 0; i < nmaps; i++) {
			size_t j;

			if (maps[i].path[0] != '/' || !maps[i].exec)
				continue;
			for (j = 0; j < k && strcmp((*names)[j], maps[i].path); j++)
				;
			if (j == k)
				(*names)[k++] = strdup(maps[i].path);
		}
		*n = k;
	}
	*paths = calloc(*n + 1, sizeof(**paths));
	for (i = 0; *paths && i < *n; i++) {
		bool replaced = false;

		(*paths)[i] = mapped_file_path(pid, maps, nmaps, (*names)[i], &replaced);
		if (!(*paths)[i])
			break;
		if (replaced && !nreplaced++)
			first_replaced = (*names)[i];
	}
	if (nreplaced)
		fprintf(stderr, "dwleak: note: %zu file(s) pid %d maps were replaced on disk since it mapped "
				"them (%s%s): dwleak reads and probes the copies the process maps\n",
			nreplaced, pid, first_replaced, nreplaced > 1 ? ", ..." : "");
	proc_maps_free(maps, nmaps);
	return *paths && i == *n ? 0 : -ENOMEM;
}

/* Finds the allocator the target uses, following symbol interposition. */
static int allocator_find_for(struct tracer *tr)
{
	char **paths = NULL, **names = NULL;
	size_t n = 0, npreload;
	int err;

	if (tr->env->cmd) {
		for (n = 0; tr->lookup && tr->lookup[n]; n++)
			;
		err = allocator_detect(tr->lookup, tr->lookup, n, preload_count(getenv("LD_PRELOAD")),
				       &tr->alloc);
	} else {
		err = lookup_order_of_pid(tr, tr->tgt.pid, &paths, &names, &n);
		npreload = link_map_npreload(tr->tgt.pid);
		if (!err)
			err = allocator_detect(paths, names, n, npreload, &tr->alloc);
		link_map_free(paths);
		link_map_free(names);
	}
	if (err == -ENOENT)
		fprintf(stderr, "dwleak: no object in pid %d defines malloc; nothing to trace\n",
			tr->tgt.pid);
	else if (err)
		fprintf(stderr, "dwleak: cannot find the allocator: %s\n", strerror(-err));
	return err;
}

/* "tcmalloc in /usr/lib/.../libtcmalloc.so.4 (LD_PRELOAD)" for messages. */
static void allocator_describe(const struct allocator *a, char *buf, size_t len)
{
	snprintf(buf, len, "%s in %s%s", a->family, a->objs[0].name,
		 a->preloaded ? " (LD_PRELOAD)" : a->in_executable ? " (linked in)" : "");
}

/* --- Tables --- */

static int file_key_of(const char *path, struct file_key *key)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	key->dev = proc_kdev(major(st.st_dev), minor(st.st_dev));
	key->ino = st.st_ino;
	return 0;
}

/*
 * dwleak -- CMD loads the tables of what ldd says CMD maps before CMD's
 * first instruction and probes the allocator found there, so CMD must be
 * the ELF program itself: a script (a pyenv or virtualenv shim, say) would
 * only exec its interpreter later.  Says so, with what to do instead.
 */
static int command_check_elf(const char *cmd, const char *prog)
{
	char head[256] = "";
	ssize_t n = -1;
	int fd = open(prog, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, head, sizeof(head) - 1);
		close(fd);
	}
	if (n >= 4 && !memcmp(head, "\177ELF", 4))
		return 0;
	if (n >= 2 && head[0] == '#' && head[1] == '!') {
		head[n] = 0;
		head[strcspn(head, "\n")] = 0;
		fprintf(stderr, "dwleak: %s (%s) is a script (%s), not a program: dwleak -- CMD needs the "
				"ELF program itself, to probe its allocator from its first instruction; run the "
				"program directly (e.g. 'dwleak -- /usr/bin/python3 ...'), or start the script "
				"and attach with 'dwleak -p PID'\n", cmd, prog, head);
	} else {
		fprintf(stderr, "dwleak: %s (%s) is not an ELF program%s; dwleak -- CMD traces a program "
				"(or attach to a running one with 'dwleak -p PID')\n", cmd, prog,
			n < 0 ? " (cannot read it)" : "");
	}
	return -ENOEXEC;
}

/* For a command not started yet: the tables of everything ldd says it
 * will map, keyed by file, so they are in place before its first
 * instruction. */
static int tables_for_command(struct tracer *tr)
{
	struct file_key key;
	char *prog, **libs = NULL;
	size_t i;
	int err;

	prog = target_which(tr->env->cmd[0]);
	if (!prog) {
		fprintf(stderr, "dwleak: cannot find %s: %s\n", tr->env->cmd[0],
			strchr(tr->env->cmd[0], '/') ? "no such file" : "no such command in PATH");
		return -ENOENT;
	}
	if (access(prog, X_OK)) {
		fprintf(stderr, "dwleak: cannot run %s: %s\n", prog, strerror(errno));
		free(prog);
		return -EACCES;
	}
	err = command_check_elf(tr->env->cmd[0], prog);
	if (err) {
		free(prog);
		return err;
	}
	err = target_libs(prog, &libs);
	for (i = 0; !err && libs[i]; i++) {
		if (file_key_of(libs[i], &key))
			continue;
		err = unwinder_add(tr->uw, &key, libs[i], -1, NULL);
		if (!tr->ld_path && i > 0 && is_ld_so(libs[i]))
			tr->ld_path = strdup(libs[i]);
	}
	tr->lookup = libs; /* ldd lists them in the dynamic linker's load order */
	free(prog);
	return err;
}

static void warn_failed_tables(struct tracer *tr)
{
	struct unwind_object *o;
	size_t i;

	for (i = 0; i < unwinder_count(tr->uw); i++) {
		o = unwinder_object(tr->uw, i);
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

static uint64_t ktime_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* bpf_ktime_get_ns's clock */
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The walker's per-CPU rule cache holds rules by runtime address: after
 * the mappings changed, an address may belong to another object. */
static void rule_cache_flush(struct tracer *tr)
{
	__atomic_add_fetch(&tr->skel->bss->rule_gen, 1, __ATOMIC_SEQ_CST);
}

static int tables_refresh(struct tracer *tr)
{
	int err;

	err = unwinder_add_process(tr->uw, tr->tgt.pid);
	if (err && err != -ENOENT)
		return err;
	err = unwinder_load_pending(tr->uw);
	warn_failed_tables(tr);
	if (err < 0)
		return err;
	err = unwinder_publish(tr->uw, tr->tgt.pid, &tr->mappings_dropped);
	if (err == 1)
		rule_cache_flush(tr);
	return err == -ENOENT || err == 1 ? 0 : err;
}

/* One alloc_events record: replayed in the order the probes wrote them. */
static int on_alloc_event(void *ctx, void *data, size_t size)
{
	struct tracer *tr = ctx;
	const struct alloc_event *a = data;
	const struct free_event *f = data;

	if (size < sizeof(*f))
		return 0;
	if (f->type == AEV_FREE) {
		alloc_table_remove(&tr->allocs, f->addr);
		return 0;
	}
	if (size < sizeof(*a))
		return 0;
	if (a->type == AEV_RESIZE) {
		alloc_table_resize(&tr->allocs, a->addr, a->size);
		return 0;
	}
	if (a->type == AEV_ALLOC) {
		struct alloc_rec r = {
			.addr = a->addr,
			.size = a->size,
			.stack_id = a->stack_id,
			.fp_stack_id = a->fp_stack_id,
			.ts = tr->now_ns,
			.kind = a->kind,
		};

		if (alloc_table_add(&tr->allocs, &r))
			tr->allocs_oom++;
	}
	return 0;
}

/* Applies every record the probes have written so far. */
static void allocs_drain(struct tracer *tr)
{
	tr->now_ns = ktime_now_ns();
	ring_buffer__consume(tr->rb);
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct tracer *tr = ctx;
	const struct event *e = data;

	if (size < sizeof(*e))
		return 0;
	if (e->type == EVENT_MMAP && size >= sizeof(struct mmap_event)) {
		const struct mmap_event *m = data;
		int err = 0;

		if (m->op == MMAP_OP_MAP)
			err = mmap_regions_map(&tr->regions, m->addr, m->len, m->stack_id,
					       m->fp_stack_id, m->ts);
		else if (m->op == MMAP_OP_UNMAP)
			err = mmap_regions_unmap(&tr->regions, m->addr, m->len);
		else if (m->op == MMAP_OP_REMAP)
			err = mmap_regions_remap(&tr->regions, m->addr, m->len, m->new_addr, m->new_len);
		if (err && !tr->mmap_err)
			tr->mmap_err = err;
		return 0;
	}
	if (e->type == EVENT_NEED_TABLE || e->type == EVENT_MAPS_CHANGED)
		tr->rescan = true;
	if (e->type == EVENT_MAPS_CHANGED && e->stopped)
		tr->resume = true;
	return 0;
}

/* --- BPF setup --- */

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

/*
 * How allocator calls are probed.  A uprobe session (Linux 6.13+) lets a
 * call that needs nothing at its return (not sampled, or nested) cancel
 * its return probe, but costs every probe a kfunc call to tell entry from
 * return; without --sample-bytes nearly every call needs its return, so
 * separate entry and return programs are cheaper.  DWLEAK_UPROBE_SESSION=0
 * or 1 forces the choice (tests, bench/).  uprobe_multi links made with a
 * pid run programs only in that process since Linux 6.12 (earlier, in
 * any process sharing its mm), so from there the programs skip the check.
 */
static void probe_choose(struct tracer *tr)
{
	const char *force = getenv("DWLEAK_UPROBE_SESSION");
	bool want = force ? !strcmp(force, "1") : tr->env->sample_bytes > 0;

	/* the session probe attaches and detaches a link (tens of ms): only
	 * when sessions would be used */
	tr->session = tr->probes.multi && want && attach_session_supported();
	if (!tr->probes.multi)
		tr->probe_why = "no uprobe_multi in this kernel";
	else if (want && !tr->session)
		tr->probe_why = "no uprobe sessions in this kernel";
	else if (force && !want)
		tr->probe_why = "DWLEAK_UPROBE_SESSION=0 (any value but 1)";
	else if (force)
		tr->probe_why = "DWLEAK_UPROBE_SESSION=1: a call needing nothing at its return skips the return probe";
	else if (want)
		tr->probe_why = "--sample-bytes: an unsampled call skips the return probe";
	else
		tr->probe_why = "every call needs its return without --sample-bytes, and sessions cost each probe a kfunc call";
	tr->tgid_by_link = tr->probes.multi && kernel_at_least(6, 12);
}

/* Records per CPU between wakeups of the alloc_events reader: a power of
 * two, so that all CPUs together fill at most a quarter of the ring with
 * the largest records before the reader is woken. */
static uint64_t ring_wake_records(void)
{
	int ncpu = libbpf_num_possible_cpus(); /* each counts its own records */
	uint64_t n = ALLOC_RING_BYTES / 4 / (sizeof(struct alloc_event) + 8) / (uint64_t)(ncpu > 0 ? ncpu : 1);
	uint64_t p = 1;

	while (p * 2 <= n)
		p *= 2;
	return p;
}

static int skel_open(struct tracer *tr)
{
	uint64_t rows, rules;
	struct dwleak_bpf *s;
	int err;

	s = dwleak_bpf__open();
	if (!s)
		return -errno;
	tr->skel = s;
	/* one of the two ways to probe allocator calls is loaded */
	bpf_program__set_autoload(s->progs.alloc_session, tr->session);
	bpf_program__set_autoload(s->progs.alloc_enter_any, !tr->session);
	bpf_program__set_autoload(s->progs.alloc_exit, !tr->session);
	if (tr->session)
		attach_prepare_session(s->progs.alloc_session);
	attach_prepare(&tr->probes, s->progs.alloc_enter_any);
	attach_prepare(&tr->probes, s->progs.alloc_exit);
	attach_prepare(&tr->probes, s->progs.free_enter);
	attach_prepare(&tr->probes, s->progs.dl_state);
	s->rodata->target_tgid = (uint32_t)tr->tgt.pid;
	s->rodata->sample_bytes = (uint64_t)tr->env->sample_bytes;
	s->rodata->track_mmap = tr->env->mmap;
	s->rodata->alloc_ring_wake = ring_wake_records();
	s->rodata->tgid_by_link = tr->tgid_by_link;
	s->rodata->guard_preempt = tr->guard;
	/* bench/: the cost of everything but the walk; reports have no stacks */
	s->rodata->bench_no_walk = getenv("DWLEAK_BENCH_NO_WALK") && !strcmp(getenv("DWLEAK_BENCH_NO_WALK"), "1");
	/* the syscall tracepoints are loaded (and verified) only for --mmap */
	bpf_program__set_autoload(s->progs.mmap_enter, tr->env->mmap);
	bpf_program__set_autoload(s->progs.mmap_exit, tr->env->mmap);
	s->rodata->unwind_mode = !strcmp(tr->env->unwind, "fp")     ? UNWIND_MODE_FP
				 : !strcmp(tr->env->unwind, "both") ? UNWIND_MODE_BOTH
								    : UNWIND_MODE_DWARF;
	if (tr->dl_syms[0].found) {
		s->rodata->dl_state_vaddr = tr->dl_syms[0].vaddr;
		s->rodata->r_debug_vaddr = tr->dl_syms[1].found ? tr->dl_syms[1].vaddr : 0;
		s->rodata->stop_on_dl_state = tr->tgt.spawned;
	}
	unwinder_needs(tr->uw, &rows, &rules);
	rows = rows * 2 > ROWS_MIN ? rows * 2 : ROWS_MIN;
	rules = rules * 2 > RULES_MIN ? rules * 2 : RULES_MIN;
	err = bpf_map__set_max_entries(s->maps.rows, (uint32_t)rows);
	err = err ?: bpf_map__set_max_entries(s->maps.rules, (uint32_t)rules);
	err = err ?: bpf_map__set_max_entries(s->maps.alloc_events, ALLOC_RING_BYTES);
	err = err ?: bpf_map__set_max_entries(s->maps.stacks, STACKS_MAX);
	if (err)
		return err;
	err = dwleak_bpf__load(s);
	if (err)
		return err;
	if (tr->env->sample_bytes) {
		err = sample_gaps_fill(bpf_map__fd(s->maps.sample_gaps), (double)tr->env->sample_bytes);
		if (err)
			return err;
	}
	unwinder_set_maps(tr->uw, &(struct unwinder_maps){
		.tables = bpf_map__fd(s->maps.tables),
		.pages = bpf_map__fd(s->maps.pages),
		.rows = bpf_map__fd(s->maps.rows),
		.rules = bpf_map__fd(s->maps.rules),
		.rows_cap = (uint32_t)rows,
		.rules_cap = (uint32_t)rules,
		.pages_cap = bpf_map__max_entries(s->maps.pages),
		.proc_maps = bpf_map__fd(s->maps.proc_maps),
		.proc_maps_cur = bpf_map__fd(s->maps.proc_maps_cur),
		.mappings = bpf_map__fd(s->maps.mappings),
	});
	return 0;
}

/* Return probes go first: an entry seen before its function's return
 * probe exists would wait for a return that never comes.  The cookie tells
 * the shared programs which function fired. */
static int probes_attach_object(struct tracer *tr, const struct alloc_object *o, bool returns)
{
	uint64_t offs[ALLOC_MAX_FUNCS], cookies[ALLOC_MAX_FUNCS];
	uint64_t free_offs[ALLOC_MAX_FUNCS], free_cookies[ALLOC_MAX_FUNCS];
	size_t i, n = 0, nf = 0;
	int err = 0;

	for (i = 0; i < o->nfuncs; i++) {
		const struct alloc_func *f = &o->funcs[i];

		if (alloc_kind_frees(f->kind)) {
			free_offs[nf] = f->file_off + f->site_off;
			free_cookies[nf++] = DWLEAK_COOKIE(f->kind, f->size);
		} else {
			offs[n] = f->file_off;
			cookies[n++] = DWLEAK_COOKIE(f->kind, f->size);
		}
	}
	if (returns && tr->session)
		return n ? attach_session(&tr->probes, tr->skel->progs.alloc_session, o->path, tr->tgt.pid,
					  offs, cookies, n)
			 : 0;
	if (returns)
		return n ? attach_uprobes(&tr->probes, tr->skel->progs.alloc_exit, o->path, tr->tgt.pid,
					  offs, cookies, n, true)
			 : 0;
	if (n && !tr->session)
		err = attach_uprobes(&tr->probes, tr->skel->progs.alloc_enter_any, o->path, tr->tgt.pid,
				     offs, cookies, n, false);
	if (!err && nf)
		err = attach_uprobes(&tr->probes, tr->skel->progs.free_enter, o->path, tr->tgt.pid,
				     free_offs, free_cookies, nf, false);
	return err;
}

/* Return probes go first: an entry seen before its function's return
 * probe exists would wait for a return that never comes.  The cookie tells
 * the shared programs which function fired. */
static int probes_attach(struct tracer *tr)
{
	size_t i;
	int pass, err;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < tr->alloc.nobjs; i++) {
			err = probes_attach_object(tr, &tr->alloc.objs[i], pass == 0);
			if (err) {
				fprintf(stderr, "dwleak: cannot attach uprobes to %s: %s\n",
					tr->alloc.objs[i].name, strerror(-err));
				return err;
			}
		}
	}
	if (tr->env->mmap) {
		tr->mmap_links[0] = bpf_program__attach(tr->skel->progs.mmap_enter);
		tr->mmap_links[1] = tr->mmap_links[0] ? bpf_program__attach(tr->skel->progs.mmap_exit) : NULL;
		if (!tr->mmap_links[1]) {
			fprintf(stderr, "dwleak: cannot attach to the syscall tracepoints for --mmap: %s; "
					"the kernel needs BTF raw tracepoints\n", strerror(errno));
			return -errno;
		}
	}
	if (tr->dl_syms[0].found && tr->dl_syms[0].file_off) {
		err = attach_uprobes(&tr->probes, tr->skel->progs.dl_state, tr->ld_path, tr->tgt.pid,
				     &tr->dl_syms[0].file_off, NULL, 1, false);
		if (err)
			fprintf(stderr, "dwleak: warning: cannot probe %s's _dl_debug_state (%s); "
					"libraries loaded later are found by a rescan every %.0f s\n",
				tr->ld_path, strerror(-err), RESCAN_INTERVAL_S);
	}
	return 0;
}

/* --- Reading the kernel's bookkeeping --- */

static void counters_read(struct tracer *tr, uint64_t *out)
{
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(tr->skel->maps.counters);
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

/* Outstanding allocations of one stack, aggregated in user space from the
 * per-address map (exact for --min-age and the oldest age). */
struct agg {
	uint64_t stack_id;
	uint64_t fp_stack_id; /* --unwind both: stacks are grouped by the pair */
	double est_bytes;     /* --sample-bytes: unbiased estimates */
	double est_count;
	uint64_t bytes;
	uint64_t count;
	uint64_t oldest_ts;
	uint32_t kind;
};

struct agg_table {
	struct agg *slots;
	size_t cap; /* power of two */
	size_t n;
};

static struct agg *agg_get(struct agg_table *t, uint64_t id, uint64_t fp_id)
{
	size_t i, j;

	if (2 * (t->n + 1) > t->cap) {
		struct agg_table g = { calloc(t->cap ? t->cap * 2 : 1024, sizeof(struct agg)),
				       t->cap ? t->cap * 2 : 1024, 0 };

		if (!g.slots)
			return NULL;
		for (i = 0; i < t->cap; i++) {
			if (!t->slots[i].count)
				continue;
			for (j = (t->slots[i].stack_id ^ t->slots[i].fp_stack_id) & (g.cap - 1); g.slots[j].count;
			     j = (j + 1) & (g.cap - 1))
				;
			g.slots[j] = t->slots[i];
			g.n++;
		}
		free(t->slots);
		*t = g;
	}
	for (j = (id ^ fp_id) & (t->cap - 1); t->slots[j].count; j = (j + 1) & (t->cap - 1))
		if (t->slots[j].stack_id == id && t->slots[j].fp_stack_id == fp_id)
			return &t->slots[j];
	t->slots[j].stack_id = id;
	t->slots[j].fp_stack_id = fp_id;
	t->n++;
	return &t->slots[j];
}


/* Counts one outstanding allocation of SIZE bytes of KIND, made at TS, into
 * the aggregate of its stacks (ID, FP_ID) in T.  W is its weight in the
 * --sample-bytes estimates.  Returns 0 or -ENOMEM. */
static int agg_count(struct agg_table *t, uint64_t id, uint64_t fp_id, uint64_t ts,
		     uint64_t size, uint32_t kind, double w)
{
	struct agg *g = agg_get(t, id, fp_id);

	if (!g)
		return -ENOMEM;
	if (!g->count || ts < g->oldest_ts)
		g->oldest_ts = ts;
	g->bytes += size;
	g->count++;
	g->kind = kind;
	g->est_bytes += (double)size * w;
	g->est_count += w;
	return 0;
}

/* --mmap: the program's own anonymous regions, one "allocation" each. */
static int regions_aggregate(struct tracer *tr, struct agg_table *t)
{
	uint64_t now = ktime_now_ns(), min_age = (uint64_t)(tr->env->min_age_s * 1e9);
	const struct mmap_region *r;
	size_t i;
	int err;

	for (i = 0; i < tr->regions.n; i++) {
		r = &tr->regions.r[i];
		if (now - r->ts < min_age)
			continue;
		/* never sampled: weight 1 */
		err = agg_count(t, r->stack_id, r->fp_stack_id, r->ts, r->end - r->start, ALLOC_MMAP, 1.0);
		if (err)
			return err;
	}
	return 0;
}

static int allocs_aggregate(struct tracer *tr, struct agg_table *t)
{
	uint64_t now = ktime_now_ns(), min_age = (uint64_t)(tr->env->min_age_s * 1e9);
	const struct alloc_rec *a;
	size_t i;
	int err;

	for (i = 0; i < tr->allocs.cap; i++) {
		double w = 1.0;

		a = &tr->allocs.slots[i];
		if (!a->addr || now - a->ts < min_age)
			continue;
		/* sampled with probability 1 - exp(-size/N): weigh by its inverse
		 * (the estimates are only read with --sample-bytes) */
		if (tr->env->sample_bytes && a->size)
			w = 1.0 / -expm1(-(double)a->size / (double)tr->env->sample_bytes);
		err = agg_count(t, a->stack_id, a->fp_stack_id, a->ts, a->size, a->kind, w);
		if (err)
			return err;
	}
	return 0;
}

/* --- Symbolization --- */

struct mapping {
	uint64_t start, end, pgoff;
	struct file_key file;
};

struct frame_arena {
	struct report_frame *frames; /* every frame of every stack */
	size_t n, cap;
	struct sym_frame **syms;     /* sym_module_resolve results, freed at the end */
	size_t *nsyms;
	size_t nres, capres;
};

static int mappings_read(struct tracer *tr, struct mapping **out, size_t *n)
{
	int fd = bpf_map__fd(tr->skel->maps.mappings);
	struct mapping_key key, next;
	struct mapping_seen val;
	struct mapping *arr = NULL, *g;
	size_t cnt = 0, cap = 0;
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (key.tgid != (uint32_t)tr->tgt.pid || bpf_map_lookup_elem(fd, &key, &val))
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 64;
			g = realloc(arr, cap * sizeof(*g));
			if (!g) {
				free(arr);
				return -ENOMEM;
			}
			arr = g;
		}
		arr[cnt++] = (struct mapping){ key.start, val.end, val.pgoff, val.file };
	}
	*out = arr;
	*n = cnt;
	return 0;
}

static const struct mapping *mapping_find(const struct mapping *m, size_t n, uint64_t pc)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (pc >= m[i].start && pc < m[i].end)
			return &m[i];
	return NULL;
}

static struct report_frame *arena_frame(struct frame_arena *a)
{
	struct report_frame *g;

	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 1024;
		g = realloc(a->frames, a->cap * sizeof(*g));
		if (!g)
			return NULL;
		a->frames = g;
	}
	memset(&a->frames[a->n], 0, sizeof(a->frames[0]));
	return &a->frames[a->n++];
}

static int arena_keep(struct frame_arena *a, struct sym_frame *f, size_t n)
{
	if (a->nres == a->capres) {
		size_t cap = a->capres ? a->capres * 2 : 256;
		struct sym_frame **s = realloc(a->syms, cap * sizeof(*s));
		size_t *c = realloc(a->nsyms, cap * sizeof(*c));

		if (s)
			a->syms = s;
		if (c)
			a->nsyms = c;
		if (!s || !c)
			return -ENOMEM;
		a->capres = cap;
	}
	a->syms[a->nres] = f;
	a->nsyms[a->nres++] = n;
	return 0;
}

static void arena_free(struct frame_arena *a)
{
	size_t i;

	for (i = 0; i < a->nres; i++)
		sym_frames_free(a->syms[i], a->nsyms[i]);
	free(a->syms);
	free(a->nsyms);
	free(a->frames);
}

/* Appends the report frames of runtime address PC (several when inlined
 * functions are described). */
static int frame_symbolize(struct tracer *tr, struct frame_arena *a, const struct mapping *maps,
			   size_t nmaps, uint64_t pc, bool return_addr)
{
	const struct mapping *m = mapping_find(maps, nmaps, pc);
	struct unwind_object *o = m ? unwinder_find(tr->uw, &m->file) : NULL;
	struct sym_module *mod = NULL;
	struct sym_frame *sf = NULL;
	struct report_frame *rf;
	uint64_t elf = pc;
	size_t n = 0, i;

	if (o) {
		elf = unwind_object_elf_addr(o, m->start, m->pgoff, pc);
		if (symbolizer_module(tr->sym, o->path, o->fd, &mod) == 0 &&
		    sym_module_resolve(mod, elf, return_addr, &sf, &n) == 0 && arena_keep(a, sf, n))
			return -ENOMEM;
	}
	for (i = 0; i < (n ? n : 1); i++) {
		rf = arena_frame(a);
		if (!rf)
			return -ENOMEM;
		rf->address = pc;
		rf->elf_address = elf;
		rf->module = o ? o->path : NULL;
		rf->build_id = o && o->build_id[0] ? o->build_id : NULL;
		if (n) {
			rf->function = sf[i].function;
			rf->offset = sf[i].offset;
			rf->file = sf[i].file;
			rf->line = sf[i].line;
			rf->inlined = sf[i].inlined;
		}
	}
	return 0;
}

static const char *walk_end_reason(uint32_t end)
{
	switch (end) {
	case WALK_ERR_NO_MAPPING: return "pc in no file-backed mapping (JIT or anonymous code)";
	case WALK_ERR_NO_TABLE: return "no unwind table for this object";
	case WALK_ERR_NO_FDE: return "no CFI for this pc";
	case WALK_ERR_UNSUPPORTED: return "CFI rule the walker does not support";
	case WALK_ERR_READ: return "stack memory unreadable";
	case WALK_ERR_RBP_UNKNOWN: return "frame needs rbp, which was lost";
	case WALK_ERR_TRAMPOLINE: return "another tool's uretprobe trampoline";
	case WALK_ERR_VMA_BUSY: return "mapping lookup contended";
	default: return NULL;
	}
}

static const char *const counter_names[CNT_COUNT] = {
	[CNT_ALLOC_CALLS] = "alloc_calls",
	[CNT_FREE_CALLS] = "free_calls",
	[CNT_NESTED_CALLS] = "nested_calls",
	[CNT_FAILED_ALLOCS] = "failed_allocs",
	[CNT_FREE_UNKNOWN] = "frees_of_untracked",
	[CNT_RING_FULL] = "alloc_events_lost",
	[CNT_STACKS_FULL] = "stacks_map_full",
	[CNT_PENDING_FULL] = "pending_calls_full",
	[CNT_PENDING_LOST] = "returns_unmatched",
	[CNT_REPLACED] = "allocs_replaced",
	[CNT_TRAMPOLINE_FIXED] = "uretprobe_returns_recovered",
	[CNT_MAPPINGS_FULL] = "mappings_map_full",
	[CNT_RESIZED] = "allocs_resized",
	[CNT_UNSAMPLED] = "allocs_not_sampled",
	[CNT_MMAP_CALLS] = "mmap_calls",
	[CNT_MMAP_IN_ALLOC] = "mmap_calls_in_allocator",
	[CNT_FRAMES] = "frames_walked",
	[CNT_RULE_CACHE_MISSES] = "rule_cache_misses",
	[CNT_WALKS] = "walks",
	[CNT_WALKS_MEMO] = "walks_remembered",
	[CNT_STACK_READS] = "stack_reads",
	[CNT_WALKER_BUSY] = "walks_skipped_walker_busy",
	[CNT_FP_WALKS] = "fp_walks",
	[CNT_FP_FRAMES] = "fp_frames_walked",
	[CNT_WALK_END_BASE + WALK_END_OK] = "walks_complete",
	[CNT_WALK_END_BASE + WALK_END_ZERO_RA] = "walks_ended_zero_ra",
	[CNT_WALK_END_BASE + WALK_END_TRUNCATED] = "walks_truncated",
	[CNT_WALK_END_BASE + WALK_ERR_NO_MAPPING] = "walk_err_no_mapping",
	[CNT_WALK_END_BASE + WALK_ERR_NO_TABLE] = "walk_err_no_table",
	[CNT_WALK_END_BASE + WALK_ERR_NO_FDE] = "walk_err_no_fde",
	[CNT_WALK_END_BASE + WALK_ERR_UNSUPPORTED] = "walk_err_unsupported",
	[CNT_WALK_END_BASE + WALK_ERR_READ] = "walk_err_read",
	[CNT_WALK_END_BASE + WALK_ERR_RBP_UNKNOWN] = "walk_err_rbp_unknown",
	[CNT_WALK_END_BASE + WALK_ERR_TRAMPOLINE] = "walk_err_trampoline",
	[CNT_WALK_END_BASE + WALK_ERR_VMA_BUSY] = "walk_err_vma_busy",
	[CNT_EVENTS_LOST] = "events_lost",
};

static double growth_of(struct tracer *tr, uint64_t id, uint64_t bytes, double now)
{
	size_t i;

	if (!tr->t_prev || now <= tr->t_prev)
		return NAN;
	for (i = 0; i < tr->nprev; i++)
		if (tr->prev_ids[i] == id)
			return ((double)bytes - (double)tr->prev_bytes[i]) / (now - tr->t_prev);
	return (double)bytes / (now - tr->t_prev);
}

static void growth_remember(struct tracer *tr, const struct agg_table *t, double now)
{
	size_t i, k = 0;

	free(tr->prev_ids);
	free(tr->prev_bytes);
	tr->prev_ids = calloc(t->n + 1, sizeof(*tr->prev_ids));
	tr->prev_bytes = calloc(t->n + 1, sizeof(*tr->prev_bytes));
	tr->nprev = 0;
	if (!tr->prev_ids || !tr->prev_bytes)
		return;
	for (i = 0; i < t->cap; i++) {
		if (!t->slots[i].count)
			continue;
		tr->prev_ids[k] = t->slots[i].stack_id;
		tr->prev_bytes[k++] = (int64_t)t->slots[i].bytes;
	}
	tr->nprev = k;
	tr->t_prev = now;
}

struct built {
	struct report r;
	struct report_stack *stacks;
	struct frame_arena arena;
	size_t *first_frame; /* per stack: 3 indexes into arena.frames (frames, fp_frames, end) */
	struct report_fp_summary fp;
	struct report_suppressed *supp;
	struct mapping *maps;
	uint64_t counters[CNT_COUNT];
};

static void built_free(struct built *b)
{
	arena_free(&b->arena);
	free(b->stacks);
	free(b->first_frame);
	free(b->maps);
	fp_summary_free(&b->fp);
	free(b->supp);
}

/* Appends the symbolized frames of stack ID; returns the walk's end (or
 * -1 when the stack was not stored) in *END. */
/* Whether the programs must guard the walker's per-CPU buffers (see
 * walker_enter in bpf/dwleak.bpf.c): where the kernel may preempt them.
 * DWLEAK_PREEMPT_GUARD=0 or 1 overrides; =busy makes every walk find the
 * buffers busy (tests of what the reports then say). */
static int guard_choose(struct tracer *tr)
{
	const char *env = getenv("DWLEAK_PREEMPT_GUARD");

	preempt_info_read(&tr->preempt);
	tr->guard = preempt_model_preempts_bpf(tr->preempt.model) ? PREEMPT_GUARD_ON : PREEMPT_GUARD_OFF;
	if (!env || !*env)
		return 0;
	tr->guard_forced = true;
	if (!strcmp(env, "0")) {
		tr->guard = PREEMPT_GUARD_OFF;
	} else if (!strcmp(env, "1")) {
		tr->guard = PREEMPT_GUARD_ON;
	} else if (!strcmp(env, "busy")) {
		tr->guard = PREEMPT_GUARD_BUSY;
	} else {
		fprintf(stderr, "dwleak: DWLEAK_PREEMPT_GUARD=%s: want 0, 1 or busy\n", env);
		return -EINVAL;
	}
	return 0;
}

/* Ends of stacks that have no walk_end: no frames at all. */
#define END_NOT_STORED (-1)  /* stacks map full */
#define END_WALKER_BUSY (-2) /* DWLEAK_STACK_WALKER_BUSY */
#define END_NOT_WALKED (-3)  /* DWLEAK_STACK_NOT_WALKED */

static int frames_of(struct tracer *tr, struct built *b, size_t nmaps, uint64_t id, int *end)
{
	struct stack_trace st;
	uint32_t i;
	int err;

	*end = id == DWLEAK_STACK_WALKER_BUSY ? END_WALKER_BUSY
	       : id == DWLEAK_STACK_NOT_WALKED ? END_NOT_WALKED
					       : END_NOT_STORED;
	if (*end != END_NOT_STORED)
		return 0;
	if (bpf_map_lookup_elem(bpf_map__fd(tr->skel->maps.stacks), &id, &st))
		return 0;
	for (i = 0; i < st.nframes && i < DWLEAK_MAX_FRAMES; i++) {
		err = frame_symbolize(tr, &b->arena, b->maps, nmaps, st.pcs[i] & ~DWLEAK_FRAME_EXACT,
				      i > 0 && !(st.pcs[i] & DWLEAK_FRAME_EXACT));
		if (err)
			return err;
	}
	*end = st.end;
	return 0;
}

static int stack_build(struct tracer *tr, struct built *b, size_t nmaps, const struct agg *g,
		       struct report_stack *rs, size_t *first, double now)
{
	int err, end;

	rs->bytes = tr->env->sample_bytes ? (uint64_t)llround(g->est_bytes) : g->bytes;
	rs->allocations = tr->env->sample_bytes ? (uint64_t)llround(g->est_count) : g->count;
	rs->allocator = alloc_kind_name(g->kind);
	rs->oldest_age_s = (double)(ktime_now_ns() - g->oldest_ts) / 1e9;
	rs->growth_bytes_per_s = tr->env->interval_s > 0 ? growth_of(tr, g->stack_id, g->bytes, now) : NAN;
	rs->fp_divergence = -1;
	first[0] = b->arena.n;
	err = frames_of(tr, b, nmaps, g->stack_id, &end);
	if (err)
		return err;
	/* libstdc++'s operator new is malloc's caller: C++ allocated it */
	if (b->arena.n > first[0] + 1 && b->arena.frames[first[0] + 1].function &&
	    !strncmp(b->arena.frames[first[0] + 1].function, "operator new", 12) &&
	    (g->kind == ALLOC_MALLOC || g->kind == ALLOC_ALIGNED_ALLOC || g->kind == ALLOC_MEMALIGN ||
	     g->kind == ALLOC_POSIX_MEMALIGN))
		rs->allocator = alloc_kind_name(ALLOC_NEW);
	rs->truncated = end == WALK_END_TRUNCATED;
	rs->unwind_error = end == END_WALKER_BUSY  ? "skipped, a preempted probe held this CPU's walker buffers"
			   : end == END_NOT_WALKED ? "not walked (DWLEAK_BENCH_NO_WALK=1)"
			   : end < 0		   ? "stack not stored (stacks map full)"
						   : walk_end_reason((uint32_t)end);
	/* the dynamic linker runs initializers from _dl_start_user, hand-written
	 * code without CFI: the root of those stacks, not a lost frame */
	if (end == WALK_ERR_NO_FDE && b->arena.n > first[0] && b->arena.frames[b->arena.n - 1].function &&
	    !strcmp(b->arena.frames[b->arena.n - 1].function, "_dl_start_user"))
		rs->unwind_error = NULL;
	first[1] = b->arena.n;
	if (g->fp_stack_id && strcmp(tr->env->unwind, "fp")) {
		err = frames_of(tr, b, nmaps, g->fp_stack_id, &end);
		rs->fp_complete = end == WALK_END_OK;
	}
	first[2] = b->arena.n;
	return err;
}

/* Moves suppressed stacks out of the report, counting them per rule. */
static void suppress_stacks(struct tracer *tr, struct built *b)
{
	size_t i, k = 0, n = 0;

	for (i = 0; i < tr->supp.n; i++)
		tr->supp.rules[i].stacks = tr->supp.rules[i].bytes = tr->supp.rules[i].allocations = 0;
	for (i = 0; i < b->r.nstacks; i++)
		if (!suppressions_match(&tr->supp, &b->stacks[i]))
			b->stacks[k++] = b->stacks[i];
	b->r.nstacks = k;
	b->supp = calloc(tr->supp.n + 1, sizeof(*b->supp));
	if (!b->supp)
		return;
	for (i = 0; i < tr->supp.n; i++) {
		const struct supp_rule *r = &tr->supp.rules[i];

		if (!r->stacks)
			continue;
		b->supp[n++] = (struct report_suppressed){ r->name, r->description, r->stacks, r->bytes,
							   r->allocations };
	}
	b->r.suppressed = b->supp;
	b->r.nsuppressed = n;
}

static int report_build(struct tracer *tr, struct built *b)
{
	struct agg_table t = { 0 };
	size_t nmaps = 0, i, k = 0;
	double now = now_s();
	int err;

	memset(b, 0, sizeof(*b));
	allocs_drain(tr);
	counters_read(tr, b->counters);
	/* counted where the records are applied */
	b->counters[CNT_FREE_UNKNOWN] = tr->allocs.free_unknown;
	b->counters[CNT_REPLACED] = tr->allocs.replaced;
	b->counters[CNT_RESIZED] = tr->allocs.resized;
	err = allocs_aggregate(tr, &t);
	err = err ?: regions_aggregate(tr, &t);
	err = err ?: mappings_read(tr, &b->maps, &nmaps);
	if (err)
		goto out;
	b->stacks = calloc(t.n + 1, sizeof(*b->stacks));
	b->first_frame = calloc(3 * (t.n + 1), sizeof(*b->first_frame));
	if (!b->stacks || !b->first_frame) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < t.cap; i++) {
		if (!t.slots[i].count)
			continue;
		err = stack_build(tr, b, nmaps, &t.slots[i], &b->stacks[k], &b->first_frame[3 * k], now);
		if (err)
			goto out;
		k++;
	}
	/* frames were appended to one growing array: point stacks in now */
	for (i = 0; i < k; i++) {
		const size_t *ff = &b->first_frame[3 * i];

		b->stacks[i].frames = b->arena.frames + ff[0];
		b->stacks[i].nframes = ff[1] - ff[0];
		b->stacks[i].fp_frames = b->arena.frames + ff[1];
		b->stacks[i].nfp_frames = ff[2] - ff[1];
	}
	b->r.pid = tr->tgt.pid;
	b->r.command = tr->tgt.command;
	b->r.unwind = tr->env->unwind;
	b->r.duration_s = now - tr->t_traced;
	b->r.sample_bytes = (uint64_t)tr->env->sample_bytes;
	b->r.stacks = b->stacks;
	b->r.nstacks = k;
	suppress_stacks(tr, b);
	report_totals_from_stacks(&b->r);
	if (!strcmp(tr->env->unwind, "both")) {
		err = fp_compare(&b->r, &b->fp);
		if (err)
			goto out;
	}
	b->r.totals.dropped_events = b->counters[CNT_RING_FULL] + tr->allocs_oom + b->counters[CNT_STACKS_FULL] +
				     b->counters[CNT_PENDING_FULL] +
				     b->counters[CNT_EVENTS_LOST] + b->counters[CNT_MAPPINGS_FULL];
	b->r.counter_names = counter_names;
	b->r.counter_values = b->counters;
	b->r.ncounters = CNT_COUNT;
	if (tr->env->interval_s > 0)
		growth_remember(tr, &t, now);
out:
	free(t.slots);
	return err;
}

static int report_write(struct tracer *tr, FILE *f, bool final)
{
	const char *fmt = final ? tr->env->format : "text";
	unsigned int top = (unsigned int)tr->env->top;
	struct built b;
	int err;

	err = report_build(tr, &b);
	if (!err) {
		if (!strcmp(fmt, "json"))
			err = report_write_json(f, &b.r, top);
		else if (!strcmp(fmt, "folded"))
			err = report_write_folded(f, &b.r, top);
		else if (!strcmp(fmt, "pprof"))
			err = report_write_pprof(f, &b.r, top);
		else if (!strcmp(fmt, "svg"))
			err = report_write_svg(f, &b.r, top);
		else
			err = report_write_text(f, &b.r, top);
		fflush(f);
	}
	if (final && tr->env->stats) {
		struct unwinder_stats us;
		size_t i;

		unwinder_stats(tr->uw, &us);
		fprintf(stderr, "dwleak: stats: tables %u loaded, %u failed, %u dropped (maps full); "
				"rows %llu of %llu, rules %llu of %llu, %llu table bytes\n",
			us.loaded, us.failed, us.dropped_full, (unsigned long long)us.rows_used,
			(unsigned long long)us.rows_cap, (unsigned long long)us.rules_used,
			(unsigned long long)us.rules_cap, (unsigned long long)us.bytes);
		fprintf(stderr, "dwleak: stats: allocator calls probed by %s (%s); %s\n",
			tr->session ? "uprobe sessions"
			: tr->probes.multi ? "uprobe_multi entry and return probes"
					   : "perf-event entry and return probes",
			tr->probe_why,
			tr->tgid_by_link ? "the links filter by process"
					 : "the programs filter by process");
		fprintf(stderr, "dwleak: stats: walker buffers %s%s; the kernel's preemption model: %s (from %s)\n",
			tr->guard == PREEMPT_GUARD_OFF	? "not guarded"
			: tr->guard == PREEMPT_GUARD_ON ? "guarded against preempted probes"
							: "always found busy",
			tr->guard_forced ? ", as DWLEAK_PREEMPT_GUARD says" : "",
			preempt_model_name(tr->preempt.model), tr->preempt.source);
		for (i = 0; i < tr->alloc.nobjs; i++) {
			const struct alloc_object *o = &tr->alloc.objs[i];
			size_t k;

			for (k = 0; k < o->nfuncs; k++)
				fprintf(stderr, "dwleak: stats: probe %s in %s at +%llu (%s): %s\n",
					o->funcs[k].name, o->name, (unsigned long long)o->funcs[k].site_off,
					alloc_kind_frees(o->funcs[k].kind) ? "entry only" : "entry and return",
					o->funcs[k].site_why ? o->funcs[k].site_why : "entry");
		}
		for (i = 0; i < CNT_COUNT; i++)
			if (counter_names[i])
				fprintf(stderr, "dwleak: stats: %s %llu\n", counter_names[i],
					(unsigned long long)b.counters[i]);
	}
	if (final && tr->env->fail_on_leak && !err &&
	    b.r.totals.outstanding_bytes > (uint64_t)tr->env->fail_bytes)
		err = 1;
	built_free(&b);
	return err;
}

/* --- Lifecycle --- */

static int target_setup(struct tracer *tr)
{
	const char *why;
	int err;

	if (tr->env->cmd) {
		err = tables_for_command(tr);
		if (err)
			return err;
		dl_hook_find(tr);
		if (allocator_find_for(tr))
			return -ENOENT;
		return target_spawn(&tr->tgt, tr->env->cmd);
	}
	err = target_check_pid((pid_t)tr->env->pid, &why);
	if (err) {
		if (err == -ESRCH)
			fprintf(stderr, "dwleak: no process with pid %ld\n", tr->env->pid);
		else
			fprintf(stderr, "dwleak: pid %ld %s\n", tr->env->pid, why);
		return err;
	}
	err = target_attach(&tr->tgt, (pid_t)tr->env->pid);
	if (err)
		return err;
	err = allocator_find_for(tr);
	if (err)
		return err;
	return unwinder_add_process(tr->uw, tr->tgt.pid);
}

static void report_exit_status(struct tracer *tr)
{
	int st = tr->tgt.exit_status;

	if (tr->tgt.spawned && !tr->tgt.exited && tr->tgt.release_fd < 0)
		fprintf(stderr, "dwleak: stopped tracing; %s (pid %d) keeps running\n",
			tr->tgt.command, tr->tgt.pid);
	if (!tr->tgt.spawned || !tr->tgt.exited)
		return;
	if (WIFEXITED(st))
		fprintf(stderr, "dwleak: %s exited with status %d\n", tr->tgt.command, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		fprintf(stderr, "dwleak: %s was killed by signal %d (%s)\n", tr->tgt.command,
			WTERMSIG(st), strsignal(WTERMSIG(st)));
}

static int poll_loop(struct tracer *tr)
{
	double deadline = tr->env->duration_s > 0 ? tr->t_traced + tr->env->duration_s : 0;
	double next_report = tr->env->interval_s > 0 ? tr->t_traced + tr->env->interval_s : 0;
	/* a started command maps its libraries right away: look soon, then
	 * back off to the steady interval */
	double scan_every = 0.02;
	double next_scan = tr->t_traced + scan_every;
	double now;
	int err;

	while (!stop_signal) {
		err = ring_buffer__poll(tr->rb, next_scan > now_s() + POLL_MS / 1e3 ? POLL_MS : 10);
		if (err < 0 && err != -EINTR)
			return err;
		allocs_drain(tr); /* alloc_events records come without wakeups */
		now = now_s();
		if (!target_alive(&tr->tgt))
			break;
		if (tr->rescan || now >= next_scan) {
			tr->rescan = false;
			scan_every = scan_every * 2 < RESCAN_INTERVAL_S ? scan_every * 2 : RESCAN_INTERVAL_S;
			next_scan = now + scan_every;
			err = tables_refresh(tr);
			if (err)
				fprintf(stderr, "dwleak: warning: loading new unwind tables failed: %s\n",
					strerror(-err));
			if (tr->resume) {
				tr->resume = false;
				kill(tr->tgt.pid, SIGCONT);
			}
		}
		if (next_report && now >= next_report) {
			next_report += tr->env->interval_s;
			report_write(tr, stdout, false);
		}
		if (deadline && now >= deadline)
			break;
	}
	return 0;
}

static void tracer_cleanup(struct tracer *tr)
{
	attach_close(&tr->probes);
	bpf_link__destroy(tr->mmap_links[0]);
	bpf_link__destroy(tr->mmap_links[1]);
	mmap_regions_free(&tr->regions);
	alloc_table_free(&tr->allocs);
	suppressions_free(&tr->supp);
	ring_buffer__free(tr->rb);
	dwleak_bpf__destroy(tr->skel);
	symbolizer_free(tr->sym);
	unwinder_free(tr->uw);
	table_cache_close(tr->cache);
	if (tr->tgt.spawned && !tr->tgt.exited && tr->tgt.release_fd < 0)
		kill(tr->tgt.pid, SIGCONT); /* never leave it stopped at a _dl_debug_state */
	target_abort(&tr->tgt);
	target_free(&tr->tgt);
	allocator_free(&tr->alloc);
	target_libs_free(tr->lookup);
	free(tr->ld_path);
	free(tr->prev_ids);
	free(tr->prev_bytes);
}

static int suppressions_setup(struct tracer *tr)
{
	char *err = NULL;
	int ret = 0;

	if (!tr->env->no_default_suppressions)
		ret = suppressions_add_defaults(&tr->supp);
	if (!ret && tr->env->suppressions)
		ret = suppressions_load(&tr->supp, tr->env->suppressions, &err);
	if (ret)
		fprintf(stderr, "dwleak: %s\n", err ? err : strerror(-ret));
	free(err);
	return ret;
}

static FILE *output_open(const struct env *env)
{
	FILE *f;

	if (!env->output)
		return stdout;
	f = fopen(env->output, "we");
	if (!f)
		fprintf(stderr, "dwleak: cannot write %s: %s\n", env->output, strerror(errno));
	return f;
}

int trace_run(const struct env *env)
{
	struct tracer tr = { .env = env, .tgt = { .release_fd = -1 } };
	struct unwinder_stats us;
	char what[PATH_MAX * 2 + 64];
	int err, ret = EXIT_USAGE;
	FILE *out = NULL;

	/* phase: checks */
	if (env_check())
		return EXIT_USAGE;
	unsetenv("DEBUGINFOD_URLS"); /* no network lookups behind the user's back */
	libbpf_set_print(libbpf_print);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	tr.t_start = now_s();
	out = output_open(env);
	if (!out)
		return EXIT_USAGE;

	/* phase: suppressions (a bad file is a usage error, before anything runs) */
	if (suppressions_setup(&tr))
		goto out;

	/* phase: target and tables */
	table_cache_open(NULL, &tr.cache);
	err = unwinder_new(tr.cache, env->debug_dirs, &tr.uw);
	err = err ?: symbolizer_new(env->debug_dirs, &tr.sym);
	if (err) {
		fprintf(stderr, "dwleak: cannot set up: %s\n", strerror(-err));
		goto out;
	}
	if (target_setup(&tr))
		goto out;

	/* phase: open, configure, load */
	tr.probes.multi = attach_multi_supported();
	probe_choose(&tr);
	err = guard_choose(&tr);
	if (err)
		goto out;
	err = skel_open(&tr);
	if (err) {
		fprintf(stderr, "dwleak: cannot load the BPF program: %s; the kernel needs BTF, "
				"BPF and uprobes (run with DWLEAK_DEBUG=1 to see the verifier)\n",
			strerror(-err));
		goto out;
	}
	err = unwinder_load_pending(tr.uw);
	if (err < 0) {
		fprintf(stderr, "dwleak: cannot load unwind tables into BPF maps: %s\n", strerror(-err));
		goto out;
	}
	warn_failed_tables(&tr);
	if (!env->cmd && unwinder_publish(tr.uw, tr.tgt.pid, &tr.mappings_dropped) < 0) {
		fprintf(stderr, "dwleak: cannot read the memory maps of pid %d\n", tr.tgt.pid);
		goto out;
	}
	tr.rb = ring_buffer__new(bpf_map__fd(tr.skel->maps.events), on_event, &tr, NULL);
	if (tr.rb && ring_buffer__add(tr.rb, bpf_map__fd(tr.skel->maps.alloc_events), on_alloc_event, &tr)) {
		ring_buffer__free(tr.rb);
		tr.rb = NULL;
	}
	if (!tr.rb) {
		fprintf(stderr, "dwleak: cannot open the BPF ring buffer: %s\n", strerror(errno));
		goto out;
	}

	/* phase: attach, then let a spawned command run */
	if (probes_attach(&tr))
		goto out;
	if (target_release(&tr.tgt)) {
		fprintf(stderr, "dwleak: cannot start %s\n", env->cmd[0]);
		goto out;
	}
	tr.t_traced = now_s();
	unwinder_stats(tr.uw, &us);
	allocator_describe(&tr.alloc, what, sizeof(what));
	fprintf(stderr, "dwleak: tracing pid %d (%s; %u tables, %.0f ms to attach); Ctrl-C to stop\n",
		tr.tgt.pid, what, us.loaded, (tr.t_traced - tr.t_start) * 1e3);

	/* phase: poll */
	err = poll_loop(&tr);
	if (err)
		fprintf(stderr, "dwleak: polling failed: %s; reporting what was seen\n", strerror(-err));
	report_exit_status(&tr);

	/* phase: final report */
	err = report_write(&tr, out, true);
	if (err < 0) {
		fprintf(stderr, "dwleak: cannot write the report: %s\n", strerror(-err));
		goto out;
	}
	ret = err == 1 ? EXIT_LEAK : 0;
out:
	if (out && out != stdout)
		fclose(out);
	tracer_cleanup(&tr);
	return ret;
}
