# How every test script reports its checks, so that all of them fail the
# same way.  Source it; it needs no BPF, no root and nothing from
# tests/run.sh, and sets no shell options.  tests/lib_trace.sh (the tests
# that trace programs with BPF) sources it too.
#
#   fail MSG       print "FAIL: MSG" and count it; the test goes on
#   fail_now MSG   print "FAIL: MSG" and exit 1: what follows depends on it
#   pass MSG       print "ok: MSG"
#   check_finish [MSG]  exit 1 ("N check(s) failed") if any check failed,
#                  else print MSG (default "all checks passed") and exit 0
#   check_errors   the count so far (a test may compare it before and after
#                  a group of checks)
# shellcheck shell=bash

check_errors=0

fail() {
	echo "FAIL: $*"
	check_errors=$((check_errors + 1))
}

fail_now() {
	echo "FAIL: $*"
	exit 1
}

pass() {
	echo "ok: $*"
}

check_finish() {
	if [ "$check_errors" -gt 0 ]; then
		echo "$check_errors check(s) failed"
		exit 1
	fi
	echo "${1:-all checks passed}"
	exit 0
}

# Run directly (tests/run.sh runs every tests/*.sh), this file checks its
# own helpers, each in a subshell, since they exit.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	# expect WANT_RC WANT_OUTPUT WHAT: the subshell just run left that in
	# $rc and $out
	expect() {
		if [ "$rc" -ne "$1" ] || [ "$out" != "$2" ]; then
			echo "FAIL: $3: exit $rc, output: $out"
			exit 1
		fi
	}
	out=$( (fail one; fail two; pass three; check_finish) )
	rc=$?
	expect 1 $'FAIL: one\nFAIL: two\nok: three\n2 check(s) failed' "two failures"
	out=$( (pass one; check_finish) )
	rc=$?
	expect 0 $'ok: one\nall checks passed' "no failure"
	out=$( (check_finish "all fine") )
	rc=$?
	expect 0 "all fine" "check_finish MSG"
	# shellcheck disable=SC2317 # the echo is there to show it is not reached
	out=$( (fail_now stop; echo "not reached") )
	rc=$?
	expect 1 "FAIL: stop" "fail_now"
	echo "lib_check.sh: its helpers count, print and exit as documented"
	exit 0
fi
