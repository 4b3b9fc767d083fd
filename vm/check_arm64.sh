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
	# libstdc++, which has no frame pointers
	walk_check seed_O2 env LD_PRELOAD="$BUILD/arm64/stop_at_malloc.so" DWLEAK_STOP_SIZE=40 \
		"$BUILD/arm64/seed_O2" --iterations 1 --interval-ms 0
	fp_check seed_O2
	for fn in 'operator new' 'LeakLib::slowMemoryLeak' 'main'; do
		grep -q "^pc 0x[0-9a-f]* $fn" /tmp/gdb.seed_O2 ||
			fail "walk seed_O2: no frame $fn in gdb's stack: $(cut -d' ' -f3- /tmp/gdb.seed_O2 | paste -sd'|')"
	done
	walk_check python3.11 python3.11 -c 'import os, signal
def inner(): os.kill(os.getpid(), signal.SIGSTOP)
def outer(): inner()
outer()'
else
	fail "walk: $BUILD/arm64/walk_a64 or gdb missing"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
