#!/bin/bash
# Seeds for fuzz_agent (tests/fuzz/fuzz_agent.c): each file is one byte
# choosing the parser, then its input: this machine's own /proc/self/cgroup,
# mountinfo and stat, and hand-written addresses, requests, label values
# and headers.  usage: make_agent_corpus.sh DIR
set -eu
out=$1
mkdir -p "$out"
# seed NAME SELECTOR: the selector byte then stdin, into DIR/NAME
seed() {
	{ printf "\\$(printf '%03o' "$2")"; cat; } > "$out/$1"
}
seed cgroup 0 < /proc/self/cgroup
printf '0::/system.slice/x.service\n1:name=systemd:/a\n5:cpu,cpuacct:/b\n' | seed cgroup_hybrid 0
seed mountinfo 1 < /proc/self/mountinfo
printf '40 25 0:29 / /sys/fs/cgroup/my\\040pids rw - cgroup cgroup rw,pids\n' | seed mountinfo_escape 1
seed stat 2 < /proc/self/stat
printf '1 (a) b) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0\n' | seed stat_paren 2
for a in 127.0.0.1:6464 '[::1]:0' 0.0.0.0:80 '[::ffff:127.0.0.1]:1' localhost:1; do
	printf '%s' "$a" | seed "listen_$(printf '%s' "$a" | tr -c 'a-z0-9' _)" 3
done
printf 'GET\n/report\npid=42\nformat=json\npeak=1' | seed req_report 4
printf 'POST\n/leak-check\npid=7' | seed req_leak 4
printf 'GET\n/debug/pprof/heap\nseconds=30\ngc' | seed req_heap 4
printf 'a\\b"c\nd\xff\xc3\xa9\xed\xa0\x80' | seed label 5
printf 'Bearer 0123456789abcdef0123' | seed token 6
printf 'bearer   0123456789abcdef012' | seed token_short 6
