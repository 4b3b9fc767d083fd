/* The trace command's command line (dwleak -p PID / dwleak -- CMD): the
 * options of SPEC.md and the environment knobs, parsed once into a
 * struct env for the tracer. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwleak.h"
#include "fetch.h"
#include "options.h"
#include "trace.h"

#include "version.h" /* DWLEAK_VERSION, DWLEAK_COMMIT: written by the Makefile */

enum trace_opt_key {
	OPT_UNWIND = 0x100,
	OPT_MIN_AGE,
	OPT_FORMAT,
	OPT_MMAP,
	OPT_SAMPLE_BYTES,
	OPT_DEBUG_DIR,
	OPT_FAIL_ON_LEAK,
	OPT_SUPPRESSIONS,
	OPT_VERSION,
	OPT_STATS,
	OPT_NO_DEFAULT_SUPP,
	OPT_FOLLOW_FORKS,
	OPT_NO_FOLLOW_FORKS,
	OPT_LEAK_CHECK,
	OPT_NO_PRELOAD,
	OPT_NO_INJECT,
	OPT_ALLOW_UNTRACED,
	OPT_WALK,
};

static const struct option trace_options[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "duration", required_argument, NULL, 'd' },
	{ "interval", required_argument, NULL, 'i' },
	{ "top", required_argument, NULL, 't' },
	{ "unwind", required_argument, NULL, OPT_UNWIND },
	{ "min-age", required_argument, NULL, OPT_MIN_AGE },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "output", required_argument, NULL, 'o' },
	{ "mmap", no_argument, NULL, OPT_MMAP },
	{ "sample-bytes", required_argument, NULL, OPT_SAMPLE_BYTES },
	{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
	{ "fail-on-leak", optional_argument, NULL, OPT_FAIL_ON_LEAK },
	{ "suppressions", required_argument, NULL, OPT_SUPPRESSIONS },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ "stats", no_argument, NULL, OPT_STATS },
	{ "no-default-suppressions", no_argument, NULL, OPT_NO_DEFAULT_SUPP },
	{ "follow-forks", no_argument, NULL, OPT_FOLLOW_FORKS },
	{ "leak-check", no_argument, NULL, OPT_LEAK_CHECK },
	{ "no-follow-forks", no_argument, NULL, OPT_NO_FOLLOW_FORKS },
	{ "no-preload", no_argument, NULL, OPT_NO_PRELOAD },
	{ "no-inject", no_argument, NULL, OPT_NO_INJECT },
	{ "allow-untraced", no_argument, NULL, OPT_ALLOW_UNTRACED },
	{ "walk", required_argument, NULL, OPT_WALK },
	{ NULL, 0, NULL, 0 },
};

static const char trace_usage[] =
	"Usage: dwleak -p PID [OPTION]...\n"
	"  or:  dwleak [OPTION]... -- CMD [ARG]...\n"
	"  or:  dwleak tables [OPTION]... FILE...\n"
	"  or:  dwleak symbolize [OPTION]... REPORT.json\n"
	"  or:  dwleak preload\n"
	"  or:  dwleak agent TARGET... [OPTION]...\n"
	"Find memory leaks in a running process, or in a command and every process it\n"
	"starts: report the allocations still outstanding, grouped by the stack that\n"
	"made them.  dwleak puts eBPF uprobes on the allocator each process really\n"
	"calls (glibc, tcmalloc, jemalloc, mimalloc, or a program's own malloc and C++\n"
	"operators) and walks its stack in the kernel with DWARF CFI: no frame\n"
	"pointers, recompilation or restart needed.  It needs root (CAP_BPF and\n"
	"CAP_PERFMON).\n"
	"\n"
	"With -p PID, dwleak attaches to a running process (all its threads) until\n"
	"Ctrl-C, SIGTERM, --duration or the process's exit, and writes the report to\n"
	"stdout.  With -- CMD, it starts CMD and traces it from its first instruction,\n"
	"with every process it forks or execs (sh -c, env, timeout, test runners), each\n"
	"reported apart, when the last of them has exited; the report goes to stderr,\n"
	"since CMD's stdout is CMD's own.  A process it cannot trace (a static program\n"
	"without symbols) is still followed to its end, and the report lists it.\n"
	"\n"
	"dwleak traces a process at the probe sites of its own library,\n"
	"libdwleak-preload.so, without a trap per call: -- CMD preloads it, -p loads it\n"
	"into a process that runs without it (one of its threads makes one call at a\n"
	"safe point, the others run on), and a process started with\n"
	"LD_PRELOAD=$(dwleak preload) has it already.  What cannot have it (a static or\n"
	"setuid program, --no-inject, --no-preload, --mmap) is traced with uprobes.\n"
	"\n"
	"Options:\n"
	"What to trace:\n"
	"  -p, --pid PID            trace this running process (all its threads)\n"
	"  -d, --duration SEC       stop after SEC seconds (default: Ctrl-C, SIGTERM or\n"
	"                           the end of what is traced)\n"
	"  -i, --interval SEC       also print a text report every SEC seconds (to stdout\n"
	"                           with -p, stderr with -- CMD, also with -o)\n"
	"      --follow-forks       with -p, also trace children forked after attach\n"
	"      --no-follow-forks    with -- CMD, trace only CMD's first process\n"
	"      --no-preload         with -- CMD, do not preload libdwleak-preload.so:\n"
	"                           trace every process with uprobes on its allocator.\n"
	"                           By default CMD runs with it, and a process that has\n"
	"                           it (also with -p) is traced at its probe sites: no\n"
	"                           trap per call, and with --sample-bytes the library\n"
	"                           samples in the process\n"
	"      --no-inject          with -p, do not load libdwleak-preload.so into a\n"
	"                           process that runs without it: trace it with uprobes\n"
	"                           (a trap per call).  By default dwleak loads it and\n"
	"                           routes the process's allocator calls through it; when\n"
	"                           dwleak ends, the library stays, idle\n"
	"      --mmap               also track anonymous mmap/munmap made outside the\n"
	"                           allocator\n"
	"      --sample-bytes N     sample allocations, one per N bytes on average (0 =\n"
	"                           all, the default); bytes and counts become unbiased\n"
	"                           estimates whose relative error for a stack of B\n"
	"                           bytes is about sqrt(N/B): the cheap way to watch a\n"
	"                           busy process (calls not sampled are not walked and,\n"
	"                           on Linux 6.13+, skip their return probe)\n"
	"      --unwind MODE        dwarf (default), fp, or both: walk every allocation\n"
	"                           both ways and show, stack by stack, the frames the\n"
	"                           frame-pointer walk loses\n"
	"      --walk WHERE         process (default) or kernel: where a process with\n"
	"                           the preload library has its stacks walked.\n"
	"                           process: the library walks each traced call's stack\n"
	"                           itself (dwarf over the tables dwleak compiled, or\n"
	"                           fp) into per-thread rings dwleak drains every few\n"
	"                           ms, no kernel entry per call; kernel: dwleak's BPF\n"
	"                           program walks at the library's sites, as it does\n"
	"                           for a process under a seccomp filter, one that\n"
	"                           installs a filter later (from then on), and with\n"
	"                           --unwind both"
	"\n"
	"Lost or still in use:\n"
	"      --leak-check         tell lost from reachable, as valgrind does: stop the\n"
	"                           process briefly (at exit() with -- CMD, before each\n"
	"                           report with -p), scan its memory for pointers, and\n"
	"                           mark each block definitely, indirectly or possibly\n"
	"                           lost, or still reachable (a cache, a global);\n"
	"                           with --sample-bytes every block is still classified\n"
	"                           (the preload library indexes them all): exact\n"
	"                           totals, and each sampled stack's kinds estimated\n"
	"      --fail-on-leak[=BYTES]\n"
	"                           exit 1 when leaked bytes exceed BYTES (default 0);\n"
	"                           with --leak-check only lost bytes count; when a\n"
	"                           process of the tree could not be traced and nothing\n"
	"                           traced is over BYTES, exit 2 (its leaks are unknown)\n"
	"      --allow-untraced     let --fail-on-leak pass though some process could\n"
	"                           not be traced (the report still lists it)\n"
	"      --suppressions FILE  stacks to leave out of reports and --fail-on-leak\n"
	"                           (repeatable): dwleak's rules (fun:GLOB, mod:GLOB,\n"
	"                           ... one per paragraph) and memcheck's { } blocks, in\n"
	"                           one file or several; of memcheck's only Memcheck:Leak\n"
	"                           ones apply, fun: matches mangled or demangled names,\n"
	"                           and a match-leak-kinds rule leaves out a stack only\n"
	"                           when every kind its blocks have is listed\n"
	"      --no-default-suppressions\n"
	"                           also report what glibc and libstdc++ keep until exit\n"
	"                           on purpose (stdio buffers, the C++ EH pool: the rules\n"
	"                           of /usr/share/dwleak/default.supp, built in)\n"
	"\n"
	"The report:\n"
	"  -t, --top N              stacks per report (default 10; 0 = all)\n"
	"      --min-age SEC        count only allocations at least SEC seconds old\n"
	"      --format FMT         text (default), json, folded, pprof or svg\n"
	"  -o, --output FILE        write the final report to FILE instead of stdout (-p)\n"
	"                           or stderr (-- CMD); needed for json, folded, svg and\n"
	"                           pprof with -- CMD, and for pprof to a terminal\n"
	"      --debug-dir DIR      also look for separate debug files under DIR, by\n"
	"                           build id and by .gnu_debuglink name (repeatable)\n"
	"      --stats              also print the walker's counters (why walks stopped)\n"
	"\n"
	"Help:\n"
	"  -h, --help               show this help\n"
	"      --version            show the version\n"
	"\n"
	"Report formats:\n"
	"  text                     stacks, most bytes first, innermost frame first, with\n"
	"                           function+offset [object] file:line; with --leak-check\n"
	"                           memcheck's loss records and LEAK SUMMARY\n"
	"  json                     every stack with its frames, totals, the process tree\n"
	"                           and what was lost on the way; dwleak symbolize reads\n"
	"                           it back\n"
	"  folded                   one line per stack, outer;...;inner BYTES: input for\n"
	"                           FlameGraph, inferno and speedscope\n"
	"  pprof                    gzip-compressed profile.proto (inuse_space,\n"
	"                           inuse_objects, build ids) for go tool pprof, Parca\n"
	"                           and Grafana Pyroscope\n"
	"  svg                      a self-contained interactive flame graph of the\n"
	"                           outstanding bytes (click to zoom, Ctrl-F to search)\n"
	"\n"
	"Naming frames:\n"
	"  Frames are named from each object's symbols and DWARF, and from its separate\n"
	"  debug file: next to it (.gnu_debuglink, .debug/), by build id under\n"
	"  /usr/lib/debug (Debian's -dbgsym packages) and under every --debug-dir.  When\n"
	"  DEBUGINFOD_URLS is set, what is still missing is fetched by build id from\n"
	"  those servers once the report is made (never while a traced process waits),\n"
	"  kept in debuginfod's cache, and the report says what could not be fetched.\n"
	"\n"
	"Commands (dwleak COMMAND --help says more):\n"
	"  tables FILE...           compile, print, or --verify against libdw, the unwind\n"
	"                           tables dwleak's walker uses (a debug aid)\n"
	"  symbolize REPORT.json    name a JSON report's frames again, from the objects\n"
	"                           and debug files found here (--debug-dir, debuginfod)\n"
	"  preload                  print the path of libdwleak-preload.so\n"
	"  agent TARGET...          a long-running service: traces the processes of\n"
	"                           --pid, --comm, --unit, --cgroup as they come and go,\n"
	"                           serves /metrics and /debug/pprof/heap over HTTP, and\n"
	"                           writes a report when the OOM killer picks one\n"
	"\n"
	"Examples:\n"
	"  dwleak -p 1234 -d 30     what process 1234 allocates in 30 seconds and has\n"
	"                           not freed, by stack\n"
	"  dwleak -t 3 -- ./app --config test.conf\n"
	"                           run ./app under dwleak; its 3 biggest stacks of\n"
	"                           outstanding memory on stderr once it has exited\n"
	"  dwleak -- ./filter < in | sort\n"
	"                           the report on stderr; stdout is ./filter's\n"
	"  dwleak --leak-check --fail-on-leak -- make test\n"
	"                           CI: fail when memory is lost (not merely held) in\n"
	"                           any process the tests start\n"
	"  dwleak --fail-on-leak=4096 -- ./tests\n"
	"                           CI: fail when more than 4 KiB are outstanding\n"
	"  dwleak --leak-check -p 1234 -i 600\n"
	"                           a verdict every 10 minutes on a live service\n"
	"  dwleak --format svg -o leaks.svg -p 1234 -d 60\n"
	"                           an interactive flame graph of a minute's leaks\n"
	"  dwleak --format json -o leaks.json -- ./app-stripped\n"
	"                           in CI: a report on stripped binaries, to name later\n"
	"  dwleak symbolize --debug-dir ./debug -o named.json leaks.json\n"
	"                           that report named where the debug files are\n"
	"  dwleak -p 1234 --sample-bytes 524288 -d 60\n"
	"                           a running service at the library's cost: the\n"
	"                           library loaded into it, sampled\n"
	"  LD_PRELOAD=$(dwleak preload) ./server &  dwleak -p $!\n"
	"                           a service started with the preload library, traced\n"
	"                           at its sites when needed\n"
	"  DEBUGINFOD_URLS=https://debuginfod.debian.net dwleak -p 1234\n"
	"                           names and lines for libraries whose -dbgsym package\n"
	"                           is not installed\n"
	"  dwleak --unwind both -- ./app\n"
	"                           what the frame-pointer walk loses, stack by stack\n"
	"\n"
	"Environment:\n"
	"  DEBUGINFOD_URLS          debuginfod servers (URLs separated by spaces) to\n"
	"                           fetch missing debug information from by build id;\n"
	"                           unset (Debian's default): no lookups.  sudo drops\n"
	"                           it: sudo --preserve-env=DEBUGINFOD_URLS dwleak ...\n"
	"  DEBUGINFOD_CACHE_PATH, DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXTIME, ...\n"
	"                           read by libdebuginfod, as for debuginfod-find(1)\n"
	"  DWLEAK_DEBUGINFOD_SECONDS\n"
	"                           the most time a run's debuginfod lookups take all\n"
	"                           together (default 120)\n"
	"  DWLEAK_PRELOAD_LIB       the preload library to use instead of the one found\n"
	"                           next to dwleak or installed with it\n"
	"  DWLEAK_NO_CACHE=1        compile unwind tables afresh, without the table cache\n"
	"  DWLEAK_DEBUG=1           print libbpf's messages (the verifier's log when\n"
	"                           loading fails)\n"
	"  DWLEAK_UPROBE_SESSION=1|0\n"
	"                           probe allocator calls with uprobe sessions or with\n"
	"                           entry and return probes (default: sessions with\n"
	"                           --sample-bytes, where they pay off, on Linux 6.13+)\n"
	"  DWLEAK_LEAK_CHECK_STOP=1 keep a running process stopped while --leak-check\n"
	"                           reads its memory, instead of reading a copy-on-write\n"
	"                           snapshot of it while it runs on\n"
	"  DWLEAK_PREEMPT_GUARD=1|0\n"
	"                           force on or off the guard that keeps probes preempted\n"
	"                           mid-walk (preempt=full or lazy kernels) from sharing\n"
	"                           a CPU's walker buffers; --stats says which was chosen\n"
	"\n"
	"Exit status:\n"
	"  0 success; 1 leaks over --fail-on-leak; 2 a usage or runtime error (and a\n"
	"  failure of --fail-on-leak because part of the tree was not traced).  When\n"
	"  the CMD of -- CMD fails, its status (128+N when killed by signal N), which\n"
	"  wins over all of these; dwleak returns once the whole tree it started ended.\n";

static int trace_usage_error(const char *fmt, const char *arg)
{
	return usage_error("dwleak", fmt, arg);
}

/* An unknown --format ARG, said with the formats of the one table
 * (report/write.h) that the bash completion is tested against. */
static int format_usage_error(const char *arg)
{
	fprintf(stderr, "dwleak: unknown --format '%s' (it takes %s)\n", arg, report_format_list);
	fprintf(stderr, "Try 'dwleak --help' for more information.\n");
	return EXIT_USAGE;
}

/* A number of seconds for option NAME, 0 or in [MIN, a year]: 0, or an
 * exit status after saying what is wrong. */
static int seconds_option(const char *name, const char *arg, double min, double *out)
{
	char msg[160];
	int err = parse_seconds(arg, min, SECONDS_MAX, out);

	if (!err)
		return 0;
	if (err == -ERANGE)
		snprintf(msg, sizeof(msg), min ? "%s '%%s': give 0 or between %g and %.0f seconds (a year)"
					       : "%s '%%s': give at most %.0f seconds (a year)",
			 name, min ? min : SECONDS_MAX, SECONDS_MAX);
	else
		snprintf(msg, sizeof(msg), "%s '%%s': give a number of seconds", name);
	return trace_usage_error(msg, arg);
}

/* Whether --follow-forks or --no-follow-forks was given (else the
 * default: follow with -- CMD, not with -p). */
static bool follow_given;

/* Applies one option C (argument ARG) to ENV; 0 or an exit status. */
static int option_apply(struct env *env, int c, const char *arg)
{
	long long v;

	switch (c) {
	case 'p':
		if (env->pid)
			return trace_usage_error("-p %s: one process at a time (give -p once; --follow-forks "
						 "also traces its children)", arg);
		if (parse_count(arg, 1, INT_MAX, &v))
			return trace_usage_error("invalid pid '%s'", arg);
		env->pid = (long)v;
		return 0;
	case 'd':
		return seconds_option("--duration", arg, 0, &env->duration_s);
	case 'i':
		/* reports come at most every poll (0.1 s) */
		return seconds_option("--interval", arg, 0.1, &env->interval_s);
	case OPT_MIN_AGE:
		return seconds_option("--min-age", arg, 0, &env->min_age_s);
	case 't':
		if (parse_count(arg, 0, INT_MAX, &v))
			return trace_usage_error("invalid --top '%s'", arg);
		env->top = (long)v;
		return 0;
	case OPT_UNWIND:
		return unwind_mode_parse(arg, &env->unwind)
			       ? trace_usage_error("--unwind takes dwarf, fp or both, not '%s'", arg)
			       : 0;
	case OPT_FORMAT:
		if (report_format_parse(arg, &env->format))
			return format_usage_error(arg);
		return 0;
	case OPT_SAMPLE_BYTES:
		return parse_count(arg, 0, LLONG_MAX, &env->sample_bytes)
			       ? trace_usage_error("invalid --sample-bytes '%s'", arg)
			       : 0;
	case OPT_FAIL_ON_LEAK:
		env->fail_on_leak = true;
		if (arg && parse_count(arg, 0, LLONG_MAX, &env->fail_bytes))
			return trace_usage_error("invalid --fail-on-leak '%s'", arg);
		return 0;
	case 'o':
		env->output = arg;
		return 0;
	case OPT_SUPPRESSIONS: {
		/* repeatable, as memcheck's: a file of memcheck's beside one's own */
		const char **grown = realloc(env->suppressions, (env->nsuppressions + 1) * sizeof(*grown));

		if (!grown)
			return trace_usage_error("%s", "out of memory");
		env->suppressions = grown;
		env->suppressions[env->nsuppressions++] = arg;
		return 0;
	}
	case OPT_MMAP:
		env->mmap = true;
		return 0;
	case OPT_DEBUG_DIR:
		return debug_dir_option("dwleak", &env->debug_dirs, &env->ndebug_dirs, arg);
	case OPT_STATS:
		env->stats = true;
		return 0;
	case OPT_NO_DEFAULT_SUPP:
		env->no_default_suppressions = true;
		return 0;
	case OPT_LEAK_CHECK:
		env->leak_check = true;
		return 0;
	case OPT_WALK:
		if (strcmp(arg, "kernel") && strcmp(arg, "process"))
			return trace_usage_error("--walk takes kernel or process, not '%s'", arg);
		env->walk_in_process = !strcmp(arg, "process");
		return 0;
	case OPT_NO_INJECT:
		env->no_inject = true;
		return 0;
	case OPT_NO_PRELOAD:
		env->no_preload = true;
		return 0;
	case OPT_ALLOW_UNTRACED:
		env->allow_untraced = true;
		return 0;
	case OPT_FOLLOW_FORKS:
	case OPT_NO_FOLLOW_FORKS:
		env->follow_forks = c == OPT_FOLLOW_FORKS;
		follow_given = true;
		return 0;
	default:
		return trace_usage_error("%s", "unknown option");
	}
}

/* The environment: debuginfod's settings and the knobs for tests and
 * bench/, read once.  Returns 0 or an exit status. */
static int env_knobs_read(struct env *env)
{
	const char *session = getenv("DWLEAK_UPROBE_SESSION");
	const char *guard = getenv("DWLEAK_PREEMPT_GUARD");
	const char *no_walk = getenv("DWLEAK_BENCH_NO_WALK");
	const char *stacks_max = getenv("DWLEAK_STACKS_MAX");
	const char *stop = getenv("DWLEAK_LEAK_CHECK_STOP");
	char *end = NULL;
	unsigned long n;

	if (fetch_settings("dwleak", &env->fetch))
		return EXIT_USAGE;
	env->uprobe_session = session ? !strcmp(session, "1") : -1;
	env->bench_no_walk = no_walk && !strcmp(no_walk, "1");
	env->leak_check_stop = stop && !strcmp(stop, "1");
	if (stacks_max && *stacks_max) {
		errno = 0;
		n = strtoul(stacks_max, &end, 10);
		if (errno || *end || n < 1 || n > (1ul << 24)) {
			fprintf(stderr, "dwleak: DWLEAK_STACKS_MAX=%s: want a number of entries from 1 to %lu\n",
				stacks_max, 1ul << 24);
			return EXIT_USAGE;
		}
		env->stacks_max = (uint32_t)n;
	}
	env->preempt_guard = -1;
	if (!guard || !*guard)
		return 0;
	if (!strcmp(guard, "0"))
		env->preempt_guard = PREEMPT_GUARD_OFF;
	else if (!strcmp(guard, "1"))
		env->preempt_guard = PREEMPT_GUARD_ON;
	else if (!strcmp(guard, "busy"))
		env->preempt_guard = PREEMPT_GUARD_BUSY;
	else {
		fprintf(stderr, "dwleak: DWLEAK_PREEMPT_GUARD=%s: want 0, 1 or busy\n", guard);
		return EXIT_USAGE;
	}
	return 0;
}

int cmd_trace_parse(struct env *env, int argc, char **argv)
{
	int c, ret;

	*env = (struct env){ .top = 10, .unwind = UNWIND_MODE_DWARF, .format = REPORT_FORMAT_TEXT,
			     .walk_in_process = true };
	opterr = 0; /* reported below, with the usual hint */
	while ((c = getopt_long(argc, argv, "+p:d:i:t:o:h", trace_options, NULL)) != -1) {
		if (c == 'h') {
			fputs(trace_usage, stdout);
			return 0;
		}
		if (c == OPT_VERSION) {
			/* help2man reads the first line: the name, then the version */
			printf("dwleak %s%s%s%s\n", DWLEAK_VERSION, *DWLEAK_COMMIT ? " (git " : "", DWLEAK_COMMIT,
			       *DWLEAK_COMMIT ? ")" : "");
			return 0;
		}
		if (c == '?')
			return trace_usage_error("unknown option or missing argument '%s'", argv[optind - 1]);
		ret = option_apply(env, c, optarg);
		if (ret)
			return ret;
	}
	if (optind < argc)
		env->cmd = &argv[optind];
	if (env->cmd && !env->cmd[0][0])
		return trace_usage_error("%s", "the command after -- is empty");
	/* -- CMD writes its report to stderr, which the command and dwleak's
	 * own messages share: a file another program reads would come out
	 * with them inside it */
	if (env->cmd && !env->output && report_format_is_structured(env->format)) {
		fprintf(stderr, "dwleak: --format %s writes a file a program reads, and with -- CMD the report "
				"goes to stderr, which the command's and dwleak's messages share: give -o FILE\n",
			report_format_name(env->format));
		return EXIT_USAGE;
	}
	/* a sampled block may be reachable only through blocks never sampled:
	 * a sampled check reads every block from the preload library's index,
	 * which only the library keeps */
	if (env->leak_check && env->sample_bytes && (env->no_preload || env->no_inject || env->mmap)) {
		const char *way = env->mmap ? "--mmap" : env->no_preload ? "--no-preload" : "--no-inject";

		fprintf(stderr, "dwleak: --leak-check with --sample-bytes classifies every block from the preload "
				"library's index of live blocks, and %s traces with uprobes, which see only the "
				"sample: drop %s, or --sample-bytes\n",
			way, way);
		return EXIT_USAGE;
	}
	if (!env->pid == !env->cmd)
		return trace_usage_error("%s", env->pid ? "give either -p PID or -- CMD, not both"
							: "nothing to trace: give -p PID or -- CMD");
	if (!follow_given)
		env->follow_forks = env->cmd != NULL;
	ret = env_knobs_read(env);
	return ret ? ret : -1;
}

void cmd_trace_free(struct env *env)
{
	free(env->debug_dirs);
	env->debug_dirs = NULL;
	free(env->suppressions);
	env->suppressions = NULL;
	env->nsuppressions = 0;
}
