/* libFuzzer target for the table compiler: arbitrary bytes as an ELF image.
 * Besides not crashing, a compiled table must keep table.h's contract: every
 * span it lists is found again by table_lookup with the same rule. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

static int check_span(const struct table_span *span, void *arg)
{
	const struct unwind_table *t = arg;
	const struct unwind_rule *r;
	uint64_t start, end;
	char buf[128];

	if (span->start >= span->end)
		abort();
	r = table_lookup(t, span->start, &start, &end);
	if (!r || memcmp(r, span->rule, sizeof(*r)) != 0 || start > span->start)
		abort();
	r = table_lookup(t, span->end - 1, NULL, NULL);
	if (!r || memcmp(r, span->rule, sizeof(*r)) != 0)
		abort();
	table_rule_format(span->rule, t->arch, buf, sizeof(buf));
	(void)table_rule_supported(span->rule);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct unwind_table *t = NULL;

	if (table_compile_mem(data, size, NULL, &t) != 0) {
		(void)table_last_error();
		return 0;
	}
	(void)table_walker_bytes(t);
	table_for_each_span(t, check_span, t);
	table_free(t);
	return 0;
}
