/* op_cost: what each kind of operation dwleak's BPF programs make costs
 * inside a real uprobe on this machine (issue 7: "count traps, and see
 * which instructions cost what").  For each operation it starts CMD with
 * bench/op_cost.bpf.c's program on LIB's malloc (a uprobe_multi link, as
 * dwleak attaches its own), lets it run, and reads the program's run time
 * and count from the kernel's BPF statistics (BPF_ENABLE_STATS, on only
 * while it runs).  Prints one line per operation: ns per run, and ns above
 * the empty program (what the operation itself costs; the statistics add
 * their own two clock reads to every run, the same for all).
 *
 * usage: op_cost BPF_OBJ LIB REPS -- CMD [ARG...]
 * Each operation runs REPS times, alternating; the median is printed. */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attach.h"
#include "elf_symbols.h"
#include "op_cost.h"

#define MAX_REPS 15

static const char *const op_names[OP_COUNT] = {
	[OP_EMPTY] = "empty program",
	[OP_PID_TGID] = "bpf_get_current_pid_tgid",
	[OP_TASK_BTF] = "bpf_get_current_task_btf",
	[OP_ATTACH_COOKIE] = "bpf_get_attach_cookie",
	[OP_KTIME] = "bpf_ktime_get_ns",
	[OP_PERCPU_LOOKUP] = "per-CPU array lookup + increment (inlined)",
	[OP_TASK_STORAGE] = "task storage get (with bpf_get_current_task_btf)",
	[OP_RING_RECORD] = "ring buffer record (reserve + submit, no wakeup)",
	[OP_RING_QUERY] = "bpf_ringbuf_query",
	[OP_HASH_UPDATE_DELETE] = "hash map update + delete",
	[OP_READ_8_STACK] = "user read, 8 bytes into the BPF stack",
	[OP_READ_64] = "user read, 64 bytes into a per-CPU buffer",
	[OP_READ_256] = "user read, 256 bytes into a per-CPU buffer",
	[OP_READ_1024] = "user read, 1 KiB into a per-CPU buffer",
	[OP_READ_4096] = "user read, 4 KiB into a per-CPU buffer",
};

/* Runs CMD once with operation OP on malloc at OFF in LIB; *NS = the
 * program's mean run time.  Returns 0, or -1 with a message. */
static int run_op(const char *obj_path, enum op_kind op, const char *lib, uint64_t off, char **cmd, double *ns)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);
	struct bpf_object *obj = bpf_object__open_file(obj_path, NULL);
	struct bpf_program *prog;
	struct bpf_map *ro;
	int pfd[2], status, link = -1, ret = -1;
	size_t sz;
	__u32 *opv;
	char c = 0;
	pid_t pid;

	if (!obj)
		return -1;
	prog = bpf_object__find_program_by_name(obj, "op_run");
	ro = bpf_object__find_map_by_name(obj, ".rodata");
	/* the rodata section also holds the switch's jump table: set op in place */
	opv = ro ? (__u32 *)bpf_map__initial_value(ro, &sz) : NULL;
	if (!prog || !opv || sz < sizeof(*opv))
		goto out;
	*opv = op;
	bpf_program__set_expected_attach_type(prog, (enum bpf_attach_type)DWLEAK_ATTACH_UPROBE_MULTI);
	if (bpf_object__load(obj) || pipe(pfd))
		goto out;
	pid = fork();
	if (pid < 0)
		goto out;
	if (pid == 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1 || c != 'g')
			_exit(126);
		if (!freopen("/dev/null", "w", stdout))
			_exit(126);
		execvp(cmd[0], cmd);
		_exit(127);
	}
	close(pfd[0]);
	link = attach_link_multi(bpf_program__fd(prog), DWLEAK_ATTACH_UPROBE_MULTI, lib, &off, NULL, 1, false, pid);
	c = link >= 0 ? 'g' : 0;
	if (link < 0)
		fprintf(stderr, "op_cost: cannot attach to malloc in %s: %s\n", lib, strerror(-link));
	if (write(pfd[1], &c, 1) != 1)
		perror("op_cost: write");
	close(pfd[1]);
	if (waitpid(pid, &status, 0) < 0 || c != 'g' || !WIFEXITED(status) || WEXITSTATUS(status))
		goto out;
	if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) || !info.run_cnt)
		goto out;
	*ns = (double)info.run_time_ns / (double)info.run_cnt;
	ret = 0;
out:
	if (link >= 0)
		close(link);
	bpf_object__close(obj);
	return ret;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct elf_sym_want w = { .name = "malloc" };
	double ns[OP_COUNT][MAX_REPS], med[OP_COUNT];
	int fd, stats_fd, reps, r, op;

	if (argc < 6 || strcmp(argv[4], "--")) {
		fprintf(stderr, "usage: op_cost BPF_OBJ LIB REPS -- CMD [ARG...]\n");
		return 2;
	}
	reps = atoi(argv[3]);
	if (reps < 1 || reps > MAX_REPS)
		reps = 3;
	fd = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || elf_symbols_find(fd, &w, 1) || !w.found) {
		fprintf(stderr, "op_cost: no malloc in %s\n", argv[2]);
		return 2;
	}
	close(fd);
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "op_cost: cannot enable BPF run-time statistics: %s (needs root)\n", strerror(errno));
		return 2;
	}
	for (r = 0; r < reps; r++) {
		for (op = 0; op < OP_COUNT; op++) {
			if (run_op(argv[1], (enum op_kind)op, argv[2], w.file_off, argv + 5, &ns[op][r])) {
				fprintf(stderr, "op_cost: %s: the run failed\n", op_names[op]);
				return 1;
			}
		}
	}
	close(stats_fd);
	for (op = 0; op < OP_COUNT; op++) {
		qsort(ns[op], (size_t)reps, sizeof(double), cmp_double);
		med[op] = ns[op][reps / 2];
		printf("op_cost: %-52s %7.1f ns/run %+7.1f\n", op_names[op], med[op], med[op] - med[OP_EMPTY]);
	}
	return 0;
}
