/* libFuzzer target for dwleak's reader of the preload library's rings of
 * walked records (target/walk_ring_read.c), over "process memory" that is
 * the fuzzer's bytes: a process writes anything it likes into its own
 * rings.  The input: a control word (8 bytes), then the memory, at FUZZ_MEMORY_BASE.
 * The control word places the directory in the memory and may make parts
 * of it valid first (its identity; then its slots' states, threads and
 * rings moved into the memory; then each ring's header, its positions
 * near each other), so that most inputs reach the records instead of
 * stopping at a magic.  Besides not crashing or reading past the memory:
 * every error is one the reader documents, with a reason; every record
 * handed on is within its bounds (its pcs all read here); a ring's new
 * tail lies between its tail and its published head. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_kind.h"
#include "dwleak.h"
#include "fuzz_memory_image.h"
#include "walk_ring_read.h"

struct sink {
	struct walk_ring_names *names; /* the stack names the records define and use */
	uint64_t records, sum;
	uint32_t stop_at; /* stop the drain at this record (0: never) */
};

static int on_record(void *ctx, const struct walk_ring_rec *r)
{
	struct sink *s = ctx;
	struct walk_ring_rec x = *r;
	uint32_t i;
	int err;

	if (r->nframes > DWLEAK_MAX_FRAMES || r->kind >= ALLOC_KIND_COUNT || r->end >= WALK_END_COUNT || r->fp > 1 ||
	    !r->addr || r->pos % 8 ||
	    (r->type != WALK_RING_REC_ALLOC && r->type != WALK_RING_REC_FREE && r->type != WALK_RING_REC_REALLOC_FREE &&
	     r->type != WALK_RING_REC_CANCELLED))
		abort();
	for (i = 0; i < r->nframes; i++)
		s->sum += r->pcs[i]; /* ASan: every pc inside the reader's buffer */
	/* a name: defined with frames, used without, an allocation's */
	if (r->named && ((r->named != WALK_RING_FLAG_STACK_DEF && r->named != WALK_RING_FLAG_STACK_REF) ||
			 (r->named == WALK_RING_FLAG_STACK_REF) != (r->nframes == 0) ||
			 r->name >= WALK_RING_STACK_SLOTS || r->type == WALK_RING_REC_FREE ||
			 r->type == WALK_RING_REC_REALLOC_FREE))
		abort();
	err = walk_ring_names_resolve(s->names, &x);
	if (err && err != -ENOENT && err != -ENOMEM)
		abort();
	if (!err && x.nframes > DWLEAK_MAX_FRAMES)
		abort();
	for (i = 0; !err && i < x.nframes; i++)
		s->sum += x.pcs[i]; /* ASan: a named stack's frames inside its definition */
	if (++s->records == s->stop_at)
		return -ECANCELED;
	return 0;
}

static uint64_t place(uint64_t v, size_t len, uint64_t align)
{
	return (FUZZ_MEMORY_BASE + (len ? v % len : 0)) & ~(align - 1);
}

/* Makes the directory at D (fully inside the memory of LEN bytes, at
 * BYTES) valid in part: FIX 1 its identity, 2 its slots too, 3 their
 * rings' headers where they fit. */
static void fix_dir(uint8_t *bytes, size_t len, struct walk_ring_dir *d, unsigned fix)
{
	struct walk_ring_header h;
	uint32_t i;
	uint64_t at;

	d->magic = WALK_RING_DIR_MAGIC;
	d->version = WALK_RING_VERSION;
	d->nslots = WALK_RING_SLOTS;
	d->slot_size = sizeof(struct walk_ring_slot);
	d->header_size = sizeof(struct walk_ring_header);
	d->record_size = sizeof(struct walk_ring_record);
	if (fix < 2)
		return;
	for (i = 0; i < WALK_RING_SLOTS; i++) {
		struct walk_ring_slot *s = &d->slot[i];

		s->state = i == 0 || (s->state & 1) ? WALK_RING_SLOT_LIVE : WALK_RING_SLOT_FREE;
		if (s->state == WALK_RING_SLOT_FREE)
			continue;
		s->tid = s->tid ? s->tid : 1;
		s->ring = place(s->ring, len, WALK_RING_ALIGN);
		at = s->ring - FUZZ_MEMORY_BASE;
		if (fix < 3 || at + sizeof(h) > len)
			continue;
		memcpy(&h, bytes + at, sizeof(h));
		h.magic = WALK_RING_MAGIC;
		h.version = WALK_RING_VERSION;
		h.data_bits = WALK_RING_BITS_MIN + h.data_bits % 2;
		h.mask = (1ull << h.data_bits) - 1;
		h.tid = s->tid;
		h.tail = (h.tail % (1ull << 20)) & ~7ull;
		h.published = h.tail + ((h.published % ((1ull << h.data_bits) + 1)) & ~7ull);
		h.head = h.published + ((h.head % ((1ull << h.data_bits) - (h.published - h.tail) + 1)) & ~7ull);
		memcpy(bytes + at, &h, sizeof(h));
	}
}

static int known_error(int err)
{
	return err == -EPROTO || err == -EBADMSG || err == -EFAULT || err == -ENODATA || err == -ENOMEM;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct walk_ring_drain out;
	struct sink sink = { .names = walk_ring_names_new() };
	struct fuzz_memory m;
	uint64_t control, dir, addr, value;
	uint8_t *bytes;
	unsigned fix;
	uint32_t i;
	int err;

	if (!sink.names)
		abort();
	if (size < 8) {
		walk_ring_names_free(sink.names);
		return 0;
	}
	memcpy(&control, data, 8);
	m.len = size - 8;
	bytes = malloc(m.len ? m.len : 1);
	if (!bytes)
		abort();
	memcpy(bytes, data + 8, m.len);
	m.bytes = bytes;
	fix = control & 3;
	sink.stop_at = (control >> 2) & 15;
	/* the directory's place: anywhere, 8-byte aligned but in one input of 8 */
	dir = place(control >> 8, m.len, 8) + (((control >> 6) & 3) == 3 && ((control >> 40) & 7) == 7);
	if (fix && dir - FUZZ_MEMORY_BASE + sizeof(struct walk_ring_dir) <= m.len) {
		struct walk_ring_dir d;

		memcpy(&d, bytes + (dir - FUZZ_MEMORY_BASE), sizeof(d));
		fix_dir(bytes, m.len, &d, fix);
		memcpy(bytes + (dir - FUZZ_MEMORY_BASE), &d, sizeof(d));
	}
	err = walk_ring_drain(fuzz_memory_read, fuzz_memory_write, &m, dir, on_record, &sink, &out);
	if (err == -ECANCELED) {
		if (!sink.stop_at || sink.records != sink.stop_at)
			abort();
	} else if (err) {
		if (!known_error(err) || !out.why[0])
			abort();
	}
	if (!err || err == -ECANCELED) {
		if (out.n > WALK_RING_SLOTS || out.delivered + (err != 0) != sink.records)
			abort();
		for (i = 0; i < out.n; i++) {
			const struct walk_ring_ring *r = &out.ring[i];

			if (r->err && r->err != -ECANCELED && (!known_error(r->err) || !r->why[0]))
				abort();
			if (r->new_tail < r->tail || (!r->err && r->new_tail > r->published))
				abort();
			if (walk_ring_tail_write(r, &addr, &value) && (addr != r->tail_addr || value != r->new_tail))
				abort();
		}
	}
	walk_ring_names_free(sink.names);
	free(bytes);
	return 0;
}
