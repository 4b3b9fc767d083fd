/* What a long-running host (the agent) reads of the session between
 * reports without building one: every record and walk brought in, the
 * programs' counters, and whether a stack's walk ended early, so that /metrics costs an aggregation per
 * process, not the naming of every frame. */
#include <errno.h>

#include "session_private.h"

void session_sync(struct session *s)
{
	session_drain(s);
	session_stacks_move(s);
}

void session_counters(const struct session *s, uint64_t counters[CNT_COUNT])
{
	probes_counters(s->probes, counters);
}

bool session_stack_error(const struct session *s, uint64_t id)
{
	struct stack_trace st;

	/* the special ids (walker busy, not walked, not stored) and a walk
	 * the store does not have are errors in a report too (build.c) */
	if (id <= DWLEAK_STACK_SPECIAL_MAX || stack_store_get(s->stacks, id, &st))
		return true;
	return st.end >= WALK_ERR_NO_MAPPING;
}
