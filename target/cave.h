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

#include "inject_abi.h"
#include "proc_maps.h"

struct user_regs_struct;

/*
 * Finds LEN bytes (64-byte aligned) in the padding of an executable
 * file mapping of process PID among MAPS[0..N): the one starting with
 * MAGIC (8 bytes) if there is one, else a run of zeros; in the object
 * mapped as PREFER first (may be NULL), then in any other.  Sets *AT.
 * Returns 0, or -ENOENT when no mapping has room.
 */
int cave_find(pid_t pid, const struct proc_map *maps, size_t n, const struct proc_map *prefer, size_t len,
	      const char magic[8], uint64_t *at);

/*
 * How a thread stopped with registers G goes on when it restores itself
 * from a cave (no tracer to let the kernel restart its system call): into
 * *OUT, G with rip back on the syscall instruction and rax its number (or
 * restart_syscall's) where it was interrupted in a restartable call, and
 * orig_rax -1.  *EXACT_NR (may be NULL): the call the kernel would restart
 * (-1: none), for a tracer that sets it back exactly at a syscall stop.
 */
void cave_resume_regs(const struct user_regs_struct *g, struct user_regs_struct *out, int64_t *exact_nr);

/* G's general registers and rflags, as a cave's restore loads them. */
void cave_regs_pack(const struct user_regs_struct *g, uint64_t ir[IR_COUNT]);

/* Writes LEN bytes at BUF to ADDR of process PID through /proc/PID/mem
 * (which writes read-only text: the page becomes the process's own).
 * Returns 0 or -errno. */
int cave_write(pid_t pid, uint64_t addr, const void *buf, size_t len);

/* Waits for thread TID's next stop, without blocking past DEADLINE
 * (CLOCK_MONOTONIC ms); its wait status in *STATUS.  Returns 0, -ESRCH
 * (it ended), -ETIMEDOUT or -errno. */
int cave_wait_stop(pid_t tid, double deadline, int *status);

/* CLOCK_MONOTONIC now, in ms (the deadlines above). */
double cave_now_ms(void);

#endif
