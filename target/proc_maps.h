/* Reading a process's memory mappings from /proc/PID/maps. */
#ifndef DWLEAK_PROC_MAPS_H
#define DWLEAK_PROC_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct proc_map {
	uint64_t start;
	uint64_t end;
	uint64_t offset; /* file offset of start */
	uint64_t dev;	 /* kernel encoding, major << 20 | minor, as BPF sees i_sb->s_dev */
	uint64_t ino;
	bool exec;
	char *path; /* as the kernel prints it; "" for anonymous, "[vdso]" etc. */
};

/*
 * Reads /proc/PID/maps into a malloc'd array (*MAPS, *N entries), keeping
 * only executable mappings when EXEC_ONLY.  Returns 0, or a negative errno
 * (-ENOENT: no such process).  Free with proc_maps_free().
 */
int proc_maps_read(int pid, bool exec_only, struct proc_map **maps, size_t *n);

void proc_maps_free(struct proc_map *maps, size_t n);

/* The kernel's dev_t encoding of userspace MAJOR:MINOR. */
static inline uint64_t proc_kdev(unsigned int major, unsigned int minor)
{
	return ((uint64_t)major << 20) | minor;
}

#endif
