#!/bin/bash
# dwleak -- CMD and the command's verdict (issue 20, items 7, 8, 9b): the
# command's status comes back after the whole tree ended, whatever dwleak
# could trace; what it could not trace is said, and --fail-on-leak never
# passes on it; the report keeps out of the command's stdout.
#
#   a  a static, stripped busybox (busybox-static's .deb, unpacked here:
#      it conflicts with Debian's busybox package) under --fail-on-leak:
#      `sh -c 'sleep 1; exit 7'` gives 7 after >= 1 s, a signal 128+N,
#      nothing left running; the report lists the untraced processes
#   b  the same with a static stripped program of our own (static_run)
#   c  a static program that exits 0: --fail-on-leak exits 2 with one line
#      saying what was not traced; --allow-untraced and no --fail-on-leak
#      exit 0; JSON: processes[].traced, reason, totals.untraced_processes
#   d  an untraced parent's dynamic children are traced: the seed's leak
#      under static_run and under busybox sh (exit 1: the leak decides),
#      a clean child under busybox sh (exit 2: the shell was not traced)
#   e  the report is on stderr with -- CMD: `echo '{"a":1}' | dwleak -- jq
#      -c . | jq .a` prints 1; -o FILE in every format leaves stdout to
#      the command; structured formats without -o are refused; --interval
#      reports go to stderr; -p keeps stdout; pprof to a terminal refused
#   f  -p with dwleak's own pid: "cannot trace itself", exit 2
#
# Needs the busybox-static .deb that .ci/deps.sh downloads into
# /var/cache/dwleak/debs (DWLEAK_DEB_DIR), and jq.  By hand:
#   LT_ONLY=ab bash tests/cmd_exit_status.sh
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
lt_testdata static_run
STATIC=$PROG
SEED=$TESTDATA/seed_O2
CLEAN=$TESTDATA/clean
tmp=$LT_TMP
DEB_DIR=${DWLEAK_DEB_DIR:-/var/cache/dwleak/debs}
UNTRACED_RE='no object it maps defines malloc \(a static program without symbols\?\)'

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
at_least() { awk -v x="$1" -v m="$2" 'BEGIN { exit !(x >= m) }'; }

# run NAME ARGS...: $DWLEAK ARGS under a timeout, stdout to $tmp/NAME.out,
# stderr to $tmp/NAME.err; rc and secs (wall time) set.
run() {
	local name=$1 t0
	shift
	t0=$(now)
	timeout -k 5 120 "$DWLEAK" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
	rc=$?
	secs=$(elapsed "$t0" "$(now)")
	if grep -q 'Sanitizer\|runtime error' "$tmp/$name.err"; then
		fail "$name: sanitizer report: $(grep -m3 'Sanitizer\|runtime error' "$tmp/$name.err")"
	fi
}

# expect_rc NAME WANT: rc is WANT, else a failed check with dwleak's stderr.
expect_rc() {
	if [ "$rc" -ne "$2" ]; then
		fail "$1: dwleak exit $rc, want $2; stderr:"
		sed 's/^/    /' "$tmp/$1.err" | tail -n 20
		return 1
	fi
	return 0
}

# left_running PATTERN: the processes whose command line matches PATTERN.
left_running() {
	pgrep -af -- "$1" || true
}

# --- a: a static, stripped busybox ---
if lt_part a; then
	deb=$(compgen -G "$DEB_DIR/busybox-static_*.deb" | head -n 1)
	if [ -z "$deb" ]; then
		fail "no busybox-static .deb in $DEB_DIR: run .ci/deps.sh (it downloads it; installing it would remove busybox)"
	else
		dpkg -x "$deb" "$tmp/bbs"
		BB=$tmp/bbs/bin/busybox
		# static (no interpreter) and stripped (no symbol table): readelf,
		# from binutils, which the build needs anyway
		if readelf -lW "$BB" | grep -q INTERP || readelf -SW "$BB" | grep -q '\.symtab'; then
			fail "busybox-static is not static and stripped: $(readelf -lW "$BB" | grep -c INTERP) interpreter(s), $(readelf -SW "$BB" | grep -c '\.symtab') symbol table(s)"
		fi

		run bb_exit7 --fail-on-leak -- "$BB" sh -c 'sleep 1; exit 7'
		if expect_rc bb_exit7 7; then
			if ! at_least "$secs" 1; then
				fail "busybox sh -c 'sleep 1; exit 7': dwleak returned after ${secs}s, before the command ended"
			else
				pass "busybox sh -c 'sleep 1; exit 7': exit 7 after ${secs}s"
			fi
		fi
		[ -z "$(left_running "$BB")" ] || fail "busybox processes left running: $(left_running "$BB")"
		grep -q "^dwleak: .*busybox sh -c sleep 1; exit 7 exited with status 7$" "$tmp/bb_exit7.err" ||
			fail "no 'exited with status 7' line: $(tail -n 5 "$tmp/bb_exit7.err")"
		# the report (on stderr) says what it could not trace, and why
		if grep -q '^Not traced: 2 processes' "$tmp/bb_exit7.err" &&
			grep -Eq "^	pid [0-9]+ $BB sh -c sleep 1; exit 7: $UNTRACED_RE\$" "$tmp/bb_exit7.err" &&
			grep -Eq "^	pid [0-9]+ sleep 1: $UNTRACED_RE\$" "$tmp/bb_exit7.err"; then
			pass "busybox: the report lists the shell and its sleep as not traced, with why"
		else
			fail "busybox: the report does not list the shell and sleep as not traced:"
			sed 's/^/    /' "$tmp/bb_exit7.err"
		fi
		grep -q '^dwleak: --fail-on-leak cannot pass' "$tmp/bb_exit7.err" &&
			fail "busybox: the command failed, yet dwleak speaks of --fail-on-leak: its status must win"

		run bb_signal --fail-on-leak -- "$BB" sh -c 'sleep 1; kill -TERM $$'
		if expect_rc bb_signal 143; then
			at_least "$secs" 1 && pass "busybox sh killed by SIGTERM after 1 s: exit 143 after ${secs}s" ||
				fail "busybox sh killed by SIGTERM: dwleak returned after ${secs}s, before it ended"
		fi
		[ -z "$(left_running "$BB")" ] || fail "busybox processes left running: $(left_running "$BB")"
	fi
fi

# --- b: a static stripped program of our own ---
if lt_part b; then
	run static_exit9 --fail-on-leak -- "$STATIC" --delay-ms 1000 --exit 9
	if expect_rc static_exit9 9; then
		at_least "$secs" 1 && pass "static_run --delay-ms 1000 --exit 9: exit 9 after ${secs}s" ||
			fail "static_run --exit 9: dwleak returned after ${secs}s, before the program ended"
	fi
	[ -z "$(left_running "$STATIC --delay-ms")" ] || fail "static_run left running: $(left_running "$STATIC --delay-ms")"
	run static_signal -- "$STATIC" --delay-ms 300 --signal 11
	expect_rc static_signal 139 && pass "static_run killed by SIGSEGV: exit 139"
	grep -q '^dwleak: .*static_run --delay-ms 300 --signal 11 was killed by signal 11' "$tmp/static_signal.err" ||
		fail "static_run --signal 11: no 'killed by signal 11' line: $(tail -n 3 "$tmp/static_signal.err")"
fi

# --- c: a static program that succeeds: no verdict can pass on it ---
if lt_part c; then
	run static_ok --fail-on-leak -o "$tmp/static_ok.json" --format json -- "$STATIC" --exit 0
	if expect_rc static_ok 2; then
		line=$(grep '^dwleak: --fail-on-leak' "$tmp/static_ok.err")
		if [[ $line =~ ^dwleak:\ --fail-on-leak\ cannot\ pass:\ pid\ [0-9]+\ \(.*static_run\ --exit\ 0\)\ was\ not\ traced\ \(no\ object\ it\ maps\ defines\ malloc.*\),\ so\ what\ it\ leaked\ is\ unknown.*--allow-untraced ]]; then
			pass "static program exiting 0, --fail-on-leak: exit 2: $line"
		else
			fail "static program exiting 0, --fail-on-leak: no line saying what was not traced: $(cat "$tmp/static_ok.err")"
		fi
	fi
	lt_check "$tmp/static_ok.json" << 'PY'
p = r["processes"]
if r["totals"].get("untraced_processes") != 1 or len(p) != 1:
    fail("totals.untraced_processes %s, processes %s; want 1 and 1" % (r["totals"].get("untraced_processes"), p))
elif (p[0]["traced"], p[0]["state"], p[0]["exit_code"]) != (False, "ended", 0) or "defines malloc" not in (p[0]["reason"] or ""):
    fail("the static program's entry: %s" % p[0])
else:
    ok("JSON: traced false, ended with 0, reason %r; totals.untraced_processes 1" % p[0]["reason"])
PY
	run static_allow --fail-on-leak --allow-untraced -- "$STATIC" --exit 0
	expect_rc static_allow 0 && pass "--allow-untraced: exit 0"
	grep -Eq "^dwleak: warning: pid [0-9]+ \(.*static_run --exit 0\) was not traced \(no object" "$tmp/static_allow.err" ||
		fail "--allow-untraced: no closing warning saying what was not traced: $(tail -n 2 "$tmp/static_allow.err")"
	run static_plain -- "$STATIC" --exit 0
	expect_rc static_plain 0 && pass "no --fail-on-leak: exit 0"
	grep -q '^Not traced: 1 process' "$tmp/static_plain.err" || fail "no --fail-on-leak: the report does not say 'Not traced'"
fi

# --- d: an untraced parent's dynamic children are traced ---
if lt_part d; then
	run static_seed --fail-on-leak --format json -o "$tmp/static_seed.json" -- \
		"$STATIC" --exit 0 -- "$SEED" --iterations 3 --interval-ms 1
	expect_rc static_seed 1 && pass "static_run running the seed, --fail-on-leak: exit 1 (the seed leaked)"
	lt_check "$tmp/static_seed.json" << 'PY'
procs = {p["pid"]: p for p in r["processes"]}
top = procs.get(r["pid"])
seeds = [s for s in r["stacks"] if "LeakLib::slowMemoryLeak()" in names(s)]
if not top or top["traced"] or top["exit_code"] != 0:
    fail("the static parent: %s" % top)
elif len(seeds) != 1 or (seeds[0]["bytes"], seeds[0]["allocations"]) != (120, 3):
    fail("the seed child's leak: %s" % [show(s) for s in seeds])
elif seeds[0]["pid"] == r["pid"] or not procs[seeds[0]["pid"]]["traced"] or procs[seeds[0]["pid"]]["ppid"] != r["pid"]:
    fail("the seed's leak is not in a traced child of the static parent: %s" % procs)
else:
    ok("the static parent untraced, its child the seed traced: 120 B in 3 from slowMemoryLeak")
PY
	if [ -n "${BB:-}" ]; then
		run bb_seed --fail-on-leak -t 1 -- "$BB" sh -c "$SEED --iterations 2 --interval-ms 1; exit 0"
		if expect_rc bb_seed 1 && grep -q '^	80 bytes in 2 allocations from stack (operator new' "$tmp/bb_seed.err" &&
			grep -q 'LeakLib::slowMemoryLeak()' "$tmp/bb_seed.err"; then
			pass "busybox sh running the seed: exit 1, the seed's 80 B in 2 traced"
		else
			fail "busybox sh running the seed: rc $rc, report: $(grep -E '^(Process|	[0-9]+ bytes)' "$tmp/bb_seed.err")"
		fi
		run bb_clean --fail-on-leak -- "$BB" sh -c "$CLEAN --iterations 3 --interval-ms 1; exit 0"
		if expect_rc bb_clean 2; then
			if grep -q "^Process [0-9]* $CLEAN --iterations 3 --interval-ms 1 (parent [0-9]*): exited with status 0; 0 bytes" "$tmp/bb_clean.err"; then
				pass "busybox sh running a clean program: exit 2 (the shell was not traced), the program traced"
			else
				fail "busybox sh running a clean program: the program is not traced: $(grep '^Process' "$tmp/bb_clean.err")"
			fi
		fi
	fi
fi

# --- e: where the report goes ---
if lt_part e; then
	if ! command -v jq > /dev/null; then
		fail "jq is missing (.ci/deps.sh installs it)"
	else
		got=$(echo '{"a":1}' | timeout -k 5 60 "$DWLEAK" -- jq -c . 2> "$tmp/jq.err" | jq .a)
		if [ "$got" = 1 ] && grep -q '^Totals: ' "$tmp/jq.err"; then
			pass "echo '{\"a\":1}' | dwleak -- jq -c . | jq .a: 1, the report on stderr"
		else
			fail "dwleak -- jq -c . | jq .a gave '$got' (want 1); stderr: $(head -c 400 "$tmp/jq.err")"
		fi
	fi
	# -o in each format: stdout is only the command's
	for fmt in text json folded svg pprof; do
		run "o_$fmt" --format "$fmt" -o "$tmp/o.$fmt" -- "$SEED" --iterations 2 --interval-ms 1
		want_out=$(printf 'Starting slow memory leak program...\nIn caller')
		if ! expect_rc "o_$fmt" 0; then
			continue
		elif [ "$(cat "$tmp/o_$fmt.out")" != "$want_out" ]; then
			fail "-o, --format $fmt: stdout is not the command's own: $(head -c 300 "$tmp/o_$fmt.out")"
		elif grep -q '^Totals:\|^Top ' "$tmp/o_$fmt.err"; then
			fail "-o, --format $fmt: a report on stderr too"
		else
			case $fmt in
			text) grep -q '^Totals: 80 bytes' "$tmp/o.text" ;;
			json) jq -e '.totals.outstanding_bytes == 80 and .totals.untraced_processes == 0' "$tmp/o.json" > /dev/null ;;
			folded) grep -q 'LeakLib::slowMemoryLeak();operator new(unsigned long);malloc 80$' "$tmp/o.folded" ;;
			svg) grep -q '^<svg ' "$tmp/o.svg" ;;
			pprof) [ "$(head -c 2 "$tmp/o.pprof" | od -An -tx1 | tr -d ' ')" = 1f8b ] ;;
			esac && pass "-o, --format $fmt: the report in the file, stdout the command's" ||
				fail "-o, --format $fmt: the file is not the report: $(head -c 200 "$tmp/o.$fmt" | tr -cd '[:print:]\n')"
		fi
	done
	# without -o the structured formats would mix with stderr's messages
	for fmt in json folded svg pprof; do
		run "no_o_$fmt" --format "$fmt" -- /bin/true
		if [ $rc -ne 2 ] || ! grep -q "^dwleak: --format $fmt writes a file a program reads, and with -- CMD the report goes to stderr.*: give -o FILE$" "$tmp/no_o_$fmt.err"; then
			fail "--format $fmt -- CMD without -o: exit $rc, $(cat "$tmp/no_o_$fmt.err")"
		else
			pass "--format $fmt -- CMD without -o: refused, exit 2"
		fi
	done
	# --interval reports go where the final one goes: stderr
	run interval -i 0.3 -t 1 -- "$SEED" --iterations 12 --interval-ms 100
	n=$(grep -c '^\[..:..:..\] Top ' "$tmp/interval.err")
	if expect_rc interval 0 && [ "$n" -ge 3 ] && ! grep -q 'Top \|Totals' "$tmp/interval.out"; then
		pass "--interval with -- CMD: $n reports, all on stderr, none on stdout"
	else
		fail "--interval with -- CMD: $n reports on stderr; stdout: $(head -c 300 "$tmp/interval.out")"
	fi
	# -p keeps stdout: no command output shares it
	"$SEED" --iterations 40 --interval-ms 50 --delay-ms 1500 > /dev/null &
	tp=$!
	lt_pids+=($tp)
	sleep 0.5
	run p_stdout -p $tp -t 1
	if expect_rc p_stdout 0 && grep -q '^Totals:' "$tmp/p_stdout.out" && ! grep -q '^Totals:' "$tmp/p_stdout.err"; then
		pass "-p: the report on stdout"
	else
		fail "-p: the report is not on stdout: $(head -c 300 "$tmp/p_stdout.out")"
	fi
	# binary to a terminal: refused, on stdout (-p) and through -o
	if command -v script > /dev/null; then
		script -qec "$DWLEAK -p $$ --format pprof -d 1" /dev/null > "$tmp/tty.out" 2>&1
		rc=$?
		if [ $rc -eq 2 ] && grep -q 'dwleak: --format pprof is binary .* would garble the terminal: give -o FILE' "$tmp/tty.out"; then
			pass "--format pprof to a terminal: refused, exit 2"
		else
			fail "--format pprof to a terminal: exit $rc: $(head -c 300 "$tmp/tty.out" | tr -cd '[:print:]\n')"
		fi
		script -qec "$DWLEAK --format pprof -o /dev/tty -- /bin/true" /dev/null > "$tmp/tty.out" 2>&1
		rc=$?
		if [ $rc -eq 2 ] && grep -q 'dwleak: --format pprof is binary .* -o /dev/tty is a terminal' "$tmp/tty.out"; then
			pass "--format pprof -o /dev/tty: refused, exit 2"
		else
			fail "--format pprof -o /dev/tty: exit $rc: $(head -c 300 "$tmp/tty.out" | tr -cd '[:print:]\n')"
		fi
	else
		fail "script (bsdutils) is missing: cannot give dwleak a terminal"
	fi
fi

# --- f: -p with dwleak's own pid ---
if lt_part f; then
	DWLEAK=$DWLEAK timeout -k 5 60 bash -c 'exec "$DWLEAK" -p $$' > "$tmp/self.out" 2> "$tmp/self.err"
	rc=$?
	if [ $rc -eq 2 ] && [ "$(grep -c . "$tmp/self.err")" -eq 1 ] &&
		grep -Eq '^dwleak: cannot trace itself \(pid [0-9]+ is this dwleak\)' "$tmp/self.err"; then
		pass "-p with its own pid: exit 2: $(cat "$tmp/self.err")"
	else
		fail "-p with its own pid: exit $rc: $(cat "$tmp/self.err")"
	fi
fi

check_finish
