/* Protobuf's wire format, the little of it the pprof writer needs: varint
 * and length-delimited fields appended to a growable buffer. */
#ifndef DWLEAK_PROTOBUF_H
#define DWLEAK_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * DATA holds LEN bytes in CAP.  A failed allocation sets OOM and turns every
 * later write into a no-op, so encoders check once at the end.
 */
struct pb_buf {
	uint8_t *data;
	size_t len, cap;
	bool oom;
};

/* Appends the N bytes at P to B (nothing when B is out of memory). */
void pb_buf_put(struct pb_buf *b, const void *p, size_t n);

/* Room for N more bytes at B's end, counted in B->len: where to write
 * them, or NULL (B->oom set) when out of memory. */
void *pb_buf_append(struct pb_buf *b, size_t n);

/* Frees B's bytes and empties it for reuse. */
void pb_buf_free(struct pb_buf *b);

/*
 * Each appends one field numbered FIELD to B (a no-op once B->oom is set):
 *
 * pb_uint: a varint field (uint64, int64 as two's complement, bool).  Zero
 *   is the proto3 default and is left out, as protobuf encoders do.
 * pb_bytes: a length-delimited field: a string, bytes or an embedded message
 *   of N bytes at P.
 * pb_message: an embedded message encoded in MSG, which is emptied for reuse
 *   (its memory kept); MSG's oom carries over to B.
 * pb_packed: a packed repeated varint field of the N values at V (proto3's
 *   default for repeated scalars); nothing when N is 0.
 */
void pb_uint(struct pb_buf *b, unsigned int field, uint64_t v);
void pb_bytes(struct pb_buf *b, unsigned int field, const void *p, size_t n);
void pb_message(struct pb_buf *b, unsigned int field, struct pb_buf *msg);
void pb_packed(struct pb_buf *b, unsigned int field, const uint64_t *v, size_t n);

#endif
