/* The list of a session's processes (proc.h): searched newest first, a
 * pid the kernel reused belonging to the newer process, with the last hit
 * kept, since records come in runs from one process; and what an image's
 * end or oblivion does over the processes of that image; and the end of
 * the list (programs entries given back, every process freed).  The
 * processes themselves are proc.c's to make and change. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

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

int procs_append(struct procs *ps, struct proc *p)
{
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 16;
		struct proc **g = realloc(ps->v, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		ps->v = g;
		ps->cap = cap;
	}
	ps->v[ps->n++] = p;
	ps->last = p;
	return 0;
}

void procs_remove(struct procs *ps, const struct proc *p)
{
	size_t i;

	for (i = 0; i < ps->n; i++) {
		if (ps->v[i] != p)
			continue;
		/* in order: the first stays the process dwleak attached to first */
		memmove(&ps->v[i], &ps->v[i + 1], (ps->n - i - 1) * sizeof(*ps->v));
		ps->n--;
		break;
	}
	if (ps->last == p)
		ps->last = NULL;
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

/* P left its image (it exited or exec'd; its records are applied and its
 * ledger sealed or emptied).  When it was the image's last process, ends
 * the image: every walk moved into the store, the ids the ledgers of the
 * image's processes name kept, the image's other stacks freed. */
static void keep_id(void *ctx, uint64_t id)
{
	stack_store_keep(ctx, id);
}

void procs_image_leave(const struct proc_services *sv, struct procs *ps, const struct proc *p)
{
	uint32_t img = p->image;
	size_t i;

	if (!stack_store_image_leave(sv->stacks, img))
		return;
	/* no walk of IMG is on its way any more: what it stored is all in
	 * the kernel map or the store */
	sv->stacks_move(sv->ctx);
	/* ids are seeded with the image: only its processes' ledgers name
	 * them (a process that exec'd since has a new ledger, of its new one) */
	for (i = 0; i < ps->n; i++)
		if (ps->v[i]->image == img)
			ledger_stack_ids(&ps->v[i]->ledger, keep_id, sv->stacks);
	stack_store_image_end(sv->stacks, img);
}

void procs_image_forget(const struct proc_services *sv, const struct procs *ps, uint32_t img)
{
	size_t i;

	for (i = 0; i < ps->n && img; i++)
		if (ps->v[i]->image == img)
			return; /* a process of it is still remembered */
	if (img)
		stack_store_image_forget(sv->stacks, img);
}

void proc_release_all(const struct proc_services *sv, struct procs *ps)
{
	size_t i;

	for (i = 0; i < ps->n; i++)
		sv->remove(sv->ctx, &ps->v[i]->pp);
}

void proc_free(struct proc *p)
{
	proc_objects_free(&p->objs);
	allocator_free(&p->alloc);
	preload_sites_free(&p->sites);
	ledger_free(&p->ledger);
	proc_rings_free(&p->rings);
	free(p->maps);
	free(p->warm_maps);
	free(p->command);
	free(p->untraced);
	free(p);
}

void procs_free(struct procs *ps)
{
	size_t i;

	for (i = 0; i < ps->n; i++)
		proc_free(ps->v[i]);
	free(ps->v);
	memset(ps, 0, sizeof(*ps));
}
