/* The pcs one process's stacks have named while a report is built, each
 * with where its frames are in the report's arena: stacks share most of
 * their frames (every stack through main has main's), so a pc is named
 * once per report and its frames copied after (session/build.c). */
#ifndef DWLEAK_SESSION_PC_MEMO_H
#define DWLEAK_SESSION_PC_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pc_memo;

/* An empty memo in *OUT (NULL without memory: every pc is named then).
 * Returns 0 or -ENOMEM.  Free with pc_memo_free (NULL is ok). */
int pc_memo_new(struct pc_memo **out);
void pc_memo_free(struct pc_memo *m);

/* Forgets every pc (the next process's are its own: its mappings). */
void pc_memo_reset(struct pc_memo *m);

/* Whether PC, named as a return address or not (RETURN_ADDR), was named:
 * then its N frames are at index FIRST of the arena. */
bool pc_memo_get(const struct pc_memo *m, uint64_t pc, bool return_addr, size_t *first, size_t *n);

/* Remembers PC's N frames at FIRST (N 0: it names no frame, as the
 * preload library's own).  Without memory it is simply not remembered. */
void pc_memo_put(struct pc_memo *m, uint64_t pc, bool return_addr, size_t first, size_t n);

#endif
