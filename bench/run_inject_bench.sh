#!/bin/bash
# The injection (issue 22): ns per malloc(64)+free pair of a process whose
# allocator calls were routed through the preload library by an injection
# (dwleak gone, the library idle), next to the same process bare and started
# with LD_PRELOAD (idle); and how long an injection takes (the chosen thread
# stopped, the call, the load, the whole).  No BPF: the injection is made by
# build/tests/inject_probe, the way dwleak makes it.  Alternating, REPS each.
#
# Environment: MALLOC_BENCH, PROBE (build/tests/inject_probe), LIB (the
# library), PAIRS (5000000), REPS (7), OUT (markdown table, default
# BUILD/bench/inject_bench.md).  Needs root (ptrace).
set -uo pipefail

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
MALLOC_BENCH=${MALLOC_BENCH:-$BUILD/bench/malloc_bench}
PROBE=${PROBE:-$BUILD/tests/inject_probe}
LIB=${LIB:-$BUILD/libdwleak-preload.so}
PAIRS=${PAIRS:-5000000}
REPS=${REPS:-7}
OUT=${OUT:-$BUILD/bench/inject_bench.md}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/inject-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for f in "$MALLOC_BENCH" "$PROBE" "$LIB"; do
	[ -e "$f" ] || { echo "run_inject_bench: $f missing (make check-build)" >&2; exit 2; }
done

# run MODE: one malloc_bench run, its ns_per_pair on stdout (and the
# injection's line in $tmp/inject.last for "injected")
run() {
	local go=$tmp/go pid
	rm -f "$go"
	case $1 in
	bare) "$MALLOC_BENCH" --pairs "$PAIRS" --go-file "$go" > "$tmp/out" & ;;
	preload) LD_PRELOAD=$LIB "$MALLOC_BENCH" --pairs "$PAIRS" --go-file "$go" > "$tmp/out" & ;;
	injected) "$MALLOC_BENCH" --pairs "$PAIRS" --go-file "$go" > "$tmp/out" & ;;
	esac
	pid=$!
	sleep 0.2
	if [ "$1" = injected ]; then
		"$PROBE" inject "$pid" "$LIB" > "$tmp/inject.last" 2>&1 || { kill "$pid"; cat "$tmp/inject.last" >&2; return 1; }
		grep '^inject: ok' "$tmp/inject.last" >> "$tmp/injections"
	fi
	touch "$go"
	wait "$pid"
	sed -n 's/.*ns_per_pair=\([0-9.]*\).*/\1/p' "$tmp/out"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for _ in $(seq 1 "$REPS"); do
	for m in bare preload injected; do
		run $m >> "$tmp/$m" || exit 1
	done
done
b=$(median < "$tmp/bare")
{
	echo "### Injection: the routed process idle, and the injection's latency"
	echo
	echo "malloc(64)+free, ns per pair, 1 thread, medians of $REPS ($PAIRS pairs each); the injected process's"
	echo "calls reach the library through the GOT slots it routed, and no dwleak is attached (idle)."
	echo
	echo "| process | ns/pair | x bare |"
	echo "|---|---:|---:|"
	for m in bare preload injected; do
		v=$(median < "$tmp/$m")
		awk -v m="$m" -v v="$v" -v b="$b" 'BEGIN { printf "| %s | %s | %.2f |\n", m, v, v / b }'
	done
	echo
	declare -A what=([total_ms]="the whole injection, its checks included"
		[stopped_ms]="the chosen thread stopped, the call excluded"
		[call_ms]="the call of pthread_create in that thread, until it was put back"
		[load_ms]="then, the wait until the new thread's dlopen and routing ended (begun with the call)")
	for f in total_ms stopped_ms call_ms load_ms; do
		printf -- '- injection %s, %s (median of %s): %s\n' "$f" "${what[$f]}" "$REPS" \
			"$(sed -n "s/.*\b$f=\([0-9.]*\).*/\1/p" "$tmp/injections" | median)"
	done
} | tee "$OUT"
