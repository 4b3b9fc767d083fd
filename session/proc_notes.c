/* What is said of a process when it is first probed (proc_notes.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "elf_symbols.h"
#include "proc_notes.h"

/* Says which allocator functions P calls that are not probed. */
static void not_covered_say(const struct proc_services *sv, const struct proc *p)
{
	size_t i;

	for (i = 0; i < p->alloc.nnot_covered; i++)
		session_say(sv->log, SESSION_WARNING, "pid %d calls %s, which dwleak does not probe: what it allocates is not traced",
		    p->pid, p->alloc.not_covered[i]);
}

/* A Go program's own heap is the Go runtime's: nothing of it passes
 * through malloc.  Says so once per program, the first time it is probed. */
static void go_heap_say(const struct proc_services *sv, const struct proc *p)
{
	int fd = p->objs.n ? open(p->objs.paths[0], O_RDONLY | O_CLOEXEC) : -1;

	if (fd < 0)
		return;
	if (elf_has_section(fd, ".go.buildinfo") || elf_has_section(fd, ".gopclntab"))
		session_say(sv->log, SESSION_NOTE, "pid %d (%s) is a Go program: its Go heap is managed by the Go runtime and is "
		    "not traced; what its C code (cgo) allocates is", p->pid, p->objs.names[0]);
	close(fd);
}

void proc_notes_probed(const struct proc_services *sv, const struct proc *p)
{
	not_covered_say(sv, p);
	go_heap_say(sv, p);
}

void proc_notes_checked(const struct proc_services *sv, const struct proc *p, const char *when)
{
	int err = p->check_err;

	if (err && err != -ESRCH)
		session_say(sv->log, SESSION_WARNING, "the leak check of pid %d (%s) %s failed: %s%s", p->pid,
			    p->command, when,
			    err == -ENOTSUP ? "it is sampled and traced with uprobes, so no index of its blocks exists"
			    : p->check.no_index[0] ? p->check.no_index
						   : strerror(-err),
			    err == -EPERM ? " (another tracer, a debugger, holds it: see TracerPid in /proc/PID/status)"
			    : p->check.no_index[0] ? " (the process wrote over the index the preload library keeps in "
						     "its memory: its blocks are not classified)"
						   : "");
	/* what makes a verdict less sure is said, not only counted */
	if (!err && p->check.read.unreadable_bytes)
		session_say(sv->log, SESSION_WARNING, "the leak check of pid %d (%s) could not read %llu bytes of its "
			    "memory: a pointer held only there was missed, so blocks may be called lost that are not "
			    "(--stats has the details)", p->pid, p->command,
			    (unsigned long long)p->check.read.unreadable_bytes);
	if (!err && p->check.scan.overlapping)
		session_say(sv->log, SESSION_WARNING, "the leak check of pid %d (%s) found %llu blocks overlapping "
			    "others: frees were missed (dropped events?), each lower block was cut short", p->pid,
			    p->command, (unsigned long long)p->check.scan.overlapping);
}
