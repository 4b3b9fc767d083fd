#!/bin/bash
# Issue 13: a ~50 KB ELF whose zstd-compressed .debug_frame claims, and
# really decompresses to, 1 GiB cost root's dwleak 1 GiB of RAM.  An
# unprivileged user (nobody, through setpriv; or the current user when not
# root) builds it; `dwleak tables` must refuse it at once, saying why, with
# its peak RSS barely above that of compiling a small object.  No BPF.
set -uo pipefail
: "${DWLEAK:?path to the dwleak binary}"

CLAIM=$((1 << 30))
RSS_SLACK_KB=$((128 * 1024)) # over the baseline run; the bomb would add 1 GiB
MAX_SECONDS=10

for tool in cc objcopy readelf zstd /usr/bin/time; do
	command -v "$tool" > /dev/null || { echo "skip: $tool not found"; exit 77; }
done
tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
export DWLEAK_NO_CACHE=1
# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"

as_user() {
	if [ "$(id -u)" -eq 0 ] && command -v setpriv > /dev/null; then
		setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
	else
		"$@"
	fi
}

as_user /bin/true 2> /dev/null || { echo "skip: nobody cannot run programs here ($(stat -c '/ is mode %a' /))"; exit 77; }
mkdir "$tmp/u"
[ "$(id -u)" -eq 0 ] && chown 65534:65534 "$tmp/u"
# The bomb: a tiny shared object with .debug_frame replaced by an
# Elf64_Chdr (ELFCOMPRESS_ZSTD, ch_size 1 GiB) and a zstd frame of 1 GiB
# of zeros, the section flagged SHF_COMPRESSED by hand.
as_user bash -c '
	set -e
	cd "$1"
	echo "int f(int x) { return x + 1; }" > bomb.c
	cc -shared -fPIC -g -fno-asynchronous-unwind-tables -o bomb.so bomb.c
	printf "\x02\x00\x00\x00\x00\x00\x00\x00" > chdr
	printf "\x00\x00\x00\x40\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00" >> chdr
	head -c "$2" /dev/zero | zstd -q -1 --stream-size="$2" -c > frame.zst
	cat chdr frame.zst > payload
	objcopy --remove-section .debug_frame --add-section .debug_frame=payload bomb.so
	idx=$(readelf -SW bomb.so | sed -n "s/^ *\[ *\([0-9]*\)\] \.debug_frame .*/\1/p")
	shoff=$(readelf -hW bomb.so | sed -n "s/.*Start of section headers: *\([0-9]*\).*/\1/p")
	printf "\x00\x08\x00\x00\x00\x00\x00\x00" |
		dd of=bomb.so bs=1 seek=$((shoff + idx * 64 + 8)) conv=notrunc status=none
' _ "$tmp/u" "$CLAIM" || fail_now "cannot build the bomb"
bomb=$tmp/u/bomb.so
readelf -SW "$bomb" | grep '\.debug_frame .* C ' > /dev/null || fail "the bomb's .debug_frame is not SHF_COMPRESSED"
echo "bomb: $(stat -c %s "$bomb") bytes, .debug_frame claims $CLAIM"

# run NAME FILE: `dwleak tables FILE` under /usr/bin/time; sets rc, kb, secs.
run() {
	/usr/bin/time -f '%M %e' -o "$tmp/time" timeout 60 "$DWLEAK" tables "$2" \
		> /dev/null 2> "$tmp/err"
	rc=$?
	read -r kb secs < <(tail -n 1 "$tmp/time")
	echo "$1: exit $rc, peak RSS $kb KiB, $secs s: $(grep '^dwleak' "$tmp/err" | head -n 1)"
}

run "baseline (/usr/bin/true)" /usr/bin/true
base_kb=$kb
run "bomb" "$bomb"
[ "$rc" -eq 2 ] || fail "bomb: exit $rc, want 2 (refused)"
grep -q "claims $CLAIM bytes" "$tmp/err" || fail "bomb: the refusal does not say why: $(cat "$tmp/err")"
[ "$kb" -lt $((base_kb + RSS_SLACK_KB)) ] || fail "bomb: peak RSS $kb KiB (baseline $base_kb KiB)"
awk -v s="$secs" -v m="$MAX_SECONDS" 'BEGIN { exit !(s + 0 < m) }' || fail "bomb: took $secs s"

check_finish "the 1 GiB claim was refused"
