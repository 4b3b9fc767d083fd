/* dwleak's entry point: `dwleak tables ...`, `dwleak symbolize ...`,
 * `dwleak preload` and `dwleak agent ...` go to their commands,
 * everything else is a trace (dwleak -p PID, dwleak -- CMD). */
#include <string.h>

#include "agent.h"
#include "cmd_preload.h"
#include "cmd_symbolize.h"
#include "cmd_tables.h"
#include "trace.h"

int main(int argc, char **argv)
{
	struct env env;
	int ret;

	if (argc > 1 && strcmp(argv[1], "tables") == 0)
		return cmd_tables(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "symbolize") == 0)
		return cmd_symbolize(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "preload") == 0)
		return cmd_preload(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "agent") == 0)
		return cmd_agent(argc - 1, argv + 1);
	ret = cmd_trace_parse(&env, argc, argv);
	if (ret < 0)
		ret = trace_run(&env);
	cmd_trace_free(&env);
	return ret;
}
