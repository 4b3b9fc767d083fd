#!/bin/bash
# Seconds of `make bench`'s agent section (bench/run_agent_bench.sh), so
# the script cannot rot between benchmark runs: every part at a toy size
# (a 1-second workload, 5 processes, 300 stacks, a 12-second soak).
# Checks that each table is written with its numbers and its goal column;
# it checks no timing (timings belong to `make bench`).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
PLAIN=${DWLEAK_PLAIN:-$ROOT/dwleak}
[ -x "$PLAIN" ] || fail_now "$PLAIN is missing (make)"
[ -x "$TESTDATA/agent_service" ] || fail_now "$TESTDATA/agent_service is missing (make testdata)"

BENCH_NO_INSTALL=1 AGENT_SECTIONS="macro procs scrape soak" REPS=1 WORKLOAD_S=1 NPROCS=5 IDLE_S=2 STACKS=300 \
	SCRAPES=2 SOAK_S=12 ROOT=$ROOT BUILD=$BUILD DWLEAK=$PLAIN OUT=$T/agent.md \
	timeout -k 5 200 bash "$ROOT/bench/run_agent_bench.sh" > "$T/out" 2> "$T/err"
rc=$?
[ $rc -eq 0 ] || { fail "run_agent_bench.sh exited $rc"; tail -n 15 "$T/err" | sed 's/^/    /'; }
"$LT_PYTHON" - "$T/agent.md" << 'PY' || fail "the tables are not what make bench writes"
import re, sys
md = open(sys.argv[1]).read()
bad = 0
def want(what, pattern):
    global bad
    if re.search(pattern, md, re.M):
        print("ok: " + what)
    else:
        print("FAIL: %s: no /%s/" % (what, pattern))
        bad += 1
want("the macro table", r"^\| python \| [0-9.]+; [0-9.]+-[0-9.]+ \| [0-9.]+; [0-9.]+-[0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| (met|NOT met) \|$")
want("the macro table's C++ row", r"^\| c\+\+ \| [0-9.]+; [0-9.]+-[0-9.]+ \| [0-9.]+; ")
want("every process traced", r"^\| processes traced \| 5 of 5 \|")
want("the idle CPU and its goal", r"^\| the agent's CPU while they idle, 2 s \| [0-9.]+% of one core \| <= 2%: (met|NOT met) \|$")
want("the scrape and its goal", r"^\| GET /debug/pprof/heap, wall \(median\) \| [0-9.]+ ms \| <= 50 ms: (met|NOT met) \|$")
want("the stacks scraped", r"^\| stacks of the process \| 30[0-9] \|")
want("the soak's samples", r"^\| 10 \| [0-9,]+ \| [0-9]+ \| [0-9]+ \|$")
want("the soak's verdict", r"^- after the first minute: RSS .*goal flat: (met|NOT met)")
sys.exit(1 if bad else 0)
PY
check_finish
