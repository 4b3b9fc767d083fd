#!/bin/bash
# A few seconds of `make bench`'s micro benchmark (bench/run_malloc_bench.sh),
# so the scripts cannot rot between benchmark runs: one repetition, one
# thread, few pairs, the tools that need nothing installed (bare, the own
# floor, the exact-accounting minimum, dwleak with and without the walk,
# with sessions, sampled; the preload library idle, sampled and exact).
# Checks that every
# row has a number and that the goals line computes its ratios; it checks
# no timing (timings belong to `make bench`, in ratios of one batch).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
PLAIN=${DWLEAK_PLAIN:-$ROOT/dwleak}
[ -x "$PLAIN" ] || fail_now "$PLAIN is missing (make)"

TOOLS="bare own_floor exact_min dwleak dwleak_session dwleak_nowalk dwleak_sample preload_idle preload_sample preload_exact"
BENCH_NO_INSTALL=1 TOOLS=$TOOLS REPS=1 THREADS=1 TRACED_PAIRS=5000 PAIRS=200000 PRELOAD_PAIRS=5000 \
	ROOT=$ROOT BUILD=$BUILD DWLEAK=$PLAIN MALLOC_BENCH=$BUILD/bench/malloc_bench OUT=$T/micro.md \
	timeout -k 5 120 bash "$ROOT/bench/run_malloc_bench.sh" > "$T/out" 2> "$T/err"
rc=$?
[ $rc -eq 0 ] || { fail "run_malloc_bench.sh exited $rc"; tail -n 15 "$T/err" | sed 's/^/    /'; }
"$LT_PYTHON" - "$T/micro.md" "$TOOLS" << 'PY' || fail "the table is not what make bench writes"
import re, sys
md = open(sys.argv[1]).read()
tools = sys.argv[2].split()
labels = {"bare": "bare", "own_floor": "own floor", "exact_min": "exact-accounting minimum",
          "dwleak": "dwleak, uprobe path", "dwleak_session": "dwleak with uprobe sessions",
          "dwleak_nowalk": "dwleak's programs without the walk", "dwleak_sample": "dwleak `--sample-bytes",
          "preload_idle": "preload library idle", "preload_sample": "dwleak at the preload sites, `--sample-bytes",
          "preload_exact": "dwleak at the preload sites, exact"}
rows = [l for l in md.splitlines() if l.startswith("| 1 | ")]
bad = 0
for t in tools:
    r = [l for l in rows if l.split("|")[2].strip().startswith(labels[t])]
    if len(r) != 1 or not re.match(r"^[0-9][0-9,]*\.[0-9]$", r[0].split("|")[3].strip()):
        print("FAIL: %s: row %r" % (t, r))
        bad += 1
    else:
        print("ok: %s: %s ns/pair" % (t, r[0].split("|")[3].strip()))
goals = [l for l in md.splitlines() if l.startswith("- 1 thread(s): ")]
for want in (r"\(dwleak - bare\) / \(own floor - bare\) = [0-9.]+",
             r"\(dwleak without the walk - bare\) / \(own floor - bare\) = [0-9.]+",
             r"\(exact minimum - bare\) / \(own floor - bare\) = [0-9.]+"):
    if not goals or not re.search(want, goals[0]):
        print("FAIL: the goals line lacks %s: %r" % (want, goals))
        bad += 1
issue16 = [l for l in md.splitlines() if l.startswith("- 1 thread(s): idle / bare = ")]
if not issue16 or not re.search(r"sampled / bare = [0-9.]+.*exact / uprobe path = [0-9.]+", issue16[0]):
    print("FAIL: no issue 16 goals line: %r" % issue16)
    bad += 1
if not bad:
    print("ok: the goals lines: " + goals[0][:80] + "...; " + issue16[0][:80] + "...")
sys.exit(1 if bad else 0)
PY
check_finish
