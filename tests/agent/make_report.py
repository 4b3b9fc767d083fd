#!/usr/bin/env python3
"""Writes a synthetic dwleak JSON report (SPEC.md's format) of N stacks for
the agent's HTTP tests, with distinct byte counts so totals can be checked.
usage: make_report.py [--unique] N PID MODULE OUT

By default the stacks are paths through a program's call graph: 16 frames
each, drawn from 2,000 functions with 4 call sites each (8,000 locations),
under malloc, as a real program's 10,000 stacks share most of their frames.
--unique gives every frame of every stack its own function and address,
the worst case for the pprof encoder."""
import json
import random
import sys

args = sys.argv[1:]
unique = args[0] == "--unique"
if unique:
    args = args[1:]
n, pid, module, out = int(args[0]), int(args[1]), args[2], args[3]
rng = random.Random(n)
DEPTH, FUNCS, SITES = 16, 2000, 4


def frame(elf, name, line):
    return {"address": hex(0x555500000000 + elf), "module": module, "build_id": None, "elf_address": hex(elf),
            "function": name, "offset": 4, "file": "/src/app.c", "line": line, "inlined": False}


stacks = []
seen = set()
while len(stacks) < n:
    frames = [{"address": hex(0x7f0000098930), "module": "/usr/lib/x86_64-linux-gnu/libc.so.6",
               "build_id": None, "elf_address": hex(0x98930), "function": "malloc", "offset": 0,
               "file": None, "line": None, "inlined": False}]
    i = len(stacks)
    if unique:
        for depth in range(6):
            elf = 0x1000 + (i * 7 + depth) * 16
            frames.append(frame(elf, "f_%d_%d" % (i, depth), 10 + depth))
    else:
        path = tuple((rng.randrange(FUNCS), rng.randrange(SITES)) for _ in range(DEPTH))
        if path in seen:
            continue
        seen.add(path)
        for f, site in path:
            frames.append(frame(0x1000 + f * 64 + site * 8, "fn_%d" % f, 100 + site))
    stacks.append({"bytes": 64 * (i + 1), "allocations": i % 5 + 1, "allocator": "malloc",
                   "frames": frames, "pid": pid, "command": module})
total_b = sum(s["bytes"] for s in stacks)
total_a = sum(s["allocations"] for s in stacks)
report = {"dwleak_report": 1, "pid": pid, "command": module, "unwind": "dwarf", "duration_s": 60.0,
          "totals": {"outstanding_bytes": total_b, "outstanding_allocations": total_a, "stacks": n,
                     "dropped_events": 3, "truncated_stacks": 0, "unwind_errors": 2},
          "stacks": stacks}
with open(out, "w") as f:
    json.dump(report, f)
