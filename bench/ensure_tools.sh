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
	if [ ! -x "$BUILD/bench/uprobe_floor" ] || [ "$ROOT/bench/uprobe_floor.c" -nt "$BUILD/bench/uprobe_floor" ] ||
		[ "$ROOT/bench/uprobe_floor.bpf.c" -nt "$BUILD/bench/uprobe_floor.bpf.o" ]; then
		# optional: the own-floor rows are skipped with a note without it
		clang -O2 -g -target bpf -I/usr/include/$(gcc -dumpmachine) -c "$ROOT/bench/uprobe_floor.bpf.c" \
			-o "$BUILD/bench/uprobe_floor.bpf.o" &&
			gcc -O2 -o "$BUILD/bench/uprobe_floor" "$ROOT/bench/uprobe_floor.c" \
				$(pkg-config --cflags --libs libbpf) ||
			rm -f "$BUILD/bench/uprobe_floor"
	fi
	if [ ! -x "$BUILD/bench/walltime" ] || [ "$ROOT/bench/walltime.c" -nt "$BUILD/bench/walltime" ]; then
		gcc -O2 -o "$BUILD/bench/walltime" "$ROOT/bench/walltime.c" || return 1
	fi
}

# own_floor_cmd: the command prefix that runs a program under empty BPF
# programs at dwleak's own probe sites (malloc entry, malloc return, free at
# the offset dwleak --stats reports), or nothing (reason on stderr).
own_floor_cmd() {
	local libc off
	[ -x "$BUILD/bench/uprobe_floor" ] || { echo "build/bench/uprobe_floor could not be built (clang, libbpf-dev)" >&2; return 1; }
	[ -x "$DWLEAK" ] || { echo "no dwleak to ask for its probe sites" >&2; return 1; }
	read -r libc off < <("$DWLEAK" --stats -o /dev/null -- /bin/true 2>&1 |
		sed -n 's/^dwleak: stats: probe free in \(.*\) at +\([0-9]*\):.*/\1 \2/p' | head -n 1)
	[ -n "$off" ] || { echo "dwleak --stats did not say where it probes free" >&2; return 1; }
	echo "$BUILD/bench/uprobe_floor $BUILD/bench/uprobe_floor.bpf.o $libc $off --"
}

# One-line description of the machine.
machine_line() {
	echo "$(uname -r); $(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)); glibc $(ldd --version | awk 'NR == 1 { print $NF }')"
}
