#!/bin/bash
# Process trees and any allocator (issue 14): dwleak -- CMD follows every
# process the command forks or execs, each from its first allocation, and
# keeps them apart in the report; with -p, --follow-forks does the same for
# children created after attach.  Each case is checked per process to the
# byte against what the programs are written to leak:
#
#   a  a forking test runner (testdata/forker): the runner's 64 B, test k's
#      k * 100k B, a crashing child's 24 B (killed by SIGABRT), an exec'd
#      seed's 40 B per iteration; every process's fate in "processes"
#   b  sh -c 'seed; true' and timeout 30 seed: the seed's leak, with its
#      complete stack, in the seed's process (wrappers are transparent)
#   c  an exec chain that changes allocator: env LD_PRELOAD=libjemalloc.so.2
#      seed: the seed's operator new is jemalloc's
#   d  a C++ program under mimalloc (LD_PRELOAD=libmimalloc.so.2): mimalloc
#      named, every new counted (its operators never call malloc)
#   e  --fail-on-leak counts the whole tree: a leak only in a child fails
#   f  -p PID --follow-forks: the runner's children, forked after attach
#   g  a cgo program (when Go is installed): the C stack stops where Go
#      switches stacks, and says so; the Go heap note
#
# Run by tests/run.sh; by hand: LT_ONLY=ab bash tests/process_trees.sh
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
lt_testdata forker
FORKER=$PROG
SEED=$TESTDATA/seed_O2
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
MIMALLOC=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2
tmp=$LT_TMP

# trace NAME ARGS...: dwleak --format json -o $tmp/NAME.json ARGS, exit
# status in $rc, stderr in $tmp/NAME.err
trace() {
	local name=$1
	shift
	timeout -k 5 120 "$DWLEAK" --format json -o "$tmp/$name.json" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
	rc=$?
}

# --- a: a forking test runner ---
if lt_part a; then
	trace runner -t 0 -- "$FORKER" -- "$SEED" --iterations 3 --interval-ms 1
	[ $rc -eq 0 ] || fail "runner: dwleak exit $rc, want 0 (the runner exits 0): $(tail -3 "$tmp/runner.err")"
	lt_check "$tmp/runner.json" "$FORKER" "$SEED" << 'PY'
forker, seed = ARGS
procs = {p["pid"]: p for p in r.get("processes", [])}
runner = r["pid"]
def bytes_of(pid, fn):
    st = [s for s in r["stacks"] if s["pid"] == pid and fn in names(s)]
    return sum(s["bytes"] for s in st), sum(s["allocations"] for s in st), st
if runner not in procs or procs[runner]["ppid"] != 0:
    fail("the runner %d is not the root of processes: %s" % (runner, procs))
children = [p for p in procs.values() if p["ppid"] == runner]
if len(children) != 5:
    fail("%d children of the runner, want 5 (3 tests, a crasher, an exec'd seed): %s" % (len(children), children))
b, n, st = bytes_of(runner, "runner_leak")
if (b, n) != (64, 1):
    fail("runner: %d B in %d from runner_leak, want 64 B in 1" % (b, n))
else:
    ok("runner: 64 B in 1 from runner_leak, in the runner's process")
tests = {}
for c in children:
    b, n, st = bytes_of(c["pid"], "test_leak")
    if n:
        tests[n] = (b, c)
for k in (1, 2, 3):
    if k not in tests:
        fail("no child with %d allocations from test_leak: %s" % (k, tests))
        continue
    b, c = tests[k]
    want_status = 1 if k == 3 else 0
    if b != 100 * k * k:
        fail("test %d: %d B, want %d" % (k, b, 100 * k * k))
    elif c["state"] != "ended" or c.get("exit_code") != want_status:
        fail("test %d: state %s exit %s, want ended with %d" % (k, c["state"], c.get("exit_code"), want_status))
    elif not all(chain_at(s, ["malloc", "test_leak", "main"]) for s in bytes_of(c["pid"], "test_leak")[2]):
        fail("test %d: stack is not malloc <- test_leak <- main: %s" % (k, [show(s) for s in bytes_of(c["pid"], "test_leak")[2]]))
    else:
        ok("test %d: %d B in %d allocations in its own process, exit %d" % (k, b, k, want_status))
crashers = [c for c in children if bytes_of(c["pid"], "crash_leak")[1]]
if len(crashers) != 1 or bytes_of(crashers[0]["pid"], "crash_leak")[0] != 24 or crashers[0].get("signal") != 6:
    fail("crasher: %s" % crashers)
else:
    ok("crasher: 24 B from crash_leak, killed by signal 6")
seeds = [c for c in children if bytes_of(c["pid"], "LeakLib::slowMemoryLeak()")[1]]
if len(seeds) != 1:
    fail("%d children leak from slowMemoryLeak, want 1 (the exec'd seed)" % len(seeds))
else:
    b, n, st = bytes_of(seeds[0]["pid"], "LeakLib::slowMemoryLeak()")
    if (b, n) != (120, 3) or seed not in seeds[0]["command"]:
        fail("exec'd seed: %d B in %d, command %s; want 120 B in 3, the seed's command" % (b, n, seeds[0]["command"]))
    elif not chain_at(st[0], ["operator new(unsigned long)", "LeakLib::slowMemoryLeak()", "caller()", "main"]):
        fail("exec'd seed: incomplete stack:\n" + show(st[0]))
    else:
        ok("exec'd seed: 120 B in 3 from slowMemoryLeak, complete stack, its own command")
# the runner's children leaked nothing of the runner's: forked copies do
# not inherit its ledger
for c in children:
    if bytes_of(c["pid"], "runner_leak")[1]:
        fail("child %d reports the runner's own leak" % c["pid"])
PY
fi

# --- b: wrappers are transparent ---
if lt_part b; then
	for wrap in "sh -c" timeout; do
		name=${wrap// /_}
		if [ "$wrap" = "sh -c" ]; then
			trace "$name" -- sh -c "$SEED --iterations 4 --interval-ms 1; true"
		else
			trace "$name" -- timeout 30 "$SEED" --iterations 4 --interval-ms 1
		fi
		[ $rc -eq 0 ] || fail "$wrap: dwleak exit $rc: $(tail -3 "$tmp/$name.err")"
		lt_check "$tmp/$name.json" "$wrap" << 'PY'
wrap = ARGS[0]
st = [s for s in r["stacks"] if "LeakLib::slowMemoryLeak()" in names(s)]
if len(st) != 1 or (st[0]["bytes"], st[0]["allocations"]) != (160, 4):
    fail("%s: the seed's leak: %s" % (wrap, [show(s) for s in st]))
elif st[0]["pid"] == r["pid"]:
    fail("%s: the seed's leak is under the wrapper's pid" % wrap)
elif not chain_at(st[0], ["malloc", "operator new(unsigned long)", "LeakLib::slowMemoryLeak()", "caller()", "main", "__libc_start_call_main"]):
    fail("%s: incomplete stack:\n%s" % (wrap, show(st[0])))
else:
    ok("%s: the seed's 160 B in 4, complete, in the seed's own process %d" % (wrap, st[0]["pid"]))
PY
	done
fi

# --- c: an exec chain that changes allocator ---
if lt_part c; then
	trace envchain -- env LD_PRELOAD="$JEMALLOC" "$SEED" --iterations 5 --interval-ms 1
	[ $rc -eq 0 ] || fail "env chain: dwleak exit $rc: $(tail -3 "$tmp/envchain.err")"
	lt_check "$tmp/envchain.json" << 'PY'
st = [s for s in r["stacks"] if "LeakLib::slowMemoryLeak()" in names(s)]
if len(st) != 1 or (st[0]["bytes"], st[0]["allocations"]) != (200, 5):
    fail("env LD_PRELOAD=jemalloc seed: %s" % [show(s) for s in st])
elif "libjemalloc" not in st[0]["frames"][0]["module"]:
    fail("env LD_PRELOAD=jemalloc seed: frame 0 is not jemalloc's:\n" + show(st[0]))
else:
    ok("env LD_PRELOAD=jemalloc seed: 200 B in 5, allocated by %s in %s" % (st[0]["frames"][0]["function"], st[0]["frames"][0]["module"]))
PY
fi

# --- d: a C++ program under mimalloc ---
if lt_part d; then
	if [ ! -e "$MIMALLOC" ]; then
		fail "$MIMALLOC is missing (Debian: libmimalloc2.0, which .ci/deps.sh installs)"
	else
		trace mimalloc -- env LD_PRELOAD="$MIMALLOC" "$SEED" --iterations 7 --interval-ms 1
		[ $rc -eq 0 ] || fail "mimalloc: dwleak exit $rc: $(tail -3 "$tmp/mimalloc.err")"
		if ! grep -q '^dwleak: pid [0-9]* (.*seed_O2.*) allocates with mimalloc in .*libmimalloc.* (LD_PRELOAD)' \
			"$tmp/mimalloc.err"; then
			fail "mimalloc: no line naming the seed's allocator mimalloc: $(cat "$tmp/mimalloc.err")"
		else
			pass "mimalloc: $(grep -o 'allocates with .*' "$tmp/mimalloc.err")"
		fi
		lt_check "$tmp/mimalloc.json" << 'PY'
st = [s for s in r["stacks"] if "LeakLib::slowMemoryLeak()" in names(s)]
if len(st) != 1 or (st[0]["bytes"], st[0]["allocations"]) != (280, 7):
    fail("mimalloc: the seed's new[] calls: %s" % [show(s) for s in st])
elif "libmimalloc" not in st[0]["frames"][0]["module"]:
    fail("mimalloc: frame 0 is not mimalloc's:\n" + show(st[0]))
else:
    ok("mimalloc: 280 B in 7 from slowMemoryLeak, allocated by %s" % st[0]["frames"][0]["function"])
PY
	fi
fi

# --- e: --fail-on-leak counts the whole tree ---
if lt_part e; then
	timeout -k 5 60 "$DWLEAK" --fail-on-leak --suppressions /dev/null -- sh -c "$SEED --iterations 2 --interval-ms 1" \
		> "$tmp/fail.out" 2> "$tmp/fail.err"
	rc=$?
	if [ $rc -ne 1 ]; then
		fail "--fail-on-leak, a leak only in a child: exit $rc, want 1"
	else
		pass "--fail-on-leak, a leak only in a child: exit 1"
	fi
fi

# --- f: -p --follow-forks ---
if lt_part f; then
	lt_start fpid "$tmp/forker_p.out" "$FORKER" --delay-ms 1500
	timeout -k 5 60 "$DWLEAK" -p "$fpid" --follow-forks --format json -o "$tmp/p.json" > "$tmp/p.out" 2> "$tmp/p.err"
	rc=$?
	[ $rc -eq 0 ] || fail "-p --follow-forks: dwleak exit $rc: $(tail -3 "$tmp/p.err")"
	lt_check "$tmp/p.json" << 'PY'
kids = {}
for s in r["stacks"]:
    if "test_leak" in names(s):
        kids.setdefault(s["pid"], [0, 0])
        kids[s["pid"]][0] += s["bytes"]
        kids[s["pid"]][1] += s["allocations"]
got = sorted(tuple(v) for v in kids.values())
if got != [(100, 1), (400, 2), (900, 3)]:
    fail("-p --follow-forks: test children %s, want 100 B in 1, 400 in 2, 900 in 3" % got)
else:
    ok("-p --follow-forks: every child forked after attach, to the byte: %s" % got)
PY
fi

# --- g: cgo ---
if lt_part g; then
	if [ ! -x "$TESTDATA/cgoleak" ]; then
		fail "$TESTDATA/cgoleak is missing: Go (golang-go, which .ci/deps.sh installs) did not build it"
	else
		trace cgo -- "$TESTDATA/cgoleak"
		[ $rc -eq 0 ] || fail "cgo: dwleak exit $rc"
		grep -q '^dwleak: note: pid .*is a Go program: its Go heap is managed by the Go runtime' "$tmp/cgo.err" ||
			fail "cgo: no note that the Go heap is not traced: $(cat "$tmp/cgo.err")"
		lt_check "$tmp/cgo.json" << 'PY'
st = [s for s in r["stacks"] if "c_leak" in names(s)]
if len(st) != 1 or (st[0]["bytes"], st[0]["allocations"]) != (2019, 20):
    fail("cgo: c_leak's blocks: %s" % [show(s) for s in st])
else:
    s = st[0]
    ns = names(s)
    if not chain_at(s, ["malloc", "c_leak"]) or not ns[-1].startswith("runtime.asmcgocall"):
        fail("cgo: the stack must end at runtime.asmcgocall:\n" + show(s))
    elif "Go" not in (s.get("unwind_error") or ""):
        fail("cgo: the stop is not said: %s" % s.get("unwind_error"))
    else:
        ok("cgo: 2019 B in 20, malloc <- c_leak <- %s, then: %s" % (ns[-1], s["unwind_error"]))
PY
	fi
fi

check_finish
