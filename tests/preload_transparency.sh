#!/bin/bash
# libdwleak-preload.so changes nothing a program observes (issue 16):
#  a. the object: it exports exactly the functions it interposes and its
#     control block; its two sites are functions whose first instruction
#     is the 5-byte NOP 0f 1f 44 00 00, each with a .note.stapsdt note
#     (provider dwleak) and a semaphore; no instruction of its own code
#     writes rbp (the walk from a site relies on the caller's rbp);
#  b. idle (no dwleak): testdata/preload_probe (errno after success and
#     failure, malloc_usable_size, realloc edge cases, alignment, fork from
#     a threaded program, allocation in a signal handler, dlopen,
#     __libc_malloc, C++ new/delete with nothrow, aligned and throwing
#     forms, a constructor's allocation before main, 8 threads, syscall()
#     and prctl(), which the library defines itself) prints the
#     same lines and exits alike with and without the library, under
#     glibc, tcmalloc, jemalloc and mimalloc preloaded after it (for those
#     three, the checks the allocator passes on its own);
#  c. traced: under dwleak -- CMD, exact, with --sample-bytes, and with
#     --sample-bytes --leak-check (every block indexed in the process), at
#     the sites (the tracing line says preload), the same lines again; under
#     each allocator (the checks it passes alone); and with a seccomp
#     filter denying syscalls 335 and 336 (errno, kill) installed first;
#  d. a program that imports __libc_malloc (which the library cannot see)
#     is traced with uprobes instead, and dwleak says why;
#  e. a C program that dlopen()s a C++ library late (its C++ runtime in
#     the dlopen'ed scope only, where RTLD_NEXT does not look): its new[]
#     leaks (240 B in 10) are reported, through the sites and with
#     --no-preload alike, frame by frame.
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
T=$LT_TMP
LIBDIR=/usr/lib/x86_64-linux-gnu
lt_testdata preload_probe
LIB=$("$DWLEAK" preload) || { fail "dwleak preload found no library"; check_finish; }
CHECKS="dlerror errno usable realloc align fork signal dlopen libc cxx init threads syscall"

echo "== a. the object"
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDW]$/ { print $3 }' | sort > "$T/exports"
grep -o 'X(F_[A-Z_]*, "[^"]*"' "$ROOT/bpf/abi/preload.h" | sed 's/.*"\(.*\)"/\1/' | sort > "$T/want"
echo dwleak_preload_control >> "$T/want"
echo dwleak_injected_start >> "$T/want" # the injector's entry (target/inject.c)
# seen before a seccomp filter goes in (preload/seccomp_guard.c)
printf '%s\n' prctl syscall >> "$T/want"
sort -o "$T/want" "$T/want"
if diff -u "$T/want" "$T/exports" > "$T/exports.diff"; then
	pass "exports: the interposed functions, the control block, the injector's entry and the seccomp guard's prctl and syscall, nothing else"
else
	fail "exports differ from the interposed list:"; cat "$T/exports.diff"
fi
for site in dwleak_site_alloc dwleak_site_free; do
	bytes=$(objdump -d --no-addresses "$LIB" | awk -v s="<$site>:" '$1 == s { getline; print $1, $2, $3, $4, $5; exit }')
	[ "$bytes" = "0f 1f 44 00 00" ] && pass "$site starts with the 5-byte NOP" ||
		fail "$site starts with '$bytes', want 0f 1f 44 00 00"
done
notes=$(readelf -n "$LIB" | grep -c 'Provider: dwleak')
sems=$(readelf -n "$LIB" | grep -c 'Semaphore: 0x0*[1-9a-f]')
[ "$notes" = 2 ] && [ "$sems" = 2 ] && pass "2 USDT notes, provider dwleak, each with a semaphore" ||
	fail "$notes dwleak notes, $sems with a semaphore: want 2 and 2"
# (walk_regs_capture, preload/walk.c, reads rbp: the caller's, which the
# flag keeps for it to read)
rbp=$(objdump -d "$LIB" | awk '/^[0-9a-f]+ <.*>:$/ { f = $2 } /%rbp/ { print f }' | sort -u |
	grep -v -e '<__do_global_dtors_aux>:' -e '<deregister_tm_clones>:' -e '<register_tm_clones>:' -e '<frame_dummy>:' \
		-e '<walk_regs_capture>:')
[ -z "$rbp" ] && pass "no function of the library touches rbp (-ffixed-rbp)" || fail "rbp used in: $rbp"

echo "== b. idle: the same with and without the library"
for a in glibc: tcmalloc:libtcmalloc.so.4 jemalloc:libjemalloc.so.2 mimalloc:libmimalloc.so.2; do
	IFS=: read -r name so <<< "$a"
	alloc=${so:+$LIBDIR/$so}
	checks=
	for c in $CHECKS; do
		# a subshell, so that a check the allocator crashes on is not reported by bash
		(env ${alloc:+LD_PRELOAD=$alloc} "$PROG" "$c" > /dev/null 2>&1) 2> /dev/null && checks="$checks $c"
	done
	[ "$name" = glibc ] && [ "$checks" != " $CHECKS" ] && fail "glibc alone fails checks: wants all of $CHECKS, passes$checks"
	env ${alloc:+LD_PRELOAD=$alloc} "$PROG" --out "$T/$name.plain" $checks 2> /dev/null
	rc1=$?
	env LD_PRELOAD="$LIB${alloc:+:$alloc}" "$PROG" --out "$T/$name.lib" $checks 2> "$T/$name.lib.err"
	rc2=$?
	if [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ] || ! cmp -s "$T/$name.plain" "$T/$name.lib"; then
		fail "$name: exit $rc1 without the library, $rc2 with it; output differences:"
		diff "$T/$name.plain" "$T/$name.lib" | head -20
		head -5 "$T/$name.lib.err"
	else
		pass "$name: the same $(wc -l < "$T/$name.lib") lines, exit 0, with the library idle (checks:$checks)"
		echo "ok: $name: idle (checks:$checks)" >> "$T/checks.log"
	fi
done

if [ "$(id -u)" != 0 ]; then
	echo "skip: c, d and e need root for BPF"
	check_finish
fi
lt_require_bpf
echo "== c. traced at the sites"
# traced NAME ALLOC_LIB DWLEAK_OPTIONS... -- PROBE_ARGS...: the same lines as
# the untraced run of the same checks ($T/NAME.want)
traced() {
	local name=$1 alloc=$2 bin=$DWLEAK opts=() rc
	shift 2
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	[ -n "$alloc" ] && bin=$DWLEAK_PRELOAD
	env ${alloc:+LD_PRELOAD=$alloc} "$PROG" --out "$T/$name.want" "$@" 2> /dev/null
	env ${alloc:+LD_PRELOAD=$alloc} timeout -k 5 120 "$bin" "${opts[@]}" -t 3 -- "$PROG" --out "$T/$name.out" "$@" \
		> /dev/null 2> "$T/$name.err"
	rc=$?
	grep -q '^dwleak: tracing pid [0-9]* (preload, ' "$T/$name.err" ||
		fail "$name: not traced at the sites: $(grep -m1 'dwleak: tracing' "$T/$name.err")"
	if [ $rc -ne 0 ] || ! cmp -s "$T/$name.want" "$T/$name.out"; then
		fail "$name: dwleak exited $rc; output differences from the untraced run:"
		diff "$T/$name.want" "$T/$name.out" | head -20
		tail -5 "$T/$name.err"
	else
		pass "$name: the same $(wc -l < "$T/$name.out") lines traced at the sites"
	fi
}
lt_preload_dwleak
traced exact "" -- all
traced sampled "" --sample-bytes 4096 -- all
# sampled with a leak check: the library also indexes every block
traced indexed "" --sample-bytes 4096 --leak-check -- all
for a in tcmalloc:libtcmalloc.so.4 jemalloc:libjemalloc.so.2 mimalloc:libmimalloc.so.2; do
	IFS=: read -r name so <<< "$a"
	checks=$(sed -n 's/^ok: '"$name"': .*(checks: \(.*\))$/\1/p' "$T/checks.log")
	traced "exact_$name" "$LIBDIR/$so" -- $checks
	traced "sampled_$name" "$LIBDIR/$so" --sample-bytes 4096 -- $checks
	traced "indexed_$name" "$LIBDIR/$so" --sample-bytes 4096 --leak-check -- $checks
done
for mode in errno kill; do
	traced "seccomp_$mode" "" -- --seccomp $mode all
	traced "seccomp_${mode}_sampled" "" --sample-bytes 4096 -- --seccomp $mode all
	traced "seccomp_${mode}_indexed" "" --sample-bytes 4096 --leak-check -- --seccomp $mode all
done

echo "== d. a program that imports __libc_malloc"
lt_testdata preload_probe_libc
timeout -k 5 60 "$DWLEAK" -t 1 -- "$PROG" libc > /dev/null 2> "$T/libc.err"
rc=$?
[ $rc -eq 0 ] || fail "dwleak on preload_probe_libc exited $rc"
grep -q 'calls __libc_malloc, which the library does not interpose; tracing it with uprobes' "$T/libc.err" &&
	! grep -q '(preload, ' "$T/libc.err" && pass "traced with uprobes, and said why" ||
	fail "want a note and uprobes: $(grep '^dwleak' "$T/libc.err" | head -3)"

echo "== e. a C program that loads a C++ library late"
lt_testdata dlopen_main
for flag in "" --no-preload; do
	name=dlcxx${flag:+_uprobes}
	timeout -k 5 60 "$DWLEAK" $flag --format json -o "$T/$name.json" -t 0 -- "$PROG" \
		--lib "$TESTDATA/libdlleak_cxx.so" --iterations 10 --interval-ms 1 > /dev/null 2> "$T/$name.err"
	rc=$?
	[ $rc -eq 0 ] || fail "$name: dwleak exited $rc: $(tail -3 "$T/$name.err")"
done
grep -q '(preload, ' "$T/dlcxx.err" || fail "e: not traced at the sites"
lt_check "$T/dlcxx.json" "$T/dlcxx_uprobes.json" << 'PY'
def leak(rep):
    st = [s for s in rep["stacks"] if "dlleak_leak_one" in names(s)]
    return [(s["bytes"], s["allocations"], [(f["function"], f["elf_address"]) for f in s["frames"]]) for s in st]
a, b = leak(r), leak(json.load(open(ARGS[0])))
if len(a) != 1 or a[0][:2] != (240, 10):
    fail("at the sites: %s, want one stack of 240 B in 10" % a)
elif a != b:
    fail("the sites and uprobes differ:\n  %s\n  %s" % (a, b))
else:
    ok("240 B in 10 from dlleak_leak_one, the same frames both ways: " + " <- ".join(str(f[0]) for f in a[0][2][:4]))
PY

check_finish
