/* The on-disk form of a compiled unwind table, so the table cache can keep
 * tables between runs without trusting what it reads back. */
#ifndef DWLEAK_TABLE_SERIALIZE_H
#define DWLEAK_TABLE_SERIALIZE_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

/*
 * Version of the serialized form AND of what the compiler puts in a table.
 * Bump it whenever either changes (a new field, a different row split, a
 * fixed rule): the table cache keys on it, so old entries stop matching.
 */
#define TABLE_FORMAT_VERSION 3

/*
 * Layout, every integer little-endian, no padding:
 *   header (TABLE_SER_HEADER_SIZE bytes)
 *     0  magic "DWLKTABL"           8  u32 version   12 u32 header size
 *    16  u64 first_page            24  u32 npages    28 u32 nrows
 *    32  u32 nrules                36  u32 nfdes     40 u32 nfdes_eh
 *    44  u32 nfdes_debug           48  u32 nfdes_bad 52 u32 build_id_len
 *    56  u64 covered_bytes         64  u64 supported_bytes
 *    72  u8 build_id[64]           (bytes past build_id_len are zero)
 *   136  u32 arch                  (enum unwind_arch)
 *   pages  npages x { u32 first_row, u32 nrows }
 *   rows   nrows  x { u16 pc_low, u16 rule }
 *   rules  nrules x { s32 cfa_off, s32 rbp_off, s32 rbx_off, u8 cfa_type, u8 rbp_type, u8 rbx_type, u8 flags }
 */
#define TABLE_SER_MAGIC "DWLKTABL"
#define TABLE_SER_HEADER_SIZE 140

/* The encoded size of a table with these counts (u64: callers bound
 * counts that do not fit the table's own fields). */
uint64_t table_serialized_size(uint64_t npages, uint64_t nrows, uint64_t nrules);

/*
 * Encodes T into a new malloc'd buffer stored at *BUF (the caller frees it)
 * with its length at *LEN.  Returns 0, -EINVAL when T is inconsistent
 * (NULL arrays with non-zero counts, build_id_len too large), -ENOMEM.
 */
int table_serialize(const struct unwind_table *t, void **buf, size_t *len);

/*
 * Decodes LEN bytes at BUF (only read) into a new table stored at *OUT, to
 * be released with table_free().  Every count, offset, index, order and
 * enum is checked; returns -EBADMSG on any inconsistency (including a
 * different version), -ENOMEM, and 0 on success.
 */
int table_deserialize(const void *buf, size_t len, struct unwind_table **out);

#endif
