/* Encodes compiled unwind tables into a versioned little-endian byte stream
 * and decodes them back.  Decoding treats its input as hostile: a cache file
 * can be truncated, corrupted or written by another version, and a table
 * that passes here goes straight into BPF maps the walker indexes blindly. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "table_serialize.h"

#define PAGE_SER_SIZE 8
#define ROW_SER_SIZE 4
#define RULE_SER_SIZE 16
#define MAX_FIRST_PAGE (UINT64_MAX >> UNWIND_PAGE_SHIFT) /* last page of a 64-bit space */

/* A write cursor into a buffer sized up front. */
struct wcur {
	uint8_t *p;
};

static void put_u8(struct wcur *w, uint8_t v)
{
	*w->p++ = v;
}

static void put_u16(struct wcur *w, uint16_t v)
{
	put_u8(w, (uint8_t)v);
	put_u8(w, (uint8_t)(v >> 8));
}

static void put_u32(struct wcur *w, uint32_t v)
{
	put_u16(w, (uint16_t)v);
	put_u16(w, (uint16_t)(v >> 16));
}

static void put_u64(struct wcur *w, uint64_t v)
{
	put_u32(w, (uint32_t)v);
	put_u32(w, (uint32_t)(v >> 32));
}

static void put_bytes(struct wcur *w, const void *src, size_t n)
{
	memcpy(w->p, src, n);
	w->p += n;
}

/* A read cursor; reading past END is a bug in the length checks, so the
 * getters still refuse and latch BAD rather than read out of bounds. */
struct rcur {
	const uint8_t *p;
	const uint8_t *end;
	bool bad;
};

static uint8_t get_u8(struct rcur *r)
{
	if (r->p >= r->end) {
		r->bad = true;
		return 0;
	}
	return *r->p++;
}

static uint16_t get_u16(struct rcur *r)
{
	uint16_t lo = get_u8(r);

	return (uint16_t)(lo | get_u8(r) << 8);
}

static uint32_t get_u32(struct rcur *r)
{
	uint32_t lo = get_u16(r);

	return lo | (uint32_t)get_u16(r) << 16;
}

static uint64_t get_u64(struct rcur *r)
{
	uint64_t lo = get_u32(r);

	return lo | (uint64_t)get_u32(r) << 32;
}

static void get_bytes(struct rcur *r, void *dst, size_t n)
{
	if ((size_t)(r->end - r->p) < n) {
		r->bad = true;
		memset(dst, 0, n);
		return;
	}
	memcpy(dst, r->p, n);
	r->p += n;
}

uint64_t table_serialized_size(uint64_t npages, uint64_t nrows, uint64_t nrules)
{
	return TABLE_SER_HEADER_SIZE + npages * PAGE_SER_SIZE + nrows * ROW_SER_SIZE +
	       nrules * RULE_SER_SIZE;
}

static void write_header(struct wcur *w, const struct unwind_table *t)
{
	uint8_t id[TABLE_BUILD_ID_MAX] = { 0 };

	memcpy(id, t->build_id, t->build_id_len);
	put_bytes(w, TABLE_SER_MAGIC, 8);
	put_u32(w, TABLE_FORMAT_VERSION);
	put_u32(w, TABLE_SER_HEADER_SIZE);
	put_u64(w, t->first_page);
	put_u32(w, t->npages);
	put_u32(w, t->nrows);
	put_u32(w, t->nrules);
	put_u32(w, t->nfdes);
	put_u32(w, t->nfdes_eh);
	put_u32(w, t->nfdes_debug);
	put_u32(w, t->nfdes_bad);
	put_u32(w, t->build_id_len);
	put_u64(w, t->covered_bytes);
	put_u64(w, t->supported_bytes);
	put_bytes(w, id, sizeof(id));
	put_u32(w, t->arch);
}

static void write_arrays(struct wcur *w, const struct unwind_table *t)
{
	uint32_t i;

	for (i = 0; i < t->npages; i++) {
		put_u32(w, t->pages[i].first_row);
		put_u32(w, t->pages[i].nrows);
	}
	for (i = 0; i < t->nrows; i++) {
		put_u16(w, t->rows[i].pc_low);
		put_u16(w, t->rows[i].rule);
	}
	for (i = 0; i < t->nrules; i++) {
		put_u32(w, (uint32_t)t->rules[i].cfa_off);
		put_u32(w, (uint32_t)t->rules[i].rbp_off);
		put_u32(w, (uint32_t)t->rules[i].rbx_off);
		put_u8(w, t->rules[i].cfa_type);
		put_u8(w, t->rules[i].rbp_type);
		put_u8(w, t->rules[i].rbx_type);
		put_u8(w, t->rules[i].flags);
	}
}

int table_serialize(const struct unwind_table *t, void **buf, size_t *len)
{
	struct wcur w;
	uint64_t size;
	uint8_t *p;

	if (!t || t->build_id_len > TABLE_BUILD_ID_MAX || (t->npages && !t->pages) ||
	    (t->nrows && !t->rows) || (t->nrules && !t->rules))
		return -EINVAL;
	size = table_serialized_size(t->npages, t->nrows, t->nrules);
	if (size > SIZE_MAX)
		return -EINVAL;
	p = malloc((size_t)size);
	if (!p)
		return -ENOMEM;
	w.p = p;
	write_header(&w, t);
	write_arrays(&w, t);
	*buf = p;
	*len = (size_t)size;
	return 0;
}

/* Reads and checks the header into T; the arrays are not allocated yet. */
static int read_header(struct rcur *r, size_t len, struct unwind_table *t)
{
	char magic[8];
	uint32_t version, hdr_size;
	uint32_t i;

	get_bytes(r, magic, sizeof(magic));
	version = get_u32(r);
	hdr_size = get_u32(r);
	t->first_page = get_u64(r);
	t->npages = get_u32(r);
	t->nrows = get_u32(r);
	t->nrules = get_u32(r);
	t->nfdes = get_u32(r);
	t->nfdes_eh = get_u32(r);
	t->nfdes_debug = get_u32(r);
	t->nfdes_bad = get_u32(r);
	t->build_id_len = get_u32(r);
	t->covered_bytes = get_u64(r);
	t->supported_bytes = get_u64(r);
	get_bytes(r, t->build_id, sizeof(t->build_id));
	t->arch = get_u32(r);

	if (r->bad || memcmp(magic, TABLE_SER_MAGIC, sizeof(magic)) != 0 ||
	    version != TABLE_FORMAT_VERSION || hdr_size != TABLE_SER_HEADER_SIZE)
		return -EBADMSG;
	if (table_serialized_size(t->npages, t->nrows, t->nrules) != len)
		return -EBADMSG;
	if (t->nrules > UNWIND_MAX_RULES || t->first_page > MAX_FIRST_PAGE ||
	    t->npages > MAX_FIRST_PAGE - t->first_page + 1)
		return -EBADMSG;
	if (t->build_id_len > TABLE_BUILD_ID_MAX || t->supported_bytes > t->covered_bytes ||
	    (t->arch != UNWIND_ARCH_X86_64 && t->arch != UNWIND_ARCH_AARCH64))
		return -EBADMSG;
	for (i = t->build_id_len; i < TABLE_BUILD_ID_MAX; i++)
		if (t->build_id[i])
			return -EBADMSG;
	return 0;
}

static int alloc_arrays(struct unwind_table *t)
{
	/* calloc(0) may return NULL: always ask for at least one element. */
	t->pages = calloc(t->npages ? t->npages : 1, sizeof(*t->pages));
	t->rows = calloc(t->nrows ? t->nrows : 1, sizeof(*t->rows));
	t->rules = calloc(t->nrules ? t->nrules : 1, sizeof(*t->rules));
	if (!t->pages || !t->rows || !t->rules)
		return -ENOMEM;
	return 0;
}

static void read_arrays(struct rcur *r, struct unwind_table *t)
{
	uint32_t i;

	for (i = 0; i < t->npages; i++) {
		t->pages[i].first_row = get_u32(r);
		t->pages[i].nrows = get_u32(r);
	}
	for (i = 0; i < t->nrows; i++) {
		t->rows[i].pc_low = get_u16(r);
		t->rows[i].rule = get_u16(r);
	}
	for (i = 0; i < t->nrules; i++) {
		t->rules[i].cfa_off = (int32_t)get_u32(r);
		t->rules[i].rbp_off = (int32_t)get_u32(r);
		t->rules[i].rbx_off = (int32_t)get_u32(r);
		t->rules[i].cfa_type = get_u8(r);
		t->rules[i].rbp_type = get_u8(r);
		t->rules[i].rbx_type = get_u8(r);
		t->rules[i].flags = get_u8(r);
	}
}

static bool rules_valid(const struct unwind_table *t)
{
	uint32_t i;

	for (i = 0; i < t->nrules; i++) {
		const struct unwind_rule *rule = &t->rules[i];

		if (rule->cfa_type > UNWIND_CFA_UNSUPPORTED ||
		    rule->rbp_type > UNWIND_RBP_UNSUPPORTED ||
		    rule->rbx_type > UNWIND_RBP_UNSUPPORTED || (rule->flags & ~UNWIND_RULE_RA_SIGNED) ||
		    (rule->flags && t->arch != UNWIND_ARCH_AARCH64))
			return false;
	}
	return true;
}

/*
 * Rows must be sorted by address, so the non-empty pages take the rows in
 * order, back to back, and together take all of them; within a page pc_low
 * strictly increases.  An empty page's first_row is not used by anyone.
 */
static bool pages_valid(const struct unwind_table *t)
{
	uint64_t next_row = 0;
	uint32_t i, j;

	for (i = 0; i < t->npages; i++) {
		const struct unwind_page *pg = &t->pages[i];

		if (pg->nrows == 0)
			continue;
		if (pg->first_row != next_row || (uint64_t)pg->first_row + pg->nrows > t->nrows)
			return false;
		for (j = 1; j < pg->nrows; j++)
			if (t->rows[pg->first_row + j].pc_low <= t->rows[pg->first_row + j - 1].pc_low)
				return false;
		next_row += pg->nrows;
	}
	return next_row == t->nrows;
}

static bool rows_valid(const struct unwind_table *t)
{
	uint32_t i;

	for (i = 0; i < t->nrows; i++)
		if (t->rows[i].rule >= t->nrules)
			return false;
	return true;
}

int table_deserialize(const void *buf, size_t len, struct unwind_table **out)
{
	struct rcur r = { .p = buf, .end = (const uint8_t *)buf + len };
	struct unwind_table *t;
	int ret;

	if (!buf)
		return -EBADMSG;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	ret = read_header(&r, len, t);
	if (ret)
		goto err;
	ret = alloc_arrays(t);
	if (ret)
		goto err;
	read_arrays(&r, t);
	if (r.bad || r.p != r.end || !rules_valid(t) || !rows_valid(t) || !pages_valid(t)) {
		ret = -EBADMSG;
		goto err;
	}
	*out = t;
	return 0;
err:
	table_free(t);
	return ret;
}
