#!/bin/bash
# The preload library's stack walk in the process (issue 24,
# bench/walk_bench.c): ns per walk, DWARF over the unwind image and frame
# pointers, at 10 and 20 frames of the program's own, the DWARF walk
# without the rule cache, cold and warm, next to malloc(64)+free in the
# same run, and what that means for the goal that
# an exact trace in the process costs at most half of heaptrack's
# malloc+free pair.  Writes a markdown section (OUT).
#
# Environment: WALKS (200000 a rep), REPS (7, the fastest kept), OUT
# (default BUILD/bench/walk.md), HEAPTRACK_NS (heaptrack's ns per pair, 1
# thread: the micro section's; 270 when unset).  No root.  Takes ~10 s.
set -uo pipefail

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
WALKS=${WALKS:-200000}
REPS=${REPS:-7}
OUT=${OUT:-$BUILD/bench/walk.md}
HEAPTRACK_NS=${HEAPTRACK_NS:-270}

if [ ! -x "$BUILD/bench/walk_bench" ]; then
	make -C "$ROOT" -j2 "$BUILD/bench/walk_bench" > /dev/null || {
		echo "run_walk_bench: build/bench/walk_bench could not be built" >&2
		exit 2
	}
fi
raw=$("$BUILD/bench/walk_bench" --walks "$WALKS" --reps "$REPS") || exit 1
{
	echo "### The preload library's stack walk, in the process (issue 24)"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs; preload/walk.c with the library's flags; $(echo "$raw" | sed -n 1p)."
	echo "Each walk: the registers captured, the thread's stack bounds (cached per thread), the walk. $(echo "$raw" | sed -n 2p)."
	echo
	echo "| stack | depth | walk | frames | ns/walk | ns/frame | rules searched | end |"
	echo "|---|---:|---|---:|---:|---:|---:|---:|"
	echo "$raw" | awk 'NR > 3 { printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
	echo
	for walk in dwarf dwarf-cold dwarf-warm dwarf-memo; do
		echo "$raw" | awk -v ht="$HEAPTRACK_NS" -v w="$walk" 'NR > 3 && $3 == w { n++; s += $5; f += $4; if ($5 > max) max = $5 }
			END { printf "- %s walks: %.0f ns on average (%.1f a frame), %.0f at most; the budget for an exact trace in the process (<= 0.5 x heaptrack, %s ns a pair) is %.0f ns for everything: %s\n", w, s / n, s / f, max, ht, ht / 2, (max <= ht / 2 ? "met" : "NOT met") }'
	done
	echo "- dwarf: no rule cache (every rule searched); dwarf-cold: the cache emptied of the walk's slots before each walk (a store a frame, timed too); dwarf-warm: every rule in the cache; dwarf-memo: the walk repeated from the thread's memo of whole walks (its words loaded and compared), as the library's walk from a place it walked from before"
	echo "- end 0: the walk reached the outermost frame; 8 (FP walks): the rbp chain left code built with frame pointers (libc's, -fomit-frame-pointer frames), as frame-pointer tools stop there"
} > "$OUT"
cat "$OUT"
