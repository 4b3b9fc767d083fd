/* The live trace as a stack_source for the report builder: walks from the
 * BPF stacks map, and each pc named through the mapping the programs saw
 * it in, the object the unwinder registered for that file, and the
 * symbolizer. */
#ifndef DWLEAK_TRACE_NAMES_H
#define DWLEAK_TRACE_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "build.h"
#include "probes.h"
#include "symbolize.h"
#include "unwinder.h"

struct trace_names {
	const struct probes *probes;
	const struct unwinder *uw;
	struct symbolizer *sym;
	struct probes_mapping *maps; /* of the process, read once per report */
	size_t nmaps;
};

/*
 * Readies N to name process TGID's frames (P, UW and SYM are borrowed and
 * must outlive N) and fills *SRC with its callbacks.  Returns 0 or
 * -ENOMEM.  Free with trace_names_free.
 */
int trace_names_open(struct trace_names *n, const struct probes *p, const struct unwinder *uw,
		     struct symbolizer *sym, uint32_t tgid, struct stack_source *src);
void trace_names_free(struct trace_names *n);

#endif
