#!/bin/bash
# arm64 tables on this x86 host (issue 26's first step: a file format
# question).  Debian 12's own arm64 builds of libc, libstdc++, python3.11
# and perl (.ci/deps.sh downloads their .debs through multiarch; unpacked
# here with dpkg-deb -x) are compiled by `dwleak tables --verify` and every
# row checked against libdw's reading of the same CFI (its aarch64
# backend): no mismatch, at least 99.9% of CFI-covered code unwindable,
# libc and libstdc++ no bigger than 6 bytes a row.  Then pointer
# authentication, which Debian 12 does not build with: testdata's
# libpac_a64.so, compiled for aarch64 with -mbranch-protection=standard
# (clang, linked by lld), verifies too and marks its return addresses
# signed exactly from the instruction after each paciasp on
# (llvm-objdump's disassembly is the oracle: libdw keeps nothing of
# DW_CFA_AARCH64_negate_ra_state), a leaf without paciasp never.
set -uo pipefail
: "${DWLEAK:?path to the dwleak binary}" "${TESTDATA:?dir of built test programs}"

# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"
export DWLEAK_NO_CACHE=1 # what the compiler makes now, not a cached table

DEB_DIR=${DWLEAK_DEB_DIR:-/var/cache/dwleak/debs}
MIN_COVERAGE=99.900
MAX_BYTES_PER_ROW=6.00
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

root=$T/root
mkdir -p "$root"
for p in libc6 libstdc++6 python3.11-minimal perl-base libperl5.36; do
	deb=$(compgen -G "$DEB_DIR/${p}_*_arm64.deb" | head -n 1)
	[ -n "$deb" ] || fail_now "no arm64 .deb of $p in $DEB_DIR: run .ci/deps.sh (it downloads them)"
	dpkg-deb -x "$deb" "$root" || fail_now "dpkg-deb -x $deb failed"
done

LIBC=$root/lib/aarch64-linux-gnu/libc.so.6
LIBSTDCXX=$root/usr/lib/aarch64-linux-gnu/libstdc++.so.6
files=("$LIBC" "$LIBSTDCXX" "$root/usr/bin/python3.11" "$root/usr/bin/perl"
	"$root/usr/lib/aarch64-linux-gnu/libperl.so.5.36")
for f in "${files[@]}"; do
	name=${f#"$root"}
	if ! file -L "$f" | grep -q 'ARM aarch64'; then
		fail "$name: not an aarch64 object: $(file -L "$f")"
		continue
	fi
	out=$("$DWLEAK" tables --verify "$f" 2>&1)
	rc=$?
	line=$(grep "^verify $f: " <<< "$out")
	if [ -z "$line" ]; then
		fail "$name: no summary line (exit $rc): $(tail -n 3 <<< "$out")"
		continue
	fi
	mism=$(sed -n 's/.* mismatches=\([0-9]*\)$/\1/p' <<< "$line")
	cov=$(sed -n 's/.* coverage=\([0-9.]*\)% .*/\1/p' <<< "$line")
	bpr=$(sed -n 's/.* bytes_per_row=\([0-9.]*\) .*/\1/p' <<< "$line")
	rows=$(sed -n 's/.* rows=\([0-9]*\) .*/\1/p' <<< "$line")
	if [ "$mism" != 0 ] || [ $rc -ne 0 ]; then
		fail "$name: ${mism:-?} mismatches (exit $rc)"
		grep '^mismatch ' <<< "$out" | head -n 5 | sed 's/^/    /'
		continue
	fi
	[ "${rows:-0}" -gt 1000 ] || { fail "$name: only ${rows:-no} rows"; continue; }
	awk -v c="$cov" -v m="$MIN_COVERAGE" 'BEGIN { exit !(c + 0 >= m + 0) }' ||
		{ fail "$name: coverage $cov% < $MIN_COVERAGE%"; continue; }
	if [ "$f" = "$LIBC" ] || [ "$f" = "$LIBSTDCXX" ]; then
		awk -v b="$bpr" -v m="$MAX_BYTES_PER_ROW" 'BEGIN { exit !(b + 0 <= m + 0) }' ||
			{ fail "$name: $bpr bytes per row > $MAX_BYTES_PER_ROW"; continue; }
	fi
	pass "arm64 $name: $rows rows, 0 mismatches, coverage $cov%, $bpr bytes per row"
done

# the rows name arm64's registers: a prologue's "stp x29, x30, [sp, #-N]!"
# leaves the CFA at sp+N, x29 at CFA-N and the return address above it
"$DWLEAK" tables "$LIBC" > "$T/libc.rows" 2>&1 || fail "dwleak tables $LIBC failed: $(tail -2 "$T/libc.rows")"
if grep -q 'rbp=\|rsp' "$T/libc.rows"; then
	fail "libc's arm64 rows name x86 registers: $(grep -m2 'rbp=\|rsp' "$T/libc.rows")"
elif ! grep -Eq '^  0x[0-9a-f]+-0x[0-9a-f]+  cfa=sp\+([0-9]+) x29=\[cfa-\1\] ra=\[cfa-[0-9]+\]$' "$T/libc.rows"; then
	fail "no frame-record row in libc's arm64 table: $(sed -n 7,9p "$T/libc.rows")"
else
	pass "libc's arm64 rows: $(grep -Em1 'cfa=sp\+[0-9]+ x29=\[' "$T/libc.rows" | sed 's/^ *//')"
fi

# pointer authentication: testdata/pac_a64.c, built for aarch64 with
# -mbranch-protection=standard
PAC=$TESTDATA/libpac_a64.so
[ -f "$PAC" ] || fail_now "$PAC is missing (make testdata)"
out=$("$DWLEAK" tables --verify "$PAC" 2>&1)
grep -q "^verify $PAC: .* mismatches=0$" <<< "$out" &&
	pass "libpac_a64.so (-mbranch-protection=standard): $(grep -o 'rows=.*' <<< "$out")" ||
	fail "libpac_a64.so does not verify: $(tail -3 <<< "$out")"
"$DWLEAK" tables "$PAC" > "$T/pac.rows" 2>&1
llvm-objdump -d --mattr=+pauth "$PAC" > "$T/pac.dis" 2>&1 || fail_now "llvm-objdump failed: $(head -2 "$T/pac.dis")"
python3 - "$T/pac.rows" "$T/pac.dis" << 'PY'
import re, sys
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"  0x([0-9a-f]+)-0x([0-9a-f]+)  (.*)$", line)
    if m:
        rows.append((int(m[1], 16), int(m[2], 16), m[3]))
def rule(a):
    for s, e, r in rows:
        if s <= a < e:
            return r
    return None
funcs, cur, bad = {}, None, []
for line in open(sys.argv[2]):
    m = re.match(r"([0-9a-f]+) <(\w+)>:", line)
    if m:
        cur = m[2]
        funcs[cur] = {"start": int(m[1], 16), "pac": []}
        continue
    m = re.match(r"\s+([0-9a-f]+):.*\tpaciasp", line)
    if m and cur:
        funcs[cur]["pac"].append(int(m[1], 16))
checked = 0
for name in ("leaf", "mid", "outer"):
    f = funcs.get(name)
    if not f:
        bad.append(f"{name} not in the disassembly")
        continue
    if name == "leaf":
        r = rule(f["start"])
        if f["pac"] or r is None or "signed" in r:
            bad.append(f"leaf: paciasp {f['pac']}, rule {r!r}: want none and unsigned")
        continue
    if len(f["pac"]) != 1:
        bad.append(f"{name}: {len(f['pac'])} paciasp, want 1")
        continue
    a = f["pac"][0]
    before, after = rule(a), rule(a + 4)
    if before is None or "signed" in before or after is None or not after.endswith(" signed"):
        bad.append(f"{name}: at paciasp {a:#x} {before!r}, after it {after!r}: want unsigned, then signed")
    checked += 1
if bad:
    print("FAIL: " + "; ".join(bad))
    sys.exit(1)
print(f"ok: signed return addresses from the instruction after paciasp in {checked} functions, none in the leaf")
PY
[ $? -eq 0 ] || fail "the signing state does not follow paciasp (rows: $(grep -c '^  0x' "$T/pac.rows"))"

check_finish "arm64 tables verified against libdw"
