#!/bin/bash
# The seed program (main -> caller -> LeakLib::slowMemoryLeak -> new int[10],
# 40 B per iteration) on each allocator dwleak must follow (issue 5, first
# "Done means" item):
#  a. glibc (no preload), -- CMD: the allocator is glibc; the seed stack is
#     malloc, operator new(unsigned long), LeakLib::slowMemoryLeak(), ...,
#     allocator "operator new", exactly 1000 B in 25 allocations.
#  b. LD_PRELOAD=libtcmalloc.so.4 and, separately, libjemalloc.so.2, in
#     -- CMD mode (LD_PRELOAD in dwleak's environment, which the command
#     inherits) and in -p mode (the program started with LD_PRELOAD, dwleak
#     attaching during its --delay-ms): the "dwleak: tracing" line names the
#     allocator family and "(LD_PRELOAD)"; the stack holding
#     LeakLib::slowMemoryLeak() has exactly 1000 B in 25 allocations,
#     allocator "operator new" or "operator new[]", and its frames are an
#     operator new of the preloaded library (tcmalloc/jemalloc do not go
#     through malloc), LeakLib::slowMemoryLeak(), caller(), main,
#     __libc_start_call_main ... a root frame; not truncated, no unwind error.
#
# The ASan build cannot run with another allocator preloaded into itself
# (ASan insists on coming first; with verify_asan_link_order=0 it crashes),
# so the -- CMD runs with LD_PRELOAD use the plain build ($ROOT/dwleak,
# built by "make all"/"make check"; override with DWLEAK_PLAIN) when
# $DWLEAK is an ASan build.  The -p runs use $DWLEAK itself.
# LT_ONLY=g|t|j selects glibc / tcmalloc / jemalloc when run by hand.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
LIBDIR=/usr/lib/x86_64-linux-gnu
SEED=$TESTDATA/seed_O2
N=25

# The dwleak that can run with LD_PRELOAD in its own environment.
lt_preload_dwleak

# check_seed JSON FAMILY EXACT: the stack with LeakLib::slowMemoryLeak().
check_seed() {
	lt_check "$1" "$2" "$3" << 'PY'
family, exact = ARGS[0], int(ARGS[1])
s = top_stack_with("LeakLib::slowMemoryLeak()")
if s is None:
    fail("no stack with LeakLib::slowMemoryLeak():\n" + "".join(show(x) for x in r["stacks"]))
    sys.exit(1)
print("seed stack: " + show(s))
n = names(s)
if s["bytes"] != 40 * exact or s["allocations"] != exact:
    fail("%d B in %d allocations, want exactly %d B in %d" % (s["bytes"], s["allocations"], 40 * exact, exact))
else:
    ok("exactly %d B in %d allocations" % (s["bytes"], s["allocations"]))
if family == "glibc":
    want = ["malloc", "operator new(unsigned long)", "LeakLib::slowMemoryLeak()", "caller()", "main",
            "__libc_start_call_main"]
    if n[:len(want)] != want:
        fail("frames %s, want %s ..." % (n[:len(want)], want))
    else:
        ok("frames " + " <- ".join(want))
    if s.get("allocator") != "operator new":
        fail("allocator %r, want 'operator new'" % s.get("allocator"))
else:
    f0 = s["frames"][0]
    if not (n[0] or "").startswith(("operator new", "tc_new")):
        fail("innermost frame %r, want operator new... / tc_new... (the allocator's own entry point)" % n[0])
    mod = f0["module"].split("/")[-1]
    if not mod.startswith("lib" + family):
        fail("innermost frame in %s, want lib%s" % (f0["module"], family))
    want = ["LeakLib::slowMemoryLeak()", "caller()", "main", "__libc_start_call_main"]
    if n[1:1 + len(want)] != want:
        fail("frames after %s: %s, want %s" % (n[0], n[1:1 + len(want)], want))
    else:
        ok("frames %s (%s) <- %s" % (n[0], mod, " <- ".join(want)))
    if s.get("allocator") not in ("operator new", "operator new[]"):
        fail("allocator %r, want 'operator new' or 'operator new[]'" % s.get("allocator"))
if n[-1] not in ROOTS:
    fail("outermost frame %r is not a root %s" % (n[-1], ROOTS))
if s.get("truncated") or s.get("unwind_error"):
    fail("truncated=%s unwind_error=%s" % (s.get("truncated"), s.get("unwind_error")))
PY
}

# check_line ERR FAMILY PRELOADED: the "dwleak: tracing" line.
check_line() {
	local line
	line=$(grep -m1 '^dwleak: tracing' "$1")
	if [ -z "$line" ]; then
		fail "$2: no 'dwleak: tracing' line"
		return
	fi
	echo "    $line"
	if [[ $line != *"($2 in "* ]] && [[ $line != *" $2 in "* ]]; then
		fail "$2: the tracing line does not name the allocator '$2 in ...'"
	elif [ "$3" = yes ] && [[ $line != *"(LD_PRELOAD)"* ]]; then
		fail "$2: the tracing line does not say (LD_PRELOAD)"
	elif [ "$3" = no ] && [[ $line == *"(LD_PRELOAD)"* ]]; then
		fail "$2: the tracing line says (LD_PRELOAD) without a preload"
	else
		pass "$2: tracing line names '$2' ${3/yes/and (LD_PRELOAD)}"
	fi
}

# run_cmd NAME FAMILY PRELOAD(path or empty) DWLEAK_BIN
run_cmd() {
	local name=$1 family=$2 preload=$3 bin=$4 rc
	echo "== $name: -- CMD $(basename "$SEED") --iterations $N${preload:+ (LD_PRELOAD=$preload)}"
	if [ -n "$preload" ]; then
		LD_PRELOAD=$preload timeout -k 5 60 "$bin" --format json -o "$T/$name.json" -t 0 -- \
			"$SEED" --iterations $N --interval-ms 5 > "$T/$name.out" 2> "$T/$name.err"
	else
		timeout -k 5 60 "$bin" --format json -o "$T/$name.json" -t 0 -- \
			"$SEED" --iterations $N --interval-ms 5 > "$T/$name.out" 2> "$T/$name.err"
	fi
	rc=$?
	if [ $rc -ne 0 ]; then
		fail "$name: dwleak exited $rc"
		sed 's/^/    /' "$T/$name.err" | tail -n 20
		[ -s "$T/$name.json" ] || return
	fi
	grep -q "exited with status 0" "$T/$name.err" || fail "$name: no 'exited with status 0' line"
	check_line "$T/$name.err" "$family" "$([ -n "$preload" ] && echo yes || echo no)"
	check_seed "$T/$name.json" "$family" $N
}

# run_pid NAME FAMILY PRELOAD: the seed started with LD_PRELOAD and a
# 3 s --delay-ms; dwleak -p attaches in that time and reports when the
# seed exits after its 25 allocations.
run_pid() {
	local name=$1 family=$2 preload=$3 pid dw rc
	echo "== $name: -p PID of $(basename "$SEED") --iterations $N (started with LD_PRELOAD=$preload)"
	LD_PRELOAD=$preload lt_start pid "$T/$name.out" "$SEED" --iterations $N --interval-ms 5 --delay-ms 3000
	if ! lt_trace dw "$T/$name.err" -p "$pid" -t 0 --format json -o "$T/$name.json"; then
		fail "$name: dwleak -p did not start tracing"
		return
	fi
	lt_wait "$dw" 60
	rc=$?
	if [ $rc -ne 0 ]; then
		fail "$name: dwleak -p exited $rc"
		sed 's/^/    /' "$T/$name.err" | tail -n 20
		[ -s "$T/$name.json" ] || return
	fi
	check_line "$T/$name.err" "$family" yes
	check_seed "$T/$name.json" "$family" $N
}

if lt_part g; then
	run_cmd glibc_cmd glibc "" "$DWLEAK"
fi
for fam in tcmalloc jemalloc; do
	lt_part "${fam:0:1}" || continue
	case $fam in
	tcmalloc) lib=$LIBDIR/libtcmalloc.so.4 ;;
	jemalloc) lib=$LIBDIR/libjemalloc.so.2 ;;
	esac
	if [ ! -e "$lib" ]; then
		fail "$lib is missing (apt-get install libgoogle-perftools4 libjemalloc2)"
		continue
	fi
	run_cmd "${fam}_cmd" "$fam" "$lib" "$DWLEAK_PRELOAD"
	run_pid "${fam}_pid" "$fam" "$lib"
done

check_finish
