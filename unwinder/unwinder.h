/* The unwinding runtime: the objects (files) a traced process runs code
 * from, their compiled tables, and loading those tables into the BPF maps
 * the in-kernel walker reads.  One object is compiled and loaded once, and
 * serves every mapping of it. */
#ifndef DWLEAK_UNWINDER_H
#define DWLEAK_UNWINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dwleak.h"

struct table_cache;

/* One file the walker may meet.  PATH names it in reports; FD is an open
 * descriptor of the bytes the process really maps (kept open, so that a
 * deleted or replaced file can still be symbolized). */
struct unwind_object {
	struct file_key key;
	char *path;
	int fd;
	char build_id[2 * 64 + 1]; /* hex, "" when none */
	struct table_segment segs[DWLEAK_MAX_SEGMENTS];
	uint32_t nsegs;
	bool segs_truncated; /* more executable segments than the walker takes */
	int error;	     /* negative errno when its table could not be made */
	char *error_msg;     /* why, for the user */
	bool loaded;	     /* its table is in the maps */
	bool cache_hit;
	uint32_t table_id;
	uint32_t rule_base; /* its rule 0's index in the shared rules map */
	uint32_t rows;
	uint32_t rules;
	uint64_t table_bytes;
	double compile_ms;
	struct unwind_table *table; /* until loaded */
};

struct unwinder_stats {
	uint32_t objects;
	uint32_t loaded;
	uint32_t failed;	 /* no table could be made (no CFI, unreadable) */
	uint32_t dropped_full;	 /* tables that did not fit the maps */
	uint32_t slots_none;	 /* processes given no mapping-table slot: all were taken */
	uint64_t mappings_full;	 /* mappings not recorded for naming frames: the map was full */
	uint64_t rows_used, rows_cap;
	uint64_t rules_used, rules_cap;
	uint64_t pages_used;
	uint64_t bytes;		 /* table bytes loaded */
};

struct unwinder;

/* Creates an empty runtime; CACHE (may be NULL) is used for compiles and
 * stays the caller's; DEBUG_DIRS (NULL-terminated, may be NULL) is where
 * separate debug files are also looked for. */
int unwinder_new(struct table_cache *cache, const char *const *debug_dirs, struct unwinder **out);
void unwinder_free(struct unwinder *u);

/*
 * Registers the file KEY (path PATH, open at FD, which the object takes
 * over; FD < 0 opens PATH) and compiles its table, unless KEY is known
 * already.  *OUT (may be NULL) receives the object, also when its table
 * failed (o->error says why).  Returns 0 or -ENOMEM.
 */
int unwinder_add(struct unwinder *u, const struct file_key *key, const char *path, int fd,
		 struct unwind_object **out);

/* Registers every executable file mapping of process PID, opening each
 * through /proc/PID/map_files (or /proc/PID/root/PATH).  Returns 0 or a
 * negative errno from reading the maps (-ENOENT: process gone). */
int unwinder_add_process(struct unwinder *u, int pid);

/* The object for KEY, or NULL. */
struct unwind_object *unwinder_find(const struct unwinder *u, const struct file_key *key);

/* Objects in registration order. */
size_t unwinder_count(const struct unwinder *u);
struct unwind_object *unwinder_object(const struct unwinder *u, size_t i);

/* Rows and rules the registered, not yet loaded tables need. */
void unwinder_needs(const struct unwinder *u, uint64_t *rows, uint64_t *rules);

/* The BPF maps to load into (fds stay the caller's) and their capacities. */
struct unwinder_maps {
	int tables;
	int pages;
	int rows;
	int rules;
	int proc_maps;	   /* [2 * DWLEAK_MAX_PROC_SLOTS] struct proc_mappings: per slot, the
			    * buffer in use and the next */
	int proc_maps_cur; /* [DWLEAK_MAX_PROC_SLOTS] which of a slot's two is in use */
	int mappings;  /* struct mapping_key -> struct mapping_seen */
	uint32_t rows_cap;
	uint32_t rules_cap;
	uint32_t pages_cap;
	/* rows and rules mapped into this process (the maps are
	 * BPF_F_MMAPABLE), element I at I * stride; NULL: written with batch
	 * updates through the fds */
	void *rows_mem, *rules_mem;
	size_t rows_stride, rules_stride;
};

void unwinder_set_maps(struct unwinder *u, const struct unwinder_maps *maps);

/* Loads every registered table not loaded yet.  Returns how many were
 * loaded, or a negative errno from the BPF syscalls; tables that do not
 * fit are counted in the stats (dropped_full), not an error. */
int unwinder_load_pending(struct unwinder *u);

/*
 * A mapping-table slot of the walker for process PID, or DWLEAK_NO_SLOT
 * when all DWLEAK_MAX_PROC_SLOTS are taken (the walker then finds PID's
 * mappings itself, slower).  unwinder_slot_release frees it (NO_SLOT ok).
 */
uint32_t unwinder_slot_take(struct unwinder *u, int pid);
void unwinder_slot_release(struct unwinder *u, uint32_t slot);

/*
 * Tells the walker, in slot SLOT (from unwinder_slot_take; DWLEAK_NO_SLOT:
 * none), where PID's executable mappings with loaded tables are (struct
 * proc_mappings), so it needs no VMA lookup for them, and records every
 * file mapping for naming frames later.  Mappings beyond
 * DWLEAK_MAX_PROC_MAPPINGS are counted in *DROPPED (may be NULL) and left
 * to the walker's fallback.  Returns 1 when the walker now sees a
 * different table, 0 when nothing changed, or a negative errno (-ENOENT:
 * process gone).
 */
int unwinder_publish(struct unwinder *u, int pid, uint32_t slot, uint32_t *dropped);

void unwinder_stats(const struct unwinder *u, struct unwinder_stats *st);

/*
 * Whether a table loaded into the walker's maps stays in user memory too
 * (o->table), for unwinder_image_build: off by default, when loading frees
 * it (the maps hold it; a second copy costs as much memory again).  Set it
 * before the tables to image are loaded: one freed already is not made
 * again.
 */
void unwinder_keep_tables(struct unwinder *u, bool keep);

/* What unwinder_image_build did with each executable mapping of the pid,
 * one count per mapping (a mapping is left out for one reason only). */
struct unwinder_image_stats {
	uint32_t no_file;  /* not a file's: anonymous code (a JIT's), [vdso], [vsyscall] */
	uint32_t mappings; /* file mappings: in_image + every count below */
	uint32_t in_image;
	uint32_t unknown;  /* its object is not registered (unwinder_add_process not
			    * called since it was mapped) */
	uint32_t no_table; /* its object has no table (o->error says why) */
	uint32_t released; /* its object's table was loaded and freed
			    * (unwinder_keep_tables off) */
	uint32_t outside;  /* its file offset lies in no executable segment of the object */
	uint32_t tables;   /* distinct tables in the image */
};

/*
 * The unwind image (base/unwind_image.h, tables/table_image.c) of process
 * PID's code as the tables U holds for it: one image mapping per
 * executable file mapping of PID (read from /proc/PID/maps) whose object
 * has its table in U (o->table), with the bias the walker's mapping
 * entries get (unwinder_publish), so that the preload library's walk
 * (preload/walk.c) looks each pc up where the kernel program does.  Every
 * mapping left out is counted in *ST (may be NULL), none silently; the
 * image has no limit of its own on mappings (the walker's maps have
 * DWLEAK_MAX_PROC_MAPPINGS).  Registers nothing: call unwinder_add_process
 * first for mappings made since.  On success *BLOB is a malloc'd image of
 * *LEN bytes, the caller's to free; on failure *BLOB is NULL.  Returns 0,
 * a negative errno from reading the maps (-ENOENT: process gone), or
 * table_image_build's (-EFBIG, -EINVAL for a table that breaks the image's
 * contract, -ENOMEM).
 */
int unwinder_image_build(const struct unwinder *u, int pid, void **blob, size_t *len,
			 struct unwinder_image_stats *st);

/* Translates runtime address PC in a mapping that starts at START with
 * file offset PGOFF (bytes) of object O into O's ELF address space. */
uint64_t unwind_object_elf_addr(const struct unwind_object *o, uint64_t start, uint64_t pgoff,
				uint64_t pc);

#endif
