#!/bin/bash
# The injector (issue 22, target/inject.c) and the routing (preload/route.c),
# driven directly by build/tests/inject_probe, no BPF, no CLI.  Each case
# runs testdata/inject_target, which checks its own work, injects the
# preload library into it while it runs, and reads the library's control
# block (its route_* counts; fired_* after "arm" makes the sites fire as
# NOPs):
#  1. stress: 4 threads allocating and freeing in a tight loop, their blocks
#     and FPU/SSE results checked, 100 blocks allocated before the injection
#     reallocated, measured and freed after it; 5 rounds, each in a new
#     process; every object's slots routed, nothing deferred or failed;
#  2. a thread parked in a signal handler inside malloc (the arena's lock
#     held): refused while it is parked, naming it, then injected once it
#     returned; a thread inside dlopen (a constructor sleeping 1.5 s):
#     injected, the load waiting for the dynamic linker's lock;
#  3. seccomp: a filter allowing what is needed (injected), one that kills on
#     clone3/clone (refused, saying so, the process unharmed);
#  4. a thread blocked in read() gets exactly the line written after the
#     injection; one in nanosleep(2 s) sleeps its whole time;
#  5. glibc, jemalloc, tcmalloc, mimalloc (LD_PRELOAD'ed into the target):
#     after injection and arm, a burst of K calls from the program, from a
#     library, from libc itself (strdup) and C++ new[] fires exactly 4K
#     allocation and 4K free sites; a dlopen'ed library's calls are routed
#     (the dlopen stub), and a route request is honoured;
#  6. (in 1) blocks from before the injection freed after it;
#  7. refusals: a static program, a setuid one (AT_SECURE=1), each with its
#     message; the library loaded already; a library in a directory others
#     can write (and one under a sticky directory of root's, accepted);
#  8. the injector SIGKILLed at each of its phases: the target runs on and
#     its own checks pass.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
T=$LT_TMP
PROBE=$BUILD/tests/inject_probe
LIB=$BUILD/libdwleak-preload.so
LIBDIR=/usr/lib/x86_64-linux-gnu
lt_testdata inject_target
[ "$(id -u)" = 0 ] || { echo "needs root (ptrace of other processes, setuid test)"; exit 77; }
[ -x "$PROBE" ] || { fail "$PROBE not built (make $PROBE)"; check_finish; }

# field NAME LINE: a name=value of inject_probe's output
field() {
	sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<< "$2" | head -1
}

routed_ok() { # NAME OUTPUT
	local objects slots deferred failed unreadable
	objects=$(field objects "$2")
	slots=$(field slots "$2")
	deferred=$(field deferred "$2")
	failed=$(field failed "$2")
	unreadable=$(field unreadable "$2")
	if [ "${objects:-0}" -ge 4 ] && [ "${slots:-0}" -ge 4 ] && [ "$deferred" = 0 ] && [ "$failed" = 0 ] &&
		[ "$unreadable" = 0 ]; then
		pass "$1: routed $slots slots in $objects objects, none deferred, unreadable or failed"
	else
		fail "$1: routing: $2"
	fi
}

if lt_part 1; then
	echo "== 1. stress, 5 rounds"
	for round in 1 2 3 4 5; do
		lt_target_start stress stress 4 || continue
		sleep 0.3
		out=$(timeout 60 "$PROBE" inject "$TP" "$LIB" 2>&1)
		if grep -q '^inject: ok' <<< "$out"; then
			pass "stress round $round: $(head -1 <<< "$out" | cut -c1-90)"
			routed_ok "stress round $round" "$out"
		else
			fail "stress round $round: $out"
		fi
		sleep 0.5
		lt_target_finish stress
	done
fi

if lt_part 2; then
	echo "== 2. inside malloc (a parked signal handler), inside dlopen"
	if lt_target_start sig sig_in_malloc 4000; then
		out=$(timeout 30 "$PROBE" inject "$TP" "$LIB" --safe-ms 1000 2>&1)
		if grep -q 'inject: error EBUSY: .*waits inside a signal handler that interrupted' <<< "$out"; then
			pass "refused while a handler is parked inside malloc: $out"
		else
			fail "parked handler: want a refusal naming it, got: $out"
		fi
		sleep 4
		out=$(timeout 30 "$PROBE" inject "$TP" "$LIB" 2>&1)
		grep -q '^inject: ok' <<< "$out" && pass "injected once the handler returned" ||
			fail "after the handler returned: $out"
		lt_target_finish sig
	fi
	if lt_target_start dl dlopen_block "$TESTDATA/libinject_ctor.so"; then
		sleep 0.2
		out=$(timeout 30 "$PROBE" inject "$TP" "$LIB" 2>&1)
		load=$(field load_ms "$out")
		if grep -q '^inject: ok' <<< "$out" && [ "${load%.*}" -ge 500 ]; then
			pass "inside dlopen: injected, the load waited ${load} ms for the loader's lock"
		else
			fail "inside dlopen: $out"
		fi
		lt_target_finish dl
	fi
fi

if lt_part 3; then
	echo "== 3. seccomp"
	if lt_target_start sc_allow seccomp allow; then
		out=$(timeout 30 "$PROBE" inject "$TP" "$LIB" 2>&1)
		grep -q '^inject: ok' <<< "$out" && pass "a filter allowing what is needed: $(head -1 <<< "$out" | cut -c1-60)" ||
			fail "allowing filter: $out"
		lt_target_finish sc_allow
	fi
	if lt_target_start sc_kill seccomp kill; then
		out=$(timeout 30 "$PROBE" inject "$TP" "$LIB" 2>&1)
		if grep -q 'inject: error E[A-Z]*NOTSUPP*: a seccomp filter would kill the process at clone3' <<< "$out"; then
			pass "a filter killing on clone3: refused: $out"
		else
			fail "killing filter: want a refusal, got: $out"
		fi
		grep -q libdwleak-preload "/proc/$TP/maps" && fail "killing filter: the library is mapped"
		lt_target_finish sc_kill
	fi
fi

if lt_part 4; then
	echo "== 4. blocked in read(), in nanosleep()"
	mkfifo "$T/rd.in"
	exec 7<> "$T/rd.in"
	if lt_target_start rd read; then
		sleep 0.2
		out=$(timeout 30 "$PROBE" inject "$TP" "$LIB" 2>&1)
		grep -q '^inject: ok' <<< "$out" || fail "read: $out"
		echo "the line after the injection" >&7
		wait "$TP" && grep -q 'read ok' "$T/rd.out" && pass "read(): $(cat "$T/rd.out")" ||
			fail "read(): $(cat "$T/rd.out")"
	fi
	exec 7>&-
	if lt_target_start sl sleep 2000; then
		sleep 0.3
		out=$(timeout 30 "$PROBE" inject "$TP" "$LIB" 2>&1)
		grep -q '^inject: ok' <<< "$out" || fail "sleep: $out"
		wait "$TP" && grep -q 'sleep ok' "$T/sl.out" && pass "nanosleep(): $(cat "$T/sl.out")" ||
			fail "nanosleep(): $(cat "$T/sl.out")"
	fi
fi

if lt_part 5; then
	echo "== 5. every object's calls reach the sites, under each allocator"
	K=1000
	for a in glibc: jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4 mimalloc:libmimalloc.so.2; do
		IFS=: read -r name so <<< "$a"
		rm -f "$T/burst.in"
		mkfifo "$T/burst.in"
		exec 8<> "$T/burst.in"
		if [ -n "$so" ]; then
			LD_PRELOAD=$LIBDIR/$so lt_target_start burst burst || { exec 8>&-; continue; }
		else
			lt_target_start burst burst || { exec 8>&-; continue; }
		fi
		out=$(timeout 30 "$PROBE" inject "$TP" "$LIB" 2>&1)
		grep -q '^inject: ok' <<< "$out" || { fail "$name: $out"; kill "$TP"; exec 8>&-; continue; }
		routed_ok "$name" "$out"
		"$PROBE" arm "$TP" || fail "$name: arm"
		before=$("$PROBE" counts "$TP")
		echo "burst $K" >&8
		for _ in $(seq 1 100); do [ "$(grep -c done "$T/burst.out")" = 1 ] && break; sleep 0.05; done
		after=$("$PROBE" counts "$TP")
		da=$(($(field fired_alloc "$after") - $(field fired_alloc "$before")))
		df=$(($(field fired_free "$after") - $(field fired_free "$before")))
		if [ $da = $((4 * K)) ] && [ $df = $((4 * K)) ]; then
			pass "$name: $K calls from each of 4 places fired $da alloc and $df free sites"
		else
			fail "$name: want $((4 * K)) and $((4 * K)) sites fired, got $da and $df"
		fi
		# a route request is honoured at the next traced call
		"$PROBE" reroute "$TP" > "$T/reroute" 2>&1 || fail "$name: route request: $(cat "$T/reroute")"
		echo "burst 1" >&8
		for _ in $(seq 1 100); do [ "$(grep -c done "$T/burst.out")" = 2 ] && break; sleep 0.05; done
		after=$("$PROBE" counts "$TP")
		[ "$(field route_done "$after")" = 1 ] && [ "$(field passes "$after")" = 2 ] &&
			pass "$name: a route request honoured at the next call" || fail "$name: route request: $after"
		exec 8>&-
		wait "$TP"
	done
fi

if lt_part 6; then
	echo "== 7. refusals"
	"$TESTDATA/static_run" --delay-ms 5000 > /dev/null 2>&1 &
	sp=$!
	lt_pids+=("$sp")
	sleep 0.2
	out=$("$PROBE" inject "$sp" "$LIB" 2>&1)
	grep -q 'inject: error E[A-Z]*NOTSUPP*: a static program' <<< "$out" && pass "static: $out" || fail "static: $out"
	kill "$sp" 2> /dev/null
	# a setuid sleep(1): AT_SECURE in it
	if lt_setuid_sleep sleep_setuid 5; then
		out=$("$PROBE" inject "$SP" "$LIB" 2>&1)
		grep -q 'inject: error E[A-Z]*NOTSUPP*: .*setuid.*AT_SECURE' <<< "$out" && pass "setuid: $out" ||
			fail "setuid: $out"
	else
		fail "setuid: AT_SECURE is not 1 in the target (a nosuid mount?)"
	fi
	lt_setuid_done
	LD_PRELOAD=$LIB lt_target_start pre sleep 1000 && {
		out=$("$PROBE" inject "$TP" "$LIB" 2>&1)
		grep -q 'inject: error EEXIST' <<< "$out" && pass "loaded already: $out" || fail "loaded already: $out"
		wait "$TP"
	}
	# the library's path: a directory others can write is refused (they
	# could swap the file); a sticky one of root's (/tmp) is not, when the
	# entry in it is root's and written by nobody else
	mkdir -p "$T/open" "$T/sticky/lib" && chmod 0777 "$T/open" && chmod 1777 "$T/sticky" &&
		cp "$LIB" "$T/open/" && cp "$LIB" "$T/sticky/lib/" || fail_now "cannot lay out the library's copies"
	lt_target_start open sleep 1000 && {
		out=$("$PROBE" inject "$TP" "$T/open/$(basename "$LIB")" 2>&1)
		grep -q "inject: error E[A-Z]*NOTSUPP*: $T/open is not root's, or others can write it" <<< "$out" &&
			pass "a library in a directory others can write: $out" || fail "a directory others can write: $out"
		kill "$TP" 2> /dev/null
		wait "$TP" 2> /dev/null
	}
	lt_target_start sticky sleep 1000 && {
		out=$("$PROBE" inject "$TP" "$T/sticky/lib/$(basename "$LIB")" 2>&1)
		grep -q '^inject: ok' <<< "$out" && pass "a library under a sticky directory of root's: $(head -1 <<< "$out" | cut -c1-40)" ||
			fail "under a sticky directory: $out"
		kill "$TP" 2> /dev/null
		wait "$TP" 2> /dev/null
	}
fi

if lt_part 8; then
	echo "== 8. the injector killed in each phase"
	for phase in stopped syscall calling restored; do
		lt_target_start k stress 2 || continue
		"$PROBE" inject "$TP" "$LIB" --pause-at $phase > "$T/k.probe" 2>&1 &
		ip=$!
		for _ in $(seq 1 100); do grep -q paused "$T/k.probe" && break; sleep 0.05; done
		grep -q "paused at $phase" "$T/k.probe" || fail "$phase: the injector did not pause: $(cat "$T/k.probe")"
		kill -KILL $ip
		wait $ip 2> /dev/null
		sleep 1
		kill -0 "$TP" 2> /dev/null && pass "$phase: killed there, the target runs on" ||
			fail "$phase: the target died"
		grep -q TracerPid:.0 "/proc/$TP/status" || fail "$phase: the target is still traced"
		lt_target_finish k
	done
fi
check_finish
