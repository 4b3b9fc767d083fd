#!/bin/bash
# Builds the cache fuzzer's seed corpus in DIR from real cache entries:
# `dwleak tables` run on small objects with a scratch cache, then truncated
# and byte-flipped copies of each entry, so mutation starts from entries
# whose key, lengths and checksums are right; and each entry's payload
# behind the byte that asks fuzz_cache.c to frame it (FUZZ_AS_PAYLOAD).
# usage: make_cache_corpus.sh DIR DWLEAK TESTDATA_DIR
set -euo pipefail
dir=$1 dwleak=$2 td=$3
rm -rf "$dir"
mkdir -p "$dir"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

objs=(/bin/true)
for f in clean threads_clang libdlleak.so seed_O2 seed_O2_stripped; do
	[ -f "$td/$f" ] && objs+=("$td/$f")
done
unset DWLEAK_NO_CACHE
XDG_CACHE_HOME=$scratch "$dwleak" tables "${objs[@]}" > /dev/null

for entry in "$scratch"/dwleak/*.tbl; do
	name=$(basename "$entry" .tbl)
	size=$(stat -c %s "$entry")
	cp "$entry" "$dir/$name"
	for n in 39 40 100 $((size / 2)) $((size - 1)); do
		head -c "$n" "$entry" > "$dir/$name.trunc$n"
	done
	key_len=$(od -An -tu4 -j 12 -N 4 "$entry" | tr -d ' ')
	{ printf '\xa5'; tail -c +$((40 + key_len + 1)) "$entry" | zstd -q -d -c; } > "$dir/$name.payload"
	# One flipped byte in the header's lengths, one in the key, one in the frame.
	for off in 17 50 $((size - 20)); do
		cp "$entry" "$dir/$name.flip$off"
		printf '\xff' | dd of="$dir/$name.flip$off" bs=1 seek="$off" conv=notrunc status=none
	done
done
echo "cache corpus: $(ls "$dir" | wc -l) files in $dir"
