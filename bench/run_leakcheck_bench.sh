#!/bin/bash
# The leak check's cost (issue 15): how long the target is stopped while
# dwleak's scanner checks a heap, next to LeakSanitizer's and valgrind
# memcheck's leak check of the same heap (bench/leakcheck_bench.c builds
# it the same way, same seed, for all three), and how fast each goes over
# it.  Four heap shapes: 10^4 and 10^6 blocks, 100 MiB and 1 GiB in all.
#   dwleak     a child builds the heap and stops; the pause is the blocks
#              indexed + the roots planned + the memory read and scanned
#              (target/proc_mem + leakcheck_scan); classify runs after the
#              child resumes and is shown apart
#   dwleak, reader thread   the same with proc_mem's worker thread reading
#              while the scan runs (not the default: see target/proc_mem.c)
#   LSan       __lsan_do_recoverable_leak_check() in the heap's process
#              (clang -fsanitize=leak): it stops the world and scans
#   memcheck   VALGRIND_DO_LEAK_CHECK under valgrind --leak-check=full
#   dwleak-trace  the whole tool: dwleak --leak-check -- leakcheck_bench
#              --build-and-exit, the heap built under dwleak's probes and
#              checked at exit(); the pause is the report's (every thread
#              stopped by ptrace, the ring drained, registers, memory)
#   dwleak-live   the same on a live process, dwleak -p: the heap built
#              after attach, the check at the report (the index built
#              before the stop, as on a service); the process is stopped
#              for its registers and a copy-on-write snapshot only, and
#              the scan reads the copy while it runs on (its time shown
#              beside the pause)
#   dwleak-live-stop  the same with DWLEAK_LEAK_CHECK_STOP=1: the process
#              stopped while its memory is read, as before the snapshot
#   dwleak-live-sampled  dwleak -p --sample-bytes 524288 --leak-check: the
#              blocks come from the preload library's index (issue 24),
#              read out of the snapshot after the stop
# Each run makes REPS checks of one heap (the first one included); tools
# alternate, ROUNDS rounds; medians over all checks.  Each tool's verdict
# totals are printed too: the three must agree on the lost bytes.
#
# Environment: SHAPES (all four), REPS (3), ROUNDS (2), VG_REPS (1: each
# memcheck run builds its heap under valgrind, a minute for 1 GiB), TOOLS
# ("dwleak dwleak-thread lsan memcheck"), OUT (the markdown section; default
# BUILD/bench/leakcheck.md).  Installs valgrind with apt-get when missing.
# Takes about 10 minutes.
set -uo pipefail

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
SHAPES=${SHAPES:-1e4-100MiB 1e6-100MiB 1e4-1GiB 1e6-1GiB}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-2}
VG_REPS=${VG_REPS:-1}
TOOLS=${TOOLS:-dwleak dwleak-thread dwleak-trace dwleak-live dwleak-live-stop dwleak-live-sampled lsan memcheck}
DWLEAK=${DWLEAK_BIN:-$ROOT/dwleak}
OUT=${OUT:-$BUILD/bench/leakcheck.md}
BENCH=$BUILD/bench/leakcheck_bench
BENCH_LSAN=$BUILD/bench/leakcheck_bench_lsan
. "$ROOT/bench/ensure_tools.sh"

for p in "$BENCH" "$BENCH_LSAN"; do
	if [ ! -x "$p" ]; then
		echo "run_leakcheck_bench: $p is missing (make bench-leakcheck builds it)" >&2
		exit 2
	fi
done
notes=()
tools=()
for t in $TOOLS; do
	if [ "$t" = memcheck ] && ! ensure_tool valgrind valgrind; then
		notes+=("memcheck not measured: valgrind is not installed and apt-get install valgrind failed")
		continue
	fi
	tools+=("$t")
done
# live_check SHAPE OUT: dwleak -p on a leakcheck_bench that builds its heap
# once dwleak is attached; the check at dwleak's final report (SIGINT).
live_check() {
	local shape=$1 out=$2 tool=${3:-dwleak-live} target dw i rc=1
	shift 3 2> /dev/null || shift $#
	"$BENCH" --shape "$shape" --build-and-wait > "$out" 2> "$out.err" &
	target=$!
	for ((i = 0; i < 500; i++)); do
		grep -q waiting "$out" 2> /dev/null && break
		sleep 0.01
	done
	"$DWLEAK" --leak-check "$@" -t 1 --format json -o "$out.json" -p "$target" 2>> "$out.err" &
	dw=$!
	for ((i = 0; i < 3000; i++)); do
		grep -q '^dwleak: tracing' "$out.err" 2> /dev/null && break
		sleep 0.01
	done
	kill -USR1 "$target"
	for ((i = 0; i < 60000; i++)); do
		grep -q "tool=dwleak-live" "$out" 2> /dev/null && break
		kill -0 "$target" 2> /dev/null || break
		sleep 0.01
	done
	kill -INT "$dw"
	wait "$dw" && rc=0
	kill -KILL "$target" 2> /dev/null
	wait "$target" 2> /dev/null
	[ $rc -eq 0 ] && python3 "$ROOT/bench/leakcheck_report_line.py" "$out.json" >> "$out"
	return $rc
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leakcheck-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
status=0
for round in $(seq "$ROUNDS"); do
	for shape in $SHAPES; do
		for t in "${tools[@]}"; do
			out=$tmp/$t.$shape.$round
			echo "run_leakcheck_bench: round $round, $shape, $t" >&2
			case $t in
			dwleak) timeout -k 5 600 "$BENCH" --shape "$shape" --reps "$REPS" > "$out" 2> "$out.err" ;;
			dwleak-thread)
				timeout -k 5 600 "$BENCH" --shape "$shape" --reps "$REPS" --thread > "$out" 2> "$out.err" ;;
			dwleak-trace)
				timeout -k 5 900 "$DWLEAK" --leak-check -t 1 --format json -o "$out.json" -- \
					"$BENCH" --shape "$shape" --build-and-exit > "$out" 2> "$out.err" &&
					python3 "$ROOT/bench/leakcheck_report_line.py" "$out.json" >> "$out" ;;
			dwleak-live) live_check "$shape" "$out" ;;
			dwleak-live-stop) DWLEAK_LEAK_CHECK_STOP=1 live_check "$shape" "$out" ;;
			dwleak-live-sampled) live_check "$shape" "$out" dwleak-live --sample-bytes 524288 ;;
			lsan)
				LSAN_OPTIONS=print_suppressions=0 \
					timeout -k 5 600 "$BENCH_LSAN" --shape "$shape" --reps "$REPS" > "$out" 2> "$out.err" ;;
			memcheck)
				timeout -k 5 1200 valgrind -q --leak-check=full --log-file="$out.vg" \
					"$BENCH" --shape "$shape" --reps "$VG_REPS" > "$out" 2> "$out.err" ;;
			esac
			rc=$?
			if [ $rc -ne 0 ]; then
				echo "run_leakcheck_bench: $t on $shape failed (exit $rc): $(tail -n 2 "$out.err")" >&2
				notes+=("$t on $shape failed in round $round (exit $rc)")
				status=1
			fi
			# LSan's lost bytes: its report's summary line
			[ "$t" = lsan ] && sed -n 's/^SUMMARY: LeakSanitizer: \([0-9]*\) byte.*/lsan_lost_bytes=\1/p' "$out.err" >> "$out"
		done
	done
done

{
	echo "### Leak check: the target's pause, next to LeakSanitizer and memcheck"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(machine_line); $(valgrind --version 2>/dev/null || echo 'no valgrind'); $(clang --version | head -n 1); heap shapes from bench/leakcheck_bench.c (lists of 8 blocks, sizes uniform in [mean/2, 3 mean/2); 75% of lists reachable, 5% through an interior pointer, 20% lost); $REPS checks a run (memcheck $VG_REPS), $ROUNDS rounds, tools alternating; $((SECONDS - start)) s in all."
	echo
	python3 - "$tmp" "$SHAPES" "${tools[*]}" << 'EOF'
import os, re, statistics, sys
tmp, shapes, tools = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
runs = {}
for f in os.listdir(tmp):
    m = re.match(r"([\w-]+)\.([^.]+)\.\d+$", f)
    if not m:
        continue
    tool, shape = m.groups()
    lsan_lost = None
    for line in open(os.path.join(tmp, f)):
        if line.startswith("lsan_lost_bytes="):
            lsan_lost = int(line.split("=")[1])
            continue
        if line.startswith("pause_ms=") and runs.get((tool, shape)):
            # dwleak-trace: the figures from the report, after the program's line
            runs[(tool, shape)][-1].update(x.split("=", 1) for x in line.split())
            continue
        if not line.startswith("leakcheck_bench: ") or "tool=" not in line:
            continue
        kv = dict(x.split("=", 1) for x in line.split()[1:])
        runs.setdefault((tool, shape), []).append(kv)
    if lsan_lost is not None:
        for kv in runs.get((tool, shape), []):
            kv.setdefault("lost_bytes", str(lsan_lost))

def med(rows, key):
    v = [float(r[key]) for r in rows if key in r]
    return statistics.median(v) if v else None

def mib(b):
    return "%.1f" % (b / 1048576) if b is not None else ""

names = {"dwleak": "dwleak", "dwleak-thread": "dwleak, reader thread", "dwleak-trace": "dwleak --leak-check -- CMD, at exit", "dwleak-live": "dwleak --leak-check -p, live (snapshot)", "dwleak-live-stop": "dwleak --leak-check -p, live, stopped while read", "dwleak-live-sampled": "dwleak --leak-check -p --sample-bytes 524288, live (every block from the library's index)", "lsan": "LeakSanitizer",
         "memcheck": "valgrind memcheck"}
print("heap GB/s: the heap over the pause; dwleak's scan rate is over the scan, which for a snapshot is not in the pause.")
print()
print("| shape | tool | pause ms (median) | min | max | x LSan | heap GB/s | dwleak: scanned MiB, GB/s | lost MiB | possibly lost MiB | checks | scan ms while it ran on |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
goals = []
live = {}
snapshot_live = {}
stop_live = {}
sampled_live = {}
for shape in shapes:
    lsan = med(runs.get(("lsan", shape), []), "pause_ms")
    for tool in tools:
        rows = runs.get((tool, shape), [])
        if not rows:
            print("| %s | %s | failed |  |  |  |  |  |  |  |  |  |" % (shape, names[tool]))
            continue
        rows = [r for r in rows if "pause_ms" in r]
        if not rows:
            print("| %s | %s | failed |  |  |  |  |  |  |  |  |  |" % (shape, names[tool]))
            continue
        p = [float(r["pause_ms"]) for r in rows]
        pm = statistics.median(p)
        heap = float(rows[0]["block_bytes"])
        scanned = med(rows, "scanned_bytes")
        scan_col = "%s, %.2f" % (mib(scanned), scanned / pm / 1e6) if scanned else ""
        possibly = med(rows, "possibly_bytes")
        snap = [r for r in rows if r.get("snapshot") == "1"]
        live_scan = med(snap, "live_scan_ms") if snap else None
        if snap:
            scan_col = "%s, %.2f" % (mib(scanned), scanned / live_scan / 1e6) if scanned and live_scan else scan_col
        print("| %s | %s | %.1f | %.1f | %.1f | %s | %.2f | %s | %s | %s | %d | %s |" % (
            shape, names[tool], pm, min(p), max(p), "%.2f" % (pm / lsan) if lsan else "",
            heap / pm / 1e6, scan_col, mib(med(rows, "lost_bytes")),
            mib(possibly) if tool != "lsan" else "(reachable)", len(p),
            "%.1f (%d of %d from a snapshot)" % (live_scan, len(snap), len(rows)) if snap else ""))
        if tool == "dwleak":
            goals.append((shape, pm, lsan, scanned / pm / 1e6 if scanned else None, rows))
        if tool == "dwleak-live":
            # from a snapshot the scan is not in the pause: its rate is over the scan
            live[shape] = (pm, scanned / (live_scan or pm) / 1e6 if scanned else None)
            if snap:
                snapshot_live[shape] = (pm, live_scan, len(snap), len(rows))
        if tool == "dwleak-live-stop":
            stop_live[shape] = pm
        if tool == "dwleak-live-sampled":
            sampled_live[shape] = (pm, live_scan)
if sampled_live:
    print()
    print("Issue 24's goal for a sampled trace's check (every block from the preload library's index, read out of the snapshot): the pause <= 0.1x LSan's check of the same heap:")
    print()
    for shape, (pm, scan) in sampled_live.items():
        lsan = med(runs.get(("lsan", shape), []), "pause_ms")
        print("- %s: pause %.1f ms%s, the scan %s ms while it ran on" % (
            shape, pm, " = %.3f x LSan (%s)" % (pm / lsan, "met" if pm <= 0.1 * lsan else "NOT met") if lsan else "",
            "%.1f" % scan if scan else "?"))
print()
print("dwleak's pause, part by part (medians, ms): the blocks indexed (sorted, page index), the roots planned from /proc/PID/maps, then pagemap, the copy (process_vm_readv, /proc/PID/mem), the scan (leakcheck_scan); the classification runs after the target resumes and is not in the pause.")
print()
print("| shape | pause | index | plan | pagemap | copy | scan | classify (after) | definitely / indirectly / possibly lost blocks |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
for shape, pm, lsan, rate, rows in goals:
    print("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s / %s / %s |" % (
        shape, pm, med(rows, "build_ms"), med(rows, "plan_ms"), med(rows, "pagemap_ms"),
        med(rows, "syscalls_ms"), med(rows, "scan_ms"), med(rows, "classify_ms"),
        rows[0].get("definitely_blocks"), rows[0].get("indirectly_blocks"), rows[0].get("possibly_blocks")))
print()
print("Issue 15's goals, from the medians:")
print()
for shape, pm, lsan, rate, rows in goals:
    pause = ("%.2f x LSan (goal <= 1: %s)" % (pm / lsan, "met" if pm <= lsan else "NOT met")) if lsan else "no LSan figure"
    line = "- %s: the scanner's pause (index included) %.1f ms = %s; %.2f GB/s of resident root memory scanned (goal >= 1: %s)" % (
        shape, pm, pause, rate, "met" if rate >= 1 else "NOT met")
    if shape in live and lsan:
        lp, lr = live[shape]
        line += "; dwleak -p on a live process: %.1f ms = %.2f x LSan (%s), %.2f GB/s" % (
            lp, lp / lsan, "met" if lp <= lsan else "NOT met", lr)
    print(line)
print()
print("Issue 24's goal, the pause of a live process's check (dwleak -p) <= 0.1 x LSan's check of the same heap, the scan beside it:")
print()
for shape in shapes:
    lsan = med(runs.get(("lsan", shape), []), "pause_ms")
    if shape not in snapshot_live or not lsan:
        print("- %s: no snapshot figure%s" % (shape, "" if lsan else " (no LSan figure)"))
        continue
    pm, scan, ns, n = snapshot_live[shape]
    stop = stop_live.get(shape)
    print("- %s: paused %.1f ms = %.3f x LSan's %.1f ms (goal <= 0.1: %s); the scan %.1f ms while the process ran on; %s%d of %d checks from a snapshot" % (
        shape, pm, pm / lsan, lsan, "met" if pm <= 0.1 * lsan else "NOT met", scan,
        "stopped while read instead: %.1f ms (%.1fx the snapshot's pause); " % (stop, stop / pm) if stop else "", ns, n))
EOF
	for n in "${notes[@]}"; do
		echo "- note: $n"
	done
} > "$tmp/table.md"
mkdir -p "$(dirname "$OUT")"
cp "$tmp/table.md" "$OUT"
cat "$tmp/table.md"
exit $status
