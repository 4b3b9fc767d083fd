#!/bin/bash
# Checks that every test program exists and is what its name claims:
# stripped ones have no .symtab, split ones carry a matching debuglink and
# build id, minidebuginfo holds an xz ELF of function symbols, static-pie is
# a DYN without INTERP, and the seed variants run and exit.
set -uo pipefail
td=${TESTDATA:?}
# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"
has_section() { local s; s=$(readelf -SW "$1" 2>/dev/null); grep -q " $2 " <<< "$s"; }
build_id() { readelf -n "$1" 2>/dev/null | awk '/Build ID/ { print $3 }'; }

for f in seed seed_malloc seed_O0_fp seed_O2 seed_O2_stripped seed_O2_stripped.debug \
	seed_O2_nodebug seed_clang_O2 seed_O3_lto seed_static_pie seed_minidebuginfo \
	seed_malloc_O0_fp seed_malloc_O2 libdlleak.so libdlleak_split.so libdlleak_split.so.debug \
	threads dlopen_main signal_leak deep_recursion clean \
	threads_clang dlopen_main_clang signal_leak_clang deep_recursion_clang clean_clang \
	forker sig_in_malloc leak_layout leak_kinds static_run oracle_sizes oracle_freed oracle_dead_reg \
	arena_probe supp_leaks agent_service; do
	[ -f "$td/$f" ] || fail "$f missing"
	[ -n "$(build_id "$td/$f")" ] || fail "$f has no build id"
done

# Unstripped builds carry symbols and DWARF.
for f in seed_O0_fp seed_O2 seed_clang_O2 seed_O3_lto seed_static_pie libdlleak.so threads; do
	has_section "$td/$f" .symtab || fail "$f: no .symtab"
	has_section "$td/$f" .debug_info || fail "$f: no .debug_info"
done

# Stripped builds carry neither.
for f in seed_O2_stripped seed_O2_nodebug seed_minidebuginfo libdlleak_split.so; do
	has_section "$td/$f" .symtab && fail "$f: still has .symtab"
	has_section "$td/$f" .debug_info && fail "$f: still has .debug_info"
	has_section "$td/$f" .eh_frame || fail "$f: lost .eh_frame"
done
has_section "$td/seed_O2_nodebug" .gnu_debuglink && fail "seed_O2_nodebug: has a debuglink"

# an aarch64 library whose CFI signs return addresses
file "$td/libpac_a64.so" | grep -q 'shared object, ARM aarch64' || fail "libpac_a64.so: not an aarch64 shared object"
readelf --debug-dump=frames "$td/libpac_a64.so" 2>/dev/null | grep DW_CFA_AARCH64_negate_ra_state > /dev/null ||
	fail "libpac_a64.so: its CFI never signs a return address"

# static_run: static (no INTERP, no NEEDED) and without symbols, so no
# object a process of it maps names malloc; it runs and exits as told.
has_section "$td/static_run" .symtab && fail "static_run: has .symtab"
grep -q INTERP <<< "$(readelf -lW "$td/static_run" 2>/dev/null)" && fail "static_run: has INTERP"
[ -n "$(readelf -sW --dyn-syms "$td/static_run" 2>/dev/null | grep -w malloc)" ] && fail "static_run: names malloc"
"$td/static_run" --exit 5
[ $? -eq 5 ] || fail "static_run --exit 5 did not exit 5"

# Split builds: debuglink names the debug file, build ids agree, the debug
# file has the DWARF, and its .text is NOBITS.
for pair in seed_O2_stripped:seed_O2 libdlleak_split.so:libdlleak.so; do
	f=${pair%%:*} twin=${pair#*:}
	link=$(readelf -p .gnu_debuglink "$td/$f" 2>/dev/null | awk '/\[ *0\]/ { print $3 }')
	[ "$link" = "$f.debug" ] || fail "$f: debuglink is '$link', want '$f.debug'"
	[ "$(build_id "$td/$f")" = "$(build_id "$td/$f.debug")" ] || fail "$f: build id differs from $f.debug"
	[ "$(build_id "$td/$f")" = "$(build_id "$td/$twin")" ] || fail "$f: build id differs from $twin"
	has_section "$td/$f.debug" .debug_info || fail "$f.debug: no .debug_info"
	grep ' \.text ' <<< "$(readelf -SW "$td/$f.debug")" | grep -c NOBITS > /dev/null || fail "$f.debug: .text is not NOBITS"
done
[ "$(build_id "$td/seed_O2_nodebug")" = "$(build_id "$td/seed_O2")" ] ||
	fail "seed_O2_nodebug: build id differs from seed_O2"

# MiniDebugInfo: .gnu_debugdata is xz holding an ELF whose .symtab has the
# program's own functions (not the dynamic ones) and no DWARF.
md=$(mktemp -d)
trap 'rm -rf "$md"' EXIT
if objcopy --dump-section .gnu_debugdata="$md/d.xz" "$td/seed_minidebuginfo" "$md/junk" 2>/dev/null &&
	xz -dc "$md/d.xz" > "$md/d.elf" 2>/dev/null; then
	nm "$md/d.elf" > "$md/syms" 2>&1 || fail "minidebuginfo: inner ELF has no symbols"
	for sym in _ZN7LeakLib14slowMemoryLeakEv _Z6callerv main; do
		grep -q " [Tt] $sym\$" "$md/syms" || fail "minidebuginfo: no function symbol $sym"
	done
	has_section "$md/d.elf" .debug_info && fail "minidebuginfo: inner ELF has DWARF"
	[ "$(build_id "$td/seed_minidebuginfo")" = "$(build_id "$td/seed_O2")" ] ||
		fail "seed_minidebuginfo: build id differs from seed_O2"
else
	fail "seed_minidebuginfo: no xz-compressed .gnu_debugdata"
fi

# static-pie: position independent, no interpreter, no dynamic libraries.
grep -q 'Type:.*DYN' <<< "$(readelf -hW "$td/seed_static_pie")" || fail "seed_static_pie: not DYN"
grep -q INTERP <<< "$(readelf -lW "$td/seed_static_pie" 2>/dev/null)" && fail "seed_static_pie: has INTERP"
grep -q NEEDED <<< "$(readelf -dW "$td/seed_static_pie")" && fail "seed_static_pie: has NEEDED"
# The other programs are ordinary dynamically linked PIEs.
grep -q INTERP <<< "$(readelf -lW "$td/seed_O2")" || fail "seed_O2: no INTERP"

# Frame pointers: the -O0 fp build sets up rbp in slowMemoryLeak, -O2 does not.
fn_asm() { objdump -d --no-show-raw-insn "$1" | awk -v f="<$2>:" '$2 == f { p = 1; next } p && /^$/ { exit } p'; }
# (Captured first: grep -q closing the pipe early would trip pipefail.)
o0_leak=$(fn_asm "$td/seed_O0_fp" _ZN7LeakLib14slowMemoryLeakEv)
o2_leak=$(fn_asm "$td/seed_O2" _ZN7LeakLib14slowMemoryLeakEv)
malloc_leak=$(fn_asm "$td/seed_malloc_O2" _ZN7LeakLib14slowMemoryLeakEv)
recurse_asm=$(fn_asm "$td/deep_recursion" recurse)
grep -q 'mov *%rsp,%rbp' <<< "$o0_leak" ||
	fail "seed_O0_fp: slowMemoryLeak does not set up a frame pointer"
grep -q 'mov *%rsp,%rbp' <<< "$o2_leak" &&
	fail "seed_O2: slowMemoryLeak sets up a frame pointer"
# The leak is really there: operator new[] / malloc are called.
grep -q 'call.*_Znam' <<< "$o2_leak" || fail "seed_O2: slowMemoryLeak does not call operator new[]"
grep -q 'call.*malloc' <<< "$malloc_leak" || fail "seed_malloc_O2: slowMemoryLeak does not call malloc"
# deep_recursion really recurses (no tail call or loop).
grep -q 'call.*<recurse>' <<< "$recurse_asm" || fail "deep_recursion: recurse() does not call itself"

# Every program runs a few short iterations and exits 0.
for f in seed seed_malloc seed_O0_fp seed_O2 seed_O2_stripped seed_O2_nodebug seed_clang_O2 \
	seed_O3_lto seed_static_pie seed_minidebuginfo seed_malloc_O0_fp seed_malloc_O2; do
	out=$(timeout 10 "$td/$f" --iterations 2 --interval-ms 1 2>&1) || fail "$f: exit $?"
	[[ $out == *"In caller"* ]] || fail "$f: did not print 'In caller'"
done
for f in threads dlopen_main signal_leak deep_recursion clean; do
	for v in "$f" "${f}_clang"; do
		timeout 10 "$td/$v" --iterations 3 --interval-ms 1 > /dev/null 2>&1 || fail "$v: exit $?"
	done
done
timeout 10 "$td/dlopen_main" --lib "$td/libdlleak_split.so" --iterations 2 --interval-ms 1 > /dev/null ||
	fail "dlopen_main --lib libdlleak_split.so: exit $?"

check_finish "all testdata checks passed"
