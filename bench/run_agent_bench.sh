#!/bin/bash
# dwleak agent's benchmarks (issue 23), each against its goal:
#   macro    the agent tracing a workload it found by name, started with the
#            preload library, sampled (the agent's default): python3.11
#            running bench/py_workload.py and bench/cxx_workload, each sized
#            to run ~WORKLOAD_S (60) seconds bare; bare vs library + agent,
#            REPS (3) runs alternating, wall of the workload's command
#            (goal <= 1.02x bare)
#   procs    NPROCS (200) traced processes at once: a pre-forking server of
#            our own (testdata/agent_service --prefork), with the library;
#            how long the agent takes to trace them all, then its CPU over
#            IDLE_S (60) seconds while they idle (goal <= 2% of one core),
#            and over IDLE_S more with /metrics scraped every 15 s, as
#            Prometheus would
#   scrape   a process with STACKS (10,000) stacks of its own (agent_service --stacks,
#            exact: every one kept): GET /debug/pprof/heap and /metrics, wall
#            (curl's time_total) and the agent's CPU per scrape, medians of
#            SCRAPES (11) (goal <= 50 ms)
#   soak     SOAK_S (600) seconds with a process of the target's name
#            starting every second and ending 3 s later, /metrics scraped
#            every 5 s and /debug/pprof/heap every 15 s; the agent's RSS and
#            open fds sampled every 10 s (goal: flat)
# Environment: AGENT_SECTIONS ("macro procs scrape soak"), REPS, WORKLOAD_S,
# NPROCS, IDLE_S, STACKS (10000), SCRAPES, SOAK_S, OUT (default
# BUILD/bench/agent_bench.md), DWLEAK (the release build).  Needs root.
# Takes about 40 minutes (tests/agent_bench_smoke.sh runs it in seconds).
set -uo pipefail

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$ROOT/dwleak}
PYTHON=${PYTHON:-/usr/bin/python3.11}
SECTIONS=${AGENT_SECTIONS:-macro procs scrape soak}
REPS=${REPS:-3}
WORKLOAD_S=${WORKLOAD_S:-60}
NPROCS=${NPROCS:-200}
IDLE_S=${IDLE_S:-60}
STACKS=${STACKS:-10000}
SCRAPES=${SCRAPES:-11}
SOAK_S=${SOAK_S:-600}
OUT=${OUT:-$BUILD/bench/agent_bench.md}
SERVICE=$BUILD/testdata/agent_service
. "$ROOT/bench/ensure_tools.sh"

if [ "$(id -u)" != 0 ]; then
	echo "run_agent_bench: needs root (BPF)" >&2
	exit 2
fi
ensure_bench_programs || exit 2
[ -x "$DWLEAK" ] && [ -x "$SERVICE" ] || { echo "run_agent_bench: make all testdata first" >&2; exit 2; }
PRELOAD_LIB=$("$DWLEAK" preload) || exit 2
WALLTIME=$BUILD/bench/walltime
TICK=$(getconf CLK_TCK)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agent-bench.XXXXXX")
AGENT=
cleanup() {
	[ -n "$AGENT" ] && kill -TERM "$AGENT" 2> /dev/null && wait "$AGENT" 2> /dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
notes=()
start=$SECONDS

# agent_start ERR ARGS...: the agent in the background, AGENT its pid,
# ADDR where it listens
agent_start() {
	local err=$1 i
	shift
	"$DWLEAK" agent "$@" --listen 127.0.0.1:0 2> "$err" &
	AGENT=$!
	for i in $(seq 300); do
		ADDR=$(sed -n 's/^dwleak: agent listening on \([^ ]*\).*/\1/p' "$err")
		[ -n "$ADDR" ] && return 0
		sleep 0.1
	done
	echo "run_agent_bench: the agent did not start: $(cat "$err")" >&2
	return 1
}
agent_stop() {
	kill -TERM "$AGENT" 2> /dev/null
	wait "$AGENT" 2> /dev/null
	AGENT=
}
# cpu_ticks PID: utime + stime
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

: > "$tmp/out.md"
echo "### Agent (dwleak agent, issue 23)" >> "$tmp/out.md"
echo >> "$tmp/out.md"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(machine_line); load average at the start $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared)." >> "$tmp/out.md"
echo >> "$tmp/out.md"

# --- macro ---
if [[ " $SECTIONS " == *" macro "* ]]; then
	cp "$BUILD/bench/cxx_workload" "$tmp/cxx_workload"
	# the scale that runs WORKLOAD_S seconds bare, from a short run
	calib() {
		local t
		"$WALLTIME" "$tmp/wall" "$@" > /dev/null 2>&1
		t=$(cat "$tmp/wall")
		echo "$t"
	}
	t=$(calib "$PYTHON" "$ROOT/bench/py_workload.py" 20)
	PY_SCALE=$(awk -v t="$t" -v w="$WORKLOAD_S" 'BEGIN { printf "%d", 20 * w / t }')
	t=$(calib "$tmp/cxx_workload" 10)
	CXX_SCALE=$(awk -v t="$t" -v w="$WORKLOAD_S" 'BEGIN { printf "%d", 10 * w / t }')
	ensure_tool /usr/bin/time time > /dev/null
	if [ -x /usr/bin/time ]; then
		TIMER=(/usr/bin/time -f "%e %U %S" -o "$tmp/time")
	else
		notes+=("no /usr/bin/time (Debian package time): the workloads' CPU is not measured")
		TIMER=("$WALLTIME" "$tmp/time")
	fi
	: > "$tmp/macro"
	for ((r = 1; r <= REPS; r++)); do
		for wl in python c++; do
			case $wl in
			python) cmd=("$PYTHON" "$ROOT/bench/py_workload.py" "$PY_SCALE"); comm=python3.11 ;;
			c++) cmd=("$tmp/cxx_workload" "$CXX_SCALE"); comm=cxx_workload ;;
			esac
			for tool in bare agent; do
				# wall, and the workload's own CPU (user + system), which a
				# shared machine's waits do not inflate
				if [ $tool = agent ]; then
					agent_start "$tmp/macro.err" --comm "$comm" || continue
					LD_PRELOAD=$PRELOAD_LIB "${TIMER[@]}" "${cmd[@]}" > "$tmp/run.out" 2>&1
					grep -q "^dwleak: tracing pid .*($comm, --comm $comm) at its preload library's sites" "$tmp/macro.err" ||
						notes+=("$wl rep $r: the agent did not say it traced the workload at its sites")
					agent_stop
				else
					"${TIMER[@]}" "${cmd[@]}" > "$tmp/run.out" 2>&1
				fi
				prog=$(sed -n 's/^[a-z]*_workload: .*elapsed_s=\([0-9.]*\).*/\1/p' "$tmp/run.out")
				read -r wall user sys < "$tmp/time"
				echo "$wl $tool $wall ${prog:-0} $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" >> "$tmp/macro"
				printf 'agent macro: %-6s rep %d/%d %-5s wall %s s\n' "$wl" "$r" "$REPS" "$tool" "$wall" >&2
			done
		done
	done
	{
		echo "#### The agent tracing a workload, sampled at the preload library's sites"
		echo
		echo "python: \`$PYTHON bench/py_workload.py $PY_SCALE\`; c++: \`cxx_workload $CXX_SCALE\`; each sized to run ~$WORKLOAD_S s bare; $REPS runs each, alternating. agent = the workload started with \`LD_PRELOAD=\$(dwleak preload)\` while \`dwleak agent --comm NAME\` runs (its default \`--sample-bytes 524288\`), which finds it at its exec and traces it at the library's sites; wall = the workload's command, start to exit; program = the time the workload measures itself; CPU = its user + system time (GNU time), which the waits of a shared machine do not inflate."
		echo
		python3 - "$tmp/macro" "$REPS" << 'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    wl, tool, w, p = f[:4]
    c = float(f[4]) if len(f) > 4 and float(f[4]) > 0 else float("nan")
    rows.setdefault((wl, tool), []).append((float(w), float(p), c))
print("| workload | bare wall s (median; min-max) | agent wall s (median; min-max) | x bare (wall) | x bare (program) | x bare (the workload's CPU) | goal <= 1.02x (wall) |")
print("|---|---:|---:|---:|---:|---:|---|")
for wl in ("python", "c++"):
    b, a = rows.get((wl, "bare")), rows.get((wl, "agent"))
    if not b or not a:
        print(f"| {wl} | failed | | | | | |")
        continue
    med = lambda v, i: statistics.median(x[i] for x in v)
    rng = lambda v: f"{min(x[0] for x in v):.2f}-{max(x[0] for x in v):.2f}"
    x = med(a, 0) / med(b, 0)
    print(f"| {wl} | {med(b, 0):.2f}; {rng(b)} | {med(a, 0):.2f}; {rng(a)} | {x:.3f} | {med(a, 1) / med(b, 1):.3f} | "
          f"{med(a, 2) / med(b, 2):.3f} | {'met' if x <= 1.02 else 'NOT met'} |")
EOF
		echo
	} >> "$tmp/out.md"
fi

# --- procs ---
if [[ " $SECTIONS " == *" procs "* ]]; then
	cp "$SERVICE" "$tmp/dwl_bench_srv"
	LD_PRELOAD=$PRELOAD_LIB "$tmp/dwl_bench_srv" --prefork $((NPROCS - 1)) --iterations 10 > "$tmp/srv.out" 2>&1 &
	srv=$!
	sleep 2
	t0=$(date +%s.%N)
	if agent_start "$tmp/procs.err" --comm dwl_bench_srv; then
		n=0
		for i in $(seq 1200); do
			n=$(curl -s "http://$ADDR/metrics" | sed -n 's/^dwleak_traced_processes //p')
			[ "$n" = "$NPROCS" ] && break
			sleep 0.1
		done
		t_all=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
		rss=$(awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$AGENT/status")
		sleep 2
		c0=$(cpu_ticks "$AGENT")
		sleep "$IDLE_S"
		c1=$(cpu_ticks "$AGENT")
		idle=$(awk -v d=$((c1 - c0)) -v t="$TICK" -v s="$IDLE_S" 'BEGIN { printf "%.2f", 100 * d / t / s }')
		c0=$(cpu_ticks "$AGENT")
		scrapes=0
		end=$((SECONDS + IDLE_S))
		while [ $SECONDS -lt $end ]; do
			curl -s -o /dev/null "http://$ADDR/metrics" && scrapes=$((scrapes + 1))
			sleep 15
		done
		c1=$(cpu_ticks "$AGENT")
		scraped=$(awk -v d=$((c1 - c0)) -v t="$TICK" -v s="$IDLE_S" 'BEGIN { printf "%.2f", 100 * d / t / s }')
		metrics_ms=$(for i in 1 2 3 4 5; do curl -s -o /dev/null -w '%{time_total}\n' "http://$ADDR/metrics"; done |
			median | awk '{ printf "%.1f", $1 * 1000 }')
		agent_stop
		{
			echo "#### $NPROCS traced processes at once"
			echo
			echo "A pre-forking server of our own (\`agent_service --prefork $((NPROCS - 1))\`, with the library, its workers idle after 10 allocations each), running before the agent starts: \`dwleak agent --comm dwl_bench_srv\`."
			echo
			echo "| measure | value | goal |"
			echo "|---|---:|---|"
			echo "| processes traced | $n of $NPROCS | |"
			echo "| from the agent's start until all are traced | $t_all s | |"
			echo "| the agent's CPU while they idle, $IDLE_S s | $idle% of one core | <= 2%: $(awk -v v="$idle" 'BEGIN { print (v <= 2 ? "met" : "NOT met") }') |"
			echo "| the same with /metrics scraped every 15 s ($scrapes scrapes) | $scraped% of one core | |"
			echo "| one /metrics scrape of $NPROCS processes (wall, median of 5) | $metrics_ms ms | |"
			echo "| the agent's RSS (BPF ring buffers and maps included) | $rss MiB | |"
			echo
		} >> "$tmp/out.md"
	fi
	kill "$srv" 2> /dev/null # its workers end with it (agent_service)
	wait "$srv" 2> /dev/null
fi

# --- scrape ---
if [[ " $SECTIONS " == *" scrape "* ]]; then
	cp "$SERVICE" "$tmp/dwl_stacks"
	if agent_start "$tmp/scrape.err" --comm dwl_stacks --sample-bytes 0; then
		LD_PRELOAD=$PRELOAD_LIB "$tmp/dwl_stacks" --delay-ms 1500 --stacks "$STACKS" --iterations 1 > "$tmp/stacks.out" 2>&1 &
		st=$!
		for i in $(seq 300); do grep -q '^quiet' "$tmp/stacks.out" && break; sleep 0.1; done
		sleep 1
		nst=$(curl -s "http://$ADDR/metrics" | sed -n "s/^dwleak_outstanding_stacks{pid=\"$st\",[^}]*} //p")
		: > "$tmp/heap_wall"
		: > "$tmp/heap_cpu"
		: > "$tmp/metrics_wall"
		for ((i = 0; i < SCRAPES; i++)); do
			c0=$(cpu_ticks "$AGENT")
			curl -s -o "$tmp/heap.pb.gz" -w '%{time_total}\n' "http://$ADDR/debug/pprof/heap" >> "$tmp/heap_wall"
			c1=$(cpu_ticks "$AGENT")
			echo $((c1 - c0)) >> "$tmp/heap_cpu"
			curl -s -o /dev/null -w '%{time_total}\n' "http://$ADDR/metrics" >> "$tmp/metrics_wall"
		done
		heap_ms=$(median < "$tmp/heap_wall" | awk '{ printf "%.1f", $1 * 1000 }')
		heap_cpu=$(awk -v t="$TICK" '{ s += $1 } END { printf "%.1f", 1000 * s / t / NR }' "$tmp/heap_cpu")
		metrics_ms=$(median < "$tmp/metrics_wall" | awk '{ printf "%.1f", $1 * 1000 }')
		size=$(wc -c < "$tmp/heap.pb.gz")
		agent_stop
		kill "$st" 2> /dev/null
		{
			echo "#### A scrape of $STACKS stacks"
			echo
			echo "\`agent_service --stacks $STACKS\` (64 B kept from each of $STACKS stacks 17 frames deep, every one traced: \`--sample-bytes 0\`); the live agent names every frame and encodes the profile for each scrape. $SCRAPES scrapes; CPU = the agent's utime + stime across each scrape (clock ticks of $((1000 / TICK)) ms, so a mean)."
			echo
			echo "| measure | value | goal |"
			echo "|---|---:|---|"
			echo "| stacks of the process | ${nst:-?} | |"
			echo "| GET /debug/pprof/heap, wall (median) | $heap_ms ms | <= 50 ms: $(awk -v v="$heap_ms" 'BEGIN { print (v <= 50 ? "met" : "NOT met") }') |"
			echo "| the agent's CPU per /debug/pprof/heap scrape (mean) | $heap_cpu ms | |"
			echo "| its size, gzip'd | $size bytes | |"
			echo "| GET /metrics, wall (median) | $metrics_ms ms | |"
			echo
		} >> "$tmp/out.md"
	fi
fi

# --- soak ---
if [[ " $SECTIONS " == *" soak "* ]]; then
	cp "$SERVICE" "$tmp/dwl_soak"
	if agent_start "$tmp/soak.err" --comm dwl_soak; then
		: > "$tmp/soak"
		started=0
		c0=$(cpu_ticks "$AGENT")
		t_end=$((SECONDS + SOAK_S))
		next_sample=$SECONDS
		i=0
		while [ $SECONDS -lt $t_end ]; do
			LD_PRELOAD=$PRELOAD_LIB timeout 3 "$tmp/dwl_soak" --iterations 0 --interval-ms 20 --grow-bytes 65536 \
				> /dev/null 2>&1 &
			started=$((started + 1))
			i=$((i + 1))
			[ $((i % 5)) = 0 ] && curl -s -o /dev/null "http://$ADDR/metrics"
			[ $((i % 15)) = 0 ] && curl -s -o /dev/null "http://$ADDR/debug/pprof/heap"
			# labelled with the second it was due: the loop (a start,
			# curls, a second's sleep) may reach it a second late on a
			# loaded machine, which moves no figure
			if [ $SECONDS -ge $next_sample ]; then
				echo "$((next_sample - t_end + SOAK_S)) $(awk '/^VmRSS:/ { print $2 }' "/proc/$AGENT/status") $(ls "/proc/$AGENT/fd" | wc -l) $(curl -s "http://$ADDR/metrics" | sed -n 's/^dwleak_traced_processes //p')" >> "$tmp/soak"
				next_sample=$((next_sample + 10))
			fi
			sleep 1
		done
		c1=$(cpu_ticks "$AGENT")
		traced=$(grep -c '^dwleak: tracing pid' "$tmp/soak.err")
		ended=$(grep -c ') ended (' "$tmp/soak.err")
		agent_stop
		{
			echo "#### A soak: a process starting every second, each ending 3 s later"
			echo
			echo "$SOAK_S s; \`dwleak agent --comm dwl_soak\`; each process (with the library) keeps 64 KiB every 20 ms until \`timeout 3\` ends it; /metrics scraped every 5 s, /debug/pprof/heap every 15 s; $started processes started, $traced traced, $ended exits seen; the agent's CPU $(awk -v d=$((c1 - c0)) -v t="$TICK" -v s="$SOAK_S" 'BEGIN { printf "%.2f", 100 * d / t / s }')% of one core. Sampled every 10 s:"
			echo
			python3 - "$tmp/soak" << 'EOF'
import sys
rows = [tuple(map(int, l.split()[:3])) + (l.split()[3] if len(l.split()) > 3 else "",) for l in open(sys.argv[1]) if l.strip()]
if not rows:
    print("(no samples)")
    sys.exit()
after = [r for r in rows if r[0] >= 60] or rows
rss = [r[1] for r in after]
fds = [r[2] for r in after]
print("| time s | agent RSS KiB | open fds | processes in the books |")
print("|---:|---:|---:|---:|")
step = max(1, len(rows) // 12)
for r in rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else []):
    print(f"| {r[0]} | {r[1]:,} | {r[2]} | {r[3]} |")
print()
growth = (rss[-1] - rss[0]) / rss[0] * 100
print(f"- after the first minute: RSS {min(rss):,}-{max(rss):,} KiB (last - first {rss[-1] - rss[0]:+,} KiB, {growth:+.1f}%), "
      f"fds {min(fds)}-{max(fds)}; goal flat: {'met' if abs(growth) <= 5 and max(fds) - min(fds) <= 8 else 'NOT met'} "
      f"(within 5% and 8 fds)")
EOF
			echo
		} >> "$tmp/out.md"
	fi
fi
for n in "${notes[@]}"; do
	echo "- note: $n" >> "$tmp/out.md"
done
echo "(the agent's section took $((SECONDS - start)) s)" >> "$tmp/out.md"
mkdir -p "$(dirname "$OUT")"
cp "$tmp/out.md" "$OUT"
cat "$OUT"
