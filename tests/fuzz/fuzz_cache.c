/* libFuzzer target for the table cache's entry decoder.  The input is the
 * contents of a cache file, or (first byte FUZZ_AS_PAYLOAD) a payload that
 * is framed correctly first, so that mutations reach table_deserialize()
 * past the zstd and XXH64 checksums a mutated file almost never keeps.
 * Besides not crashing or over-allocating (the payload bound is checked
 * before anything is allocated), an entry that decodes must encode back to
 * an entry that decodes to the same table, and every span of that table
 * must be found again by lookup. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache_entry.h"
#include "table.h"

/* A payload bound of the size libc's would be (a few MiB), and a small one
 * so that the bound's refusal is reached too. */
#define FUZZ_MAX_RAW (8u << 20)
#define FUZZ_SMALL_MAX_RAW 4096u
#define FUZZ_FALLBACK_KEY "dwleak-table v2 input-sha256:00"
#define FUZZ_AS_PAYLOAD 0xa5 /* a byte no entry starts with ("DWLKCACH") */

static int check_span(const struct table_span *span, void *arg)
{
	const struct unwind_table *t = arg;
	const struct unwind_rule *r;

	if (span->start >= span->end)
		abort();
	r = table_lookup(t, span->start, NULL, NULL);
	if (!r || memcmp(r, span->rule, sizeof(*r)) != 0)
		abort();
	r = table_lookup(t, span->end - 1, NULL, NULL);
	if (!r || memcmp(r, span->rule, sizeof(*r)) != 0)
		abort();
	return 0;
}

static bool tables_equal(const struct unwind_table *a, const struct unwind_table *b)
{
	return a->first_page == b->first_page && a->npages == b->npages &&
	       a->nrows == b->nrows && a->nrules == b->nrules &&
	       a->build_id_len == b->build_id_len &&
	       memcmp(a->pages, b->pages, a->npages * sizeof(*a->pages)) == 0 &&
	       memcmp(a->rows, b->rows, a->nrows * sizeof(*a->rows)) == 0 &&
	       memcmp(a->rules, b->rules, a->nrules * sizeof(*a->rules)) == 0;
}

/* The key the entry says it was stored under, so that mutations of a real
 * entry get past the key check; else a fixed one. */
static char *entry_key(const uint8_t *data, size_t size)
{
	uint32_t key_len;
	char *key;

	if (size < CACHE_ENTRY_HEADER_SIZE)
		return strdup(FUZZ_FALLBACK_KEY);
	memcpy(&key_len, data + 12, 4);
	if (key_len > CACHE_ENTRY_MAX_KEY || key_len > size - CACHE_ENTRY_HEADER_SIZE)
		return strdup(FUZZ_FALLBACK_KEY);
	key = malloc(key_len + 1);
	if (key) {
		memcpy(key, data + CACHE_ENTRY_HEADER_SIZE, key_len);
		key[key_len] = '\0';
	}
	return key;
}

/* Decodes entry DATA under KEY and checks what comes out. */
static void decode_and_check(const uint8_t *data, size_t size, const char *key)
{
	struct unwind_table *t = NULL, *back = NULL, *small = NULL;
	uint8_t *again;
	size_t again_len;

	if (cache_entry_decode(data, size, key, FUZZ_SMALL_MAX_RAW, &small) == 0)
		table_free(small);
	if (cache_entry_decode(data, size, key, FUZZ_MAX_RAW, &t) != 0)
		return;
	(void)table_walker_bytes(t);
	table_for_each_span(t, check_span, t);
	if (cache_entry_encode(t, key, &again, &again_len) != 0)
		abort();
	if (cache_entry_decode(again, again_len, key, FUZZ_MAX_RAW, &back) != 0 ||
	    !tables_equal(t, back))
		abort();
	free(again);
	table_free(back);
	table_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *entry;
	size_t len;
	char *key;

	if (size && data[0] == FUZZ_AS_PAYLOAD) {
		if (cache_entry_pack(data + 1, size - 1, FUZZ_FALLBACK_KEY, &entry, &len) != 0)
			abort();
		decode_and_check(entry, len, FUZZ_FALLBACK_KEY);
		free(entry);
		return 0;
	}
	key = entry_key(data, size);
	if (key)
		decode_and_check(data, size, key);
	free(key);
	return 0;
}
