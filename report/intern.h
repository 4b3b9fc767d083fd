/* Interning byte strings to dense ids 0, 1, 2, ... in order of first
 * appearance: pprof's string, function, location and mapping tables. */
#ifndef DWLEAK_INTERN_H
#define DWLEAK_INTERN_H

#include <stddef.h>
#include <stdint.h>

/*
 * Gives each distinct key (any bytes) the id 0, 1, 2, ... in order of first
 * appearance.  KEYS[id] owns a copy of the key; SLOTS is an open-addressing
 * hash table of id + 1 (0 = empty), at most half full.
 */
struct intern {
	struct ikey {
		uint8_t *bytes;
		size_t len;
	} *keys;
	size_t n, cap;
	uint32_t *slots;
	size_t nslots; /* a power of two */
};

/* Returns the id of KEY (LEN bytes), adding it when new; or -ENOMEM.
 * Looking up a key already there never fails.  T starts zeroed. */
long intern_get(struct intern *t, const void *key, size_t len);

/* Frees what T holds and zeroes it. */
void intern_free(struct intern *t);

#endif
