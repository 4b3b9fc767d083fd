#!/bin/bash
# dwleak agent serving real processes (issue 23), as root, on loopback;
# the processes are testdata/agent_service started with the preload
# library (LD_PRELOAD=$(dwleak preload)):
#  a. exact (--sample-bytes 0): Debian's prometheus server scrapes the
#     agent and its HTTP API returns the process's dwleak_outstanding_bytes
#     equal to the agent's JSON report (/report?pid=N), whose grow_here
#     stack holds exactly what the program kept; POST /leak-check
#     classifies its blocks (all still reachable: it keeps them in a list),
#     and --leak-check-every 2 checks it on its own;
#  b. sampled (the default): `go tool pprof -raw` reads /debug/pprof/heap
#     of two processes, its inuse_space and inuse_objects totals equal
#     their JSON reports', samples labelled pid and comm; ?peak=1 serves
#     the heap at the peak; a process without the library gets it injected
#     and is traced at its sites; a static program is skipped, said
#     in the log and in its /report's 404; POST /leak-check on a sampled
#     process is refused (409), saying why;
#  c. a non-loopback --listen without --auth-token-file is refused: exit
#     2 with one line saying why;
#  d. SIGHUP: a process moved into the --cgroup after its exec (no exec
#     event matched it) is traced once the agent reloads its targets;
#  e. SIGTERM: the agent exits 0, and every process it traced runs on
#     untouched: no tracer, not stopped, its own "alive" lines go on;
#  g. sampled (the default) with --leak-check-every 2: the library indexes
#     every block, so POST /leak-check classifies them all: totals exact
#     (kinds_exact; the service's 200,000 bytes it kept all reachable,
#     nothing lost), checks counted in /metrics;
#  f. --max-stacks 10 on a process with 40 stacks of its own (exact): its
#     report shows the 10 that grew last and one [evicted] stack counting
#     the other 30, their bytes in the totals, equal to /metrics's.
# Exit 0 pass, 1 fail, 77 skip (not root; no curl, go or prometheus:
# .ci/deps.sh installs them).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
# shellcheck source=tests/lib_agent.sh
. "$(dirname "$0")/lib_agent.sh"
lt_require_bpf
for c in curl go prometheus; do
	command -v $c > /dev/null 2>&1 || { echo "skip: $c is not installed (.ci/deps.sh)"; exit 77; }
done
lt_testdata agent_service
[ -n "$LA_PRELOAD" ] || fail_now "no preload library ($DWLEAK preload)"
export HOME=$LT_TMP GOCACHE=$LT_TMP/gocache GOFLAGS= GOTOOLCHAIN=local GOPROXY=off PPROF_BINARY_PATH=$LT_TMP/none
# peaks are kept within half a second of being reached
export DWLEAK_AGENT_PEAK_S=0.5
T=$LT_TMP

# --- a. exact: prometheus, the JSON report, a leak check ---
if lt_part a; then
	la_start agent_a "$T/a.err" --comm dwl_srv_exact --sample-bytes 0 --leak-check-every 2 --listen 127.0.0.1:0 ||
		fail_now "the agent did not start"
	A=$LA_ADDR
	# it allocates only once the agent had time to attach: every block seen
	la_service svc dwl_srv_exact --delay-ms 1500 --grow-bytes 10000 --iterations 20 --interval-ms 5
	la_wait_for "$T/a.err" "^dwleak: tracing pid $svc " 5 || fail "pid $svc not traced: $(cat "$T/a.err")"
	la_wait_for "$T/dwl_srv_exact.out" '^quiet' 10 || fail "the service never went quiet"
	sleep 0.5
	curl -sf "http://$A/report?pid=$svc&format=json" > "$T/a.json" || fail "GET /report?pid=$svc"
	lt_check "$T/a.json" 200000 20 << 'PY'
s = only_stack_with("grow_here")
if s and (s["bytes"], s["allocations"]) != (int(ARGS[0]), int(ARGS[1])):
    fail("grow_here: %d B in %d, the program kept %s B in %s" % (s["bytes"], s["allocations"], ARGS[0], ARGS[1]))
elif s:
    ok("grow_here: %d B in %d allocations, what the program kept" % (s["bytes"], s["allocations"]))
PY
	want=$(la_total "http://$A/report?pid=$svc" outstanding_bytes)
	PPORT=$("$LT_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	cat > "$T/prometheus.yml" << EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: dwleak
    static_configs:
      - targets: ['$A']
EOF
	prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
		--web.listen-address="127.0.0.1:$PPORT" > "$T/prometheus.log" 2>&1 &
	lt_pids+=($!)
	got=
	for i in $(seq 150); do
		got=$(curl -sf -G "http://127.0.0.1:$PPORT/api/v1/query" \
			--data-urlencode "query=dwleak_outstanding_bytes{pid=\"$svc\",comm=\"dwl_srv_exact\"}" 2> /dev/null |
			"$LT_PYTHON" -c 'import json, sys
d = json.load(sys.stdin)["data"]["result"]
print(d[0]["value"][1] if d else "")' 2> /dev/null)
		[ -n "$got" ] && break
		sleep 0.2
	done
	if [ -n "$want" ] && [ "$got" = "$want" ]; then
		pass "prometheus's API: dwleak_outstanding_bytes of pid $svc is $got, the agent's JSON report's total"
	else
		fail "prometheus's API gave '$got', the JSON report '$want' ($(tail -n 2 "$T/prometheus.log"))"
	fi
	code=$(curl -s -X POST -o "$T/check.json" -w '%{http_code}' "http://$A/leak-check?pid=$svc")
	lt_check "$T/check.json" "$code" << 'PY'
lc = r["totals"].get("leak_check") if ARGS[0] == "200" else None
if not lc:
    fail("POST /leak-check: HTTP %s, no totals.leak_check" % ARGS[0])
elif lc["reachable"]["bytes"] < 200000 or lc["definitely_lost"]["bytes"]:
    fail("leak check: %s" % lc)
else:
    ok("POST /leak-check: %d B still reachable, none lost, %.2f ms paused" % (lc["reachable"]["bytes"], lc["pause_ms"]))
PY
	grep -q '^dwleak_leak_check_bytes{pid="'"$svc"'",comm="dwl_srv_exact",kind="reachable"} [1-9]' \
		<(curl -sf "http://$A/metrics") || fail "no leak check series in /metrics after the check"
	# --leak-check-every 2: more checks came on their own meanwhile
	sleep 2.5
	checks=$(curl -sf "http://$A/metrics" | sed -n 's/^dwleak_leak_check_pause_seconds_count //p')
	[ "${checks:-0}" -ge 3 ] && pass "--leak-check-every 2: $checks leak checks' pauses in /metrics" ||
		fail "--leak-check-every 2: ${checks:-no} pauses counted"
	kill -TERM "$agent_a"
	lt_wait "$agent_a" 30 || fail "agent a exited $?"
fi

# --- b. sampled: go tool pprof, peak, skipped, leak check refused ---
if lt_part b || lt_part e; then
	lt_testdata static_run
	la_start agent_b "$T/b.err" --comm dwl_srv_one --comm dwl_srv_two --comm dwl_srv_bare --comm dwl_srv_static \
		--listen 127.0.0.1:0 || fail_now "the agent did not start"
	B=$LA_ADDR
	la_service one dwl_srv_one --delay-ms 1000 --grow-bytes 200000 --iterations 30 --interval-ms 5
	la_service two dwl_srv_two --delay-ms 1000 --grow-bytes 300000 --iterations 20 --interval-ms 5
	# started without the library: the agent loads it into the process
	cp "$TESTDATA/agent_service" "$T/dwl_srv_bare"
	"$T/dwl_srv_bare" --delay-ms 1500 --grow-bytes 250000 --iterations 20 --interval-ms 5 > "$T/dwl_srv_bare.out" 2>&1 &
	bare=$!
	lt_pids+=($bare)
	# a static program cannot take it: skipped, said
	cp "$TESTDATA/static_run" "$T/dwl_srv_static"
	"$T/dwl_srv_static" --delay-ms 60000 > "$T/static.out" 2>&1 &
	static=$!
	lt_pids+=($static)
	for p in $one $two $bare; do
		la_wait_for "$T/b.err" "^dwleak: tracing pid $p " 5 || fail "pid $p not traced: $(cat "$T/b.err")"
	done
	la_wait_for "$T/dwl_srv_one.out" '^quiet' 10 && la_wait_for "$T/dwl_srv_two.out" '^quiet' 10 &&
		la_wait_for "$T/dwl_srv_bare.out" '^quiet' 10 || fail "the services never went quiet"
	sleep 2
	if lt_part b; then
		la_wait_for "$T/b.err" "^dwleak: tracing pid $bare \(dwl_srv_bare, --comm dwl_srv_bare\) at the preload library's sites, injected in [0-9]+ ms" 5 &&
			pass "a process started without the library gets it injected: $(grep -m1 "tracing pid $bare " "$T/b.err")" ||
			fail "pid $bare: $(grep "$bare" "$T/b.err")"
		bare_b=$(la_total "http://$B/report?pid=$bare" outstanding_bytes)
		[ "${bare_b:-0}" -gt 0 ] && pass "the injected process's sampled heap: $bare_b bytes" ||
			fail "the injected process's report: $(curl -s "http://$B/report?pid=$bare" | head -c 300)"
		la_wait_for "$T/b.err" "^dwleak: not tracing pid $static \(dwl_srv_static, --comm dwl_srv_static\): the preload library cannot be loaded into it \(.*static" 5 &&
			pass "a static program is skipped, and the log says why: $(grep -m1 "not tracing pid $static " "$T/b.err")" ||
			fail "pid $static: $(grep "$static" "$T/b.err")"
		curl -s "http://$B/report?pid=$static" | grep -q "is not traced: the preload library cannot be loaded into it" ||
			fail "/report of the skipped pid: $(curl -s "http://$B/report?pid=$static")"
		sum_b=0 sum_o=0
		for p in $one $two $bare; do
			sum_b=$((sum_b + $(la_total "http://$B/report?pid=$p" outstanding_bytes)))
			sum_o=$((sum_o + $(la_total "http://$B/report?pid=$p" outstanding_allocations)))
		done
		go tool pprof -raw "http://$B/debug/pprof/heap" > "$T/raw.txt" 2> "$T/pprof.err"
		read -r objs byts labels <<< "$("$LT_PYTHON" -c '
import re, sys
objs = byts = 0
labels = set()
samples = False
for line in open(sys.argv[1]):
    if line.startswith("Samples:"):
        samples = True
        continue
    if line.startswith("Locations"):
        break
    m = re.match(r"^\s+(\d+)\s+(\d+):", line)
    if samples and m:
        objs += int(m.group(1)); byts += int(m.group(2))
    for k, v in re.findall(r"(\w+):\[([^\]]*)\]", line):
        labels.add("%s=%s" % (k, v))
print(objs, byts, ";".join(sorted(labels)))' "$T/raw.txt")"
		if [ "$byts" = "$sum_b" ] && [ "$objs" = "$sum_o" ] && [ "$sum_b" -gt 0 ]; then
			pass "go tool pprof -raw: inuse_space $byts, inuse_objects $objs: the JSON reports' totals"
		else
			fail "go tool pprof -raw: $objs objects, $byts bytes; the reports: $sum_o, $sum_b ($(tail -n 2 "$T/pprof.err"))"
		fi
		[[ $labels == *"comm=dwl_srv_bare"*"comm=dwl_srv_one"*"comm=dwl_srv_two"* ]] &&
			[[ $labels == *"pid=$one"* && $labels == *"pid=$two"* && $labels == *"pid=$bare"* ]] ||
			fail "labels: $labels"
		peak=$(go tool pprof -raw "http://$B/debug/pprof/heap?peak=1&pid=$one" 2> /dev/null |
			awk '/^Samples:/ { s = 1; next } /^Locations/ { s = 0 } s && /^ +[0-9]+ +[0-9]+:/ { b += $2 } END { print b + 0 }')
		now=$(la_total "http://$B/report?pid=$one" outstanding_bytes)
		[ "$peak" = "$now" ] && pass "?peak=1: the heap at its peak, $peak bytes (it only grew)" ||
			fail "?peak=1 gave $peak bytes, now $now"
		code=$(curl -s -X POST -o "$T/refused" -w '%{http_code}' "http://$B/leak-check?pid=$one")
		[ "$code" = 409 ] && grep -q 'is sampled (--sample-bytes 524288): a leak check must see every block, and the agent keeps no index' "$T/refused" &&
			pass "POST /leak-check on a sampled process: 409, saying why" || fail "leak check when sampled: $code $(cat "$T/refused")"
	fi
fi

# --- c. a non-loopback listen without a token ---
if lt_part c; then
	if "$DWLEAK" agent --comm nothing --listen 0.0.0.0:0 > /dev/null 2> "$T/c.err"; then
		fail "a non-loopback --listen without a token was not refused"
	else
		rc=$?
		[ $rc = 2 ] && grep -q 'not a loopback address' "$T/c.err" &&
			pass "a non-loopback --listen without a token: exit 2, $(grep -v '^dwleak: agent:' "$T/c.err" | tail -n 1)" ||
			fail "exit $rc: $(cat "$T/c.err")"
	fi
fi

# --- d. SIGHUP ---
if lt_part d; then
	la_cgroups
	CG=$V2/dwleak-agent-hup-$$
	la_mkcg "$CG"
	la_start agent_d "$T/d.err" --cgroup "$CG" --listen 127.0.0.1:0 || fail_now "the agent did not start"
	la_service moved dwl_srv_moved --iterations 0
	sleep 1
	grep -q "pid $moved " "$T/d.err" && fail "pid $moved was traced before it was in the cgroup"
	echo "$moved" > "$CG/cgroup.procs"
	kill -HUP "$agent_d"
	la_wait_for "$T/d.err" "^dwleak: tracing pid $moved " 5 &&
		pass "SIGHUP: pid $moved, moved into $CG after its exec, is traced" ||
		fail "SIGHUP did not pick up pid $moved: $(cat "$T/d.err")"
	kill -TERM "$agent_d"
	lt_wait "$agent_d" 30 || fail "agent d exited $?"
fi

# --- e. SIGTERM: the targets run on untouched ---
if lt_part e; then
	before_one=$(grep -c '^alive' "$T/dwl_srv_one.out")
	kill -TERM "$agent_b"
	lt_wait "$agent_b" 30
	rc=$?
	[ $rc = 0 ] && grep -q '^dwleak: agent: detached from' "$T/b.err" && pass "SIGTERM: the agent exited 0" ||
		fail "SIGTERM: exit $rc: $(tail -n 3 "$T/b.err")"
	sleep 2.2
	for p in $one $two; do
		st=$(awk '/^State:/ { print $2 }' "/proc/$p/status" 2> /dev/null)
		tr=$(awk '/^TracerPid:/ { print $2 }' "/proc/$p/status" 2> /dev/null)
		[ -n "$st" ] && [ "$st" != T ] && [ "$st" != t ] && [ "$tr" = 0 ] ||
			fail "pid $p after the agent's SIGTERM: state '$st', tracer '$tr'"
	done
	after_one=$(grep -c '^alive' "$T/dwl_srv_one.out")
	[ "$after_one" -ge $((before_one + 2)) ] &&
		pass "after SIGTERM the traced processes run on: their 'alive' lines went from $before_one to $after_one" ||
		fail "the service's alive lines: $before_one before, $after_one after"
fi
# --- f. --max-stacks ---
if lt_part f; then
	la_start agent_f "$T/f.err" --comm dwl_srv_stacks --sample-bytes 0 --max-stacks 10 --listen 127.0.0.1:0 ||
		fail_now "the agent did not start"
	# 40 stacks (64 B each) first, then grow_here last: the most recently grown
	la_service st dwl_srv_stacks --delay-ms 1500 --stacks 40 --grow-bytes 1000 --iterations 3 --interval-ms 50
	la_wait_for "$T/dwl_srv_stacks.out" '^quiet' 10 || fail "the service never went quiet"
	sleep 0.5
	curl -sf "http://$LA_ADDR/report?pid=$st" > "$T/f.json" || fail "GET /report?pid=$st"
	mb=$(la_metric "$LA_ADDR" dwleak_outstanding_bytes "$st")
	me=$(la_metric "$LA_ADDR" dwleak_evicted_stacks "$st")
	lt_check "$T/f.json" "$mb" "$me" << 'PY'
ev = [s for s in r["stacks"] if names(s) == ["[evicted]"]]
if len(r["stacks"]) != 11 or len(ev) != 1:
    fail("%d stacks, %d [evicted], want 11 and 1" % (len(r["stacks"]), len(ev)))
else:
    e = ev[0]
    g = only_stack_with("grow_here")
    if not g:
        fail("grow_here, which grew last, was folded")
    total = sum(s["bytes"] for s in r["stacks"])
    if total != r["totals"]["outstanding_bytes"] or str(total) != ARGS[0]:
        fail("totals %d, stacks %d, /metrics %s" % (r["totals"]["outstanding_bytes"], total, ARGS[0]))
    elif e["bytes"] != 64 * e["allocations"] or e["allocations"] < 30 or r["totals"]["stacks"] < 40 or ARGS[1] != str(r["totals"]["stacks"] - 10):
        fail("[evicted]: %d B in %d, stacks %d, /metrics evicted %s" % (e["bytes"], e["allocations"], r["totals"]["stacks"], ARGS[1]))
    else:
        ok("--max-stacks 10: 10 stacks and [evicted] holding %d B of %d more; totals %d B, as /metrics says" % (
            e["bytes"], r["totals"]["stacks"] - 10, total))
PY
	kill -TERM "$agent_f"
	lt_wait "$agent_f" 30 || fail "agent f exited $?"
fi
# --- g. sampled, with --leak-check-every: every block from the index ---
if lt_part g; then
	la_start agent_g "$T/g.err" --comm dwl_srv_sidx --leak-check-every 2 --listen 127.0.0.1:0 ||
		fail_now "the agent did not start"
	la_service gsvc dwl_srv_sidx --delay-ms 1500 --grow-bytes 10000 --iterations 20 --interval-ms 5
	la_wait_for "$T/g.err" "^dwleak: tracing pid $gsvc " 5 || fail "pid $gsvc not traced: $(cat "$T/g.err")"
	la_wait_for "$T/dwl_srv_sidx.out" '^quiet' 10 || fail "the service never went quiet"
	code=$(curl -s -X POST -o "$T/gcheck.json" -w '%{http_code}' "http://$LA_ADDR/leak-check?pid=$gsvc")
	lt_check "$T/gcheck.json" "$code" << 'PY'
lc = r["totals"].get("leak_check") if ARGS[0] == "200" else None
if not lc:
    fail("POST /leak-check (sampled): HTTP %s, no totals.leak_check" % ARGS[0])
elif lc.get("kinds_exact") is not True or r.get("sample_bytes") != 524288:
    fail("sampled check: kinds_exact %s, sample_bytes %s" % (lc.get("kinds_exact"), r.get("sample_bytes")))
elif lc["reachable"]["bytes"] < 200000 or lc["definitely_lost"]["bytes"]:
    fail("sampled leak check: %s" % lc)
else:
    ok("POST /leak-check, sampled: %d B in %d blocks reachable, none lost (every block, exact), %.2f ms paused" % (
        lc["reachable"]["bytes"], lc["reachable"]["allocations"], lc["pause_ms"]))
PY
	sleep 2.5
	checks=$(curl -sf "http://$LA_ADDR/metrics" | sed -n 's/^dwleak_leak_check_pause_seconds_count //p')
	[ "${checks:-0}" -ge 2 ] && pass "sampled --leak-check-every 2: $checks checks' pauses in /metrics" ||
		fail "sampled --leak-check-every 2: ${checks:-no} pauses counted"
	kill -TERM "$agent_g"
	lt_wait "$agent_g" 30 || fail "agent g exited $?"
fi
check_finish "agent serve: all checks passed"
