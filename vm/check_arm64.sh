#!/bin/bash
# What `make check-arm64` runs inside the arm64 guest (vm/arm64.sh), from
# the project's tree shared as /src: the machine is what the tests need
# (an arm64 kernel with BTF, a CPU with pointer authentication), and the
# table compiler, cross-built for arm64 (make ARCH=arm64), compiles the
# guest's own objects and agrees with libdw there; the aarch64 walk step
# (bpf/abi/unwind_step_a64.h) walks stopped processes' stacks as gdb does
# (vm/walk_a64.c, no frame pointers, PAC masks read).  Ends with a line
# "N passed, N failed", as tests/run.sh does.
set -u
BUILD=${BUILD:-build}
declare -A pp_checks
passed=0 failed=0
pass() {
	echo "PASS $*"
	passed=$((passed + 1))
}
fail() {
	echo "FAIL $*"
	failed=$((failed + 1))
}

# --- the machine
m=$(uname -m)
if [ "$m" = aarch64 ]; then
	pass "machine: $(uname -srm)"
else
	fail "machine: uname -m says $m, not aarch64"
fi
if [ -s /sys/kernel/btf/vmlinux ]; then
	pass "kernel BTF: /sys/kernel/btf/vmlinux, $(stat -c %s /sys/kernel/btf/vmlinux) bytes"
else
	fail "kernel BTF: no /sys/kernel/btf/vmlinux ($(ls /sys/kernel/btf 2>&1 | head -3); dmesg: $(dmesg | grep -i btf | head -3))"
fi
features=$(sed -n 's/^Features[[:space:]]*: //p' /proc/cpuinfo | head -1)
case " $features " in
*" paca "*) pass "CPU: pointer authentication (paca) among: $features" ;;
*) fail "CPU: no pointer authentication (paca) in: $features (qemu -cpu max has it)" ;;
esac

# --- tables compiled and verified against libdw, natively
tv=$BUILD/arm64/tables_verify
if [ ! -x "$tv" ]; then
	fail "tables: $tv is not built (make ARCH=arm64 on the host)"
else
	for obj in /lib/aarch64-linux-gnu/libc.so.6 /usr/lib/aarch64-linux-gnu/libstdc++.so.6 \
		/usr/bin/python3.11 /usr/bin/perl /usr/bin/gdb; do
		out=$("$tv" "$obj" 2>&1)
		rc=$?
		line=$(printf '%s\n' "$out" | grep '^verify ' | tail -1)
		cov=$(printf '%s\n' "$line" | sed -n 's/.* coverage=\([0-9.]*\)%.*/\1/p')
		if [ $rc -ne 0 ] || [ -z "$line" ]; then
			fail "tables: $obj: tables_verify exited $rc: $(printf '%s\n' "$out" | tail -3)"
		elif ! printf '%s\n' "$line" | grep -q ' arch=aarch64 .* mismatches=0$'; then
			fail "tables: $obj: $line"
		elif ! awk -v c="$cov" 'BEGIN { exit !(c >= 99.9) }'; then
			fail "tables: $obj: coverage $cov% < 99.9%: $line"
		else
			pass "tables: ${line#verify }"
		fi
	done
fi

# --- the aarch64 walk step against gdb, on a stopped process
# Starts CMD, waits for it to stop itself (SIGSTOP), walks its stack with
# build/arm64/walk_a64 and with gdb, and wants the same pcs, frame by
# frame, to the outermost.
walk_check() {
	local name=$1 pid i state ours theirs
	shift
	"$@" > /dev/null 2>&1 &
	pid=$!
	for i in $(seq 600); do
		state=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' /proc/$pid/stat 2> /dev/null)
		[ "$state" = T ] && break
		sleep 0.1
	done
	if [ "$state" != T ]; then
		fail "walk $name: the program did not stop itself (state '$state')"
		kill -9 $pid 2> /dev/null
		return
	fi
	"$BUILD/arm64/walk_a64" $pid > /tmp/walk.$name 2> /tmp/walk.$name.err
	# past main: dwleak's stacks go on to _start, as gdb's do where main
	# has no symbol (python3.11 is stripped)
	gdb -q -batch -nx -ex 'set backtrace past-main on' -p $pid -x vm/gdb_pcs.py > /tmp/gdb.$name 2> /tmp/gdb.$name.err
	kill -9 $pid 2> /dev/null
	wait $pid 2> /dev/null
	ours=$(grep '^pc ' /tmp/walk.$name | cut -d' ' -f2)
	theirs=$(grep '^pc ' /tmp/gdb.$name | cut -d' ' -f2)
	if [ -z "$theirs" ]; then
		fail "walk $name: gdb gave no frames: $(tail -3 /tmp/gdb.$name.err)"
	elif [ "$ours" != "$theirs" ]; then
		fail "walk $name: walk_a64 and gdb disagree"
		paste /tmp/walk.$name /tmp/gdb.$name | sed 's/^/    /'
		sed 's/^/    /' /tmp/walk.$name.err
	elif ! grep -q '^end outermost$' /tmp/walk.$name; then
		fail "walk $name: the walk ended $(grep '^end ' /tmp/walk.$name), not at the outermost frame"
	else
		pass "walk $name: $(echo "$ours" | wc -l) frames, each pc as gdb's, to the outermost:" \
			"$(grep '^pc ' /tmp/gdb.$name | cut -d' ' -f3 | paste -sd' ')"
	fi
}
# What frame pointers lose (dwleak's --unwind both, here through
# walk_a64's second walk): the x29 chain's pcs must be frames of the
# DWARF walk, in its order (it may skip some, never invent one); prints
# how many of the DWARF walk's frames it found and which it lost.
fp_check() {
	local name=$1 lost
	grep '^pc ' /tmp/walk.$name | cut -d' ' -f2 > /tmp/fp.$name.dwarf
	grep '^fp 0x' /tmp/walk.$name | cut -d' ' -f2 > /tmp/fp.$name.fp
	if [ ! -s /tmp/fp.$name.fp ]; then
		fail "fp $name: walk_a64 printed no frame-pointer walk"
		return
	fi
	# a subsequence: each fp pc found in the DWARF list after the last one
	if ! awk 'NR == FNR { d[++nd] = $1; next } { while (++i <= nd && d[i] != $1); if (i > nd) { bad = $1; exit 1 } }
		END { if (bad) print bad }' /tmp/fp.$name.dwarf /tmp/fp.$name.fp > /tmp/fp.$name.bad; then
		fail "fp $name: the frame-pointer walk gave $(cat /tmp/fp.$name.bad), not a frame of the DWARF walk"
		paste /tmp/fp.$name.dwarf /tmp/fp.$name.fp | sed 's/^/    /'
		return
	fi
	lost=$(grep '^pc ' /tmp/gdb.$name | cut -d' ' -f2- | grep -v -w -F -f /tmp/fp.$name.fp | cut -d' ' -f2 | paste -sd' ')
	pass "fp $name: frame pointers find $(wc -l < /tmp/fp.$name.fp) of the $(wc -l < /tmp/fp.$name.dwarf) frames" \
		"($(grep '^fp_end' /tmp/walk.$name | cut -d' ' -f2)); lost: ${lost:-none}"
}

if [ -x "$BUILD/arm64/walk_a64" ] && command -v gdb > /dev/null; then
	walk_check stop_deep "$BUILD/arm64/stop_deep"
	fp_check stop_deep
	# stopped in a signal handler: through the kernel's signal frame
	walk_check stop_deep_signal "$BUILD/arm64/stop_deep" signal
	# built with -mbranch-protection=standard: its saved return addresses
	# carry pointer authentication codes, which the walk must have stripped
	walk_check stop_deep_pac "$BUILD/arm64/stop_deep_pac"
	stripped=$(sed -n 's/^pac_stripped \([0-9]*\)$/\1/p' /tmp/walk.stop_deep_pac)
	if [ "${stripped:-0}" -ge 3 ]; then
		pass "walk stop_deep_pac: $stripped return addresses carried a pointer authentication code, stripped"
	else
		fail "walk stop_deep_pac: $stripped return addresses were signed, want >= 3 (compare, level2, stop_here): PAC not exercised"
	fi
	# the seed (-O2 -fomit-frame-pointer) stopped in malloc at its first
	# new int[10] (40 bytes): through operator new in Debian's arm64
	# libstdc++, which has no frame pointers.  ASLR off (setarch -R): the
	# same pcs as dwleak's run of it below
	walk_check seed_O2 setarch -R env LD_PRELOAD="$BUILD/arm64/stop_at_malloc.so" DWLEAK_STOP_SIZE=40 \
		"$BUILD/arm64/seed_O2" --iterations 1 --interval-ms 0
	fp_check seed_O2
	for fn in 'operator new' 'LeakLib::slowMemoryLeak' 'main'; do
		grep -q "^pc 0x[0-9a-f]* $fn" /tmp/gdb.seed_O2 ||
			fail "walk seed_O2: no frame $fn in gdb's stack: $(cut -d' ' -f3- /tmp/gdb.seed_O2 | paste -sd'|')"
	done
	walk_check seed_O2_pac setarch -R env LD_PRELOAD="$BUILD/arm64/stop_at_malloc.so" DWLEAK_STOP_SIZE=40 \
		"$BUILD/arm64/seed_O2_pac" --iterations 1 --interval-ms 0
	# the same two with dwleak's preload library first in LD_PRELOAD, as
	# dwleak itself preloads it (its runs below compare with these)
	LIB=$BUILD/arm64/tool/libdwleak-preload.so
	walk_check seed_O2_lib setarch -R env LD_PRELOAD="$(realpath "$LIB"):$BUILD/arm64/stop_at_malloc.so" \
		DWLEAK_STOP_SIZE=40 "$BUILD/arm64/seed_O2" --iterations 1 --interval-ms 0
	walk_check seed_O2_pac_lib setarch -R env LD_PRELOAD="$(realpath "$LIB"):$BUILD/arm64/stop_at_malloc.so" \
		DWLEAK_STOP_SIZE=40 "$BUILD/arm64/seed_O2_pac" --iterations 1 --interval-ms 0
	walk_check python3.11 python3.11 -c 'import os, signal
def inner(): os.kill(os.getpid(), signal.SIGSTOP)
def outer(): inner()
outer()'
else
	fail "walk: $BUILD/arm64/walk_a64 or gdb missing"
fi

# --- dwleak itself, cross-built (make ARCH=arm64: build/arm64/tool), with
# uprobes and the kernel's walk, and with its preload library (the walk in
# the process, or the library's sites and the kernel's walk)
D=$BUILD/arm64/tool/dwleak
# The first stack of REPORT (JSON) that BYTES are outstanding in: its
# frames' addresses, one a line, consecutive repeats (inlined frames) once;
# FIELD: frames or fp_frames.
stack_addrs() {
	jq -r --argjson b "$2" --arg f "$3" '[.stacks[] | select(.bytes == $b)][0][$f][]? | "\(.address) \(.function // "??")"' "$1" |
		awk '$1 != last { print } { last = $1 }'
}
if [ ! -x "$D" ] || ! command -v jq > /dev/null; then
	fail "dwleak: $D is not built (make ARCH=arm64 on the host) or jq is missing"
else
	# The seed's 5 x new int[10] as dwleak reports them, against gdb's walk
	# of the same program stopped in malloc at that allocation (above): ASLR
	# off in both runs and the same library preloaded (stop_at_malloc.so
	# stops only gdb's run), so each return address is the same number in
	# both, and from operator new outwards every one must be gdb's, to
	# _start.  NAME: walk_check's name of gdb's walk; the program
	# BUILD/arm64/NAME; OPTS: dwleak's.
	# WALK: none (--no-preload: uprobes at the allocator, the kernel's
	# walk), process or kernel (the preload library, which walks in the
	# process or fires its sites for the kernel's walk: then gdb's run
	# preloaded it too, GDB names that run).
	dwleak_seed_check() {
		local name=$1 walk=$2 gdbname=$3 prog=$BUILD/arm64/${1%_lib} rc what
		shift 3
		if [ "$walk" = none ]; then
			setarch -R "$D" --no-preload "$@" -t 0 --format json -o /tmp/dw.$name.json -- \
				env LD_PRELOAD="$BUILD/arm64/stop_at_malloc.so" "$prog" --iterations 5 --interval-ms 10 \
				> /tmp/dw.$name.out 2>&1
		else
			# dwleak puts its library first in the LD_PRELOAD it is given
			setarch -R env LD_PRELOAD="$BUILD/arm64/stop_at_malloc.so" "$D" --walk "$walk" "$@" -t 0 --format json \
				-o /tmp/dw.$name.json -- "$prog" --iterations 5 --interval-ms 10 > /tmp/dw.$name.out 2>&1
		fi
		rc=$?
		stack_addrs /tmp/dw.$name.json 200 frames > /tmp/dw.$name.frames
		sed -n '/ operator new/,$p' /tmp/dw.$name.frames | cut -d' ' -f1 > /tmp/dw.$name.ours
		grep '^pc ' /tmp/gdb.$gdbname 2> /dev/null | cut -d' ' -f2- | sed -n '/ operator new/,$p' | cut -d' ' -f1 |
			awk '$1 != last { print } { last = $1 }' > /tmp/dw.$name.gdb
		if [ $rc -ne 0 ] || [ ! -s /tmp/dw.$name.ours ]; then
			fail "dwleak $name ($walk): exit $rc, no 200-byte stack through operator new: $(tail -5 /tmp/dw.$name.out)"
		elif [ "$walk" = process ] && ! grep -q 'walks its stacks in the process' /tmp/dw.$name.out; then
			fail "dwleak $name ($walk): not walked in the process: $(grep '^dwleak:' /tmp/dw.$name.out | head -3)"
		elif [ "$walk" != none ] && ! grep -q '(preload, glibc in ' /tmp/dw.$name.out; then
			fail "dwleak $name ($walk): not traced through the library: $(grep '^dwleak:' /tmp/dw.$name.out | head -3)"
		elif [ ! -s /tmp/dw.$name.gdb ]; then
			fail "dwleak $name ($walk): no gdb stack to compare with (walk $gdbname above)"
		elif ! cmp -s /tmp/dw.$name.ours /tmp/dw.$name.gdb; then
			fail "dwleak $name ($walk): its stack is not gdb's, from operator new outwards"
			paste /tmp/dw.$name.ours /tmp/dw.$name.gdb | sed 's/^/    /'
			sed 's/^/    /' /tmp/dw.$name.frames
		elif [ "$(tail -1 /tmp/dw.$name.frames | cut -d' ' -f2)" != _start ]; then
			fail "dwleak $name ($walk): the stack ends at $(tail -1 /tmp/dw.$name.frames), not _start"
		else
			pass "dwleak $name (${walk/none/uprobes}): 200 B in 5 allocations, $(wc -l < /tmp/dw.$name.frames) frames, each return" \
				"address gdb's from operator new to _start: $(cut -d' ' -f2- /tmp/dw.$name.frames | sed 's/(.*//' | paste -sd'|')"
		fi
	}
	dwleak_seed_check seed_O2 none seed_O2 --unwind both
	# built -mbranch-protection=standard: the seed's own functions sign the
	# return addresses they save, which the kernel's walk must strip
	dwleak_seed_check seed_O2_pac none seed_O2_pac
	# through the preload library (dwleak's default): the library walks
	# the caller's stack in the process (the same step, built into it),
	# or fires its site for the kernel's walk; gdb's run had it preloaded
	# too, so the addresses are the same in all three
	dwleak_seed_check seed_O2_lib process seed_O2_lib
	dwleak_seed_check seed_O2_lib kernel seed_O2_lib
	dwleak_seed_check seed_O2_pac_lib process seed_O2_pac_lib
	# --unwind both: what frame pointers lose on arm64.  The x29 walk's
	# pcs must be frames of the DWARF walk, in order (a subsequence: it may
	# skip frames, never invent one).
	stack_addrs /tmp/dw.seed_O2.json 200 fp_frames | cut -d' ' -f1 > /tmp/dw.seed.fp
	cut -d' ' -f1 /tmp/dw.seed_O2.frames > /tmp/dw.seed.dwarf
	if [ ! -s /tmp/dw.seed.fp ]; then
		fail "dwleak seed_O2 --unwind both: no frame-pointer stack in the report"
	elif ! awk 'NR == FNR { d[++nd] = $1; next } { while (++i <= nd && d[i] != $1); if (i > nd) exit 1 }' \
		/tmp/dw.seed.dwarf /tmp/dw.seed.fp; then
		fail "dwleak seed_O2 --unwind both: a frame-pointer frame that is no frame of the DWARF walk"
		paste /tmp/dw.seed.dwarf /tmp/dw.seed.fp | sed 's/^/    /'
	else
		lost=$(grep -v -w -F -f /tmp/dw.seed.fp /tmp/dw.seed_O2.frames | cut -d' ' -f2- | sed 's/(.*//' | paste -sd'|')
		pass "dwleak seed_O2 --unwind both: frame pointers find $(wc -l < /tmp/dw.seed.fp) of" \
			"$(wc -l < /tmp/dw.seed.dwarf) frames; lost: ${lost:-none}"
	fi

	# --unwind fp through the library: the frame-pointer walk in the
	# process (preload/walk.c's, x30 at the entry, then the x29 chain)
	# gives the kernel's at the library's sites, frame for frame, and only
	# frames of the DWARF walk, in its order
	for w in process:fp kernel:fp dwarf:dwarf; do
		IFS=: read -r n u <<< "$w"
		setarch -R "$D" --walk "${n/dwarf/process}" --unwind "$u" -t 0 --format json -o /tmp/dw.fp.$n.json -- \
			"$BUILD/arm64/seed_O2" --iterations 5 --interval-ms 10 > /tmp/dw.fp.$n.out 2>&1
		stack_addrs /tmp/dw.fp.$n.json 200 frames | cut -d' ' -f1 > /tmp/dw.fp.$n.frames
	done
	cp /tmp/dw.fp.dwarf.frames /tmp/dw.fp.dwarf
	if [ ! -s /tmp/dw.fp.process.frames ] || ! grep -q 'walks its stacks in the process' /tmp/dw.fp.process.out; then
		fail "dwleak --unwind fp (process): no 200-byte stack walked in the process: $(grep '^dwleak:' /tmp/dw.fp.process.out | head -3)"
	elif ! cmp -s /tmp/dw.fp.process.frames /tmp/dw.fp.kernel.frames; then
		fail "dwleak --unwind fp: the walk in the process and the kernel's differ (process, kernel):"
		paste /tmp/dw.fp.process.frames /tmp/dw.fp.kernel.frames | sed 's/^/    /'
	elif ! awk 'NR == FNR { d[++nd] = $1; next } { while (++i <= nd && d[i] != $1); if (i > nd) exit 1 }' \
		/tmp/dw.fp.dwarf /tmp/dw.fp.process.frames; then
		fail "dwleak --unwind fp (process): a frame that is no frame of the DWARF walk"
		paste /tmp/dw.fp.dwarf /tmp/dw.fp.process.frames | sed 's/^/    /'
	else
		pass "dwleak --unwind fp through the library: in the process and at the sites the same" \
			"$(wc -l < /tmp/dw.fp.process.frames) of the DWARF walk's $(wc -l < /tmp/dw.fp.dwarf) frames"
	fi

	# -p: attached to the seed already running (uprobes: loading the
	# library into a process is x86_64's so far, and dwleak says so), its
	# allocations made after the attach, each through operator new to _start
	"$BUILD/arm64/seed_O2" --iterations 0 --interval-ms 200 > /dev/null 2>&1 &
	sp=$!
	sleep 1
	"$D" -p $sp -d 3 -t 0 --format json -o /tmp/dw.p.json > /tmp/dw.p.out 2>&1
	rc=$?
	kill $sp 2> /dev/null
	wait $sp 2> /dev/null
	read -r pb pn <<< "$(jq -r '[.stacks[] | select(any(.frames[]; (.function // "") | startswith("LeakLib::slowMemoryLeak")))][0] | [.bytes, (.frames | length)] | @tsv' /tmp/dw.p.json 2> /dev/null)"
	last=$(jq -r '[.stacks[] | select(any(.frames[]; (.function // "") | startswith("LeakLib::slowMemoryLeak")))][0].frames[-1].function' /tmp/dw.p.json 2> /dev/null)
	if [ $rc -ne 0 ] || [ -z "${pb:-}" ] || [ "$pb" = null ] || [ $((pb % 40)) -ne 0 ] || [ "$pb" -lt 40 ] || [ "$last" != _start ]; then
		fail "dwleak -p seed_O2: exit $rc, stack '${pb:-none} B, $pn frames, to $last': $(tail -3 /tmp/dw.p.out)"
	else
		pass "dwleak -p seed_O2 (running 1 s before): $pb B in $((pb / 40)) new int[10] made while attached, $pn frames to _start;" \
			"$(grep -o 'uprobes[^;.]*' /tmp/dw.p.out | head -1)"
	fi

	# The preload library's exact ledgers: testdata/ledger (4 threads, the
	# malloc family and the C++ operators from 19 sites) under glibc,
	# jemalloc, tcmalloc and mimalloc (LD_PRELOAD'ed after the library, as
	# x86_64's tests/preload_ledger.sh runs it), walked in the process, and
	# under glibc at the library's sites and with uprobes too (4 threads
	# on 2 CPUs store the same stacks at once: the map's EEXIST must be
	# read as such, bpf/stacks.bpf.h): every site's outstanding
	# bytes and allocations as the program's own ledger, no site stack cut
	# short, no frame of the library shown, nothing dropped.
	ledger_check() {
		local family=$1 so=$2 walk=$3 name=ledger_$1_$3 rc bad way=--walk=$3
		[ "$walk" = none ] && way=--no-preload
		env ${so:+LD_PRELOAD=/usr/lib/aarch64-linux-gnu/$so} timeout -k 5 300 "$D" "$way" -t 0 --format json \
			-o /tmp/dw.$name.json -- "$BUILD/arm64/ledger" --ops 1000 --ledger /tmp/dw.$name.ledger \
			> /tmp/dw.$name.out 2>&1
		rc=$?
		bad=$(jq -r --slurpfile l /tmp/dw.$name.ledger --arg fam "$family" '
			def site: [.frames[].function | select(. != null and startswith("site_"))][0];
			(if $l[0].allocator != $fam then "the program runs on \($l[0].allocator), not \($fam)" else empty end),
			([.stacks[] | select(site != null) | {s: site, b: .bytes, n: .allocations}] | group_by(.s)
				| map({key: .[0].s, value: [(map(.b) | add), (map(.n) | add)]}) | from_entries) as $got
			| ($l[0].sites | to_entries[] | select([.value.bytes, .value.allocations] != ($got[.key] // [0, 0]))
				| "\(.key): dwleak \($got[.key] // [0, 0]), the ledger \([.value.bytes, .value.allocations])"),
			($got | keys[] | select($l[0].sites[.] == null) | "\(.): not in the ledger"),
			(.stacks[] | select(site != null and (.truncated or .unwind_error != null)) | "\(site): stack cut: \(.unwind_error)"),
			(.stacks[] | select(any(.frames[]; (.module // "") | contains("libdwleak-preload"))) | "a frame of the library: \(site)"),
			(if (.totals.dropped_events // 0) > 0 then "\(.totals.dropped_events) events dropped" else empty end)' \
			/tmp/dw.$name.json 2>&1 | head -8)
		if [ $rc -ne 0 ] || [ ! -s /tmp/dw.$name.ledger ]; then
			fail "dwleak ledger ($family, walk $walk): exit $rc: $(tail -3 /tmp/dw.$name.out)"
		elif [ "$walk" != none ] && ! grep -q "(preload, $family in " /tmp/dw.$name.out; then
			fail "dwleak ledger ($family, walk $walk): not traced through the library as $family: $(grep '^dwleak: tracing' /tmp/dw.$name.out)"
		elif [ "$walk" = process ] && ! grep -q 'walks its stacks in the process' /tmp/dw.$name.out; then
			fail "dwleak ledger ($family, walk $walk): not walked in the process: $(grep '^dwleak:' /tmp/dw.$name.out | head -3)"
		elif [ -n "$bad" ]; then
			fail "dwleak ledger ($family, walk $walk): the report is not the ledger:"
			printf '%s\n' "$bad" | sed 's/^/    /'
		else
			pass "dwleak ledger ($family, walk $walk): all $(jq '.sites | length' /tmp/dw.$name.ledger) sites' outstanding bytes and" \
				"allocations as the program's ledger ($(jq '[.sites[].bytes] | add' /tmp/dw.$name.ledger) B in" \
				"$(jq '[.sites[].allocations] | add' /tmp/dw.$name.ledger)), 4 threads"
		fi
	}
	ledger_check glibc "" process
	ledger_check glibc "" kernel
	ledger_check glibc "" none
	ledger_check jemalloc libjemalloc.so.2 process
	ledger_check tcmalloc libtcmalloc.so.4 process
	ledger_check mimalloc libmimalloc.so.2 process

	# The library changes nothing a program observes (x86_64's
	# tests/preload_transparency.sh, parts b and c): testdata's
	# preload_probe (errno after success and failure, realloc's edges,
	# alignment, fork from a threaded program, a signal handler's
	# allocation, dlopen, C++ new and delete in every form, a constructor's
	# allocation, 8 threads, syscall() and prctl(), which the library
	# defines itself: arm64's syscall entry) prints the same lines and
	# exits 0 with and without the library idle, under each allocator (the
	# checks it passes alone), then traced at the sites exact, sampled and
	# sampled with every block indexed (--leak-check), and with a seccomp
	# filter installed first (through prctl and syscall(SYS_seccomp), which
	# the library sees go in).
	probe=$BUILD/arm64/preload_probe
	PCHECKS="dlerror errno usable realloc align fork signal dlopen libc cxx init threads syscall"
	for a in glibc: jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc.so.4 mimalloc:libmimalloc.so.2; do
		IFS=: read -r fam so <<< "$a"
		alloc=${so:+/usr/lib/aarch64-linux-gnu/$so}
		checks=
		for c in $PCHECKS; do
			(env ${alloc:+LD_PRELOAD=$alloc} "$probe" "$c" > /dev/null 2>&1) 2> /dev/null && checks="$checks $c"
		done
		env ${alloc:+LD_PRELOAD=$alloc} "$probe" --out /tmp/pp.$fam.plain $checks 2> /dev/null
		rc1=$?
		env LD_PRELOAD="$(realpath "$LIB")${alloc:+:$alloc}" "$probe" --out /tmp/pp.$fam.lib $checks 2> /tmp/pp.$fam.err
		rc2=$?
		if [ "$fam" = glibc ] && [ "$checks" != " $PCHECKS" ]; then
			fail "preload_probe: glibc alone fails checks: passes only$checks"
		elif [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ] || ! cmp -s /tmp/pp.$fam.plain /tmp/pp.$fam.lib; then
			fail "preload_probe idle ($fam): exit $rc1 without the library, $rc2 with it; differences:"
			diff /tmp/pp.$fam.plain /tmp/pp.$fam.lib | head -10 | sed 's/^/    /'
		else
			pass "preload_probe idle ($fam): the same $(wc -l < /tmp/pp.$fam.lib) lines, exit 0, with and without the library (checks:$checks)"
		fi
		pp_checks[${fam}]=$checks
	done
	# traced NAME ALLOC DWLEAK_OPTS... -- PROBE_ARGS...
	pp_traced() {
		local name=$1 alloc=$2 opts=() rc
		shift 2
		while [ "$1" != -- ]; do opts+=("$1"); shift; done
		shift
		env ${alloc:+LD_PRELOAD=$alloc} "$probe" --out /tmp/pp.$name.want "$@" 2> /dev/null
		env ${alloc:+LD_PRELOAD=$alloc} timeout -k 5 300 "$D" "${opts[@]}" -t 3 -- "$probe" --out /tmp/pp.$name.out "$@" \
			> /dev/null 2> /tmp/pp.$name.err
		rc=$?
		if ! grep -q '^dwleak: tracing pid [0-9]* (preload, ' /tmp/pp.$name.err; then
			fail "preload_probe $name: not traced through the library: $(grep -m1 'dwleak: tracing' /tmp/pp.$name.err)"
		elif [ $rc -ne 0 ] || ! cmp -s /tmp/pp.$name.want /tmp/pp.$name.out; then
			fail "preload_probe $name: dwleak exited $rc; differences from the untraced run:"
			diff /tmp/pp.$name.want /tmp/pp.$name.out | head -10 | sed 's/^/    /'
			tail -3 /tmp/pp.$name.err | sed 's/^/    /'
		else
			pass "preload_probe $name: the same $(wc -l < /tmp/pp.$name.out) lines traced through the library (${opts[*]:-exact})"
		fi
	}
	pp_traced exact "" -- all
	pp_traced sampled "" --sample-bytes 4096 -- all
	pp_traced indexed "" --sample-bytes 4096 --leak-check -- all
	pp_traced kernel_walk "" --walk kernel -- all
	for a in jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc.so.4 mimalloc:libmimalloc.so.2; do
		IFS=: read -r fam so <<< "$a"
		# shellcheck disable=SC2086
		pp_traced "exact_$fam" "/usr/lib/aarch64-linux-gnu/$so" -- ${pp_checks[$fam]}
	done
	for mode in errno kill; do
		pp_traced "seccomp_$mode" "" -- --seccomp "$mode" all
		pp_traced "seccomp_${mode}_sampled" "" --sample-bytes 4096 -- --seccomp "$mode" all
	done

	# Allocations inside signal handlers (testdata's signal_leak): every
	# walk crosses the kernel's signal frame, which the sigreturn
	# trampoline's instructions give away.  The walk in the process, the
	# kernel's at the library's sites and the kernel's with uprobes (the
	# one checked against gdb above) must give the same frames, each the
	# same address in its object (the library moves the others' load
	# addresses), from malloc through the handler, the trampoline
	# and the interrupted sigsuspend to _start (after a second: the walk in
	# the process starts once dwleak handed it the unwind image).
	for way in --no-preload "--walk kernel" "--walk process"; do
		n=${way//[- ]/}
		# shellcheck disable=SC2086
		setarch -R "$D" $way -t 0 --format json -o /tmp/dw.sig.$n.json -- "$BUILD/arm64/signal_leak" \
			--iterations 10 --interval-ms 10 --delay-ms 1000 > /tmp/dw.sig.$n.out 2>&1 || echo "exit $?" >> /tmp/dw.sig.$n.out
		jq -r '[.stacks[] | select(any(.frames[]; .function == "leak_in_sigalrm"))][0]
			| "\(.bytes) \(.allocations) \(.unwind_error)",
			(.frames[] | "\(.module // "-"):\(.elf_address // .address) \(.function)")' \
			/tmp/dw.sig.$n.json > /tmp/dw.sig.$n.frames 2>&1
	done
	head1=$(head -1 /tmp/dw.sig.nopreload.frames)
	# one name a physical frame (an inlined call repeats its place), the
	# vdso's trampoline unnamed ("null": the report names no vdso symbol)
	names=$(tail -n +2 /tmp/dw.sig.nopreload.frames | awk '$1 != last { print $2 } { last = $1 }' | paste -sd'|')
	if [ "$head1" != "400 10 null" ]; then
		fail "signal_leak (uprobes): the stack of leak_in_sigalrm: '$head1', want 400 B in 10, not cut: $(tail -3 /tmp/dw.sig.nopreload.out)"
	elif ! [[ $names == malloc\|leak_in_sigalrm\|on_signal\|null\|sigsuspend\|main\|*\|_start ]]; then
		fail "signal_leak (uprobes): frames $names: want malloc, leak_in_sigalrm, on_signal, the trampoline, sigsuspend, main ... _start"
	else
		pass "signal_leak (uprobes): 400 B in 10 through the signal frame: $names"
		for n in walkkernel walkprocess; do
			if cmp -s /tmp/dw.sig.nopreload.frames /tmp/dw.sig.$n.frames; then
				pass "signal_leak ($n): the same $(($(wc -l < /tmp/dw.sig.$n.frames) - 1)) frames, each the same address in its object"
			else
				fail "signal_leak ($n): not the uprobe walk's frames (uprobes, this):"
				paste /tmp/dw.sig.nopreload.frames /tmp/dw.sig.$n.frames | sed 's/^/    /'
				grep '^dwleak:' /tmp/dw.sig.$n.out | head -3 | sed 's/^/    /'
			fi
		done
	fi

	# the seed stripped (no .symtab), its symbols in a debug file found by
	# its .gnu_debuglink: the program's frames must be named from it
	"$D" --no-preload -t 0 --format json -o /tmp/dw.strip.json -- "$BUILD/arm64/seed_O2_stripped" \
		--iterations 3 --interval-ms 10 > /tmp/dw.strip.out 2>&1
	rc=$?
	names=$(jq -r '[.stacks[] | select(.bytes == 120)][0].frames | map(select(.module | endswith("seed_O2_stripped")) | .function // "??") | join("|")' \
		/tmp/dw.strip.json 2> /dev/null)
	case "$names" in
	*LeakLib::slowMemoryLeak*caller*main*_start) pass "dwleak seed_O2_stripped: its frames named through its debug file: $names" ;;
	*) fail "dwleak seed_O2_stripped: exit $rc, its frames: '$names' (want LeakLib::slowMemoryLeak, caller, main, _start): $(tail -3 /tmp/dw.strip.out)" ;;
	esac

	# --leak-check on testdata's leak_kinds (cross-built as testdata builds
	# it): each site's kind, to the byte, as the program's header states it
	# (x86_64's tests/leak_check.sh holds the same against memcheck)
	lk=$BUILD/arm64/leak_kinds
	cat > /tmp/dw.lk.want << 'EOF'
site_anon reachable 192
site_before reachable 224
site_cycle definitely_lost 80
site_cycle indirectly_lost 80
site_interior possibly_lost 112
site_list reachable 512
site_lost definitely_lost 96
site_other_stack reachable 144
site_register reachable 160
site_tls reachable 176
site_tree_child indirectly_lost 96
site_tree_root definitely_lost 64
site_via_before reachable 208
EOF
	# uprobes, then the preload library (its block index, the walk in
	# the process)
	for way in --no-preload --walk=process; do
		"$D" --leak-check "$way" -t 0 --format json -o /tmp/dw.lk.json -- "$lk" > /tmp/dw.lk.out 2>&1
		rc=$?
		jq -r '[.stacks[] | ([.frames[].function | select(. != null and startswith("site_"))][0]) as $s
			| select($s != null) | .leak_kinds | to_entries[] | select(.value.bytes > 0)
			| {s: $s, k: .key, b: .value.bytes}] | group_by(.s + " " + .k)
			| map("\(.[0].s) \(.[0].k) \(map(.b) | add)") | .[]' /tmp/dw.lk.json > /tmp/dw.lk.got 2> /tmp/dw.lk.err
		if [ $rc -ne 0 ] || ! cmp -s /tmp/dw.lk.got /tmp/dw.lk.want; then
			fail "dwleak --leak-check $way leak_kinds: exit $rc; each site's kind (got, want):"
			diff /tmp/dw.lk.got /tmp/dw.lk.want | sed 's/^/    /'
			tail -3 /tmp/dw.lk.out /tmp/dw.lk.err | sed 's/^/    /'
		elif [ "$way" != --no-preload ] && ! grep -q '(preload, glibc in ' /tmp/dw.lk.out; then
			fail "dwleak --leak-check $way leak_kinds: not traced through the library: $(grep '^dwleak: tracing' /tmp/dw.lk.out)"
		else
			pass "dwleak --leak-check $way leak_kinds: all 13 sites' kinds to the byte; totals" \
				"$(jq -c '.totals.leak_check | {d: .definitely_lost.bytes, i: .indirectly_lost.bytes, p: .possibly_lost.bytes, r: .reachable.bytes, pause_ms}' /tmp/dw.lk.json)"
		fi
	done

	# --mmap on testdata's mmap_ledger: the memory system calls (arm64's
	# numbers and argument registers) accounted per site as the program's
	# own ledger says, its big mallocs once, as malloc
	"$D" --mmap --no-preload -t 0 --format json -o /tmp/dw.mm.json -- "$BUILD/arm64/mmap_ledger" \
		--ledger /tmp/dw.mm.ledger > /tmp/dw.mm.out 2>&1
	rc=$?
	got=$(jq -r --slurpfile l /tmp/dw.mm.ledger '$l[0] | keys[] as $site | [$site, ($l[0][$site] | map(tostring) | join(" "))] | @tsv' \
		/tmp/dw.mm.json 2> /dev/null | while IFS=$'\t' read -r site want; do
		have=$(jq -r --arg s "$site" '[.stacks[] | select(any(.frames[]; .function == $s))] | "\(map(.bytes) | add // 0) \(map(.allocations) | add // 0)"' /tmp/dw.mm.json)
		[ "$have" = "$want" ] || echo "$site: dwleak $have, the program $want"
	done)
	if [ $rc -ne 0 ] || [ ! -s /tmp/dw.mm.ledger ]; then
		fail "dwleak --mmap mmap_ledger: exit $rc: $(tail -3 /tmp/dw.mm.out)"
	elif [ -n "$got" ]; then
		fail "dwleak --mmap mmap_ledger: $got"
	else
		pass "dwleak --mmap mmap_ledger: every site's bytes and regions as its ledger: $(tr -d '\n' < /tmp/dw.mm.ledger)"
	fi

	# python3.11 (Debian's, stripped): every stack rooted, none cut short,
	# with uprobes and through the library (walked in the process)
	for way in --no-preload --walk=process; do
		"$D" "$way" -t 0 --format json -o /tmp/dw.py.json -- python3.11 -c 'import json
keep = [json.dumps({"k": i}) for i in range(2000)]' > /tmp/dw.py.out 2>&1
		rc=$?
		read -r nst nok maxf bytes <<< "$(jq -r '[.stacks | length, (map(select(.unwind_error == null and .truncated == false)) | length),
			(map(.frames | length) | max), .[0].bytes] | @tsv' /tmp/dw.py.json 2> /dev/null)"
		if [ $rc -ne 0 ] || [ -z "${nst:-}" ] || [ "$nst" = 0 ]; then
			fail "dwleak $way python3.11: exit $rc, no stacks: $(tail -3 /tmp/dw.py.out)"
		elif [ "$way" != --no-preload ] && ! grep -q 'walks its stacks in the process' /tmp/dw.py.out; then
			fail "dwleak $way python3.11: not walked in the process: $(grep '^dwleak:' /tmp/dw.py.out | head -3)"
		elif [ "$nok" != "$nst" ]; then
			fail "dwleak $way python3.11: $((nst - nok)) of $nst stacks not rooted: $(jq -c '[.stacks[] | select(.unwind_error != null) | .unwind_error] | unique' /tmp/dw.py.json)"
		else
			pass "dwleak $way python3.11: all $nst stacks rooted (to the outermost frame), the deepest $maxf frames," \
				"the largest $bytes B: $(jq -r '.stacks[0].frames | map(.function // "??") | .[0:6] | join("|")' /tmp/dw.py.json)|..."
		fi
	done
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
