/* The traced processes: a growing list, searched newest first (a pid the
 * kernel reused belongs to the newer process), with the last hit kept,
 * since records come in runs from one process. */
#include <stdlib.h>
#include <string.h>

#include "procs.h"

struct proc *procs_find(struct procs *ps, pid_t pid)
{
	size_t i;

	if (ps->last && ps->last->pid == pid)
		return ps->last;
	for (i = ps->n; i-- > 0;) {
		if (ps->v[i]->pid == pid)
			return ps->last = ps->v[i];
	}
	return NULL;
}

struct proc *procs_add(struct procs *ps, pid_t pid, pid_t parent)
{
	struct proc *p;

	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 16;
		struct proc **g = realloc(ps->v, cap * sizeof(*g));

		if (!g)
			return NULL;
		ps->v = g;
		ps->cap = cap;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->parent = parent;
	p->slot = DWLEAK_NO_SLOT;
	ps->v[ps->n++] = p;
	return ps->last = p;
}

size_t procs_alive(const struct procs *ps)
{
	size_t i, n = 0;

	for (i = 0; i < ps->n; i++)
		n += !ps->v[i]->exited;
	return n;
}

size_t procs_untraced(const struct procs *ps)
{
	size_t i, n = 0;

	for (i = 0; i < ps->n; i++)
		n += ps->v[i]->untraced != NULL;
	return n;
}

void procs_free(struct procs *ps)
{
	size_t i;

	for (i = 0; i < ps->n; i++) {
		struct proc *p = ps->v[i];

		proc_objects_free(&p->objs);
		allocator_free(&p->alloc);
		preload_sites_free(&p->sites);
		ledger_free(&p->ledger);
		free(p->maps);
		free(p->command);
		free(p->untraced);
		free(p);
	}
	free(ps->v);
	memset(ps, 0, sizeof(*ps));
}
