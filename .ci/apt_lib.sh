# Package helpers .ci/deps.sh and vm/arm64.sh share (source it; it sets no
# shell options and runs nothing).
#   pkg_installed P   true when package P is installed: P:ARCH that
#                     architecture's, a bare name the native one (or an
#                     arch-all one); with multiarch dpkg-query lists every
#                     architecture's instance under one name
#   arm64_enable      arm64's package lists, once: the architecture added
#                     (multiarch), then an update
#   arm64_kernel_deb DIR  the arm64 kernel image package linux-image-arm64
#                     depends on, downloaded into DIR unless there; prints its
#                     path (the guest boots it; the arm64 build takes the
#                     kernel's BTF out of it)
# shellcheck shell=bash

pkg_installed() {
	local want
	want=$(dpkg --print-architecture)
	[[ $1 == *:* ]] && want=${1#*:}
	dpkg-query -W -f='${Status} ${Architecture}\n' "$1" 2> /dev/null |
		grep -Eqx "install ok installed ($want|all)"
}

arm64_enable() {
	dpkg --print-foreign-architectures | grep -qx arm64 && return 0
	dpkg --add-architecture arm64
	apt-get update -q
}

arm64_kernel_deb() {
	local dir=$1 dep deb
	arm64_enable
	dep=$(apt-cache depends linux-image-arm64:arm64 | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-arm64\).*/\1/p' | head -1)
	if [ -z "$dep" ]; then
		echo "cannot tell which kernel linux-image-arm64:arm64 depends on (apt-get update?)" >&2
		return 1
	fi
	deb=$(compgen -G "$dir/${dep}_*_arm64.deb" | head -1)
	if [ -z "$deb" ]; then
		mkdir -p "$dir"
		(cd "$dir" && apt-get download -q "$dep:arm64" 2>&1) | grep -v '^W: Download is performed unsandboxed' >&2
		deb=$(compgen -G "$dir/${dep}_*_arm64.deb" | head -1)
	fi
	if [ -z "$deb" ]; then
		echo "cannot download $dep:arm64" >&2
		return 1
	fi
	echo "$deb"
}
