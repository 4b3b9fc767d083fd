#!/bin/bash
# Runs the libFuzzer targets over their seed corpora: the table compiler
# (build/fuzz/fuzz_tables) for FUZZ_SECONDS and the cache entry decoder
# (build/fuzz/fuzz_cache) for FUZZ_CACHE_SECONDS, what target/ reads of a
# traced process's files, USDT notes and symbols (build/fuzz/fuzz_objects)
# for FUZZ_OBJECTS_SECONDS, and what it reads of a traced process's memory
# (build/fuzz/fuzz_memory: glibc's arenas) for FUZZ_MEMORY_SECONDS, what the agent
# parses of other processes' files and of HTTP requests (build/fuzz/fuzz_agent)
# for FUZZ_AGENT_SECONDS, a process's seccomp filters, as the injector
# evaluates them (build/fuzz/fuzz_seccomp) for FUZZ_SECCOMP_SECONDS, and the
# preload library's index of live blocks, as the leak check decodes it
# (build/fuzz/fuzz_blockset) for FUZZ_BLOCKSET_SECONDS, and the preload
# library's stack walks over arbitrary unwind images and stacks
# (build/fuzz/fuzz_walk) for FUZZ_WALK_SECONDS, and the library's rings of
# walked records, as dwleak drains them (build/fuzz/fuzz_walk_ring) for
# FUZZ_WALK_RING_SECONDS.  A crash leaves its input
# in build/fuzz/crash-*.
set -euo pipefail
BUILD=${BUILD:-$ROOT/build}

# fuzz NAME SEEDS SECONDS: runs build/fuzz/NAME for SECONDS over SEEDS.
fuzz() {
	local fuzzer=$BUILD/fuzz/$1 seeds=$BUILD/fuzz/$2 work
	if [ ! -x "$fuzzer" ]; then
		echo "fuzzer not built ($fuzzer): no tables/*.c yet?"
		exit 77
	fi
	[ -d "$seeds" ] || { echo "no seed corpus in $seeds"; exit 1; }
	work=$(mktemp -d)
	# New inputs go to the scratch dir; the seed corpus stays as built.
	echo "== $1, ${3}s"
	if ! "$fuzzer" -max_total_time="$3" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$BUILD/fuzz/" "$work" "$seeds" 2>&1 | tail -n 40; then
		rm -rf "$work"
		echo "fuzzer failed; reproduce with: $fuzzer $BUILD/fuzz/crash-*"
		exit 1
	fi
	rm -rf "$work"
}

fuzz fuzz_tables seeds "${FUZZ_SECONDS:-20}"
fuzz fuzz_cache cache_seeds "${FUZZ_CACHE_SECONDS:-10}"
fuzz fuzz_objects object_seeds "${FUZZ_OBJECTS_SECONDS:-10}"
fuzz fuzz_memory memory_seeds "${FUZZ_MEMORY_SECONDS:-5}"
fuzz fuzz_agent agent_seeds "${FUZZ_AGENT_SECONDS:-5}"
fuzz fuzz_seccomp seccomp_seeds "${FUZZ_SECCOMP_SECONDS:-5}"
fuzz fuzz_blockset blockset_seeds "${FUZZ_BLOCKSET_SECONDS:-5}"
fuzz fuzz_walk walk_seeds "${FUZZ_WALK_SECONDS:-5}"
fuzz fuzz_walk_ring walk_ring_seeds "${FUZZ_WALK_RING_SECONDS:-5}"
