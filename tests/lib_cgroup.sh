# shellcheck shell=bash
# The cgroup hierarchies the agent's tests make cgroups in, for tests that
# source this file: V2 (the cgroup v2 tree), V1SD (the v1 name=systemd
# hierarchy, or empty) and V1MEM (the v1 memory controller, or empty),
# where the host mounts them (/sys/fs/cgroup/unified on hybrid hosts,
# /sys/fs/cgroup on unified ones).  Where one is not mounted (a chroot
# whose /sys was bound without its submounts, as in a fresh Debian root),
# it is mounted under a directory of the test's own and unmounted by
# cgroup_unmount: the kernel's hierarchies are the same, only reached
# from elsewhere.  Needs root.

CGROUP_OWN_MOUNTS=()

# cgroup_mounts DIR: sets V2, V1SD, V1MEM, mounting what is missing under
# DIR.  Returns 1 (said) when no cgroup2 tree can be reached.
cgroup_mounts() {
	local dir=$1
	V2= V1SD= V1MEM=
	if grep -q ' /sys/fs/cgroup/unified cgroup2 ' /proc/mounts; then
		V2=/sys/fs/cgroup/unified
	elif grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts; then
		V2=/sys/fs/cgroup
	elif mkdir -p "$dir/unified" && mount -t cgroup2 none "$dir/unified" 2> /dev/null; then
		V2=$dir/unified
		CGROUP_OWN_MOUNTS+=("$V2")
	else
		echo "no cgroup2 file system mounted, and none could be mounted at $dir/unified"
		return 1
	fi
	if grep -q ' /sys/fs/cgroup/systemd cgroup ' /proc/mounts; then
		V1SD=/sys/fs/cgroup/systemd
	elif mkdir -p "$dir/systemd" && mount -t cgroup -o none,name=systemd none "$dir/systemd" 2> /dev/null; then
		V1SD=$dir/systemd
		CGROUP_OWN_MOUNTS+=("$V1SD")
	fi
	if grep -q ' /sys/fs/cgroup/memory cgroup ' /proc/mounts; then
		V1MEM=/sys/fs/cgroup/memory
	elif mkdir -p "$dir/memory" && mount -t cgroup -o memory none "$dir/memory" 2> /dev/null; then
		V1MEM=$dir/memory
		CGROUP_OWN_MOUNTS+=("$V1MEM")
	fi
	return 0
}

# Unmounts what cgroup_mounts mounted (after the test's cgroups are gone).
cgroup_unmount() {
	local m
	for m in "${CGROUP_OWN_MOUNTS[@]}"; do
		umount "$m" 2> /dev/null && rmdir "$m" 2> /dev/null
	done
	CGROUP_OWN_MOUNTS=()
}
