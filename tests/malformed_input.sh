#!/bin/bash
# Feeds `dwleak tables` files that are not (or no longer) valid ELF objects,
# or not regular files at all, and checks it never crashes nor hangs: unreadable input exits 2 with exactly one
# `dwleak:` line on stderr; input that is still partly valid exits 0 and
# prints what it could compile.  A signal (exit >= 128) or a sanitizer
# report is a failure.
set -uo pipefail
: "${DWLEAK:?path to the dwleak binary}"

LIBC=/lib/x86_64-linux-gnu/libc.so.6
SMALL=/usr/bin/true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export DWLEAK_NO_CACHE=1
# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"

# run NAME WANT_EXIT FILE...: runs `dwleak tables FILE...`, checks the exit
# status and that stderr is one `dwleak:` line (exit 2) or free of errors.
run() {
	local name=$1 want=$2 rc lines
	shift 2
	timeout 30 "$DWLEAK" tables "$@" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	if [ $rc -eq 124 ]; then
		fail "$name: hung (killed after 30 s)"
		return
	fi
	if [ $rc -ge 128 ] || grep -q 'Sanitizer\|runtime error' "$tmp/err"; then
		fail "$name: crashed (exit $rc)"
		head -n 20 "$tmp/err" | sed 's/^/    /'
		return
	fi
	[ $rc -eq "$want" ] || fail "$name: exit $rc, want $want"
	lines=$(grep -c . "$tmp/err")
	if [ "$want" -eq 2 ]; then
		[ "$lines" -eq 1 ] && grep -q '^dwleak: cannot read ' "$tmp/err" ||
			fail "$name: want one 'dwleak: cannot read' line, got: $(cat "$tmp/err")"
	fi
	echo "$name: exit $rc: $(head -n 1 "$tmp/err")"
}

# section_offset FILE NAME: file offset and size of a section, in decimal.
section_offset() {
	local hex
	hex=$(readelf -SW "$1" | awk -v n="$2" '{
		for (i = 1; i < NF; i++) if ($i == n) { print $(i + 3), $(i + 4); exit } }')
	[ -n "$hex" ] || return 1
	set -- $hex
	echo $((16#$1)) $((16#$2))
}

: > "$tmp/empty"
mkdir "$tmp/dir"
printf 'not an ELF file\n' > "$tmp/text"
run "missing file" 2 "$tmp/does-not-exist"
run "zero-length file" 2 "$tmp/empty"
run "directory" 2 "$tmp/dir"
grep -q ': is a directory;' "$tmp/err" || fail "directory: $(cat "$tmp/err")"
run "text file" 2 "$tmp/text"
# Not regular files: said so at once; a FIFO must not wait for a writer.
mkfifo "$tmp/fifo"
run "FIFO" 2 "$tmp/fifo"
grep -q ': is a FIFO' "$tmp/err" || fail "FIFO: $(cat "$tmp/err")"
run "device" 2 /dev/null
grep -q ': is a device' "$tmp/err" || fail "device: $(cat "$tmp/err")"
run "FIFO as the debug file" 2 --debug-file "$tmp/fifo" "$SMALL"

size=$(stat -c %s "$LIBC")
for len in 10 64 4096 $((size / 2)); do
	head -c "$len" "$LIBC" > "$tmp/libc.$len"
	# Half of libc still holds the headers but not the section table nor
	# all of .eh_frame: it cannot be compiled, and must say so.
	run "libc truncated to $len bytes" 2 "$tmp/libc.$len"
done

# .eh_frame overwritten with garbage: no FDE survives.  .eh_frame_hdr still
# points into the garbage.  Nothing to unwind with: exit 2.
read -r off len < <(section_offset "$SMALL" .eh_frame)
cp "$SMALL" "$tmp/garbage_eh"
head -c "$len" /dev/urandom | dd of="$tmp/garbage_eh" bs=1 seek="$off" conv=notrunc status=none
run "garbage .eh_frame" 2 "$tmp/garbage_eh"

# An FDE whose pc range lies outside the object: the compiler skips it and
# counts it; the rest of the object still compiles (exit 0, one skipped FDE).
# The first FDE follows the 0x14-byte CIE at the start of .eh_frame; its
# pc_begin (pc-relative sdata4) sits 8 bytes into it.
read -r off len < <(section_offset "$SMALL" .eh_frame)
cie_len=$(od -An -tu4 -j "$off" -N 4 "$SMALL" | tr -d ' ')
fde=$((off + 4 + cie_len))
cp "$SMALL" "$tmp/fde_outside"
printf '\x00\x00\x00\x40' | dd of="$tmp/fde_outside" bs=1 seek=$((fde + 8)) conv=notrunc status=none
run "FDE outside the object" 0 "$tmp/fde_outside"
grep -q 'skipped [1-9]' "$tmp/out" || fail "FDE outside the object: not counted as skipped: $(grep fdes: "$tmp/out")"
# The verifier skips it too (not in any PT_LOAD): no mismatch.
run "FDE outside the object, --verify" 0 --verify "$tmp/fde_outside"
grep -q 'mismatches=0$' "$tmp/out" || fail "FDE outside the object, --verify: $(tail -n 1 "$tmp/out")"

# Bad files among good ones: every file is tried, the exit status is 2.
run "good and bad together" 2 "$SMALL" "$tmp/text"
grep -q "^$SMALL:" "$tmp/out" || fail "good and bad together: the good file was not printed"

check_finish "all malformed inputs handled"
