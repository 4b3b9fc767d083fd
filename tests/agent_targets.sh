#!/bin/bash
# The agent's targets (agent/targets.c) on this machine's real cgroups, as
# root, through build/asan/tests/agent_tool members: a unit's cgroups made
# where systemd makes them (this machine's systemd is not PID 1, so the
# test lays them out itself: /system.slice/NAME.service in the v2 tree,
# /sys/fs/cgroup/unified on hybrid hosts, and in the v1 name=systemd
# hierarchy), a v1 memory cgroup and a v2 one for --cgroup, a name for
# --comm:
#  a. --unit lists the processes in the unit's v2 and v1 cgroups and a
#     child cgroup, and matches a process started in it later;
#  b. --cgroup in the v1 memory hierarchy and in the v2 tree, descendants
#     included, and not a sibling whose name starts the same;
#  c. --comm finds every process of that name, and one started later;
#  d. a unit that does not run yet resolves, and matches once it does.
# Exit 0 pass, 1 fail, 77 skip (not root, no cgroup file system).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
TOOL=$BUILD/asan/tests/agent_tool

if [ "$(id -u)" != 0 ]; then
	echo "skip: making cgroups needs root"
	exit 77
fi
[ -x "$TOOL" ] || { echo "FAIL: $TOOL missing (make check)"; exit 1; }
# shellcheck source=tests/lib_cgroup.sh
. "$ROOT/tests/lib_cgroup.sh"
cgroup_mounts "/run/dwleak-cgroups-$$" || { echo "skip: making cgroups needs a cgroup2 file system"; exit 77; }
echo "cgroup v2 at $V2; v1 name=systemd at ${V1SD:-(none)}; v1 memory at ${V1MEM:-(none)}"

T=$(mktemp -d /tmp/dwleak-agent-targets-XXXXXX)
UNIT=dwleak-test-$$.service
LATER=dwleak-later-$$.service
CGS=()
pids=()
cleanup() {
	local cg p i
	for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
	wait 2> /dev/null
	# deepest first
	for ((i = ${#CGS[@]} - 1; i >= 0; i--)); do
		rmdir "${CGS[$i]}" 2> /dev/null
	done
	cgroup_unmount
	rm -rf "$T"
}
trap cleanup EXIT
errors=0
fail() {
	echo "FAIL: $*"
	errors=$((errors + 1))
}
pass() { echo "ok: $*"; }

# mkcg DIR: makes a cgroup, to be removed at the end (only if made here:
# a host's own system.slice stays).
mkcg() {
	[ -d "$1" ] || { mkdir "$1" && CGS+=("$1"); }
}
# start_in NAME CGROUP...: a sleeping process named NAME put in each
# CGROUP before it execs; sets PID.
start_in() {
	local name=$1 cg cmd=""
	shift
	cp /bin/sleep "$T/$name" 2> /dev/null
	for cg in "$@"; do cmd="$cmd echo \$\$ > $cg/cgroup.procs &&"; done
	sh -c "$cmd exec $T/$name 60" &
	PID=$!
	pids+=($PID)
	sleep 0.2
}
members() { "$TOOL" members "$@" 2> "$T/members.err" | tr '\n' ' ' | sed 's/ $//'; }

# --- a. a unit laid out as systemd lays it out ---
mkcg "$V2/system.slice"
mkcg "$V2/system.slice/$UNIT"
mkcg "$V2/system.slice/$UNIT/worker"
if [ -n "$V1SD" ]; then
	mkcg "$V1SD/system.slice"
	mkcg "$V1SD/system.slice/$UNIT"
	start_in dwleak_unit_a "$V2/system.slice/$UNIT" "$V1SD/system.slice/$UNIT"
else
	start_in dwleak_unit_a "$V2/system.slice/$UNIT"
fi
a=$PID
start_in dwleak_unit_b "$V2/system.slice/$UNIT/worker"
b=$PID
want=$(printf '%s\n' $a $b | sort -n | tr '\n' ' ' | sed 's/ $//')
got=$(members --unit "$UNIT")
[ "$got" = "$want" ] && pass "--unit $UNIT lists $got (its cgroup and a child)" ||
	fail "--unit $UNIT lists '$got', want '$want' ($(cat "$T/members.err"))"
if [ -n "$V1SD" ]; then
	# only in the v1 name=systemd tree: found there too
	start_in dwleak_unit_c "$V1SD/system.slice/$UNIT"
	c=$PID
	got=$("$TOOL" members --unit "$UNIT" --match $c)
	[ "$got" = "match $c --unit $UNIT" ] && pass "a process in the unit's v1 name=systemd cgroup only: $got" ||
		fail "v1-only member: $got"
fi
start_in dwleak_other
other=$PID
got=$("$TOOL" members --unit "$UNIT" --match $other)
[ "$got" = "nomatch $other" ] || fail "a process outside the unit matched: $got"

# --- b. --cgroup, v1 memory and v2 ---
if [ -n "$V1MEM" ]; then
	mkcg "$V1MEM/dwleak-cg-$$"
	mkcg "$V1MEM/dwleak-cg-$$/inner"
	mkcg "$V1MEM/dwleak-cg-$$x"
	start_in dwleak_mem_in "$V1MEM/dwleak-cg-$$/inner"
	inner=$PID
	start_in dwleak_mem_sib "$V1MEM/dwleak-cg-$$x"
	sib=$PID
	got=$(members --cgroup "$V1MEM/dwleak-cg-$$")
	[ "$got" = "$inner" ] && pass "--cgroup $V1MEM/dwleak-cg-$$ (v1 memory) lists $got, not its sibling" ||
		fail "--cgroup v1 memory lists '$got', want '$inner' ($(cat "$T/members.err"))"
	got=$("$TOOL" members --cgroup "$V1MEM/dwleak-cg-$$" --match $sib)
	[ "$got" = "nomatch $sib" ] || fail "a sibling cgroup's process matched: $got"
fi
mkcg "$V2/dwleak-cg2-$$"
start_in dwleak_v2 "$V2/dwleak-cg2-$$"
v2=$PID
got=$(members --cgroup "$V2/dwleak-cg2-$$")
[ "$got" = "$v2" ] && pass "--cgroup $V2/dwleak-cg2-$$ (v2) lists $got" || fail "--cgroup v2 lists '$got', want '$v2'"
got=$("$TOOL" members --cgroup "$V2/dwleak-cg2-$$" --match $v2)
[ "$got" = "match $v2 --cgroup $V2/dwleak-cg2-$$" ] || fail "--cgroup v2 match: $got"

# --- c. --comm ---
start_in dwleak_byname
n1=$PID
start_in dwleak_byname
n2=$PID
got=$(members --comm dwleak_byname)
[ "$got" = "$(printf '%s\n' $n1 $n2 | sort -n | tr '\n' ' ' | sed 's/ $//')" ] && pass "--comm dwleak_byname lists $got" ||
	fail "--comm lists '$got', want $n1 $n2"

# --- d. a unit not running yet ---
got=$(members --unit "$LATER")
[ -z "$got" ] && [ ! -s "$T/members.err" ] || fail "a unit not started: '$got' $(cat "$T/members.err")"
mkcg "$V2/system.slice/$LATER"
start_in dwleak_later "$V2/system.slice/$LATER"
got=$("$TOOL" members --unit "$LATER" --match $PID)
[ "$got" = "match $PID --unit $LATER" ] && pass "a unit started after it was named: $got" || fail "later unit: $got"

# errors say what is wrong
"$TOOL" members --cgroup "${V1MEM:-$V2}/dwleak-none-$$" > /dev/null 2> "$T/err" && fail "a missing cgroup taken"
grep -q 'no such directory' "$T/err" || fail "missing cgroup: $(cat "$T/err")"
"$TOOL" members --unit nginx > /dev/null 2> "$T/err" && fail "a unit without .service taken"

[ $errors -eq 0 ] || exit 1
echo "agent targets: all checks passed"
