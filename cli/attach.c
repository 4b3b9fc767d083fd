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
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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

static int link_uprobe_multi(int prog_fd, uint32_t attach_type, const char *path, const uint64_t *offs,
			     const uint64_t *cookies, size_t n, bool ret, pid_t pid)
{
	struct link_create_uprobe_multi attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = (uint32_t)prog_fd;
	attr.attach_type = attach_type;
	attr.path = (uint64_t)(uintptr_t)path;
	attr.offsets = (uint64_t)(uintptr_t)offs;
	attr.cookies = (uint64_t)(uintptr_t)cookies;
	attr.cnt = (uint32_t)n;
	attr.multi_flags = ret ? BPF_F_UPROBE_MULTI_RETURN_FLAG : 0;
	attr.pid = (uint32_t)pid;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
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
	struct elf_sym_want main_sym = { .name = "main" };
	int prog, link, fd;
	uint64_t off;

	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	elf_symbols_find(fd, &main_sym, 1);
	close(fd);
	if (!main_sym.found || !main_sym.file_off)
		return false;
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "dwleak_probe", "GPL", ret0, 2, &opts);
	if (prog < 0)
		return false;
	off = main_sym.file_off;
	link = link_uprobe_multi(prog, attach_type, "/proc/self/exe", &off, NULL, 1, false, getpid());
	close(prog);
	if (link < 0)
		return false;
	close(link);
	return true;
}

bool attach_multi_supported(void)
{
	return attach_type_works(DWLEAK_ATTACH_UPROBE_MULTI);
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
		fd = link_uprobe_multi(bpf_program__fd(prog), DWLEAK_ATTACH_UPROBE_MULTI, path, offs, cookies, n,
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

void attach_close(struct attach_set *set)
{
	size_t i;

	for (i = 0; i < set->nfds; i++)
		close(set->fds[i]);
	for (i = 0; i < set->nlinks; i++)
		bpf_link__destroy(set->links[i]);
	free(set->fds);
	free(set->links);
	set->fds = NULL;
	set->links = NULL;
	set->nfds = set->nlinks = 0;
}

int attach_session(struct attach_set *set, struct bpf_program *prog, const char *path, pid_t pid,
		   const uint64_t *offs, const uint64_t *cookies, size_t n)
{
	int fd = link_uprobe_multi(bpf_program__fd(prog), DWLEAK_ATTACH_UPROBE_SESSION, path, offs, cookies,
				   n, false, pid);

	return fd < 0 ? fd : keep_fd(set, fd);
}
