#!/bin/bash
# Installs everything dwleak's build, tests and demos need on a fresh Debian 12
# machine (run as root).  Idempotent: when every package is already there it
# does nothing, otherwise it runs apt-get update and installs what is missing.
set -euo pipefail

packages=(
	build-essential clang llvm libclang-rt-14-dev	# compilers; libFuzzer runtime
	libbpf-dev bpftool				# BPF skeletons and loading
	libelf-dev libdw-dev elfutils			# ELF and DWARF CFI
	libiberty-dev					# cplus_demangle: C++ and Rust names
	libzstd-dev zlib1g-dev zstd xz-utils		# compressed sections, MiniDebugInfo
	nettle-dev					# SHA-256: table cache keys
	pkg-config binutils make coreutils time	# build and testdata (objcopy, strip, nm); /usr/bin/time measures memory in tests
	libtcmalloc-minimal4 libgoogle-perftools4 libjemalloc2 libmimalloc2.0	# allocators to trace
	python3 python3.11 perl bpftrace		# test targets and cross-checks (python3 runs the checkers)
	valgrind					# memcheck: the leak check's oracle (tests/leak_check.sh)
	libc6-dbg					# libc's local symbols (__libc_start_call_main) the tests and demo name
	chromium					# renders the svg report (tests/flamegraph_render.sh)
	golang-go					# go tool pprof reads --format pprof; the cgo test program
	curl wget gnupg git openssh-client procps	# tests/preload_no_hang.sh runs them under the preload library (curl, wget, gpg, git over https, ps once hung there)
)

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#packages[@]} packages already installed"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing ${missing[*]}; run as root to install them" >&2
	exit 2
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
