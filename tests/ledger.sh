#!/bin/bash
# The ledger test (issue 5, second "Done means" item): testdata/ledger runs
# 4 threads through a seeded random mix of malloc, calloc, realloc (grow,
# shrink, to zero, from NULL), reallocarray, posix_memalign, aligned_alloc,
# memalign, new, new[], nothrow new[], aligned new, delete (sized and
# unsized), delete[] and free, each allocation from its own site_* function,
# and writes its ledger (per site: outstanding bytes as requested, and
# allocations) when all threads have joined; it exits without freeing them.
# Under glibc, LD_PRELOAD=libtcmalloc.so.4 and LD_PRELOAD=libjemalloc.so.2,
# "dwleak --format json -t 0 -- ledger" must report, per site (the innermost
# site_* frame of each stack), exactly the ledger's bytes and allocations,
# for every site of the ledger and with no site the ledger lacks.  Stacks
# without a site frame (libc/libstdc++ startup, the program's own vectors)
# are not compared; their totals are printed.  Also: the tracing line names
# the allocator the program found itself using (dladdr of malloc), no
# dropped events, site stacks neither truncated nor with unwind errors.
#
# As in tests/allocators.sh, the runs with LD_PRELOAD use the plain build
# ($ROOT/dwleak, or DWLEAK_PLAIN) when $DWLEAK is an ASan build, which
# cannot run with another allocator preloaded into itself.
# The glibc run is made twice: with uprobe sessions (the default where the
# kernel has them: calls needing nothing at their return skip the return
# probe) and with DWLEAK_UPROBE_SESSION=0 (entry + uretprobe, the fallback
# for older kernels); --stats must say which one ran.
# A fifth glibc run has the walker's guard against preempted probes on
# (DWLEAK_PREEMPT_GUARD=1, as on a preemptible kernel): the same exact
# sites, and no walk skipped where the kernel does not preempt.
# These runs are the uprobe path's (--no-preload); tests/preload_ledger.sh
# runs the same ledgers through the preload library's sites.
# LT_ONLY=g|t|j|e|p selects glibc / tcmalloc / jemalloc / glibc without
# sessions / glibc with the guard when run by hand;
# LEDGER_OPS sets the operations per thread (default 2000).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
LIBDIR=/usr/lib/x86_64-linux-gnu
lt_testdata ledger
OPS=${LEDGER_OPS:-2000}
lt_preload_dwleak

# compare REPORT LEDGER FAMILY
compare() {
	lt_check "$1" "$2" "$3" << 'PY'
led = json.load(open(ARGS[0]))
family = ARGS[1]
if led["allocator"] != family:
    fail("the program says it runs on %s, want %s" % (led["allocator"], family))
want = {k: (v["bytes"], v["allocations"]) for k, v in led["sites"].items()}
got, kinds, other = {}, {}, [0, 0, 0]
bad_walks = []
for s in r["stacks"]:
    site = None
    for n in names(s):
        if n and n.split("(")[0].startswith("site_"):
            site = n.split("(")[0]
            break
    if site is None:
        other[0] += s["bytes"]; other[1] += s["allocations"]; other[2] += 1
        continue
    b, a = got.get(site, (0, 0))
    got[site] = (b + s["bytes"], a + s["allocations"])
    kinds.setdefault(site, set()).add(s.get("allocator"))
    if s.get("truncated") or s.get("unwind_error"):
        bad_walks.append(s)
print("stacks without a site frame (startup, the program's vectors): %d B in %d allocations, %d stacks"
      % tuple(other))
t = r["totals"]
if t.get("dropped_events"):
    fail("%d dropped events" % t["dropped_events"])
for s in bad_walks:
    fail("site stack truncated/unwind error:\n" + show(s))
rows, bad = [], 0
for site in sorted(set(want) | set(got)):
    wb, wa = want.get(site, (None, None))
    gb, ga = got.get(site, (0, 0))
    okrow = site in want and (gb, ga) == (wb, wa)
    bad += not okrow
    rows.append("  %-24s %10s %6s %10d %6d  %-4s %s" % (
        site, wb, wa, gb, ga, "ok" if okrow else "DIFF", ",".join(sorted(str(k) for k in kinds.get(site, ())))))
table = "  %-24s %10s %6s %10s %6s\n" % ("site", "ledger B", "n", "dwleak B", "n") + "\n".join(rows)
wb = sum(v[0] for v in want.values()); wa = sum(v[1] for v in want.values())
gb = sum(v[0] for v in got.values()); ga = sum(v[1] for v in got.values())
if bad:
    fail("%d of %d sites differ from the ledger (ledger %d B in %d, dwleak %d B in %d):\n%s"
         % (bad, len(set(want) | set(got)), wb, wa, gb, ga, table))
else:
    ok("all %d sites equal the ledger: %d B in %d allocations" % (len(want), gb, ga))
    if "LT_VERBOSE" in __import__("os").environ:
        print(table)
PY
}

# run NAME FAMILY PRELOAD DWLEAK_BIN SESSION(1|0) [PREEMPT_GUARD]
run() {
	local name=$1 family=$2 preload=$3 bin=$4 session=$5 guard=${6:-} rc line want busy
	echo "== $name: -- ledger --ops $OPS${preload:+ (LD_PRELOAD=$preload)} (DWLEAK_UPROBE_SESSION=$session${guard:+ DWLEAK_PREEMPT_GUARD=$guard})"
	rm -f "$T/$name.ledger"
	env DWLEAK_UPROBE_SESSION="$session" ${guard:+DWLEAK_PREEMPT_GUARD=$guard} ${preload:+LD_PRELOAD=$preload} \
		timeout -k 5 120 "$bin" --no-preload --stats --format json -o "$T/$name.json" -t 0 -- \
		"$PROG" --ops "$OPS" --ledger "$T/$name.ledger" > "$T/$name.out" 2> "$T/$name.err"
	rc=$?
	if [ -n "$guard" ]; then
		grep -q '^dwleak: stats: walker buffers guarded against preempted probes' "$T/$name.err" ||
			fail "$name: --stats does not say the walker buffers are guarded"
		busy=$(sed -n 's/^dwleak: stats: walks_skipped_walker_busy \([0-9]*\)$/\1/p' "$T/$name.err")
		if [ "$busy" != 0 ] && grep -q "preemption model: \(none\|voluntary\) " "$T/$name.err"; then
			fail "$name: $busy walks found the buffers busy on a kernel that does not preempt"
		elif [ "$busy" != 0 ]; then
			echo "note: $name: $busy walks skipped by preempted probes (this kernel preempts): sites not compared"
			return
		fi
	fi
	want="uprobe sessions"
	[ "$session" = 0 ] && want="uprobe_multi entry and return probes"
	grep -q "^dwleak: stats: allocator calls probed by $want" "$T/$name.err" ||
		fail "$name: --stats does not say the calls were probed by $want: $(grep -m1 'probed by' "$T/$name.err")"
	if [ $rc -ne 0 ]; then
		fail "$name: dwleak exited $rc"
		sed 's/^/    /' "$T/$name.err" | tail -n 20
		[ -s "$T/$name.json" ] || return
	fi
	grep -q "exited with status 0" "$T/$name.err" || fail "$name: no 'exited with status 0' line"
	line=$(grep -m1 '^dwleak: tracing' "$T/$name.err")
	echo "    $line"
	[[ $line == *"$family in "* ]] || fail "$name: the tracing line does not name $family"
	if [ ! -s "$T/$name.ledger" ]; then
		fail "$name: the program wrote no ledger"
		return
	fi
	compare "$T/$name.json" "$T/$name.ledger" "$family"
}

lt_part g && run glibc glibc "" "$DWLEAK" 1
lt_part t && run tcmalloc tcmalloc "$LIBDIR/libtcmalloc.so.4" "$DWLEAK_PRELOAD" 1
lt_part j && run jemalloc jemalloc "$LIBDIR/libjemalloc.so.2" "$DWLEAK_PRELOAD" 1
lt_part e && run glibc_no_session glibc "" "$DWLEAK" 0
lt_part p && run glibc_guard glibc "" "$DWLEAK" 1 1

check_finish
