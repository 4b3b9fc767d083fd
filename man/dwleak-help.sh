#!/bin/bash
# What help2man reads to write dwleak(1): `dwleak --help`, then each other
# command's own --help as a section of its own, then the exit status, so
# that the man page holds every command and option and nothing of it is
# written twice (tests/man_page.sh checks they list the same options).
# help2man runs it with --help or --version; DWLEAK names the dwleak to ask.
set -euo pipefail
dwleak=${DWLEAK:?set DWLEAK to the dwleak whose help becomes the man page}

case ${1:-} in
--version) exec "$dwleak" --version ;;
--help) ;;
*)
	echo "usage: DWLEAK=./dwleak $0 --help|--version" >&2
	exit 2
	;;
esac

main=$("$dwleak" --help)
# "Exit status:" is no heading help2man knows: a section of its own, after
# the commands (help2man orders the sections it does not know as they come)
printf '%s\n' "$main" | sed '/^Exit status:$/,$d'
for c in agent tables symbolize preload; do
	printf '\n*dwleak %s*\n' "$c"
	# a command's examples stay with it, as a sub-section, instead of
	# joining the EXAMPLES section help2man makes of an "Examples:" line
	# and so do its options, its targets and endpoints (the agent's), which
	# help2man would otherwise file under OPTIONS with the trace's
	"$dwleak" "$c" --help | sed -E "s/^(Examples|Options|Targets|Endpoints|Signals)( \(.*\))?:\$/\1 of dwleak $c\2:/"
done
printf '\n*Exit status*\n'
printf '%s\n' "$main" | sed '1,/^Exit status:$/d'
