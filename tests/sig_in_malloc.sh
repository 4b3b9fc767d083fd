#!/bin/bash
# A walk through dwleak's own pending return probe: testdata/sig_in_malloc
# makes a seccomp filter trap the mmap inside malloc(4 MiB), and the SIGSYS
# handler allocates 40 B in handler_site(), 50 times.  The walk from that
# malloc crosses the signal frame into the interrupted malloc, whose
# return address slot holds the kernel's uretprobe trampoline (the return
# probe of the interrupted call is pending); read_ra must put big_alloc's
# address back.  With uprobe sessions and without (DWLEAK_UPROBE_SESSION=0):
#   - one stack holds the handler's allocations: exactly 40 B x the count
#     the program prints, no unwind error, not truncated;
#   - its frames run malloc, handler_site, on_sigsys, __restore_rt, ...,
#     malloc, big_alloc, main, in that order, and the program's own frames
#     are those addr2line (the independent oracle) gives for their
#     addresses;
#   - uretprobe_returns_recovered is at least that count.
# Those runs trap the allocator (--no-preload); a third goes through the
# preload library's sites (the default for -- CMD), where no return probe
# is pending: the same stack, frame by frame, with the library's own frame
# (the interrupted malloc's caller) hidden.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
lt_testdata sig_in_malloc

for session in 1 0 preload; do
	name=session$session
	flag=--no-preload
	[ $session = preload ] && name=preload flag=
	echo "== sig_in_malloc --iterations 50 (${flag:-preload}, DWLEAK_UPROBE_SESSION=$session)"
	DWLEAK_UPROBE_SESSION=$session timeout -k 5 60 "$DWLEAK" $flag --stats -t 0 --format json -o "$T/$name.json" -- \
		"$PROG" --iterations 50 > "$T/$name.out" 2> "$T/$name.err"
	rc=$?
	[ $rc -eq 0 ] || { fail "$name: dwleak exited $rc"; sed 's/^/    /' "$T/$name.err" | tail -n 20; continue; }
	handled=$(sed -n 's/^sig_in_malloc: [0-9]* blocks, \([0-9]*\) handler allocations of 40 B$/\1/p' "$T/$name.out")
	[ "$handled" = 50 ] || { fail "$name: the program says '$(cat "$T/$name.out")'"; continue; }
	recovered=$(sed -n 's/^dwleak: stats: uretprobe_returns_recovered \([0-9]*\)$/\1/p' "$T/$name.err")
	if [ $session = preload ]; then
		grep -q '^dwleak: tracing pid [0-9]* (preload, ' "$T/$name.err" ||
			fail "$name: not traced at the preload sites: $(grep -m1 'dwleak: tracing' "$T/$name.err")"
	elif [ "${recovered:-0}" -ge "$handled" ]; then
		pass "$name: uretprobe_returns_recovered $recovered (>= $handled handler allocations)"
	else
		fail "$name: uretprobe_returns_recovered '$recovered', want >= $handled: the case was not exercised"
	fi
	lt_check "$T/$name.json" "$handled" "$PROG" << 'PY'
import subprocess
n, prog = int(ARGS[0]), ARGS[1]
short = lambda x: x.split(".")[0] if x else x
st = [s for s in r["stacks"] if "handler_site" in [short(x) for x in names(s)]]
if len(st) != 1:
    fail("%d stacks through handler_site, want 1:\n%s" % (len(st), "".join(show(s) for s in st)))
    sys.exit(0)
s = st[0]
ns = [short(x) for x in names(s)]
if (s["bytes"], s["allocations"]) != (40 * n, n) or s.get("unwind_error") or s.get("truncated"):
    fail("want %d B in %d allocations, complete:\n%s" % (40 * n, n, show(s)))
want = ["malloc", "handler_site", "on_sigsys", "__restore_rt", "malloc", "big_alloc", "main"]
i = 0
for w in want:
    while i < len(ns) and ns[i] != w:
        i += 1
    if i == len(ns):
        fail("frames lack %s after the ones before it (want %s in order):\n%s" % (w, want, show(s)))
        break
    i += 1
else:
    ok("%d B in %d allocations: %s" % (s["bytes"], s["allocations"], " <- ".join(x for x in ns if x)))
# the program's own frames, by addr2line on the same binary
own = [(k, f) for k, f in enumerate(s["frames"]) if f["module"].endswith("/sig_in_malloc") and not f.get("inlined")]
addrs = ["%x" % (int(f["elf_address"], 16) - (1 if k > 0 else 0)) for k, f in own]
out = subprocess.run(["addr2line", "-f", "-e", prog] + addrs, capture_output=True, text=True).stdout.split("\n")
oracle = [short(out[2 * j]) for j in range(len(addrs))]
mine = [short(base(f["function"])) for k, f in own]
if oracle != mine:
    fail("the program's frames %s, addr2line says %s" % (mine, oracle))
else:
    ok("the program's own frames agree with addr2line: %s" % " <- ".join(oracle))
PY
done
check_finish
