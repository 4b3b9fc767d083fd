#!/bin/bash
# The preload path's ledgers (issue 16): testdata/ledger (4 threads, the
# whole malloc family and the C++ operators, 19 call sites with a known
# outstanding ledger) traced at the preload library's sites, under glibc,
# tcmalloc, jemalloc and mimalloc (each LD_PRELOAD'ed after the library):
#   - dwleak -- CMD (which preloads the library itself);
#   - dwleak -p on the program started with LD_PRELOAD=$(dwleak preload)
#     (it waits for a go file while dwleak attaches);
#   - dwleak -p on the program started without the library (issue 22):
#     dwleak loads it into the running process and routes its allocator
#     calls through it, and the tracing line says "preload, injected";
# each time the tracing line says "preload" and names the allocator, the
# program's own ledger is what dwleak reports, per site, to the byte and
# the allocation, with no dropped event, no site stack truncated or cut.
# Then -p with --sample-bytes on glibc: the estimates within the stated
# error (4.5 sd of sqrt(N * B) per site of B bytes, as tests/sampling.sh);
# and -- CMD with --leak-check --sample-bytes: the totals by kind exact
# (every block, from the library's index), each site's kinds within 4.5 sd
# of its true bytes, and the report's stated standard errors (bytes_stderr,
# leak_kinds_stderr) within a factor 3 of sqrt(N * B) (a site with no
# sample, chance exp(-B/N), fails only where that chance is under 1e-6).
# Then -- CMD with --walk process under the four allocators: the same
# ledgers, walked in the process.
# LT_ONLY=g|t|j|m|s|w selects glibc / tcmalloc / jemalloc / mimalloc /
# sampled / walked in the process.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
LIBDIR=/usr/lib/x86_64-linux-gnu
lt_testdata ledger
lt_preload_dwleak
OPS=${LEDGER_OPS:-2000}
LIB=$("$DWLEAK" preload) || { fail "dwleak preload found no library"; check_finish; }

# check NAME FAMILY: the tracing line, then the report against the ledger
check() {
	local name=$1 family=$2 line
	line=$(grep -m1 '^dwleak: tracing' "$T/$name.err")
	echo "    $line"
	if [[ $name == inj_* ]]; then
		[[ $line == *"(preload, injected in "*" ms, $family in "* ]] ||
			fail "$name: the tracing line does not say preload, injected, $family"
	else
		[[ $line == *"(preload, $family in "* ]] || fail "$name: the tracing line does not say preload, $family"
	fi
	[ -s "$T/$name.ledger" ] || { fail "$name: the program wrote no ledger"; return; }
	lt_check "$T/$name.json" "$T/$name.ledger" "$family" << 'PY'
led = json.load(open(ARGS[0]))
if led["allocator"] != ARGS[1]:
    fail("the program says it runs on %s, want %s" % (led["allocator"], ARGS[1]))
got = site_totals()
for s in r["stacks"]:
    if site_of(s) and (s.get("truncated") or s.get("unwind_error")):
        fail("site stack truncated or cut:\n" + show(s))
    if any("libdwleak-preload" in (f["module"] or "") for f in s["frames"]):
        fail("a frame of the library is shown:\n" + show(s))
check_sites({k: (v["bytes"], v["allocations"]) for k, v in led["sites"].items()}, got)
extra = set(got) - set(led["sites"])
if extra:
    fail("sites the ledger lacks: %s" % sorted(extra))
if r["totals"].get("dropped_events"):
    fail("%d dropped events" % r["totals"]["dropped_events"])
PY
	# which run the lines above are of (the runner shows FAIL lines first)
	if [ $? -ne 0 ]; then
		fail "$name: the report is not the ledger (the lines above; report and ledger in $T)"
		# what tells a lost free from a misordered one (an allocation that
		# lands on a live address, its free applied after it: rings merged
		# by stamps that disagree across CPUs) for the run that failed
		echo "    counters: $(python3 -c 'import json, sys
c = json.load(open(sys.argv[1])).get("counters", {})
print(" ".join("%s %s" % (k, c.get(k)) for k in ("allocs_replaced", "frees_of_untracked", "returns_unmatched", "nested_calls")))' "$T/$name.json" 2>&1)"
	fi
}

# run_cmd NAME FAMILY ALLOC_LIB [DWLEAK OPTIONS...]
run_cmd() {
	local name=$1 family=$2 alloc=$3 bin=$DWLEAK rc
	shift 3
	[ -n "$alloc" ] && bin=$DWLEAK_PRELOAD
	echo "== $name: dwleak $* -- ledger${alloc:+ (LD_PRELOAD=$alloc)}"
	env ${alloc:+LD_PRELOAD=$alloc} timeout -k 5 120 "$bin" "$@" --format json -o "$T/$name.json" -t 0 -- \
		"$PROG" --ops "$OPS" --ledger "$T/$name.ledger" > "$T/$name.out" 2> "$T/$name.err"
	rc=$?
	[ $rc -eq 0 ] || { fail "$name: dwleak exited $rc"; tail -n 5 "$T/$name.err"; }
	check "$name" "$family"
}

# run_pid NAME FAMILY ALLOC_LIB [DWLEAK OPTIONS...]: the program started
# with the library (and ALLOC_LIB after it), dwleak -p on it; a NAME that
# starts with inj_: started without the library (ALLOC_LIB alone), which
# dwleak -p then loads into it
run_pid() {
	local name=$1 family=$2 alloc=$3 pid dpid rc pre=$LIB
	shift 3
	[[ $name == inj_* ]] && pre=
	echo "== $name: LD_PRELOAD=${pre:+libdwleak-preload.so}${pre:+${alloc:+:}}$alloc ledger, dwleak -p $*"
	rm -f "$T/$name.go"
	export LD_PRELOAD=$pre${pre:+${alloc:+:}}$alloc
	[ -n "$LD_PRELOAD" ] || unset LD_PRELOAD
	lt_start pid "$T/$name.out" "$PROG" --ops "${PID_OPS:-$OPS}" --ledger "$T/$name.ledger" --go-file "$T/$name.go"
	unset LD_PRELOAD
	if ! lt_trace dpid "$T/$name.err" -p "$pid" "$@" --format json -o "$T/$name.json" -t 0; then
		fail "$name: dwleak -p did not start tracing"
		return
	fi
	touch "$T/$name.go"
	lt_wait "$pid" 120
	lt_wait "$dpid" 60
	rc=$?
	[ $rc -eq 0 ] || { fail "$name: dwleak -p exited $rc"; tail -n 5 "$T/$name.err"; }
	grep -q "exited; reporting what it never freed" "$T/$name.err" || fail "$name: dwleak did not see the program exit"
	[ "${1:-}" = --sample-bytes ] || check "$name" "$family"
}

for a in g:glibc: t:tcmalloc:libtcmalloc.so.4 j:jemalloc:libjemalloc.so.2 m:mimalloc:libmimalloc.so.2; do
	IFS=: read -r key family so <<< "$a"
	lt_part "$key" || continue
	alloc=${so:+$LIBDIR/$so}
	run_cmd "cmd_$family" "$family" "$alloc"
	run_pid "pid_$family" "$family" "$alloc"
	run_pid "inj_$family" "$family" "$alloc"
done

# the walk in the process (issue 24): the same ledgers, every stack
# walked by the library into its rings
for a in g:glibc: t:tcmalloc:libtcmalloc.so.4 j:jemalloc:libjemalloc.so.2 m:mimalloc:libmimalloc.so.2; do
	IFS=: read -r key family so <<< "$a"
	lt_part w || continue
	alloc=${so:+$LIBDIR/$so}
	run_cmd "walk_$family" "$family" "$alloc" --walk process --stats
	grep -q "walks its stacks in the process" "$T/walk_$family.err" ||
		fail "walk_$family: the process did not walk itself: $(grep 'walked in' "$T/walk_$family.err")"
done

if lt_part s; then
	N=65536
	for name in pid_sampled inj_sampled; do
		PID_OPS=20000 run_pid $name glibc "" --sample-bytes $N
		grep -q '(preload, ' "$T/$name.err" || fail "$name: not traced at the sites"
		lt_check "$T/$name.json" "$T/$name.ledger" "$N" << 'PY'
led = json.load(open(ARGS[0]))
n = float(ARGS[1])
check_estimates(led["sites"], n)
if r["counters"].get("alloc_calls", 0) * 4 > led["calls"]:
    fail("the site fired %d times for %d calls: not sampled in the process" % (r["counters"]["alloc_calls"], led["calls"]))
PY
	done
	# -- CMD with --leak-check: every block classified from the library's
	# index (the totals exact), each site's kinds estimated from the
	# sample with their stated standard error
	name=cmd_sampled_check
	echo "== $name: dwleak --leak-check --sample-bytes $N -- ledger"
	timeout -k 5 120 "$DWLEAK" --leak-check --sample-bytes $N --format json -o "$T/$name.json" -t 0 -- \
		"$PROG" --ops 20000 --ledger "$T/$name.ledger" > "$T/$name.out" 2> "$T/$name.err" ||
		fail "$name: dwleak exited $?: $(tail -n 3 "$T/$name.err")"
	lt_check "$T/$name.json" "$T/$name.ledger" "$N" << 'PY'
led = json.load(open(ARGS[0]))
n = float(ARGS[1])
check_estimates(led["sites"], n)
lc = r["totals"]["leak_check"]
if lc.get("kinds_exact") is not True:
    fail("totals.leak_check.kinds_exact is %s" % lc.get("kinds_exact"))
KINDS = ("definitely_lost", "indirectly_lost", "possibly_lost", "reachable")
classified = sum(lc[k]["bytes"] for k in KINDS)
true_total = sum(v["bytes"] for v in led["sites"].values())
if classified < true_total:
    fail("the exact totals classify %d bytes, fewer than the sites' %d outstanding" % (classified, true_total))
per = {}
for s in r["stacks"]:
    site = site_of(s)
    if not site:
        continue
    e, v, b = per.get(site, (0.0, 0.0, 0.0))
    for k in KINDS:
        e += s["leak_kinds"][k]["bytes"]
        v += (s["leak_kinds_stderr"][k] or 0.0) ** 2
    per[site] = (e, v, b + (s["bytes_stderr"] or 0.0) ** 2)
judged = 0
for site, want in sorted(led["sites"].items()):
    b = want["bytes"]
    if b < 8 * n:
        continue
    e, v, vb = per.get(site, (0.0, 0.0, 0.0))
    sd = math.sqrt(n * b)
    judged += 1
    line = "%-24s true %9d  kinds %9d (stated +- %.0f, expected +- %.0f)" % (site, b, e, math.sqrt(v), sd)
    if e == 0 and v == 0:
        # no block of the site was sampled: its stated error is 0 by
        # construction, so judge the chance of no sample, exp(-B/N)
        # (3e-4 at the 8 samples expected where judging starts)
        chance = math.exp(-b / n)
        (fail if chance < 1e-6 else ok)("no sample (chance %.1e): %s" % (chance, line))
    elif abs(e - b) > 4.5 * sd:
        fail("kinds off by more than 4.5 sd: " + line)
    elif not sd / 3 <= math.sqrt(v) <= 3 * sd or not sd / 3 <= math.sqrt(vb) <= 3 * sd:
        fail("stated error far from the expected one: " + line + " (bytes +- %.0f)" % math.sqrt(vb))
    else:
        ok(line)
if judged < 5:
    fail("only %d sites had 8 samples expected: the error is untested" % judged)
PY
fi

check_finish
