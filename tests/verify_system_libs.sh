#!/bin/bash
# Verifies the compiled unwind tables of the allocator libraries, two big
# interpreters and every test program against libdw (`dwleak tables
# --verify`): no mismatch, at least 99.9% of CFI-covered code unwindable,
# and libc/libstdc++ tables no bigger than 6 bytes per row.
set -uo pipefail
: "${DWLEAK:?path to the dwleak binary}" "${TESTDATA:?dir of built test programs}"

MIN_COVERAGE=99.900
MAX_BYTES_PER_ROW=6.00
LIBC=/lib/x86_64-linux-gnu/libc.so.6
LIBSTDCXX=/usr/lib/x86_64-linux-gnu/libstdc++.so.6

files=("$LIBC" "$LIBSTDCXX"
	/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4
	/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
	/usr/bin/python3.11 /usr/bin/perl)
for f in "$TESTDATA"/*; do
	# Separate debug files have no loadable code (.text is NOBITS).
	[[ $f == *.debug ]] && continue
	[ -f "$f" ] && [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && files+=("$f")
done

# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"
export DWLEAK_NO_CACHE=1 # verify what the compiler makes now, not a cached table

for f in "${files[@]}"; do
	if [ ! -e "$f" ]; then
		fail "$f is not installed"
		continue
	fi
	out=$("$DWLEAK" tables --verify "$f" 2>&1)
	rc=$?
	line=$(grep "^verify $f: " <<< "$out")
	if [ -z "$line" ]; then
		fail "$f: no summary line (exit $rc)"
		echo "$out" | tail -n 5 | sed 's/^/    /'
		continue
	fi
	echo "$line"
	mism=$(sed -n 's/.* mismatches=\([0-9]*\)$/\1/p' <<< "$line")
	cov=$(sed -n 's/.* coverage=\([0-9.]*\)% .*/\1/p' <<< "$line")
	bpr=$(sed -n 's/.* bytes_per_row=\([0-9.]*\) .*/\1/p' <<< "$line")
	if [ -z "$mism" ] || [ -z "$cov" ] || [ -z "$bpr" ]; then
		fail "$f: cannot parse: $line"
		continue
	fi
	if [ "$mism" != 0 ] || [ $rc -ne 0 ]; then
		fail "$f: $mism mismatches (exit $rc)"
		grep '^mismatch ' <<< "$out" | head -n 10 | sed 's/^/    /'
	fi
	awk -v c="$cov" -v m="$MIN_COVERAGE" 'BEGIN { exit !(c + 0 >= m + 0) }' ||
		fail "$f: coverage $cov% < $MIN_COVERAGE%"
	if [ "$f" = "$LIBC" ] || [ "$f" = "$LIBSTDCXX" ]; then
		awk -v b="$bpr" -v m="$MAX_BYTES_PER_ROW" 'BEGIN { exit !(b + 0 <= m + 0) }' ||
			fail "$f: $bpr bytes per row > $MAX_BYTES_PER_ROW"
	fi
done

check_finish "all ${#files[@]} objects verify clean"
