#!/bin/bash
# dwleak on the harder targets of issue 3, with real BPF:
#  a. threads: 4 threads leaking from leak_alpha/beta/gamma/delta: one stack
#     each, ending at start_thread/clone3, bytes exact (-- CMD).
#  b. dlopen: libdlleak.so dlopen'ed after "dwleak: tracing" (-p): its leak
#     has the frames below it (dlleak_run <- main ...); every allocation is
#     counted; the share walked before the table arrived is printed.
#  c. signal: a leak in a SIGALRM handler walks through the kernel's signal
#     frame: leak_in_sigalrm <- on_signal <- __restore_rt <- __sigsuspend <-
#     main; the __restore_rt frame is checked against libc's bytes.
#  d. recursion deeper than 127 frames: truncated: true, totals.truncated_stacks
#     >= 1, exit 0; 100 levels are not truncated.
#  e. Debian's python3.11 running an allocation loop (-p -d 3 -t 0): at least
#     99% of the stacks end at a root frame; prints the share.
#  f. a library replaced on disk under a running process (an upgrade): the
#     target runs a copy of libjemalloc (LD_PRELOAD) that is then replaced
#     by another file; -p says so and probes the copy the process maps:
#     its leak is counted with its stack (before, nothing was).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
T=$LT_TMP
dlpid='' pypid='' dw='' # set by lt_start / lt_trace

# run_cmd NAME ARGS... : dwleak --format json -t 0 -o T/NAME.json ARGS; fails
# on a non-zero exit.
run_cmd() {
	local name=$1 rc
	shift
	timeout -k 5 60 "$DWLEAK" -t 0 --format json -o "$T/$name.json" "$@" \
		> "$T/$name.out" 2> "$T/$name.err"
	rc=$?
	if [ $rc -ne 0 ]; then
		fail "$name: dwleak exited $rc"
		sed 's/^/    /' "$T/$name.err" | tail -n 20
	fi
	[ -s "$T/$name.json" ] || {
		fail "$name: no JSON report"
		return 1
	}
	return 0
}

# --- a. four threads ---
if lt_part a; then
echo "== a. threads (-- CMD, 10 allocations per thread)"
if run_cmd threads -- "$TESTDATA/threads" --iterations 10 --interval-ms 10; then
	lt_check "$T/threads.json" << 'PY'
sizes = {"leak_alpha": 16, "leak_beta": 32, "leak_gamma": 48, "leak_delta": 64}
for fn, size in sizes.items():
    s = only_stack_with(fn)
    if s is None:
        continue
    n = names(s)
    if n[:2] != ["malloc", fn] or n[-2:] != ["start_thread", "clone3"]:
        fail("%s: frames %s, want malloc, %s, ..., start_thread, clone3" % (fn, n, fn))
    elif s["bytes"] != 10 * size or s["allocations"] != 10:
        fail("%s: %d B in %d allocations, want %d B in 10" % (fn, s["bytes"], s["allocations"], 10 * size))
    else:
        ok("%s: malloc <- %s <- start_thread <- clone3, %d B in 10 allocations" % (fn, fn, s["bytes"]))
broken = [s for s in r["stacks"] if s.get("unwind_error")]
for s in broken:
    fail("stack with unwind_error:\n" + show(s))
if r["counters"]["walk_err_no_mapping"]:
    print("note: counters: walk_err_no_mapping=%d walk_err_vma_busy=%d" % (
        r["counters"]["walk_err_no_mapping"], r["counters"].get("walk_err_vma_busy", 0)))
PY
fi

fi

# --- b. dlopen after attach ---
if lt_part b; then
echo "== b. dlopen after attach (-p, dlopen at 4 s, 40 allocations)"
lt_start dlpid "$T/dlopen.out" "$TESTDATA/dlopen_main" --delay-ms 4000 --iterations 40 --interval-ms 50
if lt_trace dw "$T/dlopen.err" -p "$dlpid" -t 0 --format json -o "$T/dlopen.json"; then
	if grep -q libdlleak "/proc/$dlpid/maps" 2> /dev/null; then
		fail "dlopen: libdlleak.so was mapped before 'dwleak: tracing' (attach took over 4 s)"
	fi
	lt_wait "$dw" 60
	rc=$?
	[ $rc -eq 0 ] || fail "dlopen: dwleak -p exited $rc after the target exited"
	grep -q "loaded" "$T/dlopen.out" || fail "dlopen: dlopen_main did not load the library"
	[ -s "$T/dlopen.json" ] && lt_check "$T/dlopen.json" << 'PY'
st = [s for s in r["stacks"] if "dlleak_leak_one" in names(s)]
full = ["malloc", "dlleak_leak_one", "dlleak_run", "main", "__libc_start_call_main"]
complete = [s for s in st if names(s)[:5] == full and names(s)[-1] in ROOTS]
partial = [s for s in st if s not in complete]
n_all = sum(s["allocations"] for s in st)
n_part = sum(s["allocations"] for s in partial)
for s in st:
    if s["frames"][1]["module"].split("/")[-1] != "libdlleak.so":
        fail("dlleak_leak_one not in libdlleak.so:\n" + show(s))
if not complete:
    fail("no complete stack malloc <- dlleak_leak_one <- dlleak_run <- main <- __libc_start_call_main:\n"
         + "".join(show(s) for s in st))
else:
    ok("complete stack: " + " <- ".join(names(complete[0])))
if n_all != 40 or sum(s["bytes"] for s in st) != 40 * 24:
    fail("%d allocations / %d B from dlleak_leak_one, want 40 / 960" % (n_all, sum(s["bytes"] for s in st)))
else:
    ok("all 40 allocations (960 B) from dlleak_leak_one counted")
share = n_part / n_all if n_all else 1.0
print("dlopen: %d of %d allocations (%.1f%%) after dlopen were walked before the library's "
      "table was loaded (incomplete stacks)" % (n_part, n_all, 100 * share))
for s in partial:
    print("  incomplete: " + show(s))
    if s.get("unwind_error") != "no unwind table for this object":
        fail("incomplete dlopen stack with unwind_error %r, want 'no unwind table for this object'"
             % s.get("unwind_error"))
if share > 0.10:
    fail("more than 10%% of the allocations after dlopen lack their stack")
PY
else
	fail "dlopen: dwleak -p did not start tracing"
fi

fi

# --- c. leak in a signal handler ---
if lt_part c; then
echo "== c. signal handler (-- CMD, 10 SIGALRM leaks)"
if run_cmd signal -- "$TESTDATA/signal_leak" --iterations 10 --interval-ms 10; then
	lt_check "$T/signal.json" << 'PY'
import subprocess
s = only_stack_with("leak_in_sigalrm")
if s is None:
    sys.exit(1)
print(show(s))
ph = physical(s)
pn = [base(f["function"]) for f in ph]
if s["bytes"] != 400 or s["allocations"] != 10:
    fail("%d B in %d allocations, want 400 B in 10" % (s["bytes"], s["allocations"]))
if pn[:3] != ["malloc", "leak_in_sigalrm", "on_signal"]:
    fail("frames %s, want malloc, leak_in_sigalrm, on_signal first" % pn)
    sys.exit(1)
# The frame past the handler is the signal trampoline in libc: check its
# bytes (mov $15,%rax; syscall = rt_sigreturn), then its name.
tr = ph[3]
if not tr["module"].endswith("/libc.so.6"):
    fail("frame past on_signal is in %s, want libc.so.6" % tr["module"])
else:
    a = int(tr["elf_address"], 16)
    dis = subprocess.run(["objdump", "-d", "--start-address=%#x" % a, "--stop-address=%#x" % (a + 9),
                          tr["module"]], capture_output=True, text=True).stdout
    if "mov    $0xf,%rax" not in dis or "syscall" not in dis:
        fail("frame past on_signal at libc %#x is not the rt_sigreturn trampoline:\n%s" % (a, dis))
    else:
        ok("frame past on_signal is libc's rt_sigreturn trampoline at %#x" % a)
    if base(tr["function"]) != "__restore_rt":
        fail("trampoline frame named %r, want __restore_rt (libc's symbol at %#x)" % (tr["function"], a))
rest = pn[4:]
# main waits in sigsuspend with the signals unblocked: that is the
# interrupted code.
if rest[:1] not in (["__sigsuspend"], ["sigsuspend"]) or rest[1:3] != ["main", "__libc_start_call_main"]:
    fail("frames past the trampoline %s, want __sigsuspend, main, __libc_start_call_main" % rest)
else:
    ok("past the trampoline: " + " <- ".join(rest))
if pn[-1] not in ROOTS:
    fail("outermost frame %s is not a root" % pn[-1])
if s.get("unwind_error") or s.get("truncated"):
    fail("unwind_error=%s truncated=%s" % (s.get("unwind_error"), s.get("truncated")))
PY
fi

fi

# --- d. deep recursion ---
if lt_part d; then
echo "== d. recursion 200 deep (-- CMD, 3 allocations)"
if run_cmd deep -- "$TESTDATA/deep_recursion" --iterations 3 --interval-ms 10 --depth 200; then
	lt_check "$T/deep.json" << 'PY'
s = only_stack_with("leak_at_bottom")
if s is None:
    sys.exit(1)
n = names(s)
if s["truncated"] is not True:
    fail("200-deep stack has truncated=%r, want true" % s["truncated"])
if r["totals"]["truncated_stacks"] < 1:
    fail("totals.truncated_stacks %d, want >= 1" % r["totals"]["truncated_stacks"])
if n[:2] != ["malloc", "leak_at_bottom"] or any(x != "recurse" for x in n[2:]):
    fail("frames %s..., want malloc, leak_at_bottom, recurse..." % n[:6])
if not 100 <= len(n) <= 127:
    fail("%d frames, want the depth limit (127)" % len(n))
if s["bytes"] != 3 * 56 or s["allocations"] != 3:
    fail("%d B in %d allocations, want 168 B in 3" % (s["bytes"], s["allocations"]))
if not _failed:
    ok("truncated at %d frames, totals.truncated_stacks=%d, 168 B in 3" % (len(n), r["totals"]["truncated_stacks"]))
PY
fi
echo "== d. recursion 100 deep: complete, not truncated"
if run_cmd deep100 -- "$TESTDATA/deep_recursion" --iterations 3 --interval-ms 10 --depth 100; then
	lt_check "$T/deep100.json" << 'PY'
st = [s for s in r["stacks"] if "leak_at_bottom" in names(s)]
s = st[0] if st else None
if s is None:
    fail("no stack through leak_at_bottom")
    sys.exit(1)
n = names(s)
if s["truncated"] or n.count("recurse") != 100 or n[-5:] != ["recurse", "main",
        "__libc_start_call_main", "__libc_start_main", "_start"]:
    fail("100-deep stack: truncated=%s, %d recurse frames, ends %s" % (s["truncated"], n.count("recurse"), n[-4:]))
else:
    ok("100 recurse frames, down to _start, not truncated")
PY
fi

fi

# --- e. python3.11 ---
if lt_part e; then
echo "== e. /usr/bin/python3.11 allocation loop (-p -d 3 -t 0)"
if [ ! -x /usr/bin/python3.11 ]; then
	fail "/usr/bin/python3.11 is missing (Debian's python3.11 package)"
else
	lt_start pypid "$T/py.out" /usr/bin/python3.11 "$ROOT/testdata/py_alloc_loop.py" --seconds 12
	if lt_trace dw "$T/py.err" -p "$pypid" -d 3 -t 0 --format json -o "$T/py.json"; then
		lt_wait "$dw" 60
		rc=$?
		[ $rc -eq 0 ] || fail "python: dwleak -p exited $rc"
		kill -0 "$pypid" 2> /dev/null || fail "python: the target did not survive dwleak"
		kill "$pypid" 2> /dev/null
		[ -s "$T/py.json" ] && lt_check "$T/py.json" << 'PY'
import collections
st = r["stacks"]
good = [s for s in st if names(s) and names(s)[-1] in ROOTS]
bad = [s for s in st if s not in good]
share = len(good) / len(st) if st else 0.0
print("python3.11: %d of %d stacks (%.2f%%) end at a root frame; %d allocations, %d B outstanding"
      % (len(good), len(st), 100 * share, r["totals"]["outstanding_allocations"], r["totals"]["outstanding_bytes"]))
c = collections.Counter((s["frames"][-1]["function"], s["frames"][-1]["module"],
                         s["frames"][-1]["elf_address"], s.get("unwind_error"), s.get("truncated")) for s in bad)
for (fn, mod, addr, err, trunc), k in c.most_common():
    print("  %d stack(s) end at %s (%s %s): unwind_error=%s truncated=%s" % (k, fn, mod, addr, err, trunc))
if len(st) < 10:
    fail("only %d stacks: the load did not reach the allocator" % len(st))
if share < 0.99:
    fail("%.2f%% of the stacks end at a root, want >= 99%%" % (100 * share))
else:
    ok("%.2f%% >= 99%% of the stacks end at a root" % (100 * share))
PY
	else
		fail "python: dwleak -p did not start tracing"
	fi
fi
fi

# --- f. the allocator replaced on disk after the target mapped it ---
if lt_part f; then
echo "== f. -p on a process whose libjemalloc.so.2 was replaced on disk"
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
if [ ! -r "$JEMALLOC" ]; then
	fail "replaced: $JEMALLOC is missing (.ci/deps.sh installs libjemalloc2)"
else
	mkdir -p "$T/upgrade"
	cp "$JEMALLOC" "$T/upgrade/libjemalloc.so.2"
	LD_PRELOAD=$T/upgrade/libjemalloc.so.2 lt_start uppid "$T/upgrade.out" "$TESTDATA/seed_O2" \
		--iterations 60 --interval-ms 50
	# a new file under the old name, as a package upgrade leaves it
	cp "$JEMALLOC" "$T/upgrade/new.so" && mv "$T/upgrade/new.so" "$T/upgrade/libjemalloc.so.2"
	grep -q 'libjemalloc.so.2 (deleted)' "/proc/$uppid/maps" ||
		fail "replaced: the target's maps do not show the old copy as deleted"
	if lt_trace dw "$T/upgrade.err" -p "$uppid" -t 0 --format json -o "$T/upgrade.json"; then
		lt_wait "$dw" 60 || fail "replaced: dwleak -p exited non-zero after the target exited"
		grep -q "^dwleak: note: 1 file(s) pid $uppid maps were replaced on disk .*libjemalloc.so.2" \
			"$T/upgrade.err" || fail "replaced: no note about the replaced file: $(grep -m1 note "$T/upgrade.err")"
		grep -q "jemalloc in $T/upgrade/libjemalloc.so.2 (LD_PRELOAD)" "$T/upgrade.err" ||
			fail "replaced: the tracing line does not name the preloaded jemalloc: $(grep -m1 tracing "$T/upgrade.err")"
		[ -s "$T/upgrade.json" ] && lt_check "$T/upgrade.json" << 'PY'
s = only_stack_with("LeakLib::slowMemoryLeak()")
if s:
    want = ["LeakLib::slowMemoryLeak()", "caller()", "main"]
    if chain_at(s, want) is None:
        fail("the leak's stack lacks %s:\n%s" % (" <- ".join(want), show(s)))
    elif s["allocations"] < 20 or s["bytes"] != 40 * s["allocations"]:
        fail("%d allocations / %d B from the leak, want at least 20 of 40 B" % (s["allocations"], s["bytes"]))
    else:
        ok("the leak counted through the replaced library: %d allocations, %d B, %s"
           % (s["allocations"], s["bytes"], " <- ".join(names(s))))
PY
	else
		fail "replaced: dwleak -p did not start tracing"
	fi
fi
fi

check_finish
