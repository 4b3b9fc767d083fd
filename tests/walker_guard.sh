#!/bin/bash
# The walker's guard against preempted probes (bpf/dwleak.bpf.c,
# walker_enter; bpf/preempt.c), so the kernel walks here (--walk kernel).
# Uprobe programs run with preemption on;
# where the kernel preempts kernel code, two probes could share a CPU's
# walker buffers, so there dwleak counts the programs in and out and a
# probe that finds them busy skips its walk (keeping the allocation, under
# one stack that says why, and counting it).
#   1. --stats names the kernel's preemption model and where it was read;
#      when that is the kernel log, `dmesg` (an independent reader) agrees,
#      and the guard is on exactly when the model preempts.
#   2. DWLEAK_PREEMPT_GUARD=1 (the guard on, as on a preemptible kernel):
#      testdata/same_depth's stacks are exact to the byte (one thread: no
#      probe of its can be preempted by another of its probes, so no walk
#      may be skipped).
#   3. DWLEAK_PREEMPT_GUARD=busy (every walk finds the buffers busy): no
#      allocation is lost: the same bytes and allocations as run 2, all
#      under one frameless stack whose unwind error says why (default
#      suppressions off in both runs, so the totals compare), and
#      walks_skipped_walker_busy equals alloc_calls.
#   4. DWLEAK_PREEMPT_GUARD=bogus is refused with a message.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
lt_testdata same_depth

# run NAME GUARD: dwleak --stats --format json on same_depth --iterations 3000
run() {
	local rc
	env ${2:+DWLEAK_PREEMPT_GUARD=$2} timeout -k 5 60 "$DWLEAK" --walk kernel --stats --no-default-suppressions -t 0 --format json \
		-o "$T/$1.json" -- \
		"$PROG" --iterations 3000 > "$T/$1.out" 2> "$T/$1.err"
	rc=$?
	[ $rc -eq 0 ] || { fail "$1: dwleak exited $rc"; sed 's/^/    /' "$T/$1.err" | tail -n 20; }
}

stat_of() { sed -n "s/^dwleak: stats: $2 \([0-9]*\)$/\1/p" "$T/$1.err"; }

echo "== 1. the preemption model"
run auto ""
line=$(grep -m1 '^dwleak: stats: walker buffers' "$T/auto.err")
echo "    $line"
model=$(sed -n "s/.*the kernel's preemption model: \([a-z]*\) (from \(.*\))$/\1/p" <<< "$line")
source=$(sed -n "s/.*the kernel's preemption model: [a-z]* (from \(.*\))$/\1/p" <<< "$line")
if [ -z "$model" ]; then
	fail "--stats does not name the preemption model: '$line'"
else
	pass "--stats: model $model, from $source"
fi
case $model in
none | voluntary) want="not guarded" ;;
*) want="guarded against preempted probes" ;;
esac
[[ $line == *"walker buffers $want;"* ]] || fail "model $model: want 'walker buffers $want': '$line'"
if [[ $source == "the kernel log"* ]]; then
	logged=$(dmesg 2> /dev/null | sed -n 's/.*Dynamic Preempt: \([a-z]*\).*/\1/p' | tail -n 1)
	if [ -z "$logged" ]; then
		fail "dwleak read the model from the kernel log, dmesg shows no 'Dynamic Preempt:' line"
	elif [ "$logged" != "$model" ]; then
		fail "dmesg says Dynamic Preempt: $logged, dwleak says $model"
	else
		pass "dmesg agrees: Dynamic Preempt: $logged"
	fi
fi

echo "== 2. DWLEAK_PREEMPT_GUARD=1: exact stacks"
run guard 1
grep -q '^dwleak: stats: walker buffers guarded against preempted probes, as DWLEAK_PREEMPT_GUARD says' "$T/guard.err" ||
	fail "guard: --stats does not say the buffers are guarded: $(grep -m1 'walker buffers' "$T/guard.err")"
busy=$(stat_of guard walks_skipped_walker_busy)
[ "$busy" = 0 ] || fail "guard: walks_skipped_walker_busy '$busy' in a one-thread program, want 0"
lt_check "$T/guard.json" << 'PY'
want = {"from_left": (24000, 1000), "from_right": (80000, 2000)}
for fn, (b, a) in want.items():
    s = only_stack_with(fn)
    if s is None:
        continue
    if names(s)[:4] != ["malloc", "leaf", fn, "main"] or (s["bytes"], s["allocations"]) != (b, a):
        fail("%s: want malloc <- leaf <- %s <- main, %d B in %d allocations:\n%s" % (fn, fn, b, a, show(s)))
    else:
        ok("%s: malloc <- leaf <- %s <- main, %d B in %d allocations" % (fn, fn, b, a))
PY

echo "== 3. DWLEAK_PREEMPT_GUARD=busy: walks skipped, nothing lost"
run busy busy
calls=$(stat_of busy alloc_calls)
busy=$(stat_of busy walks_skipped_walker_busy)
if [ -n "$calls" ] && [ "$calls" -ge 3000 ] && [ "$busy" = "$calls" ]; then
	pass "busy: walks_skipped_walker_busy $busy = alloc_calls $calls"
else
	fail "busy: walks_skipped_walker_busy '$busy', alloc_calls '$calls' (want equal, >= 3000)"
fi
lt_check "$T/busy.json" "$T/guard.json" << 'PY'
g = json.load(open(ARGS[0]))
if len(r["stacks"]) != 1:
    fail("%d stacks, want the one of skipped walks" % len(r["stacks"]))
else:
    s = r["stacks"][0]
    if s["frames"] or "preempted probe" not in (s.get("unwind_error") or ""):
        fail("the stack has frames or does not say why:\n" + show(s))
    else:
        ok("one frameless stack: %s" % s["unwind_error"])
# the same program, deterministic: the same outstanding bytes and
# allocations as the guarded run (no default suppressions in either)
want = (g["totals"]["outstanding_bytes"], g["totals"]["outstanding_allocations"])
got = (r["totals"]["outstanding_bytes"], r["totals"]["outstanding_allocations"])
if r["totals"]["unwind_errors"] != 1:
    fail("unwind_errors %r, want 1" % r["totals"]["unwind_errors"])
if got != want or got[0] < 104000:
    fail("busy: %d B in %d allocations, the guarded run %d B in %d (same_depth's own: 104000 B in 3000)"
         % (got + want))
else:
    ok("busy: %d B in %d allocations kept, as in the guarded run" % got)
PY

echo "== 4. DWLEAK_PREEMPT_GUARD=bogus"
DWLEAK_PREEMPT_GUARD=bogus timeout -k 5 30 "$DWLEAK" -t 0 -o /dev/null -- /bin/true > /dev/null 2> "$T/bogus.err"
rc=$?
if [ $rc -ne 0 ] && grep -q "DWLEAK_PREEMPT_GUARD=bogus: want 0, 1 or busy" "$T/bogus.err"; then
	pass "bogus: refused (exit $rc): $(head -n 1 "$T/bogus.err")"
else
	fail "bogus: exit $rc, stderr: $(head -n 2 "$T/bogus.err")"
fi
check_finish
