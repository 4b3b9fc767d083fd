/* uprobe_floor: the tiny loader of issue 7 for the floor rows.  Starts
 * CMD, attaches BPF programs to it at the probe sites dwleak uses (each
 * PROBE: LIB:SYMBOL:OFFSET:call for an allocation function, probed at its
 * entry and return, or LIB:SYMBOL:OFFSET:entry for a free function, probed
 * OFFSET bytes past its symbol), lets it run and waits for it.  MODE says
 * which programs, attached how:
 *   multi    empty programs, uprobe_multi links (what dwleak uses by default)
 *   session  an empty uprobe session program on the allocation functions
 *            (dwleak with --sample-bytes), uprobe_multi on the free ones
 *   perf     empty programs, perf-event uprobes (kernels without uprobe_multi)
 *   min      the exact-accounting minimum (uprobe_floor.bpf.c), multi links
 *   min-session  the same minimum as one uprobe session program
 * so the traps are the same as dwleak's and only the programs differ.
 * bench/ensure_tools.sh builds the PROBE list from dwleak --stats.
 *
 * usage: uprobe_floor BPF_OBJ MODE PROBE... -- CMD [ARG...]
 * An OFFSET must lie on an instruction boundary (dwleak --stats reports
 * sites it found by decoding the function from its symbol start). */
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

#include "elf_symbols.h"
#include "attach.h"

/* attach_link_multi (bpf/attach.c), saying what failed. */
static int link_multi(struct bpf_program *prog, uint32_t type, const char *path, const uint64_t *offs, size_t n,
		      bool ret, pid_t pid)
{
	int fd = attach_link_multi(bpf_program__fd(prog), type, path, offs, NULL, n, ret, pid);

	if (fd < 0)
		fprintf(stderr, "uprobe_floor: cannot attach %zu uprobe(s) in %s: %s\n", n, path, strerror(-fd));
	return fd;
}

static bool link_perf(struct bpf_program *prog, const char *path, uint64_t off, bool ret, pid_t pid)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret);

	if (bpf_program__attach_uprobe_opts(prog, pid, path, off, &o))
		return true;
	fprintf(stderr, "uprobe_floor: cannot attach at %s+%#llx\n", path, (unsigned long long)off);
	return false;
}

struct probe {
	char *lib;
	uint64_t off; /* file offset of the site */
	bool call;    /* entry and return; else entry only */
};

/* Parses "LIB:SYMBOL:OFFSET:call|entry" into P (ARG is modified). */
static int probe_parse(char *arg, struct probe *p)
{
	char *kind = strrchr(arg, ':'), *off, *sym;
	struct elf_sym_want w = { 0 };
	int fd;

	if (!kind)
		return -EINVAL;
	*kind++ = 0;
	off = strrchr(arg, ':');
	if (!off)
		return -EINVAL;
	*off++ = 0;
	sym = strrchr(arg, ':');
	if (!sym)
		return -EINVAL;
	*sym++ = 0;
	p->lib = arg;
	p->call = !strcmp(kind, "call");
	if (!p->call && strcmp(kind, "entry"))
		return -EINVAL;
	w.name = sym;
	fd = open(p->lib, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf_symbols_find(fd, &w, 1);
	close(fd);
	if (!w.found || !w.file_off)
		return -ENOENT;
	p->off = w.file_off + strtoull(off, NULL, 0);
	return 0;
}

static int ignore_record(void *ctx, void *data, size_t size)
{
	(void)ctx, (void)data, (void)size;
	return 0;
}

/*
 * Attaches the programs MODE uses at the N probes P (all in one file) of
 * process PID: as dwleak does, one uprobe_multi link per program and file
 * (registering and, at exit, unregistering a link costs milliseconds, which
 * the macro benchmark's wall times would count).
 */
static bool attach_lib(struct bpf_object *obj, const char *mode, const struct probe *p, size_t n, pid_t pid)
{
	bool min = !strncmp(mode, "min", 3), perf = !strcmp(mode, "perf");
	struct bpf_program *entry = bpf_object__find_program_by_name(obj, min ? "min_entry" : "floor_entry");
	struct bpf_program *ret = bpf_object__find_program_by_name(obj, min ? "min_return" : "floor_return");
	struct bpf_program *fr = min ? bpf_object__find_program_by_name(obj, "min_free") : entry;
	struct bpf_program *sess = bpf_object__find_program_by_name(obj, "floor_session");
	uint64_t calls[n ? n : 1], frees[n ? n : 1];
	size_t i, nc = 0, nf = 0;
	bool ok = true;

	for (i = 0; i < n; i++) {
		if (p[i].call)
			calls[nc++] = p[i].off;
		else
			frees[nf++] = p[i].off;
	}
	if (perf) {
		/* return probes first: an entry must not wait for a return that was never set up */
		for (i = 0; ok && i < nc; i++)
			ok = link_perf(ret, p->lib, calls[i], true, pid) && link_perf(entry, p->lib, calls[i], false, pid);
		for (i = 0; ok && i < nf; i++)
			ok = link_perf(fr, p->lib, frees[i], false, pid);
		return ok;
	}
	if (nc && !strcmp(mode, "min-session"))
		ok = link_multi(bpf_object__find_program_by_name(obj, "min_session"), DWLEAK_ATTACH_UPROBE_SESSION, p->lib,
				calls, nc, false, pid) >= 0;
	else if (nc && !strcmp(mode, "session"))
		ok = link_multi(sess, DWLEAK_ATTACH_UPROBE_SESSION, p->lib, calls, nc, false, pid) >= 0;
	else if (nc)
		ok = link_multi(ret, DWLEAK_ATTACH_UPROBE_MULTI, p->lib, calls, nc, true, pid) >= 0 &&
		     link_multi(entry, DWLEAK_ATTACH_UPROBE_MULTI, p->lib, calls, nc, false, pid) >= 0;
	if (ok && nf)
		ok = link_multi(fr, DWLEAK_ATTACH_UPROBE_MULTI, p->lib, frees, nf, false, pid) >= 0;
	return ok;
}

/* Loads the programs MODE uses, attached the way MODE says. */
static struct bpf_object *load(const char *path, const char *mode)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	bool min = !strcmp(mode, "min"), min_sess = !strcmp(mode, "min-session");
	bool perf = !strcmp(mode, "perf"), sess = !strcmp(mode, "session");
	struct bpf_program *p;

	if (!obj)
		return NULL;
	bpf_object__for_each_program(p, obj) {
		const char *name = bpf_program__name(p);
		bool wanted = min ? !strcmp(name, "min_entry") || !strcmp(name, "min_return") || !strcmp(name, "min_free")
			    : min_sess ? !strcmp(name, "min_session") || !strcmp(name, "min_free")
			    : sess ? !strcmp(name, "floor_session") || !strcmp(name, "floor_entry")
				   : !strcmp(name, "floor_entry") || !strcmp(name, "floor_return");
		bool session = !strcmp(name, "floor_session") || !strcmp(name, "min_session");

		bpf_program__set_autoload(p, wanted);
		if (!perf)
			bpf_program__set_expected_attach_type(p, (enum bpf_attach_type)(
				session ? DWLEAK_ATTACH_UPROBE_SESSION : DWLEAK_ATTACH_UPROBE_MULTI));
	}
	if (bpf_object__load(obj)) {
		bpf_object__close(obj);
		return NULL;
	}
	return obj;
}

int main(int argc, char **argv)
{
	struct ring_buffer *rb = NULL;
	struct probe *probes;
	int pfd[2], status = 0, i, j, n, dash;
	struct bpf_object *obj;
	const char *mode;
	bool min;
	char c = 0;
	pid_t pid;

	for (dash = 3; dash < argc && strcmp(argv[dash], "--"); dash++)
		;
	if (argc < 4 || dash + 1 >= argc) {
		fprintf(stderr, "usage: uprobe_floor BPF_OBJ multi|session|perf|min|min-session LIB:SYMBOL:OFFSET:call|entry... "
				"-- CMD [ARG...]\n");
		return 2;
	}
	mode = argv[2];
	min = !strncmp(mode, "min", 3);
	n = dash - 3;
	probes = calloc((size_t)n, sizeof(*probes));
	if (!probes)
		return 2;
	for (i = 0; i < n; i++) {
		if (probe_parse(argv[3 + i], &probes[i])) {
			fprintf(stderr, "uprobe_floor: bad probe '%s' (want LIB:SYMBOL:OFFSET:call|entry, "
					"SYMBOL defined in LIB)\n", argv[3 + i]);
			return 2;
		}
	}
	obj = load(argv[1], mode);
	if (!obj) {
		fprintf(stderr, "uprobe_floor: cannot load %s for mode %s\n", argv[1], mode);
		return 2;
	}
	if (min)
		rb = ring_buffer__new(bpf_map__fd(bpf_object__find_map_by_name(obj, "min_records")), ignore_record,
				      NULL, NULL);
	if ((min && !rb) || pipe(pfd))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1 || c != 'g')
			_exit(126); /* the parent failed to attach */
		close(pfd[0]);
		execvp(argv[dash + 1], argv + dash + 1);
		perror("uprobe_floor: exec");
		_exit(127);
	}
	close(pfd[0]);
	/* the probes of one file are given together (dwleak --stats lists
	 * them file by file) */
	c = 'g';
	for (i = 0; i < n && c == 'g'; i = j) {
		for (j = i; j < n && !strcmp(probes[j].lib, probes[i].lib); j++)
			;
		if (!attach_lib(obj, mode, &probes[i], (size_t)(j - i), pid))
			c = 0;
	}
	if (write(pfd[1], &c, 1) != 1)
		perror("uprobe_floor: write");
	close(pfd[1]);
	/* the minimum's records are read as dwleak reads its own: drained
	 * on a timer, without wakeups */
	while (waitpid(pid, &status, rb ? WNOHANG : 0) == 0) {
		ring_buffer__consume(rb);
		usleep(10000);
	}
	ring_buffer__free(rb);
	bpf_object__close(obj);
	free(probes);
	if (c != 'g')
		return 2;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
