/* The walked stacks user space keeps, by stack id, and the program images
 * their ids belong to: the one owner of a stack's frames once they have
 * left the kernel's stacks map, which is only where a walk waits to be
 * moved out (bpf/stacks.bpf.h).  Pure bookkeeping, no BPF: the tracer
 * feeds it (session/session.c, session/proc.c), and tests feed it fake walks. */
#ifndef DWLEAK_STACK_STORE_H
#define DWLEAK_STACK_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dwleak.h"

struct stack_store;

/* A new, empty store in *OUT.  Returns 0 or -ENOMEM.  Free with
 * stack_store_free (NULL is ok). */
int stack_store_new(struct stack_store **out);
void stack_store_free(struct stack_store *s);

/*
 * Images.  An image is a program as one exec (or an attach with -p) made
 * it; a fork's child is of its parent's image until it execs.  Its
 * number (> 0; 0 means "not known" and never ends) seeds every stack id
 * its processes' walks make (proc_info.image), so an id belongs to one
 * image.  stack_store_image_new makes one with one process;
 * stack_store_image_join adds a process (a fork), stack_store_image_leave
 * takes one away (an exit or an exec) and returns true when it was the
 * last: the caller then ends the image with stack_store_image_end.
 */
int stack_store_image_new(struct stack_store *s, uint32_t *img);
void stack_store_image_join(struct stack_store *s, uint32_t img);
bool stack_store_image_leave(struct stack_store *s, uint32_t img);

/* Keeps a copy of walk ST under ID (moved out of the kernel map), unless
 * the store has ID already or ST's image has ended (no record can name
 * it).  Returns 0 or -ENOMEM. */
int stack_store_put(struct stack_store *s, uint64_t id, const struct stack_trace *st);

/* The walk stored under ID into *OUT: 0, or -ENOENT when the store does
 * not have it. */
int stack_store_get(const struct stack_store *s, uint64_t id, struct stack_trace *out);

/* ID is named by an outstanding allocation: kept by the next
 * stack_store_image_end.  Ids the store does not have are ignored. */
void stack_store_keep(struct stack_store *s, uint64_t id);

/*
 * Ends image IMG: none of its processes is left, every record they wrote
 * is applied and the kernel map was emptied into the store after the
 * last of them was gone, so no walk of IMG is still on its way.  Frees
 * its stacks that were not kept (stack_store_keep since the last end);
 * later puts of its stacks are dropped.  Returns how many were freed.
 */
size_t stack_store_image_end(struct stack_store *s, uint32_t img);

/* Frees every stack of image IMG, kept or not: it has ended and no
 * process of it is remembered any more (a long-running session forgets
 * processes after their last report).  Returns how many were freed. */
size_t stack_store_image_forget(struct stack_store *s, uint32_t img);

struct stack_store_stats {
	uint64_t stacks;	/* held now */
	uint64_t peak;		/* the most held at once */
	uint64_t bytes;		/* their frames, now */
	uint64_t put;		/* copies put (duplicates included) */
	uint64_t freed;		/* let go when their image ended */
	uint64_t put_late;	/* puts dropped: their image had ended */
	uint32_t images;	/* images made */
	uint32_t images_ended;
};

void stack_store_stats(const struct stack_store *s, struct stack_store_stats *out);

#endif
