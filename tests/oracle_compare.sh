#!/bin/bash
# Runs a command under valgrind's memcheck and under dwleak --leak-check and
# prints the four leak sums of each side by side (bytes; blocks in the JSON
# line).  By hand:
#
#   tests/oracle_compare.sh [OPTIONS] [VAR=VALUE...] CMD [ARG...]
#
#   --no-preload      dwleak traces with uprobes only, memcheck runs CMD as
#                     is.  By default dwleak runs CMD with its preload
#                     library (its default), and memcheck runs CMD with the
#                     same library preloaded: the library has thread-local
#                     storage, so ld.so's DTV has one more slot, a 16-byte
#                     block each side must count (tests/leak_check.sh)
#   --allocator NAME  jemalloc, tcmalloc or mimalloc: CMD runs with that
#                     allocator preloaded; memcheck replaces it with its own
#                     (--soname-synonyms=somalloc=PATTERN), as it replaces
#                     glibc's malloc
#   --attach          dwleak attaches with -p instead of starting CMD; CMD
#                     must follow the --wait protocol of testdata's
#                     oracle_sizes: started with --wait appended it writes
#                     "waiting" and waits; on SIGUSR1 (dwleak attached) it
#                     makes its blocks, writes "ready" and waits for SIGUSR2
#                     to exit; on SIGUSR2 instead it exits at once.  dwleak
#                     checks at its report (SIGINT after "ready").  memcheck
#                     runs CMD twice: without --wait (the whole run), and
#                     with --wait and SIGUSR2 (what there was at the attach
#                     point, e.g. an allocator's start-up blocks); its sums
#                     are the first minus the second, what CMD lost after
#                     the attach point (blocks made before it are roots to
#                     dwleak -p, never reported).  The target runs with the
#                     preload library (LD_PRELOAD, as a service started to
#                     be traced at its sites) unless --no-preload (then
#                     dwleak -p --no-inject: uprobes) or --inject
#   --inject          with --attach: the target runs without the library,
#                     and dwleak -p loads it into the running process
#                     (dwleak's default); memcheck runs CMD with the
#                     library preloaded, as the injected process has it
#   --stdin FILE      CMD's standard input (default /dev/null)
#   --keep DIR        keep memcheck's XML and dwleak's JSON and logs in DIR
#   --sums            print one line: memcheck's D I P R bytes, then dwleak's,
#                     then CMD's exit status under memcheck and dwleak's (with
#                     --attach: 0 when dwleak -p and the target both exited
#                     as they should), then the bytes dwleak reached only
#                     through memory it cannot vouch for (flagged "may be
#                     lost"); what tests/oracle_memcheck.sh reads
#
# ORACLE_TIMEOUT (seconds, default 300) bounds each run of dwleak: a traced
# command that hangs is reported (dwleak's status 124), not waited for.
#
# VAR=VALUE words before CMD go into CMD's environment on both sides (not
# through env(1): memcheck does not follow an exec by default).
#
# The two sides, and why (tests/oracle_memcheck.sh explains the cases):
#   memcheck  valgrind --tool=memcheck --leak-check=full --show-leak-kinds=all
#             --run-libc-freeres=no --run-cxx-freeres=no --default-suppressions=no
#             --xml=yes: dwleak checks at exit(), before glibc and libstdc++
#             free their caches, so memcheck must not free them either
#             (its default does, at the very end); no suppressions on either
#             side, so both count glibc's and libstdc++'s at-exit memory
#   dwleak    $DWLEAK --leak-check --no-default-suppressions -t 0 --format json
#             totals.leak_check's four kinds
# memcheck's sums are its loss records' bytes per kind (a definitely lost
# record's "direct" bytes only: its indirect ones are the indirect records').
#
# Exit status: 0 when both ran (the sums may differ: this only measures),
# 2 when either could not run or report.
#
# Without arguments (tests/run.sh runs every tests/*.sh) it checks itself:
# on testdata's leak_kinds, whose four sums dwleak and memcheck agree on
# (tests/leak_check.sh checks each site), both sides must read 240/176/
# 976/1,616 bytes (the program's header) with uprobes, and the same lost
# bytes with the preload library; with --attach under tcmalloc, memcheck's
# figures must be oracle_sizes's 6,404,602 lost bytes without tcmalloc's
# own 8, which the baseline run takes away.
set -u

ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$BUILD/asan/dwleak}
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp}
if [ -x /usr/bin/python3.11 ]; then
	PY=/usr/bin/python3.11
else
	PY=python3
fi
LIBDIR=/usr/lib/x86_64-linux-gnu

die() {
	echo "oracle_compare: $*" >&2
	exit 2
}

preload=1 allocator='' attach=0 stdin=/dev/null keep='' sums=0 inject=0
while [ $# -gt 0 ]; do
	case $1 in
	--no-preload) preload=0 ;;
	--allocator) allocator=$2; shift ;;
	--attach) attach=1 ;;
	--inject) inject=1 ;;
	--stdin) stdin=$2; shift ;;
	--keep) keep=$2; shift ;;
	--sums) sums=1 ;;
	--) shift; break ;;
	-*) die "unknown option $1 (see the header of $0)" ;;
	*) break ;;
	esac
	shift
done
if [ $# -eq 0 ] && [ $sums = 0 ] && [ -z "$allocator$keep" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "skip: needs root for BPF uprobes"
		exit 77
	fi
	td=${TESTDATA:-$BUILD/testdata}
	errors=0
	check() { # NAME GOT WANT
		if [ "$2" = "$3" ]; then
			echo "ok: $1: $2"
		else
			echo "FAIL: $1: '$2', want '$3'"
			errors=$((errors + 1))
		fi
	}
	got=$("$0" --sums --no-preload "$td/leak_kinds")
	check "leak_kinds, uprobes: memcheck D I P R, dwleak D I P R, exits, unsure" "$got" \
		"240 176 976 1616 240 176 976 1616 0 0 0"
	read -r -a v <<< "$("$0" --sums "$td/leak_kinds")"
	check "leak_kinds, preload library: memcheck D I, dwleak D I, exits" "${v[*]:0:2} ${v[*]:4:2} ${v[*]:8:2}" "240 176 240 176 0 0"
	read -r -a v <<< "$("$0" --sums --attach --no-preload --allocator tcmalloc "$td/oracle_sizes")"
	check "oracle_sizes -p under tcmalloc: memcheck's D I after attach, exits" "${v[*]:0:2} ${v[*]:8:2}" "6404602 0 0 0"
	[ $errors = 0 ] || exit 1
	exit 0
fi
envs=()
while [ $# -gt 0 ] && [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
	envs+=("$1")
	shift
done
[ $# -gt 0 ] || die "usage: $0 [--no-preload] [--allocator NAME] [--attach [--inject]] [--stdin FILE] [--keep DIR] [--sums] [VAR=VALUE...] CMD [ARG...]"
[ -x "$DWLEAK" ] || die "$DWLEAK is missing (make check-build)"
command -v valgrind > /dev/null || die "valgrind is missing (Debian: valgrind; .ci/deps.sh installs it)"

if [ -n "$keep" ]; then
	mkdir -p "$keep" || die "cannot make $keep"
	tmp=$keep
else
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/dwleak-oracle.XXXXXX")
fi
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2> /dev/null
	done
	[ -n "$keep" ] || rm -rf "$tmp"
}
trap cleanup EXIT

# The allocator CMD runs with, and the soname pattern memcheck replaces.
alloc_lib='' synonym=''
case $allocator in
'' | glibc) ;;
jemalloc) alloc_lib=$LIBDIR/libjemalloc.so.2 synonym='*jemalloc*' ;;
tcmalloc) alloc_lib=$LIBDIR/libtcmalloc_minimal.so.4 synonym='*tcmalloc*' ;;
mimalloc) alloc_lib=$LIBDIR/libmimalloc.so.2 synonym='*mimalloc*' ;;
*) die "--allocator $allocator: jemalloc, tcmalloc or mimalloc" ;;
esac
[ -z "$alloc_lib" ] || [ -e "$alloc_lib" ] || die "$alloc_lib is missing (.ci/deps.sh installs it)"

# LD_PRELOAD of each side: dwleak puts its library first (session/preload_env.c)
# (and for --attach, the target's on both sides)
dw_ld=$alloc_lib vg_ld=$alloc_lib
if [ $preload = 1 ]; then
	lib=$("$DWLEAK" preload) || die "dwleak preload: no library"
	vg_ld=$lib${alloc_lib:+:$alloc_lib}
	[ $attach = 1 ] && [ $inject = 0 ] && dw_ld=$vg_ld
fi
[ $inject = 0 ] || { [ $attach = 1 ] && [ $preload = 1 ]; } || die "--inject goes with --attach, not --no-preload"
dw_timeout=${ORACLE_TIMEOUT:-300}

# --- memcheck ---
# memcheck runs in a time namespace whose monotonic clock reads about 116
# days.  Why: its leak check is conservative (any word whose value lies
# inside a block keeps it), and valgrind lays the client's heap out at the
# same low addresses in every run (oracle_sizes' 3 MB blocks at about
# 87-94 million), where milliseconds of uptime also land: mimalloc keeps its
# start time (CLOCK_MONOTONIC in ms, mi_process_start) in its statics, so on
# a machine up 24.2-26.2 hours memcheck called a 3 MB block possibly lost in
# every run (CI's and a fresh root's, 2026-11-27; reproduced with unshare
# --time --monotonic=87000).  At 10^7 s the clock reads 10^10 ms, above 4
# GiB, where no client block of these programs lies.  Without time
# namespaces (CONFIG_TIME_NS) memcheck runs as before, with a note.
vg_clock=()
if unshare --fork --time --monotonic=10000000 true 2> /dev/null; then
	vg_clock=(unshare --fork --time --monotonic=10000000)
else
	echo "oracle_compare: note: no time namespace (unshare --time): memcheck sees the machine's uptime in ms" >&2
fi
vg_opts=(--tool=memcheck --leak-check=full --show-leak-kinds=all --run-libc-freeres=no
	--run-cxx-freeres=no --default-suppressions=no --xml=yes --xml-file="$tmp/memcheck.xml")
[ -n "$synonym" ] && vg_opts+=(--soname-synonyms=somalloc="$synonym")
"${vg_clock[@]}" env ${vg_ld:+LD_PRELOAD=$vg_ld} "${envs[@]}" timeout -k 5 300 valgrind "${vg_opts[@]}" "$@" \
	< "$stdin" > "$tmp/memcheck.out" 2> "$tmp/memcheck.err"
vg_rc=$?
[ -s "$tmp/memcheck.xml" ] || die "memcheck wrote no XML (exit $vg_rc): $(tail -3 "$tmp/memcheck.err")"
if [ $attach = 1 ]; then
	# the baseline: CMD --wait told to exit at the attach point
	vg_opts[${#vg_opts[@]} - 1]=--xml-file=$tmp/memcheck_base.xml
	# valgrind's process is CMD's; under unshare --fork it is unshare's
	# child, which writes its pid before it becomes valgrind
	(exec "${vg_clock[@]}" bash -c 'echo $$ > "$0"; exec "$@"' "$tmp/memcheck_base.pid" \
		env ${vg_ld:+LD_PRELOAD=$vg_ld} "${envs[@]}" valgrind "${vg_opts[@]}" "$@" --wait \
		< "$stdin" > "$tmp/memcheck_base.out" 2> "$tmp/memcheck_base.err") &
	vp=$!
	pids+=("$vp")
	for ((i = 0; i < 600; i++)); do
		grep -q waiting "$tmp/memcheck_base.out" 2> /dev/null && break
		sleep 0.05
	done
	grep -q waiting "$tmp/memcheck_base.out" ||
		die "$1 --wait under memcheck never wrote 'waiting': $(tail -3 "$tmp/memcheck_base.err")"
	vg_pid=$(cat "$tmp/memcheck_base.pid")
	pids+=("$vg_pid")
	kill -USR2 "$vg_pid"
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$vp" 2> /dev/null || break
		sleep 0.05
	done
	kill -0 "$vp" 2> /dev/null && die "$1 --wait under memcheck did not exit on SIGUSR2 within 60 s"
	wait "$vp"
	[ -s "$tmp/memcheck_base.xml" ] || die "memcheck wrote no XML for the baseline: $(tail -3 "$tmp/memcheck_base.err")"
fi

# --- dwleak ---
dw_opts=(--leak-check --no-default-suppressions -t 0 --format json -o "$tmp/dwleak.json")
# -p on a target started without the library: dwleak loads it into it,
# unless --no-preload asks for the uprobe path
[ $attach = 1 ] && [ $preload = 0 ] && dw_opts+=(--no-inject)
if [ $attach = 0 ]; then
	[ $preload = 0 ] && dw_opts+=(--no-preload)
	# env(1) after dwleak, not before it: an ASan dwleak cannot run with
	# an allocator preloaded into itself; dwleak follows the exec and
	# keeps its library first in LD_PRELOAD
	pre=()
	if [ -n "$dw_ld" ] || [ ${#envs[@]} -gt 0 ]; then
		pre=(env)
		if [ -n "$dw_ld" ]; then
			[ $preload = 1 ] && dw_ld=$("$DWLEAK" preload):$dw_ld
			pre+=(LD_PRELOAD="$dw_ld")
		fi
		pre+=("${envs[@]}")
	fi
	timeout -k 5 "$dw_timeout" "$DWLEAK" "${dw_opts[@]}" -- "${pre[@]}" "$@" \
		< "$stdin" > "$tmp/dwleak.out" 2> "$tmp/dwleak.err"
	dw_rc=$?
	[ $dw_rc = "$vg_rc" ] ||
		echo "oracle_compare: note: dwleak exit $dw_rc, memcheck (CMD's status) $vg_rc" >&2
else
	# -p: CMD started with --wait, dwleak attached, then the leaks
	(exec env ${dw_ld:+LD_PRELOAD=$dw_ld} "${envs[@]}" "$@" --wait < "$stdin" > "$tmp/target.out" 2>&1) &
	target=$!
	pids+=("$target")
	for ((i = 0; i < 200; i++)); do
		grep -q waiting "$tmp/target.out" 2> /dev/null && break
		sleep 0.05
	done
	grep -q waiting "$tmp/target.out" || die "$1 --wait never wrote 'waiting': $(tail -3 "$tmp/target.out")"
	"$DWLEAK" "${dw_opts[@]}" -p "$target" > "$tmp/dwleak.out" 2> "$tmp/dwleak.err" &
	dw=$!
	pids+=("$dw")
	for ((i = 0; i < 600; i++)); do
		grep -q '^dwleak: tracing' "$tmp/dwleak.err" 2> /dev/null && break
		kill -0 "$dw" 2> /dev/null || break
		sleep 0.05
	done
	grep -q '^dwleak: tracing' "$tmp/dwleak.err" || die "dwleak -p did not attach: $(tail -3 "$tmp/dwleak.err")"
	kill -USR1 "$target"
	for ((i = 0; i < 200; i++)); do
		grep -q ready "$tmp/target.out" 2> /dev/null && break
		sleep 0.05
	done
	grep -q ready "$tmp/target.out" || die "$1 never wrote 'ready' after SIGUSR1: $(tail -3 "$tmp/target.out")"
	kill -INT "$dw"
	for ((i = 0; i < dw_timeout * 20; i++)); do
		kill -0 "$dw" 2> /dev/null || break
		sleep 0.05
	done
	if kill -0 "$dw" 2> /dev/null; then
		echo "oracle_compare: dwleak -p did not stop within $dw_timeout s of SIGINT: killed" >&2
		kill -KILL "$dw"
	fi
	wait "$dw"
	dw_rc=$?
	[ $dw_rc = 0 ] || echo "oracle_compare: note: dwleak -p exit $dw_rc: $(tail -3 "$tmp/dwleak.err")" >&2
	kill -USR2 "$target" 2> /dev/null
	wait "$target"
	t_rc=$?
	if [ $t_rc != "$vg_rc" ]; then
		echo "oracle_compare: note: the target exit $t_rc after dwleak -p, $vg_rc under memcheck" >&2
		[ $dw_rc = 0 ] && dw_rc=$t_rc
	fi
fi
[ -s "$tmp/dwleak.json" ] || die "dwleak wrote no report (exit $dw_rc): $(tail -3 "$tmp/dwleak.err")"

base=()
[ $attach = 1 ] && base=("$tmp/memcheck_base.xml")
"$PY" - "$tmp/memcheck.xml" "$tmp/dwleak.json" "$sums $vg_rc $dw_rc" "${base[@]}" << 'PY' || die "could not read the reports"
import json, re, sys
import xml.etree.ElementTree as ET

KINDS = ("definitely_lost", "indirectly_lost", "possibly_lost", "reachable")
VG = {"Leak_DefinitelyLost": 0, "Leak_IndirectlyLost": 1, "Leak_PossiblyLost": 2, "Leak_StillReachable": 3}


def memcheck_sums(path):
    b, n = [0] * 4, [0] * 4
    for e in ET.parse(path).getroot().iter("error"):
        k = VG.get(e.findtext("kind"))
        if k is None:
            continue
        x = e.find("xwhat")
        lb, ln = int(x.findtext("leakedbytes")), int(x.findtext("leakedblocks"))
        m = re.search(r"\(([\d,]+) direct, ([\d,]+) indirect\)", x.findtext("text"))
        if m:  # leakedbytes counts the record's indirect bytes too
            lb = int(m.group(1).replace(",", ""))
        b[k] += lb
        n[k] += ln
    return b, n


vb, vn = memcheck_sums(sys.argv[1])
if len(sys.argv) > 4:  # --attach: what was there at the attach point
    bb, bn = memcheck_sums(sys.argv[4])
    vb = [x - y for x, y in zip(vb, bb)]
    vn = [x - y for x, y in zip(vn, bn)]
r = json.load(open(sys.argv[2]))
lc = r["totals"].get("leak_check")
if not lc:
    sys.exit("dwleak's report has no totals.leak_check")
db = [lc[k]["bytes"] for k in KINDS]
dn = [lc[k]["allocations"] for k in KINDS]
pids = {s.get("pid") for s in r["stacks"]}
if len(pids) > 1:
    print("oracle_compare: note: dwleak's report has %d processes; the sums are over all" % len(pids),
          file=sys.stderr)
sums, vg_rc, dw_rc = sys.argv[3].split()
# the bytes dwleak reached only through memory it cannot vouch for (the
# allocator's, held before it attached), which it flags "may be lost"
unsure = lc.get("unsure", {}).get("bytes", 0)
if sums == "1":
    print(" ".join(map(str, vb + db + [vg_rc, dw_rc, unsure])))
else:
    print("%-9s %16s %16s %16s %16s" % ("", "definitely", "indirectly", "possibly", "reachable"))
    vname = "memcheck" if len(sys.argv) <= 4 else "memcheck*"
    for name, b, n in ((vname, vb, vn), ("dwleak", db, dn)):
        print("%-9s %s" % (name, " ".join("%16s" % ("{:,} B/{:,}".format(x, y)) for x, y in zip(b, n))))
    same = "equal" if vb[0] + vb[1] == db[0] + db[1] else "DIFFER"
    print("definitely+indirectly lost: memcheck {:,}, dwleak {:,}: {}".format(vb[0] + vb[1], db[0] + db[1], same))
    if len(sys.argv) > 4:
        print("(memcheck*: the whole run minus the run stopped at the attach point)")
PY
