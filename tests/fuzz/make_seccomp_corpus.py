#!/usr/bin/env python3
"""Seeds for fuzz_seccomp: seccomp_data (64 bytes) followed by a filter, in
the shapes real ones take (an arch check, a dispatch on the number, argument
tests, the scratch memory), and damaged copies."""
import os
import struct
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def ins(code, jt, jf, k):
    return struct.pack("<HBBI", code, jt, jf, k & 0xffffffff)


LD_ABS, JEQ, JSET, JGT, RET_K, ST, LD_MEM, ALU_AND = 0x20, 0x15, 0x45, 0x25, 0x06, 0x02, 0x60, 0x54
ALLOW, KILL, ERRNO, TRAP = 0x7fff0000, 0x80000000, 0x50000, 0x30000


def data(nr, args=(0,) * 6):
    return struct.pack("<iIQ6Q", nr, 0xc000003e, 0x7f0000001000, *args)


filters = {
    "allowlist": [ins(LD_ABS, 0, 0, 4), ins(JEQ, 1, 0, 0xc000003e), ins(RET_K, 0, 0, KILL), ins(LD_ABS, 0, 0, 0)]
    + [ins(JEQ, 5 - i, 0, nr) for i, nr in enumerate((0, 1, 9, 10, 202))]
    + [ins(RET_K, 0, 0, ERRNO | 1), ins(RET_K, 0, 0, ALLOW)],
    "args": [ins(LD_ABS, 0, 0, 0), ins(JEQ, 0, 3, 9), ins(LD_ABS, 0, 0, 32), ins(JSET, 0, 1, 4),
             ins(RET_K, 0, 0, ERRNO | 13), ins(RET_K, 0, 0, ALLOW)],
    "mem": [ins(LD_ABS, 0, 0, 0), ins(ST, 0, 0, 1), ins(ALU_AND, 0, 0, 0xff), ins(LD_MEM, 0, 0, 1),
            ins(JGT, 0, 1, 400), ins(RET_K, 0, 0, TRAP), ins(RET_K, 0, 0, ALLOW)],
}
for name, f in filters.items():
    prog = b"".join(f)
    for nr in (9, 56, 435, 202):
        with open(os.path.join(out, f"{name}-{nr}"), "wb") as fh:
            fh.write(data(nr, (0, 4096, 7, 0x22, 2**64 - 1, 0)) + prog)
    with open(os.path.join(out, f"{name}-cut"), "wb") as fh:
        fh.write(data(9) + prog[:-8])
    with open(os.path.join(out, f"{name}-jump"), "wb") as fh:
        fh.write(data(9) + prog[:8] + ins(0x05, 0, 0, 200) + prog[8:])
