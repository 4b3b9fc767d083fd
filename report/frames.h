/* Naming one walked pc as report frames, shared by the live trace and by
 * `dwleak symbolize`: an arena collects the frames of many stacks in one
 * growing array and owns the names they borrow. */
#ifndef DWLEAK_FRAMES_H
#define DWLEAK_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report.h"
#include "symbolize.h"

/* Modules an arena remembers by the caller's path pointer (see below). */
#define FRAME_ARENA_MODULES 8

/*
 * Every frame appended to one arena, in one growing array, and the
 * sym_module_resolve() results whose strings (function, file) those frames
 * borrow.
 *
 * Who owns what: the arena owns FRAMES and the resolved names it was
 * handed (frame_arena_add_names(), a module's names the symbolizer had no
 * room to keep), and frees them in frame_arena_free(); the names of
 * frame_arena_add_pc() are mostly the symbolizer's own (its cache of
 * each module's addresses), shared by every frame at one address: read
 * them while the symbolizer lives (freeing the arena reads none).  Module paths and build ids are borrowed
 * from the caller and must stay alive as long as the arena (the trace's
 * unwind objects, the symbolize command's report); so must the strings of
 * frames added by frame_arena_add_copies().
 *
 * FRAMES moves while the arena grows: until the last frame is appended,
 * keep indexes (struct frame_span), not pointers, and read frames as
 * FRAMES[i] with i < NFRAMES.  Callers only read these fields.
 * The arena also remembers the module of the last FRAME_ARENA_MODULES
 * paths it named (the same path pointer and fd: the caller's object), so
 * one arena, one report, looks a file up once: a file replaced while a
 * report is built is read again by the next one.
 * Start from { 0 }; free with frame_arena_free().
 */
struct frame_arena {
	struct report_frame *frames;
	size_t nframes;
	size_t frames_cap;
	struct sym_frame **names; /* NNAMES arrays from sym_module_resolve() */
	size_t *name_counts;      /* the length of each */
	size_t nnames;
	size_t names_cap;
	/* the modules of the last frames named (path pointer and fd as the
	 * caller gave them): a report names thousands of frames in a few
	 * modules, and symbolizer_module() stats the file for each one */
	struct {
		const char *path;
		int fd;
		struct sym_module *m;
	} modules[FRAME_ARENA_MODULES];
	unsigned int modules_next;
};

/* Consecutive frames of one arena by index, which stay right while the
 * arena grows: a stack's frames, or its frame-pointer walk's. */
struct frame_span {
	size_t first; /* index in frames of the first one */
	size_t n;     /* how many */
};

/* Frees what A owns (not A itself, nor what its frames borrow from the
 * caller) and leaves A empty for reuse.  NULL is ok. */
void frame_arena_free(struct frame_arena *a);

/* A span of no frames that starts at the next frame A will append. */
struct frame_span frame_span_start(const struct frame_arena *a);

/* Makes SPAN (from frame_span_start() on A) end after the last frame
 * appended to A so far. */
void frame_span_end(const struct frame_arena *a, struct frame_span *span);

/*
 * The frames of SPAN, for a struct report_stack once A stopped growing:
 * a pointer into A's array, valid until A grows again or is freed; NULL
 * when SPAN is empty.
 */
const struct report_frame *frame_span_frames(const struct frame_arena *a, struct frame_span span);

/*
 * Appends the report frames of one walked pc to A:
 *  - MODULE NULL (the pc is in no file-backed mapping): one frame with only
 *    ADDRESS; its elf_address is ADDRESS too, there is no ELF to place it in;
 *  - else the frames SYM names for ELF_ADDRESS in the object, innermost
 *    first: the chain of inlined calls (inlined = true) ending with the
 *    physical function when debug information describes it, else one frame
 *    named from the symbol tables, or one nameless frame (function NULL,
 *    still with MODULE, BUILD_ID and ELF_ADDRESS) when no symbol covers it
 *    or the object cannot be read;
 * every frame with ADDRESS, ELF_ADDRESS, MODULE and BUILD_ID.
 *
 * SYM is the run's symbolizer.  MODULE is the object's path as reports show
 * it (also where its debug files are looked for); FD an open fd on the
 * object's real bytes (e.g. /proc/PID/map_files/...), or < 0 to open
 * MODULE; it stays the caller's.  BUILD_ID is the object's build id as
 * lowercase hex, NULL when unknown.  MODULE and BUILD_ID are borrowed for
 * the arena's life.  ADDRESS is the runtime address and ELF_ADDRESS the
 * same place in the object's ELF address space.  RETURN_ADDR says the pc
 * is a return address (a caller frame): names are then those of the call
 * instruction before it (see sym_module_resolve()).
 *
 * Returns 0 or -ENOMEM (A then holds the frames appended before).
 */
int frame_arena_add_pc(struct frame_arena *a, struct symbolizer *sym, const char *module, int fd,
		       const char *build_id, uint64_t address, uint64_t elf_address,
		       bool return_addr);

/*
 * Appends the frames of one pc already resolved: one per NAMES[i] (N of
 * them, from sym_module_resolve()), or one nameless frame when N is 0,
 * each with ADDRESS, ELF_ADDRESS, MODULE and BUILD_ID as in
 * frame_arena_add_pc().  For callers that choose among several objects'
 * answers themselves.  A takes NAMES over, also on error.
 * Returns 0 or -ENOMEM.
 */
int frame_arena_add_names(struct frame_arena *a, const char *module, const char *build_id,
			  uint64_t address, uint64_t elf_address, struct sym_frame *names,
			  size_t n);

/* Appends copies of the N frames at SRC, whose strings stay borrowed from
 * where SRC borrows them.  Returns 0 or -ENOMEM. */
int frame_arena_add_copies(struct frame_arena *a, const struct report_frame *src, size_t n);

/* Makes room for N more frames at once (a report of many stacks knows
 * about how many it will add: no copy of a growing array after each
 * doubling).  0 or -ENOMEM. */
int frame_arena_reserve(struct frame_arena *a, size_t n);

/* Appends a copy of the N frames of A at index FIRST (a pc A named
 * already, for another stack): 0 or -ENOMEM. */
int frame_arena_add_again(struct frame_arena *a, size_t first, size_t n);

#endif
