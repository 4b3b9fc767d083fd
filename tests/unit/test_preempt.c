/* bpf/preempt.c's parsers on the texts each source really shows (debugfs
 * sched/preempt, uname -v, /dev/kmsg records, /proc/cmdline, .config
 * lines), and which models the walker's buffers must be guarded under. */
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "preempt.h"

struct text_case {
	const char *text;
	enum preempt_model want;
};

/* PARSE on each case's text gives its model. */
static void check_cases(const char *what, enum preempt_model (*parse)(const char *), const struct text_case *c,
			size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		CHECK(parse(c[i].text) == c[i].want, "%s '%s': got %s, want %s", what, c[i].text,
		      preempt_model_name(parse(c[i].text)), preempt_model_name(c[i].want));
}

static const struct text_case debugfs[] = {
	{ "none voluntary (full) lazy\n", PREEMPT_MODEL_FULL },
	{ "(none) voluntary full lazy\n", PREEMPT_MODEL_NONE },
	{ "none (voluntary) full lazy\n", PREEMPT_MODEL_VOLUNTARY },
	{ "none voluntary full (lazy)\n", PREEMPT_MODEL_LAZY },
	{ "none voluntary full lazy\n", PREEMPT_MODEL_UNKNOWN }, /* no mark */
	{ "(fullish)", PREEMPT_MODEL_UNKNOWN },
	{ "", PREEMPT_MODEL_UNKNOWN },
};

static const struct text_case kmsg[] = {
	{ "6,23,0,-;Dynamic Preempt: voluntary\n", PREEMPT_MODEL_VOLUNTARY },
	{ "6,9,242019,-;Dynamic Preempt: none\n", PREEMPT_MODEL_NONE },
	{ "6,1200,99,-;Dynamic Preempt: lazy\n", PREEMPT_MODEL_LAZY },
	{ "6,10,0,-;rcu: Preemptible hierarchical RCU implementation.\n", PREEMPT_MODEL_UNKNOWN },
};

static const struct text_case cmdline[] = {
	{ "root=/dev/sda1 ro preempt=full quiet\n", PREEMPT_MODEL_FULL },
	{ "preempt=none", PREEMPT_MODEL_NONE },
	{ "preempt=none quiet preempt=lazy", PREEMPT_MODEL_LAZY }, /* the last wins */
	{ "xpreempt=full quiet", PREEMPT_MODEL_UNKNOWN },	     /* not a whole word */
	{ "console=ttyS0 quiet\n", PREEMPT_MODEL_UNKNOWN },
};

static const struct text_case config[] = {
	{ "CONFIG_PREEMPT_NONE=y\n", PREEMPT_MODEL_NONE },
	{ "CONFIG_PREEMPT_VOLUNTARY=y\n", PREEMPT_MODEL_VOLUNTARY },
	{ "CONFIG_PREEMPT=y\n", PREEMPT_MODEL_FULL },
	{ "CONFIG_PREEMPT_LAZY=y\n", PREEMPT_MODEL_LAZY },
	{ "CONFIG_PREEMPT_RT=y\n", PREEMPT_MODEL_RT },
	{ "CONFIG_PREEMPT_DYNAMIC=y\n", PREEMPT_MODEL_UNKNOWN },
	{ "CONFIG_PREEMPTION=y\n", PREEMPT_MODEL_UNKNOWN },
	{ "# CONFIG_PREEMPT is not set\n", PREEMPT_MODEL_UNKNOWN },
};

static const struct version_case {
	const char *uts;
	enum preempt_model want;
	bool dynamic;
} versions[] = {
	{ "#1 SMP PREEMPT_DYNAMIC @0", PREEMPT_MODEL_UNKNOWN, true }, /* chosen at boot */
	{ "#1 SMP PREEMPT_DYNAMIC Debian 6.12.9-1 (2025-01-11)", PREEMPT_MODEL_UNKNOWN, true },
	{ "#1 SMP PREEMPT_RT Thu Jan  2 10:00:00 UTC 2025", PREEMPT_MODEL_RT, false },
	{ "#1 SMP PREEMPT Thu Jan  2 10:00:00 UTC 2025", PREEMPT_MODEL_FULL, false },
	{ "#1 SMP PREEMPT_LAZY Thu Jan  2 2025", PREEMPT_MODEL_LAZY, false },
	{ "#1 SMP Debian 6.1.119-1 (2024-11-22)", PREEMPT_MODEL_NONE, false }, /* none or voluntary */
	{ "#1 SMP PREEMPTIBLE", PREEMPT_MODEL_NONE, false }, /* not the word PREEMPT */
	{ "", PREEMPT_MODEL_UNKNOWN, false },
};

static void test_version(void)
{
	size_t i;
	bool dyn;

	for (i = 0; i < N(versions); i++) {
		dyn = !versions[i].dynamic;
		CHECK(preempt_parse_version(versions[i].uts, &dyn) == versions[i].want && dyn == versions[i].dynamic,
		      "version '%s'", versions[i].uts);
	}
}

static void test_guarded(void)
{
	CHECK(!preempt_model_preempts_bpf(PREEMPT_MODEL_NONE), "none");
	CHECK(!preempt_model_preempts_bpf(PREEMPT_MODEL_VOLUNTARY), "voluntary");
	CHECK(preempt_model_preempts_bpf(PREEMPT_MODEL_FULL), "full");
	CHECK(preempt_model_preempts_bpf(PREEMPT_MODEL_LAZY), "lazy");
	CHECK(preempt_model_preempts_bpf(PREEMPT_MODEL_RT), "rt");
	CHECK(preempt_model_preempts_bpf(PREEMPT_MODEL_UNKNOWN), "unknown: guard");
	CHECK(!strcmp(preempt_model_name(PREEMPT_MODEL_LAZY), "lazy"), "name");
}

int main(void)
{
	struct preempt_info pi;

	check_cases("debugfs", preempt_parse_debugfs, debugfs, N(debugfs));
	check_cases("kmsg", preempt_parse_kmsg, kmsg, N(kmsg));
	check_cases("cmdline", preempt_parse_cmdline, cmdline, N(cmdline));
	check_cases("config", preempt_parse_config_line, config, N(config));
	test_version();
	test_guarded();
	preempt_info_read(&pi);
	CHECK(pi.source && *pi.source, "a source is always named");
	printf("test_preempt: ok (this kernel: %s, from %s)\n", preempt_model_name(pi.model), pi.source);
	return 0;
}
