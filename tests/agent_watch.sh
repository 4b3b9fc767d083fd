#!/bin/bash
# The agent's watcher (bpf/watch.bpf.c, bpf/watch.c, agent/proc_watch.c)
# through build/asan/tests/agent_tool watch, as root:
#  a. exec: a program started in a new cgroup v2 directory is reported with
#     its comm, parent and that directory's cgroup id (its inode);
#  b. exit: a followed process's exit with its status (0, killed by 9);
#  c. the OOM killer: a python3.11 allocating in a memory-limited cgroup
#     (v1 memory.limit_in_bytes on hybrid hosts, else v2 memory.max) is
#     reported as the victim, with its comm and RSS, before its exit event;
#     how long it lives after mark_victim and how late the callback runs
#     are measured over 3 kills and printed, with whether it still ran
#     when the callback did (on a busy machine it may not: an agent writes
#     the victim's report from its own books, not from the victim);
#  d. the fallbacks with the tracepoints left out: the /proc scan finds a
#     new program by comm, a pidfd reports the exit, and no OOM event is
#     said as such;
#  e. fork: a followed process's new children are reported with their
#     parent (a pre-forking server's workers never exec), its threads not.
# Exit 0 pass, 1 fail, 77 skip (not root, or no BTF).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
TOOL=$BUILD/asan/tests/agent_tool

if [ "$(id -u)" != 0 ]; then
	echo "skip: the watcher's BPF programs need root"
	exit 77
fi
[ -r /sys/kernel/btf/vmlinux ] || { echo "skip: no kernel BTF"; exit 77; }
[ -x "$TOOL" ] || { echo "FAIL: $TOOL missing (make check)"; exit 1; }

T=$(mktemp -d /tmp/dwleak-agent-watch-XXXXXX)
CGS=()
pids=()
cleanup() {
	local cg p
	for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
	wait 2> /dev/null
	for cg in "${CGS[@]}"; do
		# anything left inside goes back to the root first
		for p in $(cat "$cg/cgroup.procs" 2> /dev/null); do echo "$p" > "$(dirname "$cg")/cgroup.procs" 2> /dev/null; done
		rmdir "$cg" 2> /dev/null
	done
	cgroup_unmount
	rm -rf "$T"
}
trap cleanup EXIT
# shellcheck source=tests/lib_cgroup.sh
. "$ROOT/tests/lib_cgroup.sh"
cgroup_mounts "/run/dwleak-cgroups-$$" || { echo "skip: making cgroups needs a cgroup2 file system"; exit 77; }
errors=0
fail() {
	echo "FAIL: $*"
	errors=$((errors + 1))
}
pass() { echo "ok: $*"; }

# watch_start OUT ARGS...: the driver in the background until "ready".
watch_start() {
	local out=$1 i
	shift
	"$TOOL" watch "$@" > "$out" 2>&1 &
	pids+=($!)
	for i in $(seq 100); do
		grep -q '^ready' "$out" && return 0
		kill -0 "${pids[-1]}" 2> /dev/null || break
		sleep 0.1
	done
	fail "the watcher did not start: $(cat "$out")"
	return 1
}
# wait_for FILE PATTERN: up to 10 s for a line matching PATTERN.
wait_for() {
	local i
	for i in $(seq 100); do
		grep -qE "$2" "$1" && return 0
		sleep 0.1
	done
	return 1
}

# the cgroup v2 tree (unified on hybrid hosts): V2, from lib_cgroup.sh

# --- a, b: exec and exit through the tracepoints ---
watch_start "$T/watch.txt" --exit-all || exit 1
head -n 3 "$T/watch.txt" | sed 's/^/  /'
grep -q '^how exec: BPF tp_btf/sched_process_exec' "$T/watch.txt" || fail "exec not from its tracepoint: $(head -n 1 "$T/watch.txt")"
CG=$V2/dwleak-watch-$$
mkdir "$CG" && CGS+=("$CG")
cp /bin/sleep "$T/dwleak_w_exec"
sh -c "echo \$\$ > $CG/cgroup.procs && exec $T/dwleak_w_exec 0.2" &
child=$!
wait $child
want_id=$(stat -c %i "$CG")
if wait_for "$T/watch.txt" "^exec pid=$child .*comm=dwleak_w_exec cgroup=$want_id "; then
	pass "exec of pid $child seen with its comm and cgroup id $want_id"
else
	fail "no exec event for pid $child in cgroup $want_id: $(grep "pid=$child " "$T/watch.txt")"
fi
wait_for "$T/watch.txt" "^exit pid=$child status=0 " && pass "its exit, status 0" ||
	fail "no exit event for pid $child: $(grep "pid=$child " "$T/watch.txt")"
"$T/dwleak_w_exec" 30 &
victim=$!
sleep 0.2
kill -9 $victim
wait $victim 2> /dev/null
wait_for "$T/watch.txt" "^exit pid=$victim status=9 " && pass "a SIGKILL'd process's exit, status 9" ||
	fail "no exit status 9 for pid $victim: $(grep "pid=$victim " "$T/watch.txt")"
grep -q "^exit pid=$(pgrep -n -x agent_tool) " "$T/watch.txt" && fail "the watcher reported itself ending"

# followed pids only (no --exit-all): one exit each, no other; a zombie
# (its last thread ended, not reaped) is refused as ended
"$T/dwleak_w_exec" 2.5 &
fol=$!
sh -c "$T/dwleak_w_exec 0.05 & exec $T/dwleak_w_exec 5" &
zparent=$!
pids+=($zparent)
sleep 0.4
zombie=$(pgrep -P $zparent | head -n 1)
watch_start "$T/follow.txt" --follow $fol --follow "${zombie:-1}" --seconds 5 || exit 1
grep -q "^follow $fol:" "$T/follow.txt" && fail "following $fol: $(grep "^follow $fol:" "$T/follow.txt")"
wait_for "$T/follow.txt" "^exit pid=$fol status=0 " || fail "no exit of followed pid $fol: $(cat "$T/follow.txt")"
wait $fol
sleep 0.3
[ "$(grep -c '^exit ' "$T/follow.txt")" = 1 ] && pass "a followed pid's exit once, no other process's" ||
	fail "exits without --exit-all: $(grep '^exit ' "$T/follow.txt")"
if [ -n "$zombie" ] && grep -q "^follow $zombie: No such process" "$T/follow.txt"; then
	pass "following a zombie ($zombie) says it has ended"
else
	fail "zombie ${zombie:-(none made)}: $(grep "^follow" "$T/follow.txt")"
fi
kill $zparent 2> /dev/null

# --- e: forks of a followed process, not its threads ---
sh -c "sleep 1; $T/dwleak_w_exec 0.1 & wait" &
fparent=$!
pids+=($fparent)
/usr/bin/python3 -c 'import threading, time
time.sleep(1)
t = threading.Thread(target=time.sleep, args=(0.1,))
t.start()
t.join()' &
tparent=$!
pids+=($tparent)
watch_start "$T/fork.txt" --follow $fparent --follow $tparent --seconds 4 || exit 1
if grep -q '^how fork: BPF tp_btf/sched_process_fork' "$T/fork.txt"; then
	wait_for "$T/fork.txt" "^fork pid=[0-9]+ ppid=$fparent comm=sh " &&
		pass "a followed shell's forks reported: $(grep -c "^fork .*ppid=$fparent " "$T/fork.txt") children" ||
		fail "no fork event of pid $fparent: $(cat "$T/fork.txt")"
	wait $tparent
	sleep 0.3
	grep -q "^fork .*ppid=$tparent " "$T/fork.txt" && fail "a thread was reported as a fork: $(grep "ppid=$tparent" "$T/fork.txt")"
else
	echo "note: $(grep '^how fork' "$T/fork.txt")"
fi

# --- c: the OOM killer's victim ---
if grep -q '^how victim: BPF tp_btf/mark_victim' "$T/watch.txt" && command -v python3.11 > /dev/null; then
	if [ -n "$V1MEM" ]; then
		MCG=$V1MEM/dwleak-watch-oom-$$
		mkdir "$MCG" && CGS+=("$MCG")
		echo $((64 << 20)) > "$MCG/memory.limit_in_bytes"
		echo 0 > "$MCG/memory.swappiness" 2> /dev/null
	else
		MCG=$CG
		echo "+memory" > "$V2/cgroup.subtree_control" 2> /dev/null
		echo $((64 << 20)) > "$MCG/memory.max" || MCG=
		echo 0 > "$MCG/memory.swap.max" 2> /dev/null
	fi
	lifetimes=()
	for run in 1 2 3; do
		[ -n "$MCG" ] || break
		sh -c "echo \$\$ > $MCG/cgroup.procs && exec python3.11 -c '
a = []
while True:
    a.append(b\"x\" * (1 << 20))'" 2> /dev/null &
		oom=$!
		wait $oom 2> /dev/null
		st=$?
		if ! wait_for "$T/watch.txt" "^exit pid=$oom "; then
			fail "run $run: no exit of pid $oom (status $st)"
			continue
		fi
		vline=$(grep -n "^victim pid=$oom " "$T/watch.txt" | head -n 1)
		eline=$(grep -n "^exit pid=$oom " "$T/watch.txt" | head -n 1)
		if [ -z "$vline" ]; then
			fail "run $run: pid $oom ended (status $st) with no victim event"
			continue
		fi
		[ "${vline%%:*}" -lt "${eline%%:*}" ] || fail "run $run: the victim event came after the exit"
		state=$(sed 's/.* state=\(.\).*/\1/' <<< "$vline")
		case "$state" in Z | -) ran=ended ;; *) ran=running ;; esac
		case "$vline" in *" comm=python3.11 "*) ;; *) fail "run $run: victim comm: $vline" ;; esac
		rss=$(sed 's/.* rss=\([0-9]*\).*/\1/' <<< "$vline")
		[ "$rss" -gt $((32 << 20)) ] || fail "run $run: the victim's RSS $rss is not near the 64 MiB limit"
		tv=$(sed 's/.* t=\([0-9]*\).*/\1/' <<< "$vline")
		seen=$(sed 's/.* seen=\([0-9]*\).*/\1/' <<< "$vline")
		te=$(sed 's/.* t=\([0-9]*\).*/\1/' <<< "${eline#*:}")
		life=$(awk -v a="$tv" -v b="$te" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')
		lag=$(awk -v a="$tv" -v b="$seen" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')
		lifetimes+=("$life")
		echo "run $run: victim pid $oom (RSS $((rss >> 20)) MiB) lived ${life} ms after mark_victim; the callback ran ${lag} ms after it, the victim $ran then"
	done
	if [ ${#lifetimes[@]} -eq 3 ]; then
		pass "the OOM victim is reported before its exit; lifetimes after mark_victim: ${lifetimes[*]} ms"
	else
		fail "OOM: ${#lifetimes[@]} of 3 runs measured"
	fi
else
	echo "note: no mark_victim tracepoint or no python3.11 here: the OOM part is not checked"
fi
kill "${pids[0]}" 2> /dev/null

# --- d: the fallbacks ---
sleep 1.5 &
followed=$!
watch_start "$T/fallback.txt" --disable exec,exit,victim --scan-ms 200 --follow $followed || exit 1
sed -n 1,3p "$T/fallback.txt" | sed 's/^/  /'
grep -q '^how exec: a scan of /proc every 200 ms' "$T/fallback.txt" || fail "exec fallback: $(sed -n 1p "$T/fallback.txt")"
grep -q '^how exit: a pidfd per followed process' "$T/fallback.txt" || fail "exit fallback: $(sed -n 2p "$T/fallback.txt")"
grep -q '^how victim: none: no report at an OOM kill' "$T/fallback.txt" || fail "victim fallback: $(sed -n 3p "$T/fallback.txt")"
cp /bin/sleep "$T/dwleak_w_scan"
"$T/dwleak_w_scan" 1 &
scanned=$!
wait_for "$T/fallback.txt" "^exec pid=$scanned .*comm=dwleak_w_scan " && pass "the /proc scan found pid $scanned by its comm" ||
	fail "the scan did not find pid $scanned: $(cat "$T/fallback.txt")"
wait_for "$T/fallback.txt" "^exit pid=$followed status=-1 " && pass "a pidfd reported the followed pid's exit" ||
	fail "no pidfd exit of $followed: $(cat "$T/fallback.txt")"
grep -q "kworker" "$T/fallback.txt" && fail "the scan reported kernel threads"
wait $scanned

[ $errors -eq 0 ] || exit 1
echo "agent watch: all checks passed"
