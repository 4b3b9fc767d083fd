/* The layout shared by the injector (inject.c) and the code it places in
 * the target (inject_cave.S): the cave's slots and saved registers, the
 * data page's fields.  Offsets as macros so that the assembly can use
 * them; inject.c asserts them against its structs. */
#ifndef DWLEAK_INJECT_ABI_H
#define DWLEAK_INJECT_ABI_H

/* Saved general registers (user_regs_struct order is not used: this one
 * is the cave's): index * 8. */
#define IR_RAX 0
#define IR_RBX 1
#define IR_RCX 2
#define IR_RDX 3
#define IR_RSI 4
#define IR_RDI 5
#define IR_RBP 6
#define IR_RSP 7
#define IR_R8 8
#define IR_R9 9
#define IR_R10 10
#define IR_R11 11
#define IR_R12 12
#define IR_R13 13
#define IR_R14 14
#define IR_R15 15
#define IR_RFLAGS 16
#define IR_COUNT 17

/* The cave (in an executable mapping's padding), from its start. */
#define CAVE_MAGIC 0x00	    /* "dwlkcav1" */
#define CAVE_DATA 0x08	    /* the data page's address */
#define CAVE_CREATE 0x10    /* pthread_create */
#define CAVE_RESUME_A 0x18  /* where the thread goes on after the first restore */
#define CAVE_RESUME_B 0x20  /* where it goes on after the full restore */
#define CAVE_SIGMASK_A 0x28 /* its signal mask, for the first restore */
#define CAVE_REGS_A 0x30    /* its registers, for the first restore (IR_COUNT words) */
#define CAVE_CODE 0xc0	    /* the code (inject_cave.S) */

/* The data page (mapped in the target by the injector). */
#define D_MAGIC 0x000
#define D_THREAD 0x008	    /* pthread_t written by pthread_create */
#define D_DLOPEN 0x010
#define D_DLSYM 0x018
#define D_DLERROR 0x020
#define D_PTHREAD_DETACH 0x028
#define D_PTHREAD_SELF 0x030
#define D_CREATE_RC 0x038   /* s32: what pthread_create returned */
#define D_CREATE_DONE 0x03c /* u32: 1 once it returned */
#define D_STATUS 0x040	    /* u32: enum inject_status, written last by the new thread */
#define D_ENTRY_RC 0x044    /* s32: what the library's entry returned */
#define D_HANDLE 0x048	    /* dlopen's handle */
#define D_SIGMASK 0x050	    /* the thread's signal mask, for the full restore */
#define D_SYM 0x060	    /* the entry's name, 32 bytes */
#define D_ERR 0x080	    /* dlerror()'s message, D_ERR_MAX bytes */
#define D_ERR_MAX 256
#define D_REGS 0x180	    /* the thread's registers, for the full restore */
#define D_PATH 0x400	    /* the library's path */
#define D_PATH_MAX 4096
#define D_XSAVE 0x1400	    /* its XSAVE image (64-byte aligned) */

/* What the new thread says it did (D_STATUS). */
#define INJECT_ST_RUNNING 0
#define INJECT_ST_OK 1		  /* loaded, the entry called (D_ENTRY_RC) */
#define INJECT_ST_DLOPEN_FAILED 2 /* D_ERR says why */
#define INJECT_ST_NO_ENTRY 3	  /* loaded, but no DWLEAK_PRELOAD_INJECTED_START in it */

#endif
