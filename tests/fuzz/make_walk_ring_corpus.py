#!/usr/bin/env python3
"""Seeds for fuzz_walk_ring: a control word (fix 3: the fuzzer makes the
directory, slot 0 and its ring's header valid) and memory holding a
directory at 0 whose slot 0 names a ring at 4288 (4 KiB of data), its
published head set so that the records written into it are read: none
(empty), one free, an allocation of 3 frames after a pad (wrapped), a
stack named once: defined with 3 frames, then used without (named)."""
import os
import struct
import sys

DIR_SIZE = 128 + 16 * 256
RING = 4288  # 64-byte aligned, after the directory
HEADER = 256
DATA = 4096


def record(pos, typ, nframes=0, kind=0, end=0, addr=0x1000, size=0, pcs=(), flags=0):
    return struct.pack("<QBBBBIQQQ", (pos << 8) | typ, nframes, kind, end, flags, 0, 0, addr, size) + b"".join(
        struct.pack("<Q", p) for p in pcs)


def seed(tail, published, records):
    mem = bytearray(RING + HEADER + DATA)
    struct.pack_into("<QII", mem, 128, 0x100000 + RING, 1, 1)  # slot 0: ring, tid, LIVE
    # the header: the fuzzer fixes magic, bits (12 + data_bits % 2: keep 0), tail
    # (tail % 2^20), published (tail + published % 4097), head
    struct.pack_into("<Q", mem, RING + 64, 0)  # head: published + 0
    struct.pack_into("<Q", mem, RING + 72, published - tail)
    struct.pack_into("<Q", mem, RING + 128, tail)
    for off, rec in records:
        mem[RING + HEADER + off:RING + HEADER + off + len(rec)] = rec
    return struct.pack("<Q", 3) + bytes(mem)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {
        "empty": seed(0, 0, []),
        "one_free": seed(0, 40, [(0, record(0, 2))]),
        "wrapped": seed(4000, 4096 + 64, [(4000, record(4000, 4)),
                                          (0, record(4096, 1, 3, 0, 2, 0x2000, 64, (1, 2, 3)))]),
        # flags: STACK_DEF 0x02 / STACK_REF 0x04, the name (5) from bit 3
        "named": seed(0, 104, [(0, record(0, 1, 3, 0, 0, 0x2000, 64, (1, 2, 3), 0x02 | 5 << 3)),
                               (64, record(64, 1, 0, 0, 0, 0x3000, 64, (), 0x04 | 5 << 3))]),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


main()
