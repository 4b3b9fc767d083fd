/* uprobe attachment with a run-time choice: uprobe_multi links where the
 * kernel has them (detaching 17 perf-event uprobes one by one took 3-4 s
 * on these machines; a multi link unregisters all its offsets at once),
 * perf-event links otherwise.  libbpf 1.1 (Debian 12) predates uprobe_multi,
 * so the link is created with the bpf() syscall directly. */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "attach.h"
#include "elf_symbols.h"

#define BPF_F_UPROBE_MULTI_RETURN_FLAG 1u

/* bpf_attr.link_create as the kernel (6.6+) lays it out for uprobe_multi. */
struct link_create_uprobe_multi {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t multi_flags;
	uint32_t pid;
	uint32_t pad;
};

_Static_assert(sizeof(struct link_create_uprobe_multi) == 64, "link_create layout");

int attach_link_multi(int prog_fd, uint32_t attach_type, const char *path, const uint64_t *offs,
		      const uint64_t *cookies, size_t n, bool ret, pid_t pid)
{
	return attach_link_multi_ref(prog_fd, attach_type, path, offs, NULL, cookies, n, ret, pid);
}

int attach_link_multi_ref(int prog_fd, uint32_t attach_type, const char *path, const uint64_t *offs,
			  const uint64_t *ref_ctr_offs, const uint64_t *cookies, size_t n, bool ret, pid_t pid)
{
	struct link_create_uprobe_multi attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = (uint32_t)prog_fd;
	attr.attach_type = attach_type;
	attr.path = (uint64_t)(uintptr_t)path;
	attr.offsets = (uint64_t)(uintptr_t)offs;
	attr.ref_ctr_offsets = (uint64_t)(uintptr_t)ref_ctr_offs;
	attr.cookies = (uint64_t)(uintptr_t)cookies;
	attr.cnt = (uint32_t)n;
	attr.multi_flags = ret ? BPF_F_UPROBE_MULTI_RETURN_FLAG : 0;
	attr.pid = (uint32_t)pid;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

/* The file offset of this program's own function NAME, for probes on
 * ourselves; 0 when it cannot be found. */
static uint64_t self_symbol_off(const char *name)
{
	struct elf_sym_want sym = { .name = name };
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	elf_symbols_find(fd, &sym, 1);
	close(fd);
	return sym.found ? sym.file_off : 0;
}

static int keep_fd(struct attach_set *set, int fd);

/* Closes a feature probe's link in the background: closing a uprobe link
 * waits for RCU grace periods (40-60 ms here), and two probes made every
 * dwleak start that much later (a tenth of a second for a 2 s python
 * run); probes_close waits for it (attach_close_wait) like for any link. */
static void probe_link_close(int link)
{
	struct attach_set set = { .multi = true };

	if (keep_fd(&set, link))
		return; /* closed */
	attach_close_async(&set);
	free(set.fds);
}

/* Loads a program that returns 0 for ATTACH_TYPE and links it to this
 * process's own main(): true when the kernel takes both. */
static bool attach_type_works(uint32_t attach_type)
{
	static const struct bpf_insn ret0[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = (enum bpf_attach_type)attach_type);
	uint64_t off = self_symbol_off("main");
	int prog, link;

	if (!off)
		return false;
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "dwleak_probe", "GPL", ret0, 2, &opts);
	if (prog < 0)
		return false;
	link = attach_link_multi(prog, attach_type, "/proc/self/exe", &off, NULL, 1, false, getpid());
	close(prog);
	if (link < 0)
		return false;
	probe_link_close(link);
	return true;
}

/* Called from a second thread by attach_multi_per_process(): a uprobe on
 * it must fire there.  Not static, so its symbol is in .symtab. */
__attribute__((noinline)) void attach_probe_target(void)
{
	__asm__ volatile("" ::: "memory");
}

static void *probe_thread(void *arg)
{
	(void)arg;
	attach_probe_target();
	return NULL;
}

/* A program that adds 1 to COUNTER_FD's value 0 each time it runs. */
static int counting_prog_load(int counter_fd)
{
	const struct bpf_insn insns[] = {
		/* *(u32 *)(fp - 4) = 0: the key */
		{ .code = BPF_ST | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .off = -4, .imm = 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -4 },
		/* r1 = the map (a two-instruction load) */
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1, .src_reg = BPF_PSEUDO_MAP_FD,
		  .imm = counter_fd },
		{ 0 },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem },
		{ .code = BPF_JMP | BPF_JEQ | BPF_K, .dst_reg = BPF_REG_0, .off = 2, .imm = 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_1, .imm = 1 },
		{ .code = BPF_STX | BPF_ATOMIC | BPF_DW, .dst_reg = BPF_REG_0, .src_reg = BPF_REG_1, .imm = BPF_ADD },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = (enum bpf_attach_type)DWLEAK_ATTACH_UPROBE_MULTI);

	return bpf_prog_load(BPF_PROG_TYPE_KPROBE, "dwleak_probe", "GPL", insns,
			     sizeof(insns) / sizeof(insns[0]), &opts);
}

bool attach_multi_supported(void)
{
	/* Linux 6.10 has uprobe_multi links (6.6) with their filter by
	 * process fixed: trying would cost every start a link whose creation
	 * waits for an RCU grace period (~15 ms here).  Before, it is tried;
	 * attach_multi_per_process() makes the link itself: no second probe */
	if (kernel_at_least(6, 10))
		return true;
	return attach_multi_per_process();
}

/*
 * True when a uprobe_multi link made for a pid runs its program in every
 * thread of that process.  Before Linux 6.10 (and its stable backports of
 * "bpf: fix multi-uprobe PID filtering logic") it ran only in the one
 * thread whose id was given: dwleak would miss every other thread's
 * allocations.  Tried for real: a link on this process's
 * attach_probe_target(), called from a second thread.
 */
bool attach_multi_per_process(void)
{
	uint64_t runs = 0, off = self_symbol_off("attach_probe_target");
	int map = -1, prog = -1, link = -1;
	uint32_t key = 0;
	pthread_t t;

	if (!off)
		return false;
	map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "dwleak_probe", sizeof(key), sizeof(runs), 1, NULL);
	if (map < 0)
		return false;
	prog = counting_prog_load(map);
	if (prog >= 0)
		link = attach_link_multi(prog, DWLEAK_ATTACH_UPROBE_MULTI, "/proc/self/exe", &off, NULL, 1,
					 false, getpid());
	if (link >= 0) {
		if (!pthread_create(&t, NULL, probe_thread, NULL))
			pthread_join(t, NULL);
		bpf_map_lookup_elem(map, &key, &runs);
		probe_link_close(link);
	}
	if (prog >= 0)
		close(prog);
	close(map);
	return runs == 1;
}

bool kernel_at_least(int major, int minor)
{
	struct utsname u;
	int a = 0, b = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &a, &b) != 2)
		return false;
	return a > major || (a == major && b >= minor);
}

bool attach_session_supported(void)
{
	return attach_type_works(DWLEAK_ATTACH_UPROBE_SESSION);
}

void attach_prepare(struct attach_set *set, struct bpf_program *prog)
{
	if (set->multi)
		bpf_program__set_expected_attach_type(prog,
			(enum bpf_attach_type)DWLEAK_ATTACH_UPROBE_MULTI);
}

void attach_prepare_session(struct bpf_program *prog)
{
	bpf_program__set_expected_attach_type(prog, (enum bpf_attach_type)DWLEAK_ATTACH_UPROBE_SESSION);
}


static int keep_fd(struct attach_set *set, int fd)
{
	int *grown = realloc(set->fds, (set->nfds + 1) * sizeof(*grown));

	if (!grown) {
		close(fd);
		return -ENOMEM;
	}
	set->fds = grown;
	set->fds[set->nfds++] = fd;
	return 0;
}

static int keep_link(struct attach_set *set, struct bpf_link *l)
{
	struct bpf_link **grown = realloc(set->links, (set->nlinks + 1) * sizeof(*grown));

	if (!grown) {
		bpf_link__destroy(l);
		return -ENOMEM;
	}
	set->links = grown;
	set->links[set->nlinks++] = l;
	return 0;
}

int attach_uprobes(struct attach_set *set, struct bpf_program *prog, const char *path, pid_t pid,
		   const uint64_t *offs, const uint64_t *cookies, size_t n, bool ret)
{
	size_t first = set->nlinks, i;
	struct bpf_link *l;
	int fd, err;

	if (set->multi) {
		fd = attach_link_multi(bpf_program__fd(prog), DWLEAK_ATTACH_UPROBE_MULTI, path, offs, cookies, n,
				       ret, pid);
		return fd < 0 ? fd : keep_fd(set, fd);
	}
	for (i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret,
			    .bpf_cookie = cookies ? cookies[i] : 0);

		l = bpf_program__attach_uprobe_opts(prog, pid, path, offs[i], &opts);
		err = l ? keep_link(set, l) : -errno;
		if (err)
			goto fail;
	}
	return 0;
fail:
	while (set->nlinks > first)
		bpf_link__destroy(set->links[--set->nlinks]);
	return err;
}

int attach_usdt(struct attach_set *set, struct bpf_program *prog, const char *path, pid_t pid, uint64_t off,
		uint64_t ref_ctr_off, uint64_t cookie)
{
	struct bpf_link *l;
	int fd;

	if (set->multi) {
		fd = attach_link_multi_ref(bpf_program__fd(prog), DWLEAK_ATTACH_UPROBE_MULTI, path, &off,
					   ref_ctr_off ? &ref_ctr_off : NULL, &cookie, 1, false, pid);
		return fd < 0 ? fd : keep_fd(set, fd);
	}
	{
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = (size_t)ref_ctr_off, .bpf_cookie = cookie);

		l = bpf_program__attach_uprobe_opts(prog, pid, path, off, &opts);
	}
	return l ? keep_link(set, l) : -errno;
}

void attach_truncate(struct attach_set *set, size_t nfds, size_t nlinks)
{
	while (set->nfds > nfds)
		close(set->fds[--set->nfds]);
	while (set->nlinks > nlinks)
		bpf_link__destroy(set->links[--set->nlinks]);
}

static void *close_fd(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

/*
 * Closes the uprobe_multi link fds at once, one thread each: closing one
 * waits for the kernel's RCU grace periods (uprobe_unregister_sync, 30-70
 * ms here), so one after the other they added ~0.2 s to every exit and
 * detach.  A thread that cannot be made closes its fd in line.
 */
static void fds_close(int *fds, size_t n)
{
	pthread_t *t = calloc(n ? n : 1, sizeof(*t));
	bool *started = calloc(n ? n : 1, sizeof(*started));
	size_t i;

	for (i = 0; i < n; i++) {
		if (t && started && !pthread_create(&t[i], NULL, close_fd, (void *)(intptr_t)fds[i]))
			started[i] = true;
		else
			close(fds[i]);
	}
	for (i = 0; i < n; i++)
		if (started && started[i])
			pthread_join(t[i], NULL);
	free(t);
	free(started);
}

void attach_close(struct attach_set *set)
{
	size_t i;

	fds_close(set->fds, set->nfds);
	for (i = 0; i < set->nlinks; i++)
		bpf_link__destroy(set->links[i]);
	free(set->fds);
	free(set->links);
	set->fds = NULL;
	set->links = NULL;
	set->nfds = set->nlinks = 0;
}

/* Sets being closed in the background (attach_close_async). */
static pthread_mutex_t closers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t closers_done = PTHREAD_COND_INITIALIZER;
static unsigned int closers;

static void *close_set(void *arg)
{
	struct attach_set *set = arg;

	attach_close(set);
	free(set);
	pthread_mutex_lock(&closers_lock);
	if (--closers == 0)
		pthread_cond_broadcast(&closers_done);
	pthread_mutex_unlock(&closers_lock);
	return NULL;
}

void attach_close_async(struct attach_set *set)
{
	struct attach_set *moved = malloc(sizeof(*moved));
	pthread_attr_t attr;
	pthread_t t;
	bool started = false;

	if (moved && !pthread_attr_init(&attr)) {
		*moved = *set;
		pthread_mutex_lock(&closers_lock);
		closers++;
		pthread_mutex_unlock(&closers_lock);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		started = !pthread_create(&t, &attr, close_set, moved);
		pthread_attr_destroy(&attr);
		if (!started) {
			pthread_mutex_lock(&closers_lock);
			closers--;
			pthread_mutex_unlock(&closers_lock);
		}
	}
	if (!started) {
		free(moved);
		attach_close(set);
		return;
	}
	set->fds = NULL;
	set->links = NULL;
	set->nfds = set->nlinks = 0;
}

void attach_close_wait(void)
{
	pthread_mutex_lock(&closers_lock);
	while (closers)
		pthread_cond_wait(&closers_done, &closers_lock);
	pthread_mutex_unlock(&closers_lock);
}

int attach_session(struct attach_set *set, struct bpf_program *prog, const char *path, pid_t pid,
		   const uint64_t *offs, const uint64_t *cookies, size_t n)
{
	int fd = attach_link_multi(bpf_program__fd(prog), DWLEAK_ATTACH_UPROBE_SESSION, path, offs, cookies,
				   n, false, pid);

	return fd < 0 ? fd : keep_fd(set, fd);
}
