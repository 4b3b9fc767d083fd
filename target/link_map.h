/* A running process's objects in the dynamic linker's lookup order, read
 * from its r_debug link map (what debuggers use). */
#ifndef DWLEAK_LINK_MAP_H
#define DWLEAK_LINK_MAP_H

#include <stddef.h>
#include <stdint.h>

/*
 * Reads PID's link map through /proc/PID/mem: R_DEBUG is the runtime
 * address of the dynamic linker's _r_debug.  *NAMES gets a malloc'd,
 * NULL-terminated array of malloc'd paths as the process sees them, the
 * executable first (its link-map name is empty: /proc/PID/exe is read).
 * Returns 0 or a negative errno.
 */
int link_map_read(int pid, uint64_t r_debug, char ***names, size_t *n);

void link_map_free(char **names);

#endif
