#!/bin/bash
# `dwleak symbolize`: a report taken on the seed program stripped with no
# debug file anywhere (seed_O2_nodebug), re-symbolized with a --debug-dir
# holding only seed_O2's separate debug file under .build-id/, names the
# program's frames exactly as the report of the unstripped twin seed_O2
# does (function, offset, file, line, inlined frames), stack by stack.
# Also: the object found only by build id (recorded path gone), a report
# symbolized with nothing new comes back byte for byte, and invalid input
# exits 2 with a line:column message.
source "$(dirname "$0")/lib_trace.sh"
lt_require_bpf

run_seed() { # NAME PROG : a JSON report of PROG in $LT_TMP/NAME.json
	if ! "$DWLEAK" --format json -o "$LT_TMP/$1.json" -t 0 -- "$2" --iterations 10 \
		--interval-ms 5 > /dev/null 2> "$LT_TMP/$1.err"; then
		fail "$1: dwleak failed: $(tail -3 "$LT_TMP/$1.err")"
		check_finish
	fi
}

# (a) the same program, stripped and not
run_seed nodebug "$TESTDATA/seed_O2_nodebug"
run_seed full "$TESTDATA/seed_O2"

# (b) a debug dir with seed_O2's debug info only, laid out by build id
bid=$(readelf -n "$TESTDATA/seed_O2" | awk '/Build ID:/ { print $3 }')
if [ -z "$bid" ]; then
	fail "seed_O2 has no build id"
	check_finish
fi
dbg=$LT_TMP/debug
mkdir -p "$dbg/.build-id/${bid:0:2}"
objcopy --only-keep-debug "$TESTDATA/seed_O2" "$dbg/.build-id/${bid:0:2}/${bid:2}.debug" ||
	fail "objcopy --only-keep-debug failed"

symbolize() { # OUT ARGS... : dwleak symbolize ARGS -o OUT, checking exit 0
	local out=$1
	shift
	if ! "$DWLEAK" symbolize "$@" -o "$out" 2> "$out.err"; then
		fail "dwleak symbolize $*: $(cat "$out.err")"
		return 1
	fi
}

# The program's frames of RE must equal those of the unstripped report
# (ARGS[0]) stack by stack, stacks matched by their elf_address sequence,
# and the stripped report (ARGS[1]) must have lacked them.
COMPARE='
def prog(f):
    return f["module"] is not None and f["module"].split("/")[-1] in ("seed_O2", "seed_O2_nodebug")
def key(s):
    return tuple(f["elf_address"] for f in physical(s))
def fields(s):
    return [(f["function"], f["offset"], f["file"], f["line"], f["inlined"])
            for f in s["frames"] if prog(f)]
full = {key(s): s for s in json.load(open(ARGS[0]))["stacks"]}
before = {key(s): s for s in json.load(open(ARGS[1]))["stacks"]}
matched = 0
for s in r["stacks"]:
    t, b = full.get(key(s)), before.get(key(s))
    if t is None or b is None:
        fail("stack %s of the symbolized report is in %s" % (key(s),
             "neither report" if t is None and b is None else
             "only the stripped report" if t is None else "only the unstripped report"))
        continue
    matched += 1
    if fields(s) != fields(t):
        fail("program frames differ from the unstripped report:\n  got  %s\n  want %s"
             % (fields(s), fields(t)))
    named = [f for f in b["frames"] if prog(f) and (f["file"] or f["function"] in
             ("main", "caller()", "LeakLib::slowMemoryLeak()"))]
    if named:
        fail("the stripped report already named %s: the test proves nothing"
             % [f["function"] for f in named])
leak = top_stack_with("LeakLib::slowMemoryLeak()")
if leak is None or chain_at(leak, ["malloc", "LeakLib::slowMemoryLeak()", "caller()", "main"]) is None:
    fail("no stack with the seed chain malloc <- slowMemoryLeak <- caller <- main:\n" +
         "".join(show(s) for s in r["stacks"]))
elif matched == len(r["stacks"]) and not _failed:
    ok("%d stacks named as in the unstripped report: %s" % (matched, " <- ".join(
       n for n in names(leak) if n)))
'

# (c) the recorded path exists (stripped): its debug file comes from the dir
if symbolize "$LT_TMP/re.json" --debug-dir "$dbg" "$LT_TMP/nodebug.json"; then
	lt_check "$LT_TMP/re.json" "$LT_TMP/full.json" "$LT_TMP/nodebug.json" <<< "$COMPARE"
fi

# the recorded path is gone: the .debug file alone is the object (it keeps
# the symbols, DWARF and addresses, only the code is missing)
"$LT_PYTHON" - "$LT_TMP/nodebug.json" "$LT_TMP/moved.json" << 'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for s in r["stacks"]:
    for f in s["frames"]:
        if f["module"] and f["module"].endswith("/seed_O2_nodebug"):
            f["module"] = "/nonexistent/ci-machine/seed_O2_nodebug"
json.dump(r, open(sys.argv[2], "w"), indent=1)
PY
if symbolize "$LT_TMP/re_moved.json" --debug-dir "$dbg" "$LT_TMP/moved.json"; then
	lt_check "$LT_TMP/re_moved.json" "$LT_TMP/full.json" "$LT_TMP/moved.json" <<< "$COMPARE"
fi

# nothing new to find: the report comes back byte for byte
if symbolize "$LT_TMP/same.json" "$LT_TMP/full.json"; then
	if cmp -s "$LT_TMP/full.json" "$LT_TMP/same.json"; then
		pass "a report symbolized with nothing new is unchanged"
	else
		fail "a report symbolized with nothing new changed: $(diff "$LT_TMP/full.json" \
			"$LT_TMP/same.json" | head -20)"
	fi
fi

# invalid input: exit 2 with FILE:LINE:COL
head -c 700 "$LT_TMP/nodebug.json" > "$LT_TMP/truncated.json"
"$DWLEAK" symbolize "$LT_TMP/truncated.json" > "$LT_TMP/bad.out" 2> "$LT_TMP/bad.err"
rc=$?
if [ $rc -ne 2 ]; then
	fail "truncated JSON: exit $rc, want 2"
elif ! grep -Eq "truncated\.json:[0-9]+:[0-9]+: invalid JSON: unexpected end of input" \
	"$LT_TMP/bad.err"; then
	fail "truncated JSON: message without line:column: $(cat "$LT_TMP/bad.err")"
elif [ -s "$LT_TMP/bad.out" ]; then
	fail "truncated JSON: something was written to stdout"
else
	pass "truncated JSON: exit 2, $(head -1 "$LT_TMP/bad.err")"
fi
echo '{"stacks": []}' > "$LT_TMP/other.json"
"$DWLEAK" symbolize "$LT_TMP/other.json" > /dev/null 2> "$LT_TMP/other.err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "not a dwleak report" "$LT_TMP/other.err"; then
	fail "JSON that is not a report: exit $rc, $(cat "$LT_TMP/other.err")"
else
	pass "JSON that is not a report: exit 2"
fi

check_finish
