#!/bin/bash
# Makes a stripped copy of IN carrying a MiniDebugInfo .gnu_debugdata section
# (an xz-compressed ELF holding only the .symtab function symbols that are not
# in .dynsym), the way Fedora's find-debuginfo.sh does it.
# usage: minidebuginfo.sh IN OUT
set -euo pipefail
in=$1 out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C

objcopy --only-keep-debug "$in" "$tmp/debuginfo"
strip --strip-all -R .comment -o "$tmp/binary" "$in"

# Dynamic symbols are already in the binary; keep every other function symbol.
nm -D "$in" --format=posix --defined-only | awk '{ print $1 }' | sort > "$tmp/dynsyms"
nm "$tmp/debuginfo" --format=sysv --defined-only |
	awk -F '|' '{ if ($4 ~ "FUNC") print $1 }' | sed 's/ *$//' | sort -u > "$tmp/funcsyms"
comm -13 "$tmp/dynsyms" "$tmp/funcsyms" > "$tmp/keep_symbols"

objcopy -S --remove-section .gdb_index --remove-section .comment \
	--keep-symbols="$tmp/keep_symbols" "$tmp/debuginfo" "$tmp/mini_debuginfo"
xz --threads=1 "$tmp/mini_debuginfo"
objcopy --add-section .gnu_debugdata="$tmp/mini_debuginfo.xz" "$tmp/binary"
mv "$tmp/binary" "$out"
