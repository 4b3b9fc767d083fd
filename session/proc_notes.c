/* What is said of a process when it is first probed (proc_notes.h). */
#include <fcntl.h>
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
