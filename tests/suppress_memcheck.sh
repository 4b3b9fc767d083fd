#!/bin/bash
# memcheck's suppression files in dwleak: valgrind --gen-suppressions=all
# on testdata/supp_leaks writes one suppression per loss record (mangled
# C++ names, operator new[] as _Znam, an inlined call by its own name,
# match-leak-kinds); given to dwleak --leak-check --fail-on-leak they
# leave out exactly the program's leak stacks (exit 0), without them it
# fails (exit 1).  Then: a file missing one rule leaves that stack alone;
# a stack with lost and reachable blocks stays under either of its two
# rules alone (dwleak suppresses whole stacks: it may report more than
# memcheck, never less); one file of both formats, and the same rules in
# two --suppressions files; valgrind's own default.supp loads, its other
# kinds skipped and counted under --stats.
source "$(dirname "$0")/lib_trace.sh"

lt_require_bpf
lt_testdata supp_leaks
if ! command -v valgrind > /dev/null; then
	echo "skip: valgrind is not installed (.ci/deps.sh installs it): no suppressions to generate"
	exit 77
fi

# The sites and their stacks' bytes, and what the leak check makes of them.
SITES_PY='
SITES = {"SuppLeaks::new_leak()": 32, "SuppLeaks::new_array_leak()": 40,
         "SuppLeaks::inlined_new_leak()": 16, "malloc_leak": 24,
         "reachable_cache": 64, "mixed_leak": 96}
def site_stacks():
    return {fn: [s for s in r["stacks"] if fn in names(s)] for fn in SITES}
'

# trace NAME ARGS... : dwleak --leak-check --fail-on-leak ARGS on the
# program, the report in $LT_TMP/NAME.json; sets rc to its exit status.
trace() {
	local name=$1
	shift
	timeout -k 5 120 "$DWLEAK" --leak-check --fail-on-leak --format json -o "$LT_TMP/$name.json" "$@" \
		-- "$PROG" > "$LT_TMP/$name.out" 2> "$LT_TMP/$name.err"
	rc=$?
}

# drop_blocks FILE RE [RE2] : FILE without the memcheck blocks whose text
# matches RE (and RE2, when given).
drop_blocks() {
	awk -v a="$2" -v b="${3:-}" '
		/^\{/ { blk = ""; inside = 1 }
		inside { blk = blk $0 "\n"; if ($0 ~ /^\}/) { if (!(blk ~ a && blk ~ b)) printf "%s", blk; inside = 0 }; next }
		{ print }' "$1"
}

# remains NAME FN... : the report NAME has a stack for each FN and for no
# other site.
remains() {
	local name=$1
	shift
	lt_check "$LT_TMP/$name.json" "$@" << PY
$SITES_PY
left = sorted(fn for fn, st in site_stacks().items() if st)
if left != sorted(ARGS):
    fail("$name: stacks left of %s, want %s" % (left, sorted(ARGS)))
else:
    ok("$name: the stacks left are those of %s" % (ARGS or "no site"))
PY
}

# a) valgrind writes the suppressions: one block per loss record.
valgrind --leak-check=full --show-leak-kinds=all --gen-suppressions=all --log-file="$LT_TMP/vg.log" \
	"$PROG" > "$LT_TMP/vg.out" 2>&1
grep -v '^==' "$LT_TMP/vg.log" > "$LT_TMP/gen.supp"
n=$(grep -c '^{' "$LT_TMP/gen.supp")
if [ "$n" -ne 7 ]; then
	fail "valgrind wrote $n suppressions, want 7 (one per loss record):"
	sed 's/^/    /' "$LT_TMP/vg.log"
else
	pass "valgrind --gen-suppressions=all wrote 7 suppressions"
fi
for want in fun:_ZN9SuppLeaks8new_leakEv fun:_Znam fun:_Znwm fun:grab 'match-leak-kinds: reachable'; do
	grep -qxF "   $want" "$LT_TMP/gen.supp" || fail "valgrind's suppressions have no '$want' line"
done

# b) without them the program's leaks fail the run.
trace none
[ "$rc" -eq 1 ] && pass "no suppressions: exit 1" || fail "no suppressions: exit $rc, want 1: $(tail -n 3 "$LT_TMP/none.err")"
lt_check "$LT_TMP/none.json" << PY
$SITES_PY
for fn, st in site_stacks().items():
    if len(st) != 1 or st[0]["bytes"] != SITES[fn]:
        fail("%s: want one stack of %d B:\n%s" % (fn, SITES[fn], "".join(show(s) for s in st)))
mixed = site_stacks()["mixed_leak"]
if mixed:
    k = mixed[0].get("leak_kinds", {})
    if k.get("definitely_lost", {}).get("bytes") != 48 or k.get("reachable", {}).get("bytes") != 48:
        fail("mixed_leak: want 48 B definitely lost and 48 B reachable, got %s" % k)
ok("no suppressions: one stack per site, mixed_leak's lost and reachable")
PY
remains none "SuppLeaks::new_leak()" "SuppLeaks::new_array_leak()" "SuppLeaks::inlined_new_leak()" \
	malloc_leak reachable_cache mixed_leak

# c) with them: exit 0, exactly the six stacks taken by valgrind's rules.
trace gen --suppressions "$LT_TMP/gen.supp"
[ "$rc" -eq 0 ] && pass "valgrind's suppressions: exit 0" ||
	fail "valgrind's suppressions: exit $rc, want 0: $(tail -n 3 "$LT_TMP/gen.err")"
remains gen
lt_check "$LT_TMP/gen.json" "$LT_TMP/gen.supp" << PY
$SITES_PY
mine = [x for x in r.get("suppressed", []) if ("(%s:" % ARGS[0]) in x["rule"]]
stacks = sum(x["stacks"] for x in mine)
b = sum(x["bytes"] for x in mine)
if stacks != len(SITES) or b != sum(SITES.values()):
    fail("valgrind's rules took %d stacks, %d B; want the %d sites' %d B: %s" % (
        stacks, b, len(SITES), sum(SITES.values()), mine))
elif not all(x["rule"].startswith("<insert_a_suppression_name_here> (") for x in mine):
    fail("rules not named after valgrind's NAME: %s" % [x["rule"] for x in mine])
else:
    ok("valgrind's rules took exactly the 6 site stacks (%d B), named NAME (FILE:LINE)" % b)
PY

# d) without the rule for malloc_leak, its stack alone stays and fails the run.
drop_blocks "$LT_TMP/gen.supp" 'fun:malloc_leak' > "$LT_TMP/no_malloc.supp"
trace no_malloc --suppressions "$LT_TMP/no_malloc.supp"
[ "$rc" -eq 1 ] && pass "malloc_leak's rule dropped: exit 1" || fail "malloc_leak's rule dropped: exit $rc, want 1"
remains no_malloc malloc_leak

# e) mixed_leak's stack holds a lost and a reachable block: each of its two
# rules alone leaves the whole stack in the report.
for kind in definite reachable; do
	drop_blocks "$LT_TMP/gen.supp" 'fun:mixed_leak' "match-leak-kinds: $kind" > "$LT_TMP/mixed_$kind.supp"
	trace "mixed_$kind" --suppressions "$LT_TMP/mixed_$kind.supp"
	[ "$rc" -eq 1 ] && pass "mixed_leak without its $kind rule: exit 1" ||
		fail "mixed_leak without its $kind rule: exit $rc, want 1"
	remains "mixed_$kind" mixed_leak
done

# f) both formats in one file, and the same rules in two files.
{
	drop_blocks "$LT_TMP/gen.supp" 'fun:malloc_leak'
	printf '# dwleak'"'"'s own format, right after memcheck'"'"'s\nfun:malloc\nfun:malloc_leak\n'
} > "$LT_TMP/both.supp"
trace both --suppressions "$LT_TMP/both.supp"
[ "$rc" -eq 0 ] && pass "one file of both formats: exit 0" || fail "one file of both formats: exit $rc: $(tail -n 3 "$LT_TMP/both.err")"
remains both
printf 'fun:malloc\nfun:malloc_leak\n' > "$LT_TMP/ours.supp"
trace two --suppressions "$LT_TMP/no_malloc.supp" --suppressions "$LT_TMP/ours.supp"
[ "$rc" -eq 0 ] && pass "two --suppressions files: exit 0" || fail "two --suppressions files: exit $rc: $(tail -n 3 "$LT_TMP/two.err")"
remains two

# g) valgrind's own default.supp loads beside them; --stats counts what it skipped.
default=
for f in /usr/lib/x86_64-linux-gnu/valgrind/default.supp /usr/libexec/valgrind/default.supp \
	/usr/lib/valgrind/default.supp /usr/local/libexec/valgrind/default.supp; do
	[ -r "$f" ] && default=$f && break
done
if [ -z "$default" ]; then
	fail "valgrind is installed but no default.supp was found where it keeps it"
else
	trace default --stats --suppressions "$default" --suppressions "$LT_TMP/gen.supp"
	line=$(grep "^dwleak: stats: suppressions $default: " "$LT_TMP/default.err")
	if [ "$rc" -ne 0 ]; then
		fail "$default with valgrind's rules: exit $rc: $(tail -n 3 "$LT_TMP/default.err")"
	elif ! [[ $line =~ :\ ([0-9]+)\ rule\(s\),\ ([0-9]+)\ memcheck ]] || [ "${BASH_REMATCH[2]}" -eq 0 ]; then
		fail "--stats does not say what $default gave: '$line'"
	else
		pass "$default loads: ${BASH_REMATCH[1]} Memcheck:Leak rule(s), ${BASH_REMATCH[2]} others skipped"
	fi
fi

check_finish
