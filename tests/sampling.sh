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
source "$(dirname "$0")/lib_trace.sh"
lt_require_bpf

N=65536
"$DWLEAK" --sample-bytes $N --format json -o "$LT_TMP/s.json" -t 0 -- "$TESTDATA/ledger" \
	--ops 20000 --ledger "$LT_TMP/ledger.json" > /dev/null 2> "$LT_TMP/err"
rc=$?
[ $rc -eq 0 ] || fail "dwleak --sample-bytes exited $rc: $(tail -2 "$LT_TMP/err")"
lt_check "$LT_TMP/s.json" "$LT_TMP/ledger.json" "$N" << 'EOF2'
import math
ledger = json.load(open(ARGS[0]))["sites"]
n = float(ARGS[1])
if r.get("sample_bytes") != int(n):
    fail("report has sample_bytes %r, want %d" % (r.get("sample_bytes"), n))
est = {}
for s in r["stacks"]:
    site = site_of(s)
    if site:
        est[site] = est.get(site, 0) + s["bytes"]
worst = 0.0
tot_true = tot_est = 0
for site, want in sorted(ledger.items()):
    b = want["bytes"]
    if b == 0:
        continue
    e = est.get(site, 0)
    sd = math.sqrt(n * b)
    z = (e - b) / sd
    if b >= 8 * n:
        worst = max(worst, abs(z))
    tot_true += b
    tot_est += e
    line = "%-24s true %9d  estimate %9d  (%+.1f%%, %+.2f sd)" % (site, b, e, 100.0 * (e - b) / b, z)
    if b < 8 * n:
        print("info: " + line + "  (under 8 samples expected: not judged)")
    elif abs(z) > 4.5:
        fail(line)
    else:
        ok(line)
z = (tot_est - tot_true) / math.sqrt(n * tot_true)
line = "all sites: true %d estimate %d (%+.2f%%, %+.2f sd); worst site %.2f sd" % (
    tot_true, tot_est, 100.0 * (tot_est - tot_true) / tot_true, z, worst)
if abs(z) > 4.5:
    fail(line)
else:
    ok(line)
if r["counters"].get("allocs_not_sampled", 0) == 0:
    fail("no allocation was left unsampled: sampling is not on")
EOF2
lt_finish
