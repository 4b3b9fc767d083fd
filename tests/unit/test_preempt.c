/* cli/preempt.c's parsers on the texts each source really shows (debugfs
 * sched/preempt, uname -v, /dev/kmsg records, /proc/cmdline, .config
 * lines), and which models the walker's buffers must be guarded under. */
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "preempt.h"

static void test_debugfs(void)
{
	CHECK(preempt_parse_debugfs("none voluntary (full) lazy\n") == PREEMPT_MODEL_FULL, "full");
	CHECK(preempt_parse_debugfs("(none) voluntary full lazy\n") == PREEMPT_MODEL_NONE, "none");
	CHECK(preempt_parse_debugfs("none (voluntary) full lazy\n") == PREEMPT_MODEL_VOLUNTARY, "voluntary");
	CHECK(preempt_parse_debugfs("none voluntary full (lazy)\n") == PREEMPT_MODEL_LAZY, "lazy");
	CHECK(preempt_parse_debugfs("none voluntary full lazy\n") == PREEMPT_MODEL_UNKNOWN, "no mark");
	CHECK(preempt_parse_debugfs("(fullish)") == PREEMPT_MODEL_UNKNOWN, "not a model name");
	CHECK(preempt_parse_debugfs("") == PREEMPT_MODEL_UNKNOWN, "empty");
}

static void test_version(void)
{
	bool dyn = false;

	CHECK(preempt_parse_version("#1 SMP PREEMPT_DYNAMIC @0", &dyn) == PREEMPT_MODEL_UNKNOWN && dyn,
	      "dynamic: the version string cannot tell");
	CHECK(preempt_parse_version("#1 SMP PREEMPT_DYNAMIC Debian 6.12.9-1 (2025-01-11)", &dyn) ==
			      PREEMPT_MODEL_UNKNOWN && dyn,
	      "debian dynamic");
	CHECK(preempt_parse_version("#1 SMP PREEMPT_RT Thu Jan  2 10:00:00 UTC 2025", &dyn) == PREEMPT_MODEL_RT && !dyn,
	      "rt");
	CHECK(preempt_parse_version("#1 SMP PREEMPT Thu Jan  2 10:00:00 UTC 2025", &dyn) == PREEMPT_MODEL_FULL && !dyn,
	      "full");
	CHECK(preempt_parse_version("#1 SMP PREEMPT_LAZY Thu Jan  2 2025", &dyn) == PREEMPT_MODEL_LAZY, "lazy");
	CHECK(preempt_parse_version("#1 SMP Debian 6.1.119-1 (2024-11-22)", &dyn) == PREEMPT_MODEL_NONE && !dyn,
	      "no PREEMPT word: none or voluntary");
	CHECK(preempt_parse_version("#1 SMP PREEMPTIBLE", &dyn) == PREEMPT_MODEL_NONE, "a longer word is not PREEMPT");
	CHECK(preempt_parse_version("", &dyn) == PREEMPT_MODEL_UNKNOWN, "empty");
}

static void test_kmsg(void)
{
	CHECK(preempt_parse_kmsg("6,23,0,-;Dynamic Preempt: voluntary\n") == PREEMPT_MODEL_VOLUNTARY, "voluntary");
	CHECK(preempt_parse_kmsg("6,9,242019,-;Dynamic Preempt: none\n") == PREEMPT_MODEL_NONE, "none");
	CHECK(preempt_parse_kmsg("6,1200,99,-;Dynamic Preempt: lazy\n") == PREEMPT_MODEL_LAZY, "lazy");
	CHECK(preempt_parse_kmsg("6,10,0,-;rcu: Preemptible hierarchical RCU implementation.\n") ==
		      PREEMPT_MODEL_UNKNOWN,
	      "other line");
}

static void test_cmdline(void)
{
	CHECK(preempt_parse_cmdline("root=/dev/sda1 ro preempt=full quiet\n") == PREEMPT_MODEL_FULL, "full");
	CHECK(preempt_parse_cmdline("preempt=none") == PREEMPT_MODEL_NONE, "first word");
	CHECK(preempt_parse_cmdline("preempt=none quiet preempt=lazy") == PREEMPT_MODEL_LAZY, "the last wins");
	CHECK(preempt_parse_cmdline("xpreempt=full quiet") == PREEMPT_MODEL_UNKNOWN, "not a whole word");
	CHECK(preempt_parse_cmdline("console=ttyS0 quiet\n") == PREEMPT_MODEL_UNKNOWN, "absent");
}

static void test_config(void)
{
	CHECK(preempt_parse_config_line("CONFIG_PREEMPT_NONE=y\n") == PREEMPT_MODEL_NONE, "none");
	CHECK(preempt_parse_config_line("CONFIG_PREEMPT_VOLUNTARY=y\n") == PREEMPT_MODEL_VOLUNTARY, "voluntary");
	CHECK(preempt_parse_config_line("CONFIG_PREEMPT=y\n") == PREEMPT_MODEL_FULL, "full");
	CHECK(preempt_parse_config_line("CONFIG_PREEMPT_LAZY=y\n") == PREEMPT_MODEL_LAZY, "lazy");
	CHECK(preempt_parse_config_line("CONFIG_PREEMPT_RT=y\n") == PREEMPT_MODEL_RT, "rt");
	CHECK(preempt_parse_config_line("CONFIG_PREEMPT_DYNAMIC=y\n") == PREEMPT_MODEL_UNKNOWN, "dynamic");
	CHECK(preempt_parse_config_line("CONFIG_PREEMPTION=y\n") == PREEMPT_MODEL_UNKNOWN, "preemption");
	CHECK(preempt_parse_config_line("# CONFIG_PREEMPT is not set\n") == PREEMPT_MODEL_UNKNOWN, "not set");
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

	test_debugfs();
	test_version();
	test_kmsg();
	test_cmdline();
	test_config();
	test_guarded();
	preempt_info_read(&pi);
	CHECK(pi.source && *pi.source, "a source is always named");
	printf("test_preempt: ok (this kernel: %s, from %s)\n", preempt_model_name(pi.model), pi.source);
	return 0;
}
