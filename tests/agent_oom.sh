#!/bin/bash
# dwleak agent at an OOM kill (issue 23), as root: testdata/agent_service
# --oom (1 MiB kept from oom_grow() every 20 ms, written so it is
# resident), started with the preload library in a memory-limited cgroup
# (64 MiB: v1 memory.limit_in_bytes on hybrid hosts, else v2 memory.max)
# that the agent watches (--cgroup), grows until the OOM killer picks it.
# The agent must leave in --report-dir, named oom-PID-*.json and .txt:
#  - the JSON report, whose stack through oom_grow holds tens of MiB, with
#    an "oom" member: the RSS at the kill near the limit, the cgroup and
#    its limit, and oom_grow first among the stacks that grew most;
#  - the text report beside it, naming oom_grow under "What grew most".
# Twice: the second time with the agent's ticks slowed (DWLEAK_AGENT_TICK_S
# 60), so that nothing but the OOM event itself can have made the report.
# Exit 0 pass, 1 fail, 77 skip (not root, or no mark_victim tracepoint).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
# shellcheck source=tests/lib_agent.sh
. "$(dirname "$0")/lib_agent.sh"
lt_require_bpf
lt_testdata agent_service
[ -n "$LA_PRELOAD" ] || fail_now "no preload library ($DWLEAK preload)"
la_cgroups
T=$LT_TMP
LIMIT=$((64 << 20))

if [ -n "$V1MEM" ]; then
	MCG=$V1MEM/dwleak-agent-oom-$$
	la_mkcg "$MCG"
	echo $LIMIT > "$MCG/memory.limit_in_bytes" || fail_now "cannot limit $MCG"
	echo 0 > "$MCG/memory.swappiness" 2> /dev/null
else
	MCG=$V2/dwleak-agent-oom-$$
	echo "+memory" > "$V2/cgroup.subtree_control" 2> /dev/null
	la_mkcg "$MCG"
	echo $LIMIT > "$MCG/memory.max" 2> /dev/null || { echo "skip: no memory controller to limit a cgroup with"; exit 77; }
	echo 0 > "$MCG/memory.swap.max" 2> /dev/null
fi
cp "$TESTDATA/agent_service" "$T/dwl_oom"

for run in 1 2; do
	mkdir -p "$T/reports$run"
	if [ $run = 2 ]; then
		export DWLEAK_AGENT_TICK_S=60
	fi
	la_start agent "$T/agent$run.err" --cgroup "$MCG" --report-dir "$T/reports$run" --listen 127.0.0.1:0 ||
		fail_now "the agent did not start"
	if [ $run = 1 ] && ! grep -q 'OOM kills: BPF tp_btf/mark_victim' "$T/agent1.err"; then
		echo "skip: no BTF tracepoint mark_victim here: $(grep 'OOM kills' "$T/agent1.err")"
		exit 77
	fi
	sh -c "echo \$\$ > $MCG/cgroup.procs && LD_PRELOAD=$LA_PRELOAD exec $T/dwl_oom --oom --delay-ms 400 --interval-ms 20" \
		> "$T/oom$run.out" 2>&1 &
	victim=$!
	lt_pids+=($victim)
	wait $victim 2> /dev/null
	st=$?
	[ $st = 137 ] || fail "run $run: the victim exited $st, not killed by SIGKILL"
	la_wait_for "$T/agent$run.err" "^dwleak: the OOM killer picked pid $victim \(dwl_oom\): report in " 10 ||
		fail "run $run: no report said: $(grep -E "$victim|OOM" "$T/agent$run.err")"
	json=$(ls "$T/reports$run"/oom-"$victim"-*.json 2> /dev/null | head -n 1)
	text=${json%.json}.txt
	if [ -z "$json" ] || [ ! -s "$text" ]; then
		fail "run $run: no oom-$victim-*.json and .txt in the report dir: $(ls "$T/reports$run")"
	else
		lt_check "$json" $LIMIT "$MCG" << 'PY'
o = r.get("oom")
s = only_stack_with("oom_grow")
if not o:
    fail("no oom member")
elif s:
    limit = int(ARGS[0])
    if s["bytes"] < 16 << 20:
        fail("oom_grow holds %d B, want tens of MiB" % s["bytes"])
    if not (o["rss_bytes_at_kill"] and limit // 2 < o["rss_bytes_at_kill"] < 2 * limit):
        fail("RSS at the kill %s, limit %d" % (o["rss_bytes_at_kill"], limit))
    if o["cgroup"] != ARGS[1] or o["cgroup_limit_bytes"] != limit:
        fail("cgroup %s limit %s, want %s %d; could not read: %s" % (o["cgroup"], o["cgroup_limit_bytes"], ARGS[1], limit, o.get("not_read")))
    g = o["grew_most"]
    if not g or "oom_grow" not in g[0]["frames"]:
        fail("what grew most: %s" % g)
    elif o["cgroup_limit_bytes"] == limit:
        ok("oom_grow: %d B outstanding, grew %d B over %.1f s; RSS %d B at the kill, limit %d B in %s%s" % (
            s["bytes"], g[0]["growth_bytes"], o["grew_over_s"], o["rss_bytes_at_kill"], o["cgroup_limit_bytes"],
            o["cgroup"], "; not read: " + o["not_read"] if o["not_read"] else ""))
PY
		sed -n '/^What grew most/,/^$/p' "$text" | grep -q 'main;oom_grow;malloc' &&
			pass "run $run: the text report names oom_grow under 'What grew most'" ||
			fail "run $run: text report: $(head -n 8 "$text")"
	fi
	kill -TERM "$agent"
	lt_wait "$agent" 30 || fail "run $run: the agent exited $?"
	grep -E '(ERROR|Sanitizer|runtime error)' "$T/agent$run.err" && fail "run $run: sanitizer reports"
done
check_finish "agent oom: all checks passed"
