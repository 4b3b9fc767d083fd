#!/bin/bash
# The leak check (issue 15): dwleak --leak-check classifies each outstanding
# block as memcheck and LeakSanitizer do, on a live process.  The target is
# testdata/leak_kinds, built so that every allocation site has one known
# kind (see its header); valgrind's memcheck on the same program is the
# independent oracle.  Every site's kind is checked to the byte:
#
#   a  -- CMD: the check at exit(); each site's kinds, bytes and blocks
#      equal memcheck's (direct and indirect split as memcheck splits its
#      records); totals.leak_check and the residency of every stack add up
#   b  the text report's LEAK SUMMARY equals memcheck's, line by line; the
#      lost sites are listed even where reachable ones are bigger (--top)
#   c  -p: attach to a running leak_kinds --wait before it sets up; the
#      check at the report; the block made before attach is a root, not a
#      leak, and what only it points to is reachable; the target runs on
#      (it answers SIGUSR2) and is not left traced; twice: its memory read
#      from a copy-on-write snapshot while it runs on (the report says
#      so), and stopped while read (DWLEAK_LEAK_CHECK_STOP=1)
#   d  --fail-on-leak with --leak-check counts only lost bytes: exit 1 when
#      definitely lost bytes exist, 0 when all is reachable or possibly
#      lost (and 1 for the same program without --leak-check), sampled too
#   e  dwleak killed (SIGKILL) in the middle of a check: the target, caught
#      stopped by the check, runs on
#   f  folded: each stack's kind is the frame after its process
#   g  -p with --interval on a process that keeps replacing the blocks of a
#      global ring while each check indexes and scans (the index is built
#      before the stop, the changes applied in the pause): those blocks
#      are never called lost, every check's kinds still match memcheck's
#      on the other sites, and --stats shows blocks that changed
#   h  --sample-bytes with --leak-check (issue 24): every block classified
#      from the preload library's index of live blocks, sampled or not:
#      -- CMD sampled at 4096 bytes, the text summary equals memcheck's
#      line by line and the JSON totals say kinds_exact; at 1 byte (every
#      block sampled) each site's kinds equal memcheck's; -p (the library
#      injected, the check reading a snapshot) sampled at 4096, the totals
#      equal the exact -p check's (part c holds that one to memcheck); the
#      pair with --no-preload is refused (no index without the library)
#   i  a process that writes over its own index (testdata/index_scribble):
#      its check fails with a message naming the index, its blocks are
#      listed as not classified with the reason, --fail-on-leak cannot pass
#      (exit 2); the child it forked before, whose index is intact, is
#      classified (its two lost blocks, 300 bytes, exactly)
#   j  two sampled sessions on one process that has the library: the
#      first sees 10 blocks of 1000 bytes allocated, which are freed
#      (pointers cleared) while no dwleak listens; the second's check must
#      not find them (the library starts a new index per session)
#
# Run by tests/run.sh; by hand: LT_ONLY=ab bash tests/leak_check.sh
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
lt_testdata leak_kinds
tmp=$LT_TMP

if ! command -v valgrind > /dev/null; then
	echo "FAIL: valgrind is missing (Debian: valgrind, which .ci/deps.sh installs): it is the oracle"
	exit 1
fi

# What memcheck says of leak_kinds: $tmp/vg.xml and $tmp/vg.txt.  -- CMD
# runs the program with the preload library by default, and the library
# changes what the program allocates in one place: it has thread-local
# storage, so ld.so's DTV of every thread has one more 16-byte slot.  The
# oracle for that path is memcheck on the same program with the library
# preloaded too ($tmp/vgp.*); --no-preload and -p (a program started without
# it) are compared with memcheck on the program alone.
PRELOAD_LIB=$("$DWLEAK" preload) || fail "dwleak preload: no library to compare the preload path with"
valgrind --leak-check=full --show-leak-kinds=all --xml=yes --xml-file="$tmp/vg.xml" \
	"$PROG" > /dev/null 2>&1
valgrind --leak-check=full --show-leak-kinds=all --log-file="$tmp/vg.txt" "$PROG" > /dev/null 2>&1
[ -s "$tmp/vg.xml" ] || fail "valgrind wrote no XML: $(tail -3 "$tmp/vg.txt")"
LD_PRELOAD=$PRELOAD_LIB valgrind --leak-check=full --show-leak-kinds=all --xml=yes \
	--xml-file="$tmp/vgp.xml" "$PROG" > /dev/null 2>&1
LD_PRELOAD=$PRELOAD_LIB valgrind --leak-check=full --show-leak-kinds=all --log-file="$tmp/vgp.txt" \
	"$PROG" > /dev/null 2>&1
[ -s "$tmp/vgp.xml" ] || fail "valgrind with the library preloaded wrote no XML: $(tail -3 "$tmp/vgp.txt")"

# The per-site oracle: { site: { kind: [bytes, blocks] } } from memcheck's
# records, a record's site its first frame that is not an allocator's.  A
# memcheck "definitely lost" record of N (D direct, I indirect) bytes is D
# definitely lost bytes of its site: the I bytes are the indirect records'.
cat > "$tmp/oracle.py" << 'PY'
import re, sys, json
import xml.etree.ElementTree as ET
ALLOC = {"malloc", "calloc", "realloc", "operator new", "memalign"}
KIND = {"Leak_DefinitelyLost": "definitely_lost", "Leak_IndirectlyLost": "indirectly_lost",
        "Leak_PossiblyLost": "possibly_lost", "Leak_StillReachable": "reachable"}
sites = {}
for e in ET.parse(sys.argv[1]).getroot().iter("error"):
    k = e.findtext("kind")
    if k not in KIND:
        continue
    fns = [f.findtext("fn") or "?" for f in e.find("stack").findall("frame")]
    site = next((f for f in fns if f not in ALLOC), "?")
    x = e.find("xwhat")
    b, n = int(x.findtext("leakedbytes")), int(x.findtext("leakedblocks"))
    m = re.search(r"\(([\d,]+) direct, ([\d,]+) indirect\)", x.findtext("text"))
    if m:
        b = int(m.group(1).replace(",", ""))
    c = sites.setdefault(site, {}).setdefault(KIND[k], [0, 0])
    c[0] += b
    c[1] += n
json.dump(sites, open(sys.argv[2], "w"), indent=1, sort_keys=True)
PY
"$LT_PYTHON" "$tmp/oracle.py" "$tmp/vg.xml" "$tmp/oracle.json" || fail "could not read valgrind's XML"
"$LT_PYTHON" "$tmp/oracle.py" "$tmp/vgp.xml" "$tmp/oracle_preload.json" ||
	fail "could not read valgrind's XML (library preloaded)"

# compare JSON ORACLE [SKIP_SITES...]: dwleak's per-site kinds (sites named
# as in the oracle) equal the oracle's, but for SKIP_SITES
COMPARE='
oracle = json.load(open(ARGS[0]))
skip = set(ARGS[1:])
ALLOC = {"malloc", "calloc", "realloc", "operator new", "memalign"}
got = {}
for s in r["stacks"]:
    site = next((f for f in names(s) if f and base(f) not in ALLOC), "?")
    for k, c in s.get("leak_kinds", {}).items():
        if c["bytes"] or c["allocations"]:
            g = got.setdefault(site, {}).setdefault(k, [0, 0])
            g[0] += c["bytes"]
            g[1] += c["allocations"]
want = {s: k for s, k in oracle.items() if s not in skip}
for site in sorted(set(want) | set(got)):
    if site in skip:
        continue
    if got.get(site) != want.get(site):
        fail("%s: dwleak says %s, memcheck %s" % (site, got.get(site), want.get(site)))
if len(want) < 10:
    fail("memcheck found only %d sites: %s" % (len(want), sorted(want)))
'

# --- a: -- CMD, each site to the byte against memcheck ---
# (at the preload library's sites, the default, and with uprobes)
for path in preload uprobes; do
	lt_part a || break
	before=$check_errors
	opt=() oracle=$tmp/oracle_preload.json
	[ $path = uprobes ] && opt=(--no-preload) oracle=$tmp/oracle.json
	timeout -k 5 120 "$DWLEAK" --leak-check "${opt[@]}" -t 0 --format json -o "$tmp/cmd_$path.json" -- "$PROG" \
		> "$tmp/cmd.out" 2> "$tmp/cmd.err"
	rc=$?
	[ $rc -eq 0 ] || fail "-- CMD ($path): dwleak exit $rc, want 0: $(tail -3 "$tmp/cmd.err")"
	if [ $path = preload ]; then
		grep -q "preload, " "$tmp/cmd.err" || fail "-- CMD: not traced at the library's sites: $(head -3 "$tmp/cmd.err")"
	else
		grep -q "preload, " "$tmp/cmd.err" && fail "-- CMD --no-preload: traced at the library's sites"
	fi
	lt_check "$tmp/cmd_$path.json" "$oracle" << PY
$COMPARE
lc = r["totals"].get("leak_check")
if not lc:
    fail("no totals.leak_check")
else:
    for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "reachable"):
        b = sum(s["leak_kinds"][k]["bytes"] for s in r["stacks"])
        n = sum(s["leak_kinds"][k]["allocations"] for s in r["stacks"])
        if [lc[k]["bytes"], lc[k]["allocations"]] != [b, n]:
            fail("totals.leak_check.%s %s, the stacks add up to %d B in %d" % (k, lc[k], b, n))
    if not lc["scanned_bytes"] > 4096 or not 0 < lc["pause_ms"] < 10000:
        fail("scanned_bytes %s, pause_ms %s" % (lc["scanned_bytes"], lc["pause_ms"]))
for s in r["stacks"]:
    res = s.get("residency")
    if not res or res["resident_bytes"] + res["swapped_bytes"] + res["untouched_bytes"] != s["bytes"]:
        fail("stack %s: residency %s does not add up to its %d bytes" % (names(s)[:2], res, s["bytes"]))
rss = r.get("rss")
if not rss or abs(sum(v["share"] for k, v in rss.items() if k != "rss_bytes") - 1) > 0.01:
    fail("rss account %s does not add up to 1" % rss)
PY
	[ $check_errors -eq $before ] && pass "-- CMD ($path): every site's kind, bytes and blocks equal memcheck's"
done

# --- b: the text report's summary against memcheck's ---
if lt_part b; then
	before=$check_errors
	# the text report in a file (with -- CMD it would be on stderr)
	timeout -k 5 120 "$DWLEAK" --leak-check -o "$tmp/text.out" -- "$PROG" > /dev/null 2> "$tmp/text.err"
	for kind in "definitely lost" "indirectly lost" "possibly lost" "still reachable"; do
		want=$(grep -o "$kind: [0-9,]* bytes in [0-9,]* blocks" "$tmp/vgp.txt")
		got=$(grep -o "$kind: [0-9,]* bytes in [0-9,]* blocks" "$tmp/text.out")
		[ -n "$want" ] && [ "$got" = "$want" ] || fail "text: '$got', memcheck says '$want'"
	done
	# -t 10 cuts 19 stacks: every definitely lost record stays
	n=$(grep -c "are definitely lost in loss record" "$tmp/text.out")
	[ "$n" -eq 4 ] || fail "text: $n definitely lost loss records, want 4 (site_lost x2, tree root, cycle)"
	grep -q "the target was stopped for [0-9.]* ms" "$tmp/text.out" || fail "text: no pause figure"
	grep -q "^RSS explained:" "$tmp/text.out" || fail "text: no RSS account"
	[ $check_errors -eq $before ] && pass "text: LEAK SUMMARY equals memcheck's; lost records kept by --top"
fi

# --- c: -p on a running process ---
# twice: the memory read from a copy-on-write snapshot while the target
# runs on (the default), and with the target stopped while it is read
# (DWLEAK_LEAK_CHECK_STOP=1)
for mode in snapshot stop; do
if lt_part c; then
	before=$check_errors
	if [ $mode = stop ]; then
		export DWLEAK_LEAK_CHECK_STOP=1
	else
		unset DWLEAK_LEAK_CHECK_STOP
	fi
	lt_start target "$tmp/wait.out" "$PROG" --wait
	# --no-inject: the uprobe path, against memcheck on the program alone
	# (dwleak -p loading its library is compared in oracle_memcheck.sh)
	if lt_trace dw "$tmp/p.err" --leak-check --no-inject -t 0 --format json -o "$tmp/p.json" -p "$target"; then
		kill -USR1 "$target"
		lt_wait_line "$tmp/wait.out" ready || fail "-p: leak_kinds never said ready"
		kill -INT "$dw"
		lt_wait "$dw" 60
		rc=$?
		[ $rc -eq 0 ] || fail "-p: dwleak exit $rc: $(tail -3 "$tmp/p.err")"
		# site_before's block predates attach: a root for the scan, so
		# site_via_before's block is reachable through it
		# (and leak_kinds --wait has a fourth thread: its TLS block, like
		# the others', only pointed into)
		lt_check "$tmp/p.json" "$tmp/oracle.json" site_before allocate_dtv $mode << PY
$COMPARE
if r["totals"]["leak_check"]["snapshot"] != (ARGS[-1] == "snapshot"):
    fail("%s: the report's leak_check.snapshot is %s" % (ARGS[-1], r["totals"]["leak_check"]["snapshot"]))
if any("site_before" in names(s) for s in r["stacks"]):
    fail("site_before's block was allocated before attach but is in the report")
dtv = [s for s in r["stacks"] if "allocate_dtv" in names(s)]
kinds = {k for s in dtv for k, c in s["leak_kinds"].items() if c["bytes"]}
each = oracle["allocate_dtv"]["possibly_lost"]
if len(dtv) != 4 or kinds != {"possibly_lost"} or any(s["bytes"] != each[0] // each[1] for s in dtv):
    fail("the 4 threads' TLS blocks: %s" % [(s["bytes"], s["leak_kinds"]) for s in dtv])
PY
		state=$(awk '{ print $3 }' "/proc/$target/stat" 2> /dev/null)
		tracer=$(awk '/^TracerPid/ { print $2 }' "/proc/$target/status" 2> /dev/null)
		[ "$state" != t ] && [ "$state" != T ] && [ "$tracer" = 0 ] ||
			fail "-p: after the check the target is in state '$state', traced by '$tracer'"
		kill -USR2 "$target"
		lt_wait_line "$tmp/wait.out" alive || fail "-p: the target does not answer SIGUSR2 after the check"
	else
		fail "-p: dwleak did not attach"
	fi
	kill -KILL "$target" 2> /dev/null
	wait "$target" 2> /dev/null
	[ $check_errors -eq $before ] &&
		pass "-p ($mode): every site equals memcheck's, the pre-attach block is a root, the target runs on"
fi
done
unset DWLEAK_LEAK_CHECK_STOP

# --- d: --fail-on-leak counts lost bytes only ---
if lt_part d; then
	before=$check_errors
	timeout -k 5 120 "$DWLEAK" --leak-check --fail-on-leak -- "$PROG" > /dev/null 2> "$tmp/d1.err"
	rc=$?
	[ $rc -eq 1 ] || fail "--fail-on-leak --leak-check with lost blocks: exit $rc, want 1"
	timeout -k 5 120 "$DWLEAK" --leak-check --fail-on-leak -o "$tmp/d2.out" -- "$PROG" --reachable-only > /dev/null 2> "$tmp/d2.err"
	rc=$?
	[ $rc -eq 0 ] || fail "--fail-on-leak --leak-check, nothing lost: exit $rc, want 0: $(grep -E 'lost:' "$tmp/d2.out")"
	grep -q "definitely lost: 0 bytes in 0 blocks" "$tmp/d2.out" || fail "--reachable-only: definitely lost is not 0"
	timeout -k 5 120 "$DWLEAK" --fail-on-leak -- "$PROG" --reachable-only > /dev/null 2> "$tmp/d3.err"
	rc=$?
	[ $rc -eq 1 ] || fail "--fail-on-leak without --leak-check, blocks outstanding: exit $rc, want 1"
	# sampled, the check still sees every block (the library's index):
	# lost bytes fail it, all reachable passes
	timeout -k 5 120 "$DWLEAK" --leak-check --fail-on-leak --sample-bytes 4096 -- "$PROG" > /dev/null 2> "$tmp/d4.err"
	rc=$?
	[ $rc -eq 1 ] || fail "--fail-on-leak --leak-check --sample-bytes 4096 with lost blocks: exit $rc, want 1"
	timeout -k 5 120 "$DWLEAK" --leak-check --fail-on-leak --sample-bytes 4096 -- "$PROG" --reachable-only \
		> /dev/null 2> "$tmp/d5.err"
	rc=$?
	[ $rc -eq 0 ] || fail "--fail-on-leak --leak-check --sample-bytes 4096, nothing lost: exit $rc, want 0"
	[ $check_errors -eq $before ] && pass "--fail-on-leak: 1 for lost bytes, 0 for reachable ones after a leak check, sampled or not"
fi

# --- e: dwleak killed while the target is stopped for a check ---
if lt_part e; then
	before=$check_errors
	# 512 MiB to read: the check takes long enough to be caught
	lt_start target "$tmp/big.out" "$PROG" --wait --heap-mb 512
	if lt_trace dw "$tmp/e.err" --leak-check --interval 0.5 -p "$target"; then
		kill -USR1 "$target"
		caught=
		for ((i = 0; i < 3000 && !caught; i++)); do
			for st in /proc/"$target"/task/*/stat; do
				if [ "$(awk '{ print $3 }' "$st" 2> /dev/null)" = t ]; then
					kill -KILL "$dw"
					caught=1
					break
				fi
			done
		done
		wait "$dw" 2> /dev/null
		if [ -z "$caught" ]; then
			fail "the target was never seen stopped by a check"
		else
			sleep 0.5
			stopped=
			for st in /proc/"$target"/task/*/stat; do
				s=$(awk '{ print $3 }' "$st" 2> /dev/null)
				[ "$s" = t ] || [ "$s" = T ] && stopped="$stopped $s"
			done
			[ -z "$stopped" ] || fail "after dwleak was killed mid-check the target's threads are stopped:$stopped"
			: > "$tmp/big.out"
			kill -USR2 "$target"
			lt_wait_line "$tmp/big.out" alive || fail "the target does not answer after dwleak was killed mid-check"
		fi
	else
		fail "e: dwleak did not attach"
	fi
	kill -KILL "$target" 2> /dev/null
	wait "$target" 2> /dev/null
	[ $check_errors -eq $before ] && pass "SIGKILL of dwleak mid-check: the target runs on"
fi

# --- f: folded carries the kind ---
if lt_part f; then
	before=$check_errors
	timeout -k 5 120 "$DWLEAK" --leak-check -t 0 --format folded -o "$tmp/f.folded" -- "$PROG" > /dev/null 2>&1
	[ -s "$tmp/cmd_preload.json" ] || "$DWLEAK" --leak-check -t 0 --format json -o "$tmp/cmd_preload.json" \
		-- "$PROG" > /dev/null 2>&1
	lt_check "$tmp/cmd_preload.json" "$tmp/f.folded" << 'PY'
import collections
got = collections.Counter()
for line in open(ARGS[0]):
    path, b = line.rsplit(" ", 1)
    kind = path.split(";")[0]
    got[kind.strip("[]")] += int(b)
want = {k: v["bytes"] for k, v in r["totals"]["leak_check"].items() if isinstance(v, dict) and v["bytes"]}
if dict(got) != want:
    fail("folded kinds %s, the JSON's %s" % (dict(got), want))
PY
	[ $check_errors -eq $before ] && pass "folded: the kind is a frame, its bytes equal the JSON's"
fi

# --- g: checks of a process that changes its blocks all the time ---
if lt_part g; then
	before=$check_errors
	lt_start target "$tmp/churn.out" "$PROG" --wait --churn
	if lt_trace dw "$tmp/g.err" --leak-check --stats -t 0 --interval 0.5 --format json -o "$tmp/g.json" -p "$target" > "$tmp/g.text"; then
		kill -USR1 "$target"
		sleep 3
		kill -INT "$dw"
		lt_wait "$dw" 60
		rc=$?
		[ $rc -eq 0 ] || fail "churn: dwleak exit $rc: $(tail -3 "$tmp/g.err")"
		checks=$(grep -c "^LEAK SUMMARY" "$tmp/g.text")
		[ "$checks" -ge 3 ] || fail "churn: $checks interval reports with a leak check, want 3 or more"
		# the ring's blocks are all reachable but those being replaced
		# at the stop: in a register or not yet stored (reachable or
		# unclassified), never lost
		if grep -B1 -A3 "are definitely lost\|are indirectly lost" "$tmp/g.text" | grep -q site_churn; then
			fail "churn: site_churn called lost in an interval report: $(grep -A3 'lost in loss' "$tmp/g.text" | grep -B3 site_churn | head -8)"
		fi
		lt_check "$tmp/g.json" "$tmp/oracle.json" site_before allocate_dtv site_churn << PY
$COMPARE
if not r["totals"]["leak_check"]["snapshot"]:
    fail("churn: the checks did not read a snapshot")
churn = [s for s in r["stacks"] if "site_churn" in names(s)]
lost = sum(s["leak_kinds"][k]["bytes"] for s in churn for k in ("definitely_lost", "indirectly_lost", "possibly_lost"))
if not churn or lost:
    fail("site_churn: %d stacks, %d bytes lost or possibly lost" % (len(churn), lost))
PY
		# the path is tested when any of the run's checks took it (on a
		# loaded machine the last one may have met no change): --stats
		# counts them over all of a process's checks
		changed=$(sed -n 's/.*; \([0-9]*\) over its [0-9]* checks$/\1/p' "$tmp/g.err" | sort -n | tail -1)
		[ -n "$changed" ] && [ "$changed" -gt 0 ] ||
			fail "churn: --stats shows no block changed while the index was built ('$changed'): the path is untested"
	else
		fail "g: dwleak did not attach"
	fi
	kill -KILL "$target" 2> /dev/null
	wait "$target" 2> /dev/null
	[ $check_errors -eq $before ] && pass "-p on a churning process: its ring never lost, the rest as memcheck says, $changed blocks changed mid-check"
fi

# --- h: a sampled trace's check: every block from the library's index ---
if lt_part h; then
	before=$check_errors
	timeout -k 5 120 "$DWLEAK" --leak-check --sample-bytes 4096 -o "$tmp/h.text" -- "$PROG" > /dev/null 2> "$tmp/h.err"
	rc=$?
	[ $rc -eq 0 ] || fail "h: --leak-check --sample-bytes 4096: exit $rc: $(tail -3 "$tmp/h.err")"
	for kind in "definitely lost" "indirectly lost" "possibly lost" "still reachable"; do
		want=$(grep -o "$kind: [0-9,]* bytes in [0-9,]* blocks" "$tmp/vgp.txt")
		got=$(grep -o "$kind: [0-9,]* bytes in [0-9,]* blocks" "$tmp/h.text")
		[ -n "$want" ] && [ "$got" = "$want" ] || fail "h: sampled at 4096: '$got', memcheck says '$want'"
	done
	grep -q "every block classified, sampled or not" "$tmp/h.text" || fail "h: the text does not say the totals are exact"
	timeout -k 5 120 "$DWLEAK" --leak-check --sample-bytes 256 -t 0 --format json -o "$tmp/h256.json" -- "$PROG" \
		> /dev/null 2> "$tmp/h.err" || fail "h: json at 256: $(tail -3 "$tmp/h.err")"
	lt_check "$tmp/h256.json" "$tmp/oracle_preload.json" << PY
lc = r["totals"]["leak_check"]
oracle = json.load(open(ARGS[0]))
if lc.get("kinds_exact") is not True:
    fail("sampled at 256: totals.leak_check.kinds_exact is %s" % lc.get("kinds_exact"))
for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "reachable"):
    want = [sum(c[k][0] for c in oracle.values() if k in c), sum(c[k][1] for c in oracle.values() if k in c)]
    if [lc[k]["bytes"], lc[k]["allocations"]] != want:
        fail("sampled at 256: totals %s %s, memcheck %s" % (k, lc[k], want))
if sum(s["allocations"] for s in r["stacks"]) == 0:
    fail("sampled at 256: no stack sampled at all")
for s in r["stacks"]:
    res = s.get("residency")
    if not res or res["resident_bytes"] + res["swapped_bytes"] + res["untouched_bytes"] != s["bytes"]:
        fail("sampled at 256: stack %s: residency %s does not add up to its estimated %d bytes" % (names(s)[:2], res, s["bytes"]))
    if s.get("bytes_stderr") is None or any(v is None for v in s.get("leak_kinds_stderr", {}).values()):
        fail("sampled at 256: stack %s states no error: %s %s" % (names(s)[:2], s.get("bytes_stderr"), s.get("leak_kinds_stderr")))
PY
	timeout -k 5 120 "$DWLEAK" --leak-check --sample-bytes 1 -t 0 --format json -o "$tmp/h1.json" -- "$PROG" \
		> /dev/null 2> "$tmp/h.err" || fail "h: json at 1: $(tail -3 "$tmp/h.err")"
	lt_check "$tmp/h1.json" "$tmp/oracle_preload.json" << PY
$COMPARE
PY
	# -p, the library injected: the same totals as the exact check
	for how in exact sampled; do
		lt_start target "$tmp/hw_$how.out" "$PROG" --wait
		# attached once it waits in main, not while it starts
		lt_wait_line "$tmp/hw_$how.out" waiting || fail "h -p: leak_kinds never said waiting"
		opt=()
		[ $how = sampled ] && opt=(--sample-bytes 4096)
		if lt_trace dw "$tmp/hp.err" --leak-check "${opt[@]}" -t 0 --format json -o "$tmp/hp_$how.json" -p "$target"; then
			kill -USR1 "$target"
			lt_wait_line "$tmp/hw_$how.out" ready || fail "h -p: leak_kinds never said ready"
			kill -INT "$dw"
			lt_wait "$dw" 60
			rc=$?
			[ $rc -eq 0 ] || fail "h -p ($how): dwleak exit $rc: $(tail -3 "$tmp/hp.err")"
			grep -q "injected" "$tmp/hp.err" || fail "h -p ($how): the library was not injected: $(head -2 "$tmp/hp.err")"
		else
			fail "h -p ($how): dwleak did not attach"
		fi
		kill -KILL "$target" 2> /dev/null
		wait "$target" 2> /dev/null
	done
	grep -m3 "warning\|note" "$tmp/hp.err" | sed 's/^/    /'
	lt_check "$tmp/hp_sampled.json" "$tmp/hp_exact.json" << PY
lc = r["totals"]["leak_check"]
ex = json.load(open(ARGS[0]))["totals"]["leak_check"]
if lc.get("kinds_exact") is not True or not lc["snapshot"]:
    fail("-p sampled: kinds_exact %s, snapshot %s" % (lc.get("kinds_exact"), lc["snapshot"]))
for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "reachable", "unsure"):
    if lc[k] != ex[k]:
        fail("-p sampled: %s %s, the exact check %s" % (k, lc[k], ex[k]))
if ex["definitely_lost"]["bytes"] == 0:
    fail("-p exact: nothing definitely lost: the comparison proves nothing")
PY
	timeout -k 5 60 "$DWLEAK" --leak-check --sample-bytes 4096 --no-preload -- "$PROG" > /dev/null 2> "$tmp/h2.err"
	rc=$?
	[ $rc -eq 2 ] && grep -q "preload library's index" "$tmp/h2.err" ||
		fail "h: --no-preload with a sampled check: exit $rc, want 2 with a reason: $(head -2 "$tmp/h2.err")"
	[ $check_errors -eq $before ] && pass "sampled check: every block classified exactly (memcheck's summary at 4096, each site at 1, -p as exact), --no-preload refused"
fi

# --- i: a process that spoils its own index: only it loses its verdict ---
if lt_part i; then
	before=$check_errors
	SCRIB=$TESTDATA/index_scribble
	[ -x "$SCRIB" ] || fail_now "$SCRIB is missing (make testdata)"
	timeout -k 5 120 "$DWLEAK" --leak-check --sample-bytes 4096 -t 0 --format json -o "$tmp/i.json" -- "$SCRIB" \
		> "$tmp/i.out" 2> "$tmp/i.err"
	rc=$?
	[ $rc -eq 0 ] || fail "i: dwleak exit $rc: $(tail -3 "$tmp/i.err")"
	grep -q "scribbled yes" "$tmp/i.out" || fail "i: the program did not find its index to spoil: $(cat "$tmp/i.out")"
	grep -q "leak check of pid [0-9]* .* failed: its block index at 0x[0-9a-f]* cannot be read" "$tmp/i.err" ||
		fail "i: no message naming the spoiled index: $(grep -m2 warning "$tmp/i.err")"
	lt_check "$tmp/i.json" << 'PY'
lc = r["totals"]["leak_check"]
procs = r["processes"]
parent = [p for p in procs if p["ppid"] == 0]
child = [p for p in procs if p["ppid"] != 0]
if len(parent) != 1 or len(child) != 1:
    fail("want one parent and one child: %s" % procs)
else:
    if not parent[0]["unchecked"] or "block index" not in parent[0]["unchecked"]:
        fail("the parent's unchecked reason: %s" % parent[0]["unchecked"])
    if child[0]["unchecked"]:
        fail("the child was not classified: %s" % child[0]["unchecked"])
# the child's two blocks (100 B inherited, 200 B its own), lost, are all
# the exact totals hold: the parent's are in none
if [lc["definitely_lost"]["bytes"], lc["definitely_lost"]["allocations"]] != [300, 2] or lc.get("kinds_exact") is not True:
    fail("totals: %s" % lc)
PY
	timeout -k 5 120 "$DWLEAK" --leak-check --fail-on-leak=1000000 --sample-bytes 4096 -o /dev/null -- "$SCRIB" \
		> /dev/null 2> "$tmp/i2.err"
	rc=$?
	[ $rc -eq 2 ] && grep -q "fail-on-leak cannot pass: the leak check of pid" "$tmp/i2.err" ||
		fail "i: --fail-on-leak with a failed sampled check: exit $rc, want 2: $(tail -2 "$tmp/i2.err")"
	[ $check_errors -eq $before ] && pass "a spoiled index: that process unclassified with the reason, its child exact, --fail-on-leak exit 2"
fi

# --- j: an index per session: frees made while nobody listened ---
if lt_part j; then
	before=$check_errors
	SESS=$TESTDATA/index_sessions
	[ -x "$SESS" ] || fail_now "$SESS is missing (make testdata)"
	LD_PRELOAD=$("$DWLEAK" preload) lt_start target "$tmp/j.out" "$SESS"
	lt_wait_line "$tmp/j.out" waiting || fail "j: index_sessions never said waiting"
	for n in 1 2; do
		if lt_trace dw "$tmp/j$n.err" --leak-check --sample-bytes 4096 -t 0 --format json -o "$tmp/j$n.json" -p "$target"; then
			if [ $n = 1 ]; then
				kill -USR1 "$target"
				lt_wait_line "$tmp/j.out" allocated || fail "j: never said allocated"
			fi
			kill -INT "$dw"
			lt_wait "$dw" 60 || fail "j: session $n: dwleak exit $?: $(tail -3 "$tmp/j$n.err")"
		else
			fail "j: session $n did not attach"
		fi
		# freed while no dwleak listens
		[ $n = 1 ] && { kill -USR2 "$target"; lt_wait_line "$tmp/j.out" freed || fail "j: never said freed"; }
	done
	kill -KILL "$target" 2> /dev/null
	wait "$target" 2> /dev/null
	lt_check "$tmp/j1.json" "$tmp/j2.json" << 'PY'
one = r["totals"]["leak_check"]
two = json.load(open(ARGS[0]))["totals"]["leak_check"]
KINDS = ("definitely_lost", "indirectly_lost", "possibly_lost", "reachable")
b1 = sum(one[k]["bytes"] for k in KINDS)
b2 = sum(two[k]["bytes"] for k in KINDS)
if one.get("kinds_exact") is not True or two.get("kinds_exact") is not True:
    fail("kinds_exact: %s, %s" % (one.get("kinds_exact"), two.get("kinds_exact")))
elif one["reachable"]["bytes"] < 10000:
    fail("session 1 did not see the 10 kept blocks as reachable: %s" % one)
elif b2 >= 10000:
    fail("session 2 classified %d bytes: the blocks freed between the sessions are in its index (%s)" % (b2, two))
else:
    ok("session 1: %d B classified (the 10 blocks reachable); session 2: %d B (none of them)" % (b1, b2))
PY
	[ $check_errors -eq $before ] && pass "an index per session: blocks freed while nobody listened are not in the next check"
fi

check_finish
