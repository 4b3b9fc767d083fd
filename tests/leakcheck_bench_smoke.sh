#!/bin/bash
# A few seconds of the leak check's benchmark (bench/run_leakcheck_bench.sh),
# so the script cannot rot between benchmark runs: the smallest heap, two
# checks, dwleak and LeakSanitizer (and memcheck where valgrind is
# installed).  Checks that every row has a number and that the checkers
# agree on the heap: dwleak's lost bytes (definitely + indirectly) equal
# LSan's exactly, memcheck's within 1% (its own allocator lays the heap out
# differently).  No timing is checked: timings belong to `make bench`.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
T=$LT_TMP
TOOLS="dwleak lsan"
command -v valgrind > /dev/null && TOOLS="$TOOLS memcheck"
for p in leakcheck_bench leakcheck_bench_lsan; do
	[ -x "$BUILD/bench/$p" ] || fail_now "$BUILD/bench/$p is missing (make check builds it)"
done
BENCH_NO_INSTALL=1 TOOLS=$TOOLS SHAPES=1e4-100MiB REPS=2 ROUNDS=1 OUT=$T/leakcheck.md ROOT=$ROOT BUILD=$BUILD \
	timeout -k 5 240 bash "$ROOT/bench/run_leakcheck_bench.sh" > "$T/out" 2> "$T/err"
rc=$?
[ $rc -eq 0 ] || { fail "run_leakcheck_bench.sh exited $rc"; tail -n 15 "$T/err" | sed 's/^/    /'; }
"$LT_PYTHON" - "$T/leakcheck.md" "$TOOLS" << 'PY' || fail "the table is not what make bench writes"
import re, sys
md = open(sys.argv[1]).read()
tools = sys.argv[2].split()
names = {"dwleak": "dwleak", "lsan": "LeakSanitizer", "memcheck": "valgrind memcheck"}
lost, bad = {}, 0
for t in tools:
    rows = [l.split("|") for l in md.splitlines() if l.startswith("| 1e4-100MiB | " + names[t] + " |")]
    if len(rows) != 1 or not re.match(r"^[0-9]+\.[0-9]$", rows[0][3].strip()):
        print("FAIL: %s: row %r" % (t, rows))
        bad += 1
        continue
    lost[t] = float(rows[0][9])
    print("ok: %s: %s ms, %s MiB lost" % (t, rows[0][3].strip(), rows[0][9].strip()))
if "dwleak" in lost and "lsan" in lost and lost["dwleak"] != lost["lsan"]:
    print("FAIL: dwleak finds %.1f MiB lost, LSan %.1f" % (lost["dwleak"], lost["lsan"]))
    bad += 1
if "memcheck" in lost and abs(lost["memcheck"] - lost.get("dwleak", 0)) > 0.01 * lost["memcheck"]:
    print("FAIL: dwleak finds %.1f MiB lost, memcheck %.1f" % (lost.get("dwleak", 0), lost["memcheck"]))
    bad += 1
if not re.search(r"^- 1e4-100MiB: the scanner's pause \(index included\) [0-9.]+ ms = [0-9.]+ x LSan \(goal <= 1: (met|NOT met)\); "
                 r"[0-9.]+ GB/s", md, re.M):
    print("FAIL: no goals line")
    bad += 1
sys.exit(1 if bad else 0)
PY
check_finish
