#!/bin/bash
# `make install prefix=/usr DESTDIR=...` (what debian/rules runs) lays out
# what the Debian package ships, and the installed dwleak works from there:
# (a) every file where Debian and bash-completion look for it; (b) the
# installed dwleak finds the installed preload library (dwleak preload),
# beside it in lib/TUPLE/dwleak, not the build tree's; (c) its version is
# debian/changelog's; (d) the installed default suppressions are the rules
# dwleak has built in (the string the build makes of the file).  Needs no
# root.
# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || fail_now "no $ROOT"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dwleak-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root
tuple=$(gcc -print-multiarch)

# the build is up to date (make check made it); the jobserver of a make
# that runs this test is not this make's
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install prefix=/usr DESTDIR="$dest" > "$tmp/make.log" 2>&1; then
	fail_now "make install failed: $(tail -5 "$tmp/make.log")"
fi

# (a)
for f in usr/bin/dwleak "usr/lib/$tuple/dwleak/libdwleak-preload.so" usr/share/dwleak/default.supp \
	usr/share/man/man1/dwleak.1 usr/share/bash-completion/completions/dwleak usr/lib/systemd/system/dwleak-agent.service; do
	[ -f "$dest/$f" ] && pass "/$f" || fail "make install did not install /$f"
done
[ -x "$dest/usr/bin/dwleak" ] || fail "/usr/bin/dwleak is not executable"
extra=$(cd "$dest" && find . -type f | sort | grep -v -e '^./usr/bin/dwleak$' -e "^./usr/lib/$tuple/dwleak/" \
	-e '^./usr/share/dwleak/' -e '^./usr/share/man/man1/dwleak.1$' -e '^./usr/share/bash-completion/completions/dwleak$' \
	-e '^./usr/lib/systemd/system/dwleak-agent.service$')
[ -z "$extra" ] || fail "make install put more there: $extra"

# the unit runs the installed dwleak
grep -q '^ExecStart=/usr/bin/dwleak agent ' "$dest/usr/lib/systemd/system/dwleak-agent.service" &&
	pass "the unit's ExecStart is /usr/bin/dwleak agent" ||
	fail "the unit's ExecStart: $(grep '^ExecStart' "$dest/usr/lib/systemd/system/dwleak-agent.service")"

# (b) from another directory, so nothing of the build tree is near
got=$(cd / && "$dest/usr/bin/dwleak" preload)
want=$(realpath "$dest/usr/lib/$tuple/dwleak/libdwleak-preload.so")
[ "$got" = "$want" ] && pass "the installed dwleak preloads $got" ||
	fail "the installed dwleak preload prints '$got', want '$want'"

# (c)
version=$(head -n 1 debian/changelog | sed -E 's/^[^ ]+ \(([^)]+)\).*/\1/')
got=$("$dest/usr/bin/dwleak" --version | head -n 1)
[[ $got == "dwleak $version" || $got == "dwleak $version (git "* ]] && pass "the installed dwleak: $got" ||
	fail "the installed dwleak says '$got', debian/changelog $version"

# (d) the string report/suppress.c compiles in is the file, byte for byte
cmp -s report/default.supp "$dest/usr/share/dwleak/default.supp" ||
	fail "the installed default.supp is not report/default.supp"
python3 - build/gen/report/default_supp.inc report/default.supp << 'PY' && pass "the built-in rules are default.supp's" ||
import ast, sys
literal = ast.literal_eval("(" + open(sys.argv[1]).read() + ")")
sys.exit(literal != open(sys.argv[2]).read())
PY
	fail "build/gen/report/default_supp.inc is not report/default.supp as a C string"
check_finish
