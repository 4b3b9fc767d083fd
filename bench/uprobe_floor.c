/* uprobe_floor: the tiny loader of issue 7 for the uprobe floor.  Starts
 * CMD, attaches EMPTY BPF programs to it (a uprobe on malloc's entry, a
 * uretprobe on malloc, a uprobe on free at FREE_OFFSET bytes past its
 * symbol), lets it run and waits for it: the cost of the traps alone at
 * the sites dwleak picks (dwleak --stats prints them).
 *
 * usage: uprobe_floor BPF_OBJ LIBC FREE_OFFSET -- CMD [ARG...]
 * FREE_OFFSET must lie on an instruction boundary (the caller takes it from
 * dwleak --stats, which decodes free from its symbol start). */
#define _GNU_SOURCE
#include <bpf/libbpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct bpf_link *probe(struct bpf_program *prog, pid_t pid, const char *lib, const char *func,
			      size_t off, int ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = func, .retprobe = ret);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, pid, lib, off, &o);

	if (!l)
		fprintf(stderr, "uprobe_floor: cannot attach to %s+%zu%s\n", func, off, ret ? " (return)" : "");
	return l;
}

int main(int argc, char **argv)
{
	struct bpf_program *entry, *ret;
	struct bpf_object *obj;
	int pfd[2], status;
	size_t free_off;
	char c = 0;
	pid_t pid;

	if (argc < 6 || strcmp(argv[4], "--")) {
		fprintf(stderr, "usage: uprobe_floor BPF_OBJ LIBC FREE_OFFSET -- CMD [ARG...]\n");
		return 2;
	}
	free_off = strtoul(argv[3], NULL, 0);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "uprobe_floor: cannot load %s\n", argv[1]);
		return 2;
	}
	entry = bpf_object__find_program_by_name(obj, "floor_entry");
	ret = bpf_object__find_program_by_name(obj, "floor_return");
	if (!entry || !ret || pipe(pfd))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1 || c != 'g')
			_exit(126); /* the parent failed to attach */
		close(pfd[0]);
		execvp(argv[5], argv + 5);
		perror("uprobe_floor: exec");
		_exit(127);
	}
	close(pfd[0]);
	if (probe(entry, pid, argv[2], "malloc", 0, 0) && probe(ret, pid, argv[2], "malloc", 0, 1) &&
	    probe(entry, pid, argv[2], "free", free_off, 0))
		c = 'g';
	if (write(pfd[1], &c, 1) != 1)
		perror("uprobe_floor: write");
	close(pfd[1]);
	if (waitpid(pid, &status, 0) < 0)
		return 2;
	bpf_object__close(obj);
	if (c != 'g')
		return 2;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
