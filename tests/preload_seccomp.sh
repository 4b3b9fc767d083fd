#!/bin/bash
# A process under a seccomp filter that denies the system calls it does
# not know (issue 16): Linux 6.18 enters a hot site by the `uprobe` system
# call (336; `uretprobe` is 335) from its trampoline.  The same kernel
# lets both through every seccomp filter ("seccomp: passthrough uprobe
# systemcall without filtering", in with the optimization: they are
# excepted in seccomp_is_const_allow and in strict mode's list), so the
# sites keep working.  testdata/preload_probe seccomp MODE installs a
# filter denying 335 and 336, with ENOSYS (errno) or killing the process
# (kill), then leaks 2000 x 48 B from site_seccomp_leak; under dwleak
# -- CMD, for each MODE: the program exits 0 and says its trampoline is
# mapped (the sites were entered by the system call, not trapped), the
# tracing line says preload, and the report has exactly 96000 B in 2000.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
lt_testdata preload_probe

for mode in errno kill; do
	echo "== seccomp filter denying 335 and 336 ($mode)"
	timeout -k 5 120 "$DWLEAK" --format json -o "$T/$mode.json" -t 0 -- "$PROG" seccomp $mode 2000 \
		> "$T/$mode.out" 2> "$T/$mode.err"
	rc=$?
	[ $rc -eq 0 ] || { fail "$mode: dwleak exited $rc: $(tail -3 "$T/$mode.err")"; continue; }
	grep -q '(preload, ' "$T/$mode.err" || fail "$mode: not traced at the sites"
	line=$(cat "$T/$mode.out")
	[ "$line" = "seccomp: $mode filter, 2000 blocks leaked, trampoline mapped" ] && pass "$mode: $line" ||
		fail "$mode: the program says '$line'"
	lt_check "$T/$mode.json" << 'PY'
st = [s for s in r["stacks"] if site_of(s) and site_of(s).startswith("site_seccomp_leak")]
b = sum(s["bytes"] for s in st)
n = sum(s["allocations"] for s in st)
(ok if (b, n) == (96000, 2000) else fail)("site_seccomp_leak: %d B in %d, want 96000 B in 2000" % (b, n))
PY
done
check_finish
