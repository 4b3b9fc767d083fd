/* Suppressions: stacks to leave out of reports and of --fail-on-leak, in
 * SPEC.md's format (one rule per paragraph, frame patterns fun:GLOB and
 * mod:GLOB innermost first, "..." for any number of frames, # comments)
 * and in memcheck's ({ NAME / Memcheck:Leak / fun:, obj:, src: ... }),
 * both in one file if need be.  dwleak ships default rules for memory
 * glibc and libstdc++ keep on purpose until exit. */
#ifndef DWLEAK_SUPPRESS_H
#define DWLEAK_SUPPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report.h"

/* SUPP_FUN: fun:GLOB, against a frame's function, demangled and raw
 * (struct report_frame's symbol).  SUPP_MOD: mod:GLOB (memcheck's obj:),
 * against its object's path.  SUPP_SRC: memcheck's src:FILE[:LINE],
 * against its source file's base name and line.  SUPP_ANY: "...", any
 * number of frames. */
enum supp_kind { SUPP_FUN, SUPP_MOD, SUPP_SRC, SUPP_ANY };

struct supp_pattern {
	enum supp_kind kind;
	char *glob; /* NULL for SUPP_ANY */
	int line;   /* SUPP_SRC: the source line, 0 = any */
};

/* A mask of 1 << enum report_leak_kind: the kinds a rule applies to. */
#define SUPP_LEAK_KINDS_ALL ((1u << REPORT_LEAK_KIND_COUNT) - 1)

struct supp_rule {
	/* "FILE:LINE" of its first pattern; a memcheck suppression's is
	 * "NAME (FILE:LINE)", LINE that of its '{' */
	char *name;
	char *description; /* the comment just above it, or NULL */
	/* written in memcheck's format: globs know only * and ?, as
	 * memcheck's; fun:(below main) names the frames below main; the first
	 * pattern may stand for the allocator's own frames (see
	 * suppressions_match()) */
	bool memcheck;
	/* the leak kinds it suppresses (memcheck's match-leak-kinds);
	 * SUPP_LEAK_KINDS_ALL for every rule of dwleak's format */
	unsigned int leak_kinds;
	struct supp_pattern *pats;
	size_t npats;
	uint64_t stacks, bytes, allocations; /* what it suppressed */
};

struct suppressions {
	struct supp_rule *rules;
	size_t n;
	/* memcheck suppressions read and passed over: another tool's, or
	 * another kind than Leak (Memcheck:Cond, Helgrind:Race...) */
	size_t skipped;
};

/*
 * Adds the rules of TEXT (named LABEL in rule names) to S: paragraphs of
 * dwleak's format and memcheck's { } blocks, in any order.  Memcheck
 * suppressions of other tools or kinds are counted in S->skipped.
 * Returns 0, or -EINVAL with a malloc'd message in *ERR
 * ("LABEL:LINE: what is wrong"); S then holds the rules before the error.
 */
int suppressions_parse(struct suppressions *s, const char *text, const char *label, char **err);

/* Adds the rules of file PATH; -errno when unreadable (message in *ERR). */
int suppressions_load(struct suppressions *s, const char *path, char **err);

/* Adds dwleak's default rules. */
int suppressions_add_defaults(struct suppressions *s);

/*
 * Whether STACK is suppressed, and the rule credited with it (NULL when
 * it is not).  A rule matches a stack when its patterns match the frames
 * from the innermost one on (a prefix of the stack).  A memcheck rule
 * also matches when its first pattern names the allocation function the
 * program called (fun:malloc, fun:_Znam, obj:*vgpreload_memcheck*) and
 * the others match from the first frame past the allocator's own
 * (dwleak's stack starts inside the allocator: malloc, then libstdc++'s
 * operator new, where memcheck shows its replacement of operator new[]).
 *
 * Leak kinds: a stack the leak check classified is suppressed only when
 * each kind its blocks have is among the kinds of some matching rule (a
 * memcheck rule for reachable blocks alone leaves a stack with lost ones
 * in the report: memcheck suppresses per loss record, dwleak whole
 * stacks, so it may report more than memcheck, never less).  A stack
 * with no kinds (no leak check) is suppressed by any matching rule that
 * applies to some kind.  The rule credited is the first matching one
 * that covers some of its kinds: the stack's bytes and allocations are
 * added to its counts.
 */
struct supp_rule *suppressions_match(struct suppressions *s, const struct report_stack *stack);

void suppressions_free(struct suppressions *s);

#endif
