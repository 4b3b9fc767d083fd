/* The bytes a table is compiled from, read once (with pread, never mapped),
 * digested and compiled from the same buffers: a cached table is then bound
 * to exactly the CFI it describes, whatever build id the file claims.
 * Internal to tables/: table_compile.c and table_cache.c share it. */
#ifndef DWLEAK_TABLE_INPUT_H
#define DWLEAK_TABLE_INPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "elf_image.h"
#include "table.h"

#define TABLE_INPUT_DIGEST_SIZE 32 /* SHA-256 */

/*
 * No CFI section, stored or decompressed, may be larger than this, nor than
 * TABLE_CFI_PER_CODE_BYTE times the object's code plus TABLE_CFI_SLACK.
 * CFI describes code: an FDE is 20-odd bytes and covers a function of at
 * least a few bytes, and compilers emit well under 2 bytes of CFI per byte
 * of code even for the tiniest functions (libc: 0.1), so 16x is never
 * reached by a real object; the absolute cap is 10x the largest CFI section
 * of any binary we know of (a browser's .eh_frame, ~25 MiB).
 */
#define TABLE_MAX_CFI_BYTES (256ull << 20)
#define TABLE_CFI_PER_CODE_BYTE 16
#define TABLE_CFI_SLACK (1ull << 20)

/* A table spans at most this many pages (8 GiB of addresses from its first
 * FDE to its last); more is refused.  The x86-64 small and medium code models
 * keep all of an object's code within 2 GiB, so no real object comes near,
 * and the page array a hostile file can ask for stays at 1 MiB. */
#define TABLE_MAX_PAGES (1u << 17)

/* Where each CFI section of a file is kept in a table_input_file. */
enum table_cfi_part {
	CFI_PART_EH_FRAME,
	CFI_PART_EH_FRAME_HDR,
	CFI_PART_DEBUG_FRAME,
	CFI_PART_COUNT,
};

/*
 * One ELF file of an input: its headers and its CFI sections as stored in
 * the file (still compressed when they are; data NULL when absent or, for
 * .eh_frame_hdr, unreadable).  TRUSTED: the file is owned by root or by the
 * effective user, and neither its group nor others may write it.
 */
struct table_input_file {
	struct elf_image img;
	struct elf_section sec[CFI_PART_COUNT];
	bool trusted;
};

/*
 * Everything table_compile_input() reads: the object, the separate debug
 * file's .debug_frame when OPTS named one (HAVE_DBG), the object's build id
 * and the size bound of its CFI.  Owns its buffers; no file stays open.
 */
struct table_input {
	struct table_input_file obj;
	struct table_input_file dbg;
	bool have_dbg;
	uint64_t cfi_limit; /* the bound on any CFI section, see TABLE_MAX_CFI_BYTES */
	uint8_t build_id[TABLE_BUILD_ID_MAX];
	uint32_t build_id_len; /* 0: the object has no build id */
};

/*
 * Reads the ELF object open at FD (its offset is not used; it stays open
 * and owned by the caller) and the debug file OPTS->debug_path (may be
 * NULL): headers, CFI sections and build id, each size checked against the
 * file and the bounds above before anything is allocated for it.  Returns
 * 0, or the negative errno table_compile_fd() documents with
 * table_last_error() set; on failure nothing needs releasing.
 */
int table_input_read_fd(int fd, const struct table_opts *opts, struct table_input *in);

/* Same on an image in memory (borrowed: it must outlive IN); never trusted. */
int table_input_read_mem(const void *image, size_t size, const struct table_opts *opts,
			 struct table_input *in);

/* The object's enum unwind_arch, from its ELF machine (checked on read). */
uint8_t table_input_arch(const struct table_input *in);

/* Frees IN's buffers. */
void table_input_release(struct table_input *in);

/*
 * SHA-256 over everything the compile reads, each part length-prefixed:
 * TABLE_FORMAT_VERSION, then for the object and the debug file their ELF
 * and program headers and, for each CFI section, its header and stored
 * bytes, then the build id.  Equal digests mean equal tables.
 */
void table_input_digest(const struct table_input *in, uint8_t out[TABLE_INPUT_DIGEST_SIZE]);

/* True when every file of IN is trusted (see struct table_input_file). */
bool table_input_trusted(const struct table_input *in);

/* The most bytes table_serialize() can produce for a table compiled from
 * IN: a cache entry that claims more cannot be this input's. */
uint64_t table_input_max_serialized(const struct table_input *in);

/* Compiles IN (defined in table_compile.c); as table_compile_fd(). */
int table_compile_input(const struct table_input *in, struct unwind_table **out);

/* Sets table_last_error()'s message for this thread (table_compile.c). */
void table_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
