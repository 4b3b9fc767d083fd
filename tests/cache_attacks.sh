#!/bin/bash
# Issue 13's attacks on the table cache, planted by an unprivileged user
# (nobody, through setpriv) against root's `dwleak tables`: a copy of libc
# with libc's build id and doctored CFI must never become libc's table, and
# a cache directory that user owns, can write or points elsewhere with a
# link must not be used (one warning line, nothing written, no hang).
# No BPF.  The entry-level attacks (links, FIFOs, bombs) are in
# tests/unit/test_table_hardening.c.
set -uo pipefail
: "${DWLEAK:?path to the dwleak binary}"

LIBC=/lib/x86_64-linux-gnu/libc.so.6
NOBODY=65534
LIMIT=60 # seconds; a run takes well under one, more is a hang

[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (the attacker is another user)"; exit 77; }
command -v setpriv > /dev/null || { echo "skip: setpriv not found"; exit 77; }
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
# a root directory of mode 0700 (a chroot made in a mktemp -d directory)
# lets no one but root load a shared library: no attacker can be staged
as_nobody /bin/true 2> /dev/null || { echo "skip: nobody cannot run programs here ($(stat -c '/ is mode %a' /))"; exit 77; }

tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
unset DWLEAK_NO_CACHE
# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"

# tables CACHE_HOME FILE: root's `dwleak tables FILE` with that cache;
# rows (without the first line, the path) in $tmp/out, stderr in $tmp/err.
tables() {
	local rc
	XDG_CACHE_HOME=$1 timeout "$LIMIT" "$DWLEAK" tables "$2" 2> "$tmp/err" | tail -n +2 > "$tmp/out"
	rc=${PIPESTATUS[0]}
	[ "$rc" -eq 124 ] && fail "dwleak tables $2 with cache $1: hung"
	[ "$rc" -eq 0 ] || fail "dwleak tables $2 with cache $1: exit $rc: $(cat "$tmp/err")"
}

# entries DIR: how many files DIR holds (0 when it does not exist).
entries() { find "$1" -mindepth 1 2> /dev/null | wc -l; }

DWLEAK_NO_CACHE=1 "$DWLEAK" tables "$LIBC" | tail -n +2 > "$tmp/libc.rows"
[ -s "$tmp/libc.rows" ] || fail_now "cannot compile $LIBC"

# --- 1. The user's copy of libc, same build id, every CFA moved by 8 ---
mkdir "$tmp/home"
chown $NOBODY:$NOBODY "$tmp/home"
as_nobody bash -c '
	set -e
	copy=$1/libc.so.6
	cp "$2" "$copy"
	off=$(readelf -SW "$copy" | awk "\$2 == \".eh_frame\" { print \$5; exit }")
	off=$((16#$off))
	# The first CIE starts .eh_frame; its "def_cfa rsp+8" (0c 07 08) becomes rsp+16.
	at=$(od -An -tx1 -v -j "$off" -N 64 "$copy" | tr -s " \n" " " |
		awk "{ for (i = 1; i + 2 <= NF; i++) if (\$i == \"0c\" && \$(i+1) == \"07\" && \$(i+2) == \"08\") { print i - 1; exit } }")
	[ -n "$at" ]
	printf "\x10" | dd of="$copy" bs=1 seek=$((off + at + 2)) conv=notrunc status=none
' _ "$tmp/home" "$LIBC" || fail_now "nobody could not make the doctored copy"
copy=$tmp/home/libc.so.6
[ "$(readelf -n "$copy" | grep 'Build ID')" = "$(readelf -n "$LIBC" | grep 'Build ID')" ] ||
	fail "the copy lost libc's build id"

cache=$tmp/rootcache
tables "$cache" "$copy"
cmp -s "$tmp/out" "$tmp/libc.rows" && fail "the doctored copy compiles to libc's table (no attack)"
[ "$(entries "$cache/dwleak")" -eq 0 ] ||
	fail "a table compiled from nobody's file entered root's cache: $(ls "$cache/dwleak")"
tables "$cache" "$LIBC"
cmp -s "$tmp/out" "$tmp/libc.rows" || fail "libc's table after the user's copy is not libc's"
echo "checked: a user's copy with libc's build id"

# The same bytes in a file root owns are stored, and still never served
# to libc: the entry is bound to the CFI it was compiled from.
cp "$copy" "$tmp/rootcopy.so"
tables "$cache" "$tmp/rootcopy.so"
tables "$cache" "$LIBC"
cmp -s "$tmp/out" "$tmp/libc.rows" || fail "libc was served the root-owned copy's entry"
tables "$cache" "$LIBC"
cmp -s "$tmp/out" "$tmp/libc.rows" || fail "libc's own entry is wrong"
echo "checked: a root-owned copy with libc's build id"

# --- 2. Cache directories someone else chose ---
# refused NAME CACHE_HOME DIR WANT: root's run warns once (WANT in the
# reason), still prints libc's table, and writes nothing into DIR.
refused() {
	local name=$1 home=$2 dir=$3 want=$4
	tables "$home" "$LIBC"
	cmp -s "$tmp/out" "$tmp/libc.rows" || fail "$name: wrong table"
	grep -q "^dwleak: warning: not using the table cache: .*$want" "$tmp/err" ||
		fail "$name: no warning saying '$want': $(cat "$tmp/err")"
	[ "$(grep -c . "$tmp/err")" -eq 1 ] || fail "$name: want one stderr line: $(cat "$tmp/err")"
	[ "$(entries "$dir")" -eq 0 ] || fail "$name: root wrote into $dir: $(ls -la "$dir")"
	echo "$name: $(cat "$tmp/err")"
}

# A sticky, world-writable parent like /tmp, where nobody plants things.
mkdir -m 1777 "$tmp/shared"
as_nobody mkdir -m 0777 "$tmp/shared/dwleak"
refused "cache dir owned by nobody" "$tmp/shared" "$tmp/shared/dwleak" "owned by uid $NOBODY"

mkdir -p "$tmp/ww/dwleak"
chmod 0777 "$tmp/ww/dwleak"
refused "world-writable cache dir" "$tmp/ww" "$tmp/ww/dwleak" "writable by everyone"

mkdir -m 1777 "$tmp/shared2"
mkdir -m 0700 "$tmp/chosen"
as_nobody ln -s "$tmp/chosen" "$tmp/shared2/dwleak"
refused "cache dir is nobody's symlink" "$tmp/shared2" "$tmp/chosen" "symbolic link"

# A HOME that sudo kept: the user's own directory on the way.
as_nobody mkdir -p "$tmp/home/.cache/dwleak"
HOME=$tmp/home XDG_CACHE_HOME= timeout "$LIMIT" "$DWLEAK" tables "$LIBC" 2> "$tmp/err" > /dev/null
grep -q "owned by uid $NOBODY" "$tmp/err" || fail "a user's HOME: $(cat "$tmp/err")"
[ "$(entries "$tmp/home/.cache/dwleak")" -eq 0 ] || fail "root wrote into the user's HOME"
echo "cache under a user's HOME: $(cat "$tmp/err")"

# Planted entries in a directory nobody can write: never opened (a FIFO
# would hang an open without O_NONBLOCK).
XDG_CACHE_HOME=$tmp/probe "$DWLEAK" tables "$LIBC" > /dev/null 2>&1
name=$(ls "$tmp/probe/dwleak")
mkdir -m 1777 "$tmp/shared3"
as_nobody mkdir -m 0777 "$tmp/shared3/dwleak"
as_nobody mkfifo -m 0666 "$tmp/shared3/dwleak/$name"
tables "$tmp/shared3" "$LIBC"
cmp -s "$tmp/out" "$tmp/libc.rows" || fail "FIFO entry in nobody's dir: wrong table"
echo "checked: a FIFO entry planted by nobody"

check_finish "all cache attacks refused"
