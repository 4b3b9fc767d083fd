#!/bin/bash
# Runs dwleak's tests: every unit test program (build/asan/tests/test_*) and
# every tests/*.sh script, each under a timeout, and prints PASS/FAIL/SKIP
# per test, then "N passed, N failed".
#
# usage: tests/run.sh [PATTERN...]    (run only tests whose name contains one)
#
# Scripts and unit tests get in their environment:
#   ROOT      the repository root (also their working directory)
#   BUILD     the build directory (ROOT/build)
#   DWLEAK    the ASan/UBSan build of dwleak (BUILD/asan/dwleak)
#   TESTDATA  the built test programs (BUILD/testdata)
# and no DEBUGINFOD_URLS.  A test exits 0 to pass, 77 to skip (its last
# output line says why), anything else to fail.  With CI=true a skip counts
# as a failure.  TEST_TIMEOUT sets the per-test limit in seconds (default
# 300).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$BUILD/asan/dwleak}
TESTDATA=${TESTDATA:-$BUILD/testdata}
export ROOT BUILD DWLEAK TESTDATA
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Reports fetch debug information from debuginfod when this is set (some
# distributions set it for every login): the tests name frames from what
# the machine has, and tests/debuginfod.sh sets it to its own server.
unset DEBUGINFOD_URLS
timeout_s=${TEST_TIMEOUT:-300}
cd "$ROOT" || exit 2

tests=()
for t in "$BUILD"/asan/tests/test_*; do
	[ -f "$t" ] && [ -x "$t" ] && tests+=("$t")
done
for t in "$ROOT"/tests/*.sh; do
	[ -f "$t" ] && [ "$(basename "$t")" != run.sh ] && tests+=("$t")
done

selected() {
	[ $# -eq 1 ] && return 0
	local name=$1 p
	shift
	for p in "$@"; do
		[[ $name == *"$p"* ]] && return 0
	done
	return 1
}

passed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${tests[@]}"; do
	name=$(basename "$t")
	selected "$name" "$@" || continue
	if [[ $t == *.sh ]]; then
		cmd=(bash "$t")
	else
		cmd=("$t")
	fi
	start=$SECONDS
	timeout -k 10 "$timeout_s" "${cmd[@]}" > "$log" 2>&1 < /dev/null
	rc=$?
	secs=$((SECONDS - start))
	if [ $rc -eq 0 ]; then
		echo "PASS $name (${secs}s)"
		passed=$((passed + 1))
	elif [ $rc -eq 77 ]; then
		reason=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)
		echo "SKIP $name: ${reason:-no reason given}"
		if [ "${CI:-}" = true ]; then
			echo "  (CI=true: a skip counts as a failure)"
			failed=$((failed + 1))
		else
			skipped=$((skipped + 1))
		fi
	else
		if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
			echo "FAIL $name (timed out after ${timeout_s}s)"
		else
			echo "FAIL $name (exit $rc, ${secs}s)"
		fi
		# the failed checks first: a long test's tail may not hold them
		grep -m 10 'FAIL' "$log" | sed 's/^/    ! /'
		tail -n 30 "$log" | sed 's/^/    /'
		failed=$((failed + 1))
	fi
done

[ $skipped -gt 0 ] && echo "($skipped skipped)"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
