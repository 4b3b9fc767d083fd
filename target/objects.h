/* The objects a process searches symbols in, in the dynamic linker's
 * lookup order (executable, LD_PRELOAD'ed libraries, then the rest in load
 * order): what allocator detection follows to find who really provides
 * malloc; and the dynamic linker's debugger hook, where new objects are
 * announced; read from the link map of the running process (or, before
 * its dynamic linker made one, from its mappings). */
#ifndef DWLEAK_OBJECTS_H
#define DWLEAK_OBJECTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The dynamic linker's hook: it calls _dl_debug_state before and after it
 * maps or unmaps objects, with _r_debug.r_state saying which. */
struct dl_hook {
	char *path;		/* where to open and probe the dynamic linker; NULL = none */
	bool found;		/* _dl_debug_state was found in it */
	uint64_t state_vaddr;	/* _dl_debug_state's ELF address */
	uint64_t state_off;	/* its file offset (where the uprobe goes); 0 = not in a segment */
	uint64_t r_debug_vaddr; /* _r_debug's ELF address; 0 = not found */
};

struct proc_objects {
	char **paths;		    /* where to open each object (NULL-terminated, malloc'd) */
	char **names;		    /* the same objects as the process names them */
	size_t n;
	size_t npreload;	    /* of them after the executable, how many LD_PRELOAD gave */
	size_t nreplaced;	    /* files replaced on disk since the process mapped them */
	const char *first_replaced; /* the first of those (in names[]), for messages */
	struct dl_hook dl;
};

/*
 * The objects of running process PID: its link map when the dynamic
 * linker's _r_debug is readable, else the mapped executable files in
 * address order (a static program, an odd loader).  PATHS reach the bytes
 * the process maps (see proc_maps_file_path), NAMES are as the process
 * sees them.  Fills *OUT (free with proc_objects_free).  Returns 0, or a
 * negative errno (-ENOENT: no such process).
 */
int proc_objects_of_pid(pid_t pid, struct proc_objects *out);

/*
 * The definition of function NAME the dynamic linker binds for O's
 * process: the first object in lookup order that exports it.  Sets *PATH
 * (borrowed from O) and *OFF (its file offset, where a uprobe goes).
 * Returns 0, or -ENOENT when no object exports it.
 */
int proc_objects_function(const struct proc_objects *o, const char *name, const char **path, uint64_t *off);

/*
 * Whether running process PID's dynamic linker has mapped and relocated
 * its initial objects (its _r_debug has a link map and says RT_CONSISTENT),
 * so that the objects read now are all it starts with: a process caught
 * right after its exec (the agent hears of execs within microseconds) may
 * still be inside its dynamic linker, its LD_PRELOAD'ed libraries not yet
 * mapped.  Returns 1 (also for a program without a dynamic linker, or one
 * whose _r_debug cannot be found: nothing to wait for), 0 (not yet), or a
 * negative errno (-ENOENT: no such process).
 */
int proc_linker_settled(pid_t pid);

/* A deep copy of SRC into *DST.  Returns 0 or -ENOMEM (DST then empty). */
int proc_objects_copy(struct proc_objects *dst, const struct proc_objects *src);

void proc_objects_free(struct proc_objects *o);

/* How many objects an LD_PRELOAD value names (spaces or colons apart). */
size_t ld_preload_count(const char *value);

#endif
