#!/bin/bash
# dwleak agent finding processes as they come and go (issue 23), as root;
# the processes are testdata/agent_service with the preload library:
#  a. --comm: a process started after the agent is traced within a second
#     of its start (3 runs, the times printed);
#  b. --unit NAME.service laid out as systemd lays it out (this machine's
#     systemd is not PID 1): /system.slice/NAME.service in the cgroup v2
#     tree (unified on hybrid hosts) and in the v1 name=systemd one; a
#     process started in it later is traced within a second;
#  c. --cgroup in the v1 memory hierarchy and in the v2 tree: a process
#     started there later is traced within a second;
#  d. forks: a pre-forking server's workers (which never exec) are
#     traced, each its own process in the reports;
#  e. exec: a traced process that execs a program without the library
#     gets the library injected and is traced again, and one that execs a
#     program with it is traced again;
#  f. exits: an ended process's last numbers are in /metrics at the next
#     scrape, then it is forgotten (DWLEAK_AGENT_LINGER_S=3).
# Exit 0 pass, 1 fail, 77 skip (not root; no curl).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
# shellcheck source=tests/lib_agent.sh
. "$(dirname "$0")/lib_agent.sh"
lt_require_bpf
command -v curl > /dev/null || { echo "skip: curl is not installed (.ci/deps.sh)"; exit 77; }
lt_testdata agent_service
[ -n "$LA_PRELOAD" ] || fail_now "no preload library ($DWLEAK preload)"
la_cgroups
T=$LT_TMP
UNIT=dwleak-agent-test-$$.service
export DWLEAK_AGENT_LINGER_S=3

# found NAME PID T0: whether the agent said it traces PID within a
# second of T0 (date +%s.%N before the start); its time in FOUND_MS
found() {
	local i t
	for ((i = 0; i < 300; i++)); do
		if grep -q "^dwleak: tracing pid $2 " "$T/agent.err"; then
			t=$(date +%s.%N)
			FOUND_MS=$(awk -v a="$3" -v b="$t" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
			[ "$FOUND_MS" -le 1000 ] && return 0
			fail "$1: pid $2 traced $FOUND_MS ms after its start, more than a second"
			return 1
		fi
		sleep 0.005
	done
	fail "$1: pid $2 never traced: $(grep "$2" "$T/agent.err")"
	return 1
}

# --- the agent, every target at once ---
la_mkcg "$V2/system.slice"
la_mkcg "$V2/system.slice/$UNIT"
[ -n "$V1SD" ] && la_mkcg "$V1SD/system.slice" && la_mkcg "$V1SD/system.slice/$UNIT"
CG2=$V2/dwleak-agent-cg-$$
la_mkcg "$CG2"
args=(--comm dwl_by_comm --unit "$UNIT" --cgroup "$CG2" --comm dwl_forker --comm dwl_execer --comm dwl_ends)
if [ -n "$V1MEM" ]; then
	CG1=$V1MEM/dwleak-agent-cg-$$
	la_mkcg "$CG1"
	args+=(--cgroup "$CG1")
fi
la_start agent "$T/agent.err" "${args[@]}" --listen 127.0.0.1:0 || fail_now "the agent did not start"
A=$LA_ADDR

# --- a. by comm ---
if lt_part a; then
	times=()
	for run in 1 2 3; do
		t0=$(date +%s.%N)
		la_service p dwl_by_comm --iterations 0
		found "--comm" "$p" "$t0" && times+=("$FOUND_MS")
		kill "$p"
	done
	[ ${#times[@]} = 3 ] && pass "--comm: started processes traced ${times[*]} ms after their start"
fi

# start_in NAME CGROUP... : agent_service named NAME, put into each
# CGROUP before it execs with the library; its pid in PID, its start in T0
start_in() {
	local name=$1 cg cmd=""
	shift
	[ -x "$T/$name" ] || cp "$TESTDATA/agent_service" "$T/$name" # once: see la_service
	for cg in "$@"; do cmd="$cmd echo \$\$ > $cg/cgroup.procs &&"; done
	T0=$(date +%s.%N)
	sh -c "$cmd LD_PRELOAD=$LA_PRELOAD exec $T/$name --iterations 0" > "$T/$name.out" 2>&1 &
	PID=$!
	lt_pids+=("$PID")
}

# --- b. a unit ---
if lt_part b; then
	if [ -n "$V1SD" ]; then
		start_in dwl_unit "$V2/system.slice/$UNIT" "$V1SD/system.slice/$UNIT"
	else
		start_in dwl_unit "$V2/system.slice/$UNIT"
	fi
	found "--unit" "$PID" "$T0" && pass "--unit $UNIT (v2${V1SD:+ and v1 name=systemd}): pid $PID traced $FOUND_MS ms after its start"
	if [ -n "$V1SD" ]; then
		# only in the v1 name=systemd tree: found there too
		start_in dwl_unit_v1 "$V1SD/system.slice/$UNIT"
		found "--unit (v1)" "$PID" "$T0" && pass "--unit, a process in its v1 name=systemd cgroup only: traced in $FOUND_MS ms"
	fi
fi

# --- c. cgroups ---
if lt_part c; then
	start_in dwl_cg2 "$CG2"
	found "--cgroup v2" "$PID" "$T0" && pass "--cgroup $CG2 (v2): pid $PID traced $FOUND_MS ms after its start"
	if [ -n "$V1MEM" ]; then
		start_in dwl_cg1 "$CG1"
		found "--cgroup v1" "$PID" "$T0" && pass "--cgroup $CG1 (v1 memory): pid $PID traced $FOUND_MS ms after its start"
	fi
fi

# --- d. a pre-forking server ---
if lt_part d; then
	la_service server dwl_forker --prefork 4 --delay-ms 1500 --grow-bytes 600000 --iterations 10 --interval-ms 10
	la_wait_for "$T/agent.err" "^dwleak: tracing pid $server " 5 || fail "the server $server not traced"
	sleep 1
	workers=$(pgrep -P "$server" | sort -n)
	n=0
	for w in $workers; do
		grep -q "^dwleak: tracing pid $w (dwl_forker, --comm dwl_forker, forked by $server)" "$T/agent.err" && n=$((n + 1))
	done
	[ "$n" = 4 ] && pass "the 4 workers of a pre-forking server are traced: $(echo $workers)" ||
		fail "$n of 4 workers traced ($(echo $workers)): $(grep dwl_forker "$T/agent.err")"
	la_wait_for "$T/dwl_forker.out" '^quiet' 10
	sleep 1.5
	for w in $workers; do
		b=$(la_metric "$A" dwleak_outstanding_bytes "$w")
		[ -n "$b" ] || fail "worker $w has no dwleak_outstanding_bytes"
	done
	[ "$n" = 4 ] && pass "each worker is a process of its own in /metrics"
fi

# --- e. exec ---
if lt_part e; then
	cp "$TESTDATA/agent_service" "$T/dwl_execer"
	la_service ex dwl_execer --exec-after-ms 800 -- "$T/dwl_execer" --iterations 0
	la_wait_for "$T/agent.err" "^dwleak: tracing pid $ex " 5 || fail "pid $ex not traced"
	# the same program again, the library inherited: traced again
	la_wait_for "$T/agent.err" "^dwleak: pid $ex \(dwl_execer\) exec'd dwl_execer: its old image's trace ends" 5
	for i in $(seq 250); do
		[ "$(grep -c "^dwleak: tracing pid $ex " "$T/agent.err")" = 2 ] && break
		sleep 0.02
	done
	[ "$(grep -c "^dwleak: tracing pid $ex " "$T/agent.err")" = 2 ] &&
		pass "a traced process that execs a program with the library is traced again" ||
		fail "exec with the library: $(grep "$ex" "$T/agent.err")"
	# without the library after its exec: the library is loaded into the
	# new program, which is traced at its sites again
	sh -c "LD_PRELOAD=$LA_PRELOAD exec $T/dwl_execer --exec-after-ms 800 -- env -u LD_PRELOAD $T/dwl_execer --iterations 0" \
		> "$T/ex2.out" 2>&1 &
	ex2=$!
	lt_pids+=($ex2)
	la_wait_for "$T/agent.err" "^dwleak: tracing pid $ex2 " 5 || fail "pid $ex2 not traced"
	la_wait_for "$T/agent.err" "^dwleak: tracing pid $ex2 \(dwl_execer, --comm dwl_execer\) at the preload library's sites, injected in" 5 &&
		pass "a traced process that execs a program without the library gets it injected: $(grep "tracing pid $ex2 .*injected" "$T/agent.err")" ||
		fail "exec without the library: $(grep "$ex2" "$T/agent.err")"
fi

# --- f. an exit: the last numbers, then forgotten ---
if lt_part f; then
	la_service ends dwl_ends --delay-ms 1000 --grow-bytes 700000 --iterations 8 --interval-ms 5
	la_wait_for "$T/agent.err" "^dwleak: tracing pid $ends " 5 || fail "pid $ends not traced"
	la_wait_for "$T/dwl_ends.out" '^quiet' 10
	sleep 1.2
	kill "$ends"
	la_wait_for "$T/agent.err" "^dwleak: pid $ends \(dwl_ends\) ended \(killed by signal 15" 5 ||
		fail "no exit said for pid $ends"
	last=$(la_metric "$A" dwleak_outstanding_bytes "$ends")
	[ -n "$last" ] && [ "$last" -gt 0 ] && pass "an ended process's last numbers are in /metrics: $last bytes" ||
		fail "pid $ends has no series after its exit"
	sleep 4.5
	[ -z "$(la_metric "$A" dwleak_outstanding_bytes "$ends")" ] && pass "then it is forgotten" ||
		fail "pid $ends is still in /metrics"
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$A/report?pid=$ends")" = 404 ] ||
		fail "a forgotten process's /report is no 404"
fi
kill -TERM "$agent"
lt_wait "$agent" 30 || fail "the agent exited $?"
grep -E '(ERROR|Sanitizer|runtime error)' "$T/agent.err" && fail "the agent's stderr has sanitizer reports"
check_finish "agent find: all checks passed"
