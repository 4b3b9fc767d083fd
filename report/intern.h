/* Interning byte strings to dense ids 0, 1, 2, ... in order of first
 * appearance: pprof's string, function, location and mapping tables. */
#ifndef DWLEAK_INTERN_H
#define DWLEAK_INTERN_H

#include <stddef.h>
#include <stdint.h>

/*
 * Gives each distinct key (any bytes) the id 0, 1, 2, ... in order of first
 * appearance.  KEYS[id] points to a copy of the key, kept in CHUNKS (one
 * malloc per 64 KiB of keys, not one per key: a profile of 10,000 stacks
 * interns 300,000 of them, and frees them all at once); SLOTS is an open-addressing
 * hash table, at most half full, of id + 1 (0 = empty) with the low 32 bits
 * of the key's hash, so that probing and growing compare and place keys
 * without reading them (a profile of 10,000 stacks interns 300,000 keys
 * scattered in memory).
 */
struct intern {
	struct ikey {
		uint8_t *bytes;
		size_t len;
	} *keys;
	size_t n, cap;
	struct islot {
		uint32_t id;   /* id + 1; 0 = empty */
		uint32_t hash; /* the key's hash, low 32 bits: its home slot and a tag */
	} *slots;
	size_t nslots; /* a power of two, at most 2^32 */
	struct intern_chunk *chunks; /* the newest first; its free room: */
	size_t chunk_used, chunk_size;
};

/* Returns the id of KEY (LEN bytes), adding it when new; or -ENOMEM.
 * Looking up a key already there never fails.  T starts zeroed. */
long intern_get(struct intern *t, const void *key, size_t len);

/* Frees what T holds and zeroes it. */
void intern_free(struct intern *t);

#endif
