#!/bin/bash
# The bash completion (completion/dwleak) driven as bash-completion drives
# it, through COMP_WORDS and COMP_CWORD: (a) an option, and each command's
# option list equal to what its --help lists; (b) --format's values equal
# to the format table's (dwleak's own message for an unknown format) and
# --unwind's; (c) -p completes a running process by pid and by name, and
# lists several with their names; (d) files after -o, directories after
# --debug-dir, a command's own completion after --.  Needs no root.
# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$BUILD/asan/dwleak}
[ -x "$DWLEAK" ] || fail_now "$DWLEAK is missing (make check)"
BASH_COMPLETION=${BASH_COMPLETION:-/usr/share/bash-completion/bash_completion}
[ -r "$BASH_COMPLETION" ] || fail_now "$BASH_COMPLETION is missing (Debian: bash-completion, which .ci/deps.sh installs)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dwleak-completion.XXXXXX")
pids=()
trap 'kill "${pids[@]}" 2> /dev/null; rm -rf "$tmp"' EXIT

# bash-completion's functions, then ours, as an interactive bash has them
# shellcheck source=/dev/null
. "$BASH_COMPLETION"
# shellcheck source=completion/dwleak
. "$ROOT/completion/dwleak"

# complete WORD... : what TAB after the last WORD offers, one per line, as
# bash calls the function: COMP_WORDS, COMP_CWORD, the line and the point
# (an empty last WORD completes a new word)
complete_words() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMP_LINE="$*"
	COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	_dwleak dwleak "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
	((${#COMPREPLY[@]})) && printf '%s\n' "${COMPREPLY[@]}" | sort
}

# expect WHAT WANT GOT : the two lists (one item a line) are the same
expect() {
	if [ "$2" = "$3" ]; then
		pass "$1: $(echo "$2" | tr '\n' ' ')"
	else
		fail "$1: want [$(echo "$2" | tr '\n' ' ')], got [$(echo "$3" | tr '\n' ' ')]"
	fi
}

# --help's options of a command (the lines help2man reads as options)
help_options() {
	"$DWLEAK" "$@" --help | sed -nE 's/^ {1,10}(-[^ ].*)$/\1/p' | sed -E 's/  .*//' |
		tr ',' '\n' | sed -nE 's/^ *(--?[A-Za-z0-9][A-Za-z0-9-]*).*/\1/p' | sort -u
}

# (a)
expect "--for completes to" "--format" "$(complete_words dwleak --for)"
expect "-p PID --leak completes to" "--leak-check" "$(complete_words dwleak -p 1 --leak)"
expect "the trace's options, as its --help lists them" "$(help_options)" \
	"$(complete_words dwleak - | sort -u)"
for c in agent tables symbolize preload; do
	expect "dwleak $c's options, as its --help lists them" "$(help_options $c)" \
		"$(complete_words dwleak $c - | sort -u)"
done
expect "the commands" "$(printf '%s\n' agent preload symbolize tables)" "$(complete_words dwleak '')"

# (b) the formats dwleak says it takes, from its one table (report/write.h)
"$DWLEAK" --format no-such-format -p 1 2> "$tmp/format.err" > /dev/null
formats=$(sed -nE 's/.*it takes ([a-z, ]+)\).*/\1/p' "$tmp/format.err" | tr -d ' ' | tr ',' '\n' | sort)
[ -n "$formats" ] || fail "dwleak's message for an unknown format names none: $(cat "$tmp/format.err")"
expect "--format's values" "$formats" "$(complete_words dwleak --format '')"
expect "--format=j" "json" "$(complete_words dwleak --format=j)"
expect "--unwind's values" "$(printf '%s\n' both dwarf fp)" "$(complete_words dwleak -p 1 --unwind '')"
for m in dwarf fp both; do
	"$DWLEAK" --unwind "$m" --version > /dev/null 2>&1 || fail "dwleak takes no --unwind $m"
done
expect "--walk's values" "$(printf '%s\n' kernel process)" "$(complete_words dwleak -p 1 --walk '')"
for m in kernel process; do
	"$DWLEAK" --walk "$m" --version > /dev/null 2>&1 || fail "dwleak takes no --walk $m"
done
"$DWLEAK" --walk nowhere --version > /dev/null 2>&1 && fail "dwleak takes --walk nowhere"

# (c) a process of a name of its own: comm is the executable's name
cp /bin/sleep "$tmp/dwlk_cmpl_test"
"$tmp/dwlk_cmpl_test" 60 &
pid=$!
pids+=("$pid")
"$tmp/dwlk_cmpl_test" 60 &
pid2=$!
pids+=("$pid2")
for ((i = 0; i < 100; i++)); do
	[ "$(cat "/proc/$pid/comm" "/proc/$pid2/comm" 2> /dev/null)" = "$(printf 'dwlk_cmpl_test\ndwlk_cmpl_test')" ] && break
	sleep 0.02
done
# the pid alone, or among longer pids that start with it, named
got=$(complete_words dwleak -p "$pid")
[[ $got == "$pid" || $'\n'$got$'\n' == *$'\n'"$pid (dwlk_cmpl_test)"$'\n'* ]] &&
	pass "-p PID (its whole pid): $got" || fail "-p $pid: got [$got]"
expect "-p NAME with two processes of that name: both, named" \
	"$(printf '%s (dwlk_cmpl_test)\n' "$pid" "$pid2" | sort)" "$(complete_words dwleak -p dwlk_cmpl)"
kill "$pid2"
wait "$pid2" 2> /dev/null
expect "-p NAME with one process of that name: its pid" "$pid" "$(complete_words dwleak --leak-check -p dwlk_cmpl)"
got=$(complete_words dwleak -p "")
[[ $'\n'$got$'\n' == *$'\n'"$pid (dwlk_cmpl_test)"$'\n'* ]] && [[ $got == *"1 ("* ]] &&
	pass "-p with nothing typed lists the processes, named" ||
	fail "-p with nothing typed: $(echo "$got" | head -5)"

# (d) files and directories
mkdir "$tmp/files" "$tmp/files/debugdir"
touch "$tmp/files/report.json" "$tmp/files/notes.txt"
cd "$tmp/files" || fail_now "cd $tmp/files"
expect "-o FILE" "$(printf '%s\n' debugdir notes.txt report.json)" "$(complete_words dwleak -o '')"
expect "--suppressions FILE" "notes.txt" "$(complete_words dwleak --suppressions no)"
expect "--debug-dir DIR" "debugdir" "$(complete_words dwleak --debug-dir '')"
expect "symbolize REPORT.json" "$(printf '%s\n' debugdir report.json)" "$(complete_words dwleak symbolize '')"
got=$(complete_words dwleak -t 3 -- ls --colo)
[[ $got == *--color* ]] && pass "after --, the command's own completion (ls --colo: $(echo "$got" | tr '\n' ' '))" ||
	fail "after --: ls --colo gave [$got]"
check_finish
