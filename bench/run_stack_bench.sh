#!/bin/bash
# Stack quality (issue 7): for the seed program built -O2
# -fomit-frame-pointer (build/testdata/seed_O2), the frames each tool
# reports for the leak site, the `new int[10]` in LeakLib::slowMemoryLeak
# (main -> caller -> LeakLib::slowMemoryLeak -> operator new -> malloc):
#   dwleak           --format json; the stack containing
#                    LeakLib::slowMemoryLeak() (also with --unwind fp)
#   bpftrace ustack  @[ustack] on malloc entry for 40-byte calls, target
#                    still running when the map is printed (so it is
#                    symbolized); frames of that map key
#   heaptrack        heaptrack_print --print-leaks: the leak's location and
#                    the "from:" frames under it
#   valgrind         --leak-check=full: the "definitely lost" record's
#                    at/by lines
# Every tool counts its own way (which allocator frames it shows, whether it
# goes below main), so the frames are listed too.
#
# Environment: DWLEAK, SEED (BUILD/testdata/seed_O2), OUT (default
# BUILD/bench/stack_bench.md).
set -uo pipefail

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$ROOT/dwleak}
SEED=${SEED:-$BUILD/testdata/seed_O2}
OUT=${OUT:-$BUILD/bench/stack_bench.md}
LIBC=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
. "$ROOT/bench/ensure_tools.sh"

if [ "$(id -u)" != 0 ]; then
	echo "run_stack_bench: needs root for BPF" >&2
	exit 2
fi
[ -x "$SEED" ] || { echo "run_stack_bench: $SEED is missing (make testdata)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stack-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
run="$SEED --iterations 5 --interval-ms 10"
: > "$tmp/notes"

if [ -x "$DWLEAK" ]; then
	timeout -k 5 120 "$DWLEAK" --format json -o "$tmp/dwleak.json" -- $run > /dev/null 2> "$tmp/dwleak.err" ||
		echo "dwleak failed: $(tail -n 2 "$tmp/dwleak.err" | tr '\n' ' ')" >> "$tmp/notes"
	timeout -k 5 120 "$DWLEAK" --unwind fp --format json -o "$tmp/dwleak_fp.json" -- $run > /dev/null 2> "$tmp/dwleak_fp.err" ||
		echo "dwleak --unwind fp failed: $(tail -n 2 "$tmp/dwleak_fp.err" | tr '\n' ' ')" >> "$tmp/notes"
else
	echo "dwleak not measured: $DWLEAK is missing" >> "$tmp/notes"
fi
if ensure_tool bpftrace bpftrace; then
	"$SEED" --interval-ms 10 > /dev/null 2>&1 &
	seed_pid=$!
	sleep 0.3
	timeout -k 5 60 bpftrace -p $seed_pid -e "
uprobe:$LIBC:malloc /pid == $seed_pid && arg0 == 40/ { @[ustack] = count(); }
interval:s:2 { exit(); }" > "$tmp/bpftrace.out" 2>&1
	kill $seed_pid
	wait $seed_pid 2> /dev/null
else
	echo "bpftrace not measured: not installed and apt-get install bpftrace failed" >> "$tmp/notes"
fi
if ensure_tool heaptrack heaptrack && command -v heaptrack_print > /dev/null; then
	timeout -k 5 120 heaptrack -o "$tmp/ht" $run > "$tmp/heaptrack.log" 2>&1
	heaptrack_print -f "$tmp"/ht.* --print-leaks 1 --print-peaks 0 --print-allocators 0 \
		--print-temporary 0 > "$tmp/heaptrack.out" 2>&1 ||
		echo "heaptrack_print failed: $(tail -n 2 "$tmp/heaptrack.out" | tr '\n' ' ')" >> "$tmp/notes"
else
	echo "heaptrack not measured: not installed and apt-get install heaptrack failed" >> "$tmp/notes"
fi
if ensure_tool valgrind valgrind; then
	timeout -k 5 120 valgrind --tool=memcheck --leak-check=full $run > "$tmp/valgrind.out" 2>&1
else
	echo "valgrind not measured: not installed and apt-get install valgrind failed" >> "$tmp/notes"
fi

mkdir -p "$(dirname "$OUT")"
MACHINE="$(machine_line)" python3 - "$tmp" "$OUT" << 'EOF'
import json, os, re, sys, time
tmp, out = sys.argv[1], sys.argv[2]
LEAF = "LeakLib::slowMemoryLeak"
rows = []


def row(tool, frames, how):
    if frames is None:
        rows.append(f"| {tool} | not measured | | | {how} |")
        return
    if not frames:
        rows.append(f"| {tool} | no stack with {LEAF} | | | {how} |")
        return
    names = [re.sub(r"\(.*\)$", "()", f) for f in frames]
    chain = all(any(n.startswith(x) for n in names) for x in (LEAF, "caller", "main"))
    rows.append(f"| {tool} | {len(frames)} | {'yes' if chain else 'no'} | {' ← '.join(names)} | {how} |")


def dwleak(path):
    if not os.path.exists(path):
        return None
    stacks = json.load(open(path))["stacks"]
    for s in stacks:
        fr = [f["function"] or f["address"] for f in s["frames"]]
        if any(LEAF in (f or "") for f in fr):
            return fr
    # the site was lost: the stack(s) of the leak's 40-byte allocations,
    # for what they show instead
    leak = [s for s in stacks if s["allocations"] and s["bytes"] == 40 * s["allocations"]]
    if not leak:
        return []
    fr = [f["function"] or f["address"] for f in leak[0]["frames"]]
    if len(leak) > 1:
        fr[-1] += f" (the 5 leaks split over {len(leak)} such stacks)"
    return fr


row("dwleak (DWARF, default)", dwleak(f"{tmp}/dwleak.json"), "frames of its JSON stack")
row("dwleak `--unwind fp`", dwleak(f"{tmp}/dwleak_fp.json"), "frames of its JSON stack holding the leak's bytes (an FP walk loses the site in -fomit-frame-pointer code)")

# bpftrace: the map key with the biggest count (printed last)
p = f"{tmp}/bpftrace.out"
if os.path.exists(p):
    keys = re.findall(r"^@\[\n(.*?)\n\]: (\d+)", open(p).read(), re.M | re.S)
    fr = [l.strip() for l in max(keys, key=lambda k: int(k[1]))[0].splitlines()] if keys else []
    fr = [re.sub(r"\+\d+$", "", f) for f in fr]
    row("bpftrace `ustack` (FP)", fr, "frames of `@[ustack]` for malloc(40); " +
        ("reaches only malloc itself: the FP walk needs rbp chains that -fomit-frame-pointer code does not keep" if len(fr) <= 2 else ""))
else:
    row("bpftrace `ustack` (FP)", None, "")

# heaptrack: "200B leaked over 5 calls from\nLOC\n  at..\n  in..\n200B leaked over 5 calls from:\n    F\n      at.."
p = f"{tmp}/heaptrack.out"
if os.path.exists(p):
    text = open(p).read()
    fr = []
    m = re.search(r"^\S+ leaked over \d+ calls from\n(" + re.escape(LEAF) + r".*?)\n\n", text, re.M | re.S)
    if m:
        for l in m.group(1).splitlines():
            if re.match(r"^\s*(at|in) ", l) or "leaked over" in l:
                continue
            fr.append(l.strip())
    row("heaptrack", fr, "leak location + its `from:` frames (heaptrack drops operator new/malloc; stops at main)")
else:
    row("heaptrack", None, "")

p = f"{tmp}/valgrind.out"
if os.path.exists(p):
    text = open(p).read()
    fr = []
    m = re.search(r"definitely lost in loss record.*?\n((?:==\d+==\s+(?:at|by) .*\n)+)", text)
    if m:
        for l in m.group(1).splitlines():
            f = re.sub(r"^==\d+==\s+(at|by) 0x[0-9A-F]+: ", "", l)
            fr.append(re.sub(r" \(.*?\)$", "", f))
    row("valgrind memcheck", fr, "`definitely lost` record's at/by lines (stops at main: --show-below-main=no)")
else:
    row("valgrind memcheck", None, "")

with open(out, "w") as f:
    w = lambda s="": print(s, file=f)
    w("### Stack quality: the leak site in seed_O2 (-O2 -fomit-frame-pointer)")
    w()
    w(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.environ['MACHINE']}; the leak: `new int[10]` in LeakLib::slowMemoryLeak, called main → caller → LeakLib::slowMemoryLeak; frames listed innermost first, `←` = called from.")
    w()
    w("| tool | frames reported | slowMemoryLeak, caller, main all present | frames (innermost first) | counted |")
    w("|---|---:|---|---|---|")
    for r in rows:
        w(r)
    notes = open(f"{tmp}/notes").read().split("\n")
    if any(notes):
        w()
    for n in notes:
        if n:
            w(f"- note: {n}")
print(open(out).read())
EOF
