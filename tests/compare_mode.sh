#!/bin/bash
# Comparison mode (--unwind both) on the seed article's program built -O0
# with frame pointers, where only Debian's libstdc++ lacks them: the
# frame-pointer walk must lose LeakLib::slowMemoryLeak (the article's
# finding), the DWARF walk must have it, and the summary must blame
# libstdc++.so.6.  The malloc variant (no libstdc++ in the chain) must show
# the two walks agreeing.  Also: --unwind fp alone, json in both modes, and
# --interval's growth figures.
source "$(dirname "$0")/lib_trace.sh"
lt_require_bpf

# a. the seed: FP loses slowMemoryLeak, libstdc++ is to blame
out=$LT_TMP/both.json
"$DWLEAK" --unwind both --format json -o "$out" -t 0 -- "$TESTDATA/seed_O0_fp" \
	--iterations 25 --interval-ms 5 2> "$LT_TMP/both.err" > /dev/null
rc=$?
[ $rc -eq 0 ] || fail "dwleak --unwind both exited $rc: $(tail -2 "$LT_TMP/both.err")"
lt_check "$out" << 'EOF'
s = top_stack_with("LeakLib::slowMemoryLeak()")
if s is None:
    fail("no stack with LeakLib::slowMemoryLeak in the DWARF walk")
else:
    if s["bytes"] != 1000 or s["allocations"] != 25:
        fail("seed stack: %d B in %d allocations, want 1000 in 25" % (s["bytes"], s["allocations"]))
    fp = [base(f["function"]) for f in s.get("fp_frames", [])]
    if "LeakLib::slowMemoryLeak()" in fp:
        fail("the FP walk has slowMemoryLeak: %s" % fp)
    for want in ("malloc", "operator new", "caller", "main"):
        if not any(n and n.startswith(want) for n in fp):
            fail("the FP walk lacks %s: %s" % (want, fp))
    d = s.get("fp_divergence")
    if d is None or names(s)[d] != "LeakLib::slowMemoryLeak()":
        fail("fp_divergence %r should point at slowMemoryLeak in %s" % (d, names(s)))
    else:
        ok("FP walk loses LeakLib::slowMemoryLeak; DWARF has it: %s" % fp)
summ = r.get("fp_summary")
if not summ or not summ["modules"]:
    fail("no fp_summary")
else:
    top = summ["modules"][0]["module"] or ""
    if "libstdc++.so.6" not in top:
        fail("summary blames %s first, want libstdc++.so.6" % top)
    else:
        ok("summary names %s" % top)
EOF

# b. the malloc variant: the leak's two walks agree
out=$LT_TMP/malloc.json
"$DWLEAK" --unwind both --format json -o "$out" -t 0 -- "$TESTDATA/seed_malloc_O0_fp" \
	--iterations 25 --interval-ms 5 2> "$LT_TMP/malloc.err" > /dev/null
lt_check "$out" << 'EOF'
s = top_stack_with("LeakLib::slowMemoryLeak()")
if s is None:
    fail("no seed stack in the malloc variant")
elif s.get("fp_divergence") is not None:
    fail("walks disagree at %r: dwarf %s fp %s" % (s.get("fp_divergence"), names(s),
         [f["function"] for f in s["fp_frames"]]))
else:
    ok("malloc variant: FP and DWARF agree on %s" % names(s))
EOF

# c. the text report shows the walks side by side with the divergence marked
# (in a file: with -- CMD it would be on stderr)
"$DWLEAK" --unwind both -t 3 -o "$LT_TMP/both.txt" -- "$TESTDATA/seed_O0_fp" --iterations 10 --interval-ms 5 \
	> /dev/null 2> /dev/null
if grep -q '^	>>	LeakLib::slowMemoryLeak().* | (missing)$' "$LT_TMP/both.txt" &&
	grep -q '^Frame pointers vs DWARF: .* stacks agree' "$LT_TMP/both.txt" &&
	grep -q 'lost at .*libstdc++.so.6.*rebuild this one' "$LT_TMP/both.txt"; then
	pass "text: side by side, divergence marked, libstdc++ named"
else
	fail "text comparison report:"
	sed 's/^/    /' "$LT_TMP/both.txt" | head -40
fi

# d. --unwind fp alone: the same bookkeeping with the FP stack
out=$LT_TMP/fp.json
"$DWLEAK" --unwind fp --format json -o "$out" -t 0 -- "$TESTDATA/seed_O0_fp" \
	--iterations 25 --interval-ms 5 2> /dev/null > /dev/null
lt_check "$out" << 'EOF'
if r["unwind"] != "fp":
    fail("unwind is %r" % r["unwind"])
s = top_stack_with("caller()")
if s is None or s["allocations"] != 25 or "LeakLib::slowMemoryLeak()" in names(s):
    fail("fp mode seed stack wrong: %s" % (show(s) if s else None))
elif "fp_frames" in s:
    fail("fp_frames present without --unwind both")
else:
    ok("--unwind fp: 25 allocations on the FP stack %s" % names(s))
EOF

# e. --interval: each top stack shows how fast it grew (the reports of -- CMD
# are on stderr, where the command's stdout cannot mix into them)
"$DWLEAK" -i 1 -d 3.5 -t 2 -- "$TESTDATA/seed_O2" --interval-ms 10 --iterations 400 \
	> /dev/null 2> "$LT_TMP/int.txt"
n=$(grep -c 'Top .* stacks with outstanding allocations' "$LT_TMP/int.txt")
growth=$(grep -E 'bytes in [0-9]+ allocations from stack .*\+[0-9.]+ (B|KiB)/s' "$LT_TMP/int.txt" | head -1)
if [ "$n" -ge 3 ] && [ -n "$growth" ]; then
	pass "--interval: $n reports, growth shown: $growth"
else
	fail "--interval: $n reports; growth line: '$growth'"
	head -30 "$LT_TMP/int.txt" | sed 's/^/    /'
fi

# f. --min-age: allocations younger than the age are left out
"$DWLEAK" --min-age 1 -d 2.5 --format json -o "$LT_TMP/age.json" -t 0 -- "$TESTDATA/seed_O2" \
	--interval-ms 10 --iterations 1000 > /dev/null 2>&1
lt_check "$LT_TMP/age.json" << 'PYEOF'
s = top_stack_with("LeakLib::slowMemoryLeak()")
d = r["duration_s"]
if s is None:
    fail("--min-age: no seed stack")
else:
    # one allocation per 10 ms, only those made more than 1 s before the end
    want = (d - 1.0) / 0.01
    if not (0.6 * want <= s["allocations"] <= 1.1 * want) or s["oldest_age_s"] < 1.0:
        fail("--min-age 1 over %.2f s: %d allocations (want about %d), oldest %.2f s" %
             (d, s["allocations"], want, s["oldest_age_s"]))
    else:
        ok("--min-age 1: %d allocations over %.2f s (all older than 1 s)" % (s["allocations"], d))
PYEOF

check_finish
