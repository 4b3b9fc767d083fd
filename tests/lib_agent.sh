# shellcheck shell=bash
# Shared helpers for the tests of `dwleak agent` (tests/agent_serve.sh,
# agent_find.sh, agent_oom.sh).  Source it after tests/lib_trace.sh
# (run directly, it sources that itself and checks its own helpers).
#
#   la_start VAR ERR ARGS...  "$DWLEAK agent ARGS..." in the background
#                             (stderr to ERR); waits (30 s) for its
#                             "dwleak: agent listening on ADDR" line; its pid
#                             into VAR, ADDR into LA_ADDR (returns 1 if the
#                             line never came)
#   la_wait_for FILE ERE [SECS]  until a line of FILE matches ERE (default
#                             10 s); status 1 if none does
#   la_service VAR NAME ARGS...  testdata/agent_service copied to
#                             $LT_TMP/NAME (its comm) and started with the
#                             preload library (LD_PRELOAD), stdout+stderr to
#                             $LT_TMP/NAME.out; its pid into VAR
#   la_metric ADDR NAME PID   the value of NAME{pid="PID"} on /metrics
#   la_total URL KEY          totals.KEY of the JSON report at URL
#   la_cgroups                V2 (the cgroup v2 tree), V1SD (v1 name=systemd
#                             or empty), V1MEM (v1 memory or empty)
#   la_mkcg DIR               makes a cgroup, removed at exit (with what is
#                             left inside moved out)

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	# shellcheck source=tests/lib_trace.sh
	. "$(dirname "$0")/lib_trace.sh"
fi
LA_CGS=()
LA_ADDR=

la_start() {
	local __var=$1 __err=$2 __pid __i
	shift 2
	"$DWLEAK" agent "$@" 2> "$__err" &
	__pid=$!
	lt_pids+=("$__pid")
	printf -v "$__var" %s "$__pid"
	for ((__i = 0; __i < 3000; __i++)); do
		LA_ADDR=$(sed -n 's/^dwleak: agent listening on \([^ ]*\).*/\1/p' "$__err" 2> /dev/null)
		[ -n "$LA_ADDR" ] && return 0
		kill -0 "$__pid" 2> /dev/null || break
		sleep 0.01
	done
	echo "dwleak agent never said 'agent listening'; its stderr:" >&2
	sed 's/^/    /' "$__err" >&2
	return 1
}

la_wait_for() {
	local i n=$((${3:-10} * 50))
	for ((i = 0; i < n; i++)); do
		grep -qE "$2" "$1" 2> /dev/null && return 0
		sleep 0.02
	done
	return 1
}

la_service() {
	local __var=$1 __name=$2 __pid
	shift 2
	# copied once per name: a copy still running from before (killed, not
	# yet gone) cannot be written over (ETXTBSY)
	[ -x "$LT_TMP/$__name" ] || cp "$TESTDATA/agent_service" "$LT_TMP/$__name" || fail_now "cannot copy agent_service"
	LD_PRELOAD=$LA_PRELOAD "$LT_TMP/$__name" "$@" > "$LT_TMP/$__name.out" 2>&1 < /dev/null &
	__pid=$!
	lt_pids+=("$__pid")
	printf -v "$__var" %s "$__pid"
}

la_metric() {
	curl -sf "http://$1/metrics" | sed -n "s/^$2{pid=\"$3\",[^}]*} \([0-9.e+-]*\)\$/\1/p"
}

la_total() {
	curl -sf "$1" | "$LT_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["totals"][sys.argv[1]])' "$2" 2> /dev/null
}

# la_cgroups: V2, V1SD, V1MEM as tests/lib_cgroup.sh finds them, mounted
# under /run/dwleak-cgroups-PID where the host's are not reachable (a
# fresh Debian root's /sys is bound without its cgroup submounts); what it
# mounted is unmounted at exit, after the cgroups made are gone.
la_cgroups() {
	cgroup_mounts "/run/dwleak-cgroups-$$" || fail_now "cannot reach a cgroup2 tree"
}

la_mkcg() {
	[ -d "$1" ] || { mkdir "$1" && LA_CGS+=("$1"); }
}

# at exit, after lt_cleanup killed what the test started: the cgroups made,
# deepest first, anything left inside moved to the parent first
la_cleanup() {
	local i p cg
	lt_cleanup
	for ((i = ${#LA_CGS[@]} - 1; i >= 0; i--)); do
		cg=${LA_CGS[$i]}
		for p in $(cat "$cg/cgroup.procs" 2> /dev/null); do
			echo "$p" > "$(dirname "$cg")/cgroup.procs" 2> /dev/null
		done
		rmdir "$cg" 2> /dev/null
	done
	cgroup_unmount
	rmdir "/run/dwleak-cgroups-$$" 2> /dev/null
}

# shellcheck source=tests/lib_cgroup.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib_cgroup.sh"

LA_PRELOAD=$("$DWLEAK" preload 2> /dev/null)
trap la_cleanup EXIT

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	# run directly (tests/run.sh runs every tests/*.sh): the helpers that
	# need no root, on themselves
	echo "listening" > "$LT_TMP/f"
	(sleep 0.2; echo "dwleak: agent listening on 127.0.0.1:1" >> "$LT_TMP/f") &
	la_wait_for "$LT_TMP/f" '^dwleak: agent listening on [0-9.]+:1$' 5 || fail "la_wait_for missed a line"
	la_wait_for "$LT_TMP/f" '^never$' 1 && fail "la_wait_for matched what is not there"
	la_cgroups
	[ -d "$V2" ] || fail "no cgroup v2 tree at $V2"
	check_finish "lib_agent.sh: its helpers wait and find as documented"
fi
