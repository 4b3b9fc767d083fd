#!/bin/bash
# The systemd unit that ships with dwleak (dist/dwleak-agent.service) is
# checked by `systemd-analyze verify` (Debian's systemd package; it works
# without systemd as PID 1): with ExecStart pointing at the dwleak built
# here (verify wants the program to exist), it must pass with nothing on
# stderr; a copy with a misspelt key and a missing program must fail, so
# that a pass means the check ran.  Also: the unit runs `dwleak agent`
# with the defaults SPEC.md gives, reloads with SIGHUP, stops with SIGTERM.
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
[ $errors -eq 0 ] || exit 1
echo "agent unit: all checks passed"
