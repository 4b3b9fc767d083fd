#!/bin/bash
# --mmap: a program's own anonymous mmaps, partial munmaps and mremap are
# accounted exactly, and large mallocs that glibc serves with mmap are
# counted once, as malloc (testdata/mmap_ledger.c writes what it holds per
# site; every site's bytes and regions must match dwleak's report).
source "$(dirname "$0")/lib_trace.sh"
lt_require_bpf

out=$LT_TMP/mmap.json
ledger=$LT_TMP/ledger.json
"$DWLEAK" --mmap --format json -o "$out" -t 0 -- "$TESTDATA/mmap_ledger" --ledger "$ledger" \
	2> "$LT_TMP/err" > /dev/null
rc=$?
[ $rc -eq 0 ] || fail "dwleak --mmap exited $rc: $(tail -3 "$LT_TMP/err")"
lt_check "$out" "$ledger" << 'EOF2'
ledger = json.load(open(ARGS[0]))
got = {}
for s in r["stacks"]:
    fns = names(s)
    for site in ledger:
        if site in fns:
            b, c = got.get(site, (0, 0))
            got[site] = (b + s["bytes"], c + s["allocations"])
            if site == "site_big_malloc" and s["allocator"] != "malloc":
                fail("big malloc reported as %r (counted twice?)" % s["allocator"])
            if site.startswith("site_mmap") and s["allocator"] != "mmap":
                fail("%s reported with allocator %r" % (site, s["allocator"]))
check_sites(ledger, got)
if r["counters"].get("mmap_calls_in_allocator", 0) < 3:
    fail("the big mallocs' own mmaps were not recognised as the allocator's")
EOF2
check_finish
