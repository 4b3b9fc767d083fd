/* The layout of the snapshot's cave (snapshot_cave.S), shared with
 * snapshot.c: its slots, from the cave's start.  Macros, so the assembly
 * can use them. */
#ifndef DWLEAK_SNAPSHOT_ABI_H
#define DWLEAK_SNAPSHOT_ABI_H

#define SNAP_MAGIC 0x00	  /* "dwlksnp1" */
#define SNAP_RESUME 0x08  /* where the thread goes on when it restores itself */
#define SNAP_SIGMASK 0x10 /* its signal mask */
#define SNAP_REGS 0x18	  /* its registers (IR_COUNT words, inject_abi.h) */
#define SNAP_CODE 0xc0	  /* the code */

#endif
