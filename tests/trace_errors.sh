#!/bin/bash
# dwleak's error paths and lifecycle with real BPF (issue 3, SPEC.md "Exit
# status"): every case checks the exit status and the one `dwleak:` line on
# stderr.
#
#   a  -p PID of no process; -p 2 (kthreadd, a kernel thread)
#   b  no capabilities: as nobody (setpriv, all capabilities dropped), and as
#      uid 0 with an empty capability bounding set
#   c  usage errors: no target, -p and -- CMD, bad --top/--unwind/-p, unknown option
#   d  -- CMD that does not exist / is not executable / is not a program; a
#      script, whose exec'd program is traced; CMD's own exit status and death by signal are printed and
#      returned (SPEC: a failing command is never a pass), also over
#      --fail-on-leak's 1, and for a static program dwleak cannot trace
#      (let go, but waited for)
#   e  the target exits while dwleak traces it (-p): final report, exit 0, soon
#   f  dwleak killed with SIGKILL: the target keeps running and exits 0, and
#      the breakpoints are gone from its copy of libc
#   g  SIGINT (text report) and SIGTERM (JSON report): final report, exit 0,
#      the target left running
#   h  --fail-on-leak: clean program 0, leaking one 1, threshold respected
#   i  a process maps an aarch64 library executable (testdata's
#      libpac_a64.so, which it cannot run): its table is refused for the
#      x86 walker with a warning naming the file and why, and the trace
#      goes on, the process's leaks reported with rooted stacks
#
# Run by tests/run.sh (DWLEAK = the ASan build); by hand:
#   DWLEAK=build/asan/dwleak TESTDATA=build/testdata bash tests/trace_errors.sh
# LT_ONLY=aef runs some parts; LT_KEEP=1 keeps the logs.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
SEED=$TESTDATA/seed_O2
LIBC=/lib/x86_64-linux-gnu/libc.so.6

tmp=$LT_TMP
chmod 755 "$tmp" # the capability-less runs of part b read and run a copy in it
dp='' # dwleak's pid, set by lt_trace

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# --- Preconditions: skip only when BPF is really unavailable ---

lt_require_bpf
lt_testdata clean # part h's clean program
timeout 60 "$DWLEAK" -- /bin/true > "$tmp/probe.out" 2> "$tmp/probe.err"
if grep -q 'cannot load the BPF program\|cannot attach a uprobe' "$tmp/probe.err"; then
	cat "$tmp/probe.err"
	echo "skip: BPF uprobes are not available here: $(grep -m1 '^dwleak:' "$tmp/probe.err")"
	exit 77
fi

# sane_stderr NAME FILE: no sanitizer report, no libbpf chatter.
sane_stderr() {
	if grep -q 'Sanitizer\|runtime error' "$2"; then
		fail "$1: sanitizer report:"
		head -n 20 "$2" | sed 's/^/    /'
		return 1
	fi
	if grep -q '^libbpf:' "$2"; then
		fail "$1: libbpf messages on stderr: $(grep -m1 '^libbpf:' "$2")"
		return 1
	fi
	return 0
}

# run_sane NAME SECS CMD...: CMD under a timeout of SECS, stdout to
# $tmp/out and stderr to $tmp/err; its exit status in rc (declare it local
# in the caller).  Fails (a counted check) when its stderr is not sane.
run_sane() {
	local name=$1 secs=$2
	shift 2
	timeout -k 5 "$secs" "$@" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	sane_stderr "$name" "$tmp/err"
}

# expect_error NAME ERE CMD...: CMD exits 2 and its stderr is exactly one
# line, matching ERE.
expect_error() {
	local name=$1 re=$2 rc n
	shift 2
	run_sane "$name" 60 "$@" || return
	n=$(grep -c . "$tmp/err")
	if [ $rc -ne 2 ]; then
		fail "$name: exit $rc, want 2 (stderr: $(head -c 300 "$tmp/err"))"
	elif [ "$n" -ne 1 ] || ! grep -Eq "$re" "$tmp/err"; then
		fail "$name: want one line matching /$re/, got $n line(s): $(head -c 300 "$tmp/err")"
	else
		pass "$name: exit 2: $(cat "$tmp/err")"
	fi
}

# expect_usage NAME ERE ARGS...: `dwleak ARGS` exits 2 with a `dwleak:` line
# matching ERE, then "Try 'dwleak --help' ...", and nothing else.
expect_usage() {
	local name=$1 re=$2 rc
	shift 2
	run_sane "$name" 30 "$DWLEAK" "$@" || return
	if [ $rc -ne 2 ]; then
		fail "$name: exit $rc, want 2"
	elif [ "$(grep -c . "$tmp/err")" -ne 2 ] ||
		! sed -n 1p "$tmp/err" | grep -Eq "^dwleak: ($re)" ||
		! sed -n 2p "$tmp/err" | grep -q "^Try 'dwleak --help'"; then
		fail "$name: want 'dwleak: $re' + Try 'dwleak --help', got: $(head -c 300 "$tmp/err")"
	elif grep -q '^dwleak: tracing' "$tmp/err" || [ -s "$tmp/out" ]; then
		fail "$name: traced or reported anyway"
	else
		pass "$name: $(head -n 1 "$tmp/err")"
	fi
}

# wait_mapped PID: until PID has exec'ed and mapped libc (dwleak -p on a
# process still between fork and exec would rightly find no glibc).
wait_mapped() {
	local i
	for ((i = 0; i < 200; i++)); do
		grep -q '/libc\.so\.6$' /proc/$1/maps 2> /dev/null &&
			[[ $(readlink /proc/$1/exe) == "$SEED" || $(readlink /proc/$1/exe) == "$(readlink -f "$SEED")" ]] && return 0
		sleep 0.02
	done
	return 1
}

# A pid no process has: from the top of the pid space down.
free_pid() {
	local max p
	max=$(cat /proc/sys/kernel/pid_max)
	for ((p = max - 1; p > 1000; p--)); do
		[ -e /proc/$p ] || { echo $p; return; }
	done
}

# --- a: pids that cannot be traced ---
if lt_part a; then
	p=$(free_pid)
	expect_error "-p $p (no such process)" "^dwleak: no process with pid $p\$" "$DWLEAK" -p "$p"
	if [ "$(cat /proc/2/comm 2> /dev/null)" = kthreadd ]; then
		expect_error "-p 2 (kthreadd)" '^dwleak: .*pid 2.*kernel thread' "$DWLEAK" -p 2
	else
		fail "-p 2: pid 2 is not kthreadd here; cannot test a kernel thread"
	fi
fi

# --- b: no capabilities ---
if lt_part b; then
	if ! command -v setpriv > /dev/null; then
		fail "setpriv (util-linux) is missing: cannot drop capabilities"
	else
		# a copy nobody can read and run (the build tree may not be)
		cp "$DWLEAK" "$tmp/dwleak"
		chmod 755 "$tmp/dwleak"
		nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all)
		caps_re='^dwleak: needs CAP_BPF and CAP_PERFMON \(run as root\)$'
		"$SEED" --iterations 300 --interval-ms 20 > /dev/null &
		tp=$!
		lt_pids+=($tp)
		wait_mapped $tp
		np=
		if "${nobody[@]}" /bin/true 2> /dev/null; then
			expect_error "nobody: -p PID" "$caps_re" "${nobody[@]}" "$tmp/dwleak" -p $tp
			expect_error "nobody: -- CMD" "$caps_re" "${nobody[@]}" "$tmp/dwleak" -- /bin/true
			"${nobody[@]}" "$SEED" --iterations 300 --interval-ms 20 > /dev/null &
			np=$!
			lt_pids+=($np)
			wait_mapped $np
			expect_error "nobody: -p PID of its own process" "$caps_re" "${nobody[@]}" "$tmp/dwleak" -p $np
		else
			# a root directory of mode 0700 (a chroot made in a mktemp -d
			# directory, as ../shared/tools/fresh-debian.sh makes one) lets
			# no one but root load a shared library: nobody cannot run
			# dwleak at all here, so only the uid-0 checks below can run
			echo "note: nobody cannot run /bin/true here ($(stat -c '/ is mode %a' /)): the checks as nobody are not run"
		fi
		# uid 0 but no capabilities (a container without CAP_BPF, or
		# capsh --drop): being root is not what matters
		rootless=(setpriv --inh-caps=-all --bounding-set=-all)
		expect_error "uid 0 without capabilities: -- CMD" "$caps_re" "${rootless[@]}" "$tmp/dwleak" -- /bin/true
		expect_error "uid 0 without capabilities: -p PID" "$caps_re" "${rootless[@]}" "$tmp/dwleak" -p $tp
		kill -KILL $tp $np 2> /dev/null
		wait $tp $np 2> /dev/null
	fi
fi

# --- c: usage errors ---
if lt_part c; then
	expect_usage "no target" 'nothing to trace' 
	expect_usage "-- with no command" 'nothing to trace|no command|missing' --
	expect_usage "-p and -- CMD" '.*(either|both|not both)' -p 1 -- /bin/true
	expect_usage "--top abc" ".*(--top|top).*abc" -t abc -p 1
	expect_usage "--top -5" ".*(--top|top).*-5" --top -5 -p 1
	expect_usage "--unwind bogus" ".*--unwind.*bogus" --unwind bogus -p 1
	expect_usage "-p abc" ".*pid.*abc" -p abc
	expect_usage "-p without a value" ".*-p" -p
	expect_usage "unknown option" ".*--no-such-option" --no-such-option -p 1
fi

# --- d: -- CMD that cannot run; CMD's own status ---
if lt_part d; then
	expect_error "-- missing command" '^dwleak: .*(does/not/exist|no such file|not found)' \
		"$DWLEAK" -- "$tmp/does/not/exist"
	expect_error "-- command not in PATH" '^dwleak: .*no-such-command-xyz' \
		"$DWLEAK" -- no-such-command-xyz
	printf 'not a program\n' > "$tmp/not_exec"
	chmod 644 "$tmp/not_exec"
	expect_error "-- file without execute permission" \
		'^dwleak: .*not_exec.*(not executable|[Pp]ermission denied|cannot execute)' \
		"$DWLEAK" -- "$tmp/not_exec"
	# a script (a pyenv shim, say): its interpreter and what it execs are
	# followed like any exec, so the program's leak is in the report
	printf '#!/bin/sh\nexec %s --iterations 4 --interval-ms 1\n' "$SEED" > "$tmp/shim"
	chmod 755 "$tmp/shim"
	# (the report of -- CMD is on stderr: the command's stdout is its own)
	if run_sane "-- a script" 60 "$DWLEAK" -t 3 -- "$tmp/shim"; then
		if [ $rc -ne 0 ] || ! grep -q 'slowMemoryLeak' "$tmp/err" || ! grep -q '^Totals: 160 bytes' "$tmp/err"; then
			fail "-- a script that execs the seed: exit $rc, want 0 and the seed's 160 bytes: $(head -c 600 "$tmp/err")"
		else
			pass "-- a script: the program it execs is traced ($(grep '^Totals' "$tmp/err"))"
		fi
	fi
	printf 'no interpreter line\n' > "$tmp/not_elf"
	chmod 755 "$tmp/not_elf"
	expect_error "-- CMD --format json without -o" \
		'^dwleak: --format json writes a file a program reads, .*: give -o FILE' \
		"$DWLEAK" --format json -- /bin/true
	expect_error "-- not an ELF program" "^dwleak: .*not_elf.* is not a program: neither ELF nor a script" \
		"$DWLEAK" -- "$tmp/not_elf"

	if run_sane "-- sh -c 'exit 3'" 60 "$DWLEAK" -- sh -c 'exit 3'; then
		if [ $rc -ne 3 ]; then
			fail "-- sh -c 'exit 3': dwleak exit $rc, want 3 (CMD's status)"
		elif ! grep -q '^dwleak: .*exited with status 3$' "$tmp/err"; then
			fail "-- sh -c 'exit 3': no 'exited with status 3' line: $(cat "$tmp/err")"
		elif ! grep -q '^Totals:' "$tmp/err"; then
			fail "-- sh -c 'exit 3': no report on stderr"
		else
			pass "-- sh -c 'exit 3': exit 3, $(grep 'exited with' "$tmp/err")"
		fi
	fi
	if run_sane "-- CMD killed by SIGSEGV" 60 "$DWLEAK" -- sh -c 'kill -SEGV $$'; then
		if [ $rc -ne 139 ] || ! grep -q '^dwleak: .*signal 11' "$tmp/err" || ! grep -q '^Totals:' "$tmp/err"; then
			fail "-- CMD killed by SIGSEGV: exit $rc (want 128+11), stderr: $(cat "$tmp/err")"
		else
			pass "-- CMD killed by SIGSEGV: exit 139, $(grep 'signal 11' "$tmp/err")"
		fi
	fi
	# a command that cannot be traced (a static program without symbols)
	# is let go, and still waited for: dwleak ends with it and exits with
	# its status (it used to exit 0 at once, the command running on)
	if printf '#include <unistd.h>\nint main(void) { usleep(300000); write(1, "done\\n", 5); return 4; }\n' |
		cc -static -s -x c -o "$tmp/static_exit" - 2> "$tmp/cc.err"; then
		if run_sane "-- a static program that exits 4" 60 "$DWLEAK" -- "$tmp/static_exit"; then
			if [ $rc -ne 4 ] || ! grep -q '^dwleak: warning: not tracing pid' "$tmp/err" ||
				! grep -q '^dwleak: .*exited with status 4$' "$tmp/err" || ! grep -q '^done$' "$tmp/out"; then
				fail "-- a static program that exits 4: dwleak exit $rc, want 4 after it: $(cat "$tmp/err")"
			else
				pass "-- a static program, not traced: waited for, exit 4, $(grep 'exited with' "$tmp/err")"
			fi
		fi
	else
		echo "note: no static libc to build a static program: $(head -1 "$tmp/cc.err")"
	fi
	# a leak over --fail-on-leak's threshold and a failing command: the
	# command's status, not 1 (CI must see the crash, not a leak)
	if run_sane "-- leaking CMD that exits 5" 60 "$DWLEAK" --fail-on-leak -- sh -c "$SEED --iterations 3; exit 5"; then
		if [ $rc -ne 5 ] || ! grep -q '^Totals: [1-9]' "$tmp/err"; then
			fail "--fail-on-leak with a command exiting 5 after leaking: exit $rc, want 5"
		else
			pass "--fail-on-leak with a command exiting 5 after leaking: exit 5"
		fi
	fi
fi

# --- e: the target exits while traced ---
if lt_part e; then
	# --delay-ms leaves time to attach (ASan dwleak: up to ~1 s); then 10
	# allocations of 40 bytes, 100 ms apart
	"$SEED" --iterations 10 --interval-ms 100 --delay-ms 2500 > "$tmp/target.out" &
	tp=$!
	lt_pids+=($tp)
	wait_mapped $tp
	t0=$(now)
	if ! lt_trace dp "$tmp/e.err" -p $tp -d 30 > "$tmp/e.out"; then
		fail "target exits: no tracing line: $(head -c 300 "$tmp/e.err")"
	else
		t_tr=$(now)
		wait $tp
		trc=$?
		t_exit=$(now)
		# the report comes first; teardown (one uprobe unregistration per
		# probe) may take a few seconds more on this VM
		for ((i = 0; i < 200; i++)); do
			grep -q '^Totals:' "$tmp/e.out" && break
			kill -0 $dp 2> /dev/null || break
			sleep 0.05
		done
		t_report=$(now)
		lt_wait $dp 20
		rc=$?
		t_done=$(now)
		rlag=$(elapsed "$t_exit" "$t_report")
		lag=$(elapsed "$t_exit" "$t_done")
		sane_stderr "target exits" "$tmp/e.err"
		if [ $trc -ne 0 ]; then
			fail "target exits: the target itself exited $trc under tracing"
		elif [ $rc -ne 0 ]; then
			fail "target exits: dwleak exit $rc, want 0 ($(grep -v '^dwleak: tracing' "$tmp/e.err" | head -c 300))"
		elif ! grep -q '^Totals:' "$tmp/e.out"; then
			fail "target exits: no final report"
		elif awk -v l="$rlag" 'BEGIN { exit !(l > 2) }'; then
			fail "target exits: final report ${rlag}s after the target exited (want < 2 s)"
		elif awk -v l="$lag" 'BEGIN { exit !(l > 10) }'; then
			fail "target exits: dwleak ended ${lag}s after its target (want < 10 s, -d 30)"
		else
			pass "target exits: exit 0, final report ${rlag}s and exit ${lag}s after the target"
		fi
		# the 10 leaks happened after the tracing line when attach beat --delay-ms
		if [ "$(elapsed "$t0" "$t_tr" | cut -d. -f1)" -lt 2 ]; then
			if grep -A6 '^	400 bytes in 10 allocations' "$tmp/e.out" | grep -c 'LeakLib::slowMemoryLeak' > /dev/null; then
				pass "target exits: report has the 400 bytes in 10 allocations from slowMemoryLeak"
			else
				fail "target exits: report lacks '400 bytes in 10 allocations' from slowMemoryLeak:"
				sed 's/^/    /' "$tmp/e.out" | head -n 30
			fi
		fi
	fi
fi

# libc_bytes PID FUNC...: for each FUNC, "FUNC MEM FILE": the first byte of
# FUNC in the process's copy of libc and in the file (hex).  An active uprobe
# shows as cc in memory.
libc_bytes() {
	python3 - "$@" << 'EOF'
import subprocess, sys
pid = int(sys.argv[1])
base = path = None
for line in open(f"/proc/{pid}/maps"):
    f = line.split()
    if len(f) >= 6 and f[5].endswith("/libc.so.6") and int(f[2], 16) == 0:
        base, path = int(f[0].split("-")[0], 16), f[5]
        break
if base is None:
    sys.exit("no libc mapping")
syms = {}
for line in subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True).stdout.splitlines():
    f = line.split()
    if len(f) == 3:
        syms.setdefault(f[2].split("@")[0], int(f[0], 16))
# ELF vaddr -> file offset through the PT_LOAD segments
loads = []
for line in subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout.splitlines():
    f = line.split()
    if f and f[0] == "LOAD":
        loads.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
with open(f"/proc/{pid}/mem", "rb") as mem, open(path, "rb") as elf:
    for name in sys.argv[2:]:
        v = syms[name]
        off = next(o + v - va for o, va, fs in loads if va <= v < va + fs)
        mem.seek(base + v)
        elf.seek(off)
        print(name, mem.read(1).hex(), elf.read(1).hex())
EOF
}

# --- f: dwleak killed with SIGKILL ---
if lt_part f; then
	# >= 6 s of work at 10 ms (more under the probes); exits 0 on its own
	"$SEED" --iterations 600 --interval-ms 10 > "$tmp/target.out" &
	tp=$!
	lt_pids+=($tp)
	wait_mapped $tp
	if ! lt_trace dp "$tmp/f.err" -p $tp > "$tmp/f.out"; then
		fail "SIGKILL: no tracing line: $(head -c 300 "$tmp/f.err")"
	else
		libc_bytes $tp malloc free > "$tmp/bytes.during" 2>&1
		sleep 0.3
		kill -KILL $dp
		wait $dp 2> /dev/null
		t_kill=$(now)
		# breakpoints must leave the target's text (uprobe removal may be
		# deferred a little)
		for ((i = 0; i < 20; i++)); do
			[ -e /proc/$tp/maps ] || break
			libc_bytes $tp malloc free > "$tmp/bytes.after" 2>&1
			awk '$2 != $3 { bad = 1 } END { exit bad }' "$tmp/bytes.after" && break
			sleep 0.05
		done
		if grep -q 'cc ' "$tmp/bytes.during"; then
			pass "SIGKILL: while tracing, libc text had breakpoints: $(tr '\n' ' ' < "$tmp/bytes.during")"
		else
			echo "note: no int3 seen in libc while tracing ($(tr '\n' ' ' < "$tmp/bytes.during")); the check below proves less"
		fi
		if [ "$(awk 'NF == 3' "$tmp/bytes.after" | wc -l)" -eq 2 ] &&
			awk '$2 != $3 { bad = 1 } END { exit bad }' "$tmp/bytes.after"; then
			pass "SIGKILL: no uprobe left in the target's libc: $(tr '\n' ' ' < "$tmp/bytes.after")"
		else
			fail "SIGKILL: libc in the target still differs from the file after dwleak died: $(tr '\n' ' ' < "$tmp/bytes.after")"
		fi
		state=$(awk '/^State:/ { print $2 }' /proc/$tp/status 2> /dev/null)
		case $state in
		R | S) pass "SIGKILL: target still running (State $state)" ;;
		*) fail "SIGKILL: target state '${state:-gone}' right after dwleak died" ;;
		esac
		lt_wait $tp 30
		trc=$?
		t_end=$(now)
		if [ $trc -eq 0 ]; then
			pass "SIGKILL: target finished its 600 iterations and exited 0 ($(elapsed "$t_kill" "$t_end")s later)"
		else
			fail "SIGKILL: target exited $trc after dwleak was killed (want 0)"
		fi
	fi
fi

# --- g: SIGINT and SIGTERM give the final report ---
if lt_part g; then
	for sig in INT TERM; do
		if [ $sig = INT ]; then fmt=text; else fmt=json; fi
		"$SEED" --interval-ms 20 > "$tmp/target.out" &
		tp=$!
		lt_pids+=($tp)
		wait_mapped $tp
		if ! lt_trace dp "$tmp/g.err" -p $tp --format $fmt > "$tmp/g.out"; then
			fail "SIG$sig: no tracing line: $(head -c 300 "$tmp/g.err")"
			kill -KILL $tp $dp 2> /dev/null
			continue
		fi
		sleep 1
		kill -$sig $dp
		lt_wait $dp 20
		rc=$?
		sane_stderr "SIG$sig" "$tmp/g.err"
		if [ $rc -ne 0 ]; then
			fail "SIG$sig: dwleak exit $rc, want 0 ($(grep -v '^dwleak: tracing' "$tmp/g.err" | head -c 300))"
		elif [ $fmt = text ]; then
			if grep -q '^\[.*\] Top ' "$tmp/g.out" && grep -q '^Totals:' "$tmp/g.out"; then
				pass "SIG$sig: exit 0, text report: $(grep '^Totals:' "$tmp/g.out")"
			else
				fail "SIG$sig: no text report (Top ... / Totals:) on stdout: $(head -c 300 "$tmp/g.out")"
			fi
			# 1 s of a leak every 20 ms: the leak site must be in it
			grep -q 'LeakLib::slowMemoryLeak' "$tmp/g.out" ||
				fail "SIG$sig: 1 s of tracing a 40 B leak every 20 ms, but no slowMemoryLeak stack: $(grep -E '^(Totals|Counters):' "$tmp/g.out" | tr '\n' ' ')"
		else
			if python3 - "$tmp/g.out" << 'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dwleak_report"] == 1, "dwleak_report"
t = d["totals"]
print(f"JSON parses: {t['outstanding_bytes']} bytes in {t['outstanding_allocations']} allocations, {d['duration_s']} s")
if not any(any((f.get("function") or "").startswith("LeakLib::slowMemoryLeak") for f in s["frames"]) for s in d["stacks"]):
    sys.exit("1 s of tracing a 40 B leak every 20 ms, but no slowMemoryLeak stack")
EOF
				pass "SIG$sig: exit 0, JSON report"
			else
				fail "SIG$sig: JSON report wrong: $(head -c 300 "$tmp/g.out")"
			fi
		fi
		if kill -0 $tp 2> /dev/null && [ "$(awk '/^State:/ { print $2 }' /proc/$tp/status)" != Z ]; then
			pass "SIG$sig: target left running"
		else
			fail "SIG$sig: the target did not survive dwleak's exit"
		fi
		kill -KILL $tp 2> /dev/null
		wait $tp 2> /dev/null
	done
fi

# --- h: --fail-on-leak ---
if lt_part h; then
	# fail_on_leak NAME WANT ARGS...
	fail_on_leak() {
		local name=$1 want=$2 rc
		shift 2
		run_sane "$name" 60 "$DWLEAK" "$@" || return
		if [ $rc -ne "$want" ]; then
			fail "$name: exit $rc, want $want ($(grep -E '^Totals' "$tmp/err"); $(grep '^dwleak:' "$tmp/err" | grep -v '^dwleak: tracing' | head -c 200))"
		else
			pass "$name: exit $rc ($(grep -E '^Totals' "$tmp/err" | cut -d, -f1))"
		fi
	}
	fail_on_leak "--fail-on-leak, clean program" 0 --fail-on-leak -- "$TESTDATA/clean"
	fail_on_leak "--fail-on-leak, seed --iterations 5" 1 --fail-on-leak -- "$SEED" --iterations 5 --interval-ms 10
	fail_on_leak "--fail-on-leak=1000000, seed --iterations 5 (under the threshold)" 0 \
		--fail-on-leak=1000000 -- "$SEED" --iterations 5 --interval-ms 10
fi

if lt_part i; then
	PAC=$TESTDATA/libpac_a64.so
	[ -f "$PAC" ] || fail_now "$PAC is missing (make testdata)"
	cat > "$tmp/map_a64.py" << 'PY'
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)
import _json  # a dlopen after it: dwleak looks at the process's new mappings
keep = [bytearray(600) for _ in range(20)]  # past pymalloc's 512 bytes: malloc
time.sleep(0.2)
print("mapped", len(m), flush=True)
os._exit(0)  # no finalization: the bytearrays stay outstanding
PY
	"$DWLEAK" --format json -t 0 -o "$tmp/i.json" -- "$LT_PYTHON" "$tmp/map_a64.py" "$PAC" > "$tmp/i.out" 2> "$tmp/i.err"
	rc=$?
	if [ $rc -ne 0 ]; then
		fail "i: dwleak exited $rc: $(tail -3 "$tmp/i.err")"
	elif ! grep -q "^dwleak: warning: no unwind table for $PAC: an aarch64 object: this walker unwinds x86_64 code" \
		"$tmp/i.err"; then
		fail "i: no warning that the aarch64 library's table was refused: $(grep -m3 warning "$tmp/i.err")"
	else
		pass "i: $(grep -o 'no unwind table for .*' "$tmp/i.err" | head -1)"
		lt_check "$tmp/i.json" << 'PY'
st = [s for s in r["stacks"] if s["bytes"] and s["bytes"] % 601 == 0 and s["bytes"] // 601 == s["allocations"]]
n = sum(s["allocations"] for s in st)
rooted = [s for s in st if names(s) and names(s)[-1] == "_start"]
if n < 20:
    fail(f"i: {n} blocks of 601 bytes reported, want the 20 bytearrays")
elif len(rooted) != len(st):
    fail("i: a stack of the bytearrays is not rooted at _start:\n" + "".join(show(s) for s in st if s not in rooted))
else:
    ok(f"i: the 20 bytearrays reported ({n} blocks of 601 B), every stack rooted at _start")
PY
	fi
fi

check_finish
