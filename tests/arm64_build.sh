#!/bin/bash
# `make ARCH=arm64` on this x86 host (issue 26): dwleak itself and the
# guest's test programs compile with Debian's cross compiler, warnings as
# errors, into aarch64 executables, and dwleak's kernel program for arm64
# against the BTF of Debian's arm64 kernel (vm/check_arm64.sh runs them
# in the arm64 guest, `make check-arm64`, which CI does not run: it takes
# ~15 minutes the first time), its preload library among them.  The branch-protected test program really signs its
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

if ! make -s -j2 -C "$ROOT" ARCH=arm64 BUILD="$T/build" arm64 > "$T/make.out" 2>&1; then
	sed 's/^/    /' "$T/make.out" | tail -20
	fail_now "make ARCH=arm64 failed"
fi
for exe in tables_verify walk_a64 stop_deep stop_deep_pac seed_O2 seed_O2_pac seed_O2_stripped stop_at_malloc.so \
	leak_kinds mmap_ledger ledger tool/dwleak tool/libdwleak-preload.so; do
	f=$T/build/arm64/$exe
	if [ ! -x "$f" ]; then
		fail "$exe: not built"
	elif readelf -h "$f" | grep '^ *Machine: *AArch64$' > /dev/null; then
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
# the kernel program built for arm64: its pt_regs are arm64's (x0-x30,
# sp, pc, pstate), read by the aarch64 walk (walk_a64.bpf.h)
# (each tool's output in a file first: under pipefail, grep -q ending the
# pipe early would make the writer's SIGPIPE the pipeline's failure)
bo=$T/build/arm64/tool/dwleak.bpf.o
bpftool btf dump file "$bo" > "$T/bo.btf" 2>&1
llvm-objdump -t "$bo" > "$T/bo.syms" 2>&1
if [ ! -s "$bo" ]; then
	fail "dwleak.bpf.o: not built for arm64"
elif ! grep -A 12 "STRUCT 'user_pt_regs'" "$T/bo.btf" | grep "'pstate'" > /dev/null; then
	fail "dwleak.bpf.o: its BTF has no arm64 user_pt_regs (built for x86_64?)"
elif ! grep -q ' walk_a64_apply$' "$T/bo.syms"; then
	fail "dwleak.bpf.o: no walk_a64_apply: the aarch64 walk is not in it"
else
	pass "dwleak.bpf.o: an arm64 kernel program ($(grep -c ' F ' "$T/bo.syms") functions), the aarch64 walk in it"
fi
# the preload library for arm64: each site a function whose first
# instruction is `nop` (the kernel emulates a probed nop: no single step),
# its USDT note naming arm64's argument registers (the alloc site's sixth,
# x5, the return address x30 held at the library's entry), a semaphore
# each; and no function of it changes x29 (the frame pointer the walks
# start from at a site) but the C runtime's and libgcc's own, which run
# outside any allocator call
lib=$T/build/arm64/tool/libdwleak-preload.so
aarch64-linux-gnu-objdump -d "$lib" > "$T/lib.dis" 2>&1
readelf -n "$lib" > "$T/lib.notes" 2>&1
for site in dwleak_site_alloc dwleak_site_free; do
	first=$(awk -v s="<$site>:" '$2 == s { getline; print $2, $3; exit }' "$T/lib.dis")
	[ "$first" = "d503201f nop" ] && pass "arm64 library: $site starts with nop" ||
		fail "arm64 library: $site starts with '$first', want d503201f nop"
done
args=$(sed -n 's/^ *Arguments: //p' "$T/lib.notes" | paste -sd'|')
sems=$(grep -c 'Semaphore: 0x0*[1-9a-f]' "$T/lib.notes")
if [ "$args" = "8@x0 8@x1 8@x2 8@x3 8@x4 8@x5|8@x0 8@x1" ] && [ "$sems" = 2 ]; then
	pass "arm64 library: 2 USDT notes with arm64 arguments ($args), each with a semaphore"
else
	fail "arm64 library: notes' arguments '$args', $sems semaphores: want arm64 registers and 2"
fi
x29=$(awk '/^[0-9a-f]+ <.*>:$/ { f = $2 } /\t(mov|add|sub|ldp|ldr)\tx29,/ { print f }' "$T/lib.dis" | sort -u |
	grep -v -e '<_init>:' -e '<_fini>:' -e '<__do_global_dtors_aux>:' -e '<init_have_lse_atomics>:')
[ -z "$x29" ] && pass "arm64 library: no function of the library writes x29" || fail "arm64 library: x29 written in: $x29"
# what it imports: only what is audited for use inside an allocation
# (tests/preload_imports.txt, all of it, as tests/preload_no_hang.sh
# checks x86_64's)
aarch64-linux-gnu-nm -D --undefined-only "$lib" | awk '$1 == "U" { sub(/@.*/, "", $2); print $2 }' | sort > "$T/lib.imports"
grep -v -e '^#' -e '^\[arm64\]$' "$(dirname "$0")/preload_imports.txt" | sort > "$T/lib.audited"
extra=$(comm -23 "$T/lib.imports" "$T/lib.audited" | tr '\n' ' ')
[ -s "$T/lib.imports" ] && [ -z "$extra" ] &&
	pass "arm64 library: imports only the $(wc -l < "$T/lib.imports") functions audited for use inside an allocation" ||
	fail "arm64 library: imports ${extra:-nothing readable}, not audited for use inside an allocation"
# the stripped seed: no symbols of its own, a link to its debug file
st=$T/build/arm64/seed_O2_stripped
if readelf -S "$st" | grep '\.symtab' > /dev/null; then
	fail "seed_O2_stripped: still has .symtab"
elif ! readelf -S "$st" | grep '\.gnu_debuglink' > /dev/null; then
	fail "seed_O2_stripped: no .gnu_debuglink"
else
	pass "seed_O2_stripped: stripped, .gnu_debuglink to its debug file"
fi
check_finish
