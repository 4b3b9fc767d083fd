#!/bin/bash
# Installs everything dwleak's build, tests and demos need on a fresh Debian 12
# machine (run as root).  Idempotent: when every package is already there it
# does nothing, otherwise it runs apt-get update and installs what is missing.
set -euo pipefail

packages=(
	build-essential clang llvm libclang-rt-14-dev	# compilers; libFuzzer runtime
	lld						# links an aarch64 library built with branch protection (tests/tables_arm64.sh)
	libbpf-dev bpftool				# BPF skeletons and loading
	libelf-dev libdw-dev elfutils			# ELF and DWARF CFI
	libiberty-dev					# cplus_demangle: C++ and Rust names
	libzstd-dev zlib1g-dev zstd xz-utils		# compressed sections, MiniDebugInfo
	nettle-dev					# SHA-256: table cache keys
	pkg-config binutils make coreutils time	# build and testdata (objcopy, strip, nm); /usr/bin/time measures memory in tests
	libtcmalloc-minimal4 libgoogle-perftools4 libjemalloc2 libmimalloc2.0	# allocators to trace
	python3 python3.11 perl bpftrace		# test targets and cross-checks (python3 runs the checkers)
	valgrind					# memcheck: the leak check's oracle (tests/leak_check.sh, tests/oracle_memcheck.sh)
	jq sqlite3 curl openssl gawk git		# Debian programs checked against memcheck (tests/oracle_memcheck.sh)
	libc6-dbg					# libc's local symbols (__libc_start_call_main) the tests and demo name
	chromium					# renders the svg report (tests/flamegraph_render.sh)
	golang-go					# go tool pprof reads --format pprof and the agent's /debug/pprof/heap; the cgo test program
	libmicrohttpd-dev				# the agent's HTTP server (agent/http.c): GNU libmicrohttpd
	prometheus					# promtool checks the agent's /metrics; the server scrapes the agent (tests/agent_http.sh)
	systemd						# systemd-analyze verify checks dist/dwleak-agent.service (works without systemd as PID 1)
	jq						# a command whose stdout is piped (tests/cmd_exit_status.sh)
	redis-server redis-tools			# a real service under load: dwleak -p loads its library into it (tests/inject_trace.sh, bench/run_redis_bench.sh)
	curl wget gnupg git openssh-client procps	# tests/preload_no_hang.sh runs them under the preload library (curl, wget, gpg, git over https, ps once hung there)
	libdebuginfod-dev				# reports fetch missing debug information by build id (report/symbolize.c)
	debuginfod					# a local server for tests/debuginfod.sh
	help2man man-db					# dwleak(1) from --help (make man); man renders it in tests/man_page.sh
	bash-completion					# what completion/dwleak runs in (tests/completion.sh)
	debhelper dpkg-dev lintian			# make deb: dpkg-buildpackage with dh, then lintian
	gcc-aarch64-linux-gnu g++-aarch64-linux-gnu	# make ARCH=arm64 (tests/arm64_build.sh), with the arm64 -dev packages below
	libelf-dev:arm64 libdw-dev:arm64 libzstd-dev:arm64 zlib1g-dev:arm64 nettle-dev:arm64
	libbpf-dev:arm64 libmicrohttpd-dev:arm64 libdebuginfod-dev:arm64 libiberty-dev:arm64	# dwleak itself for arm64
)

# Packages the tests need as files, not installed: busybox-static conflicts
# with Debian's busybox (which a system may need), so its .deb is only
# downloaded here, and tests/cmd_exit_status.sh unpacks it where it runs.
# The arm64 ones are Debian's own arm64 builds, whose call-frame
# information tests/tables_arm64.sh compiles and checks against libdw on
# this x86 host (issue 26); fetched through multiarch (dpkg
# --add-architecture arm64), nothing from elsewhere.
DEB_DIR=${DWLEAK_DEB_DIR:-/var/cache/dwleak/debs}
debs=(busybox-static libc6:arm64 libstdc++6:arm64 python3.11-minimal:arm64 perl-base:arm64 libperl5.36:arm64)

# The file name apt-get download gives package D (PKG or PKG:ARCH), as a glob.
deb_glob() {
	case $1 in
	*:*) echo "$DEB_DIR/${1%%:*}_*_${1#*:}.deb" ;;
	*) echo "$DEB_DIR/${1}_*.deb" ;;
	esac
}

# pkg_installed, arm64_enable
# shellcheck source=.ci/apt_lib.sh
. "$(dirname "$0")/apt_lib.sh"

# Downloads each of debs into DEB_DIR unless a .deb of it is there.
debs_fetch() {
	local d
	for d in "${debs[@]}"; do
		compgen -G "$(deb_glob "$d")" > /dev/null && continue
		[[ $d != *:arm64 ]] || arm64_enable
		mkdir -p "$DEB_DIR"
		# apt-get download writes to the current directory; as root it
		# warns that _apt cannot write there, which is harmless
		(cd "$DEB_DIR" && apt-get download -q "$d" 2>&1) | grep -v '^W: Download is performed unsandboxed' || true
		# package lists never fetched, or stale: once more after an update
		if ! compgen -G "$(deb_glob "$d")" > /dev/null; then
			apt-get update -q
			(cd "$DEB_DIR" && apt-get download -q "$d")
		fi
		compgen -G "$(deb_glob "$d")" > /dev/null || { echo "deps: cannot download $d" >&2; exit 2; }
		echo "deps: downloaded $d into $DEB_DIR"
	done
	if ! compgen -G "$DEB_DIR/linux-image-*-arm64_*_arm64.deb" > /dev/null; then
		d=$(arm64_kernel_deb "$DEB_DIR") || { echo "deps: cannot download the arm64 kernel package" >&2; exit 2; }
		echo "deps: downloaded $(basename "$d") into $DEB_DIR"
	fi
}

missing=()
for p in "${packages[@]}"; do
	pkg_installed "$p" || missing+=("$p")
done
missing_debs=()
for d in "${debs[@]}"; do
	compgen -G "$(deb_glob "$d")" > /dev/null || missing_debs+=("$d")
done
# the arm64 kernel image (its BTF: the arm64 build's vmlinux.h; the guest
# of make check-arm64 boots it), whose name changes with each kernel
compgen -G "$DEB_DIR/linux-image-*-arm64_*_arm64.deb" > /dev/null || missing_debs+=(linux-image-arm64)
if [ ${#missing[@]} -eq 0 ] && [ ${#missing_debs[@]} -eq 0 ]; then
	echo "deps: all ${#packages[@]} packages already installed, ${#debs[@]} .deb files in $DEB_DIR"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing ${missing[*]} ${missing_debs[*]}; run as root to install them" >&2
	exit 2
fi
if [ ${#missing[@]} -eq 0 ]; then
	debs_fetch
	exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# an arm64 package needs the architecture added first (multiarch)
if [[ " ${missing[*]}" == *:arm64* ]]; then
	arm64_enable
fi
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
debs_fetch
