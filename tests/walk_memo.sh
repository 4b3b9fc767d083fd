#!/bin/bash
# The walker remembers whole walks per CPU by where they start (pc, rsp)
# and repeats one only when every stack word it read still holds the same
# value (bpf/dwleak.bpf.c, walk_memo).  testdata/same_depth reaches malloc
# from from_left and from_right through leaf() with the same rsp and the
# same return address into leaf; only the next return address differs.
# 3000 calls, every third from from_left (24 B), the others from
# from_right (40 B): the report must hold exactly
#   malloc <- leaf <- from_left  <- main: 24000 B in 1000 allocations
#   malloc <- leaf <- from_right <- main: 80000 B in 2000 allocations
# Then the same program walked in the process, with the library's memo.
# and --stats must show remembered walks were used (from_right after
# from_right), so the case is really exercised.  The kernel walks here
# (--walk kernel): by default the preload library walks in the process
# once dwleak hands it the image, and how many calls come before that
# depends on timing (CI once saw none).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
lt_testdata same_depth
echo "== same_depth --iterations 3000 (-- CMD)"
timeout -k 5 60 "$DWLEAK" --walk kernel --stats -t 0 --format json -o "$T/memo.json" -- "$PROG" --iterations 3000 \
	> "$T/memo.out" 2> "$T/memo.err"
rc=$?
[ $rc -eq 0 ] || { fail "dwleak exited $rc"; sed 's/^/    /' "$T/memo.err" | tail -n 20; }
remembered=$(sed -n 's/^dwleak: stats: walks_remembered \([0-9]*\)$/\1/p' "$T/memo.err")
# 1000 of the 3000 walks follow a walk from the same place (from_right
# after from_right); a move to another CPU between two costs one.
if [ "${remembered:-0}" -ge 500 ]; then
	pass "walks_remembered $remembered: remembered walks were used"
else
	fail "walks_remembered '${remembered}': the memo was used fewer than 500 times of 1000 it could be"
fi
# the stacks of same_depth --iterations N, exact: its calls i % 3 == 0
# from from_left (24 B), the others from from_right (40 B)
same_depth_check() {
	lt_check "$1" "$2" << 'PY'
n = int(ARGS[0])
left = (n + 2) // 3
want = {"from_left": (24 * left, left), "from_right": (40 * (n - left), n - left)}
for fn, (b, a) in want.items():
    s = only_stack_with(fn)
    if s is None:
        continue
    n = names(s)
    if n[:4] != ["malloc", "leaf", fn, "main"]:
        fail("%s: frames %s, want malloc, leaf, %s, main, ..." % (fn, n, fn))
    elif (s["bytes"], s["allocations"]) != (b, a):
        fail("%s: %d B in %d allocations, want %d B in %d:\n%s" % (fn, s["bytes"], s["allocations"], b, a, show(s)))
    else:
        ok("%s: malloc <- leaf <- %s <- main, %d B in %d allocations" % (fn, fn, b, a))
mixed = [s for s in r["stacks"] if "leaf" in names(s) and not ({"from_left", "from_right"} & set(names(s)))]
for s in mixed:
    fail("a leaf stack with neither caller:\n" + show(s))
PY
}
same_depth_check "$T/memo.json" 3000

# The same in the process (the default walk): the preload library's memo
# of whole walks (preload/walk.c, walk_dwarf_memo), one per thread, keyed
# the same way but two-way: from_left's and from_right's walks share a set
# and both stay remembered, told apart by the return address into
# from_left or from_right.  Its first calls fire the sites (the kernel's
# walk) until dwleak hands the library its image; 99,999 calls leave tens
# of thousands to the library, nearly all of them answered by the memo.
echo "== same_depth --iterations 99999, walked in the process"
timeout -k 5 60 "$DWLEAK" --stats -t 0 --format json -o "$T/proc.json" -- "$PROG" --iterations 99999 \
	> "$T/proc.out" 2> "$T/proc.err"
rc=$?
[ $rc -eq 0 ] || { fail "dwleak exited $rc"; sed 's/^/    /' "$T/proc.err" | tail -n 20; }
read -r applied answered < <(sed -n 's/^dwleak: stats: pid [0-9]* walked in the process: \([0-9]*\) records applied.* \([0-9]*\) walks answered by the thread.s memo.*/\1 \2/p' "$T/proc.err")
if [ "${applied:-0}" -lt 3000 ]; then
	fail "only '${applied}' records walked in the process of 99999 calls: $(grep -m1 'walked in' "$T/proc.err")"
elif [ "${answered:-0}" -ge $((applied * 9 / 10)) ]; then
	pass "$answered of $applied walks in the process answered by the thread's memo"
else
	fail "$answered of $applied walks in the process answered by the memo: want nine in ten (two walks, one set)"
fi
same_depth_check "$T/proc.json" 99999
check_finish
