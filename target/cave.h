/* Where code dwleak places in a process goes: a "cave", a run of zeros in
 * the padding between the end of an executable segment's file contents
 * and the end of its last page, so that the process runs it from a
 * mapping it already has (no mmap, nothing the program can see but one
 * page of its text made private by the write through /proc/PID/mem).
 * The injector (inject.c) and the leak check's snapshot (snapshot.c) each
 * place one; a cave starts with its owner's 8-byte magic, so a later call
 * finds its own again instead of taking more padding. */
#ifndef DWLEAK_CAVE_H
#define DWLEAK_CAVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc_maps.h"

/*
 * Finds LEN bytes (64-byte aligned) in the padding of an executable
 * file mapping of process PID among MAPS[0..N): the one starting with
 * MAGIC (8 bytes) if there is one, else a run of zeros; in the object
 * mapped as PREFER first (may be NULL), then in any other.  Sets *AT.
 * Returns 0, or -ENOENT when no mapping has room.
 */
int cave_find(pid_t pid, const struct proc_map *maps, size_t n, const struct proc_map *prefer, size_t len,
	      const char magic[8], uint64_t *at);

#endif
