#!/bin/bash
# Issue 13: nothing an unprivileged user plants may change what root's dwleak
# does or reports.  Each attack is staged by nobody (setpriv --reuid=65534)
# against dwleak run as root.  Against the code before the fixes (commit
# bb34220) every part fails, but for checks of e (a trace's end) and f (the
# exec'd program's leak) that guard what came later (-- CMD under ptrace,
# exec following) against the same attacks:
#
#   a  a program named a'$(touch INJECTED)'b, and a link to it: no shell
#      runs the name (no INJECTED file), the trace works through both
#   b  -o in a sticky shared directory: nobody's link to a root-only file,
#      a dangling link, a link to nobody's FIFO, nobody's FIFO, nobody's
#      regular file; and a run that fails (bad pid, missing suppressions
#      file, missing program) leaves root's previous report byte for byte
#   c  inputs that hang or grow: nobody's FIFO to `tables`, `symbolize`,
#      --suppressions (empty, held open, flooded); /dev/zero; directories
#   d  option edge cases: exit 2 with a message that says what is wrong
#   e  signals at any moment: blocked on nobody's FIFO, SIGTERM and SIGINT
#      end dwleak within 2 s; dwleak killed (SIGKILL) at any moment of a
#      -- CMD trace, or stopped by SIGTERM or -d, leaves the command running,
#      never stopped (-- CMD follows it with ptrace)
#   f  exec mid-trace: -- CMD drops the old image's blocks at exec (more
#      exec cases in process_trees.sh b, c); -p on a process that then
#      execs another program finds the new image's leaks with complete
#      stacks
#   g  a program without section headers (the kernel runs it): unwound
#      through PT_GNU_EH_FRAME, stacks equal to the original's; without
#      that segment too, `dwleak tables` says what is missing
#   h  a zstd-compressed .shstrtab (libelf 0.188 cannot decompress it)
#      under `tables --verify`: unwound all the same, and LeakSanitizer,
#      unwinding with DWARF, finds no leak but libelf's own (tests/lsan.supp)
#
# Run by tests/run.sh; by hand: LT_ONLY=bc bash tests/security.sh, and
# against another build: DWLEAK=/path/to/dwleak bash tests/security.sh
# nobody's shells (sh -c '...') expand their own variables:
# shellcheck source=tests/lib_trace.sh disable=SC2016
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
if ! command -v setpriv > /dev/null; then
	echo "skip: setpriv (util-linux) is needed to act as nobody"
	exit 77
fi
SEED=$TESTDATA/seed_O2
NOBODY=65534
tmp=$LT_TMP
chmod 755 "$tmp" # nobody works in directories made below
export DWLEAK_NO_CACHE=1 # every run reads the files as they are now, not a cache

# "${NB[@]}" CMD...: CMD as nobody, as an unprivileged user would run it;
# setpriv execs CMD, so in the background $! is CMD's pid
NB=(setpriv --reuid="$NOBODY" --regid="$NOBODY" --clear-groups)

# a root directory of mode 0700 (a chroot made in a mktemp -d directory)
# lets no one but root load a shared library: no attacker can be staged
if ! "${NB[@]}" /bin/true 2> /dev/null; then
	echo "skip: nobody cannot run programs here ($(stat -c '/ is mode %a' /))"
	exit 77
fi

# stop PID: kills a background helper and reaps it, quietly
stop() {
	kill -KILL "$1" 2> /dev/null
	wait "$1" 2> /dev/null
}

# shared NAME: a new sticky directory anyone can write, like /tmp
shared() {
	local d
	d=$(mktemp -d "$tmp/$1.XXXXXX")
	chmod 1777 "$d"
	echo "$d"
}

# run NAME ARGS...: root's dwleak ARGS (at most 120 s); status in $rc,
# stderr in $tmp/NAME.err, stdout in $tmp/NAME.out
run() {
	local name=$1
	shift
	timeout -k 5 120 "$DWLEAK" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
	rc=$?
}

# said NAME REGEX WHAT: dwleak's stderr of run NAME matches REGEX
said() {
	if grep -Eq -- "$2" "$tmp/$1.err"; then
		pass "$3"
	else
		fail "$3: stderr does not match /$2/: $(head -c 400 "$tmp/$1.err")"
	fi
}

# exits NAME WANT WHAT: run NAME exited with WANT
exits() {
	if [ "$rc" -eq "$2" ]; then
		pass "$3: exit $2"
	else
		fail "$3: exit $rc, want $2: $(head -c 400 "$tmp/$1.err")"
	fi
}

# holder FIFO: nobody holds FIFO open for writing and never writes (a
# reader then blocks); its pid in $h
holder() {
	"${NB[@]}" env F="$1" sh -c 'exec 3<> "$F"; exec sleep 300' &
	h=$!
	lt_pids+=("$h")
	sleep 0.2
}

# ended_within PID SECS: true when PID ends within SECS (then reaped)
ended_within() {
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		kill -0 "$1" 2> /dev/null || break
		sleep 0.05
	done
	if kill -0 "$1" 2> /dev/null; then
		kill -KILL "$1"
		wait "$1" 2> /dev/null
		return 1
	fi
	wait "$1" 2> /dev/null
	return 0
}

# not_stopped PID WHAT: PID has ended or runs on, but is not stopped (T, t)
not_stopped() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2> /dev/null)
	case $st in
	T | t) fail "$2: pid $1 is left stopped (state $st)" ;;
	*) pass "$2: pid $1 is ${st:-gone}, not stopped" ;;
	esac
}

SEED_CHAIN='["malloc", "operator new(unsigned long)", "LeakLib::slowMemoryLeak()", "main"]'

# seed_leak JSON N WHAT: the seed's leak, N allocations of 40 B, with its
# chain of names and a complete walk
seed_leak() {
	lt_check "$1" "$2" "$3" "$SEED_CHAIN" << 'PY' || true
n, what, chain = int(ARGS[0]), ARGS[1], json.loads(ARGS[2])
st = [s for s in r["stacks"] if "LeakLib::slowMemoryLeak()" in names(s)]
if len(st) != 1:
    fail("%s: %d stacks through LeakLib::slowMemoryLeak(), want 1:\n%s" % (what, len(st), "".join(show(s) for s in r["stacks"])))
    sys.exit(1)
s = st[0]
if (s["bytes"], s["allocations"]) != (40 * n, n):
    fail("%s: %d B in %d, want %d B in %d" % (what, s["bytes"], s["allocations"], 40 * n, n))
elif not chain_at(s, chain) or s.get("unwind_error") or s.get("truncated"):
    fail("%s: not a complete seed stack:\n%s" % (what, show(s)))
else:
    ok("%s: %d B in %d, %s, walk complete" % (what, 40 * n, n, " <- ".join(chain)))
PY
}

# --- a: a program whose name is shell code ---
if lt_part a; then
	top=$(mktemp -d "$tmp/a.XXXXXX")
	chmod 755 "$top"
	install -d -o $NOBODY -g $NOBODY -m 755 "$top/home"
	mkdir "$top/cwd"
	evil="a'\$(touch INJECTED)'b"
	# nobody's own copy of the seed under that name, and a harmless link
	"${NB[@]}" env D="$top/home/d" N="$evil" sh -c \
		'mkdir -m 755 "$D" && cat > "$D/$N" && chmod 755 "$D/$N" && ln -s "$N" "$D/plain"' < "$SEED"
	for via in "$evil" plain; do
		(cd "$top/cwd" && timeout -k 5 120 "$DWLEAK" --format json -o "$tmp/a.json" -- "$top/home/d/$via" \
			--iterations 3 --interval-ms 10 > /dev/null 2> "$tmp/a.err")
		rc=$?
		what="a: dwleak -- .../$via"
		injected=$(find "$top" "$ROOT" -maxdepth 2 -name INJECTED 2> /dev/null)
		if [ -n "$injected" ]; then
			fail "$what: the name ran as shell code: $injected"
			find "$top" "$ROOT" -maxdepth 2 -name INJECTED -delete 2> /dev/null
		else
			pass "$what: no INJECTED file (no shell ran the name)"
		fi
		exits a 0 "$what"
		[ $rc -eq 0 ] && seed_leak "$tmp/a.json" 3 "$what"
	done
fi

# --- b: the report file ---
if lt_part b; then
	dir=$(shared b)
	victim=$tmp/b-victim
	printf 'root only\n' > "$victim"
	chmod 600 "$victim"
	cp -p "$victim" "$tmp/b-victim.orig"
	report=(--format json -- "$SEED" --iterations 2 --interval-ms 1)

	"${NB[@]}" ln -s "$victim" "$dir/link.json"
	run b-link -o "$dir/link.json" "${report[@]}"
	exits b-link 2 "b: -o nobody's link to a root-only file"
	said b-link 'will not write .*link\.json: it is a symbolic link' "b: the link is refused, and said"
	if cmp -s "$victim" "$tmp/b-victim.orig" && [ "$(stat -c %a:%u "$victim")" = 600:0 ]; then
		pass "b: the file the link points to is unchanged (content, mode 600, root's)"
	else
		fail "b: the file the link points to changed: $(stat -c %a:%u "$victim"), $(head -c 80 "$victim")"
	fi

	"${NB[@]}" ln -s "$dir/made-by-root" "$dir/dangling.json"
	run b-dangling -o "$dir/dangling.json" "${report[@]}"
	exits b-dangling 2 "b: -o nobody's dangling link"
	if [ -e "$dir/made-by-root" ]; then
		fail "b: root created the dangling link's target ($(stat -c %U "$dir/made-by-root"))"
	else
		pass "b: the dangling link's target was not created"
	fi

	# a link to a FIFO nobody reads, and nobody's FIFO itself: the report
	# must not reach nobody
	for kind in link fifo; do
		"${NB[@]}" mkfifo -m 666 "$dir/pipe-$kind"
		target=$dir/pipe-$kind
		if [ $kind = link ]; then
			"${NB[@]}" ln -s "$dir/pipe-$kind" "$dir/piped.json"
			target=$dir/piped.json
		fi
		"${NB[@]}" env F="$dir/pipe-$kind" O="$dir/stolen-$kind" sh -c 'exec cat "$F" > "$O"' &
		reader=$!
		lt_pids+=("$reader")
		sleep 0.2
		run b-$kind -o "$target" "${report[@]}"
		exits b-$kind 2 "b: -o $kind to a FIFO nobody reads"
		sleep 0.2
		if [ -s "$dir/stolen-$kind" ]; then
			fail "b: nobody read root's report through the $kind ($(wc -c < "$dir/stolen-$kind") bytes)"
		else
			pass "b: nobody's $kind got nothing"
		fi
		stop $reader
	done
	said b-fifo 'FIFO or socket another user put in a directory anyone can write' "b: nobody's FIFO is refused, and said"

	# a regular file nobody planted: replaced by root's own report, which
	# nobody may then rewrite
	"${NB[@]}" env F="$dir/planted.json" sh -c 'echo planted > "$F"; chmod 666 "$F"'
	run b-planted -o "$dir/planted.json" "${report[@]}"
	exits b-planted 0 "b: -o over a file nobody planted"
	if [ "$(stat -c %u "$dir/planted.json")" = 0 ] && [ $((0$(stat -c %a "$dir/planted.json") & 022)) = 0 ] &&
		grep -q '"dwleak_report"' "$dir/planted.json"; then
		pass "b: the report replaced it, root's, not writable by others ($(stat -c %a "$dir/planted.json"))"
	else
		fail "b: the report is $(stat -c %U:%a "$dir/planted.json"): nobody can rewrite root's report"
	fi

	# a run that fails leaves root's previous report as it was
	prev=$dir/prev.json
	printf '{"previous": "report"}\n' > "$prev"
	cp -p "$prev" "$tmp/prev.orig"
	run b-pid --format json -o "$prev" -p 999999999
	exits b-pid 2 "b: -p 999999999"
	run b-supp --format json -o "$prev" --suppressions "$dir/missing.supp" -- "$SEED" --iterations 1
	exits b-supp 2 "b: a missing --suppressions file"
	run b-prog --format json -o "$prev" -- "$dir/missing-program"
	exits b-prog 2 "b: a missing program"
	if cmp -s "$prev" "$tmp/prev.orig"; then
		pass "b: the previous report is byte for byte intact after the three failed runs"
	else
		fail "b: the previous report changed: $(head -c 200 "$prev")"
	fi
	leftovers=$(find "$dir" -name '.*.dwleak-*')
	[ -z "$leftovers" ] || fail "b: temporary files left behind: $leftovers"
fi

# --- c: inputs that hang or grow ---
if lt_part c; then
	dir=$(shared c)
	"${NB[@]}" mkfifo -m 666 "$dir/fifo"
	"${NB[@]}" mkdir "$dir/dir"
	# nobody's FIFO with no writer: refused, or read as empty, at once
	run c-tables-fifo tables "$dir/fifo"
	[ $rc -ne 124 ] || fail "c: dwleak tables FIFO hung"
	exits c-tables-fifo 2 "c: dwleak tables FIFO"
	said c-tables-fifo 'FIFO' "c: tables names the FIFO"
	run c-symbolize-fifo symbolize "$dir/fifo"
	[ $rc -ne 124 ] || fail "c: dwleak symbolize FIFO (no writer) hung"
	exits c-symbolize-fifo 2 "c: dwleak symbolize FIFO (no writer: empty, not JSON)"
	run c-zero symbolize /dev/zero
	[ $rc -ne 124 ] || fail "c: dwleak symbolize /dev/zero never ended"
	exits c-zero 2 "c: dwleak symbolize /dev/zero"
	said c-zero 'cannot read /dev/zero: a device' "c: /dev/zero is refused as a device"
	# a directory, named as one
	run c-tables-dir tables "$dir/dir"
	said c-tables-dir 'is a directory' "c: tables DIR says it is a directory"
	run c-symbolize-dir symbolize "$dir/dir"
	said c-symbolize-dir 'is a directory' "c: symbolize DIR says it is a directory"
	run c-supp-dir --suppressions "$dir/dir" -- "$SEED" --iterations 1
	exits c-supp-dir 2 "c: --suppressions DIR"
	said c-supp-dir 'suppressions file .*: it is a directory' "c: --suppressions DIR says it is a directory"
	# held open by nobody, never written: SIGTERM ends symbolize (the
	# trace's --suppressions, with SIGINT too, is part e)
	holder "$dir/fifo"
	"$DWLEAK" symbolize "$dir/fifo" > /dev/null 2>&1 &
	p=$!
	lt_pids+=("$p")
	sleep 0.5
	kill -TERM $p
	if ended_within $p 2; then
		pass "c: symbolize blocked on nobody's FIFO ends on SIGTERM"
	else
		fail "c: symbolize blocked on nobody's FIFO did not end within 2 s of SIGTERM"
	fi
	stop "$h"
	# flooded by nobody: refused at the bound, memory bounded
	"${NB[@]}" env F="$dir/fifo" sh -c 'exec 3<> "$F"; exec yes fun:x >&3' &
	y=$!
	lt_pids+=("$y")
	sleep 0.2
	# a bound on memory protects the machine from a build that reads
	# without one (an ASan build reserves terabytes, and cannot have it)
	asan=false
	[[ "$(ldd "$DWLEAK" 2> /dev/null)" == *libasan* ]] && asan=true
	measure=()
	[ -x /usr/bin/time ] && measure=(/usr/bin/time -f %M -o "$tmp/c-flood.kb")
	($asan || ulimit -v 4000000
	exec "${measure[@]}" timeout -k 5 30 "$DWLEAK" \
		--suppressions "$dir/fifo" -- "$SEED" --iterations 1 > /dev/null 2> "$tmp/c-flood.err")
	rc=$?
	stop $y
	exits c-flood 2 "c: --suppressions FIFO that nobody floods"
	said c-flood 'larger than 16 MiB' "c: the flood is refused at 16 MiB"
	kb=$(tail -n 1 "$tmp/c-flood.kb" 2> /dev/null)
	if [ ${#measure[@]} -eq 0 ]; then
		echo "note: no /usr/bin/time (Debian: time): peak memory not measured"
	elif [[ $kb =~ ^[0-9]+$ ]] && [ "$kb" -lt 400000 ]; then
		pass "c: peak memory $((kb / 1024)) MiB"
	else
		fail "c: peak memory ${kb:-?} KiB reading the flood"
	fi
fi

# --- d: option edge cases ---
if lt_part d; then
	d_case() {
		local name=$1 re=$2
		shift 2
		run "d-$name" "$@"
		exits "d-$name" 2 "d: $*"
		said "d-$name" "$re" "d: $* says what is wrong"
	}
	d_case inf "--min-age 'inf': give a number of seconds" --min-age inf -- "$SEED" --iterations 1
	d_case big "--min-age '1.9e10': give at most 31536000 seconds" --min-age 1.9e10 -- "$SEED" --iterations 1
	d_case tiny "--interval '1e-300': give 0 or between 0.1 and" -i 1e-300 -- "$SEED" --iterations 1
	d_case debugdir "--debug-dir '': give a directory whose name is not empty" --debug-dir '' -- "$SEED" --iterations 1
	d_case empty "the command after -- is empty" -- ''
fi

# --- e: signals at any moment ---
if lt_part e; then
	dir=$(shared e)
	"${NB[@]}" mkfifo -m 666 "$dir/fifo"
	holder "$dir/fifo"
	for sig in TERM INT; do
		# background jobs of a script ignore SIGINT; dwleak gets it as a
		# terminal would send it
		env --default-signal=INT "$DWLEAK" --suppressions "$dir/fifo" -- "$SEED" --iterations 1 \
			> /dev/null 2> "$tmp/e-$sig.err" &
		p=$!
		lt_pids+=("$p")
		sleep 1
		kill -$sig $p
		if ended_within $p 2; then
			pass "e: blocked reading nobody's FIFO (--suppressions), SIG$sig ends dwleak within 2 s"
			said e-$sig 'cannot read suppressions file .*fifo: Interrupted' "e: SIG$sig: it says the read was interrupted"
		else
			fail "e: blocked reading nobody's FIFO (--suppressions), dwleak ignored SIG$sig for 2 s"
		fi
	done
	stop "$h"
	# nobody's FIFO with no writer at all reads as empty: the trace runs
	run e-nowriter --suppressions "$dir/fifo" -- "$SEED" --iterations 1
	exits e-nowriter 0 "e: --suppressions FIFO with no writer (empty: the trace runs)"

	# dwleak -- CMD killed at any moment: the command runs on, not stopped
	for delay in 0.05 0.15 0.3 tracing; do
		"$DWLEAK" -- "$SEED" --iterations 0 --interval-ms 20 > /dev/null 2> "$tmp/e-kill.err" &
		p=$!
		lt_pids+=("$p")
		if [ $delay = tracing ]; then
			for ((i = 0; i < 600; i++)); do
				grep -q '^dwleak: tracing' "$tmp/e-kill.err" && break
				sleep 0.05
			done
			sleep 0.5
		else
			sleep $delay
		fi
		kids=$(pgrep -P $p)
		kill -KILL $p
		wait $p 2> /dev/null
		sleep 0.5
		for k in $kids; do
			lt_pids+=("$k")
			not_stopped "$k" "e: dwleak -- CMD killed at $delay"
			if [ $delay = tracing ] && [ "$(readlink "/proc/$k/exe")" != "$(readlink -f "$SEED")" ]; then
				fail "e: killed while tracing: the command $k is not running on"
			fi
			kill -KILL "$k" 2> /dev/null
		done
	done
	# stopped by SIGTERM or -d: the report, and the command runs on
	for how in TERM duration; do
		args=(--format json -o "$tmp/e-$how.json")
		[ $how = duration ] && args+=(-d 1)
		"$DWLEAK" "${args[@]}" -- "$SEED" --iterations 0 --interval-ms 20 > /dev/null 2> "$tmp/e-$how.err" &
		p=$!
		lt_pids+=("$p")
		for ((i = 0; i < 600; i++)); do
			grep -q '^dwleak: tracing' "$tmp/e-$how.err" && break
			sleep 0.05
		done
		kids=$(pgrep -P $p)
		sleep 0.5
		[ $how = TERM ] && kill -TERM $p
		if ended_within $p 5; then
			pass "e: stopped by $how, dwleak ends"
		else
			fail "e: stopped by $how, dwleak still runs after 5 s"
		fi
		[ -s "$tmp/e-$how.json" ] || fail "e: stopped by $how: no report"
		sleep 0.3
		for k in $kids; do
			lt_pids+=("$k")
			not_stopped "$k" "e: stopped by $how, the command"
			kill -0 "$k" 2> /dev/null || fail "e: stopped by $how: the command $k did not run on"
			kill -KILL "$k" 2> /dev/null
		done
	done
fi

# --- f: exec mid-trace ---
if lt_part f; then
	# -- CMD: sh's blocks are gone when it execs the seed (exec chains,
	# env and timeout wrappers: process_trees.sh b and c)
	run f-cmd --format json -o "$tmp/f-cmd.json" -- sh -c "exec \"$SEED\" --iterations 3 --interval-ms 5"
	exits f-cmd 0 "f: -- sh -c 'exec seed'"
	lt_check "$tmp/f-cmd.json" << 'PY'
old = [s for s in r["stacks"] if any(f["module"].split("/")[-1] in ("dash", "bash", "sh") for f in s["frames"])]
if old:
    fail("f: blocks of the shell's image are counted after its exec:\n" + "".join(show(s) for s in old))
else:
    ok("f: no block of the shell's image after its exec")
PY
	seed_leak "$tmp/f-cmd.json" 3 "f: -- sh -c 'exec seed'"

	# -p: the process execs the seed after attach; the seed waits 300 ms
	# before it leaks (its tables are loaded when its dynamic linker has
	# mapped it: without ptrace nothing holds it meanwhile)
	lt_start pid "$tmp/f-p.log" /bin/sh -c "sleep 1; exec \"$SEED\" --delay-ms 300 --iterations 5 --interval-ms 20"
	run f-p --format json -o "$tmp/f-p.json" -p "$pid"
	exits f-p 0 "f: -p on sh that execs the seed"
	seed_leak "$tmp/f-p.json" 5 "f: -p, the exec'd seed"
	# without ptrace, -p learns of the exec from the sched_process_exec
	# tracepoint: the old image's blocks go with it, as with -- CMD
	lt_check "$tmp/f-p.json" << 'PY'
old = [s for s in r["stacks"] if any(f["module"].split("/")[-1] == "dash" for f in s["frames"])]
if old:
    fail("f: -p counts %d B of the old image after its exec:\n" % sum(s["bytes"] for s in old) + "".join(show(s) for s in old))
else:
    ok("f: -p: no block of the shell's image after its exec")
PY
fi

# --- g: a program without section headers ---
if lt_part g; then
	# g-noshdr: e_shoff = e_shnum = e_shstrndx = 0; g-bare: also no
	# PT_GNU_EH_FRAME.  The kernel runs both.
	"$LT_PYTHON" - "$SEED" "$tmp/g-noshdr" "$tmp/g-bare" << 'PY'
import os, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<Q", b, 0x28, 0)
struct.pack_into("<HH", b, 0x3c, 0, 0)
open(sys.argv[2], "wb").write(b)
phoff, = struct.unpack_from("<Q", b, 0x20)
phentsize, phnum = struct.unpack_from("<HH", b, 0x36)
for i in range(phnum):
    off = phoff + i * phentsize
    if struct.unpack_from("<I", b, off)[0] == 0x6474e550:  # PT_GNU_EH_FRAME
        struct.pack_into("<I", b, off, 0)  # PT_NULL
open(sys.argv[3], "wb").write(b)
for f in sys.argv[2:]:
    os.chmod(f, 0o755)
PY
	"$tmp/g-noshdr" --iterations 1 > /dev/null || fail "g: the kernel does not run the copy without section headers"
	run g-tables-orig tables "$SEED"
	run g-tables tables "$tmp/g-noshdr"
	exits g-tables 0 "g: dwleak tables on the copy without section headers"
	if diff <(tail -n +2 "$tmp/g-tables-orig.out") <(tail -n +2 "$tmp/g-tables.out") > "$tmp/g.diff"; then
		pass "g: its table equals the original's (found through PT_GNU_EH_FRAME)"
	else
		fail "g: its table differs from the original's: $(head -n 5 "$tmp/g.diff")"
	fi
	run g-bare tables "$tmp/g-bare"
	exits g-bare 2 "g: dwleak tables without section headers and PT_GNU_EH_FRAME"
	said g-bare 'no section headers and no PT_GNU_EH_FRAME' "g: it says what is missing"
	run g-orig --format json -o "$tmp/g-orig.json" -- "$SEED" --iterations 3 --interval-ms 5
	run g-trace --format json -o "$tmp/g-trace.json" -- "$tmp/g-noshdr" --iterations 3 --interval-ms 5
	exits g-trace 0 "g: dwleak -- the copy without section headers"
	# no symbols there: frames compared by module and ELF address
	lt_check "$tmp/g-trace.json" "$tmp/g-orig.json" << 'PY'
orig = json.load(open(ARGS[0]))
def seed_stack(rep, module):
    for s in rep["stacks"]:
        fr = [f for f in s["frames"] if not f.get("inlined")]
        if any(f["module"].endswith("/" + module) for f in fr) and s["allocations"] == 3:
            return s, [(f["module"].split("/")[-1].replace(module, "PROG"), f["elf_address"]) for f in fr]
    return None, None
s, got = seed_stack(r, "g-noshdr")
o, want = seed_stack(orig, "seed_O2")
if not s or not o:
    fail("g: no stack of 3 allocations through the program (copy: %s, original: %s)" % (bool(s), bool(o)))
elif got != want or s.get("unwind_error"):
    fail("g: the copy's stack differs from the original's:\n%s\n%s" % (show(s), show(o)))
else:
    ok("g: the copy's stack equals the original's, %d frames by module and ELF address, walk complete" % len(got))
PY
fi

# --- h: libelf and a compressed .shstrtab ---
if lt_part h; then
	# zstd, which libelf 0.188 cannot decompress: libelf leaks the section's
	# raw bytes when it fails (tests/lsan.supp); LSan's DWARF unwinder sees
	# past libelf to elf_strptr, which the suppression names
	"$LT_PYTHON" - "$SEED" "$tmp/h-shstrtab" << 'PY'
import os, struct, subprocess, sys
b = bytearray(open(sys.argv[1], "rb").read())
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
sh = shoff + shstrndx * shentsize
name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from("<IIQQQQIIQQ", b, sh)
z = subprocess.run(["zstd", "-q", "-c"], input=bytes(b[off:off + size]), capture_output=True, check=True).stdout
comp = struct.pack("<IIQQ", 2, 0, size, 1) + z  # ELFCOMPRESS_ZSTD
while len(b) % 8:
    b.append(0)
new = len(b)
b += comp
struct.pack_into("<IIQQQQIIQQ", b, sh, name, typ, flags | 0x800, addr, new, len(comp), link, info, 8, entsize)
open(sys.argv[2], "wb").write(b)
os.chmod(sys.argv[2], 0o755)
PY
	if [ ! -s "$tmp/h-shstrtab" ]; then
		fail "h: could not make the file (zstd missing?)"
	else
		ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=1:fast_unwind_on_malloc=0 \
			timeout -k 5 120 "$DWLEAK" tables --verify "$tmp/h-shstrtab" > "$tmp/h-verify.out" 2> "$tmp/h-verify.err"
		rc=$?
		exits h-verify 0 "h: dwleak tables --verify on a zstd-compressed .shstrtab"
		grep -q 'mismatches=0$' "$tmp/h-verify.out" || fail "h: verify: $(tail -n 1 "$tmp/h-verify.out")"
		if grep -q 'LeakSanitizer' "$tmp/h-verify.err"; then
			fail "h: LeakSanitizer reports a leak: $(grep -A12 'leak of' "$tmp/h-verify.err" | head -n 14)"
		elif [[ "$(ldd "$DWLEAK" 2> /dev/null)" == *libasan* ]]; then
			pass "h: no leak LeakSanitizer does not know to be libelf's"
		else
			echo "note: $DWLEAK has no LeakSanitizer: the leak check did not run"
		fi
	fi
fi

check_finish
