#!/bin/bash
# `--format pprof` read back by Debian's `go tool pprof` (issue 4):
#  a. the profile the unit-test driver writes (build/asan/tests/test_pprof
#     --write): -traces shows the seed chain malloc <- operator new <-
#     LeakLib::slowMemoryLeak <- caller() (inline) <- main with 1000 B
#     (inuse_space) and 25 allocations (inuse_objects); -top lists the
#     functions; a stack of nameless frames in $TESTDATA/seed_O2 is
#     re-symbolized by pprof itself from the file (DWARF line table) to the
#     same source line as addr2line, which checks the mapping's bounds and
#     file offset.
#  b. a real run
#     `dwleak --format pprof -o out.pb.gz -- seed_O2 --iterations 25`,
#     the same checks on what pprof prints, and the mapping of seed_O2
#     carries its build id.
# Exit 0 pass, 1 fail, 77 skip (only when golang-go cannot be installed).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$BUILD/asan/dwleak}
TESTDATA=${TESTDATA:-$BUILD/testdata}
DRIVER=$BUILD/asan/tests/test_pprof

T=$(mktemp -d /tmp/dwleak-pprof-read-XXXXXX)
trap 'rm -rf "$T"' EXIT
# go keeps a build cache even for `go tool`; no network is needed.
export HOME=$T GOCACHE=$T/gocache GOFLAGS= GOTOOLCHAIN=local GOPROXY=off
# pprof symbolizes through addr2line/llvm-symbolizer only in google/pprof;
# keep it from looking anywhere but the mapping's own path.
export PPROF_BINARY_PATH=$T/none

# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"

if ! command -v go > /dev/null 2>&1; then
	if [ "$(id -u)" = 0 ]; then
		echo "installing golang-go for go tool pprof"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends golang-go \
			> "$T/apt.log" 2>&1 || tail -n 5 "$T/apt.log"
	fi
	if ! command -v go > /dev/null 2>&1; then
		echo "skip: go tool pprof not available and golang-go could not be installed (.ci/deps.sh)"
		exit 77
	fi
fi
[ -x "$DRIVER" ] || fail_now "$DRIVER is missing (make check)"

# pprof_run OUT ARGS...: go tool pprof ARGS into OUT; fails the test on error.
pprof_run() {
	local out=$1
	shift
	if ! go tool pprof "$@" > "$out" 2> "$out.err"; then
		fail "go tool pprof $* failed: $(tail -n 3 "$out.err")"
		return 1
	fi
}

# check_traces TRACES WANT_VALUE [MODULE]: the -traces block holding
# LeakLib::slowMemoryLeak is the seed chain and shows WANT_VALUE.
check_traces() {
	python3 - "$@" << 'PY'
import re, sys
path, want = sys.argv[1], sys.argv[2]
text = open(path).read()
blocks = text.split('-----------+-------------------------------------------------------')[1:]
stacks = []
for b in blocks:
    value, frames = None, []
    for line in b.splitlines():
        m = re.match(r'^\s*(\d[\d.]*[kMGT]?B?)\s{2,}(\S.*)$', line)
        if m and value is None and not frames:
            value, frames = m.group(1), [m.group(2).strip()]
        elif frames and re.match(r'^\s{6,}\S', line):
            frames.append(line.strip())
    if frames:
        stacks.append((value, frames))
seed = [s for s in stacks if 'LeakLib::slowMemoryLeak' in s[1]]
if len(seed) != 1:
    print('FAIL: %d stacks through LeakLib::slowMemoryLeak in -traces:\n%s' % (len(seed), text))
    sys.exit(1)
value, frames = seed[0]
chain = [f for f in frames if f != 'caller() (inline)' and f != 'caller()']
want_chain = ['malloc', 'operator new(unsigned long)', 'LeakLib::slowMemoryLeak', 'main']
bad = []
if value != want:
    bad.append('value %s, want %s' % (value, want))
if chain[:4] != want_chain:
    bad.append('frames %s, want %s (caller() optional)' % (frames, want_chain))
if 'caller() (inline)' in frames and frames.index('caller() (inline)') != frames.index('main') - 1:
    bad.append('caller() (inline) is not just inside main: %s' % frames)
if bad:
    print('FAIL: ' + '; '.join(bad) + '\n' + text)
    sys.exit(1)
print('seed stack in -traces: %s  %s' % (value, ' <- '.join(frames)))
PY
}

# check_top TOP: -top lists the seed chain's functions.
check_top() {
	local f missing=
	for f in malloc 'operator new(unsigned long)' LeakLib::slowMemoryLeak main; do
		grep -qF -- " $f" "$1" || missing="$missing '$f'"
	done
	if [ -n "$missing" ]; then
		fail "-top does not list$missing:"
		cat "$1"
	else
		pass "-top lists malloc, operator new(unsigned long), LeakLib::slowMemoryLeak, main"
	fi
}

# check_profile PB LABEL: the checks both modes share.
check_profile() {
	local pb=$1 label=$2
	pprof_run "$T/$label.traces" -traces -sample_index=inuse_space "$pb" || return
	pprof_run "$T/$label.objects" -traces -sample_index=inuse_objects "$pb" || return
	pprof_run "$T/$label.top" -top -nodecount=100 "$pb" || return
	pprof_run "$T/$label.raw" -raw "$pb" || return
	echo "--- go tool pprof -top ($label)"
	cat "$T/$label.top"
	echo "--- go tool pprof -traces ($label, seed stack)"
	if check_traces "$T/$label.traces" 1000B; then
		pass "$label: -traces shows the seed chain with 1000B (inuse_space)"
	else
		fail "$label: -traces (inuse_space)"
	fi
	if check_traces "$T/$label.objects" 25; then
		pass "$label: -traces shows the seed chain with 25 allocations (inuse_objects)"
	else
		fail "$label: -traces (inuse_objects)"
	fi
	grep -q '^Type: inuse_space' "$T/$label.top" || fail "$label: default sample type is not inuse_space"
	check_top "$T/$label.top"
}

# ---- a. the unit-test driver's profile ----

# ELF addresses inside LeakLib::slowMemoryLeak() and main of seed_O2, for
# frames without names that pprof must resolve from the file itself.
seed=$TESTDATA/seed_O2
args=()
if [ -x "$seed" ]; then
	leak=$(nm -C "$seed" | awk '$3 == "LeakLib::slowMemoryLeak()" { print $1 }')
	leak_addr=$(printf '0x%x' $((0x$leak + 4)))
	want_line=$(addr2line -e "$seed" "$leak_addr" | sed 's/ (discriminator.*//')
	args=("$seed" "$leak_addr")
fi
"$DRIVER" --write "$T/a.pb.gz" "${args[@]}" || fail "test_pprof --write failed"
if [ -s "$T/a.pb.gz" ]; then
	check_profile "$T/a.pb.gz" driver
	if [ ${#args[@]} -gt 0 ]; then
		# go tool pprof maps the address back through the mapping (start -
		# p_vaddr of the executable segment) and reads seed_O2's DWARF.
		got=$(grep -E "^ +[0-9]+: 0x[0-9a-f]+ M=[0-9]+ .*$(basename "$want_line")" "$T/driver.raw" |
		      grep -o '[^ ]*:[0-9]* s=' | head -n 1 | sed 's/ s=$//')
		if [ -n "$got" ] && [ "${want_line##*/}" = "${got##*/}" ]; then
			pass "pprof resolved the nameless seed_O2 frame $leak_addr to $got (addr2line: $want_line)"
		else
			fail "pprof resolved the nameless seed_O2 frame $leak_addr to '${got}', addr2line says $want_line"
			sed -n '/^Locations/,$p' "$T/driver.raw"
		fi
	fi
fi

# ---- b. a real run ----

if [ "$(id -u)" != 0 ]; then
	echo "note: not root, no real BPF run; only the driver's profile was read"
elif [ ! -x "$DWLEAK" ] || [ ! -x "$seed" ]; then
	fail "$DWLEAK or $seed is missing (make check)"
else
	if ! timeout 120 "$DWLEAK" --format pprof -o "$T/run.pb.gz" -- "$seed" --iterations 25 --interval-ms 10 \
		> "$T/run.out" 2> "$T/run.err"; then
		fail "dwleak --format pprof exited $?: $(tail -n 5 "$T/run.err")"
	elif ! gzip -t "$T/run.pb.gz" 2> /dev/null; then
		fail "dwleak --format pprof did not write a gzip file"
	else
		check_profile "$T/run.pb.gz" run
		bid=$(readelf -n "$seed" | awk '/Build ID/ { print $3 }')
		if grep -qE "^ *[0-9]+: .* $(readlink -f "$seed") $bid" "$T/run.raw" ||
		   grep -qE "^ *[0-9]+: .* [^ ]*/seed_O2 $bid" "$T/run.raw"; then
			pass "the seed_O2 mapping carries build id $bid"
		else
			fail "no seed_O2 mapping with build id $bid"
			sed -n '/^Mappings/,$p' "$T/run.raw"
		fi
	fi
fi

check_finish "pprof_read: all checks passed"
