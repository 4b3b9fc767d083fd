/* Programs of testdata/ run under ptrace to known points and stopped
 * there (a breakpoint at a symbol's entry, or asleep), with the tables
 * dwleak compiles for their objects, and libdw's unwind of the stopped
 * thread as the oracle: shared by the tests that walk such stacks with
 * dwleak's tables (test_unwind_step: the step on the child's memory;
 * test_unwinder_image: the preload library's walk over the image
 * unwinder_image_build makes).  Static inline: each test uses a part. */
#ifndef DWLEAK_TEST_STOPPED_CHILD_H
#define DWLEAK_TEST_STOPPED_CHILD_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>

#include "check.h"
#include "dwleak.h"
#include "elf_symbols.h"
#include "proc_maps.h"
#include "unwinder.h"

#define MAX_FRAMES DWLEAK_MAX_FRAMES

/* A stopped child: its objects' tables and its executable mappings. */
struct child {
	pid_t pid;
	const char *path;
	struct unwinder *u;
	struct proc_map *maps;
	size_t nmaps;
};


/* --- The oracle: libdw's unwind of the same stopped thread --------------- */

struct oracle {
	Dwfl *dwfl;
	__u64 pc[MAX_FRAMES];
	bool activation[MAX_FRAMES];
	unsigned n;
	int rc; /* dwfl_getthread_frames: 0 when it reached the outermost frame */
	char err[256];
};

static inline int oracle_frame(Dwfl_Frame *state, void *arg)
{
	struct oracle *o = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(state, &pc, &activation))
		return DWARF_CB_ABORT;
	o->pc[o->n] = pc;
	o->activation[o->n] = activation;
	return ++o->n < MAX_FRAMES ? DWARF_CB_OK : DWARF_CB_ABORT;
}

static inline void oracle_walk(pid_t pid, struct oracle *o)
{
	static const Dwfl_Callbacks cb = {
		.find_elf = dwfl_linux_proc_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
	};

	memset(o, 0, sizeof(*o));
	o->dwfl = dwfl_begin(&cb);
	CHECK(o->dwfl);
	CHECK(dwfl_linux_proc_report(o->dwfl, pid) == 0 && dwfl_report_end(o->dwfl, NULL, NULL) == 0);
	CHECK(dwfl_linux_proc_attach(o->dwfl, pid, true) == 0, "libdw attach: %s", dwfl_errmsg(-1));
	o->rc = dwfl_getthread_frames(o->dwfl, pid, oracle_frame, o);
	if (o->rc)
		snprintf(o->err, sizeof(o->err), "%s", dwfl_errmsg(-1));
}

static inline const char *oracle_name(const struct oracle *o, __u64 pc, bool activation)
{
	Dwarf_Addr a = activation ? pc : pc - 1;
	Dwfl_Module *m = dwfl_addrmodule(o->dwfl, a);
	const char *name = m ? dwfl_module_addrname(m, a) : NULL;

	return name ? name : "??";
}


/* --- Running the child to a known point ---------------------------------- */

static inline void child_maps(struct child *c)
{
	proc_maps_free(c->maps, c->nmaps);
	CHECK(proc_maps_read(c->pid, true, &c->maps, &c->nmaps) == 0);
	CHECK(unwinder_add_process(c->u, c->pid) == 0);
}

/* Starts PATH (ARGV) traced, stopped at its exec. */
static inline void child_start(struct child *c, const char *path, char *const argv[])
{
	int st;

	memset(c, 0, sizeof(*c));
	c->path = path;
	CHECK(access(path, X_OK) == 0, "%s is missing (make testdata)", path);
	CHECK(unwinder_new(NULL, NULL, &c->u) == 0);
	c->pid = fork();
	CHECK(c->pid >= 0);
	if (c->pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execv(path, argv);
		_exit(127);
	}
	CHECK(waitpid(c->pid, &st, 0) == c->pid && WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP,
	      "%s did not stop at its exec (status %#x)", path, st);
}

static inline void child_end(struct child *c)
{
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
	proc_maps_free(c->maps, c->nmaps);
	unwinder_free(c->u);
}

/* Where SYMBOL of the mapped object whose path ends with OBJ is in the
 * child. */
static inline __u64 child_symbol(struct child *c, const char *obj, const char *symbol)
{
	struct elf_sym_want want = { .name = symbol };
	size_t i, len = strlen(obj);
	__u64 dev, ino;
	int fd;

	child_maps(c);
	for (i = 0; i < c->nmaps; i++) {
		size_t plen = strlen(c->maps[i].path);

		if (plen >= len && !strcmp(c->maps[i].path + plen - len, obj))
			break;
	}
	CHECK(i < c->nmaps, "%s is not mapped in %s", obj, c->path);
	fd = proc_map_open(c->pid, &c->maps[i]);
	CHECK(fd >= 0 && elf_symbols_find(fd, &want, 1) == 0 && want.found, "%s in %s", symbol, obj);
	close(fd);
	dev = c->maps[i].dev;
	ino = c->maps[i].ino;
	for (i = 0; i < c->nmaps; i++) {
		const struct proc_map *m = &c->maps[i];

		if (m->dev == dev && m->ino == ino && want.file_off >= m->offset &&
		    want.file_off < m->offset + m->end - m->start)
			return m->start + want.file_off - m->offset;
	}
	CHECK(0, "%s: %s is not in an executable mapping", obj, symbol);
	return 0;
}

/* Runs the child to the entry of SYMBOL in OBJ (a breakpoint), passing on
 * the signals it gets meanwhile, and leaves it stopped there with its
 * registers in *G as if the breakpoint had never been. */
static inline void run_to(struct child *c, const char *obj, const char *symbol, struct user_regs_struct *g)
{
	__u64 at = child_symbol(c, obj, symbol);
	long word;
	int st, sig = 0;

	errno = 0;
	word = ptrace(PTRACE_PEEKTEXT, c->pid, (void *)at, 0);
	CHECK(errno == 0);
	CHECK(ptrace(PTRACE_POKETEXT, c->pid, (void *)at, (void *)((word & ~0xffl) | 0xcc)) == 0);
	for (;;) {
		CHECK(ptrace(PTRACE_CONT, c->pid, 0, (void *)(long)sig) == 0);
		CHECK(waitpid(c->pid, &st, 0) == c->pid && WIFSTOPPED(st), "%s ended before %s", c->path, symbol);
		sig = WSTOPSIG(st);
		if (sig != SIGTRAP)
			continue; /* its own signals (sig_in_malloc's SIGSYS) */
		CHECK(ptrace(PTRACE_GETREGS, c->pid, 0, g) == 0);
		CHECK(g->rip == at + 1, "a SIGTRAP at %#llx, not at %s", g->rip, symbol);
		break;
	}
	CHECK(ptrace(PTRACE_POKETEXT, c->pid, (void *)at, (void *)word) == 0);
	g->rip = at;
	CHECK(ptrace(PTRACE_SETREGS, c->pid, 0, g) == 0);
	child_maps(c);
}

/* Runs the child until it sleeps in clock_nanosleep, and stops it there. */
static inline void run_to_sleep(struct child *c, struct user_regs_struct *g)
{
	char path[64], buf[64] = "";
	int st, tries;

	CHECK(ptrace(PTRACE_CONT, c->pid, 0, 0) == 0);
	snprintf(path, sizeof(path), "/proc/%d/syscall", c->pid);
	for (tries = 0; tries < 1000 && atoi(buf) != SYS_clock_nanosleep; tries++) {
		FILE *f = fopen(path, "re");

		usleep(5000);
		CHECK(f && fgets(buf, sizeof(buf), f));
		fclose(f);
	}
	CHECK(atoi(buf) == SYS_clock_nanosleep, "%s never slept", c->path);
	kill(c->pid, SIGSTOP);
	CHECK(waitpid(c->pid, &st, 0) == c->pid && WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
	CHECK(ptrace(PTRACE_GETREGS, c->pid, 0, g) == 0);
	child_maps(c);
}


static inline char *testdata_path(const char *name)
{
	const char *td = getenv("TESTDATA");
	char *path;

	CHECK(asprintf(&path, "%s/%s", td ? td : "build/testdata", name) > 0);
	return path;
}

#endif
