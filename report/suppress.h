/* Suppressions: stacks to leave out of reports and of --fail-on-leak, in
 * SPEC.md's format (one rule per paragraph, frame patterns fun:GLOB and
 * mod:GLOB innermost first, "..." for any number of frames, # comments).
 * dwleak ships default rules for memory glibc and libstdc++ keep on
 * purpose until exit. */
#ifndef DWLEAK_SUPPRESS_H
#define DWLEAK_SUPPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"

enum supp_kind { SUPP_FUN, SUPP_MOD, SUPP_ANY };

struct supp_pattern {
	enum supp_kind kind;
	char *glob; /* NULL for SUPP_ANY */
};

struct supp_rule {
	char *name;	   /* "FILE:LINE" of its first pattern */
	char *description; /* the comment just above it, or NULL */
	struct supp_pattern *pats;
	size_t npats;
	uint64_t stacks, bytes, allocations; /* what it suppressed */
};

struct suppressions {
	struct supp_rule *rules;
	size_t n;
};

/*
 * Adds the rules of TEXT (named LABEL in rule names) to S.  Returns 0, or
 * -EINVAL with a malloc'd message in *ERR ("LABEL:LINE: what is wrong").
 */
int suppressions_parse(struct suppressions *s, const char *text, const char *label, char **err);

/* Adds the rules of file PATH; -errno when unreadable (message in *ERR). */
int suppressions_load(struct suppressions *s, const char *path, char **err);

/* Adds dwleak's default rules. */
int suppressions_add_defaults(struct suppressions *s);

/*
 * The first rule whose patterns match STACK's frames from the innermost
 * one on (a rule matches a prefix of the stack), or NULL.  A match adds
 * the stack's bytes and allocations to the rule's counts.
 */
struct supp_rule *suppressions_match(struct suppressions *s, const struct report_stack *stack);

void suppressions_free(struct suppressions *s);

#endif
