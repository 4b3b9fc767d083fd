#!/bin/bash
# ns per malloc(64)+free pair, in one run on this machine, alternating the
# tools, REPS repetitions each (median, min, max):
#   bare               the benchmark alone
#   dwleak             dwleak -- malloc_bench (DWARF walk in BPF, the default)
#   bpftrace ustack    a frame-pointer tracer: @[ustack] = count() on malloc
#                      entry, plus malloc return and free entry probes with
#                      empty programs, so the three probes match dwleak's
#   bpftrace empty     the same three probes with empty programs: the trap floor
# malloc_bench times only its own loop (CLOCK_MONOTONIC), so attach and
# detach are not counted.  Traps cost microseconds on this VM, so traced runs
# make fewer pairs (TRACED_PAIRS) than bare ones (PAIRS): ns/pair is what is
# compared.
#
# Environment: DWLEAK (default ROOT/dwleak), MALLOC_BENCH (default
# BUILD/bench/malloc_bench, compiled if missing), PAIRS (2000000),
# TRACED_PAIRS (100000), REPS (3), THREADS ("1 2"), OUT (the markdown table
# is also written there; default BUILD/bench/malloc_bench.md).
# Needs root (BPF).  Takes about 2 minutes.
set -uo pipefail

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$ROOT/dwleak}
MALLOC_BENCH=${MALLOC_BENCH:-$BUILD/bench/malloc_bench}
PAIRS=${PAIRS:-2000000}
TRACED_PAIRS=${TRACED_PAIRS:-100000}
REPS=${REPS:-3}
THREADS=${THREADS:-1 2}
OUT=${OUT:-$BUILD/bench/malloc_bench.md}
LIBC=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/malloc-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
notes=()

if [ ! -x "$MALLOC_BENCH" ]; then
	mkdir -p "$(dirname "$MALLOC_BENCH")"
	gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$MALLOC_BENCH" "$ROOT/bench/malloc_bench.c" || exit 2
fi
if [ "$(id -u)" != 0 ]; then
	echo "run_malloc_bench: needs root for BPF uprobes" >&2
	exit 2
fi

tools=(bare)
if [ -x "$DWLEAK" ]; then
	tools+=(dwleak)
else
	notes+=("dwleak not measured: $DWLEAK is missing (make)")
fi
if command -v bpftrace > /dev/null; then
	tools+=(bpftrace_ustack bpftrace_empty)
	if ! mount | grep -q ' type tracefs '; then
		notes+=("tracefs is not mounted: bpftrace $(bpftrace --version | awk '{print $2}') attaches its uprobes through the perf uprobe PMU anyway; only its detach path (writing /sys/kernel/tracing/uprobe_events) fails and prints 'failed to detach probe', harmlessly (the probes go away with its file descriptors)")
	fi
else
	notes+=("bpftrace not measured: not installed (apt-get install bpftrace)")
fi

# run_one TOOL THREADS: prints ns/pair, or "fail" (reason in $tmp/why)
run_one() {
	local tool=$1 th=$2 out=$tmp/run.out
	local prog="$MALLOC_BENCH --threads $th"
	case $tool in
	bare)
		$prog --pairs "$PAIRS" > "$out" 2>&1 ;;
	dwleak)
		timeout -k 5 300 "$DWLEAK" -o "$tmp/report.txt" -- $prog --pairs "$TRACED_PAIRS" > "$out" 2>&1 ;;
	bpftrace_ustack)
		timeout -k 5 300 bpftrace -e "
uprobe:$LIBC:malloc /pid == cpid/ { @[ustack] = count(); }
uretprobe:$LIBC:malloc /pid == cpid/ { }
uprobe:$LIBC:free /pid == cpid/ { }" -c "$prog --pairs $TRACED_PAIRS" > "$out" 2>&1 ;;
	bpftrace_empty)
		timeout -k 5 300 bpftrace -e "
uprobe:$LIBC:malloc /pid == cpid/ { }
uretprobe:$LIBC:malloc /pid == cpid/ { }
uprobe:$LIBC:free /pid == cpid/ { }" -c "$prog --pairs $TRACED_PAIRS" > "$out" 2>&1 ;;
	esac
	local v
	v=$(sed -n 's/^malloc_bench: .*ns_per_pair=\([0-9.]*\).*/\1/p' "$out" | head -n 1)
	if [ -z "$v" ]; then
		grep -v '^malloc_bench:' "$out" | grep -m 3 . > "$tmp/why.$tool"
		echo fail
		return
	fi
	echo "$v"
	[ $tool = bpftrace_ustack ] && [ "$th" = 1 ] && ! [ -s "$tmp/ustack.sample" ] &&
		awk '/^@\[/ { f = 1; n = 0 } f { print; if (/^\]/) exit }' "$out" > "$tmp/ustack.sample"
	[ $tool = dwleak ] && [ "$th" = 1 ] && ! [ -s "$tmp/dwleak.sample" ] &&
		cp "$tmp/report.txt" "$tmp/dwleak.sample"
	return 0
}

start=$SECONDS
: > "$tmp/results"
for th in $THREADS; do
	for ((r = 1; r <= REPS; r++)); do
		for tool in "${tools[@]}"; do
			v=$(run_one "$tool" "$th")
			echo "$th $tool $v" >> "$tmp/results"
			printf 'threads=%s rep %d/%d %-16s %s ns/pair\n' "$th" "$r" "$REPS" "$tool" "$v" >&2
		done
	done
done
for f in "$tmp"/why.*; do
	[ -f "$f" ] && notes+=("${f##*.} failed: $(tr '\n' ' ' < "$f")")
done

{
	echo "## malloc(64)+free: ns per pair"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -r); $(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)); glibc $(ldd --version | awk 'NR == 1 { print $NF }'); $REPS runs each, alternating; bare $PAIRS pairs per thread, traced $TRACED_PAIRS; $((SECONDS - start)) s in all."
	echo
	python3 - "$tmp/results" << 'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    th, tool, v = line.split()
    rows.setdefault((th, tool), []).append(None if v == "fail" else float(v))
names = {"bare": "bare", "dwleak": "dwleak (DWARF in BPF)",
         "bpftrace_ustack": "bpftrace FP `ustack`", "bpftrace_empty": "bpftrace empty programs (trap floor)"}
print("| threads | tool | ns/pair (median) | min | max | x bare | x bpftrace ustack |")
print("|---|---|---:|---:|---:|---:|---:|")
med = {}
for (th, tool), vs in rows.items():
    ok = [v for v in vs if v is not None]
    if ok:
        med[(th, tool)] = statistics.median(ok)
for (th, tool), vs in rows.items():
    ok = [v for v in vs if v is not None]
    if not ok:
        print(f"| {th} | {names[tool]} | failed | | | | |")
        continue
    m = med[(th, tool)]
    bare = med.get((th, "bare"))
    bt = med.get((th, "bpftrace_ustack"))
    xb = f"{m / bare:.0f}" if bare else ""
    xt = f"{m / bt:.2f}" if bt and tool != "bare" else ""
    fails = f" ({len(vs) - len(ok)} failed)" if len(ok) < len(vs) else ""
    print(f"| {th} | {names[tool]}{fails} | {m:.1f} | {min(ok):.1f} | {max(ok):.1f} | {xb} | {xt} |")
print()
for th in sorted({k[0] for k in med}):
    d, b, e, bare = (med.get((th, t)) for t in ("dwleak", "bpftrace_ustack", "bpftrace_empty", "bare"))
    parts = []
    if d and b:
        parts.append(f"dwleak / bpftrace ustack = {d / b:.2f}")
    if d and e and bare and e > bare:
        parts.append(f"dwleak over the bpftrace floor = {(d - bare) / (e - bare):.2f}")
    if b and e and bare and e > bare:
        parts.append(f"ustack over the floor = {(b - bare) / (e - bare):.2f}")
    if parts:
        print(f"- {th} thread(s): " + "; ".join(parts))
EOF
	for n in "${notes[@]}"; do
		echo "- note: $n"
	done
	if [ -s "$tmp/ustack.sample" ] || [ -s "$tmp/dwleak.sample" ]; then
		echo
		echo "What each tracer recorded for the benchmark's malloc (1 thread):"
		echo
		echo '```'
		[ -s "$tmp/ustack.sample" ] && { echo "bpftrace ustack:"; cat "$tmp/ustack.sample"; }
		[ -s "$tmp/dwleak.sample" ] && { echo "dwleak (its report; the loop's pairs are all freed, so only what stayed):"; head -n 12 "$tmp/dwleak.sample"; }
		echo '```'
	fi
} > "$tmp/table.md"
mkdir -p "$(dirname "$OUT")"
cp "$tmp/table.md" "$OUT"
cat "$tmp/table.md"
echo "(written to $OUT)" >&2
