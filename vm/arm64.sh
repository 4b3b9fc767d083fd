#!/bin/bash
# An arm64 Debian 12 machine anyone here can run (issue 26): Debian's own
# arm64 kernel booted in qemu-system-aarch64 (TCG, no KVM), its root a
# debootstrapped arm64 bookworm on a disk image (ext4, made by mke2fs -d:
# no loop mount), the project and the job shared from the host over 9p.  Everything comes from Debian (multiarch and
# deb.debian.org); nothing is built for the guest but a small initramfs.
#
#   vm/arm64.sh deps           install what the host needs (root)
#   vm/arm64.sh prepare        fetch the kernel, build the root (cached)
#   vm/arm64.sh run 'CMD'      boot, run CMD as root in /src, power off;
#                              exits with CMD's status
#
# The root is made with debootstrap --foreign on the host (a download and
# an unpack, no arm64 code run), and its second stage runs in the guest on
# the first boot, so the host needs neither qemu-user nor binfmt_misc.
# Settings (environment): DWLEAK_ARM64_DIR where the machine is kept
# (/var/cache/dwleak/arm64), DWLEAK_ARM64_MIRROR, DWLEAK_ARM64_MEM (MiB,
# 4096), DWLEAK_ARM64_CPUS (2), DWLEAK_ARM64_TIMEOUT (seconds a run may
# take, 3600), DWLEAK_ARM64_SRC (the tree shared as /src: this one).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
DIR=${DWLEAK_ARM64_DIR:-/var/cache/dwleak/arm64}
MIRROR=${DWLEAK_ARM64_MIRROR:-http://deb.debian.org/debian}
MEM=${DWLEAK_ARM64_MEM:-4096}
CPUS=${DWLEAK_ARM64_CPUS:-2}
TIMEOUT=${DWLEAK_ARM64_TIMEOUT:-3600}
SRC=${DWLEAK_ARM64_SRC:-$here}
# What the guest's root holds beyond a minimal system: what the tests run
# there need (gdb is the oracle for stacks; python3.11 a traced program).
# libdw1, libelf1, libnettle8: what build/arm64/tables_verify links;
# libbpf1, libmicrohttpd12, libdebuginfod1 too: dwleak itself, built for arm64;
# jq reads its JSON reports there; jemalloc, tcmalloc (libgoogle-perftools4)
# and mimalloc: the allocators the preload library's ledgers are checked under.
# libboost-regex1.74.0: it provides the virtual package gdb's
# libsource-highlight4v5 depends on, which debootstrap does not resolve.
PACKAGES=gdb,libboost-regex1.74.0,python3.11-minimal,libstdc++6,procps,kmod,libdw1,libelf1,libnettle8,libzstd1,zlib1g,libbpf1,libmicrohttpd12,libdebuginfod1,jq,libjemalloc2,libgoogle-perftools4,libmimalloc2.0
# The guest's kernel: Debian's bookworm arm64 image (BTF on, uprobes on),
# the package linux-image-arm64 depends on, kept with .ci/deps.sh's .debs
# (the arm64 build takes the kernel's BTF out of the same file).
DEB_DIR=${DWLEAK_DEB_DIR:-/var/cache/dwleak/debs}
# Modules the initramfs loads, in order: the ext4 root on virtio-blk, 9p
# over virtio for /src and /job (Debian builds every virtio driver as a
# module).  The root is not 9p: qemu's 9p server refuses to open device
# nodes, and debootstrap's second stage makes and opens one.
MODULES="virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk crc16 crc32c_generic mbcache jbd2 ext4 netfs fscache 9pnet 9pnet_virtio 9p"
# The root's size (sparse: what it holds is what the host's disk pays).
ROOT_SIZE=${DWLEAK_ARM64_ROOT_SIZE:-16G}

say() { echo "arm64: $*" >&2; }
die() {
	echo "arm64: $*" >&2
	exit 2
}

# What the host needs for the machine and for `make ARCH=arm64`: qemu,
# debootstrap, and Debian's cross compiler with the arm64 -dev packages of
# the libraries tables/ links (multiarch).  Installed when missing.
HOST_PACKAGES="qemu-system-arm debootstrap cpio e2fsprogs gcc-aarch64-linux-gnu g++-aarch64-linux-gnu pkg-config
	clang bpftool libelf-dev:arm64 libdw-dev:arm64 libzstd-dev:arm64 zlib1g-dev:arm64 nettle-dev:arm64
	libbpf-dev:arm64 libmicrohttpd-dev:arm64 libdebuginfod-dev:arm64 libiberty-dev:arm64"

deps() {
	local p missing=()
	for p in $HOST_PACKAGES; do
		pkg_installed "$p" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}; run as root to install them"
	arm64_enable
	say "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" ||
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; } ||
		die "installing ${missing[*]} failed"
}

need_host_tools() {
	local missing=() t
	for t in qemu-system-aarch64 debootstrap cpio dpkg-deb mke2fs; do
		command -v "$t" > /dev/null || missing+=("$t")
	done
	[ ${#missing[@]} -eq 0 ] ||
		die "missing ${missing[*]}: run vm/arm64.sh deps"
}

# pkg_installed, arm64_enable (shared with .ci/deps.sh)
# shellcheck source=.ci/apt_lib.sh
. "$here/.ci/apt_lib.sh"

# DIR/kernel/{vmlinuz,modules}: the image linux-image-arm64 depends on.
kernel_fetch() {
	local dep deb
	[ -s "$DIR/kernel/vmlinuz" ] && return 0
	deb=$(arm64_kernel_deb "$DEB_DIR") || die "no arm64 kernel package"
	mkdir -p "$DIR/kernel"
	rm -rf "$DIR/kernel/x"
	dpkg-deb -x "$deb" "$DIR/kernel/x"
	cp "$DIR"/kernel/x/boot/vmlinuz-* "$DIR/kernel/vmlinuz.new"
	mv "$DIR/kernel/vmlinuz.new" "$DIR/kernel/vmlinuz"
	say "kernel: $(basename "$deb")"
}

# The guest's PID 1 after the initramfs, copied into the root at each boot
# (so a change here needs no new root): finishes debootstrap on the first
# boot, mounts the project (/src) and the job (/job), runs /job/cmd as
# root, leaves its status in /job/status, powers off.
guest_init() {
	cat << 'EOF'
#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
halt() {
	sync
	echo o > /proc/sysrq-trigger
	sleep 60
	exit 1
}
if [ -e /debootstrap/debootstrap ]; then
	echo "dwleak-guest: debootstrap --second-stage (first boot only)"
	if ! /debootstrap/debootstrap --second-stage; then
		echo "dwleak-guest: debootstrap's second stage failed"; tail -20 /debootstrap/debootstrap.log; halt
	fi
	echo "deb http://deb.debian.org/debian bookworm main" > /etc/apt/sources.list
	# the second stage unmounts what it mounted: proc and sys among them
	mountpoint -q /proc || mount -t proc proc /proc
	mountpoint -q /sys || mount -t sysfs sys /sys
	mountpoint -q /dev || mount -t devtmpfs dev /dev
fi
mount -o remount,rw /
mkdir -p /dev/pts /dev/shm
# what udev would make: bash's <(...) needs /dev/fd
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
mount -t tmpfs tmp /tmp
mkdir -p /src /job
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 src /src || echo "dwleak-guest: /src not mounted"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 job /job || { echo "dwleak-guest: /job not mounted"; halt; }
mount -t debugfs none /sys/kernel/debug 2> /dev/null
mount -t tracefs none /sys/kernel/tracing 2> /dev/null
mount -t bpf none /sys/fs/bpf 2> /dev/null
hostname dwleak-arm64
ip link set lo up 2> /dev/null
echo "dwleak-guest: $(uname -srm), $(nproc) CPUs; running /job/cmd"
cd /src 2> /dev/null || cd /
sh /job/cmd < /dev/null 2>&1 | tee /job/out
# the status of cmd (the last line cmd prints), not tee's
sed -n 's/^dwleak-guest-status \([0-9]*\)$/\1/p' /job/out | tail -1 > /job/status.tmp
mv /job/status.tmp /job/status
halt
EOF
}

# DIR/initrd.cpio.gz: busybox (Debian's arm64 busybox-static) and the
# modules; its init mounts the root (/dev/vda), puts the guest's init
# there and hands over to it.  Rebuilt each time (a second): it holds
# guest_init.
initrd_build() {
	local w deb m f kdir
	w=$DIR/initrd.tmp
	rm -rf "$w/root"
	mkdir -p "$DIR/deb" "$w/root/bin" "$w/root/modules" "$w/root/dev" "$w/root/proc" "$w/root/sys" "$w/root/newroot"
	deb=$(ls "$DIR"/deb/busybox-static_*_arm64.deb 2> /dev/null | head -1 || true)
	if [ -z "$deb" ]; then
		(cd "$DIR/deb" && apt-get download -q busybox-static:arm64 2>&1) | grep -v '^W: Download is performed unsandboxed' || true
		deb=$(ls "$DIR"/deb/busybox-static_*_arm64.deb 2> /dev/null | head -1 || true)
		[ -n "$deb" ] || die "cannot download busybox-static:arm64"
	fi
	rm -rf "$w/bb"
	dpkg-deb -x "$deb" "$w/bb"
	cp "$w/bb/bin/busybox" "$w/root/bin/busybox"
	ln -s busybox "$w/root/bin/sh"
	kdir=$(ls -d "$DIR"/kernel/x/lib/modules/*/ | head -1)
	for m in $MODULES; do
		f=$(find "$kdir" -name "$m.ko" | head -1)
		[ -n "$f" ] || die "the kernel has no module $m"
		cp "$f" "$w/root/modules/"
	done
	guest_init > "$w/root/dwleak-guest"
	cat > "$w/root/init" << EOF
#!/bin/sh
# dwleak's arm64 guest: mount the root, put /sbin/dwleak-guest there, hand over.
bb=/bin/busybox
\$bb mount -t proc proc /proc
\$bb mount -t sysfs sys /sys
\$bb mount -t devtmpfs dev /dev
for m in $MODULES; do \$bb insmod /modules/\$m.ko || echo "dwleak-guest: insmod \$m failed"; done
if ! \$bb mount -t ext4 /dev/vda /newroot; then
	echo "dwleak-guest: cannot mount the root /dev/vda"; \$bb poweroff -f
fi
\$bb cp /dwleak-guest /newroot/sbin/dwleak-guest
\$bb chmod 755 /newroot/sbin/dwleak-guest
for d in proc sys dev; do \$bb mount --move /\$d /newroot/\$d || echo "dwleak-guest: mount --move /\$d failed"; done
exec \$bb switch_root /newroot /sbin/dwleak-guest
EOF
	chmod +x "$w/root/init"
	(cd "$w/root" && find . | cpio -o -H newc --quiet | gzip -1) > "$DIR/initrd.cpio.gz.new"
	mv "$DIR/initrd.cpio.gz.new" "$DIR/initrd.cpio.gz"
	rm -rf "$w"
}

# DIR/root.img: debootstrap's first stage (a download and an unpack, no
# arm64 code run) written into an ext4 image; the guest runs the second
# stage on its first boot.
root_build() {
	local t
	# made again when the package list changes
	[ -s "$DIR/root.img" ] && [ "$(cat "$DIR/root.packages" 2> /dev/null)" = "$PACKAGES" ] && return 0
	rm -f "$DIR/root.img" "$DIR/root.packages"
	t=$DIR/root.tmp
	rm -rf "$t"
	say "debootstrap --foreign arm64 bookworm (+ $PACKAGES)"
	debootstrap --arch=arm64 --foreign --variant=minbase --include="$PACKAGES" \
		bookworm "$t" "$MIRROR" > "$DIR/debootstrap.log" 2>&1 ||
		die "debootstrap failed: $(tail -3 "$DIR/debootstrap.log")"
	# debootstrap in a container (systemd-detect-virt says so here) makes
	# proc a symlink to the host's /proc; the guest mounts its own there
	if [ -L "$t/proc" ]; then
		rm "$t/proc"
		mkdir -m 555 "$t/proc"
	fi
	rm -f "$DIR/root.img.new"
	mke2fs -q -t ext4 -L dwleak-arm64 -d "$t" "$DIR/root.img.new" "$ROOT_SIZE" ||
		die "mke2fs -d $t failed"
	mv "$DIR/root.img.new" "$DIR/root.img"
	echo "$PACKAGES" > "$DIR/root.packages"
	rm -rf "$t"
}

prepare() {
	need_host_tools
	mkdir -p "$DIR"
	kernel_fetch
	initrd_build
	root_build
}

# Boots the machine with JOB shared as /job; returns when it powers off.
boot() {
	local job=$1
	timeout -k 10 "$TIMEOUT" qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -smp "$CPUS" -m "$MEM" \
		-nographic -no-reboot \
		-kernel "$DIR/kernel/vmlinuz" -initrd "$DIR/initrd.cpio.gz" \
		-append "console=ttyAMA0 panic=-1 quiet" \
		-drive file="$DIR/root.img",format=raw,if=none,id=root,cache=unsafe \
		-device virtio-blk-pci,drive=root \
		-fsdev local,id=src,path="$SRC",security_model=passthrough \
		-device virtio-9p-pci,fsdev=src,mount_tag=src \
		-fsdev local,id=job,path="$job",security_model=passthrough \
		-device virtio-9p-pci,fsdev=job,mount_tag=job \
		-netdev user,id=net0 -device virtio-net-pci,netdev=net0,romfile= < /dev/null # no option ROM: the kernel is booted directly (and ipxe-qemu, which has it, may be missing)
}

run() {
	local job rc
	[ $# -ge 1 ] || die "usage: vm/arm64.sh run 'CMD'"
	prepare
	job=$(mktemp -d /tmp/dwleak-arm64-job.XXXXXX)
	# cmd's status is printed as a line the guest script finds
	printf '%s\nprintf "dwleak-guest-status %%d\\n" $?\n' "$*" > "$job/cmd"
	rc=0
	boot "$job" || rc=$?
	if [ ! -s "$job/status" ]; then
		rm -rf "$job"
		die "the guest stopped without running the command (qemu exited $rc; DWLEAK_ARM64_TIMEOUT=$TIMEOUT)"
	fi
	rc=$(cat "$job/status")
	rm -rf "$job"
	return "$rc"
}

case ${1:-} in
deps) deps ;;
prepare) prepare ;;
run)
	shift
	run "$@"
	;;
*)
	echo "usage: vm/arm64.sh deps | prepare | run 'CMD'" >&2
	exit 2
	;;
esac
