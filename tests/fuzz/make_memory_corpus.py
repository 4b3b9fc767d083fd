#!/usr/bin/env python3
"""Seeds for fuzz_memory: glibc arenas as alloc_state.c's shape test wants
them (8 bytes of base address, then memory), some at an offset, one with a
bin in use, one broken.  usage: make_memory_corpus.py DIR"""
import os, struct, sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

def arena(addr, used_bin=None):
    b = bytearray(2200)
    for i in range(127):
        head = addr + 112 + 16 * i - 16
        struct.pack_into('<QQ', b, 112 + 16 * i, head, head)
    if used_bin is not None:
        struct.pack_into('<QQ', b, 112 + 16 * used_bin, 0x555555560000, 0x555555561000)
    struct.pack_into('<Q', b, 96, 0x555555570010)
    struct.pack_into('<Q', b, 2160, addr)
    return bytes(b)

def cache_bins(storage, n):
    b = bytearray()
    full = storage
    for i in range(n):
        span = 8 * (20 + i % 3 * 90)
        head = full + span - 8 * (i % 7)
        b += struct.pack('<QQHHH', head, i, (head & 0xffff), full & 0xffff, (full + span) & 0xffff) + bytes(2)
        full += span
    return bytes(b)

base = 0x7f1234560000
seeds = {
    'plain': struct.pack('<Q', base) + arena(base),
    'offset': struct.pack('<Q', base) + bytes(808) + arena(base + 808, 4),
    'broken': struct.pack('<Q', base) + arena(base)[:2000],
    'zeros': struct.pack('<Q', base) + bytes(4400),
    'tcache': struct.pack('<Q', base) + cache_bins(0x7f0012340008, 41),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), 'wb') as f:
        f.write(data)
