/* The live trace as a stack_source for the report builder: walks from the
 * session's stack store (where they are moved out of the BPF map), and
 * each pc named through the mapping the programs saw it in, the object
 * the unwinder registered for that file, and the symbolizer. */
#ifndef DWLEAK_SESSION_NAMES_H
#define DWLEAK_SESSION_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "build.h"
#include "probes.h"
#include "stack_store.h"
#include "symbolize.h"
#include "unwinder.h"

struct stack_names {
	const struct stack_store *stacks;
	const struct unwinder *uw;
	struct symbolizer *sym;
	const struct probes_mapping *maps; /* of the process: read once per report, */
	size_t nmaps;
	struct probes_mapping *own_maps;   /* which it then owns, or kept since its exit */
};

/*
 * Readies N to name the frames of process TGID (STACKS, P, UW and SYM are
 * borrowed and must outlive N) and fills *SRC with its callbacks.  With
 * KEPT, the process has exited and MAPS (N_MAPS of them, borrowed) are
 * its mappings, taken out of the programs' map at its exit; else they are
 * read from the programs now.  Returns 0 or a negative errno.  Free with
 * stack_names_free.
 */
int stack_names_open(struct stack_names *n, const struct stack_store *stacks, const struct probes *p,
		     const struct unwinder *uw, struct symbolizer *sym, uint32_t tgid, bool kept,
		     const struct probes_mapping *maps, size_t n_maps, struct stack_source *src);
void stack_names_free(struct stack_names *n);

/* Hands the frames of walk ST to N's symbolizer to name ahead, in its
 * own thread, into its caches (symbolizer_prepare_addr): a report later
 * finds them there.  Never waits for the symbolizer.  Returns 0 or
 * -ENOMEM. */
int stack_names_warm(const struct stack_names *n, const struct stack_trace *st);

#endif
