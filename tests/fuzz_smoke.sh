#!/bin/bash
# Runs the table-compiler fuzzer (build/fuzz/fuzz_tables) for FUZZ_SECONDS
# over the seed corpus.  A crash leaves its input in build/fuzz/crash-*.
set -euo pipefail
BUILD=${BUILD:-$ROOT/build}
fuzzer=$BUILD/fuzz/fuzz_tables
seeds=$BUILD/fuzz/seeds
if [ ! -x "$fuzzer" ]; then
	echo "fuzzer not built ($fuzzer): no tables/*.c yet?"
	exit 77
fi
[ -d "$seeds" ] || { echo "no seed corpus in $seeds"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# New inputs go to the scratch dir; the seed corpus stays as built.
if ! "$fuzzer" -max_total_time="${FUZZ_SECONDS:-20}" -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$BUILD/fuzz/" "$work" "$seeds" 2>&1 | tail -n 40; then
	echo "fuzzer failed; reproduce with: $fuzzer $BUILD/fuzz/crash-*"
	exit 1
fi
