/* Naming the live trace's frames: stack id -> the walk in the stack
 * store; runtime pc -> the mapping the programs recorded -> the
 * unwinder's object for its file -> ELF address -> symbolizer (functions,
 * inlined calls, lines). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

static int walk_of(void *ctx, uint64_t id, struct stack_trace *out)
{
	struct stack_names *n = ctx;

	return stack_store_get(n->stacks, id, out);
}

static const struct probes_mapping *mapping_find(const struct stack_names *n, uint64_t pc)
{
	size_t i;

	for (i = 0; i < n->nmaps; i++)
		if (pc >= n->maps[i].start && pc < n->maps[i].end)
			return &n->maps[i];
	return NULL;
}

static int name_of(void *ctx, struct frame_arena *a, uint64_t pc, bool return_addr)
{
	struct stack_names *n = ctx;
	const struct probes_mapping *m = mapping_find(n, pc);
	struct unwind_object *o = m ? unwinder_find(n->uw, &m->file) : NULL;

	if (!o)
		return frame_arena_add_pc(a, n->sym, NULL, -1, NULL, pc, pc, return_addr);
	return frame_arena_add_pc(a, n->sym, o->path, o->fd, o->build_id[0] ? o->build_id : NULL, pc,
				  unwind_object_elf_addr(o, m->start, m->pgoff, pc), return_addr);
}

int stack_names_open(struct stack_names *n, const struct stack_store *stacks, const struct probes *p,
		     const struct unwinder *uw, struct symbolizer *sym, uint32_t tgid, bool kept,
		     const struct probes_mapping *maps, size_t n_maps, struct stack_source *src)
{
	int err = 0;

	memset(n, 0, sizeof(*n));
	n->stacks = stacks;
	n->uw = uw;
	n->sym = sym;
	*src = (struct stack_source){ .ctx = n, .walk = walk_of, .name = name_of };
	if (kept) {
		n->maps = maps;
		n->nmaps = n_maps;
	} else {
		err = probes_mappings(p, tgid, &n->own_maps, &n->nmaps);
		n->maps = n->own_maps;
	}
	return err;
}

void stack_names_free(struct stack_names *n)
{
	free(n->own_maps);
	memset(n, 0, sizeof(*n));
}

int stack_names_warm(const struct stack_names *n, const struct stack_trace *st)
{
	uint32_t i;
	int err;

	for (i = 0; i < st->nframes && i < DWLEAK_MAX_FRAMES; i++) {
		bool ret = i > 0 && !(st->pcs[i] & DWLEAK_FRAME_EXACT);
		uint64_t pc = st->pcs[i] & ~DWLEAK_FRAME_EXACT;
		const struct probes_mapping *m = mapping_find(n, pc);
		const struct unwind_object *o = m ? unwinder_find(n->uw, &m->file) : NULL;

		if (!o || o->fd < 0)
			continue; /* the report's to name as it can */
		err = symbolizer_prepare_addr(n->sym, o->path, o->fd, unwind_object_elf_addr(o, m->start, m->pgoff, pc),
					      ret);
		if (err == -ENOMEM)
			return err;
	}
	return 0;
}
