#!/bin/bash
# jemalloc's own API under dwleak: mallocx, rallocx (moves the accounting),
# xallocx (resizes in place), sdallocx and dallocx (free), nallocx (no
# allocation).  testdata/jemalloc_api writes what it holds per site; the
# report must match it exactly.
source "$(dirname "$0")/lib_trace.sh"
lt_require_bpf

JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[ -f "$JEMALLOC" ] || { fail "$JEMALLOC is not installed (.ci/deps.sh installs libjemalloc2)"; check_finish; }
lt_preload_dwleak

LD_PRELOAD=$JEMALLOC "$DWLEAK_PRELOAD" --format json -o "$LT_TMP/je.json" -t 0 -- \
	"$TESTDATA/jemalloc_api" --ledger "$LT_TMP/ledger.json" > /dev/null 2> "$LT_TMP/err"
rc=$?
[ $rc -eq 0 ] || fail "dwleak exited $rc: $(tail -2 "$LT_TMP/err")"
grep -q "jemalloc in .*(LD_PRELOAD)" "$LT_TMP/err" || fail "tracing line does not name jemalloc: $(head -1 "$LT_TMP/err")"
lt_check "$LT_TMP/je.json" "$LT_TMP/ledger.json" << 'EOF2'
ledger = json.load(open(ARGS[0]))
want_alloc = {"site_mallocx": "mallocx", "site_rallocx": "rallocx", "site_xallocx": "mallocx"}
got = site_totals()
for s in r["stacks"]:
    site = site_of(s)
    if site in want_alloc and s["allocator"] != want_alloc[site]:
        fail("%s: allocator %r, want %r" % (site, s["allocator"], want_alloc[site]))
check_sites(ledger, got)
if r["counters"].get("allocs_resized", 0) != 3:
    fail("xallocx resizes seen: %r, want 3" % r["counters"].get("allocs_resized"))
EOF2
check_finish
