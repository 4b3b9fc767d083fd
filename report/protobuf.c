/* Protobuf's wire format, the little of it the pprof writer needs: varint
 * and length-delimited fields appended to a growable buffer, so dwleak needs
 * no protobuf library. */
#include <stdlib.h>
#include <string.h>

#include "protobuf.h"

/* The wire types used (protobuf encoding guide: "Message Structure"). */
enum wire_type { WIRE_VARINT = 0, WIRE_LEN = 2 };

/* ---- A growable byte buffer ---- */

static bool pb_buf_grow(struct pb_buf *b, size_t n);

/* Room for N more bytes at B's end: true, or false with B->oom set. */
static inline bool pb_buf_reserve(struct pb_buf *b, size_t n)
{
	if (__builtin_expect(!b->oom && n <= b->cap - b->len, 1))
		return true;
	return pb_buf_grow(b, n);
}

static bool pb_buf_grow(struct pb_buf *b, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (b->oom)
		return false;
	cap = b->cap ? b->cap : 256;
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2) {
			b->oom = true;
			return false;
		}
		cap *= 2;
	}
	p = realloc(b->data, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

void pb_buf_put(struct pb_buf *b, const void *p, size_t n)
{
	if (n && pb_buf_reserve(b, n)) {
		memcpy(b->data + b->len, p, n);
		b->len += n;
	}
}

void *pb_buf_append(struct pb_buf *b, size_t n)
{
	void *p;

	if (!pb_buf_reserve(b, n))
		return NULL;
	p = b->data + b->len;
	b->len += n;
	return p;
}

void pb_buf_free(struct pb_buf *b)
{
	free(b->data);
	*b = (struct pb_buf){ 0 };
}

/* ---- Fields ---- */

/* written in place: a profile of 10,000 stacks holds millions of them */
static void pb_varint(struct pb_buf *b, uint64_t v)
{
	uint8_t *d;

	if (!pb_buf_reserve(b, 10))
		return;
	d = b->data + b->len;
	while (v > 0x7f) {
		*d++ = (uint8_t)(v & 0x7f) | 0x80;
		v >>= 7;
	}
	*d++ = (uint8_t)v;
	b->len = (size_t)(d - b->data);
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v > 0x7f) {
		v >>= 7;
		n++;
	}
	return n;
}

static void pb_key(struct pb_buf *b, unsigned int field, enum wire_type wt)
{
	pb_varint(b, (uint64_t)field << 3 | wt);
}

void pb_uint(struct pb_buf *b, unsigned int field, uint64_t v)
{
	if (!v)
		return;
	pb_key(b, field, WIRE_VARINT);
	pb_varint(b, v);
}

void pb_bytes(struct pb_buf *b, unsigned int field, const void *p, size_t n)
{
	pb_key(b, field, WIRE_LEN);
	pb_varint(b, n);
	pb_buf_put(b, p, n);
}

void pb_message(struct pb_buf *b, unsigned int field, struct pb_buf *msg)
{
	if (msg->oom)
		b->oom = true;
	pb_bytes(b, field, msg->data, msg->len);
	msg->len = 0;
}

void pb_packed(struct pb_buf *b, unsigned int field, const uint64_t *v, size_t n)
{
	size_t len = 0, i;

	if (!n)
		return;
	for (i = 0; i < n; i++)
		len += varint_len(v[i]);
	pb_key(b, field, WIRE_LEN);
	pb_varint(b, len);
	for (i = 0; i < n; i++)
		pb_varint(b, v[i]);
}
