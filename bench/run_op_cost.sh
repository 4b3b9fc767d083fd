#!/bin/bash
# What each operation of dwleak's BPF programs costs inside a uprobe here
# (bench/op_cost.c): the helper calls, map operations and user-memory reads
# its programs make per allocation, each measured alone in a program on
# malloc while malloc_bench runs, from the kernel's BPF run-time
# statistics.  Writes a markdown table (OUT).
#
# Environment: MALLOC_BENCH (default BUILD/bench/malloc_bench), PAIRS
# (200000 calls of malloc a run), REPS (5, alternating), OUT (default
# BUILD/bench/op_cost.md).  Needs root (BPF).  Takes about 30 s.
set -uo pipefail

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
MALLOC_BENCH=${MALLOC_BENCH:-$BUILD/bench/malloc_bench}
PAIRS=${PAIRS:-200000}
REPS=${REPS:-5}
OUT=${OUT:-$BUILD/bench/op_cost.md}
LIBC=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
. "$ROOT/bench/ensure_tools.sh"

ensure_bench_programs > /dev/null 2>&1
if [ ! -x "$BUILD/bench/op_cost" ]; then
	echo "run_op_cost: build/bench/op_cost could not be built (clang, libbpf-dev, libelf-dev)" >&2
	exit 2
fi
if [ "$(id -u)" != 0 ]; then
	echo "run_op_cost: needs root for BPF uprobes" >&2
	exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/op-cost.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
if ! "$BUILD/bench/op_cost" "$BUILD/bench/op_cost.bpf.o" "$LIBC" "$REPS" -- \
	"$MALLOC_BENCH" --pairs "$PAIRS" > "$tmp/out" 2> "$tmp/err"; then
	echo "run_op_cost: op_cost failed: $(head -n 3 "$tmp/err")" >&2
	exit 1
fi
{
	echo "### What one operation costs inside a uprobe"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(machine_line); one program on libc's malloc (a uprobe_multi link, as dwleak attaches) doing one operation, while malloc_bench makes $PAIRS calls; the kernel's BPF run-time statistics (which add their own two clock reads to every run, the same for all); medians of $REPS runs, alternating; $((SECONDS - start)) s in all."
	echo
	echo "| operation | ns per program run | ns above the empty program |"
	echo "|---|---:|---:|"
	sed -n 's/^op_cost: \(.*[^ ]\) \+\([0-9.]*\) ns\/run \+\([-+0-9.]*\)$/| \1 | \2 | \3 |/p' "$tmp/out"
	echo
	echo "dwleak's programs make, per malloc+free pair: at malloc's entry an attach-cookie read, a task-storage get, one user read of the stack (its size: what the last walk of that thread needed), a few per-CPU counters; at its return a task-storage get and a ring record; at free a ring record."
} > "$tmp/table.md"
mkdir -p "$(dirname "$OUT")"
cp "$tmp/table.md" "$OUT"
cat "$tmp/table.md"
