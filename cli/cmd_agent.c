/* `dwleak agent`'s command line: the targets and options of SPEC.md
 * ("Agent") and a few of its own, parsed once into a struct agent_env,
 * with a --help that shows how the agent is used with the tools that
 * scrape it. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "options.h"

#define AGENT_COMMAND "dwleak agent"

enum agent_opt_key {
	OPT_PID = 0x100,
	OPT_COMM,
	OPT_UNIT,
	OPT_CGROUP,
	OPT_LISTEN,
	OPT_TOKEN,
	OPT_REPORT_DIR,
	OPT_SAMPLE_BYTES,
	OPT_UPROBES,
	OPT_NO_INJECT,
	OPT_LEAK_CHECK_EVERY,
	OPT_MAX_STACKS,
	OPT_DEBUG_DIR,
	OPT_WALK,
};

static const struct option agent_options[] = {
	{ "pid", required_argument, NULL, OPT_PID },
	{ "comm", required_argument, NULL, OPT_COMM },
	{ "unit", required_argument, NULL, OPT_UNIT },
	{ "cgroup", required_argument, NULL, OPT_CGROUP },
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "auth-token-file", required_argument, NULL, OPT_TOKEN },
	{ "report-dir", required_argument, NULL, OPT_REPORT_DIR },
	{ "sample-bytes", required_argument, NULL, OPT_SAMPLE_BYTES },
	{ "uprobes", no_argument, NULL, OPT_UPROBES },
	{ "no-inject", no_argument, NULL, OPT_NO_INJECT },
	{ "leak-check-every", required_argument, NULL, OPT_LEAK_CHECK_EVERY },
	{ "max-stacks", required_argument, NULL, OPT_MAX_STACKS },
	{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
	{ "walk", required_argument, NULL, OPT_WALK },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static const char agent_usage[] =
	"Usage: dwleak agent TARGET... [OPTIONS]\n"
	"\n"
	"A long-running service: traces the processes its targets name as they\n"
	"start and exit, and serves their outstanding native heap over HTTP, to\n"
	"Prometheus (/metrics) and to pprof, Parca or Grafana Pyroscope\n"
	"(/debug/pprof/heap).  Sampled by default, at the preload library's sites:\n"
	"a process started with LD_PRELOAD=$(dwleak preload) costs little to watch,\n"
	"and one started without it gets the library loaded into it while it runs\n"
	"(as dwleak -p does).  One that cannot take it (a static or setuid program,\n"
	"--no-inject) is skipped, the log says why, unless --uprobes.  When the OOM killer picks a traced process, a report of what\n"
	"it held and what grew most is written to --report-dir before it is gone.\n"
	"\n"
	"Targets (repeatable, combinable; later processes are found as they start):\n"
	"      --pid PID            this process\n"
	"      --comm NAME          every process named NAME (/proc/PID/comm)\n"
	"      --unit NAME.service  the processes of a systemd unit\n"
	"      --cgroup PATH        the processes of a cgroup directory and its children\n"
	"                           (cgroup v2, or a v1 hierarchy such as\n"
	"                           /sys/fs/cgroup/memory/... on hybrid hosts)\n"
	"\n"
	"Options:\n"
	"      --listen ADDR:PORT   where to serve HTTP (default " AGENT_HTTP_LISTEN_DEFAULT "); an address\n"
	"                           other than loopback needs --auth-token-file\n"
	"      --auth-token-file FILE  requests must carry 'Authorization: Bearer TOKEN',\n"
	"                           TOKEN the file's first line (16+ characters; the file\n"
	"                           root's or ours, not readable by others)\n"
	"      --report-dir DIR     write oom-PID-TIME.json and .txt here when the OOM\n"
	"                           killer picks a traced process\n"
	"      --sample-bytes N     sample one allocation per N bytes on average (default\n"
	"                           524288; 0 = every allocation, exact, and costly)\n"
	"      --uprobes            trace processes that cannot have the preload library\n"
	"                           with uprobes (a trap per allocator call) instead of\n"
	"                           skipping them\n"
	"      --no-inject          do not load the library into processes started\n"
	"                           without it: skip them (or --uprobes)\n"
	"      --leak-check-every SEC  classify every outstanding block (lost or still\n"
	"                           reachable) every SEC seconds; sampled, the library\n"
	"                           then also indexes every block (exact totals, each\n"
	"                           stack's kinds estimated); POST /leak-check?pid=N\n"
	"                           runs one now\n"
	"      --max-stacks N       stacks kept per process in reports (default 10000; 0 = no\n"
	"                           bound): the least recently grown are folded into one\n"
	"                           counted [evicted] stack, their bytes kept\n"
	"      --debug-dir DIR      extra place to look for debug files (repeatable)\n"
	"      --walk WHERE         process (default) or kernel: where a traced call's\n"
	"                           stack is walked in a process with the library (the\n"
	"                           library itself, into rings dwleak drains; or\n"
	"                           dwleak's BPF program at its sites)\n"
	"  -h, --help               show this help\n"
	"\n"
	"Endpoints:\n"
	"  GET /metrics                    Prometheus text: dwleak_outstanding_bytes and\n"
	"                                  more per process (pid, comm labels)\n"
	"  GET /debug/pprof/heap[?pid=N]   gzip'd profile.proto (inuse_space, inuse_objects)\n"
	"  GET /report?pid=N&format=F      json (default), text, folded, svg or pprof\n"
	"  ?peak=1 on both                 the heap at the highest total the agent saw\n"
	"  POST /leak-check?pid=N          a leak check now (--sample-bytes 0 or\n"
	"                                  --leak-check-every)\n"
	"\n"
	"Signals: SIGHUP resolves the targets again and traces new members; SIGTERM\n"
	"or SIGINT detaches from every process, leaves them running, and exits 0.\n"
	"\n"
	"Examples:\n"
	"  dwleak agent --unit nginx.service --report-dir /var/lib/dwleak-agent/reports\n"
	"  LD_PRELOAD=$(dwleak preload) ./server &  dwleak agent --comm server\n"
	"  go tool pprof -top http://127.0.0.1:6464/debug/pprof/heap\n"
	"  curl -s 'http://127.0.0.1:6464/report?pid=1234&format=text'\n"
	"  Prometheus:  scrape_configs: [{job_name: dwleak, static_configs:\n"
	"                 [{targets: ['127.0.0.1:6464']}]}]\n"
	"  systemd: dist/dwleak-agent.service (targets in /etc/default/dwleak-agent)\n"
	"\n"
	"Exit status: 0 after SIGTERM or SIGINT, 2 on a usage or runtime error (one\n"
	"line on stderr says what is wrong).\n";

static int agent_usage_error(const char *fmt, const char *arg)
{
	return usage_error(AGENT_COMMAND, fmt, arg);
}

static int target_add(struct agent_env *env, enum agent_target_kind kind, const char *text)
{
	struct agent_target_arg *g = realloc(env->targets, (env->ntargets + 1) * sizeof(*g));

	if (!g)
		return agent_usage_error("%s", "out of memory");
	env->targets = g;
	env->targets[env->ntargets++] = (struct agent_target_arg){ kind, text };
	return 0;
}

/* Applies option C (argument ARG) to ENV; 0 or an exit status. */
static int option_apply(struct agent_env *env, int c, const char *arg)
{
	long long v;
	int err;

	switch (c) {
	case OPT_PID:
		if (parse_count(arg, 1, INT_MAX, &v))
			return agent_usage_error("invalid --pid '%s'", arg);
		return target_add(env, AGENT_TARGET_PID, arg);
	case OPT_COMM:
		return target_add(env, AGENT_TARGET_COMM, arg);
	case OPT_UNIT:
		return target_add(env, AGENT_TARGET_UNIT, arg);
	case OPT_CGROUP:
		return target_add(env, AGENT_TARGET_CGROUP, arg);
	case OPT_LISTEN:
		env->listen = arg;
		return 0;
	case OPT_TOKEN:
		env->token_file = arg;
		return 0;
	case OPT_REPORT_DIR:
		env->report_dir = arg;
		return 0;
	case OPT_SAMPLE_BYTES:
		return parse_count(arg, 0, LLONG_MAX, &env->sample_bytes)
			       ? agent_usage_error("invalid --sample-bytes '%s' (a number of bytes; 0 = every allocation)",
						   arg)
			       : 0;
	case OPT_UPROBES:
		env->uprobes = true;
		return 0;
	case OPT_WALK:
		if (strcmp(arg, "kernel") && strcmp(arg, "process"))
			return agent_usage_error("--walk takes kernel or process, not '%s'", arg);
		env->walk_process = !strcmp(arg, "process");
		return 0;
	case OPT_NO_INJECT:
		env->no_inject = true;
		return 0;
	case OPT_LEAK_CHECK_EVERY:
		err = parse_seconds(arg, 1, SECONDS_MAX, &env->leak_check_every_s);
		return err ? agent_usage_error("--leak-check-every '%s': give 0 or between 1 second and a year", arg)
			   : 0;
	case OPT_MAX_STACKS:
		return parse_count(arg, 0, INT_MAX, &env->max_stacks)
			       ? agent_usage_error("invalid --max-stacks '%s' (a number of stacks; 0 = no bound)", arg)
			       : 0;
	case OPT_DEBUG_DIR:
		return debug_dir_option(AGENT_COMMAND, &env->debug_dirs, &env->ndebug_dirs, arg);
	default:
		return agent_usage_error("%s", "unknown option");
	}
}

/* A knob of the environment, seconds: DEFAULT when unset.  Returns 0 or
 * an exit status. */
static int knob_seconds(const char *name, double def, double *out)
{
	const char *v = getenv(name);

	*out = def;
	if (!v || !*v)
		return 0;
	if (parse_seconds(v, 0.01, SECONDS_MAX, out) || !*out) {
		fprintf(stderr, "dwleak agent: %s=%s: want a number of seconds, 0.01 or more\n", name, v);
		return EXIT_USAGE;
	}
	return 0;
}

/* Parses ARGV into ENV.  Returns -1 to go on and run, else the exit
 * status to end with. */
static int agent_parse(struct agent_env *env, int argc, char **argv)
{
	int c, ret;

	*env = (struct agent_env){ .listen = AGENT_HTTP_LISTEN_DEFAULT, .sample_bytes = AGENT_SAMPLE_BYTES_DEFAULT,
				   .max_stacks = AGENT_MAX_STACKS_DEFAULT, .walk_process = true };
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", agent_options, NULL)) != -1) {
		if (c == 'h') {
			fputs(agent_usage, stdout);
			return 0;
		}
		if (c == '?')
			return agent_usage_error("unknown option or missing argument '%s'", argv[optind - 1]);
		ret = option_apply(env, c, optarg);
		if (ret)
			return ret;
	}
	if (optind < argc)
		return agent_usage_error("unexpected argument '%s' (targets are --pid, --comm, --unit, --cgroup)",
					 argv[optind]);
	if (!env->ntargets)
		return agent_usage_error("%s", "nothing to trace: give --pid, --comm, --unit or --cgroup (repeatable)");
	ret = knob_seconds("DWLEAK_AGENT_TICK_S", 1, &env->tick_s);
	ret = ret ?: knob_seconds("DWLEAK_AGENT_HISTORY_S", 30, &env->history_s);
	ret = ret ?: knob_seconds("DWLEAK_AGENT_LINGER_S", 120, &env->linger_s);
	ret = ret ?: knob_seconds("DWLEAK_AGENT_PEAK_S", 10, &env->peak_every_s);
	return ret ? ret : -1;
}

int cmd_agent(int argc, char **argv)
{
	struct agent_env env;
	int ret = agent_parse(&env, argc, argv);

	if (ret < 0)
		ret = agent_run(&env);
	free(env.targets);
	free(env.debug_dirs);
	return ret;
}
