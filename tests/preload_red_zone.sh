#!/bin/bash
# The red zone next to a site (issue 16).  Linux 6.18 enters a hot uprobe
# on a 5-byte NOP by a `call` to its trampoline, which writes up to 32
# bytes below rsp: the red zone of the function holding the NOP.  The
# preload library's sites are functions of their own whose first
# instruction is the NOP (preload/sites.S), so only calls reach them, and
# a function that calls keeps nothing in its red zone.  testdata/red_zone
# (linked with the library's sites.S) runs, with both sites hot under
# bpftrace's usdt probes:
#   - leaf_inline, a leaf with 16 words in its red zone across an inline
#     NOP (the control): the words change in most calls once the site is
#     optimized, so the test sees a clobbered red zone (a kernel that
#     enters by `jmp`, as proposed in May 2026, would end that: then only
#     noted);
#   - user_site, the same words across a call of dwleak_site_alloc: never
#     changed;
# and the trampoline is mapped (the sites were optimized, not trapped).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
lt_testdata red_zone
command -v bpftrace > /dev/null || { fail "bpftrace is not installed (.ci/deps.sh installs it)"; check_finish; }

# The compiled code is what the test says it is: the control stores below
# rsp without moving it; user_site moves rsp before its words.
objdump -d "$PROG" | awk '/<leaf_inline>:/,/ret/' > "$T/leaf.s"
objdump -d "$PROG" | awk '/<user_site>:/,/ret/' > "$T/user.s"
grep -q 'mov    %rdx,-0x80(%rsp)' "$T/leaf.s" && ! grep -Eq '(sub|add) .*,%rsp' "$T/leaf.s" ||
	fail "leaf_inline does not keep its words in the red zone"
grep -Eq '(sub|add) +\$.*,%rsp' "$T/user.s" && grep -q 'call.*<dwleak_site_alloc>' "$T/user.s" ||
	fail "user_site does not move rsp and call the site"

"$PROG" 3 > "$T/out" 2>&1 &
pid=$!
lt_pids+=("$pid")
sleep 0.2
timeout 10 bpftrace -p "$pid" -e "usdt:$PROG:redzone:inline { @inline = count(); }
	usdt:$PROG:dwleak:alloc { @site = count(); }" > "$T/bt" 2>&1 &
lt_pids+=("$!")
lt_wait "$pid" 30
rc=$?
line=$(cat "$T/out")
echo "    $line"
[ $rc -eq 0 ] || { fail "red_zone exited $rc: $line; bpftrace: $(head -5 "$T/bt")"; check_finish; }
read -r calls bad_inline bad_site tramp < <(sed -n \
	's/^red_zone: \([0-9]*\) calls each; words changed: inline NOP \([0-9]*\) calls, site function \([0-9]*\) calls; trampoline \(.*\)$/\1 \2 \3 \4/p' "$T/out")
[ -n "$calls" ] || { fail "cannot read '$line'"; check_finish; }
[ "$tramp" = mapped ] && pass "the sites were optimized: [uprobes-trampoline] mapped" ||
	fail "no trampoline: the sites were trapped, not called (is this Linux 6.18+?)"
[ "$bad_site" = 0 ] && pass "user_site: its words intact in all $calls calls through the hot site" ||
	fail "user_site: words changed in $bad_site of $calls calls"
if [ "$bad_inline" -gt $((calls / 2)) ]; then
	pass "control: the inline NOP's red zone clobbered in $bad_inline of $calls calls (the test sees it)"
else
	echo "note: the inline NOP's red zone changed in only $bad_inline of $calls calls: this kernel's" \
		"trampoline does not write below rsp (a jmp?)"
fi
check_finish
