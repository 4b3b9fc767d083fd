#!/bin/bash
# dwleak -p loading its library into a running process (issue 22), end to
# end with BPF (tests/inject.sh drives the injector alone; the ledgers after
# injection are in preload_ledger.sh, the leak verdicts in oracle_memcheck):
#   a  a process whose 4 threads allocate and free in a tight loop, each
#      block checked (testdata/inject_target stress): dwleak -p, exact and
#      sampled, several rounds; the tracing line says "preload, injected";
#      the target's own checks pass after every round;
#   b  dwleak SIGKILLed while it traces the injected process: the target
#      runs on, its checks pass, and the library went idle (its sites fire
#      no more: the control block's fired counts stand still);
#   c  redis-server (jemalloc) under redis-benchmark: dwleak -p injects
#      and traces it sampled; the benchmark finishes without an error and
#      redis answers after dwleak ends;
#   d  --no-inject: the uprobe path, said so; a static program and a setuid
#      one: dwleak says why it cannot load the library into them.
# LT_ONLY=abcd selects parts.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
lt_testdata inject_target
TARGET=$PROG
PROBE=$BUILD/tests/inject_probe
[ -x "$PROBE" ] || { fail "$PROBE not built (make check-build)"; check_finish; }

# stress_start VAR NAME: the stress target, its pid in VAR once ready
stress_start() {
	local __var=$1 name=$2 i
	rm -f "$T/$name.ready" "$T/$name.stop"
	lt_start "$__var" "$T/$name.out" "$TARGET" --ready "$T/$name.ready" --stop "$T/$name.stop" stress 4
	for ((i = 0; i < 200; i++)); do
		[ -s "$T/$name.ready" ] && return 0
		sleep 0.05
	done
	fail "$name: the target never got ready: $(tail -2 "$T/$name.out")"
	return 1
}

# stress_end NAME PID: stop it, and its own verdict
stress_end() {
	local name=$1 pid=$2
	touch "$T/$name.stop"
	lt_wait "$pid" 30
	grep -q "inject_target: stress ok" "$T/$name.out" && pass "$name: $(grep inject_target: "$T/$name.out")" ||
		fail "$name: the target's own checks: $(tail -3 "$T/$name.out")"
}

if lt_part a; then
	for round in 1 2 3; do
		for mode in exact sampled; do
			name=a$round$mode
			stress_start tp $name || continue
			opt=()
			# 4 threads hold 64 blocks of 1 KiB on average each: 256 KiB
			# outstanding at any moment, so 32 sampled blocks expected in
			# the report at 8 KiB (at 64 KiB, 4: none in 1.8% of rounds)
			[ $mode = sampled ] && opt=(--sample-bytes 8192)
			if lt_trace dw "$T/$name.err" -p "$tp" "${opt[@]}" -t 3 -o "$T/$name.txt"; then
				grep -q '^dwleak: tracing pid .* (preload, injected in [0-9]* ms, glibc' "$T/$name.err" ||
					fail "$name: $(grep -m1 '^dwleak: tracing' "$T/$name.err")"
				sleep 1
				kill -INT "$dw"
				lt_wait "$dw" 60 || fail "$name: dwleak exit $?: $(tail -3 "$T/$name.err")"
				grep -q "worker" "$T/$name.txt" ||
					fail "$name: no stack of the target's threads in the report: $(head -5 "$T/$name.txt")"
			else
				fail "$name: dwleak did not attach: $(tail -3 "$T/$name.err")"
			fi
			stress_end $name "$tp"
		done
	done
fi

if lt_part b; then
	stress_start tp b || true
	if [ -n "${tp:-}" ] && lt_trace dw "$T/b.err" -p "$tp"; then
		sleep 0.5
		kill -KILL "$dw"
		wait "$dw" 2> /dev/null
		sleep 0.5
		c1=$("$PROBE" counts "$tp" 2>&1)
		sleep 1
		c2=$("$PROBE" counts "$tp" 2>&1)
		# what it did while dwleak listened: sites fired, or (walking in
		# the process, the default) records written into its rings
		f1=$(sed -n 's/.*fired_alloc=\([0-9]*\).* ring_records=\([0-9]*\).*/\1+\2/p' <<< "$c1")
		f2=$(sed -n 's/.*fired_alloc=\([0-9]*\).* ring_records=\([0-9]*\).*/\1+\2/p' <<< "$c2")
		if [ -z "$f1" ] || [ "$f1" = "0+0" ]; then
			fail "b: the library recorded nothing while dwleak listened: '$c1' (the check below would prove nothing)"
		elif [ "$f1" = "$f2" ]; then
			pass "b: the library is idle after dwleak's SIGKILL (sites fired + ring records: $f1, then no more)"
		else
			fail "b: the library still records after dwleak's SIGKILL: '$c1' then '$c2'"
		fi
		kill -0 "$tp" 2> /dev/null && pass "b: the target runs on" || fail "b: the target is gone"
		stress_end b "$tp"
	else
		fail "b: dwleak did not attach"
	fi
fi

if lt_part c; then
	if ! command -v redis-server > /dev/null || ! command -v redis-benchmark > /dev/null; then
		fail "c: redis-server and redis-benchmark are missing (Debian redis-server, redis-tools: .ci/deps.sh)"
	else
		port=$((20000 + RANDOM % 20000))
		lt_start rp "$T/redis.out" redis-server --port "$port" --save "" --appendonly no
		for ((i = 0; i < 100; i++)); do
			redis-cli -p "$port" ping 2> /dev/null | grep -q PONG && break
			sleep 0.05
		done
		redis-benchmark -p "$port" -t set,get -n 400000 -c 20 -q > "$T/bench.out" 2>&1 &
		bp=$!
		lt_pids+=("$bp")
		sleep 0.5
		if lt_trace dw "$T/c.err" -p "$rp" --sample-bytes 524288 -t 3 -o "$T/c.txt"; then
			grep -q '(preload, injected in [0-9]* ms, jemalloc' "$T/c.err" &&
				pass "c: $(grep -m1 '^dwleak: tracing' "$T/c.err")" ||
				fail "c: $(grep -m1 '^dwleak: tracing' "$T/c.err")"
			sleep 2
			kill -INT "$dw"
			lt_wait "$dw" 60 || fail "c: dwleak exit $?: $(tail -3 "$T/c.err")"
		else
			fail "c: dwleak did not attach to redis: $(tail -3 "$T/c.err")"
		fi
		lt_wait "$bp" 120
		rc=$?
		[ $rc = 0 ] && ! grep -qi "error" "$T/bench.out" && pass "c: redis-benchmark under injection: $(tr '\r' '\n' < "$T/bench.out" | grep -a 'requests per second' | tr '\n' ' ')" ||
			fail "c: redis-benchmark exit $rc: $(tr '\r' '\n' < "$T/bench.out" | tail -3)"
		redis-cli -p "$port" ping 2> /dev/null | grep -q PONG && pass "c: redis answers after dwleak ended" ||
			fail "c: redis does not answer"
		redis-cli -p "$port" shutdown nosave > /dev/null 2>&1
		lt_wait "$rp" 10
	fi
fi

if lt_part d; then
	stress_start tp d || true
	if [ -n "${tp:-}" ] && lt_trace dw "$T/d.err" -p "$tp" --no-inject -o "$T/d.txt"; then
		line=$(grep -m1 '^dwleak: tracing' "$T/d.err")
		[[ $line != *preload* ]] && ! grep -q "$(basename "$("$DWLEAK" preload)")" "/proc/$tp/maps" &&
			pass "d: --no-inject: uprobes, nothing loaded ($line)" || fail "d: --no-inject: $line"
		kill -INT "$dw"
		lt_wait "$dw" 60
	fi
	stress_end d "${tp:-0}"
	# a setuid sleep(1): AT_SECURE in it
	lt_setuid_sleep sleep_setuid_trace 20 || fail "d: setuid: AT_SECURE is not 1 in the target (a nosuid mount?)"
	"$DWLEAK" -p "$SP" -d 1 > /dev/null 2> "$T/d.setuid.err"
	grep -q "cannot load the preload library into it: .*setuid.*; tracing it with uprobes" "$T/d.setuid.err" &&
		pass "d: setuid: $(grep -m1 'cannot load' "$T/d.setuid.err")" || fail "d: setuid: $(head -3 "$T/d.setuid.err")"
	lt_setuid_done
	lt_testdata static_run
	"$PROG" --delay-ms 5000 > /dev/null 2>&1 &
	sp=$!
	lt_pids+=("$sp")
	sleep 0.3
	"$DWLEAK" -p "$sp" -d 1 > /dev/null 2> "$T/d.static.err"
	grep -q "cannot load the preload library into it: a static program" "$T/d.static.err" &&
		pass "d: static: $(grep -m1 'cannot load' "$T/d.static.err")" || fail "d: static: $(head -3 "$T/d.static.err")"
	kill "$sp" 2> /dev/null
fi

check_finish
