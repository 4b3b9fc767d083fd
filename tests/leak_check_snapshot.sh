#!/bin/bash
# The leak check's copy-on-write snapshot (issue 24, target/snapshot.c) on
# running processes, as root, with testdata/inject_target (which checks
# its own work and says "inject_target: MODE ok" at its end):
#  1. stress 4 (four threads allocating, filling, checking and freeing in
#     a tight loop, their SSE and double sums checked): dwleak -p
#     --leak-check --interval 0.3 for 3 s; every check reads a snapshot
#     (--stats: the pause and the scan apart), the report says so, the
#     target's own checks pass, and no child of it is left;
#  2. seccomp filters that would fail clone (EPERM) or kill the process at
#     it: no snapshot, said with why, the process read while stopped
#     instead, and it runs on to its own end;
#  3. a process with 64 MiB of heap in a memory cgroup with 4 MiB free
#     (less than a quarter of its anonymous memory, which a copy's pages
#     could take as it writes): no snapshot, said; with 256 MiB free: a
#     snapshot.
# Exit 0 pass, 1 fail, 77 skip (not root).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
lt_testdata inject_target

# children TP: the pids of its children, all threads'
children() {
	cat /proc/"$1"/task/*/children 2> /dev/null | tr -s ' \n' ' '
}

if lt_part 1; then
	echo "== 1. snapshots of a process allocating in four threads"
	if lt_target_start stress stress 4; then
		timeout -k 5 60 "$DWLEAK" --leak-check --stats --interval 0.3 -d 3 -t 3 --format json \
			-o "$T/stress.json" -p "$TP" > "$T/stress.text" 2> "$T/stress.err"
		rc=$?
		[ $rc -eq 0 ] || fail "stress: dwleak exited $rc: $(tail -3 "$T/stress.err")"
		# every interval report's check (the text reports on stdout), and
		# the last one's parts (--stats)
		checks=$(grep -c '^LEAK SUMMARY' "$T/stress.text")
		snaps=$(grep -c 'the scan reading a copy-on-write snapshot while it ran on' "$T/stress.text")
		[ "$checks" -ge 3 ] && [ "$snaps" -eq "$checks" ] &&
			pass "stress: $checks checks, each from a snapshot; the last: $(grep -m1 -o 'the pause, ms: .* to reap the snapshot' "$T/stress.err")" ||
			fail "stress: $snaps of $checks checks from a snapshot: $(grep 'the pause' "$T/stress.err" | head -3)"
		lt_check "$T/stress.json" << 'PY'
lc = r["totals"]["leak_check"]
if lc["snapshot"] is not True or not (lc["scan_ms"] and lc["scan_ms"] > 0) or not (lc["pause_ms"] and lc["pause_ms"] > 0):
    fail("the report's leak_check: snapshot %s, scan %s ms, pause %s ms" % (lc["snapshot"], lc["scan_ms"], lc["pause_ms"]))
else:
    ok("the report: a snapshot, the pause %.3f ms, the scan %.3f ms" % (lc["pause_ms"], lc["scan_ms"]))
PY
		left=$(children "$TP")
		[ -z "${left// /}" ] && pass "stress: no child left in the target" ||
			fail "stress: children left in the target: $left ($(for c in $left; do awk '{print $3}' /proc/$c/stat; done))"
		lt_target_finish stress
	fi
fi

if lt_part 2; then
	echo "== 2. seccomp filters against clone"
	for mode in allow kill; do
		# allow: clone is not among what it lets through (EPERM); kill: clone kills
		if lt_target_start "sc_$mode" seccomp $mode; then
			timeout -k 5 60 "$DWLEAK" --leak-check --stats --no-inject -d 1 -t 0 --format json \
				-o "$T/sc_$mode.json" -p "$TP" > /dev/null 2> "$T/sc_$mode.err"
			rc=$?
			[ $rc -eq 0 ] || fail "seccomp $mode: dwleak exited $rc: $(tail -3 "$T/sc_$mode.err")"
			want="no snapshot: a seccomp filter of the process $([ $mode = allow ] && echo fails || echo 'would stop it at') system call 56"
			grep -q "$want" "$T/sc_$mode.err" && pass "seccomp $mode: $want" ||
				fail "seccomp $mode: want '$want': $(grep 'the pause' "$T/sc_$mode.err")"
			lt_check "$T/sc_$mode.json" << 'PY'
if r["totals"]["leak_check"]["snapshot"] is not False:
    fail("the report says the check read a snapshot")
PY
			lt_target_finish "sc_$mode"
		fi
	done
fi

if lt_part 3; then
	echo "== 3. the memory a copy may take"
	# shellcheck source=tests/lib_cgroup.sh
	. "$(dirname "$0")/lib_cgroup.sh"
	cgroup_mounts "$T/cg" || fail_now "no cgroup hierarchy to limit memory in"
	if [ -n "$V1MEM" ]; then
		CG=$V1MEM/dwleak-snap-$$ LIMIT=memory.limit_in_bytes USAGE=memory.usage_in_bytes
	else
		echo "+memory" > "$V2/cgroup.subtree_control" 2> /dev/null
		CG=$V2/dwleak-snap-$$ LIMIT=memory.max USAGE=memory.current
	fi
	mkdir -p "$CG" || fail_now "cannot make $CG"
	lt_testdata leak_kinds
	sh -c "echo \$\$ > $CG/cgroup.procs && exec $PROG --wait --heap-mb 64" > "$T/heap.out" 2>&1 &
	hp=$!
	lt_pids+=("$hp")
	lt_wait_line "$T/heap.out" waiting || fail_now "leak_kinds never waited: $(cat "$T/heap.out")"
	kill -USR1 "$hp"
	lt_wait_line "$T/heap.out" ready || fail_now "leak_kinds never got ready: $(cat "$T/heap.out")"
	for free_mib in 4 256; do
		echo $(($(cat "$CG/$USAGE") + (free_mib << 20))) > "$CG/$LIMIT" || fail "cannot limit $CG"
		timeout -k 5 60 "$DWLEAK" --leak-check --stats --no-inject -d 0.5 -t 0 -p "$hp" > /dev/null 2> "$T/cg$free_mib.err"
		rc=$?
		[ $rc -eq 0 ] || fail "$free_mib MiB free: dwleak exited $rc: $(tail -3 "$T/cg$free_mib.err")"
		if [ "$free_mib" = 4 ]; then
			grep -q "no snapshot: its memory cgroup has [0-9]* MiB free, less than a quarter of its [0-9]* MiB of anonymous memory" "$T/cg$free_mib.err" &&
				pass "4 MiB free in its cgroup: $(grep -o 'no snapshot: [^(]*' "$T/cg$free_mib.err" | head -1)" ||
				fail "4 MiB free in its cgroup: $(grep 'the pause' "$T/cg$free_mib.err")"
		else
			grep -q "making a copy-on-write snapshot" "$T/cg$free_mib.err" &&
				pass "256 MiB free in its cgroup: a snapshot" ||
				fail "256 MiB free in its cgroup: $(grep 'the pause' "$T/cg$free_mib.err")"
		fi
	done
	kill -KILL "$hp" 2> /dev/null
	wait "$hp" 2> /dev/null
	rmdir "$CG" 2> /dev/null
	cgroup_unmount
fi

check_finish "leak check snapshot: all checks passed"
