#!/bin/bash
# dwleak(1) and --help are one source (help2man writes the page from the
# --help texts, man/dwleak-help.sh): (a) the page renders without a warning,
# with every section a man page of a tool like this has; (b) each command's
# options are the same three times over: in its getopt table in cli/, in its
# --help, and in its section of the man page; (c) the report formats of
# --help are the format table's; (d) every environment variable the code
# reads is in ENVIRONMENT; (e) --version, the page and debian/changelog give
# one version.  Needs no root.
# shellcheck source=tests/lib_check.sh
. "$(dirname "$0")/lib_check.sh"
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$BUILD/asan/dwleak}
MAN_PAGE=$BUILD/man/dwleak.1
cd "$ROOT" || fail_now "no $ROOT"
[ -x "$DWLEAK" ] || fail_now "$DWLEAK is missing (make check)"
[ -s "$MAN_PAGE" ] || fail_now "$MAN_PAGE is missing (make man)"
command -v man > /dev/null || fail_now "man is missing (Debian: man-db, which .ci/deps.sh installs)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dwleak-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# (a) rendered as man does, groff's warnings on (lintian's check)
if ! MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l "$MAN_PAGE" > "$tmp/page.txt" 2> "$tmp/warn"; then
	fail "man cannot render $MAN_PAGE: $(head -3 "$tmp/warn")"
elif [ -s "$tmp/warn" ]; then
	fail "man warns on $MAN_PAGE: $(head -5 "$tmp/warn")"
else
	pass "man renders dwleak(1) without a warning ($(wc -l < "$tmp/page.txt") lines)"
fi

for c in trace agent tables symbolize preload; do
	if [ $c = trace ]; then
		"$DWLEAK" --help > "$tmp/help.$c"
	else
		"$DWLEAK" $c --help > "$tmp/help.$c"
	fi || fail "dwleak $c --help exited $?"
done
"$DWLEAK" --format no-such-format -p 1 > /dev/null 2> "$tmp/format.err"
"$DWLEAK" --version > "$tmp/version"

# its exit status is the number of its failed checks (a crash: 1)
python3 - "$MAN_PAGE" "$tmp" << 'PY'
import re, subprocess, sys
page, tmp = sys.argv[1], sys.argv[2]
roff = open(page).read().split("\n")
failed = 0
def fail(msg):
    global failed
    failed += 1
    print("FAIL: " + msg)
def ok(msg):
    print("ok: " + msg)

def plain(line):
    # roff to text: font changes, escaped hyphens and zero-width escapes out
    line = re.sub(r"\\f(\(..|\[[^]]*\]|.)", "", line)
    return line.replace("\\-", "-").replace("\\&", "").replace("\\(co", "(c)").strip()

# the page's sections, each as its lines, and each .TP/.HP tag with its section
sections, tags, sect = {}, [], None
for i, line in enumerate(roff):
    m = re.match(r'\.SH\s+"?([^"]*)"?', line)
    if m:
        sect = m.group(1).strip()
        sections[sect] = []
        continue
    if sect is not None:
        sections[sect].append(line)
    if line in (".TP", ".HP") and i + 1 < len(roff):
        tags.append((sect, plain(roff[i + 1])))

# an option entry names its options before its argument: "-p, --pid PID",
# "--fail-on-leak[=BYTES]"
def entry_options(tag):
    names = set()
    for part in tag.split(", "):
        m = re.match(r"(--?[A-Za-z0-9][A-Za-z0-9-]*)", part)
        if not m or not part.startswith("-"):
            return set()
        names.add(m.group(1))
    return names

def help_options(text):
    names = set()
    for line in text.split("\n"):
        # what help2man reads as an option: indented 1-10, a dash
        m = re.match(r"^ {1,10}(-\S.*?)(?:  +|$)", line)
        if m:
            got = entry_options(m.group(1))
            if not got:
                fail("a --help line that looks like an option but names none: %r" % line)
            names |= got
    return names

def code_options(src, var):
    text = open(src).read()
    m = re.search(r"struct option %s\[\] = \{(.*?)\n\};" % var, text, re.S)
    longs = {"--" + n for n in re.findall(r'\{ "([^"]+)",', m.group(1))}
    m = re.search(r'getopt_long\([^,]+, [^,]+, "([^"]*)"', text)
    shorts = {"-" + c for c in m.group(1) if c.isalnum()}
    return longs | shorts

# (b) per command: the code's table, its --help, its part of the page
commands = {
    "trace": (code_options("cli/cmd_trace.c", "trace_options"), ("OPTIONS",)),
    "agent": (code_options("cli/cmd_agent.c", "agent_options"), ("DWLEAK AGENT",)),
    "tables": (code_options("cli/cmd_tables.c", "tables_options"), ("DWLEAK TABLES",)),
    "symbolize": (code_options("cli/cmd_symbolize.c", "symbolize_options"), ("DWLEAK SYMBOLIZE",)),
    # cmd_preload.c takes -h and --help only, by hand
    "preload": ({"-h", "--help"}, ("DWLEAK PRELOAD",)),
}
for cmd, (code, sects) in commands.items():
    helped = help_options(open("%s/help.%s" % (tmp, cmd)).read())
    paged = set()
    for sect, tag in tags:
        if sect in sects:
            paged |= entry_options(tag)
    same = True
    for what, got in (("its --help", helped), ("dwleak(1)", paged)):
        if got != code:
            same = False
            fail("%s: the code's options and %s differ: only in the code %s, only in %s %s" % (
                cmd, what, sorted(code - got), what, sorted(got - code)))
    if same:
        ok("%s: %d options in the code, its --help and dwleak(1) alike" % (cmd, len(code)))

# (c) the report formats --help describes are the format table's
m = re.search(r"it takes ([a-z, ]+)\)", open(tmp + "/format.err").read())
table = set(m.group(1).split(", ")) if m else set()
text = open(tmp + "/help.trace").read()
block = re.search(r"^Report formats:\n((?:  .*\n)+)", text, re.M)
described = set(re.findall(r"^  ([a-z]+) {2,}", block.group(1), re.M)) if block else set()
if not table or described != table:
    fail("--help's report formats %s, the format table's %s" % (sorted(described), sorted(table)))
else:
    ok("--help describes every format of the table: %s" % ", ".join(sorted(table)))

# (a) the sections
want = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "DWLEAK TABLES", "DWLEAK SYMBOLIZE",
        "DWLEAK PRELOAD", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"]
missing = [s for s in want if s not in sections]
if missing:
    fail("dwleak(1) lacks %s (has %s)" % (missing, list(sections)))
else:
    ok("dwleak(1) has its %d sections" % len(want))
see = " ".join(plain(l) for l in sections.get("SEE ALSO", []))
for ref in ("valgrind (1)", "heaptrack (1)", "perf (1)", "bpftrace (8)"):
    if ref.replace(" ", "") not in see.replace(" ", ""):
        fail("SEE ALSO lacks %s: %s" % (ref, see))
synopsis = " ".join(plain(l) for l in sections.get("SYNOPSIS", []))
for way in ("-p PID", "-- CMD", "tables", "symbolize", "preload"):
    if way not in synopsis:
        fail("SYNOPSIS lacks %s: %s" % (way, synopsis))

# (d) every variable the code reads, by name or through a #define
env = " ".join(plain(l) for l in sections.get("ENVIRONMENT", []))
src = subprocess.run("cat base/*.h bpf/*.c bpf/abi/*.h cli/*.[ch] leakcheck/*.[ch] report/*.[ch] "
                     "session/*.[ch] tables/*.[ch] target/*.[ch] unwinder/*.[ch]",
                     shell=True, capture_output=True, text=True).stdout
defines = dict(re.findall(r'#define\s+(\w+)\s+"([A-Z_]+)"', src))
read = set(re.findall(r'getenv\("([A-Z_]+)"\)', src))
read |= {defines[n] for n in re.findall(r"getenv\((\w+)\)", src) if n in defines}
undocumented = sorted(v for v in read if not re.search(r"\b%s\b" % v, env))
if not read or undocumented:
    fail("ENVIRONMENT does not say what these are: %s (the code reads %s)" % (undocumented, sorted(read)))
else:
    ok("ENVIRONMENT has the %d variables the code reads: %s" % (len(read), ", ".join(sorted(read))))

# (e) one version
changelog = open("debian/changelog").readline()
version = re.match(r"\S+ \(([^)]+)\)", changelog).group(1)
said = open(tmp + "/version").readline().split()
th = next((l for l in roff if l.startswith(".TH")), "")
if said[:2] != ["dwleak", version]:
    fail("dwleak --version says %s, debian/changelog %s" % (" ".join(said), version))
elif '"dwleak %s"' % version not in th:
    fail("dwleak(1)'s .TH line is %s, not of version %s" % (th, version))
else:
    ok("dwleak --version, dwleak(1) and debian/changelog say version %s %s" % (version, " ".join(said[2:])))
sys.exit(min(failed, 100))
PY
check_errors=$((check_errors + $?))
check_finish
