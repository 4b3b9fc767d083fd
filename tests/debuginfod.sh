#!/bin/bash
# Debug information from debuginfod (report/symbolize.h): a local server
# (Debian's debuginfod) serves the separate debug file of the seed program,
# and dwleak traces a stripped copy of it that has no debug file anywhere
# else.  Its frames are checked against the report of the unstripped twin,
# seed_O2 (function, offset, file, line, inlined frames, stack by stack).
#   (a) DEBUGINFOD_URLS unset: the program's frames have no names or lines
#   (b) set to the server: named as the twin's, the debug file kept in
#       debuginfod's cache ($DEBUGINFOD_CACHE_PATH), no loss line for it
#   (c) the server gone, the same cache: still named, from the cache
#   (d) the server gone, an empty cache: unnamed, and the report says which
#       build id of which object it could not fetch, and why
#   (e) dwleak symbolize on (a)'s report: named through the server, with
#       the program where the report says and with it gone from there
#   (f) a server that never answers: symbolize ends once
#       DWLEAK_DEBUGINFOD_SECONDS are spent (and a second for each later
#       lookup), saying so; on a terminal a progress line shows meanwhile,
#       and none when stderr is a file
#   (g) a DWLEAK_DEBUGINFOD_SECONDS that is no positive number of seconds
#       is a usage error (exit 2, saying so), for the trace and symbolize
# The server and dwleak run in a network namespace of their own whose one
# interface is loopback: debuginfod 0.188 listens on every address, and the
# port is then nobody else's.
if [ "$(id -u)" = 0 ] && [ -z "${DWLEAK_TEST_NETNS:-}" ]; then
	exec unshare --net env DWLEAK_TEST_NETNS=1 bash "$0" "$@"
fi
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
lt_require_bpf
lt_testdata seed_O2_stripped
export TESTDATA # the checks run addr2line on its seed_O2
command -v debuginfod > /dev/null || fail_now "debuginfod is missing (Debian: debuginfod, which .ci/deps.sh installs)"
command -v curl > /dev/null || fail_now "curl is missing (.ci/deps.sh installs it)"

# loopback up in the new namespace (SIOCSIFFLAGS, IFF_UP): no ip(8) needed
python3 -c '
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))' || fail_now "cannot bring up loopback"

PORT=8002
URL=http://127.0.0.1:$PORT
# the stripped program alone; its debug file only where the server looks
mkdir -p "$LT_TMP/bin" "$LT_TMP/served" "$LT_TMP/away"
cp "$PROG" "$LT_TMP/bin/"
cp "$TESTDATA/seed_O2_stripped.debug" "$LT_TMP/served/"
STRIPPED=$LT_TMP/bin/seed_O2_stripped
bid=$(readelf -n "$STRIPPED" | awk '/Build ID:/ { print $3 }')
[ -n "$bid" ] || fail_now "seed_O2_stripped has no build id"

server_pid=
server_start() {
	debuginfod -F "$LT_TMP/served" -p $PORT -d "$LT_TMP/index.sqlite" -t 0 -g 0 \
		> "$LT_TMP/debuginfod.log" 2>&1 &
	server_pid=$!
	lt_pids+=("$server_pid")
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/buildid/$bid/debuginfo")" = 200 ] && return 0
		sleep 0.1
	done
	fail_now "debuginfod never served $bid: $(tail -5 "$LT_TMP/debuginfod.log")"
}
server_stop() {
	kill "$server_pid" 2> /dev/null
	wait "$server_pid" 2> /dev/null
}

# run NAME PROG [VAR=VALUE...] : a JSON report of PROG in $LT_TMP/NAME.json
run() {
	local name=$1 prog=$2
	shift 2
	if ! env "$@" "$DWLEAK" --format json -o "$LT_TMP/$name.json" -t 0 -- "$prog" --iterations 10 \
		--interval-ms 5 > /dev/null 2> "$LT_TMP/$name.err"; then
		fail_now "$name: dwleak failed: $(tail -3 "$LT_TMP/$name.err")"
	fi
}

# The program's frames of the report, against ARGS[0], the twin's: MODE
# "named" wants each equal to the twin's, and file:line as addr2line gives
# them on the twin (each a return address: the call is the byte before);
# "unnamed" none named.  ARGS[2] is the build id a loss line must (ARGS[3]
# "lost") or must not ("kept") name, with ARGS[4] in its text.
COMPARE='
import os, subprocess
mode, bid, lost = ARGS[1], ARGS[2], ARGS[3]
why = ARGS[4] if len(ARGS) > 4 else ""
def addr2line(addr):
    out = subprocess.run(["addr2line", "-i", "-e", os.environ["TESTDATA"] + "/seed_O2", "%#x" % (addr - 1)],
                         capture_output=True, text=True).stdout.splitlines()
    got = []
    for l in out:
        file, line = l.split(" (discriminator")[0].rsplit(":", 1)
        got.append((file.split("/")[-1], int(line) if line.isdigit() else 0))
    return got
def prog(f):
    return f["module"] and f["module"].split("/")[-1] in ("seed_O2", "seed_O2_stripped")
def key(s):
    return tuple(f["elf_address"] for f in physical(s) if prog(f))
def fields(s):
    return [(f["function"], f["offset"], f["file"], f["line"], f["inlined"]) for f in s["frames"] if prog(f)]
twin = {key(s): s for s in json.load(open(ARGS[0]))["stacks"]}
matched = 0
for s in r["stacks"]:
    t = twin.get(key(s))
    if not key(s) or t is None:
        continue
    matched += 1
    got = fields(s)
    if mode == "named" and got != fields(t):
        fail("frames differ from the twin'"'"'s:\n  got  %s\n  want %s" % (got, fields(t)))
    if mode == "named":
        # a physical frame and the inlined ones before it share an address
        for a in sorted({int(f["elf_address"], 16) for f in s["frames"] if prog(f)}):
            mine = [((f["file"] or "??").split("/")[-1], f["line"] or 0) for f in s["frames"]
                    if prog(f) and int(f["elf_address"], 16) == a]
            if mine != addr2line(a):
                fail("at %#x: %s, addr2line on the twin: %s" % (a, mine, addr2line(a)))
    if mode == "unnamed" and any(g[0] or g[2] for g in got):
        fail("the program'"'"'s frames are named without debuginfod: %s" % got)
if not matched:
    fail("no stack of the program matches one of the twin'"'"'s")
elif mode == "named":
    ok("%d stacks: the program'"'"'s frames as the twin'"'"'s, e.g. %s" % (matched, [g[0] for g in fields(s)][:3]))
else:
    ok("%d stacks: the program'"'"'s frames have no names, no lines" % matched)
notes = [x["text"] for x in r.get("losses", []) if x["what"] == "debuginfo_not_fetched" and bid in x["text"]]
if lost == "lost" and not any(why in n for n in notes):
    fail("no loss line says %s could not be fetched (%s): %s" % (bid, why, r.get("losses")))
elif lost == "lost":
    ok("the report says: %s" % notes[0])
if lost == "kept" and notes:
    fail("a loss line for what was fetched: %s" % notes)
'

run twin "$TESTDATA/seed_O2"

echo "-- (a) DEBUGINFOD_URLS unset"
run unset "$STRIPPED" -u DEBUGINFOD_URLS DEBUGINFOD_CACHE_PATH="$LT_TMP/cache"
lt_check "$LT_TMP/unset.json" "$LT_TMP/twin.json" unnamed "$bid" kept <<< "$COMPARE"
[ -e "$LT_TMP/cache/$bid" ] && fail "(a) looked $bid up with DEBUGINFOD_URLS unset"

echo "-- (b) DEBUGINFOD_URLS=$URL, the server up"
server_start
run served "$STRIPPED" DEBUGINFOD_URLS="$URL" DEBUGINFOD_CACHE_PATH="$LT_TMP/cache"
lt_check "$LT_TMP/served.json" "$LT_TMP/twin.json" named "$bid" kept <<< "$COMPARE"
cmp -s "$LT_TMP/cache/$bid/debuginfo" "$TESTDATA/seed_O2_stripped.debug" &&
	pass "(b) the debug file is in debuginfod's cache" || fail "(b) $LT_TMP/cache/$bid/debuginfo is not the debug file"

echo "-- (c) the server down, the cache of (b)"
server_stop
run cached "$STRIPPED" DEBUGINFOD_URLS="$URL" DEBUGINFOD_CACHE_PATH="$LT_TMP/cache"
lt_check "$LT_TMP/cached.json" "$LT_TMP/twin.json" named "$bid" kept <<< "$COMPARE"
echo "-- (d) the server down, an empty cache"
run down "$STRIPPED" DEBUGINFOD_URLS="$URL" DEBUGINFOD_CACHE_PATH="$LT_TMP/cache-empty"
lt_check "$LT_TMP/down.json" "$LT_TMP/twin.json" unnamed "$bid" lost "connection refused" <<< "$COMPARE"

echo "-- (e) dwleak symbolize on (a)'s report, the server up"
server_start
symbolize() { # NAME [VAR=VALUE...] : dwleak symbolize unset.json -o NAME.json
	local name=$1
	shift
	env "$@" "$DWLEAK" symbolize -o "$LT_TMP/$name.json" "$LT_TMP/unset.json" 2> "$LT_TMP/$name.err" ||
		fail "symbolize $name: exit $?: $(tail -3 "$LT_TMP/$name.err")"
}
symbolize sym-here DEBUGINFOD_URLS="$URL" DEBUGINFOD_CACHE_PATH="$LT_TMP/cache-sym"
lt_check "$LT_TMP/sym-here.json" "$LT_TMP/twin.json" named "$bid" kept <<< "$COMPARE"
echo "-- (e) the same with the program gone from where the report says"
mv "$STRIPPED" "$LT_TMP/away/"
symbolize sym-gone DEBUGINFOD_URLS="$URL" DEBUGINFOD_CACHE_PATH="$LT_TMP/cache-sym2"
lt_check "$LT_TMP/sym-gone.json" "$LT_TMP/twin.json" named "$bid" kept <<< "$COMPARE"
mv "$LT_TMP/away/seed_O2_stripped" "$LT_TMP/bin/"
server_stop

echo "-- (f) a server that never answers, DWLEAK_DEBUGINFOD_SECONDS=2"
# a listener that takes connections and never answers
SILENT_PORT=8003
python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
time.sleep(120)' $SILENT_PORT &
silent_pid=$!
lt_pids+=("$silent_pid")
sleep 0.5
BOUND=2
start=$(date +%s.%N)
symbolize silent DEBUGINFOD_URLS="http://127.0.0.1:$SILENT_PORT" DEBUGINFOD_CACHE_PATH="$LT_TMP/cache-silent" \
	DWLEAK_DEBUGINFOD_SECONDS=$BOUND
took=$(python3 -c "print(round($(date +%s.%N) - $start, 2))")
lookups=$(python3 -c 'import json,sys; print(len({f["build_id"] for s in json.load(open(sys.argv[1]))["stacks"] for f in s["frames"] if f.get("build_id")}))' "$LT_TMP/unset.json")
if python3 -c "import sys; sys.exit(not ($BOUND - 0.5 <= $took <= $BOUND + $lookups + 2))"; then
	pass "(f) a silent server held symbolize $took s (bound $BOUND s, $lookups objects)"
else
	fail "(f) a silent server held symbolize $took s (bound $BOUND s, $lookups objects)"
fi
lt_check "$LT_TMP/silent.json" "$LT_TMP/twin.json" unnamed "$bid" lost "time for debuginfod lookups was spent" <<< "$COMPARE"
grep -q "debuginfod: fetching" "$LT_TMP/silent.err" && fail "(f) a progress line with stderr not a terminal"
# on a terminal (script(1) gives the command one)
DEBUGINFOD_URLS="http://127.0.0.1:$SILENT_PORT" DEBUGINFOD_CACHE_PATH="$LT_TMP/cache-silent2" DWLEAK_DEBUGINFOD_SECONDS=$BOUND \
	script -qec "$DWLEAK symbolize -o $LT_TMP/tty.json $LT_TMP/unset.json" /dev/null > "$LT_TMP/tty.out" 2>&1
if grep -q "debuginfod: fetching the debug information of " "$LT_TMP/tty.out"; then
	pass "(f) on a terminal: $(tr '\r' '\n' < "$LT_TMP/tty.out" | grep -m1 'debuginfod: fetching' | sed 's/\x1b\[K//')"
else
	fail "(f) no progress line on a terminal: $(head -c 300 "$LT_TMP/tty.out")"
fi
kill "$silent_pid"
wait "$silent_pid" 2> /dev/null

echo "-- (g) DWLEAK_DEBUGINFOD_SECONDS that is no number of seconds"
for bad in abc 0 -5; do
	DEBUGINFOD_URLS=$URL DWLEAK_DEBUGINFOD_SECONDS=$bad "$DWLEAK" symbolize "$LT_TMP/unset.json" \
		> /dev/null 2> "$LT_TMP/bad.err"
	rc=$?
	[ $rc = 2 ] && grep -q "DWLEAK_DEBUGINFOD_SECONDS=$bad" "$LT_TMP/bad.err" ||
		fail "symbolize with DWLEAK_DEBUGINFOD_SECONDS=$bad: exit $rc: $(cat "$LT_TMP/bad.err")"
	DEBUGINFOD_URLS=$URL DWLEAK_DEBUGINFOD_SECONDS=$bad "$DWLEAK" -- /bin/true > /dev/null 2> "$LT_TMP/bad.err"
	rc=$?
	[ $rc = 2 ] && grep -q "DWLEAK_DEBUGINFOD_SECONDS=$bad" "$LT_TMP/bad.err" ||
		fail "dwleak -- true with DWLEAK_DEBUGINFOD_SECONDS=$bad: exit $rc: $(cat "$LT_TMP/bad.err")"
done
pass "(g) $(head -n 1 "$LT_TMP/bad.err")"
check_finish
