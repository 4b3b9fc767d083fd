/* Suppression rules: parsing dwleak's format and memcheck's, dwleak's
 * defaults, and matching a report stack against them (frame patterns with
 * backtracking over "...", no recursion, whatever a file holds). */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "suppress.h"
#include "text_file.h"

/* Memory that glibc and libstdc++ keep on purpose until exit: reported as
 * leaks by every tool that does not know better.  --no-default-suppressions
 * shows them again.  The rules are report/default.supp, which the build
 * turns into this string (and installs, for users to read). */
static const char default_rules[] =
#include "default_supp.inc"
	;

static void rule_free(struct supp_rule *r)
{
	size_t i;

	for (i = 0; i < r->npats; i++)
		free(r->pats[i].glob);
	free(r->pats);
	free(r->name);
	free(r->description);
	memset(r, 0, sizeof(*r));
}

/*
 * Makes room for element N of array V (elements of SIZE bytes, N of them
 * so far): the array doubles each time N reaches a power of two, so that
 * no capacity needs keeping and a file of a million lines is read in
 * linear time.  Returns V, perhaps moved, or NULL without memory (V is
 * then unchanged).
 */
static void *array_room(void *v, size_t n, size_t size)
{
	if (n & (n - 1))
		return v; /* not a power of two: there is room */
	if (n > SIZE_MAX / 2 / size)
		return NULL;
	return realloc(v, (n ? 2 * n : 1) * size);
}

/* Adds a pattern whose glob is the LEN bytes at GLOB (NULL: none). */
static int rule_add_pattern(struct supp_rule *r, enum supp_kind kind, const char *glob, size_t len, int line)
{
	struct supp_pattern *pats = array_room(r->pats, r->npats, sizeof(*pats));

	if (!pats)
		return -ENOMEM;
	r->pats = pats;
	r->pats[r->npats].kind = kind;
	r->pats[r->npats].line = line;
	r->pats[r->npats].glob = glob ? strndup(glob, len) : NULL;
	if (glob && !r->pats[r->npats].glob)
		return -ENOMEM;
	r->npats++;
	return 0;
}

static int rules_push(struct suppressions *s, struct supp_rule *r)
{
	struct supp_rule *rules = array_room(s->rules, s->n, sizeof(*rules));

	if (!rules)
		return -ENOMEM;
	s->rules = rules;
	s->rules[s->n++] = *r;
	memset(r, 0, sizeof(*r));
	return 0;
}

static char *trim(char *line)
{
	char *end;

	line += strspn(line, " \t");
	end = line + strlen(line);
	while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		*--end = 0;
	return line;
}

/* ---- Parsing ---- */

/* Where the parser is: between or in dwleak's paragraphs, or in a
 * memcheck { } block, before the line it expects next. */
enum parse_state {
	IN_DWLEAK,
	MC_NAME,       /* after '{': the suppression's name */
	MC_KIND,       /* after the name: TOOL[,TOOL...]:KIND */
	MC_LEAK_FIRST, /* after Memcheck:Leak: match-leak-kinds: or a frame line */
	MC_FRAMES,     /* frame lines, up to '}' */
	MC_SKIP,       /* another tool's or kind's: every line up to '}' */
};

struct parser {
	struct suppressions *s;
	const char *label; /* the file, in rule names and messages */
	char **err;
	int lineno;
	enum parse_state state;
	int open_line;      /* the '{' of the memcheck block being read */
	char *name;         /* and its NAME */
	struct supp_rule cur;
	char *comment;      /* the comment just above the rule being read */
};

/* Sets *P->ERR to "LABEL:LINENO: " and the message; returns -EINVAL (or
 * -ENOMEM when the message cannot be made). */
static int __attribute__((format(printf, 3, 4))) parse_error(struct parser *p, int lineno, const char *fmt, ...)
{
	char *what;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&what, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	n = asprintf(p->err, "%s:%d: %s", p->label, lineno, what);
	free(what);
	if (n < 0) {
		*p->err = NULL;
		return -ENOMEM;
	}
	return -EINVAL;
}

/* A rule begins: its name, and the comment above it as its description. */
static int rule_begin(struct parser *p, bool memcheck)
{
	int n = memcheck ? asprintf(&p->cur.name, "%s (%s:%d)", p->name, p->label, p->open_line)
			 : asprintf(&p->cur.name, "%s:%d", p->label, p->lineno);

	if (n < 0) {
		p->cur.name = NULL;
		return -ENOMEM;
	}
	p->cur.description = p->comment;
	p->comment = NULL;
	p->cur.memcheck = memcheck;
	p->cur.leak_kinds = SUPP_LEAK_KINDS_ALL;
	return 0;
}

/* One line of dwleak's format (or the '{' that opens a memcheck block). */
static int dwleak_line(struct parser *p, char *line)
{
	int ret = 0;

	if (line[0] == '#') {
		if (!p->cur.npats) {
			free(p->comment);
			p->comment = strdup(trim(line + 1)); /* NULL: no description */
		}
		return 0;
	}
	if (!line[0] || !strcmp(line, "{")) {
		/* a blank line ends a rule; so does a memcheck block right after it */
		if (p->cur.npats)
			ret = rules_push(p->s, &p->cur);
		if (line[0]) {
			p->state = MC_NAME;
			p->open_line = p->lineno;
		} else {
			free(p->comment);
			p->comment = NULL;
		}
		return ret;
	}
	if (!strcmp(line, "}"))
		return parse_error(p, p->lineno, "'}' closes no memcheck suppression (none was opened with '{')");
	if (!p->cur.npats && (ret = rule_begin(p, false)))
		return ret;
	if (!strcmp(line, "..."))
		return rule_add_pattern(&p->cur, SUPP_ANY, NULL, 0, 0);
	if (!strncmp(line, "fun:", 4) && line[4])
		return rule_add_pattern(&p->cur, SUPP_FUN, line + 4, strlen(line + 4), 0);
	if (!strncmp(line, "mod:", 4) && line[4])
		return rule_add_pattern(&p->cur, SUPP_MOD, line + 4, strlen(line + 4), 0);
	return parse_error(p, p->lineno, "'%s' is not a frame pattern (fun:GLOB, mod:GLOB or ...)", line);
}

/* Whether TOOL is one of the LEN bytes of NAMES, "tool1,tool2,...". */
static bool tool_listed(const char *names, size_t len, const char *tool)
{
	const char *at = names, *end = names + len, *comma, *a, *b;
	size_t want = strlen(tool);

	for (;;) {
		comma = memchr(at, ',', (size_t)(end - at));
		a = at;
		b = comma ? comma : end;
		/* spaces around a name: memcheck would not have them, no harm */
		while (a < b && *a == ' ')
			a++;
		while (b > a && b[-1] == ' ')
			b--;
		if ((size_t)(b - a) == want && !memcmp(a, tool, want))
			return true;
		if (!comma)
			return false;
		at = comma + 1;
	}
}

/* The TOOL[,TOOL...]:KIND line: a Memcheck:Leak rule begins; any other
 * tool's or kind's suppression is passed over, as memcheck would pass
 * over another tool's. */
static int memcheck_kind(struct parser *p, const char *line)
{
	const char *colon = strchr(line, ':'), *kind;

	if (!colon)
		return parse_error(p, p->lineno,
				   "'%s' is not the TOOL:KIND line (Memcheck:Leak) that follows the name of "
				   "the memcheck suppression opened at line %d",
				   line, p->open_line);
	kind = colon + 1 + strspn(colon + 1, " ");
	if (!tool_listed(line, (size_t)(colon - line), "Memcheck") || strcmp(kind, "Leak")) {
		/* a kind this memcheck does not know (a later valgrind's) is
		 * passed over like the others; but "leak" is surely meant as
		 * Leak, and a typo must not make a leak rule a skipped one */
		if (tool_listed(line, (size_t)(colon - line), "Memcheck") && !strncasecmp(kind, "leak", 4))
			return parse_error(p, p->lineno, "'%s': memcheck's kind for leaks is spelled Leak", line);
		p->state = MC_SKIP;
		return 0;
	}
	p->state = MC_LEAK_FIRST;
	return rule_begin(p, true);
}

/* memcheck's words for the leak kinds, in match-leak-kinds. */
static const struct {
	const char *word;
	enum report_leak_kind kind;
} leak_kind_words[] = {
	{ "definite", REPORT_LEAK_DEFINITELY_LOST },
	{ "indirect", REPORT_LEAK_INDIRECTLY_LOST },
	{ "possible", REPORT_LEAK_POSSIBLY_LOST },
	{ "reachable", REPORT_LEAK_REACHABLE },
};

/* "match-leak-kinds: definite,possible", "...: all" or "...: none". */
static int leak_kinds_line(struct parser *p, const char *line)
{
	const char *at = line + strlen("match-leak-kinds:"), *word;
	unsigned int mask = 0;
	size_t len, n, i;

	at += strspn(at, " \t");
	if (!strcmp(at, "all") || !strcmp(at, "none")) {
		p->cur.leak_kinds = at[0] == 'a' ? SUPP_LEAK_KINDS_ALL : 0;
		return 0;
	}
	for (;;) {
		len = strcspn(at, ",");
		word = at + strspn(at, " \t"); /* stops at the comma, if not before */
		n = len - (size_t)(word - at);
		while (n && (word[n - 1] == ' ' || word[n - 1] == '\t'))
			n--;
		for (i = 0; i < sizeof(leak_kind_words) / sizeof(leak_kind_words[0]); i++)
			if (strlen(leak_kind_words[i].word) == n && !strncmp(word, leak_kind_words[i].word, n))
				break;
		if (i == sizeof(leak_kind_words) / sizeof(leak_kind_words[0]))
			return parse_error(p, p->lineno,
					   "'%s': match-leak-kinds takes definite, indirect, possible and reachable, "
					   "separated by commas, or all, or none",
					   line);
		mask |= 1u << leak_kind_words[i].kind;
		if (!at[len])
			break;
		at += len + 1;
	}
	p->cur.leak_kinds = mask;
	return 0;
}

/* A frame line of a memcheck suppression: fun:, obj:, src:FILE[:LINE], ... */
static int memcheck_frame(struct parser *p, const char *line)
{
	const char *file, *colon;
	unsigned long n;
	char *end;

	if (!strcmp(line, "..."))
		return rule_add_pattern(&p->cur, SUPP_ANY, NULL, 0, 0);
	if (!strncmp(line, "fun:", 4))
		return rule_add_pattern(&p->cur, SUPP_FUN, line + 4, strlen(line + 4), 0);
	if (!strncmp(line, "obj:", 4))
		return rule_add_pattern(&p->cur, SUPP_MOD, line + 4, strlen(line + 4), 0);
	if (strncmp(line, "src:", 4))
		return parse_error(p, p->lineno,
				   "'%s' is not a frame line of a memcheck suppression (fun:GLOB, obj:GLOB, "
				   "src:FILE[:LINE] or ...)",
				   line);
	file = line + 4;
	colon = strchr(file, ':');
	if (!colon)
		return rule_add_pattern(&p->cur, SUPP_SRC, file, strlen(file), 0);
	errno = 0;
	n = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end || errno || n == 0 || n > INT_MAX)
		return parse_error(p, p->lineno, "'%s': the line after src:FILE: is not a line number", line);
	return rule_add_pattern(&p->cur, SUPP_SRC, file, (size_t)(colon - file), (int)n);
}

/* The '}' of a Memcheck:Leak block: the rule is complete. */
static int memcheck_close(struct parser *p)
{
	size_t i;

	if (!p->cur.npats)
		return parse_error(p, p->lineno,
				   "the memcheck suppression opened at line %d has no frame line (fun:, obj:, src: "
				   "or ...)",
				   p->open_line);
	for (i = 0; i < p->cur.npats && p->cur.pats[i].kind == SUPP_ANY; i++)
		;
	if (i == p->cur.npats)
		return parse_error(p, p->lineno,
				   "the memcheck suppression opened at line %d has only '...' frame lines: it would "
				   "suppress every stack",
				   p->open_line);
	p->state = IN_DWLEAK;
	return rules_push(p->s, &p->cur);
}

/* One line inside a memcheck { } block. */
static int memcheck_line(struct parser *p, char *line)
{
	/* memcheck passes over blank lines and comments anywhere */
	if (!line[0] || line[0] == '#')
		return 0;
	/* nothing of memcheck's opens a block inside another */
	if (!strcmp(line, "{"))
		return parse_error(p, p->lineno,
				   "'{' inside the memcheck suppression opened at line %d: its '}' is missing",
				   p->open_line);
	switch (p->state) {
	case MC_NAME:
		if (!strcmp(line, "}"))
			return parse_error(p, p->lineno,
					   "'}' right after '{': a memcheck suppression's first line is its name");
		free(p->name);
		p->name = strdup(line);
		p->state = MC_KIND;
		return p->name ? 0 : -ENOMEM;
	case MC_KIND:
		return memcheck_kind(p, line);
	case MC_SKIP:
		if (!strcmp(line, "}")) {
			p->s->skipped++;
			p->state = IN_DWLEAK;
			free(p->comment);
			p->comment = NULL;
		}
		return 0;
	case MC_LEAK_FIRST:
		p->state = MC_FRAMES;
		if (!strncmp(line, "match-leak-kinds:", strlen("match-leak-kinds:")))
			return leak_kinds_line(p, line);
		/* no match-leak-kinds: this is the first frame line */
		__attribute__((fallthrough));
	case MC_FRAMES:
		return strcmp(line, "}") ? memcheck_frame(p, line) : memcheck_close(p);
	case IN_DWLEAK:
		break;
	}
	return dwleak_line(p, line);
}

int suppressions_parse(struct suppressions *s, const char *text, const char *label, char **err)
{
	struct parser p = { .s = s, .label = label, .err = err, .state = IN_DWLEAK };
	char *copy = strdup(text), *save, *raw;
	int ret = 0;

	*err = NULL;
	if (!copy)
		return -ENOMEM;
	/* strsep keeps empty lines: they end a rule of dwleak's format */
	for (save = copy; !ret && (raw = strsep(&save, "\n"));) {
		p.lineno++;
		ret = p.state == IN_DWLEAK ? dwleak_line(&p, trim(raw)) : memcheck_line(&p, trim(raw));
	}
	if (!ret && p.state != IN_DWLEAK)
		ret = parse_error(&p, p.open_line, "'{' opens a memcheck suppression that no '}' closes");
	if (!ret && p.cur.npats)
		ret = rules_push(s, &p.cur);
	rule_free(&p.cur);
	free(p.comment);
	free(p.name);
	free(copy);
	return ret;
}

/* A suppressions file larger than this is not one. */
#define SUPPRESSIONS_MAX (16u << 20)

int suppressions_load(struct suppressions *s, const char *path, char **err)
{
	const char *what = NULL;
	char *text = NULL;
	size_t len = 0;
	int ret;

	*err = NULL;
	ret = text_file_read(path, SUPPRESSIONS_MAX, &text, &len, &what);
	if (ret) {
		if (asprintf(err, "cannot read suppressions file %s: %s%s", path,
			     what		? what
			     : ret == -EFBIG	? "larger than 16 MiB, which no suppressions file is"
			     : ret == -EISDIR	? "it is a directory"
						: strerror(-ret),
			     what ? " (give a regular file)" : "") < 0)
			*err = NULL;
		return ret;
	}
	ret = suppressions_parse(s, text, path, err);
	free(text);
	return ret;
}

int suppressions_add_defaults(struct suppressions *s)
{
	char *err = NULL;
	int ret = suppressions_parse(s, default_rules, "default", &err);

	free(err);
	return ret;
}

/* ---- Matching ---- */

/* memcheck's globs: '*' any characters, '?' one, nothing else special
 * (a '[' in "[abi:cxx11]" is itself).  Iterative: at most the pattern's
 * length times the name's steps. */
static bool memcheck_glob(const char *pat, const char *str)
{
	const char *star = NULL, *resume = NULL;

	while (*str) {
		if (*pat == '*') {
			star = pat++;
			resume = str;
		} else if (*pat && (*pat == '?' || *pat == *str)) {
			pat++;
			str++;
		} else if (star) {
			pat = star + 1;
			str = ++resume;
		} else {
			return false;
		}
	}
	while (*pat == '*')
		pat++;
	return !*pat;
}

static bool glob_match(const struct supp_rule *r, const char *glob, const char *str)
{
	return r->memcheck ? memcheck_glob(glob, str) : !fnmatch(glob, str, 0);
}

/* The functions that call main, which memcheck names "(below main)"
 * (valgrind's m_debuginfo.c, for glibc). */
static bool is_below_main(const char *name)
{
	static const char *const names[] = {
		"__libc_start_main", "__libc_start_call_main", "__libc_start_main_impl",
		"generic_start_main", "_dl_start_user",
	};
	size_t i;

	if (!strncmp(name, "__libc_start_main.", 18) || !strncmp(name, "generic_start_main.", 19))
		return true;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

/* fun:GLOB against frame F's names: demangled, raw, and for a memcheck
 * rule "(below main)" and memcheck's "???" for no name. */
static bool function_matches(const struct supp_rule *r, const char *glob, const struct report_frame *f)
{
	if (!f->function)
		return r->memcheck ? memcheck_glob(glob, "???") : !strcmp(glob, "*");
	if (glob_match(r, glob, f->function))
		return true;
	if (f->symbol && f->symbol != f->function && glob_match(r, glob, f->symbol))
		return true;
	return r->memcheck && is_below_main(f->symbol ? f->symbol : f->function) &&
	       memcheck_glob(glob, "(below main)");
}

static bool frame_matches(const struct supp_rule *r, const struct supp_pattern *p, const struct report_frame *f)
{
	const char *base;

	switch (p->kind) {
	case SUPP_FUN:
		return function_matches(r, p->glob, f);
	case SUPP_MOD:
		return f->module && glob_match(r, p->glob, f->module);
	case SUPP_SRC:
		if (!f->file)
			return false;
		base = strrchr(f->file, '/');
		return glob_match(r, p->glob, base ? base + 1 : f->file) && (!p->line || p->line == f->line);
	default:
		return true;
	}
}

/*
 * Do patterns P[0..NP) match a prefix of frames F[0..NF)?  Each "..."
 * takes any number of frames; on a mismatch the last "..." takes one
 * more and the patterns after it start again (as a glob's '*'), which
 * finds a match when there is one, in at most NP * NF steps and no
 * recursion, however many patterns a file gave.
 */
static bool frames_match(const struct supp_rule *r, const struct supp_pattern *p, size_t np,
			 const struct report_frame *f, size_t nf)
{
	size_t i = 0, j = 0, star = SIZE_MAX, star_j = 0;

	while (i < np) {
		if (p[i].kind == SUPP_ANY) {
			star = i++;
			star_j = j;
		} else if (j < nf && frame_matches(r, &p[i], &f[j])) {
			i++;
			j++;
		} else if (star != SIZE_MAX && star_j < nf) {
			i = star + 1;
			j = ++star_j;
		} else {
			return false;
		}
	}
	return true; /* the frames left are the prefix's callers */
}

/* The allocator's own entry points, as the innermost frames of a stack
 * name them (the malloc family, glibc's internal names of it, jemalloc's
 * API). */
static const char *const alloc_functions[] = {
	"malloc",	  "calloc",	    "realloc",	       "reallocarray",	  "memalign",
	"posix_memalign", "aligned_alloc",  "valloc",	       "pvalloc",	  "mallocx",
	"rallocx",	  "xallocx",	    "__libc_malloc",   "__libc_calloc",	  "__libc_realloc",
	"__libc_memalign", "__libc_valloc", "__libc_pvalloc",
};

static bool is_operator_new(const struct report_frame *f, bool scalar)
{
	const char *raw = f->symbol ? f->symbol : f->function;

	if (raw && (!strncmp(raw, "_Znw", 4) || (!scalar && !strncmp(raw, "_Zna", 4))))
		return true;
	return f->function && !strncmp(f->function, "operator new", 12) &&
	       (!scalar || f->function[12] != '[');
}

static bool is_alloc_frame(const struct report_frame *f)
{
	const char *raw = f->symbol ? f->symbol : f->function;
	size_t i;

	if (!raw)
		return false;
	for (i = 0; i < sizeof(alloc_functions) / sizeof(alloc_functions[0]); i++)
		if (!strcmp(raw, alloc_functions[i]))
			return true;
	return is_operator_new(f, false);
}

/* memcheck's replacements of operator new[], which its stacks show first:
 * libstdc++'s operator new[] reaches operator new by a tail call, which
 * leaves no frame of its own in dwleak's stack. */
static const char *const array_new_names[] = {
	"_Znam", "_ZnamSt11align_val_t", "__builtin_vec_new", "operator new[](unsigned long)",
};

/* Where memcheck's malloc replacements live, which obj: may name. */
static const char *const memcheck_preloads[] = {
	"/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so",
	"/usr/lib/x86_64-linux-gnu/valgrind/vgpreload_memcheck-amd64-linux.so",
	"/usr/lib/valgrind/vgpreload_memcheck-amd64-linux.so",
	"/usr/local/libexec/valgrind/vgpreload_memcheck-amd64-linux.so",
};

/* Does the first pattern P of memcheck rule R name the allocation function
 * whose frames are the innermost of a stack, OUTER the outermost of them
 * (the function the program called)? */
static bool allocator_matches(const struct supp_rule *r, const struct supp_pattern *p,
			      const struct report_frame *outer)
{
	size_t i;

	if (frame_matches(r, p, outer))
		return true;
	if (p->kind == SUPP_FUN && is_operator_new(outer, true)) {
		for (i = 0; i < sizeof(array_new_names) / sizeof(array_new_names[0]); i++)
			if (memcheck_glob(p->glob, array_new_names[i]))
				return true;
	} else if (p->kind == SUPP_MOD) {
		for (i = 0; i < sizeof(memcheck_preloads) / sizeof(memcheck_preloads[0]); i++)
			if (memcheck_glob(p->glob, memcheck_preloads[i]))
				return true;
	}
	return false;
}

/* Does rule R match STACK (see suppressions_match())? */
static bool rule_matches(const struct supp_rule *r, const struct report_stack *stack)
{
	size_t a = 0;

	if (frames_match(r, r->pats, r->npats, stack->frames, stack->nframes))
		return true;
	if (!r->memcheck || !r->npats || r->pats[0].kind == SUPP_ANY)
		return false;
	/* memcheck's stack starts at its replacement of the function the
	 * program called, dwleak's inside the allocator */
	while (a < stack->nframes && is_alloc_frame(&stack->frames[a]))
		a++;
	return a && allocator_matches(r, &r->pats[0], &stack->frames[a - 1]) &&
	       frames_match(r, r->pats + 1, r->npats - 1, stack->frames + a, stack->nframes - a);
}

/* The leak kinds STACK's blocks have, as a mask; 0 without a leak check. */
static unsigned int stack_leak_kinds(const struct report_stack *stack)
{
	unsigned int mask = 0;
	int k;

	for (k = 0; stack->has_leak_kinds && k < REPORT_LEAK_KIND_COUNT; k++)
		if (stack->leak_kinds[k].allocations || stack->leak_kinds[k].bytes)
			mask |= 1u << k;
	return mask;
}

struct supp_rule *suppressions_match(struct suppressions *s, const struct report_stack *stack)
{
	/* the kinds no matching rule has covered yet */
	unsigned int open = stack_leak_kinds(stack);
	struct supp_rule *credited = NULL;
	size_t i;

	for (i = 0; i < s->n; i++) {
		struct supp_rule *r = &s->rules[i];

		if (!r->leak_kinds || (open && !(open & r->leak_kinds)) || !rule_matches(r, stack))
			continue;
		if (!credited)
			credited = r;
		open &= ~r->leak_kinds;
		if (!open)
			break;
	}
	if (open || !credited)
		return NULL;
	credited->stacks++;
	credited->bytes += stack->bytes;
	credited->allocations += stack->allocations;
	return credited;
}

void suppressions_free(struct suppressions *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		rule_free(&s->rules[i]);
	free(s->rules);
	s->rules = NULL;
	s->n = 0;
	s->skipped = 0;
}
