#!/bin/bash
# The systemd unit that ships with dwleak (dist/dwleak-agent.service) is
# checked by `systemd-analyze verify` (Debian's systemd package; it works
# without systemd as PID 1): with ExecStart pointing at the dwleak built
# here (verify wants the program to exist), it must pass with nothing on
# stderr; a copy with a misspelt key and a missing program must fail, so
# that a pass means the check ran.  Also: the unit runs `dwleak agent`
# with the defaults SPEC.md gives, reloads with SIGHUP, stops with SIGTERM;
# as root, its command line runs the agent built here, which listens and
# stops on SIGTERM with status 0.
# Exit 0 pass, 1 fail, 77 skip (no systemd-analyze: .ci/deps.sh).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
UNIT=$ROOT/dist/dwleak-agent.service

if ! command -v systemd-analyze > /dev/null 2>&1; then
	echo "skip: systemd-analyze not installed (Debian package systemd, .ci/deps.sh)"
	exit 77
fi
[ -x "$ROOT/dwleak" ] || { echo "FAIL: $ROOT/dwleak missing (make)"; exit 1; }
T=$(mktemp -d /tmp/dwleak-agent-unit-XXXXXX)
trap 'rm -rf "$T"' EXIT
errors=0
fail() {
	echo "FAIL: $*"
	errors=$((errors + 1))
}

# verify needs the unit's own name and the program to exist
sed "s|/usr/local/bin/dwleak|$ROOT/dwleak|" "$UNIT" > "$T/dwleak-agent.service"
if (cd "$T" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify "$T/dwleak-agent.service") > "$T/out" 2>&1 && [ ! -s "$T/out" ]; then
	echo "ok: systemd-analyze verify passes dist/dwleak-agent.service"
else
	fail "systemd-analyze verify: $(cat "$T/out")"
fi
sed -e "s|/usr/local/bin/dwleak|$T/none/dwleak|" -e 's/^Restart=/Restrat=/' "$UNIT" > "$T/broken.service"
if (cd "$T" && systemd-analyze verify "$T/broken.service") > "$T/out" 2>&1; then
	fail "systemd-analyze verify passed a broken unit: the check proves nothing here"
elif grep -q "Unknown key 'Restrat'" "$T/out" && grep -q "is not executable" "$T/out"; then
	echo "ok: a broken copy fails verify ($(wc -l < "$T/out") messages)"
else
	fail "the broken unit failed for another reason: $(cat "$T/out")"
fi
grep -q '^ExecStart=/usr/local/bin/dwleak agent --listen 127.0.0.1:6464 ' "$UNIT" || fail "ExecStart is not dwleak agent on 127.0.0.1:6464"
grep -q '^ExecReload=/bin/kill -HUP \$MAINPID' "$UNIT" || fail "no SIGHUP reload"
grep -q '^KillSignal=SIGTERM' "$UNIT" || fail "not stopped by SIGTERM"
# the unit's command line, as systemd would run it (its targets from the
# environment file), with the dwleak built here: it must start, listen,
# and stop with SIGTERM, exit 0 (root: it loads BPF programs)
if [ "$(id -u)" = 0 ] && [ -x "${DWLEAK:-}" ]; then
	cmd=$(sed -n 's/^ExecStart=//p' "$UNIT")
	cmd=${cmd/\/usr\/local\/bin\/dwleak/$DWLEAK}
	cmd=${cmd/127.0.0.1:6464/127.0.0.1:0}
	cmd=${cmd/\/var\/lib\/dwleak-agent\/reports/$T}
	# bash splits the unquoted $DWLEAK_AGENT_TARGETS as systemd does
	DWLEAK_AGENT_TARGETS="--comm dwleak-unit-none" bash -c "exec $cmd" 2> "$T/agent.err" &
	agent=$!
	for i in $(seq 300); do
		grep -q '^dwleak: agent listening on 127.0.0.1:' "$T/agent.err" && break
		kill -0 $agent 2> /dev/null || break
		sleep 0.1
	done
	if grep -q '^dwleak: agent listening on 127.0.0.1:' "$T/agent.err"; then
		kill -TERM $agent
		wait $agent
		rc=$?
		[ $rc = 0 ] && echo "ok: the unit's ExecStart runs dwleak agent, which listens and stops on SIGTERM with 0" ||
			fail "the unit's command exited $rc after SIGTERM: $(tail -n 3 "$T/agent.err")"
	else
		kill -KILL $agent 2> /dev/null
		fail "the unit's command ($cmd) did not start: $(cat "$T/agent.err")"
	fi
fi
[ $errors -eq 0 ] || exit 1
echo "agent unit: all checks passed"
