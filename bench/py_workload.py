"""A fixed pure-Python workload for the macro benchmark (bench/run_macro_bench.sh).

Deterministic (seeded) mix of what Python services spend their time on:
building dicts, lists and strings, JSON round-trips, sorting with key
functions, string formatting and splitting, small-object churn.  Most
objects are small (pymalloc), some are bigger than pymalloc's 512-byte limit
and so come from libc malloc, as in real programs.

usage: python3.11 py_workload.py [SCALE]
  SCALE  rounds of the workload (default 40; 2-3 s on the bench VM; the
         macro benchmark runs 60)
Prints one line: "py_workload: scale=N checksum=C elapsed_s=T", T the time
the workload took (CLOCK_MONOTONIC, from import to the end: interpreter
start-up and a tracer's attach and report are not in it).
"""
import time

T0 = time.monotonic()

import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402


def records(rng, n):
    return [
        {
            "id": i,
            "name": "user-%06d" % rng.randrange(1000000),
            "tags": [rng.choice("abcdefgh") * rng.randrange(1, 6) for _ in range(4)],
            "score": rng.random() * 100.0,
            "bio": " ".join("w%d" % rng.randrange(500) for _ in range(rng.randrange(5, 120))),
        }
        for i in range(n)
    ]


def one_round(rng):
    total = 0
    recs = records(rng, 1500)
    # JSON round trip (the C encoder/decoder builds big strings: malloc)
    blob = json.dumps(recs)
    back = json.loads(blob)
    total += len(blob) + len(back)
    # sorting with key functions
    back.sort(key=lambda r: (r["score"], r["name"]))
    total += back[0]["id"]
    # group by tag: dict of lists
    groups = {}
    for r in back:
        for t in r["tags"]:
            groups.setdefault(t, []).append(r["id"])
    total += sum(len(v) for v in groups.values())
    # word counts: string splitting, dict churn
    counts = {}
    for r in back:
        for w in r["bio"].split():
            counts[w] = counts.get(w, 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    total += sum(c for _, c in top)
    # string building
    lines = ["%s,%d,%.3f,%s" % (r["name"], r["id"], r["score"], "|".join(r["tags"])) for r in back]
    csv = "\n".join(lines)
    total += len(csv.upper().replace("USER", "u"))
    # pure computation: a little arithmetic the interpreter must do itself
    acc = 0
    for i in range(20000):
        acc = (acc * 31 + i) % 1000003
    total += acc
    # set operations and comprehension churn
    a = {r["name"] for r in back[: len(back) // 2]}
    b = {r["name"] for r in back[len(back) // 3 :]}
    total += len(a & b) + len(a | b)
    return total


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    rng = random.Random(7)
    checksum = 0
    for _ in range(scale):
        checksum = (checksum + one_round(rng)) % (1 << 61)
    print("py_workload: scale=%d checksum=%d elapsed_s=%.3f" % (scale, checksum, time.monotonic() - T0))


if __name__ == "__main__":
    main()
