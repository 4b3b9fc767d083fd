/* Draining the preload library's rings of walked records out of a process
 * (see walk_ring_read.h): the directory checked, each LIVE ring's header
 * checked before anything it names is read, the records read in chunks
 * and checked one by one, each ring's error its own. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_kind.h"
#include "dwleak.h"
#include "walk_ring_read.h"

static void __attribute__((format(printf, 3, 4))) say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

#define RING_FAIL(r, e, ...) (say((r)->why, sizeof((r)->why), __VA_ARGS__), (r)->err = (e))

/* The callback's result as a negative errno: anything but 0 is a failure. */
static int read_bytes(walk_ring_read_fn read_mem, void *ctx, uint64_t addr, void *buf, size_t len)
{
	int r = read_mem(ctx, addr, buf, len);

	return r < 0 ? r : r > 0 ? -EIO : 0;
}

/* The memory a ring occupies: its header, data area and the thread's
 * scratch. */
static uint64_t ring_end(const struct walk_ring_ring *r)
{
	return r->ring + WALK_RING_MAP_BYTES(r->data_bits);
}

/* Whether a ring of 2^BITS bytes of data can be at RING: aligned, inside
 * the address range rings may have. */
static bool ring_addr_ok(uint64_t ring, uint32_t bits)
{
	return !(ring % WALK_RING_ALIGN) && ring >= WALK_RING_ADDR_MIN &&
	       ring <= WALK_RING_ADDR_END - WALK_RING_MAP_BYTES(bits);
}

/* Checks the header H of slot S's ring into R (the slot's fields set). */
static int header_check(const struct walk_ring_header *h, struct walk_ring_ring *r)
{
	uint64_t size;

	if (h->magic == 0)
		return RING_FAIL(r, -ENODATA, "slot %u: ring at %#llx wiped (a fork's copy)", r->slot,
				 (unsigned long long)r->ring);
	if (h->magic != WALK_RING_MAGIC || h->version != WALK_RING_VERSION)
		return RING_FAIL(r, -EPROTO, "slot %u: no ring at %#llx (magic %#llx, version %u)", r->slot,
				 (unsigned long long)r->ring, (unsigned long long)h->magic, h->version);
	if (h->data_bits < WALK_RING_BITS_MIN || h->data_bits > WALK_RING_BITS_MAX ||
	    h->mask != (1ull << h->data_bits) - 1)
		return RING_FAIL(r, -EBADMSG, "slot %u: data of 2^%u bytes, mask %#llx", r->slot, h->data_bits,
				 (unsigned long long)h->mask);
	r->data_bits = h->data_bits;
	size = 1ull << h->data_bits;
	if (r->ring > WALK_RING_ADDR_END - WALK_RING_MAP_BYTES(h->data_bits))
		return RING_FAIL(r, -EBADMSG, "slot %u: ring at %#llx of 2^%u bytes past the address space",
				 r->slot, (unsigned long long)r->ring, h->data_bits);
	if (h->tid != r->tid)
		return RING_FAIL(r, -EBADMSG, "slot %u: ring of thread %u, slot of %u", r->slot, h->tid, r->tid);
	r->life = h->life;
	r->tail = r->new_tail = h->tail;
	r->published = h->published;
	r->head = h->head;
	r->records = h->records;
	r->dropped = h->dropped;
	r->retracted = h->retracted;
	r->remembered = h->remembered;
	if ((h->tail | h->published | h->head) % 8)
		return RING_FAIL(r, -EBADMSG, "slot %u: positions not 8-byte aligned (tail %#llx, published %#llx, "
				 "head %#llx)", r->slot, (unsigned long long)h->tail,
				 (unsigned long long)h->published, (unsigned long long)h->head);
	if (h->tail > h->published || h->published > h->head || h->head - h->tail > size)
		return RING_FAIL(r, -EBADMSG, "slot %u: tail %#llx, published %#llx, head %#llx in 2^%u bytes",
				 r->slot, (unsigned long long)h->tail, (unsigned long long)h->published,
				 (unsigned long long)h->head, h->data_bits);
	return 0;
}

/* Whether a record of TYPE and NFRAMES may have FLAGS (walk_ring_abi.h's
 * Stacks named once). */
static bool flags_valid(uint32_t flags, uint32_t type, uint32_t nframes)
{
	uint32_t use = flags & WALK_RING_FLAGS_NAMED;
	bool alloc = type == WALK_RING_REC_ALLOC || type == WALK_RING_REC_CANCELLED ||
		     type == WALK_RING_REC_CANCELLING;

	if (!use)
		return WALK_RING_STACK_SLOT(flags) == 0;
	if (!alloc)
		return false;
	if (use == WALK_RING_FLAG_STACK_DEF)
		return nframes > 0;
	if (use == WALK_RING_FLAG_STACK_REF)
		return nframes == 0;
	return false; /* both */
}

/* Checks record REC (whole in the buffer) at POS, LEN bytes, against ring
 * R's bounds: 0 or R's error. */
static int record_check(const struct walk_ring_record *rec, uint64_t pos, uint64_t len, uint64_t room,
			struct walk_ring_ring *r)
{
	uint32_t type = WALK_RING_CHECK_TYPE(rec->check);

	if (len > room)
		return RING_FAIL(r, -EBADMSG, "slot %u: record at %#llx of %llu bytes crosses the end of the data",
				 r->slot, (unsigned long long)pos, (unsigned long long)len);
	if (pos + len > r->published)
		return RING_FAIL(r, -EBADMSG, "slot %u: record at %#llx of %llu bytes past published %#llx", r->slot,
				 (unsigned long long)pos, (unsigned long long)len, (unsigned long long)r->published);
	if (type != WALK_RING_REC_ALLOC && type != WALK_RING_REC_FREE && type != WALK_RING_REC_REALLOC_FREE &&
	    type != WALK_RING_REC_CANCELLED && type != WALK_RING_REC_CANCELLING)
		return RING_FAIL(r, -EBADMSG, "slot %u: record at %#llx of type %u", r->slot, (unsigned long long)pos,
				 type);
	/* an allocation's PAD is its cancel's (a copy may catch the check
	 * word before the cancel and the pad after it): a free's is 0 */
	if (rec->kind >= ALLOC_KIND_COUNT || rec->end >= WALK_END_COUNT ||
	    (rec->pad && (type == WALK_RING_REC_FREE || type == WALK_RING_REC_REALLOC_FREE)) || !rec->addr)
		return RING_FAIL(r, -EBADMSG, "slot %u: record at %#llx of type %u: kind %u, end %u, flags %#x, pad %u, addr %#llx",
				 r->slot, (unsigned long long)pos, type, rec->kind, rec->end, rec->flags, rec->pad,
				 (unsigned long long)rec->addr);
	/* a name: an allocation's, defined with frames or used without;
	 * no name, no slot bits */
	if (!flags_valid(rec->flags, type, rec->nframes))
		return RING_FAIL(r, -EBADMSG, "slot %u: record at %#llx of type %u and %u frames: flags %#x", r->slot,
				 (unsigned long long)pos, type, rec->nframes, rec->flags);
	return 0;
}

/*
 * Reads ring R's header again after its claim (walk_ring_abi.h's Taking
 * back): R's PUBLISHED becomes the lower of the two reads' and
 * R->short_of says whether the second read's was above it (a record
 * that crosses it is then the next drain's, not an error).  0, or R's
 * error (a header that changed what only a new owner or dwleak changes).
 */
static int published_again(walk_ring_read_fn read_mem, void *rctx, struct walk_ring_ring *r)
{
	struct walk_ring_header h;
	struct walk_ring_ring again = *r;
	int err = read_bytes(read_mem, rctx, r->ring, &h, sizeof(h));

	if (err)
		return RING_FAIL(r, err, "slot %u: reading its ring's header again", r->slot);
	/* the first read's checks, on a copy, and nothing that only a new
	 * owner or dwleak changes changed */
	if (header_check(&h, &again) || again.life != r->life || again.data_bits != r->data_bits ||
	    again.tail != r->tail)
		return RING_FAIL(r, -EBADMSG, "slot %u: its header changed under the claim (thread %u, life %u, "
				 "tail %#llx, published %#llx, head %#llx)", r->slot, h.tid, h.life,
				 (unsigned long long)h.tail, (unsigned long long)h.published,
				 (unsigned long long)h.head);
	if (h.published < r->published) {
		r->published = h.published;
		r->taken_back = true;
	} else if (h.published > r->published) {
		r->short_of = true;
	}
	return 0;
}

/*
 * Reads ring R's records from its tail to its published head, in chunks
 * through BUF, handing each to ON_RECORD.  Returns the callback's nonzero
 * result (the drain stops), else 0 (R->err says whether the ring was read
 * to the end).
 */
static int ring_records(walk_ring_read_fn read_mem, walk_ring_write_fn write_mem, void *rctx,
			walk_ring_record_fn on_record, void *cctx, struct walk_ring_ring *r, uint8_t *buf)
{
	uint64_t size = 1ull << r->data_bits, mask = size - 1, data = r->ring + WALK_RING_DATA_OFFSET;
	uint64_t pos = r->tail, off, span, got, b, len, check;
	const struct walk_ring_record *rec;
	struct walk_ring_rec out;
	int err;

	/* claimed before any record is read, and the write ordered before the
	 * reads (a store-load fence, as the library's cancel makes): a record
	 * the library cancels after this write is freed again as well */
	if (write_mem && pos < r->published) {
		err = write_mem(rctx, r->ring + __builtin_offsetof(struct walk_ring_header, claimed), &r->published,
				sizeof(r->published));
		err = err < 0 ? err : err > 0 ? -EIO : 0;
		if (err)
			return RING_FAIL(r, err, "slot %u: claiming its records", r->slot), 0;
	}
	/* the records below PUBLISHED are read after PUBLISHED was (the
	 * library's release on a weakly ordered CPU pairs with this) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* the header again, after the claim: a record taken back before it
	 * is below the first read's PUBLISHED, not this one's (Taking back) */
	if (write_mem && pos < r->published && (err = published_again(read_mem, rctx, r)))
		return 0;
	while (pos < r->published) {
		off = pos & mask;
		span = r->published - pos < size - off ? r->published - pos : size - off;
		got = span < WALK_RING_READ_CHUNK ? span : WALK_RING_READ_CHUNK;
		err = read_bytes(read_mem, rctx, data + off, buf, got);
		if (err)
			return RING_FAIL(r, err, "slot %u: reading %llu bytes of records at %#llx", r->slot,
					 (unsigned long long)got, (unsigned long long)(data + off)),
			       0;
		/* whole records in the chunk; one cut by its end is read again
		 * at the start of the next */
		for (b = 0; b + 8 <= got;) {
			memcpy(&check, buf + b, 8);
			if (WALK_RING_CHECK_POS(check) != (pos & WALK_RING_POS_MASK))
				return RING_FAIL(r, -EBADMSG, "slot %u: record at %#llx: check word %#llx", r->slot,
						 (unsigned long long)pos, (unsigned long long)check),
				       0;
			if (WALK_RING_CHECK_TYPE(check) == WALK_RING_REC_PAD) {
				if (off + b && pos + (size - off - b) > r->published && r->short_of)
					return 0; /* written after a take-back: the next drain's */
				if (off + b == 0 || pos + (size - off - b) > r->published)
					return RING_FAIL(r, -EBADMSG, "slot %u: pad at %#llx (offset %#llx)", r->slot,
							 (unsigned long long)pos, (unsigned long long)(off + b)),
					       0;
				pos += size - off - b;
				break; /* the chunk reached the end of the data: the next one starts at 0 */
			}
			if (pos + sizeof(*rec) > r->published && r->short_of)
				return 0;
			if (pos + sizeof(*rec) > r->published || sizeof(*rec) > size - off - b)
				return RING_FAIL(r, -EBADMSG, "slot %u: record at %#llx cut by published %#llx or the end",
						 r->slot, (unsigned long long)pos, (unsigned long long)r->published),
				       0;
			/* a chunk holds at least one whole record (WALK_RING_READ_CHUNK is
			 * above the largest, and a shorter span was checked above): a
			 * record cut here is not its first, so the next chunk advances */
			if (b + sizeof(*rec) > got)
				break;
			rec = (const struct walk_ring_record *)(buf + b);
			if (rec->nframes > DWLEAK_MAX_FRAMES)
				return RING_FAIL(r, -EBADMSG, "slot %u: record at %#llx of %u frames", r->slot,
						 (unsigned long long)pos, rec->nframes),
				       0;
			len = WALK_RING_RECORD_BYTES(rec->nframes);
			if (pos + len > r->published && r->short_of)
				return 0;
			if (record_check(rec, pos, len, size - off - b, r))
				return 0;
			if (b + len > got)
				break;
			/* its free is stamping it: this drain ends here, the next
			 * reads it whole (its tail stays before it) */
			if (WALK_RING_CHECK_TYPE(check) == WALK_RING_REC_CANCELLING)
				return 0;
			out = (struct walk_ring_rec){
				.slot = r->slot,
				.tid = r->tid,
				.type = WALK_RING_CHECK_TYPE(check),
				.kind = rec->kind,
				.end = rec->end,
				.fp = rec->flags & WALK_RING_FLAG_FP,
				.nframes = rec->nframes,
				.named = rec->flags & WALK_RING_FLAGS_NAMED,
				.name = WALK_RING_STACK_SLOT(rec->flags),
				.pos = pos,
				.tsc = rec->tsc,
				.freed_tsc = WALK_RING_CHECK_TYPE(check) == WALK_RING_REC_CANCELLED ? rec->tsc + rec->pad : 0,
				.addr = rec->addr,
				.size = rec->size,
				.pcs = (const uint64_t *)rec->pcs,
			};
			err = on_record(cctx, &out);
			if (err)
				return err;
			r->delivered++;
			pos += len;
			b += len;
			r->new_tail = pos;
		}
		r->new_tail = pos;
	}
	return 0;
}

static bool ranges_meet(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1)
{
	return a0 < b1 && b0 < a1;
}

int walk_ring_drain(walk_ring_read_fn read_mem, walk_ring_write_fn write_mem, void *rctx, uint64_t dir,
		    walk_ring_record_fn on_record, void *cctx, struct walk_ring_drain *out)
{
	struct walk_ring_dir *d;
	struct walk_ring_header h;
	uint64_t dir_end = dir + sizeof(*d);
	uint8_t *buf = NULL;
	uint32_t i, j;
	int err;

	memset(out, 0, sizeof(*out));
	out->dir = dir;
	if (dir % 8 || dir < WALK_RING_ADDR_MIN || dir > WALK_RING_ADDR_END - sizeof(*d)) {
		say(out->why, sizeof(out->why), "directory at %#llx", (unsigned long long)dir);
		return -EBADMSG;
	}
	d = malloc(sizeof(*d));
	buf = malloc(WALK_RING_READ_CHUNK);
	if (!d || !buf) {
		free(d);
		free(buf);
		say(out->why, sizeof(out->why), "a chunk buffer");
		return -ENOMEM;
	}
	err = read_bytes(read_mem, rctx, dir, d, sizeof(*d));
	if (err) {
		say(out->why, sizeof(out->why), "reading the directory at %#llx", (unsigned long long)dir);
		goto done;
	}
	if (d->magic != WALK_RING_DIR_MAGIC || d->version != WALK_RING_VERSION || d->nslots != WALK_RING_SLOTS ||
	    d->slot_size != sizeof(struct walk_ring_slot) || d->header_size != sizeof(struct walk_ring_header) ||
	    d->record_size != sizeof(struct walk_ring_record)) {
		say(out->why, sizeof(out->why),
		    "no ring directory at %#llx (magic %#llx, version %u, %u slots of %u bytes, headers %u, "
		    "records %u)", (unsigned long long)dir, (unsigned long long)d->magic, d->version, d->nslots,
		    d->slot_size, d->header_size, d->record_size);
		err = -EPROTO;
		goto done;
	}
	out->data_bits = d->data_bits;
	out->no_slot = d->no_slot;
	out->no_map = d->no_map;
	out->no_claim = d->no_claim;
	out->reclaimed = d->reclaimed;
	out->stopped = d->stopped;
	/* the slots first, headers checked, so that overlaps are known before
	 * any record is read or any tail written back */
	for (i = 0; i < WALK_RING_SLOTS; i++) {
		const struct walk_ring_slot *s = &d->slot[i];
		struct walk_ring_ring *r;

		if (s->state == WALK_RING_SLOT_FREE) {
			if (s->ring && ring_addr_ok(s->ring, WALK_RING_BITS_MAX) &&
			    !read_bytes(read_mem, rctx, s->ring, &h, sizeof(h)) && h.data_bits >= WALK_RING_BITS_MIN &&
			    h.data_bits <= WALK_RING_BITS_MAX)
				out->idle[out->nidle++] = (struct walk_ring_idle){ s->ring, h.data_bits, 0 };
			continue;
		}
		r = &out->ring[out->n++];
		r->slot = i;
		r->tid = s->tid;
		r->ring = s->ring;
		r->tail_addr = s->ring + __builtin_offsetof(struct walk_ring_header, tail);
		if (s->state != WALK_RING_SLOT_LIVE || !s->tid) {
			RING_FAIL(r, -EBADMSG, "slot %u: state %u, thread %u", i, s->state, s->tid);
			continue;
		}
		if (!ring_addr_ok(s->ring, WALK_RING_BITS_MIN)) {
			RING_FAIL(r, -EBADMSG, "slot %u: ring at %#llx", i, (unsigned long long)s->ring);
			continue;
		}
		err = read_bytes(read_mem, rctx, s->ring, &h, sizeof(h));
		if (err) {
			RING_FAIL(r, err, "slot %u: reading its ring's header at %#llx", i, (unsigned long long)s->ring);
			continue;
		}
		header_check(&h, r);
	}
	/* a ring sharing memory with another, or with the directory, is
	 * refused, both of them: a tail written back to one would move the
	 * other's */
	for (i = 0; i < out->n; i++) {
		struct walk_ring_ring *a = &out->ring[i];

		if (a->err && !a->data_bits)
			continue; /* its extent is unknown: nothing of it is read or written */
		if (ranges_meet(a->ring, ring_end(a), dir, dir_end))
			RING_FAIL(a, -EBADMSG, "slot %u: ring at %#llx overlaps the directory", a->slot,
				  (unsigned long long)a->ring);
		for (j = i + 1; j < out->n; j++) {
			struct walk_ring_ring *b = &out->ring[j];

			if ((b->err && !b->data_bits) || !ranges_meet(a->ring, ring_end(a), b->ring, ring_end(b)))
				continue;
			RING_FAIL(a, -EBADMSG, "slot %u: ring at %#llx overlaps slot %u's", a->slot,
				  (unsigned long long)a->ring, b->slot);
			RING_FAIL(b, -EBADMSG, "slot %u: ring at %#llx overlaps slot %u's", b->slot,
				  (unsigned long long)b->ring, a->slot);
		}
	}
	err = 0;
	for (i = 0; i < out->n && !err; i++) {
		struct walk_ring_ring *r = &out->ring[i];

		if (!r->err)
			err = ring_records(read_mem, write_mem, rctx, on_record, cctx, r, buf);
		out->delivered += r->delivered;
		if (r->err)
			out->bad++;
		if (err)
			out->n = i + 1;
	}
done:
	free(d);
	free(buf);
	return err;
}

int walk_ring_tail_write(const struct walk_ring_ring *r, uint64_t *addr, uint64_t *value)
{
	if (!r->delivered && r->new_tail == r->tail)
		return 0;
	*addr = r->tail_addr;
	*value = r->new_tail;
	return 1;
}

int walk_ring_reclaim_plan(const struct walk_ring_drain *d, const struct walk_ring_ring *r,
			   struct walk_ring_write w[3])
{
	uint64_t slot = d->dir + __builtin_offsetof(struct walk_ring_dir, slot) +
			(uint64_t)r->slot * sizeof(struct walk_ring_slot);

	if (!r->err && r->new_tail != r->published)
		return -EBUSY;
	w[0] = (struct walk_ring_write){ slot + __builtin_offsetof(struct walk_ring_slot, state), WALK_RING_SLOT_FREE, 4, 0 };
	w[1] = (struct walk_ring_write){ slot + __builtin_offsetof(struct walk_ring_slot, tid), 0, 4, 0 };
	w[2] = (struct walk_ring_write){ d->dir + __builtin_offsetof(struct walk_ring_dir, reclaimed), d->reclaimed + 1, 8,
					 0 };
	return 3;
}

_Static_assert(WALK_RING_READ_CHUNK >= WALK_RING_RECORD_BYTES(DWLEAK_MAX_FRAMES), "a chunk holds any record");
_Static_assert(WALK_RING_RECORD_BYTES(DWLEAK_MAX_FRAMES) * 2 <= (1ull << WALK_RING_BITS_MIN),
	       "the smallest ring holds two of the largest records");

/* --- Stack names ------------------------------------------------------------ */

/* One name's last definition in one ring. */
struct name_def {
	uint32_t defined;
	uint32_t kind, end, fp;
	uint32_t nframes;
	uint32_t pad;
	uint64_t pcs[DWLEAK_MAX_FRAMES];
};

/* Each ring's names, made when the ring first defines one. */
struct walk_ring_names {
	struct name_def *ring[WALK_RING_SLOTS];
};

struct walk_ring_names *walk_ring_names_new(void)
{
	return calloc(1, sizeof(struct walk_ring_names));
}

void walk_ring_names_free(struct walk_ring_names *n)
{
	size_t i;

	if (!n)
		return;
	for (i = 0; i < WALK_RING_SLOTS; i++)
		free(n->ring[i]);
	free(n);
}

int walk_ring_names_resolve(struct walk_ring_names *n, struct walk_ring_rec *rec)
{
	struct name_def *defs, *d;

	if (!rec->named)
		return 0;
	/* the reader checked both (flags_valid, the directory's slots); a
	 * caller's record may not have been */
	if (rec->slot >= WALK_RING_SLOTS || rec->name >= WALK_RING_STACK_SLOTS || rec->nframes > DWLEAK_MAX_FRAMES)
		return -ENOENT;
	defs = n->ring[rec->slot];
	if (rec->named == WALK_RING_FLAG_STACK_DEF) {
		if (!defs) {
			defs = calloc(WALK_RING_STACK_SLOTS, sizeof(*defs));
			if (!defs)
				return -ENOMEM;
			n->ring[rec->slot] = defs;
		}
		d = &defs[rec->name];
		d->kind = rec->kind;
		d->end = rec->end;
		d->fp = rec->fp;
		d->nframes = rec->nframes;
		memcpy(d->pcs, rec->pcs, rec->nframes * sizeof(*rec->pcs));
		d->defined = 1;
		return 0;
	}
	d = defs ? &defs[rec->name] : NULL;
	if (!d || !d->defined || d->kind != rec->kind || d->end != rec->end || d->fp != rec->fp) {
		rec->nframes = 0;
		return -ENOENT;
	}
	rec->pcs = d->pcs;
	rec->nframes = d->nframes;
	return 0;
}
