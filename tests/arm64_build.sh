#!/bin/bash
# `make ARCH=arm64` on this x86 host (issue 26): what of dwleak builds for
# arm64 today compiles with Debian's cross compiler, warnings as errors,
# into aarch64 executables (vm/check_arm64.sh runs them in the arm64
# guest, `make check-arm64`, which CI does not run: it takes ~25 minutes
# the first time).  The branch-protected test program really signs its
# return addresses (paciasp in its code), and dwleak's table for it, made
# here, marks the rows after each paciasp signed: the case the guest's
# walk must strip is there.
set -uo pipefail
: "${DWLEAK:?path to the dwleak binary}" "${ROOT:?the source tree}"

# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"
export DWLEAK_NO_CACHE=1

command -v aarch64-linux-gnu-gcc > /dev/null ||
	fail_now "no aarch64-linux-gnu-gcc: run .ci/deps.sh (or vm/arm64.sh deps)"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

if ! make -s -C "$ROOT" ARCH=arm64 BUILD="$T/build" arm64 > "$T/make.out" 2>&1; then
	sed 's/^/    /' "$T/make.out" | tail -20
	fail_now "make ARCH=arm64 failed"
fi
for exe in tables_verify walk_a64 stop_deep stop_deep_pac seed_O2 stop_at_malloc.so; do
	f=$T/build/arm64/$exe
	if [ ! -x "$f" ]; then
		fail "$exe: not built"
	elif readelf -h "$f" | grep -q '^ *Machine: *AArch64$'; then
		pass "$exe: an aarch64 $(readelf -h "$f" | sed -n 's/^ *Type: *\([A-Z]*\).*/\1/p') object"
	else
		fail "$exe: not an aarch64 object: $(readelf -h "$f" | grep Machine)"
	fi
done

pac=$T/build/arm64/stop_deep_pac
# the functions that call out (compare, level2, stop_here) sign
nsign=$(aarch64-linux-gnu-objdump -d "$pac" | grep -c 'paciasp')
if [ "$nsign" -ge 3 ]; then
	pass "stop_deep_pac: $nsign paciasp in its code"
else
	fail "stop_deep_pac: $nsign paciasp, want >= 3: built without -mbranch-protection=standard?"
fi
signed=$("$DWLEAK" tables "$pac" 2> "$T/tables.err" | grep -c ' signed')
if [ "$signed" -ge 3 ]; then
	pass "stop_deep_pac: dwleak's table marks $signed rows' return addresses signed"
else
	fail "stop_deep_pac: $signed rows signed in dwleak's table, want >= 3: $(head -3 "$T/tables.err")"
fi
check_finish
