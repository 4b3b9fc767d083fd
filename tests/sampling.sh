#!/bin/bash
# --sample-bytes: on the ledger program (4 threads, every allocation
# function, 19 call sites with known outstanding bytes), each site's
# estimated bytes must lie within the documented error: the estimate is
# unbiased with a standard deviation of at most sqrt(N * B) for a site of B
# bytes sampled every N bytes (the bound --help and the README give as a
# relative error of sqrt(N/B)).  4.5 standard deviations per site, so an
# honest run fails about once in 10^4; sites expecting fewer than 8 samples
# (B < 8N), where the normal approximation does not hold, are only shown.
# The total over all sites, a much tighter estimate, must be within 4.5 of
# its own.
# Twice: through the preload library's sites (the default for -- CMD: the
# library samples in the process; the allocation site must have fired for
# far fewer calls than the program made), and with --no-preload (the
# kernel program samples at the uprobes: allocs_not_sampled counts the
# rest).
source "$(dirname "$0")/lib_trace.sh"
lt_require_bpf

N=65536
for mode in preload uprobes; do
	echo "== $mode"
	flag=
	[ $mode = uprobes ] && flag=--no-preload
	"$DWLEAK" $flag --sample-bytes $N --format json -o "$LT_TMP/$mode.json" -t 0 -- "$TESTDATA/ledger" \
		--ops 20000 --ledger "$LT_TMP/$mode.ledger" > /dev/null 2> "$LT_TMP/$mode.err"
	rc=$?
	[ $rc -eq 0 ] || fail "$mode: dwleak --sample-bytes exited $rc: $(tail -2 "$LT_TMP/$mode.err")"
	line=$(grep -m1 '^dwleak: tracing' "$LT_TMP/$mode.err")
	if [ $mode = preload ] && [[ $line != *"(preload, "* ]]; then
		fail "$mode: the tracing line does not say preload: $line"
	elif [ $mode = uprobes ] && [[ $line == *preload* ]]; then
		fail "$mode: the tracing line says preload: $line"
	fi
	lt_check "$LT_TMP/$mode.json" "$LT_TMP/$mode.ledger" "$N" "$mode" << 'EOF2'
ledger_all = json.load(open(ARGS[0]))
ledger = ledger_all["sites"]
n = float(ARGS[1])
mode = ARGS[2]
if r.get("sample_bytes") != int(n):
    fail("report has sample_bytes %r, want %d" % (r.get("sample_bytes"), n))
check_estimates(ledger, n)
c = r["counters"]
if mode == "uprobes":
    if c.get("allocs_not_sampled", 0) == 0:
        fail("no allocation was left unsampled: sampling is not on")
elif c.get("alloc_calls", 0) * 4 > ledger_all["calls"]:
    fail("the allocation site fired %d times for the program's %d calls: the library does not sample"
         % (c.get("alloc_calls", 0), ledger_all["calls"]))
else:
    ok("the allocation site fired %d times for the program's %d calls" % (c.get("alloc_calls", 0), ledger_all["calls"]))
EOF2
done
check_finish
