/* Walked stacks by id, out of the kernel and kept as long as something
 * may name them, and the images that decide how long that is.
 *
 * Who owns a stack id, and when it is let go (the invariant):
 *
 *   An id is made by a walk in a process of image I and is seeded with I
 *   (bpf/abi/dwleak.h, proc_info.image), so only I's processes make it,
 *   and only their records name it.  From the moment a walk stores it
 *   until I has ended and no outstanding allocation names it, its frames
 *   are in the kernel's stacks map or in this store, or both.
 *
 *   The kernel map is a staging area.  User space moves its entries here
 *   (a copy, then the delete; session/session.c) after every process
 *   exit or exec that ends an image, whenever the map is half full, and
 *   before each report.  The walkers' per-CPU caches (stack_seen,
 *   walk_memo) may then go on returning an id without storing it again:
 *   that is safe because the store holds every stack of an image that has
 *   not ended, whether or not a record named it yet (a record is written
 *   at the allocator's return, any time after the walk at its entry).
 *
 *   An image ends when its last process has exited or exec'd (and been
 *   followed to the end: a process dwleak let go never leaves its image).
 *   Its threads are gone, so every record it wrote has been applied, and
 *   no walk of it is still on its way.  The tracer then empties the
 *   kernel map into the store once more, marks the ids the ledgers of the
 *   image's processes still name (stack_store_keep), and ends the image:
 *   the unmarked stacks are freed, the marked ones stay for the final
 *   report, which names the frames of every process, exited or not.  A
 *   put of an ended image's stack (an orphan: a walk whose record never
 *   came, left in the kernel map) is dropped.
 *
 *   So the same id in use by several processes is the same image's, and
 *   the image lives while any of them does; a process that exits while
 *   another records under its ids ends nothing.
 *
 * Stacks are in an open-addressing table keyed by id (linear probing,
 * removal by shifting back, as alloc_table.c), frames in a block of
 * their own each. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stack_store.h"

struct stored_stack {
	uint64_t id;	 /* 0 = empty slot (ids 0..DWLEAK_STACK_SPECIAL_MAX are never stored) */
	uint32_t image;
	uint8_t nframes;
	uint8_t end;
	uint8_t kind;
	uint8_t fp;
	bool keep;	 /* marked by stack_store_keep for the next image end */
	uint64_t *pcs;
};

struct image_state {
	uint32_t procs;	 /* processes in it now */
	bool ended;
};

struct stack_store {
	struct stored_stack *slots;
	size_t cap; /* a power of two, or 0 */
	size_t n;
	struct image_state *images; /* by image number; [0] is "not known" */
	size_t nimages, images_cap;
	struct stack_store_stats st;
};

int stack_store_new(struct stack_store **out)
{
	struct stack_store *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->images = calloc(16, sizeof(*s->images));
	if (!s->images) {
		free(s);
		return -ENOMEM;
	}
	s->images_cap = 16;
	s->nimages = 1; /* image 0: not known */
	*out = s;
	return 0;
}

void stack_store_free(struct stack_store *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->cap; i++)
		free(s->slots[i].pcs);
	free(s->slots);
	free(s->images);
	free(s);
}

int stack_store_image_new(struct stack_store *s, uint32_t *img)
{
	if (s->nimages == s->images_cap) {
		size_t cap = s->images_cap * 2;
		struct image_state *g = realloc(s->images, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		s->images = g;
		s->images_cap = cap;
	}
	if (s->nimages > UINT32_MAX)
		return -EOVERFLOW;
	s->images[s->nimages] = (struct image_state){ .procs = 1 };
	*img = (uint32_t)s->nimages++;
	s->st.images++;
	return 0;
}

/* Image IMG's state, NULL for 0 (not known) or a number never given. */
static struct image_state *image_of(const struct stack_store *s, uint32_t img)
{
	return img && img < s->nimages ? &s->images[img] : NULL;
}

void stack_store_image_join(struct stack_store *s, uint32_t img)
{
	struct image_state *i = image_of(s, img);

	if (i && !i->ended)
		i->procs++;
}

bool stack_store_image_leave(struct stack_store *s, uint32_t img)
{
	struct image_state *i = image_of(s, img);

	if (!i || i->ended || !i->procs)
		return false;
	return --i->procs == 0;
}

static size_t slot_of(const struct stack_store *s, uint64_t id)
{
	/* ids are hashes already: their high bits are as good as any */
	return (size_t)(id >> 17 ^ id) & (s->cap - 1);
}

/* The slot holding ID, or the empty slot where it would go. */
static size_t slot_find(const struct stack_store *s, uint64_t id)
{
	size_t k;

	for (k = slot_of(s, id); s->slots[k].id && s->slots[k].id != id; k = (k + 1) & (s->cap - 1))
		;
	return k;
}

static int table_grow(struct stack_store *s)
{
	size_t cap = s->cap ? s->cap * 2 : 1024, i, old_cap = s->cap;
	struct stored_stack *old = s->slots, *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	s->slots = slots;
	s->cap = cap;
	for (i = 0; i < old_cap; i++)
		if (old[i].id)
			slots[slot_find(s, old[i].id)] = old[i];
	free(old);
	return 0;
}

int stack_store_put(struct stack_store *s, uint64_t id, const struct stack_trace *st)
{
	const struct image_state *img = image_of(s, st->image);
	struct stored_stack *e;
	size_t n = st->nframes < DWLEAK_MAX_FRAMES ? st->nframes : DWLEAK_MAX_FRAMES;

	s->st.put++;
	if (id <= DWLEAK_STACK_SPECIAL_MAX)
		return 0;
	if (img && img->ended) {
		s->st.put_late++;
		return 0;
	}
	if ((s->n + 1) * 4 > s->cap * 3 && table_grow(s))
		return -ENOMEM;
	e = &s->slots[slot_find(s, id)];
	if (e->id)
		return 0; /* the same walk, stored again after it was moved out */
	e->pcs = malloc((n ? n : 1) * sizeof(*e->pcs));
	if (!e->pcs)
		return -ENOMEM;
	memcpy(e->pcs, st->pcs, n * sizeof(*e->pcs));
	e->id = id;
	e->image = st->image;
	e->nframes = (uint8_t)n;
	e->end = st->end;
	e->kind = st->kind;
	e->fp = st->fp;
	e->keep = false;
	s->n++;
	s->st.bytes += n * sizeof(*e->pcs);
	if (s->n > s->st.peak)
		s->st.peak = s->n;
	return 0;
}

int stack_store_get(const struct stack_store *s, uint64_t id, struct stack_trace *out)
{
	const struct stored_stack *e;

	if (!s->cap || id <= DWLEAK_STACK_SPECIAL_MAX)
		return -ENOENT;
	e = &s->slots[slot_find(s, id)];
	if (!e->id)
		return -ENOENT;
	memset(out, 0, offsetof(struct stack_trace, pcs));
	out->nframes = e->nframes;
	out->end = e->end;
	out->kind = e->kind;
	out->fp = e->fp;
	out->image = e->image;
	memcpy(out->pcs, e->pcs, e->nframes * sizeof(*e->pcs));
	return 0;
}

void stack_store_keep(struct stack_store *s, uint64_t id)
{
	struct stored_stack *e;

	if (!s->cap || id <= DWLEAK_STACK_SPECIAL_MAX)
		return;
	e = &s->slots[slot_find(s, id)];
	if (e->id)
		e->keep = true;
}

/* Empties slot K, shifting back the later entries of its run that may
 * sit in its place (no tombstones). */
static void slot_remove(struct stack_store *s, size_t k)
{
	size_t j, home, mask = s->cap - 1;

	s->st.bytes -= s->slots[k].nframes * sizeof(uint64_t);
	free(s->slots[k].pcs);
	for (j = (k + 1) & mask; s->slots[j].id; j = (j + 1) & mask) {
		home = slot_of(s, s->slots[j].id);
		/* entry j may move to k unless its home lies cyclically in (k, j] */
		if (((j - home) & mask) >= ((j - k) & mask)) {
			s->slots[k] = s->slots[j];
			k = j;
		}
	}
	memset(&s->slots[k], 0, sizeof(s->slots[k]));
	s->n--;
}

size_t stack_store_image_end(struct stack_store *s, uint32_t img)
{
	struct image_state *i = image_of(s, img);
	size_t k = 0, freed = 0;

	if (!i || i->ended)
		return 0;
	i->ended = true;
	i->procs = 0;
	s->st.images_ended++;
	/* a removal shifts another entry into slot k: look at k again then
	 * (one from a wrapped run was looked at already, and stays again) */
	while (k < s->cap) {
		struct stored_stack *e = &s->slots[k];

		if (e->id && e->image == img && !e->keep) {
			slot_remove(s, k);
			freed++;
		} else {
			k++;
		}
	}
	for (k = 0; k < s->cap; k++)
		s->slots[k].keep = false;
	s->st.freed += freed;
	return freed;
}

size_t stack_store_image_forget(struct stack_store *s, uint32_t img)
{
	struct image_state *i = image_of(s, img);
	size_t k = 0, freed = 0;

	if (!i || !i->ended)
		return 0;
	while (k < s->cap) {
		if (s->slots[k].id && s->slots[k].image == img) {
			slot_remove(s, k);
			freed++;
		} else {
			k++;
		}
	}
	s->st.freed += freed;
	return freed;
}

void stack_store_stats(const struct stack_store *s, struct stack_store_stats *out)
{
	*out = s->st;
	out->stacks = s->n;
}
