"""An allocation loop for tracing CPython (tests/trace_targets.sh).

Builds lists, dicts, sets, strings, bytes, JSON, regex results, decimals
and more for --seconds (default 5), in the main thread and in two Python
threads, keeping one batch in 8 so something stays outstanding.  Objects
are bigger than pymalloc's 512-byte limit, so they come from libc malloc,
through many different interpreter paths (C calling back into Python:
sorted(key=...), map, reduce; extension modules: _json, _decimal, zlib,
array).  Prints "ready" once started.

usage: python3 py_alloc_loop.py [--seconds S] [--delay S]
"""
import array
import collections
import decimal
import functools
import json
import re
import sys
import threading
import time
import zlib


def make_strings(n, size):
    return ["%d:" % i + "x" * size for i in range(n)]


def make_dict(strings):
    return {s[:40] + str(i): s for i, s in enumerate(strings)}


def grow_list(n):
    out = []
    for i in range(n):
        out.append(bytearray(520 + i % 300))
    return out


def misc(n):
    strings = make_strings(16, 700)
    out = [
        json.loads(json.dumps({"k%d" % i: s for i, s in enumerate(strings)})),
        re.findall(r"\d+:x+", " ".join(strings)),
        set(s + str(n) for s in strings),
        sorted(strings, key=lambda s: (len(s), s[::-1])),
        list(map(lambda s: s.upper(), strings)),
        functools.reduce(lambda a, b: a + b[:50], strings, ""),
        b"".join(s.encode() for s in strings),
        zlib.compress(("".join(strings)).encode()),
        array.array("d", range(200 + n % 50)),
        collections.deque(strings * 4),
        [decimal.Decimal(i) / 7 for i in range(80)],
        "{0}-{1}-{2}".format(*strings[:3]) * 2,
        tuple(range(300)),
        {i: [i] * 70 for i in range(20)},
    ]
    return out


def work(seconds, kept, lock, tag):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        strings = make_strings(64, 600 + n % 200)
        d = make_dict(strings)
        lst = grow_list(32)
        joined = "|".join(strings[:8])
        other = misc(n)
        if n % 8 == 0:
            with lock:
                kept.append((tag, strings, d, lst, joined, other))
        n += 1
        time.sleep(0.002)
    return n


def main():
    seconds, delay = 5.0, 0.0
    args = sys.argv[1:]
    while args:
        if args[0] == "--seconds":
            seconds = float(args[1])
        elif args[0] == "--delay":
            delay = float(args[1])
        else:
            sys.exit(__doc__)
        args = args[2:]
    print("ready", flush=True)
    time.sleep(delay)
    kept = []
    lock = threading.Lock()
    threads = [threading.Thread(target=work, args=(seconds, kept, lock, t)) for t in range(2)]
    for t in threads:
        t.start()
    n = work(seconds, kept, lock, "main")
    for t in threads:
        t.join()
    print("done %d batches, kept %d" % (n, len(kept)), flush=True)


main()
