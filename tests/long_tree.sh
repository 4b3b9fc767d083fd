#!/bin/bash
# Long process trees (issue 20, item 5): what lives as long as a trace is
# given back as processes exit, so a tree of hundreds of short-lived
# processes exhausts no table, and the program that comes last gets its
# exact verdict.  What cannot be kept is said, per cause and process.
#
#   a  -- CMD: 200 runs of testdata/many_stacks (300 stacks of their own
#      each: the tree makes far more distinct stacks than the stacks map's
#      16,384 entries), a many_stacks --fork 3 (processes sharing stack
#      ids), then testdata/leak_kinds: leak_kinds's kinds per site equal
#      the ones its header gives and those of a trace of leak_kinds alone;
#      every many_stacks process's leaks are there, named, definitely lost;
#      no stack lost, no walk unstored, nothing dropped, no loss line; the
#      map never held more than half its size, and the run is quick
#   b  the limit hit on purpose (DWLEAK_STACKS_MAX=64): the report says
#      how many allocations of which process went without a stack and why,
#      and every allocation is still counted
#   c  a process whose forked children exit while it records under the
#      same stack ids, the map emptied in between (DWLEAK_STACKS_MAX=1024,
#      --unwind both, so both walks' ids are moved out and named again)
#
#   d  a's tree walked in the processes themselves (--walk process; a-c
#      walk in the kernel: they are about its stacks map):
#      every many_stacks process's leaks, named, nothing dropped
#
# Run by tests/run.sh; by hand: LT_ONLY=ab bash tests/long_tree.sh
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
lt_testdata many_stacks
MANY=$PROG
lt_testdata leak_kinds
KINDS=$PROG
tmp=$LT_TMP

# Per site of leak_kinds (its header): { site: { kind: [bytes, blocks] } }.
HEADER_KINDS='{
 "site_lost": {"definitely_lost": [96, 2]},
 "site_tree_root": {"definitely_lost": [64, 1]},
 "site_tree_child": {"indirectly_lost": [96, 3]},
 "site_cycle": {"definitely_lost": [80, 1], "indirectly_lost": [80, 1]},
 "site_interior": {"possibly_lost": [112, 1]},
 "site_list": {"reachable": [512, 4]},
 "site_other_stack": {"reachable": [144, 1]},
 "site_register": {"reachable": [160, 1]},
 "site_tls": {"reachable": [176, 1]},
 "site_anon": {"reachable": [192, 1]},
 "site_before": {"reachable": [224, 1]},
 "site_via_before": {"reachable": [208, 1]}
}'

# Python for the checks: kinds per site of process PID's stacks, and the
# many_stacks processes' leaks.
KINDS_PY='
ALLOC = {"malloc", "calloc", "realloc", "operator new", "memalign", "aligned_alloc"}
def kinds_of(rep, pid=None):
    got = {}
    for s in rep["stacks"]:
        if pid is not None and s.get("pid", rep["pid"]) != pid:
            continue
        fns = [(f["function"] or "?").split("@")[0] for f in s["frames"]]
        site = next((f for f in fns if f.startswith("site_")), None) or \
            next((f for f in fns if f not in ALLOC), "?")
        for k, c in s.get("leak_kinds", {}).items():
            if c["bytes"] or c["allocations"]:
                g = got.setdefault(site, {}).setdefault(k, [0, 0])
                g[0] += c["bytes"]
                g[1] += c["allocations"]
    return got
def by_pid(rep):
    out = {}
    for s in rep["stacks"]:
        out.setdefault(s.get("pid", rep["pid"]), []).append(s)
    return out
def leak_here(stacks):
    """(blocks, bytes, distinct stacks, definitely lost bytes, bad stacks) of leak_here"""
    n = b = lost = 0
    k = 0
    bad = []
    for s in stacks:
        fns = names(s)
        if "leak_here" not in fns:
            continue
        k += 1
        n += s["allocations"]
        b += s["bytes"]
        lost += s["leak_kinds"]["definitely_lost"]["bytes"]
        if s.get("unwind_error") or s.get("truncated") or "main" not in fns or \
                not ("via_a" in fns or "via_b" in fns):
            bad.append(show(s))
    return n, b, k, lost, bad
'

# --- a: a long tree, then the leaking program ---
if lt_part a; then
	before=$check_errors
	start=$SECONDS
	timeout -k 5 120 "$DWLEAK" --walk kernel --leak-check --stats -t 0 --format json -o "$tmp/tree.json" -- \
		bash -c "for i in \$(seq 200); do $MANY; done; $MANY --fork 3; $KINDS" \
		> "$tmp/tree.out" 2> "$tmp/tree.err"
	rc=$?
	secs=$((SECONDS - start))
	[ $rc -eq 0 ] || fail "the tree: dwleak exit $rc, want 0: $(tail -3 "$tmp/tree.err")"
	[ $secs -lt 60 ] || fail "the tree took ${secs} s (want < 60)"
	timeout -k 5 120 "$DWLEAK" --leak-check -t 0 --format json -o "$tmp/alone.json" -- "$KINDS" \
		> /dev/null 2> "$tmp/alone.err" || fail "leak_kinds alone: $(tail -3 "$tmp/alone.err")"
	stored=$(sed -n 's/^dwleak: stats: stacks_stored \([0-9]*\)$/\1/p' "$tmp/tree.err")
	peak=$(sed -n 's/^dwleak: stats: stacks map: \([0-9]*\) entries, at most \([0-9]*\) held.*/\2/p' "$tmp/tree.err")
	cap=$(sed -n 's/^dwleak: stats: stacks map: \([0-9]*\) entries.*/\1/p' "$tmp/tree.err")
	[ -n "$stored" ] && [ -n "$peak" ] && [ -n "$cap" ] || fail "--stats has no stacks_stored or stacks map line"
	# the test proves nothing unless the tree makes far more stacks than fit
	[ "${stored:-0}" -gt $((2 * ${cap:-16384})) ] ||
		fail "the tree stored only ${stored:-?} stacks; want more than twice the map's ${cap:-?}"
	[ "${peak:-99999999}" -le $((${cap:-0} / 2 + 2048)) ] ||
		fail "the map held ${peak:-?} of ${cap:-?} at once: it is not emptied as processes exit"
	grep -E "^dwleak: stats: (stacks_map_full|mappings_map_full|alloc_events_lost|events_lost|pending_calls_full) [1-9]" \
		"$tmp/tree.err" && fail "a table filled up or records were lost (above)"
	grep -q "processes given no mapping table (more than [0-9]* alive at once): 0; mappings not recorded for naming frames (map full): 0" \
		"$tmp/tree.err" || fail "a per-process limit was hit: $(grep 'no mapping table' "$tmp/tree.err")"
	lt_check "$tmp/tree.json" "$tmp/alone.json" "$HEADER_KINDS" "$MANY" "$KINDS" << PY
$KINDS_PY
alone = json.load(open(ARGS[0]))
header = json.loads(ARGS[1])
t = r["totals"]
if t["dropped_events"] or t["unwind_errors"] or t["truncated_stacks"]:
    fail("dropped %d, unwind errors %d, truncated %d" % (t["dropped_events"], t["unwind_errors"], t["truncated_stacks"]))
if r.get("losses"):
    fail("losses: %s" % [l["text"] for l in r["losses"]])
c = r["counters"]
for k in ("stacks_map_full", "mappings_map_full", "alloc_events_lost", "events_lost", "pending_calls_full"):
    if c.get(k):
        fail("counter %s is %d" % (k, c[k]))
procs = r["processes"]
if len(procs) < 205 or any(p["state"] != "ended" for p in procs):
    fail("%d processes, states %s" % (len(procs), sorted(set(p["state"] for p in procs))))
# the leaking program, last: its verdict exact, as alone and as its header says
lk = [p for p in procs if p["command"] == ARGS[3]]
if len(lk) != 1:
    fail("%d leak_kinds processes in the tree" % len(lk))
else:
    got = kinds_of(r, lk[0]["pid"])
    want = kinds_of(alone)
    if got != want:
        for site in sorted(set(got) | set(want)):
            if got.get(site) != want.get(site):
                fail("leak_kinds %s: in the tree %s, alone %s" % (site, got.get(site), want.get(site)))
    for site, kinds in sorted(header.items()):
        if got.get(site) != kinds:
            fail("leak_kinds %s: %s, its header says %s" % (site, got.get(site), kinds))
    sites = {s: k for s, k in got.items() if s.startswith("site_")}
    if sites == header:
        ok("leak_kinds after %d processes: %d sites, every kind, byte and block as its header and as alone"
           % (len(procs) - 1, len(sites)))
# every many_stacks process: its leaks from leak_here, named, definitely lost
stacks = by_pid(r)
many = [p for p in procs if p["command"] == ARGS[2] or (p["command"] or "").startswith(ARGS[2] + " ")]
forked = [p for p in many if "--fork" in (p["command"] or "")]
if len(many) != 204 or len(forked) != 4:
    fail("%d many_stacks processes (%d of the fork), want 204 (4)" % (len(many), len(forked)))
parent = [p for p in forked if p["ppid"] not in [q["pid"] for q in forked]]
wrong = []
for p in many:
    want = 40 if p in parent else 10
    n, b, k, lost, bad = leak_here(stacks.get(p["pid"], []))
    if (n, b, k, lost) != (want, want * 48, 10, want * 48) or bad:
        wrong.append("pid %d (%s): %d blocks, %d B in %d stacks, %d B definitely lost; %s"
                     % (p["pid"], p["command"], n, b, k, lost, "".join(bad[:1])))
if wrong:
    fail("%d many_stacks processes lack leaks (want 10 stacks of leak_here, 480 B lost; the fork's parent "
         "1920 B):\n  %s" % (len(wrong), "\n  ".join(wrong[:5])))
else:
    ok("%d many_stacks processes: each one's leaks under 10 named stacks, definitely lost" % len(many))
PY
	[ $check_errors -eq $before ] &&
		pass "a tree of 200+ short-lived processes in ${secs} s: ${stored} stacks stored, at most ${peak} of ${cap} in the map at once, none lost"
fi

# --- b: the stacks map filled on purpose ---
if lt_part b; then
	before=$check_errors
	DWLEAK_STACKS_MAX=64 timeout -k 5 60 "$DWLEAK" --walk kernel --leak-check --stats -t 0 --format json -o "$tmp/small.json" \
		-- "$MANY" > /dev/null 2> "$tmp/small.err"
	rc=$?
	[ $rc -eq 0 ] || fail "DWLEAK_STACKS_MAX=64: dwleak exit $rc: $(tail -3 "$tmp/small.err")"
	DWLEAK_STACKS_MAX=64 timeout -k 5 60 "$DWLEAK" --walk kernel --leak-check -o "$tmp/small.txt" -- "$MANY" > /dev/null 2>&1
	lt_check "$tmp/small.json" "$MANY" << 'PY'
t = r["totals"]
losses = r.get("losses", [])
mine = [l for l in losses if l["what"] == "stacks_map_full" and l["pid"] == r["pid"]]
trace = [l for l in losses if l["what"] == "stacks_map_full" and l["pid"] == 0]
if len(mine) != 1 or not mine[0]["count"] or mine[0]["bytes"] <= 0:
    fail("no per-process loss line for the full stacks map: %s" % losses)
elif "of pid %d (%s) were recorded without a stack: the stacks map was full" % (r["pid"], ARGS[0]) not in mine[0]["text"]:
    fail("the line does not say whose and why: %s" % mine[0]["text"])
if len(trace) != 1 or trace[0]["count"] != r["counters"]["stacks_map_full"] or not trace[0]["count"]:
    fail("the trace's line for the full map: %s, counter %s" % (trace, r["counters"].get("stacks_map_full")))
if t["dropped_events"]:
    fail("%d dropped events: a walk not stored is no dropped event" % t["dropped_events"])
# every allocation still counted, the unstored ones under a stack that says why
unstored = [s for s in r["stacks"] if s.get("unwind_error") == "stack not stored (stacks map full)"]
if t["outstanding_allocations"] != 10 or t["outstanding_bytes"] != 480:
    fail("%d B in %d outstanding, want 480 B in 10 (every leak counted)" % (t["outstanding_bytes"], t["outstanding_allocations"]))
if not unstored or mine and sum(s["allocations"] for s in unstored) != mine[0]["count"]:
    fail("the unstored stack(s) %s do not add up to the line's %s" % ([show(s) for s in unstored], mine))
if r["totals"]["leak_check"]["definitely_lost"]["bytes"] != 480:
    fail("definitely lost %s, want 480 B" % r["totals"]["leak_check"]["definitely_lost"])
if mine:
    ok(mine[0]["text"])
PY
	grep -q "^Lost: [0-9]* allocations ([0-9]* bytes) of pid [0-9]* ($MANY) were recorded without a stack: the stacks map was full$" \
		"$tmp/small.txt" || fail "the text report has no Lost: line for the process: $(grep -E '^(Lost|Dropped)' "$tmp/small.txt")"
	grep -q "^Lost: [0-9]* walks could not store their stack: the stacks map was full" "$tmp/small.txt" ||
		fail "the text report has no Lost: line for the walks"
	grep -q "^Dropped events: 0," "$tmp/small.txt" || fail "text: $(grep '^Dropped' "$tmp/small.txt")"
	[ $check_errors -eq $before ] && pass "a full stacks map is said per process and cause; every allocation counted"
fi

# --- c: a process recording under ids its exited children shared, the map emptied meanwhile ---
if lt_part c; then
	before=$check_errors
	DWLEAK_STACKS_MAX=1024 timeout -k 5 60 "$DWLEAK" --leak-check --unwind both --stats -t 0 --format json \
		-o "$tmp/fork.json" -- "$MANY" --fork 3 --pause-ms 400 > /dev/null 2> "$tmp/fork.err"
	rc=$?
	[ $rc -eq 0 ] || fail "--fork: dwleak exit $rc: $(tail -3 "$tmp/fork.err")"
	moves=$(sed -n 's/^dwleak: stats: stacks map: .* emptied \([0-9]*\) times.*/\1/p' "$tmp/fork.err")
	# once while the parent paused (the map over half full: 4 x 300 paths,
	# two walks each, the same 600 ids), once at its end, once for the report
	[ "${moves:-0}" -ge 3 ] || fail "the map was emptied ${moves:-?} times, want 3 or more: $(grep 'stacks map' "$tmp/fork.err")"
	lt_check "$tmp/fork.json" << PY
$KINDS_PY
if r.get("losses") or r["counters"].get("stacks_map_full") or r["totals"]["unwind_errors"]:
    fail("losses %s, unwind errors %d" % (r.get("losses"), r["totals"]["unwind_errors"]))
stacks = by_pid(r)
procs = r["processes"]
if len(procs) != 4:
    fail("%d processes, want 4" % len(procs))
for p in procs:
    want = 40 if p["ppid"] == 0 else 10
    mine = stacks.get(p["pid"], [])
    n, b, k, lost, bad = leak_here(mine)
    nofp = [show(s) for s in mine if "leak_here" in names(s) and not s.get("fp_frames")]
    if (n, b, k, lost) != (want, want * 48, 10, want * 48) or bad or nofp:
        fail("pid %d: %d blocks, %d B in %d stacks, %d B lost; want %d in 10 stacks; %s%s"
             % (p["pid"], n, b, k, lost, want, "".join(bad[:1]), "".join(nofp[:1])))
ok("the parent's 40 leaks and each child's 10, DWARF and FP stacks named after the map was emptied")
PY
	[ $check_errors -eq $before ] && pass "ids shared by a fork's processes outlive the children and the map's emptying"
fi

# --- d: the same tree walked in the processes (--walk process): every
# many_stacks process's leaks there, named, definitely lost, none dropped ---
if lt_part d; then
	before=$check_errors
	timeout -k 5 120 "$DWLEAK" --walk process --leak-check --stats -t 0 --format json -o "$tmp/treew.json" -- \
		bash -c "for i in \$(seq 200); do $MANY; done; $MANY --fork 3" > "$tmp/treew.out" 2> "$tmp/treew.err"
	rc=$?
	[ $rc -eq 0 ] || fail "the tree walked in the processes: dwleak exit $rc, want 0: $(tail -3 "$tmp/treew.err")"
	grep -q "walks its stacks in the process" "$tmp/treew.err" || fail "d: no process walked in itself"
	lt_check "$tmp/treew.json" "$MANY" << PY
$KINDS_PY
t = r["totals"]
if t["dropped_events"] or t["unwind_errors"] or t["truncated_stacks"]:
    fail("dropped %d, unwind errors %d, truncated %d" % (t["dropped_events"], t["unwind_errors"], t["truncated_stacks"]))
if r.get("losses"):
    fail("losses: %s" % [l["text"] for l in r["losses"]])
procs = r["processes"]
stacks = by_pid(r)
many = [p for p in procs if p["command"] == ARGS[0] or (p["command"] or "").startswith(ARGS[0] + " ")]
forked = [p for p in many if "--fork" in (p["command"] or "")]
parent = [p for p in forked if p["ppid"] not in [q["pid"] for q in forked]]
wrong = []
for p in many:
    want = 40 if p in parent else 10
    n, b, k, lost, bad = leak_here(stacks.get(p["pid"], []))
    if (n, b, k, lost) != (want, want * 48, 10, want * 48) or bad:
        wrong.append("pid %d (%s): %d blocks, %d B in %d stacks, %d B definitely lost; %s"
                     % (p["pid"], p["command"], n, b, k, lost, "".join(bad[:1])))
if len(many) != 204:
    fail("%d many_stacks processes, want 204" % len(many))
if wrong:
    fail("%d many_stacks processes lack leaks:\n  %s" % (len(wrong), "\n  ".join(wrong[:5])))
PY
	[ $check_errors -eq $before ] && pass "the tree walked in the processes: every many_stacks process's leaks, named, none dropped"
fi
check_finish
