#!/bin/bash
# The walk in the process (issue 24, --walk process) against the kernel's
# walk, the oracle it must equal: each program below is traced twice with
# its preload library, once walked by the kernel program at the library's
# sites (--walk kernel) and once by the library itself into its rings
# (--walk process), with address randomization off (setarch -R) so that
# both runs map everything at the same addresses.  The two reports must
# hold the same stacks: frame by frame the same objects and addresses in
# them (elf_address: what a program dlopens later may move), the same bytes
# and allocations, the same allocator function.  The process run must say
# that the process walked itself (its library took the unwind image), and
# lose nothing, and most of its calls (all after the first few) must have
# been walked in the process (--stats).  Programs: the seed's stripped C++ build (debug file
# beside it), four threads, code dlopen'ed after the start, python3.11 and
# perl (interpreters without frame pointers), python3.11 loading two dozen
# extension modules (a new image each); and --unwind fp the same way.
# Part f: a process that writes over its own ring (testdata/ring_scribble)
# loses its own records, said, and nothing else.  Part g: a seccomp filter
# installed after the walk began (testdata/seccomp_late) sends the library
# back to its sites before it goes in.  Part h: processes that exec
# while walking (a shell, env) start anew in their new image, unremarked.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"

# walked_records FILE: the records a process's library walked, from its
# --stats line: those applied plus the allocations cancelled by their
# frees before dwleak read them (0 when there is no such line)
walked_records() {
	sed -n 's/.*walked in the process: \([0-9]*\) records applied in [0-9]* drains, \([0-9]*\) allocations.*/\1 \2/p' "$1" |
		awk '{ print $1 + $2; found = 1; exit } END { if (!found) print 0 }'
}
lt_require_bpf
T=$LT_TMP

if ! setarch "$(uname -m)" -R true 2> /dev/null; then
	fail "setarch -R does not work here: cannot run both walks at the same addresses"
	check_finish
fi

# run NAME WALK [DWLEAK ARGS...] -- CMD...: the JSON report in $T/NAME.WALK.json
run() {
	local name=$1 walk=$2
	shift 2
	PYTHONHASHSEED=0 PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 setarch "$(uname -m)" -R "$DWLEAK" --walk "$walk" --stats --format json -t 0 \
		-o "$T/$name.$walk.json" "$@" > "$T/$name.$walk.out" 2> "$T/$name.$walk.err"
	local rc=$?
	if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
		fail "$name --walk $walk: dwleak exited $rc: $(tail -3 "$T/$name.$walk.err")"
		return 1
	fi
	return 0
}

# same NAME WHAT: the kernel's and the process's reports of NAME hold the
# same stacks (WHAT: words for the messages)
same() {
	local name=$1
	if ! grep -q "walks its stacks in the process" "$T/$name.process.err"; then
		fail "$name: the process did not walk itself: $(grep -v '^$' "$T/$name.process.err" | tail -4)"
		return
	fi
	# most calls walked in the process (the first ones, before the
	# library took its image, at its sites by the kernel)
	local n
	n=$(walked_records "$T/$name.process.err")
	if [ -z "$n" ] || [ "$n" -lt 50 ]; then
		fail "$name: ${n:-no} records walked in the process, want 50 or more: $(grep 'walked in' "$T/$name.process.err")"
	fi
	if grep -q "walked in the process" "$T/$name.kernel.err"; then
		fail "$name: --walk kernel walked in the process"
	fi
	lt_check "$T/$name.kernel.json" "$T/$name.process.json" "$name" << 'PY'
proc = json.load(open(ARGS[0]))
name = ARGS[1]
# a frame by its object and its address in that object: the library's
# own mappings (rings, image, cache) may move what a program dlopens
# later, even with randomization off
def key(s):
    return (tuple((f["module"], f["elf_address"]) for f in s["frames"] if not f.get("inlined")), s["allocator"])
def table(rep):
    t = {}
    for s in rep["stacks"]:
        k = key(s)
        b, n = t.get(k, (0, 0))
        t[k] = (b + s["bytes"], n + s["allocations"])
    return t
kern, mine = table(r), table(proc)
if not kern:
    fail(f"{name}: the kernel's walk found no stack")
only_k = [k for k in kern if k not in mine]
only_p = [k for k in mine if k not in kern]
diff = [k for k in kern if k in mine and kern[k] != mine[k]]
def fmt(rep, k):
    for s in rep["stacks"]:
        if key(s) == k:
            return show(s)
    return str(k)
for k in only_k[:3]:
    fail(f"{name}: a stack of the kernel's walk is not in the process's:\n" + fmt(r, k))
for k in only_p[:3]:
    fail(f"{name}: a stack of the process's walk is not in the kernel's:\n" + fmt(proc, k))
for k in diff[:3]:
    fail(f"{name}: bytes/allocations differ: kernel {kern[k]}, process {mine[k]}:\n" + fmt(r, k))
if proc["totals"]["dropped_events"]:
    fail(f"{name}: the process's run dropped {proc['totals']['dropped_events']} records")
if r["totals"]["outstanding_bytes"] != proc["totals"]["outstanding_bytes"]:
    fail(f"{name}: outstanding bytes differ: kernel {r['totals']['outstanding_bytes']}, "
         f"process {proc['totals']['outstanding_bytes']}")
if not _failed:
    print(f"{name}: {len(kern)} stacks, the same in both walks "
          f"({r['totals']['outstanding_bytes']} bytes outstanding)")
PY
}

both() { # NAME [DWLEAK ARGS...] -- CMD...
	local name=$1
	shift
	run "$name" kernel "$@" && run "$name" process "$@" && same "$name"
}

if lt_part a; then
	both seed -- "$TESTDATA/seed_O2_stripped" --iterations 200 --interval-ms 1
fi
if lt_part b; then
	both threads -- "$TESTDATA/threads" --iterations 200 --interval-ms 1
fi
if lt_part c; then
	both dlopen -- "$TESTDATA/dlopen_main" --iterations 100 --interval-ms 1
fi
if lt_part d; then
	# python's and perl's own caches of objects at exit: many stacks.
	# Each sleeps 1 s first: the process walks itself once dwleak has
	# handed it the unwind image, which a busy machine may not have done
	# before a run of a few ms ended (CI once: perl walked nothing, "image
	# 0 installed")
	both python -- "$LT_PYTHON" -c 'import json, time; time.sleep(1); d=[json.dumps({"k": i}) for i in range(2000)]; leak=[bytearray(100) for _ in range(10)]'
	both perl -- perl -e 'select(undef, undef, undef, 1); my %h; $h{$_} = "x" x $_ for 1..500; our @keep = map { [$_] } 1..100;'
	# two dozen extension modules dlopen'ed one after another, each a new
	# image (a fourth of the arena or more): the arena fills and a larger
	# one must come, or the later modules' code is walked with an image
	# that has no table for it ("no unwind table for this object").  ssl
	# (libcrypto: the image doubles) before the first image: an image that
	# alone outgrows the arena asked for early still waits one drain (the
	# README says so), which is not what this checks
	both python_imports -- "$LT_PYTHON" -c 'import ssl, time; time.sleep(1); import _json, _ctypes, _decimal, _hashlib, _lzma, _bz2, _sqlite3, _asyncio, _queue, _uuid, _zoneinfo, mmap, _multibytecodec, _codecs_jp, _codecs_cn, _codecs_kr, _codecs_tw, _codecs_hk, _codecs_iso2022, _contextvars, _typing; keep = [ssl.create_default_context() for _ in range(2)]'
fi
if lt_part e; then
	both seed_fp --unwind fp -- "$TESTDATA/seed_O0_fp" --iterations 200 --interval-ms 1
	if ! grep -q "frame pointers" "$T/seed_fp.process.err"; then
		fail "seed_fp: the process's run did not say it walks frame pointers"
	fi
fi
# a process that spoils its own ring: it loses its own records, with a
# message; its child's report is whole, dwleak runs on
if lt_part f; then
	SCRIB=$TESTDATA/ring_scribble
	[ -x "$SCRIB" ] || fail_now "$SCRIB is missing (make testdata)"
	timeout -k 5 120 "$DWLEAK" --walk process --stats -t 0 --format json -o "$T/f.json" -- "$SCRIB" \
		> "$T/f.out" 2> "$T/f.err"
	rc=$?
	[ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "f: dwleak exit $rc: $(tail -3 "$T/f.err")"
	grep -q "scribbled yes" "$T/f.out" || fail "f: the program did not find its ring to spoil: $(cat "$T/f.out")"
	grep -q "the first corrupt ring: thread [0-9]*'s ring" "$T/f.err" ||
		fail "f: --stats names no corrupt ring: $(grep 'walked in' "$T/f.err")"
	grep -q "warning: pid [0-9]* (.*ring_scribble) wrote over its own ring" "$T/f.err" ||
		fail "f: no warning when the ring was found spoiled: $(grep -m2 warning "$T/f.err")"
	lt_check "$T/f.json" << 'PY'
procs = r["processes"]
parent = [p for p in procs if p["ppid"] == 0]
child = [p for p in procs if p["ppid"] != 0]
if len(parent) != 1 or len(child) != 1:
    fail("want one parent and one child: %s" % procs)
else:
    pp, cp = parent[0]["pid"], child[0]["pid"]
    losses = r.get("losses", [])
    if not [l for l in losses if l["what"] == "walk_rings_corrupt" and l["pid"] == pp]:
        fail("no walk_rings_corrupt loss for the parent: %s" % losses)
    if [l for l in losses if l["pid"] == cp]:
        fail("the child lost something: %s" % losses)
    mine = [s for s in r["stacks"] if s["pid"] == cp and s["bytes"] == 200]
    if len(mine) != 1 or not [f for f in mine[0]["frames"] if f["function"] == "leak"]:
        fail("the child's 200-byte leak through leak() is not reported whole: %s" %
             [show(s) for s in r["stacks"] if s["pid"] == cp])
PY
fi
# a seccomp filter installed in a thread after the library began walking in
# the process (testdata/seccomp_late: the filter kills at the mmap a new
# ring would make): the library goes back to its sites first and the
# program lives, its leaks whole; filters put in by prctl and by
# syscall(SYS_seccomp), in a process started by dwleak (LD_PRELOAD) and in
# one it injected (-p: the library routes prctl and syscall as well)
if lt_part g; then
	LATE=$TESTDATA/seccomp_late
	[ -x "$LATE" ] || fail_now "$LATE is missing (make testdata)"
	for via in prctl syscall; do
		for how in start attach; do
			name=g.$via.$how
			if [ $how = start ]; then
				timeout -k 5 60 "$DWLEAK" --walk process --stats -t 0 --format json -o "$T/$name.json" -- \
					"$LATE" --via $via > "$T/$name.out" 2> "$T/$name.err"
				rc=$?
				prc=$rc
			else
				"$LATE" --via $via --walk-first 2000 > "$T/$name.out" 2>&1 &
				pid=$!
				sleep 0.3
				timeout -k 5 60 "$DWLEAK" -p $pid --walk process --stats -t 0 --format json -o "$T/$name.json" \
					2> "$T/$name.err"
				rc=$?
				wait $pid
				prc=$?
			fi
			[ $rc -eq 0 ] || [ $rc -eq 1 ] || { fail "$name: dwleak exited $rc: $(tail -3 "$T/$name.err")"; continue; }
			[ $prc -eq 0 ] && grep -q "^seccomp_late: 40 blocks of 48 B leaked, filter in by $via$" "$T/$name.out" ||
				{ fail "$name: the program exited $prc: $(cat "$T/$name.out")"; continue; }
			[ "$(walked_records "$T/$name.err")" -gt 0 ] &&
				grep -q "^dwleak: stats: pid [0-9]* walked in the process: .*; back at its sites since it installed a seccomp filter$" "$T/$name.err" &&
				pass "$name: walked in the process, then back at its sites when the filter went in" ||
				fail "$name: --stats says no stop for the filter: $(grep 'walked in the process' "$T/$name.err")"
			grep -q "^dwleak: note: pid [0-9]* (.*seccomp_late.*) installed a seccomp filter: its library stopped walking" "$T/$name.err" ||
				fail "$name: no note that the process went back to its sites: $(grep -m2 'note' "$T/$name.err")"
			lt_check "$T/$name.json" "$name" << 'PY'
name = ARGS[0]
st = [s for s in r["stacks"] if "leak_site" in names(s)]
if len(st) != 1 or (st[0]["bytes"], st[0]["allocations"]) != (40 * 48, 40):
    fail("%s: want one stack through leak_site with 1920 B in 40 allocations:\n%s" % (name, "".join(show(s) for s in st)))
else:
    ns = names(st[0])
    want = ["malloc", "leak_site", "worker", "start_thread"]
    # worker's inlined loop is a frame of its own, named worker too
    got = [n for k, n in enumerate(ns) if n in want and (k == 0 or ns[k - 1] != n)]
    if got[:4] != want:
        fail("%s: frames %s, want %s in that order" % (name, ns, want))
    else:
        ok("%s: %d B in %d allocations: %s" % (name, st[0]["bytes"], st[0]["allocations"], " <- ".join(ns)))
PY
		done
	done
fi
# processes that exec while walking in the process: a shell whose children
# run env, which execs echo, and which execs the seed itself at the end.
# An exec replaces the memory the rings were read from; nothing is said of
# it (each new image starts its own rings), and the seed's leak is whole,
# walked in the process
if lt_part h; then
	SEED=$TESTDATA/seed_O2_stripped
	timeout -k 5 120 "$DWLEAK" --walk process --stats -t 0 --format json -o "$T/h.json" -- bash -c \
		'for i in 1 2 3 4 5 6; do x=$(/usr/bin/env echo $i); done; exec /usr/bin/env "$0" --iterations 50 --interval-ms 1' \
		"$SEED" > "$T/h.out" 2> "$T/h.err"
	rc=$?
	[ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "h: dwleak exited $rc: $(tail -3 "$T/h.err")"
	if grep -q "warning" "$T/h.err"; then
		fail "h: warnings for processes that exec'd: $(grep -m3 warning "$T/h.err")"
	else
		pass "h: no warning through $(grep -c '^dwleak: stats: pid [0-9]* walked in the process' "$T/h.err") processes' execs"
	fi
	pid=$(sed -n 's/^dwleak: stats: pid \([0-9]*\) walked in the process: \([0-9]*\) records applied in [0-9]* drains, \([0-9]*\) allocations.*/\1 \2 \3/p' "$T/h.err" |
		awk '$2 + $3 > 0 { print $1; exit }')
	[ -n "$pid" ] || fail "h: no process walked in the process: $(grep -m3 'walked in' "$T/h.err")"
	lt_check "$T/h.json" "$pid" << 'PY'
pid = int(ARGS[0])
seed = [p["pid"] for p in r["processes"] if "seed_O2_stripped" in p["command"]]
st = [s for s in r["stacks"] if s["pid"] in seed and "LeakLib::slowMemoryLeak()" in names(s)]
if seed != [pid]:
    fail("h: the seed (pids %s) is not the first process walked in the process (%d)" % (seed, pid))
elif len(st) != 1 or (st[0]["bytes"], st[0]["allocations"]) != (50 * 40, 50):
    fail("h: want the seed's 2000 B in 50 allocations through LeakLib::slowMemoryLeak():\n%s" %
         "".join(show(s) for s in r["stacks"] if s["pid"] in seed))
elif names(st[0])[:5] != ["malloc", "operator new(unsigned long)", "LeakLib::slowMemoryLeak()", "caller()", "main"]:
    fail("h: the seed's frames: %s" % names(st[0]))
else:
    ok("h: the exec'd seed's leak whole, walked in the process: " + " <- ".join(names(st[0])))
PY
fi
check_finish
