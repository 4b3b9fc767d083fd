# Package helpers .ci/deps.sh and vm/arm64.sh share (source it; it sets no
# shell options and runs nothing).
#   pkg_installed P   true when package P is installed: P:ARCH that
#                     architecture's, a bare name the native one (or an
#                     arch-all one); with multiarch dpkg-query lists every
#                     architecture's instance under one name
#   arm64_enable      arm64's package lists, once: the architecture added
#                     (multiarch), then an update
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
