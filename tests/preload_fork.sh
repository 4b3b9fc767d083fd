#!/bin/bash
# Forks through the preload path (issue 16).  Linux 6.18 turns a hot site
# into `call [uprobes-trampoline]`, and fork does not copy the trampoline
# (VM_DONTCOPY): a child that calls the copied site dies of SIGSEGV.  The
# library checks its sites at the first firing in a new process, and one
# that calls into nothing turns them off; a tracer that follows the child
# attaches before it runs (the kernel puts a breakpoint over the stale
# call).  testdata/preload_probe forktree 10: three threads allocate while
# the main thread forks 10 children, each leaking 3 x 64 B from
# site_child_leak, and the parent leaks 5 x 32 B from site_parent_leak.
#  a. dwleak -- CMD (children followed): every child exits 0, none finds
#     its sites stale, and the report has the children's 1920 B in 30 and
#     the parent's 160 B in 5;
#  b. dwleak -p on the program started with the library, children not
#     followed: every child exits 0 although all 10 found their sites
#     stale (the parent's were hot when it forked), the parent's 160 B in 5;
#  c. dwleak -p --follow-forks: children followed, 1920 B in 30 again.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
lt_testdata preload_probe
LIB=$("$DWLEAK" preload) || { fail "dwleak preload found no library"; check_finish; }

# sites JSON WANT_CHILD_STACKS: per-site totals against forktree's
sites() {
	lt_check "$1" "$2" << 'PY'
got = {}
for s in r["stacks"]:
    site = site_of(s)
    if site:
        b, c = got.get(site.split("(")[0], (0, 0))
        got[site.split("(")[0]] = (b + s["bytes"], c + s["allocations"])
want = {"site_parent_leak": (160, 5)}
if ARGS[0] == "children":
    want["site_child_leak"] = (1920, 30)
for k in ("site_parent_leak", "site_child_leak"):
    if got.get(k, (0, 0)) != want.get(k, (0, 0)):
        fail("%s: %s, want %s" % (k, got.get(k, (0, 0)), want.get(k, (0, 0))))
    else:
        ok("%s: %d B in %d" % ((k,) + want.get(k, (0, 0))))
PY
}

echo "== a. dwleak -- CMD"
timeout -k 5 120 "$DWLEAK" --format json -o "$T/cmd.json" -t 0 -- "$PROG" forktree 10 > "$T/cmd.out" 2> "$T/cmd.err"
rc=$?
[ $rc -eq 0 ] || fail "a: dwleak exited $rc: $(tail -3 "$T/cmd.err")"
grep -q '(preload, ' "$T/cmd.err" || fail "a: not traced at the sites"
grep -q 'forktree: ok 10 of 10 children exited 0' "$T/cmd.out" || fail "a: $(cat "$T/cmd.out")"
grep -q 'forktree: 0 children found their sites stale' "$T/cmd.out" || fail "a: followed children had stale sites: $(cat "$T/cmd.out")"
sites "$T/cmd.json" children

for mode in b c; do
	flag=
	[ $mode = c ] && flag=--follow-forks
	echo "== $mode. dwleak -p $flag on a program started with the library"
	rm -f "$T/$mode.go"
	export LD_PRELOAD=$LIB
	lt_start pid "$T/$mode.out" "$PROG" --go-file "$T/$mode.go" forktree 10
	unset LD_PRELOAD
	lt_trace dpid "$T/$mode.err" -p "$pid" $flag --format json -o "$T/$mode.json" -t 0 ||
		{ fail "$mode: dwleak did not start"; continue; }
	touch "$T/$mode.go"
	lt_wait "$pid" 60
	lt_wait "$dpid" 60 || fail "$mode: dwleak -p failed: $(tail -3 "$T/$mode.err")"
	grep -q '(preload, ' "$T/$mode.err" || fail "$mode: not traced at the sites"
	grep -q 'forktree: ok 10 of 10 children exited 0' "$T/$mode.out" || fail "$mode: $(cat "$T/$mode.out")"
	if [ $mode = b ]; then
		grep -q 'forktree: 10 children found their sites stale' "$T/$mode.out" &&
			pass "b: all 10 unfollowed children found the copied sites stale, and lived" ||
			fail "b: want 10 children with stale sites: $(cat "$T/$mode.out")"
		sites "$T/$mode.json" parent
	else
		grep -q 'forktree: 0 children found their sites stale' "$T/$mode.out" ||
			fail "c: followed children had stale sites: $(cat "$T/$mode.out")"
		sites "$T/$mode.json" children
	fi
done
check_finish
