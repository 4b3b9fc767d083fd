/* Suppression rules: parsing, dwleak's defaults, and matching a report
 * stack against them (glob patterns with backtracking over "..."). */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suppress.h"
#include "text_file.h"

/* Memory that glibc and libstdc++ keep on purpose until exit: reported as
 * leaks by every tool that does not know better.  --no-default-suppressions
 * shows them again. */
static const char default_rules[] =
	"# glibc stdio: a FILE's buffer (stdout, stderr, std::cout) lives until exit\n"
	"fun:malloc\n"
	"fun:_IO_file_doallocate\n"
	"\n"
	"# libstdc++: the emergency exception-handling pool, made at start-up\n"
	"fun:malloc\n"
	"mod:*/libstdc++.so*\n"
	"mod:*/ld-linux*.so*\n"
	"\n"
	"# libstdc++'s emergency pool in a static executable: made by its constructor\n"
	"fun:malloc\n"
	"fun:_GLOBAL__sub_I_eh_alloc.cc\n"
	"\n"
	"# glibc in a static executable: the dynamic-linker state it sets up at start\n"
	"fun:*alloc\n"
	"...\n"
	"fun:_dl_non_dynamic_init\n"
	"\n"
	"# glibc locale data loaded by setlocale/newlocale, cached for the process\n"
	"fun:malloc\n"
	"...\n"
	"fun:_nl_find_locale\n";

static void rule_free(struct supp_rule *r)
{
	size_t i;

	for (i = 0; i < r->npats; i++)
		free(r->pats[i].glob);
	free(r->pats);
	free(r->name);
	free(r->description);
}

static int rule_add_pattern(struct supp_rule *r, enum supp_kind kind, const char *glob)
{
	struct supp_pattern *grown = realloc(r->pats, (r->npats + 1) * sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	r->pats = grown;
	r->pats[r->npats].kind = kind;
	r->pats[r->npats].glob = glob ? strdup(glob) : NULL;
	if (glob && !r->pats[r->npats].glob)
		return -ENOMEM;
	r->npats++;
	return 0;
}

static int rules_push(struct suppressions *s, struct supp_rule *r)
{
	struct supp_rule *grown = realloc(s->rules, (s->n + 1) * sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	s->rules = grown;
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

int suppressions_parse(struct suppressions *s, const char *text, const char *label, char **err)
{
	struct supp_rule cur = { 0 };
	char *copy = strdup(text), *save = NULL, *raw, *line, *comment = NULL;
	int lineno = 0, ret = 0;

	*err = NULL;
	if (!copy)
		return -ENOMEM;
	/* strsep keeps empty lines: they end a rule */
	for (save = copy; (raw = strsep(&save, "\n")) && !ret;) {
		lineno++;
		line = trim(raw);
		if (line[0] == '#') {
			if (!cur.npats) {
				free(comment);
				comment = strdup(trim(line + 1));
			}
			continue;
		}
		if (!line[0]) {
			if (cur.npats)
				ret = rules_push(s, &cur);
			free(comment);
			comment = NULL;
			continue;
		}
		if (!cur.npats) {
			if (asprintf(&cur.name, "%s:%d", label, lineno) < 0) {
				ret = -ENOMEM;
				break;
			}
			cur.description = comment;
			comment = NULL;
		}
		if (!strcmp(line, "..."))
			ret = rule_add_pattern(&cur, SUPP_ANY, NULL);
		else if (!strncmp(line, "fun:", 4) && line[4])
			ret = rule_add_pattern(&cur, SUPP_FUN, line + 4);
		else if (!strncmp(line, "mod:", 4) && line[4])
			ret = rule_add_pattern(&cur, SUPP_MOD, line + 4);
		else if (asprintf(err, "%s:%d: '%s' is not a frame pattern (fun:GLOB, mod:GLOB or ...)",
				  label, lineno, line) >= 0)
			ret = -EINVAL;
		else
			ret = -ENOMEM;
	}
	if (!ret && cur.npats)
		ret = rules_push(s, &cur);
	rule_free(&cur);
	free(comment);
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

static bool frame_matches(const struct supp_pattern *p, const struct report_frame *f)
{
	switch (p->kind) {
	case SUPP_FUN:
		return f->function ? !fnmatch(p->glob, f->function, 0) : !strcmp(p->glob, "*");
	case SUPP_MOD:
		return f->module && !fnmatch(p->glob, f->module, 0);
	default:
		return true;
	}
}

/* Do patterns P[0..NP) match a prefix of frames F[0..NF)? */
static bool match_from(const struct supp_pattern *p, size_t np, const struct report_frame *f,
		       size_t nf)
{
	size_t k;

	if (!np)
		return true;
	if (p->kind == SUPP_ANY) {
		for (k = 0; k <= nf; k++)
			if (match_from(p + 1, np - 1, f + k, nf - k))
				return true;
		return false;
	}
	return nf && frame_matches(p, f) && match_from(p + 1, np - 1, f + 1, nf - 1);
}

struct supp_rule *suppressions_match(struct suppressions *s, const struct report_stack *stack)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		struct supp_rule *r = &s->rules[i];

		if (!match_from(r->pats, r->npats, stack->frames, stack->nframes))
			continue;
		r->stacks++;
		r->bytes += stack->bytes;
		r->allocations += stack->allocations;
		return r;
	}
	return NULL;
}

void suppressions_free(struct suppressions *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		rule_free(&s->rules[i]);
	free(s->rules);
	s->rules = NULL;
	s->n = 0;
}
