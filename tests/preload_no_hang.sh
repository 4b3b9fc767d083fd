#!/bin/bash
# The preload library makes no program hang (issue 20, item 1).  It used
# to resolve its functions with dlsym/dladdr/dlopen/dlerror inside the
# first allocation; made inside newlocale() (p11-kit's constructor, in
# curl, wget, gpg, git over https), that broke glibc's locale lock and the
# program's next setlocale() waited forever, and so did dwleak -- CMD.
#  a. the object: the functions it imports are the ones audited for use
#     inside an allocation (each call site says why it is safe there): no
#     dlsym, dladdr, dlopen, dlerror, nothing of stdio or locales, and no
#     __tls_get_addr (its thread-local data is initial-exec);
#  b. preloaded (LD_PRELOAD): every command below ends within its time
#     limit with the exit status, stdout and stderr it has without the
#     library (a connection's "after N ms" aside): curl, wget, gpg, git
#     --version; git ls-remote of a local bare repository by path and by
#     file:// (git-upload-pack in a child); ssh -V; ps --version (procps's
#     tools hung too: libgpg-error's constructor allocates inside
#     bindtextdomain()); python3 -c 'import ssl'; curl, wget and git over
#     https to a closed local port (their TLS stacks loaded and started);
#     and testdata/no_hang: locale (a constructor allocating inside
#     newlocale(), then setlocale(): hung with the dlsym-based library),
#     gettext (one allocating inside bindtextdomain(), then what a
#     translated program's main does: hung too), sig-dlopen (an allocating signal
#     handler, operator new looked up there for the first time, inside
#     dlopen), fork-threads (children of a threaded parent, one of whose
#     threads walks the loaded objects, call operator new first: hung with
#     the dlsym-based library);
#  c. the same commands under dwleak -- CMD (root: BPF), which preloads
#     the library itself: each is traced at the sites and ends as in b.
# A hang is a failure that names the command (each runs under timeout).
# shellcheck source=tests/lib_trace.sh
. "$(dirname "$0")/lib_trace.sh"
T=$LT_TMP
lt_testdata no_hang
NO_HANG=$PROG
LIB=$("$DWLEAK" preload) || { fail "dwleak preload found no library"; check_finish; }

# Nothing of the user's configuration is read or written: gpg's home,
# git's configuration, curl's .curlrc (-q), wget's HSTS file (--no-hsts).
# HOME stays: dwleak keeps its table cache there.
export GNUPGHOME=$T/gnupg GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
mkdir -m 700 "$GNUPGHOME"

echo "== a. what the library imports"
# the functions audited for use inside an allocation (the list, and why
# each is safe there: tests/preload_imports.txt; x86_64's, before [arm64])
nm -D --undefined-only "$LIB" | awk '$1 == "U" { sub(/@.*/, "", $2); print $2 }' | sort > "$T/imports"
sed -n '/^\[arm64\]$/q; /^[^#]/p' "$(dirname "$0")/preload_imports.txt" | sort > "$T/audited"
extra=$(comm -23 "$T/imports" "$T/audited" | tr '\n' ' ')
[ -z "$extra" ] && pass "imports only the $(wc -l < "$T/imports") functions audited for use inside an allocation" ||
	fail "imports $extra, which nobody audited for use inside an allocation (see the list above)"
grep -qx -e '__tls_get_addr' -e 'dlsym' -e 'dladdr1\?' -e 'dlopen' -e 'dlerror' "$T/imports" &&
	fail "imports a dl* function or __tls_get_addr: $(grep -x -e '__tls_get_addr' -e 'dl[a-z0-9]*' "$T/imports" | tr '\n' ' ')"
readelf -d "$LIB" | grep -q 'FLAGS.*STATIC_TLS' && pass "its TLS is initial-exec (STATIC_TLS)" ||
	fail "no STATIC_TLS flag: some thread-local variable is not initial-exec"

# A bare repository with one commit, for git ls-remote without a network.
git init -q "$T/work" && git -C "$T/work" -c user.name=t -c user.email=t@t commit -q --allow-empty -m one &&
	git clone -q --bare "$T/work" "$T/repo.git" || fail "could not make a git repository to list"
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3

# The commands: NAME|SECONDS|COMMAND (words split on spaces).  Exit status,
# stdout and stderr must be those of the run without the library.
COMMANDS="curl_version|20|curl -q --version
wget_version|20|wget --version
gpg_version|20|gpg --version
git_version|20|git --version
git_ls_remote_path|20|git ls-remote $T/repo.git
git_ls_remote_file|20|git ls-remote file://$T/repo.git
ssh_version|20|ssh -V
ps_version|20|ps --version
python3_ssl|30|$PYTHON -c __import__('ssl')
curl_https|20|curl -q -sS https://127.0.0.1:1/
wget_https|20|wget --no-hsts -q -O /dev/null https://127.0.0.1:1/
git_https|20|git ls-remote https://127.0.0.1:1/repo.git
no_hang_locale|20|$NO_HANG locale
no_hang_gettext|20|env NO_HANG_CTOR=gettext $NO_HANG gettext
no_hang_sig_dlopen|20|$NO_HANG sig-dlopen $TESTDATA/libsig_ctor.so 20
no_hang_fork_threads|30|$NO_HANG fork-threads 30 $TESTDATA/libdlleak_cxx.so"
for tool in curl wget gpg git ssh ps "$PYTHON"; do
	command -v "$tool" > /dev/null ||
		fail "$tool is missing (Debian: .ci/deps.sh installs it): the commands that hung are the test"
done

# normalized FILE: the file without what changes from run to run.
normalized() {
	sed -E 's/after [0-9]+ ms/after N ms/' "$1"
}

# run_cmd MODE NAME SECONDS CMD...: runs CMD (MODE plain, preload or
# dwleak) into $T/NAME.MODE.{out,err,rc}; status 124 when it had to be
# killed.  dwleak's own lines are taken out of stderr (into .lines).
run_cmd() {
	local mode=$1 name=$2 secs=$3 base rc
	shift 3
	base=$T/$name.$mode
	case $mode in
	plain) timeout -k 5 "$secs" "$@" > "$base.out" 2> "$base.err" < /dev/null ;;
	preload) timeout -k 5 "$secs" env LD_PRELOAD="$LIB" "$@" > "$base.out" 2> "$base.err" < /dev/null ;;
	dwleak)
		timeout -k 5 "$((secs * 3))" "$DWLEAK" -o "$base.report" -- "$@" > "$base.out" 2> "$base.all" < /dev/null
		rc=$?
		grep '^dwleak: ' "$base.all" > "$base.lines"
		grep -v '^dwleak: ' "$base.all" > "$base.err"
		return $rc
		;;
	esac
}

# check MODE: every command in MODE against its plain run.
check() {
	local mode=$1 name secs cmd rc want line
	while IFS='|' read -r name secs cmd; do
		# shellcheck disable=SC2086 # the command's words
		run_cmd "$mode" "$name" "$secs" $cmd
		rc=$?
		want=$(cat "$T/$name.plain.rc")
		if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
			fail "$mode: $name hung: '$cmd' was killed after its time limit (exit $rc)"
			# dwleak runs the command in a process group of its own, which
			# timeout's signal does not reach: the processes it traced
			[ "$mode" = dwleak ] && sed -n 's/^dwleak: tracing pid \([0-9]*\) .*/\1/p' "$T/$name.dwleak.lines" |
				xargs -r kill -KILL 2> /dev/null
			continue
		fi
		if [ "$mode" = dwleak ] && ! grep -q '^dwleak: tracing pid [0-9]* (preload, ' "$T/$name.dwleak.lines"; then
			fail "$mode: $name not traced at the sites: $(head -1 "$T/$name.dwleak.lines")"
		fi
		if [ $rc -ne "$want" ]; then
			fail "$mode: $name exited $rc, $want without the library: $(tail -3 "$T/$name.$mode.err")"
		elif ! cmp -s <(normalized "$T/$name.plain.out") <(normalized "$T/$name.$mode.out") ||
			! cmp -s <(normalized "$T/$name.plain.err") <(normalized "$T/$name.$mode.err"); then
			fail "$mode: $name: output differs from the run without the library:"
			diff <(normalized "$T/$name.plain.out") <(normalized "$T/$name.$mode.out") | head -5
			diff <(normalized "$T/$name.plain.err") <(normalized "$T/$name.$mode.err") | head -5
		else
			line=$(head -1 "$T/$name.$mode.out")
			pass "$mode: $name: exit $rc, the same output${line:+ ($line)}"
		fi
	done <<< "$COMMANDS"
}

echo "== without the library (the reference)"
while IFS='|' read -r name secs cmd; do
	# shellcheck disable=SC2086
	run_cmd plain "$name" "$secs" $cmd
	echo $? > "$T/$name.plain.rc"
	rc=$(cat "$T/$name.plain.rc")
	[ "$rc" -eq 124 ] && fail "$name hangs even without the library"
	echo "  $name: exit $rc"
done <<< "$COMMANDS"

echo "== b. preloaded"
check preload

if [ "$(id -u)" != 0 ]; then
	echo "skip: c needs root for BPF"
	check_finish
fi
lt_require_bpf
echo "== c. under dwleak -- CMD"
check dwleak
check_finish
