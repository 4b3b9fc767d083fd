/* Reading a process's memory mappings from /proc/PID/maps. */
#ifndef DWLEAK_PROC_MAPS_H
#define DWLEAK_PROC_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_map {
	uint64_t start;
	uint64_t end;
	uint64_t offset; /* file offset of start */
	uint64_t dev;	 /* kernel encoding, major << 20 | minor, as BPF sees i_sb->s_dev */
	uint64_t ino;
	bool exec;
	bool readable;
	bool writable;
	bool shared; /* MAP_SHARED ('s'): writes reach the file or other mappers */
	char *path; /* as the kernel prints it; "" for anonymous, "[vdso]" etc. */
};

/*
 * Reads /proc/PID/maps into a malloc'd array (*MAPS, *N entries), keeping
 * only executable mappings when EXEC_ONLY.  Returns 0, or a negative errno
 * (-ENOENT: no such process).  Free with proc_maps_free().
 */
int proc_maps_read(int pid, bool exec_only, struct proc_map **maps, size_t *n);

void proc_maps_free(struct proc_map *maps, size_t n);

/* The index of the mapping of MAPS[0..N) (in address order, as
 * proc_maps_read gives them) that holds ADDR, or -1. */
ssize_t proc_maps_find(const struct proc_map *maps, size_t n, uint64_t addr);

/*
 * The one place that says where a mapping's bytes are read and probed:
 *
 * proc_maps_file_path: where to open, and attach uprobes to, the file
 * process PID maps as NAME (a path as the process sees it), given its maps
 * MAPS[0..N).  That is the mapping's /proc/PID/map_files entry, which
 * leads to the very file the process maps even after NAME was replaced on
 * disk (a library upgraded under a running service: the maps line then
 * says "NAME (deleted)"), where NAME would lead to the new file, whose
 * breakpoints the process never meets; else NAME through /proc/PID/root
 * (the process's mount namespace).  *REPLACED (may be NULL) is set when
 * the mapped file was replaced on disk.  Returns a malloc'd path, or NULL
 * when out of memory.
 *
 * proc_map_open: opens the bytes mapping M of PID maps, read-only:
 * map_files first, else M's path through /proc/PID/root.  Returns the fd
 * or -1 (errno set).
 */
char *proc_maps_file_path(int pid, const struct proc_map *maps, size_t n, const char *name,
			  bool *replaced);
int proc_map_open(int pid, const struct proc_map *m);

/* Mapping M's /proc/PID/map_files entry (malloc'd; NULL when out of
 * memory): a link to the very object mapped, for stat() and open(). */
char *proc_map_files_path(int pid, const struct proc_map *m);

/* The kernel's dev_t encoding of userspace MAJOR:MINOR. */
static inline uint64_t proc_kdev(unsigned int major, unsigned int minor)
{
	return ((uint64_t)major << 20) | minor;
}

#endif
