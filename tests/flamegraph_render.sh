#!/bin/bash
# The svg report drawn by a real browser (issue 4): headless Chromium renders
# dwleak's flame graph of the seed program to PNG, and a small PNG decoder
# checks the image has the window's size and is a flame graph, not a blank
# page: many colours, and boxes in each kind's colour (user orange/red,
# system blue, allocator green).  A second render runs the graph's own script
# (zoom into main, search "operator new", hover a frame) and checks the
# highlight colour, the matched share and the details line.
#
# The SVG comes from a real trace (root needed for BPF), else from the unit
# test's --write-seed helper.
# A good PNG is kept at $BUILD/flamegraph-seed.png.
#
# Environment: ROOT, BUILD, DWLEAK, TESTDATA (tests/run.sh sets them).
# Exit 0 pass, 1 fail, 77 skip (only when Chromium cannot be installed or run).
set -u

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$BUILD/asan/dwleak}
TESTDATA=${TESTDATA:-$BUILD/testdata}
WIN_W=1200   # the SVG's width; the height is the SVG's too, read from it below

T=$(mktemp -d /tmp/flamegraph_render.XXXXXX)
trap 'rm -rf "$T"' EXIT

# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"

skip() {
	echo "skip: $*"
	exit 77
}

# ---- Chromium ----

chromium_bin() {
	command -v chromium || command -v chromium-browser
}
if ! chromium_bin > /dev/null; then
	[ "$(id -u)" -eq 0 ] || skip "chromium is not installed (apt-get install chromium, as root)"
	echo "installing chromium"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium > "$T/apt.log" 2>&1 ||
		skip "chromium cannot be installed: $(tail -n 1 "$T/apt.log")"
	chromium_bin > /dev/null || skip "chromium installed but not found in PATH"
fi
CHROMIUM=$(chromium_bin)

# chromium_run OUTPUT-OPTION FILE: one headless run, no network, fresh profile.
chromium_run() {
	local profile rc
	profile=$(mktemp -d "$T/profile.XXXXXX")
	timeout -k 5 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
		--no-first-run --disable-background-networking --disable-component-update \
		--disable-sync --hide-scrollbars --user-data-dir="$profile" \
		--window-size=$WIN_W,$WIN_H "$1" "file://$2" 2>> "$T/chromium.log"
	rc=$?
	rm -rf "$profile"
	return $rc
}

# ---- The SVG ----

SVG=$T/seed.svg
if [ "$(id -u)" -eq 0 ] &&
	[ -x "$DWLEAK" ] && [ -x "$TESTDATA/seed_O2" ]; then
	# 2000 leaks of 40 bytes, so the seed chain is about half the picture next
	# to libstdc++'s 72 KiB startup pool (with 20 it is a 12 px sliver); the
	# default suppressions would leave that pool, and the system colour, out.
	echo "svg from a real trace: $DWLEAK --format svg -- seed_O2 --iterations 2000"
	"$DWLEAK" --no-default-suppressions --format svg -o "$SVG" -- "$TESTDATA/seed_O2" \
		--iterations 2000 --interval-ms 1 \
		> "$T/dwleak.out" 2>&1 || { cat "$T/dwleak.out"; fail_now "dwleak --format svg failed"; }
	# The seed chain, as XML text (none of these names needs escaping).
	for name in malloc "operator new(unsigned long)" "LeakLib::slowMemoryLeak()" main; do
		grep -qF "data-n=\"$name\"" "$SVG" || fail_now "the SVG has no box for $name"
	done
else
	HELPER=$BUILD/asan/tests/test_flamegraph
	[ -x "$HELPER" ] || fail_now "$HELPER not built (make check-build)"
	echo "svg from the unit test's seed report (dwleak does not write svg yet, or not root)"
	"$HELPER" --write-seed "$SVG" || fail_now "$HELPER --write-seed failed"
fi
WIN_H=$(python3 -c 'import sys, xml.dom.minidom, math
svg = xml.dom.minidom.parse(sys.argv[1]).documentElement
print(math.ceil(float(svg.getAttribute("height"))))' "$SVG") || fail_now "the SVG is not well-formed XML"
[ "$WIN_H" -ge 100 ] && [ "$WIN_H" -le 4000 ] || fail_now "the SVG is $WIN_H px high"

# A copy whose extra script drives the graph's own: zoom, search, hover.
python3 - "$SVG" "$T/driven.svg" << 'PY' || fail_now "cannot make the driven copy"
import sys
svg = open(sys.argv[1], encoding="utf-8").read()
driver = """<script type="text/ecmascript"><![CDATA[
var byName = function (n) { return fg.frames.filter(function (f) { return f.name == n; })[0]; };
zoom(byName("main"));
highlight("operator new");
show(byName("main"));
]]></script>
</svg>"""
i = svg.rindex("</svg>")
open(sys.argv[2], "w", encoding="utf-8").write(svg[:i] + driver + svg[i + 6:])
PY

# ---- Render ----

PNG=$T/seed.png
( cd "$T" && chromium_run --screenshot="$PNG" "$SVG" ) > /dev/null ||
	skip "chromium cannot run headless here: $(grep -v dbus "$T/chromium.log" | tail -n 1)"
[ -s "$PNG" ] || skip "chromium wrote no screenshot: $(grep -v dbus "$T/chromium.log" | tail -n 1)"
( cd "$T" && chromium_run --screenshot="$T/driven.png" "$T/driven.svg" ) > /dev/null ||
	fail_now "chromium failed on the driven copy"
( cd "$T" && chromium_run --dump-dom "$T/driven.svg" ) > "$T/driven.dom" ||
	fail_now "chromium --dump-dom failed on the driven copy"

# ---- Check the pictures ----

# check_png FILE MODE: MODE "plain" or "driven" (see the top of this file).
check_png() {
	python3 - "$1" "$2" "$WIN_W" "$WIN_H" << 'PY'
import struct, sys, zlib

path, mode, want_w, want_h = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def decode(data):
    """8-bit RGB or RGBA, non-interlaced PNG -> (width, height, rows of (r, g, b))."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                sys.exit("unsupported PNG: depth %d colour type %d interlace %d" % (depth, ctype, interlace))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * bpp
    prev, rows, i = bytearray(stride), [], 0
    for _ in range(h):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1: line[x] = (line[x] + a) & 255
            elif ftype == 2: line[x] = (line[x] + b) & 255
            elif ftype == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows

w, h, rows = decode(open(path, "rb").read())
if (w, h) != (want_w, want_h):
    sys.exit("%s is %dx%d, want %dx%d" % (path, w, h, want_w, want_h))
colours, kinds, painted = set(), dict(user=0, system=0, alloc=0, match=0), 0
for row in rows:
    for r, g, b in row:
        colours.add((r, g, b))
        if (r, g, b) != (255, 255, 255):
            painted += 1
        if r >= 200 and 60 <= g <= 200 and b <= 70 and r - g >= 40:
            kinds["user"] += 1
        elif b >= 190 and r <= 130 and b - r >= 70:
            kinds["system"] += 1
        elif g >= 165 and r <= 140 and b <= 130 and g - max(r, b) >= 40:
            kinds["alloc"] += 1
        elif (r, g, b) == (230, 0, 230):
            kinds["match"] += 1
print("%s: %dx%d, %d colours, %d painted pixels, by kind %s" % (path, w, h, len(colours), painted, kinds))
if len(colours) < 16 or painted < w * h // 2:
    sys.exit("%s looks blank" % path)
need = ["user", "system", "alloc"] + (["match"] if mode == "driven" else [])
for k in need:
    if kinds[k] < 300:
        sys.exit("%s: hardly any %s-coloured pixels (%d)" % (path, k, kinds[k]))
PY
}

check_png "$PNG" plain || fail_now "the flame graph did not render"
check_png "$T/driven.png" driven || fail_now "the driven flame graph did not render"
grep -q 'id="matched"[^>]*>Matched: [0-9.]*% (' "$T/driven.dom" ||
	fail_now "search did not report a matched share: $(grep -o '<text id="matched"[^<]*' "$T/driven.dom")"
grep -q 'id="details"[^>]*>main in [^<]*: [0-9.]* [KMG]*i*B (' "$T/driven.dom" ||
	fail_now "hover did not fill the details line: $(grep -o '<text id="details"[^<]*' "$T/driven.dom")"
grep -q 'id="reset" class="button"' "$T/driven.dom" || fail_now "zooming did not show the reset button"
echo "script: $(grep -o '<text id="matched"[^<]*' "$T/driven.dom" | sed 's/.*>//'); details: $(
	grep -o '<text id="details"[^<]*' "$T/driven.dom" | sed 's/.*>//')"

mkdir -p "$BUILD" && cp "$PNG" "$BUILD/flamegraph-seed.png" && cp "$SVG" "$BUILD/flamegraph-seed.svg"
echo "kept $BUILD/flamegraph-seed.png"
echo "PASS: flame graph rendered by $($CHROMIUM --version 2> /dev/null | head -n 1)"
exit 0
