/* Naming one walked pc as report frames (the chain of inlined calls from
 * debug information, a symbol, or an address), and the arena that keeps the
 * frames of a whole report and the names they borrow. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"

#define FRAMES_CAP_MIN 64 /* grows by doubling */
#define NAMES_CAP_MIN 32

void frame_arena_free(struct frame_arena *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nnames; i++)
		sym_frames_free(a->names[i], a->name_counts[i]);
	free(a->names);
	free(a->name_counts);
	free(a->frames);
	*a = (struct frame_arena){ 0 };
}

struct frame_span frame_span_start(const struct frame_arena *a)
{
	return (struct frame_span){ a->nframes, 0 };
}

void frame_span_end(const struct frame_arena *a, struct frame_span *span)
{
	span->n = a->nframes - span->first;
}

const struct report_frame *frame_span_frames(const struct frame_arena *a, struct frame_span span)
{
	return span.n ? a->frames + span.first : NULL;
}

/* Room for N more frames. */
static int frames_reserve(struct frame_arena *a, size_t n)
{
	size_t cap = a->frames_cap ? a->frames_cap : FRAMES_CAP_MIN;
	struct report_frame *g;

	if (n <= a->frames_cap - a->nframes)
		return 0;
	while (cap - a->nframes < n) {
		if (cap > SIZE_MAX / 2 / sizeof(*g))
			return -ENOMEM;
		cap *= 2;
	}
	g = realloc(a->frames, cap * sizeof(*g));
	if (!g)
		return -ENOMEM;
	a->frames = g;
	a->frames_cap = cap;
	return 0;
}

/* Keeps the N NAMES until the arena is freed; frees them on -ENOMEM. */
static int names_keep(struct frame_arena *a, struct sym_frame *names, size_t n)
{
	if (a->nnames == a->names_cap) {
		size_t cap = a->names_cap ? a->names_cap * 2 : NAMES_CAP_MIN;
		struct sym_frame **v = realloc(a->names, cap * sizeof(*v));
		size_t *c;

		if (v)
			a->names = v;
		c = v ? realloc(a->name_counts, cap * sizeof(*c)) : NULL;
		if (!c) {
			sym_frames_free(names, n);
			return -ENOMEM;
		}
		a->name_counts = c;
		a->names_cap = cap;
	}
	a->names[a->nnames] = names;
	a->name_counts[a->nnames++] = n;
	return 0;
}

/* Appends the frames of N NAMES (one nameless frame when N is 0) at
 * ADDRESS; room reserved. */
static void frames_fill(struct frame_arena *a, const char *module, const char *build_id, uint64_t address,
			uint64_t elf_address, const struct sym_frame *names, size_t n)
{
	for (size_t i = 0; i < (n ? n : 1); i++) {
		struct report_frame *f = &a->frames[a->nframes++];

		*f = (struct report_frame){
			.address = address, .elf_address = elf_address,
			.module = module, .build_id = build_id,
		};
		if (n) {
			f->function = names[i].function;
			f->symbol = names[i].symbol ? names[i].symbol : names[i].function;
			f->offset = names[i].offset;
			f->file = names[i].file;
			f->line = names[i].line;
			f->inlined = names[i].inlined;
		}
	}
}

int frame_arena_add_names(struct frame_arena *a, const char *module, const char *build_id,
			  uint64_t address, uint64_t elf_address, struct sym_frame *names,
			  size_t n)
{
	int err = frames_reserve(a, n ? n : 1);

	if (err) {
		sym_frames_free(names, n);
		return err;
	}
	if (n)
		err = names_keep(a, names, n);
	else
		sym_frames_free(names, 0); /* an empty array: nothing borrows from it */
	if (err)
		return err;
	frames_fill(a, module, build_id, address, elf_address, names, n);
	return 0;
}

/* The module of MODULE (FD) for A's frames: remembered, or looked up and
 * remembered in the oldest entry.  Returns what symbolizer_module() does. */
static int arena_module(struct frame_arena *a, struct symbolizer *sym, const char *module, int fd,
			struct sym_module **m)
{
	unsigned int i;
	int err;

	for (i = 0; i < FRAME_ARENA_MODULES; i++) {
		if (a->modules[i].m && a->modules[i].path == module && a->modules[i].fd == fd) {
			*m = a->modules[i].m;
			return 0;
		}
	}
	err = symbolizer_module(sym, module, fd, m);
	if (!err) {
		i = a->modules_next++ % FRAME_ARENA_MODULES;
		a->modules[i].path = module;
		a->modules[i].fd = fd;
		a->modules[i].m = *m;
	}
	return err;
}

int frame_arena_add_pc(struct frame_arena *a, struct symbolizer *sym, const char *module, int fd,
		       const char *build_id, uint64_t address, uint64_t elf_address,
		       bool return_addr)
{
	struct sym_frame *names = NULL;
	struct sym_module *m;
	size_t n = 0;
	int err;

	if (!module)
		return frame_arena_add_names(a, NULL, NULL, address, address, NULL, 0);
	/* an object that cannot be read still gets its nameless frame */
	err = arena_module(a, sym, module, fd, &m);
	if (err == -ENOMEM)
		return err;
	if (!err) {
		const struct sym_frame *shared;
		bool owned;

		err = sym_module_resolve_shared(m, elf_address, return_addr, &shared, &n, &owned);
		if (err)
			return err;
		if (owned)
			names = (struct sym_frame *)shared;
		else {
			/* the symbolizer's own names: every frame at this address,
			 * in every stack, points to the same strings */
			err = frames_reserve(a, n ? n : 1);
			if (!err)
				frames_fill(a, module, build_id, address, elf_address, shared, n);
			return err;
		}
	}
	return frame_arena_add_names(a, module, build_id, address, elf_address, names, n);
}

int frame_arena_reserve(struct frame_arena *a, size_t n)
{
	return frames_reserve(a, n);
}

int frame_arena_add_again(struct frame_arena *a, size_t first, size_t n)
{
	/* room first: the frames copied may move with the array */
	int err = frames_reserve(a, n);

	if (err)
		return err;
	if (n)
		memcpy(a->frames + a->nframes, a->frames + first, n * sizeof(*a->frames));
	a->nframes += n;
	return 0;
}

int frame_arena_add_copies(struct frame_arena *a, const struct report_frame *src, size_t n)
{
	int err = frames_reserve(a, n);

	if (err)
		return err;
	if (n)
		memcpy(a->frames + a->nframes, src, n * sizeof(*src));
	a->nframes += n;
	return 0;
}
