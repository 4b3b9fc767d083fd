/* Growth since the previous --interval report (growth.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "growth.h"

void growth_free(struct growth *g)
{
	free(g->ids);
	free(g->pids);
	free(g->bytes);
	memset(g, 0, sizeof(*g));
}

double growth_of(const struct growth *g, int pid, uint64_t id, uint64_t bytes, double now)
{
	size_t i;

	if (!g->t_prev || now <= g->t_prev)
		return NAN;
	for (i = 0; i < g->n; i++)
		if (g->ids[i] == id && g->pids[i] == pid)
			return ((double)bytes - (double)g->bytes[i]) / (now - g->t_prev);
	return (double)bytes / (now - g->t_prev);
}

void growth_remember(struct growth *g, const struct build_proc *procs, size_t nprocs, double now)
{
	size_t i, p, k = 0, n = 0;

	growth_free(g);
	for (p = 0; p < nprocs; p++)
		n += procs[p].stacks->n;
	g->ids = calloc(n + 1, sizeof(*g->ids));
	g->pids = calloc(n + 1, sizeof(*g->pids));
	g->bytes = calloc(n + 1, sizeof(*g->bytes));
	if (!g->ids || !g->pids || !g->bytes)
		return;
	for (p = 0; p < nprocs; p++) {
		const struct ledger_stacks *t = procs[p].stacks;

		for (i = 0; i < t->cap; i++) {
			if (!t->slots[i].count)
				continue;
			g->ids[k] = t->slots[i].stack_id;
			g->pids[k] = procs[p].pid;
			/* the report's bytes: the estimate with --sample-bytes (the
			 * same as the bytes without) */
			g->bytes[k++] = (int64_t)llround(t->slots[i].est_bytes);
		}
	}
	g->n = k;
	g->t_prev = now;
}
