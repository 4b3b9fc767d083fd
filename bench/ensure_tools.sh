# Sourced by the bench scripts: make sure the tools compared against are
# installed.  Benchmarks do not run in CI, so instead of .ci/deps.sh this
# installs what is missing itself (Debian: apt-get install -y), once per
# run; a tool that cannot be had is skipped with a note by the caller.
#
# ensure_tool CMD PACKAGE: 0 if CMD is (now) on PATH.
ensure_tool() {
	local cmd=$1 pkg=$2
	command -v "$cmd" > /dev/null && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null && [ -z "${BENCH_NO_INSTALL:-}" ]; then
		echo "bench: $cmd is missing, installing Debian package $pkg" >&2
		if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" > /dev/null 2>&1; then
			apt-get update -q > /dev/null 2>&1
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" > /dev/null 2>&1
		fi
	fi
	command -v "$cmd" > /dev/null
}

# The bench programs, built on demand (the Makefile builds them too).
ensure_bench_programs() {
	mkdir -p "$BUILD/bench"
	if [ ! -x "$BUILD/bench/malloc_bench" ] || [ "$ROOT/bench/malloc_bench.c" -nt "$BUILD/bench/malloc_bench" ]; then
		gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$BUILD/bench/malloc_bench" "$ROOT/bench/malloc_bench.c" || return 1
	fi
	if [ ! -x "$BUILD/bench/cxx_workload" ] || [ "$ROOT/bench/cxx_workload.cpp" -nt "$BUILD/bench/cxx_workload" ]; then
		g++ -O2 -g -o "$BUILD/bench/cxx_workload" "$ROOT/bench/cxx_workload.cpp" || return 1
	fi
	# optional: the own-floor, exact-minimum and op-cost rows are skipped
	# with a note without them
	[ -f "$BUILD/vmlinux.h" ] || bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$BUILD/vmlinux.h"
	for p in uprobe_floor op_cost; do
		if [ ! -x "$BUILD/bench/$p" ] || [ "$ROOT/bench/$p.c" -nt "$BUILD/bench/$p" ] ||
			[ "$ROOT/bench/$p.bpf.c" -nt "$BUILD/bench/$p.bpf.o" ]; then
			clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I "$BUILD" -I "$ROOT/bench" \
				-c "$ROOT/bench/$p.bpf.c" -o "$BUILD/bench/$p.bpf.o" &&
				gcc -O2 -I "$ROOT/bpf" -I "$ROOT/target" -I "$ROOT/base" -I "$ROOT/bench" -o "$BUILD/bench/$p" \
					"$ROOT/bench/$p.c" "$ROOT/bpf/attach.c" "$ROOT/target/elf_symbols.c" \
					$(pkg-config --cflags --libs libbpf libelf) -lpthread ||
				rm -f "$BUILD/bench/$p"
		fi
	done
	if [ ! -x "$BUILD/bench/walltime" ] || [ "$ROOT/bench/walltime.c" -nt "$BUILD/bench/walltime" ]; then
		gcc -O2 -o "$BUILD/bench/walltime" "$ROOT/bench/walltime.c" || return 1
	fi
}

# own_floor_cmd [min|min-session [CMD...]]: the command prefix that runs a program
# under BPF programs at every probe site dwleak --stats lists for CMD
# (default /bin/true: libc's allocation functions at their entry and return,
# free where dwleak probes it), attached the way dwleak --stats says it
# attaches its own (uprobe_multi links, sessions or perf events): empty
# programs, or with "min" the exact-accounting minimum of
# bench/uprobe_floor.bpf.c (min-session: the same as one uprobe session).  Prints nothing (reason on stderr) when it can't.
own_floor_cmd() {
	local want=${1:-} stats how mode probes
	shift || true
	[ $# -gt 0 ] || set -- /bin/true
	[ -x "$BUILD/bench/uprobe_floor" ] || { echo "build/bench/uprobe_floor could not be built (clang, libbpf-dev, libelf-dev)" >&2; return 1; }
	[ -x "$DWLEAK" ] || { echo "no dwleak to ask for its probe sites" >&2; return 1; }
	# the floor is the uprobe path's: the sites dwleak probes without the
	# preload library (with it, --stats lists none)
	stats=$("$DWLEAK" --no-preload --stats -o /dev/null -- "$@" 2>&1 > /dev/null)
	# "probe NAME in LIB at +OFF (entry and return|entry only): why"
	probes=$(sed -n 's/^dwleak: stats: probe \([^ ]*\) in \(.*\) at +\([0-9]*\) (\(entry and return\|entry only\)):.*/\2:\1:\3:\4/p' <<< "$stats" |
		sed 's/:entry and return$/:call/; s/:entry only$/:entry/' | tr '\n' ' ')
	[ -n "$probes" ] || { echo "dwleak --stats did not list its probe sites" >&2; return 1; }
	how=$(sed -n 's/^dwleak: stats: allocator calls probed by \([a-z_-]*\).*/\1/p' <<< "$stats")
	case $how in
	uprobe) mode=session ;;
	uprobe_multi) mode=multi ;;
	perf-event) mode=perf ;;
	*) echo "dwleak --stats did not say how it probes allocator calls" >&2; return 1 ;;
	esac
	if [ "$want" = min ] || [ "$want" = min-session ]; then
		[ "$mode" = perf ] && { echo "the exact-accounting minimum needs uprobe_multi links" >&2; return 1; }
		[ "$want" = min-session ] && grep -q "no uprobe sessions in this kernel" <<< "$stats" &&
			{ echo "this kernel has no uprobe sessions" >&2; return 1; }
		mode=$want
	fi
	echo "$BUILD/bench/uprobe_floor $BUILD/bench/uprobe_floor.bpf.o $mode $probes--"
}

# One-line description of the machine.
machine_line() {
	echo "$(uname -r); $(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)); glibc $(ldd --version | awk 'NR == 1 { print $NF }')"
}
