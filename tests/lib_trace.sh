# Shared helpers for the tests that trace real programs with real BPF
# (tests/trace_*.sh and most other tests/*.sh).  Source it; it expects
# DWLEAK, TESTDATA and ROOT from tests/run.sh (it falls back to the usual
# places when run by hand).  It sources tests/lib_check.sh: fail, fail_now,
# pass, check_finish and check_errors come from there.
#
#   lt_require_bpf           exit 77 unless BPF can really be used (root);
#                            FAIL without libc's debug file (libc6-dbg)
#   lt_start VAR OUT CMD...  start CMD in the background (stdout+stderr to
#                            OUT), wait until it has exec'ed, pid into VAR
#   lt_trace VAR ERR ARGS... start "$DWLEAK ARGS..." in the background
#                            (stderr to ERR), wait for its "dwleak: tracing"
#                            line; its pid into VAR (returns 1 if it never came)
#   lt_wait PID [SECS]       wait for a background dwleak; its exit status
#   lt_preload_dwleak        DWLEAK_PRELOAD: a dwleak that runs under LD_PRELOAD
#   lt_testdata NAME         PROG=build/testdata/NAME, or FAIL when not built
#   lt_target_start NAME ARGS..., lt_target_finish NAME
#                            testdata/inject_target until ready (pid in TP),
#                            and its own verdict at its end
#   lt_setuid_sleep NAME SECS  a setuid sleep(1) (AT_SECURE), pid in SP;
#                            lt_setuid_done ends it
#   lt_check JSON [ARGS...]  run python (stdin: a snippet) on a JSON report
#                            with the helpers in LT_PY below; the snippet
#                            calls fail("...") for each failed check
#   lt_part X                true unless LT_ONLY is set and lacks X (run by
#                            hand: LT_ONLY=ce bash tests/trace_targets.sh)
# LT_KEEP=1 keeps the reports and logs (the temporary directory).
set -uo pipefail

# shellcheck source=tests/lib_check.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib_check.sh"

ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$BUILD/asan/dwleak}
TESTDATA=${TESTDATA:-$BUILD/testdata}
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp}

if [ -x /usr/bin/python3.11 ]; then
	LT_PYTHON=/usr/bin/python3.11
else
	LT_PYTHON=python3
fi

lt_pids=()
LT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dwleak-trace.XXXXXX")

lt_cleanup() {
	local p
	for p in "${lt_pids[@]}"; do
		kill -KILL "$p" 2> /dev/null
	done
	wait 2> /dev/null
	if [ -n "${LT_KEEP:-}" ]; then
		echo "(kept $LT_TMP)"
	else
		rm -rf "$LT_TMP"
	fi
}
trap lt_cleanup EXIT

lt_part() {
	[ -z "${LT_ONLY:-}" ] || [[ $LT_ONLY == *"$1"* ]]
}

# lt_preload_dwleak : sets DWLEAK_PRELOAD to a dwleak that can run with an
# allocator LD_PRELOAD'ed into its own environment (the command inherits
# it): an ASan build cannot, so the release build ($DWLEAK_PLAIN or
# $ROOT/dwleak) stands in.
lt_preload_dwleak() {
	DWLEAK_PRELOAD=$DWLEAK
	# ldd's output captured first: with pipefail, grep -q exiting early can
	# kill ldd with SIGPIPE and turn a match into a failure.
	if [[ "$(ldd "$DWLEAK" 2> /dev/null)" == *libasan* ]]; then
		DWLEAK_PRELOAD=${DWLEAK_PLAIN:-$ROOT/dwleak}
		echo "note: $DWLEAK is an ASan build; runs under LD_PRELOAD use $DWLEAK_PRELOAD"
		if [ ! -x "$DWLEAK_PRELOAD" ]; then
			echo "FAIL: $DWLEAK_PRELOAD is missing (make all)"
			exit 1
		fi
	fi
}

# lt_setuid_sleep NAME SECS: a setuid copy of sleep(1) owned by nobody
# ($BUILD/tmp/NAME), run by root for SECS seconds: the exec changes its
# effective user, so the kernel sets AT_SECURE; its pid in SP.  Returns 1
# when AT_SECURE is not 1 in it (a nosuid mount).  lt_setuid_done ends it
# and removes the copy.
lt_setuid_sleep() {
	mkdir -p "$BUILD/tmp"
	LT_SETUID=$BUILD/tmp/$1
	cp "$(command -v sleep)" "$LT_SETUID" && chown nobody "$LT_SETUID" && chmod u+s "$LT_SETUID" || return 1
	"$LT_SETUID" "$2" &
	SP=$!
	lt_pids+=("$SP")
	sleep 0.3
	od -An -tx8 -w16 "/proc/$SP/auxv" | awk '$1 == "0000000000000017" && $2 != "0000000000000000" { f = 1 } END { exit !f }'
}

lt_setuid_done() {
	kill "$SP" 2> /dev/null
	rm -f "$LT_SETUID"
}

# lt_target_start NAME ARGS...: testdata/inject_target (PROG, from
# lt_testdata) in the background with ARGS, stdin from $LT_TMP/NAME.in
# when that is a FIFO, until it says it is ready; its pid in TP.
lt_target_start() {
	local name=$1 d=$LT_TMP
	shift
	rm -f "$d/$name.ready" "$d/$name.stop"
	if [ -p "$d/$name.in" ]; then
		"$PROG" --ready "$d/$name.ready" --stop "$d/$name.stop" "$@" < "$d/$name.in" > "$d/$name.out" 2>&1 7>&- 8>&- &
	else
		"$PROG" --ready "$d/$name.ready" --stop "$d/$name.stop" "$@" < /dev/null > "$d/$name.out" 2>&1 &
	fi
	TP=$!
	lt_pids+=("$TP")
	for _ in $(seq 1 200); do
		[ -s "$d/$name.ready" ] && return 0
		kill -0 "$TP" 2> /dev/null || break
		sleep 0.05
	done
	fail "$name: the target never got ready: $(cat "$d/$name.out")"
	return 1
}

# lt_target_finish NAME: asks inject_target TP to stop; passes when it
# exits 0 saying its own checks are ok
lt_target_finish() {
	local name=$1 d=$LT_TMP rc
	touch "$d/$name.stop"
	wait "$TP"
	rc=$?
	if [ $rc -eq 0 ] && grep -q "^inject_target: .* ok" "$d/$name.out"; then
		pass "$name: the target's own checks pass: $(grep '^inject_target' "$d/$name.out")"
	else
		fail "$name: the target exited $rc: $(tail -3 "$d/$name.out")"
	fi
}

# lt_testdata NAME : sets PROG to the test program build/testdata/NAME, or
# fails the test when it was not built.
lt_testdata() {
	PROG=$TESTDATA/$1
	[ -x "$PROG" ] || fail_now "$PROG is missing (make testdata)"
}

lt_require_bpf() {
	if [ "$(id -u)" != 0 ]; then
		echo "skip: needs root for BPF uprobes"
		exit 77
	fi
	[ -x "$DWLEAK" ] || fail_now "$DWLEAK is missing (make check)"
	[ -x "$TESTDATA/seed_O2" ] || fail_now "$TESTDATA has no test programs (make testdata)"
	lt_require_libc_names
}

# The traces' checks name libc's frames as gdb does: __libc_start_call_main
# (the root of every main thread's stack) is a local symbol that only
# libc's separate debug file (Debian's libc6-dbg) has; without it the frame
# is [libc.so.6]+0x2724a.  Fails, saying so, when that file is missing.
lt_require_libc_names() {
	local libc=/lib/x86_64-linux-gnu/libc.so.6 id
	id=$(readelf -n "$libc" 2> /dev/null | awk '/Build ID/ { print $3 }')
	if [ -z "$id" ] || [ ! -e "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ]; then
		echo "FAIL: libc's debug file is not installed (Debian: libc6-dbg, which .ci/deps.sh installs):"
		echo "      these checks expect libc frames named as gdb names them (__libc_start_call_main)"
		exit 1
	fi
}

# lt_start VAR OUT CMD... : the subshell exec's CMD, so $! is CMD's pid once
# the exec happened; wait for that so nobody attaches to a shell.
lt_start() {
	local __var=$1 __out=$2 __pid __want __i
	shift 2
	(exec "$@" > "$__out" 2>&1 < /dev/null) &
	__pid=$!
	lt_pids+=("$__pid")
	__want=$(readlink -f "$1")
	for ((__i = 0; __i < 200; __i++)); do
		[ "$(readlink "/proc/$__pid/exe" 2> /dev/null)" = "$__want" ] && break
		sleep 0.01
	done
	# Let the dynamic loader finish mapping the libraries.
	sleep 0.2
	printf -v "$__var" %s "$__pid"
}

# lt_trace VAR ERR ARGS... : dwleak in the background; waits (up to 30 s)
# for "dwleak: tracing" on its stderr, or for it to exit.
lt_trace() {
	local __var=$1 __err=$2 __pid __i
	shift 2
	"$DWLEAK" "$@" 2> "$__err" &
	__pid=$!
	lt_pids+=("$__pid")
	printf -v "$__var" %s "$__pid"
	for ((__i = 0; __i < 3000; __i++)); do
		grep -q '^dwleak: tracing' "$__err" 2> /dev/null && return 0
		kill -0 "$__pid" 2> /dev/null || break
		sleep 0.01
	done
	grep -q '^dwleak: tracing' "$__err" 2> /dev/null && return 0
	# on stderr: a caller may send dwleak's stdout (the report) to a file
	echo "dwleak never said 'dwleak: tracing'; its stderr:" >&2
	sed 's/^/    /' "$__err" >&2
	return 1
}

# lt_wait_line FILE WORD : waits up to 5 s for FILE to hold WORD (a
# target's answer); status 1 if it never does.
lt_wait_line() {
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q "$2" "$1" 2> /dev/null && return 0
		sleep 0.05
	done
	return 1
}

# lt_wait PID [SECS] : exit status of a background job, killing it (status
# 124) if it takes longer than SECS (default 60).
lt_wait() {
	local pid=$1 secs=${2:-60} i
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2> /dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2> /dev/null; then
		kill -KILL "$pid" 2> /dev/null
		wait "$pid" 2> /dev/null
		return 124
	fi
	wait "$pid"
}

# Python helpers for the checks on a JSON report.
#   r                  the report (sys.argv[1]); ARGS are sys.argv[2:]
#   names(stack)       function names of its frames, innermost first
#                      (None for a frame without a symbol)
#   physical(stack)    its frames that are not "inlined": true
#   base(name)         a function name without the @VERSION suffix
#   chain_at(stack, want, start=0)  index list of the frames matching the
#                      names in WANT in order (a subsequence), or None
#   top_stack_with(fn) the stack with most bytes that has function FN
#   only_stack_with(fn)  the one stack that has function FN; None, after a
#                      failed check that shows them (or all), when not one
#   show(stack)        a printable summary of a stack
#   site_of(stack)     its innermost site_* frame (the ledger programs), or None
#   check_sites(ledger, got)  per site {name: (bytes, allocations)}: equal or fail
#   site_totals()      {site: (bytes, allocations)} over the report's stacks
#   check_estimates(ledger, n)  a report sampled one per N bytes against
#                      LEDGER {site: {"bytes": B}}: each site's estimate within
#                      4.5 sd (sqrt(N * B)), sites under 8 expected samples
#                      only shown, then all sites together
#   fail(msg)          record a failed check (exit status 1 at the end)
#   ok(msg)            print a passed check
LT_PY='
import json, math, sys, re
r = json.load(open(sys.argv[1]))
ARGS = sys.argv[2:]
_failed = 0
def fail(msg):
    global _failed
    _failed += 1
    print("FAIL: " + msg)
def ok(msg):
    print("ok: " + msg)
def base(name):
    return None if name is None else name.split("@")[0]
def names(s):
    return [base(f["function"]) for f in s["frames"]]
def physical(s):
    return [f for f in s["frames"] if not f.get("inlined")]
def chain_at(s, want, start=0):
    got, i = [], start
    ns = names(s)
    for w in want:
        while i < len(ns) and ns[i] != w:
            i += 1
        if i == len(ns):
            return None
        got.append(i)
        i += 1
    return got
def top_stack_with(fn):
    for s in r["stacks"]:
        if fn in names(s):
            return s
    return None
def show(s):
    out = "%d B in %d allocations (%s), truncated=%s, unwind_error=%s\n" % (
        s["bytes"], s["allocations"], s.get("allocator"), s.get("truncated"), s.get("unwind_error"))
    for f in s["frames"]:
        out += "      %-40s %s %s%s\n" % (f["function"], f["module"].split("/")[-1],
            f["elf_address"], " (inlined)" if f.get("inlined") else "")
    return out
def only_stack_with(fn):
    st = [s for s in r["stacks"] if fn in names(s)]
    if len(st) == 1:
        return st[0]
    fail("%d stacks through %s, want 1:\n%s" % (len(st), fn, "".join(show(s) for s in st or r["stacks"])))
    return None
ROOTS = ("_start", "__libc_start_call_main", "start_thread", "clone3")
def site_of(s):
    return next((f for f in names(s) if f and f.startswith("site_")), None)
def check_sites(ledger, got):
    # every ledger site: the (bytes, allocations) dwleak gives equal the ledger
    for site, (b, c) in sorted(ledger.items()):
        g = got.get(site, (0, 0))
        if tuple(g) != (b, c):
            fail("%s: dwleak %d B in %d, ledger %d B in %d" % (site, g[0], g[1], b, c))
        else:
            ok("%s: %d B in %d" % (site, b, c))
def site_totals():
    got = {}
    for s in r["stacks"]:
        site = site_of(s)
        if site:
            b, c = got.get(site, (0, 0))
            got[site] = (b + s["bytes"], c + s["allocations"])
    return got
def check_estimates(ledger, n):
    est = site_totals()
    worst = 0.0
    tot_true = tot_est = 0
    for site, want in sorted(ledger.items()):
        b = want["bytes"]
        if b == 0:
            continue
        e = est.get(site, (0, 0))[0]
        z = (e - b) / math.sqrt(n * b)
        tot_true += b
        tot_est += e
        line = "%-24s true %9d  estimate %9d  (%+.1f%%, %+.2f sd)" % (site, b, e, 100.0 * (e - b) / b, z)
        if b < 8 * n:
            print("info: " + line + "  (under 8 samples expected: not judged)")
            continue
        worst = max(worst, abs(z))
        (fail if abs(z) > 4.5 else ok)(line)
    z = (tot_est - tot_true) / math.sqrt(n * tot_true)
    (fail if abs(z) > 4.5 else ok)("all sites: true %d estimate %d (%+.2f%%, %+.2f sd); worst site %.2f sd" % (
        tot_true, tot_est, 100.0 * (tot_est - tot_true) / tot_true, z, worst))
'

lt_check() {
	local json=$1 snippet
	shift
	snippet=$(cat)
	"$LT_PYTHON" -c "$LT_PY
$snippet
sys.exit(1 if _failed else 0)" "$json" "$@"
	local rc=$?
	[ $rc -eq 0 ] || check_errors=$((check_errors + 1))
	return $rc
}

# Run directly (tests/run.sh runs every tests/*.sh), this file checks its own
# helpers on a made-up report, so the trace_*.sh checks can be trusted.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	cat > "$LT_TMP/self.json" << 'JSON'
{"dwleak_report": 1, "pid": 1, "command": "x", "unwind": "dwarf", "duration_s": 1.0,
 "totals": {"outstanding_bytes": 48, "outstanding_allocations": 2, "stacks": 2,
            "dropped_events": 0, "truncated_stacks": 0, "unwind_errors": 1},
 "stacks": [
  {"bytes": 40, "allocations": 1, "allocator": "malloc", "frames": [
    {"address": "0x1", "module": "/l/libc.so.6", "build_id": null, "elf_address": "0x1",
     "function": "malloc", "offset": 0, "file": null, "line": null, "inlined": false},
    {"address": "0x2", "module": "/p/prog", "build_id": null, "elf_address": "0x2",
     "function": "inner", "offset": 0, "file": null, "line": null, "inlined": true},
    {"address": "0x2", "module": "/p/prog", "build_id": null, "elf_address": "0x2",
     "function": "main", "offset": 0, "file": null, "line": null, "inlined": false},
    {"address": "0x3", "module": "/l/libc.so.6", "build_id": null, "elf_address": "0x3",
     "function": "__libc_start_main@@GLIBC_2.34", "offset": 0, "file": null, "line": null, "inlined": false}]},
  {"bytes": 8, "allocations": 1, "allocator": "malloc", "unwind_error": "x", "frames": [
    {"address": "0x1", "module": "/l/libc.so.6", "build_id": null, "elf_address": "0x1",
     "function": null, "offset": 0, "file": null, "line": null, "inlined": false}]}]}
JSON
	lt_check "$LT_TMP/self.json" a b << 'PY'
s = r["stacks"][0]
assert ARGS == ["a", "b"], ARGS
assert names(s) == ["malloc", "inner", "main", "__libc_start_main"], names(s)
assert [f["function"] for f in physical(s)] == ["malloc", "main", "__libc_start_main@@GLIBC_2.34"]
assert chain_at(s, ["malloc", "main"]) == [0, 2]
assert chain_at(s, ["main", "malloc"]) is None
assert top_stack_with("inner") is s and top_stack_with("nope") is None
assert names(r["stacks"][1]) == [None] and "unwind_error=x" in show(r["stacks"][1])
fail("(expected: the self-test checks that fail() is reported)")
PY
	rc=$?
	if [ $rc -ne 1 ] || [ "$check_errors" -ne 1 ]; then
		echo "FAIL: lt_check did not report the snippet's failure (rc $rc, errors $check_errors)"
		exit 1
	fi
	check_errors=0
	# A passing snippet; only_stack_with's failures are caught, not counted.
	lt_check "$LT_TMP/self.json" << 'PY' || fail "lt_check failed a passing snippet"
caught = []
fail = caught.append
assert only_stack_with("inner") is r["stacks"][0] and not caught, caught
assert only_stack_with("malloc") is r["stacks"][0] and not caught, caught
assert only_stack_with("nope") is None and caught[-1].startswith("0 stacks through nope"), caught
r["stacks"].append(r["stacks"][0])
assert only_stack_with("inner") is None and caught[-1].startswith("2 stacks through inner"), caught
ok("helpers")
PY
	lt_start pid "$LT_TMP/sleep.out" /bin/sleep 30
	[ "$(readlink "/proc/$pid/exe")" = "$(readlink -f /bin/sleep)" ] ||
		fail "lt_start: pid $pid is not the started program"
	lt_wait "$pid" 1
	[ $? -eq 124 ] || fail "lt_wait did not time out a running program"
	check_finish
fi
