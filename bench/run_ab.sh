#!/bin/bash
# A/B of two dwleak builds on the same workload, alternating, in one run:
# for a change that should cost nothing (a refactor), the ns per
# malloc(64)+free pair of bench/malloc_bench traced by dwleak A and by
# dwleak B, on the uprobe path (--no-preload) and at the preload library's
# sites (exact), REPS times each, medians and the ratio B/A.
#
#   bench/run_ab.sh OLD_DWLEAK NEW_DWLEAK
#
# Each binary uses the preload library next to it (dwleak preload).
# Environment: REPS (9), PAIRS (100000), MALLOC_BENCH (BUILD/bench/malloc_bench).
# Needs root (BPF).
set -uo pipefail
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
MALLOC_BENCH=${MALLOC_BENCH:-$BUILD/bench/malloc_bench}
REPS=${REPS:-9}
PAIRS=${PAIRS:-100000}
[ $# = 2 ] || { echo "usage: $0 OLD_DWLEAK NEW_DWLEAK" >&2; exit 2; }
A=$1 B=$2
if [ ! -x "$MALLOC_BENCH" ]; then
	mkdir -p "$(dirname "$MALLOC_BENCH")"
	gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$MALLOC_BENCH" "$ROOT/bench/malloc_bench.c" || exit 2
fi

# ns/pair of one run: dwleak binary $1, path $2 (uprobes | sites)
one() {
	local opt=()
	[ "$2" = uprobes ] && opt=(--no-preload)
	"$1" "${opt[@]}" -t 1 -- "$MALLOC_BENCH" --pairs "$PAIRS" 2> /dev/null |
		sed -n 's/^malloc_bench: .*ns_per_pair=\([0-9.]*\).*/\1/p' | head -n 1
}

median() {
	sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

for path in uprobes sites; do
	: > "/tmp/ab.$$.a" && : > "/tmp/ab.$$.b"
	for ((i = 0; i < REPS; i++)); do
		one "$A" $path >> "/tmp/ab.$$.a"
		one "$B" $path >> "/tmp/ab.$$.b"
	done
	ma=$(median < "/tmp/ab.$$.a")
	mb=$(median < "/tmp/ab.$$.b")
	printf '%-8s A %8.1f ns/pair  B %8.1f ns/pair  B/A %.3f  (%d runs each, alternating)\n' "$path" "$ma" "$mb" \
		"$(echo "$mb / $ma" | bc -l)" "$REPS"
	rm -f "/tmp/ab.$$.a" "/tmp/ab.$$.b"
done
