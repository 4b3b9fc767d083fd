#!/bin/bash
# Builds the fuzzer's seed corpus in DIR from small real ELF files (test
# programs, a shared library, a debug file, an aarch64 library, /bin/true) plus truncated and
# byte-flipped copies, so mutation starts from well-formed CFI.
# usage: make_corpus.sh DIR TESTDATA_DIR [MORE_FILES...]
set -euo pipefail
dir=$1 td=$2
shift 2
rm -rf "$dir"
mkdir -p "$dir"

srcs=(/bin/true)
for f in clean threads_clang deep_recursion libdlleak.so seed_O2 seed_O2_nodebug \
	seed_minidebuginfo seed_O2_stripped.debug seed_clang_O2 libpac_a64.so; do
	[ -f "$td/$f" ] && srcs+=("$td/$f")
done
srcs+=("$@")

for src in "${srcs[@]}"; do
	name=$(basename "$src")
	size=$(stat -c %s "$src")
	cp "$src" "$dir/$name"
	for n in 64 1024 4096 $((size / 2)) $((size - 1)); do
		head -c "$n" "$src" > "$dir/$name.trunc$n"
	done
	# One corrupted byte in the ELF header and one in the middle.
	for off in 40 $((size / 3)); do
		cp "$src" "$dir/$name.flip$off"
		printf '\xff' | dd of="$dir/$name.flip$off" bs=1 seek="$off" conv=notrunc status=none
	done
done
# Inputs that once crashed the compiler (tests/fuzz/regress) stay seeds.
cp "$(dirname "$0")"/regress/* "$dir"/
echo "corpus: $(ls "$dir" | wc -l) files in $dir"
