#!/bin/bash
# Issue 7's benchmark batch, in one run on this machine, written to
# bench/results.md (RESULTS):
#   1. micro   bench/run_malloc_bench.sh  ns per malloc(64)+free pair
#   2. macro   bench/run_macro_bench.sh   end-to-end slowdown, python3.11 and C++
#   3. attach  bench/run_attach_bench.sh  attach latency, BPF map memory
#   4. stacks  bench/run_stack_bench.sh   frames reported for seed_O2's leak
#   5. ops     bench/run_op_cost.sh       what each BPF operation costs in a uprobe
#   6. leakcheck bench/run_leakcheck_bench.sh  the leak check's pause next to
#              LeakSanitizer's and memcheck's (issue 15)
#   7. inject  bench/run_inject_bench.sh  a routed process idle vs bare, the injection's latency
#   8. redis   bench/run_redis_bench.sh   redis under load, each way into a running service
#              (injected, uprobes, heaptrack -p), req/s x bare (issue 22)
#   9. agent   bench/run_agent_bench.sh   dwleak agent: a traced workload's cost,
#              200 processes idle, a scrape of 10,000 stacks, a 10-minute soak
#              (issue 23)
#  10. walk    bench/run_walk_bench.sh    the preload library's stack walk in the
#              process, ns per walk (issue 24)
# Environment: SECTIONS ("micro macro attach stacks ops leakcheck inject redis agent walk"), RESULTS (default
# ROOT/bench/results.md), and each script's own (REPS, ... : see them).
# Needs root; installs heaptrack, valgrind, bpftrace with apt-get when
# missing.  Takes about an hour on a 2-CPU VM (the agent's section 40 minutes).
set -uo pipefail

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
RESULTS=${RESULTS:-$ROOT/bench/results.md}
SECTIONS=${SECTIONS:-micro macro attach stacks ops leakcheck inject redis agent walk}
export ROOT BUILD
. "$ROOT/bench/ensure_tools.sh"

if [ "$(id -u)" != 0 ]; then
	echo "run_all: needs root (BPF)" >&2
	exit 2
fi
ensure_bench_programs || exit 2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-all.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
status=0
for s in $SECTIONS; do
	case $s in
	micro) script=run_malloc_bench.sh ;;
	macro) script=run_macro_bench.sh ;;
	attach) script=run_attach_bench.sh ;;
	stacks) script=run_stack_bench.sh ;;
	ops) script=run_op_cost.sh ;;
	leakcheck) script=run_leakcheck_bench.sh ;;
	inject) script=run_inject_bench.sh ;;
	redis) script=run_redis_bench.sh ;;
	agent) script=run_agent_bench.sh ;;
	walk) script=run_walk_bench.sh ;;
	*) echo "run_all: unknown section $s" >&2; exit 2 ;;
	esac
	echo "run_all: $s ($script)" >&2
	if ! OUT=$tmp/$s.md bash "$ROOT/bench/$script" > /dev/null; then
		echo "run_all: $script failed" >&2
		printf '### %s\n\n%s failed (exit status %s); see its output.\n' "$s" "$script" "$?" > "$tmp/$s.md"
		status=1
	fi
done

dw_version=$("$ROOT/dwleak" --version 2>/dev/null | head -n 1)
commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null)
{
	echo "# dwleak benchmarks (issue 7)"
	echo
	echo "Written by \`make bench\` (bench/run_all.sh); all numbers from one run on one machine, tools alternating. Absolute numbers vary between machines; the ratios are what count."
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- kernel: $(uname -r)"
	echo "- CPU: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs"
	echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "- OS: $(. /etc/os-release && echo "$PRETTY_NAME"); glibc $(ldd --version | awk 'NR == 1 { print $NF }')"
	echo "- dwleak: ${dw_version:-?} (tree ${commit:-?})"
	echo "- tools: $(bpftrace --version 2>/dev/null | head -n 1 || echo 'bpftrace missing'); heaptrack $(dpkg-query -W -f '${Version}' heaptrack 2>/dev/null || echo missing); valgrind $(valgrind --version 2>/dev/null | sed 's/valgrind-//' || echo missing); $(/usr/bin/python3.11 --version 2>&1); $(g++ --version | head -n 1)"
	echo "- uprobe traps are slow on this VM (microseconds each, a single-stepped one much more): compare the floor rows (traps only) with the tools"
	echo "- the whole batch took $((SECONDS - start)) s"
	for s in $SECTIONS; do
		echo
		cat "$tmp/$s.md"
	done
} > "$tmp/results.md"
cp "$tmp/results.md" "$RESULTS"
echo "run_all: wrote $RESULTS ($((SECONDS - start)) s)" >&2
exit $status
