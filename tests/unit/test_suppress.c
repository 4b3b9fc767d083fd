/* Unit test for report/suppress.c: dwleak's format and memcheck's in one
 * file, memcheck suppressions of other kinds passed over and counted,
 * match-leak-kinds against stacks the leak check classified, fun: on the
 * demangled and the raw name, obj:, src:, "...", (below main), the
 * allocator's frames under memcheck's first one, every malformed memcheck
 * block with its message, valgrind's own default.supp, and inputs that
 * must neither crash nor take long. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "suppress.h"

#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define LIBSTDCXX "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30"
#define PROG "/src/build/supp_leaks"

/* A C++ leak as dwleak walks it: malloc, libstdc++'s operator new (which
 * operator new[] reached by a tail call), the program, libc's start. */
static const struct report_frame new_frames[] = {
	{ .module = LIBC, .function = "malloc", .symbol = "malloc" },
	{ .module = LIBSTDCXX, .function = "operator new(unsigned long)", .symbol = "_Znwm" },
	{ .module = PROG, .function = "SuppLeaks::new_leak()", .symbol = "_ZN9SuppLeaks8new_leakEv",
	  .file = "/src/testdata/supp_leaks.cpp", .line = 30 },
	{ .module = PROG, .function = "main", .symbol = "main", .file = "/src/testdata/supp_leaks.cpp", .line = 70 },
	{ .module = LIBC, .function = "__libc_start_call_main", .symbol = "__libc_start_call_main" },
	{ .module = LIBC, .function = "__libc_start_main", .symbol = "__libc_start_main" },
	{ .module = PROG, .function = "_start", .symbol = "_start" },
};

/* A C leak: malloc called by malloc_leak; an inlined helper on the way,
 * whose DW_AT_name is its raw name; the bottom frame has no name. */
static const struct report_frame malloc_frames[] = {
	{ .module = LIBC, .function = "malloc", .symbol = "malloc" },
	{ .module = PROG, .function = "std::__cxx11::basic_string<char>::_M_create[abi:cxx11]()",
	  .symbol = "_M_create", .inlined = true },
	{ .module = PROG, .function = "malloc_leak", .symbol = "malloc_leak", .file = "/src/testdata/supp_leaks.cpp",
	  .line = 40 },
	{ .module = PROG, .function = "main", .symbol = "main" },
	{ .module = LIBC, .function = "__libc_start_call_main", .symbol = "__libc_start_call_main" },
	{ .module = NULL, .function = NULL, .symbol = NULL },
};

static struct report_stack stack_of(const struct report_frame *f, size_t n, uint64_t bytes)
{
	return (struct report_stack){ .bytes = bytes, .allocations = 1, .frames = f, .nframes = n };
}

/* S with BYTES of each kind in KINDS (a mask), as the leak check leaves it. */
static struct report_stack with_kinds(struct report_stack s, unsigned int kinds)
{
	s.has_leak_kinds = true;
	for (int k = 0; k < REPORT_LEAK_KIND_COUNT; k++)
		if (kinds & (1u << k))
			s.leak_kinds[k] = (struct report_leak_count){ 8, 1 };
	return s;
}

#define KIND(id) (1u << REPORT_LEAK_##id)

/* Parses TEXT alone; CHECKs it parses. */
static void parse_ok(struct suppressions *s, const char *text)
{
	char *err = NULL;
	int ret = suppressions_parse(s, text, "t.supp", &err);

	CHECK(ret == 0, "parse: %d %s\n%s", ret, err ? err : "", text);
	free(err);
}

/* Whether the rules of TEXT suppress STACK (by rule NAME when not NULL). */
static bool suppresses(const char *text, const struct report_stack *stack, const char *name)
{
	struct suppressions s = { 0 };
	struct supp_rule *r;
	bool yes;

	parse_ok(&s, text);
	r = suppressions_match(&s, stack);
	yes = r && (!name || !strcmp(r->name, name));
	EXPECT(!r || !name || !strcmp(r->name, name), "credited '%s', want '%s'", r->name, name);
	suppressions_free(&s);
	return yes;
}

static void test_mixed_file(void)
{
	static const char text[] =
		"# dwleak's own: the config cache\n"      /* 1 */
		"fun:malloc\n"                            /* 2 */
		"...\n"                                   /* 3 */
		"fun:Config::load*\n"                     /* 4 */
		"\n"                                      /* 5 */
		"# memcheck's: the C++ leak\n"            /* 6 */
		"{\n"                                     /* 7 */
		"   new_leak accepted\n"                  /* 8 */
		"   Memcheck:Leak\n"                      /* 9 */
		"   match-leak-kinds: definite\n"         /* 10 */
		"\n"                                      /* 11: blank lines inside are nothing */
		"   # nor are comments\n"                 /* 12 */
		"   fun:_Znam\n"                          /* 13 */
		"   fun:_ZN9SuppLeaks8new_leakEv\n"       /* 14 */
		"}\n"                                     /* 15 */
		"{\n"                                     /* 16 */
		"   cond\n"                               /* 17 */
		"   Memcheck:Cond\n"                      /* 18 */
		"   fun:strlen\n"                         /* 19 */
		"}\n"                                     /* 20 */
		"{\n"                                     /* 21 */
		"   param\n"                              /* 22 */
		"   Memcheck:Param\n"                     /* 23 */
		"   write(buf)\n"                         /* 24 */
		"   fun:write\n"                          /* 25 */
		"}\n"                                     /* 26 */
		"{\n"                                     /* 27 */
		"   race\n"                               /* 28 */
		"   Helgrind:Race\n"                      /* 29 */
		"   fun:worker\n"                         /* 30 */
		"}\n"                                     /* 31 */
		"{\n"                                     /* 32 */
		"   two tools\n"                          /* 33 */
		"   Addrcheck,Memcheck:Leak\n"            /* 34 */
		"   fun:calloc\n"                         /* 35 */
		"   obj:*/libfoo.so*\n"                   /* 36 */
		"   src:foo.c:12\n"                       /* 37 */
		"   src:bar.c\n"                          /* 38 */
		"   ...\n"                                /* 39 */
		"   fun:(below main)\n"                   /* 40 */
		"}\n"                                     /* 41 */
		"fun:realloc\n"                           /* 42: ours again, no blank line needed */
		"mod:*/libbar.so\n"                       /* 43 */
		"{\n"                                     /* 44: right after ours */
		"   all kinds\n"                          /* 45 */
		"   Memcheck:Leak\n"                      /* 46 */
		"   match-leak-kinds: reachable, possible\n" /* 47 */
		"   fun:malloc\n"                         /* 48 */
		"}\n";                                    /* 49 */
	struct suppressions s = { 0 };
	const struct supp_rule *r;

	parse_ok(&s, text);
	CHECK(s.n == 5, "%zu rules", s.n);
	EXPECT(s.skipped == 3, "%zu skipped, want Cond, Param and Helgrind's", s.skipped);

	r = &s.rules[0];
	EXPECT(!strcmp(r->name, "t.supp:2") && !r->memcheck && r->leak_kinds == SUPP_LEAK_KINDS_ALL &&
		       r->npats == 3 && r->description && !strcmp(r->description, "dwleak's own: the config cache"),
	       "rule 0: %s", r->name);
	r = &s.rules[1];
	EXPECT(!strcmp(r->name, "new_leak accepted (t.supp:7)") && r->memcheck, "rule 1: %s", r->name);
	EXPECT(r->description && !strcmp(r->description, "memcheck's: the C++ leak"), "rule 1's description");
	EXPECT(r->leak_kinds == KIND(DEFINITELY_LOST) && r->npats == 2 && r->pats[0].kind == SUPP_FUN &&
		       !strcmp(r->pats[0].glob, "_Znam"),
	       "rule 1's kinds %#x, %zu patterns", r->leak_kinds, r->npats);
	r = &s.rules[2];
	EXPECT(!strcmp(r->name, "two tools (t.supp:32)") && r->leak_kinds == SUPP_LEAK_KINDS_ALL && r->npats == 6,
	       "rule 2: %s, %zu patterns", r->name, r->npats);
	if (r->npats == 6) {
		EXPECT(r->pats[1].kind == SUPP_MOD && !strcmp(r->pats[1].glob, "*/libfoo.so*"));
		EXPECT(r->pats[2].kind == SUPP_SRC && !strcmp(r->pats[2].glob, "foo.c") && r->pats[2].line == 12);
		EXPECT(r->pats[3].kind == SUPP_SRC && !strcmp(r->pats[3].glob, "bar.c") && r->pats[3].line == 0);
		EXPECT(r->pats[4].kind == SUPP_ANY && r->pats[5].kind == SUPP_FUN);
	}
	r = &s.rules[3];
	EXPECT(!strcmp(r->name, "t.supp:42") && !r->memcheck && r->npats == 2 && !r->description, "rule 3: %s",
	       r->name);
	r = &s.rules[4];
	EXPECT(!strcmp(r->name, "all kinds (t.supp:44)") &&
		       r->leak_kinds == (KIND(REACHABLE) | KIND(POSSIBLY_LOST)),
	       "rule 4: %s %#x", r->name, r->leak_kinds);

	/* a second file adds to the first; skipped counts go on, a kind of a
	 * later memcheck's among them */
	parse_ok(&s, "{\n x\n Memcheck:Addr8\n fun:f\n}\n{\n y\n Memcheck:Leak\n match-leak-kinds: all\n fun:g\n}\n"
		     "{\n z\n Memcheck:SomeLaterKind\n extra line\n fun:h\n}\n");
	EXPECT(s.n == 6 && s.skipped == 5 && s.rules[5].leak_kinds == SUPP_LEAK_KINDS_ALL, "%zu rules, %zu skipped",
	       s.n, s.skipped);
	parse_ok(&s, "{\n n\n Memcheck:Leak\n match-leak-kinds: none\n fun:g\n}\n");
	EXPECT(s.n == 7 && s.rules[6].leak_kinds == 0);
	suppressions_free(&s);
	EXPECT(s.n == 0 && s.skipped == 0 && !s.rules);
}

static void test_function_names(void)
{
	struct report_stack n = stack_of(new_frames, N(new_frames), 40);
	struct report_stack m = stack_of(malloc_frames, N(malloc_frames), 24);

	/* dwleak's format: the demangled name, and now the raw one too */
	EXPECT(suppresses("fun:malloc\nfun:operator new*\nfun:SuppLeaks::new_leak()\n", &n, "t.supp:1"));
	EXPECT(suppresses("fun:malloc\nfun:_Znwm\nfun:_ZN9SuppLeaks*\n", &n, NULL), "raw names in dwleak's format");
	EXPECT(!suppresses("fun:malloc\nfun:_Znam\n", &n, NULL), "operator new[] is no frame of the stack");
	/* memcheck's, as --gen-suppressions=all writes it for new[] */
	EXPECT(suppresses("{\n gen\n Memcheck:Leak\n match-leak-kinds: definite\n fun:_Znam\n"
			  " fun:_ZN9SuppLeaks8new_leakEv\n fun:main\n}\n",
			  &n, "gen (t.supp:1)"),
	       "fun:_Znam stands for malloc + operator new");
	EXPECT(suppresses("{\n gen\n Memcheck:Leak\n fun:_Znwm\n fun:_ZN9SuppLeaks8new_leakEv\n}\n", &n, NULL));
	EXPECT(suppresses("{\n d\n Memcheck:Leak\n fun:operator new*\n fun:SuppLeaks::new_leak()\n}\n", &n, NULL),
	       "demangled names in memcheck's format");
	EXPECT(!suppresses("{\n m\n Memcheck:Leak\n fun:malloc\n fun:_ZN9SuppLeaks8new_leakEv\n}\n", &n, NULL),
	       "memcheck's stack of new starts at operator new, not malloc");
	EXPECT(!suppresses("{\n m\n Memcheck:Leak\n fun:calloc\n fun:malloc_leak\n}\n", &m, NULL));
	/* and plain frame by frame when the rule names malloc and operator new */
	EXPECT(suppresses("{\n m\n Memcheck:Leak\n fun:malloc\n fun:_Znwm\n fun:_ZN9*\n}\n", &n, NULL));
	/* the inlined frame by its DW_AT_name; memcheck's '[' is a '[' */
	EXPECT(suppresses("{\n i\n Memcheck:Leak\n fun:malloc\n fun:_M_create\n fun:malloc_leak\n}\n", &m, NULL));
	EXPECT(suppresses("{\n i\n Memcheck:Leak\n fun:malloc\n fun:*_M_create[abi:cxx11]()\n}\n", &m, NULL),
	       "memcheck's globs take [ as itself");
	EXPECT(suppresses("{\n i\n Memcheck:Leak\n fun:mall?c\n fun:*\n fun:m*_l??k\n}\n", &m, NULL));
	EXPECT(!suppresses("{\n i\n Memcheck:Leak\n fun:mall?c\n fun:*\n fun:m*_l?k\n}\n", &m, NULL));
	/* (below main), and memcheck's ??? for a frame with no name */
	EXPECT(suppresses("{\n b\n Memcheck:Leak\n fun:_Znwm\n fun:_ZN9SuppLeaks8new_leakEv\n fun:main\n"
			  " fun:(below main)\n}\n",
			  &n, NULL));
	EXPECT(!suppresses("fun:malloc\n...\nfun:(below main)\n", &n, NULL), "(below main) is memcheck's word only");
	EXPECT(suppresses("{\n q\n Memcheck:Leak\n fun:malloc\n ...\n fun:(below main)\n fun:???\n}\n", &m, NULL));
	EXPECT(suppresses("{\n q\n Memcheck:Leak\n fun:malloc\n ...\n fun:(below main)\n fun:*\n}\n", &m, NULL));
	EXPECT(!suppresses("{\n q\n Memcheck:Leak\n fun:malloc\n ...\n fun:(below main)\n obj:*\n}\n", &m, NULL),
	       "obj: never matches a frame in no object");
}

static void test_objects_sources_wildcards(void)
{
	struct report_stack n = stack_of(new_frames, N(new_frames), 40);
	struct report_stack m = stack_of(malloc_frames, N(malloc_frames), 24);

	EXPECT(suppresses("{\n o\n Memcheck:Leak\n obj:*/libc.so.6\n obj:*/libstdc++.so*\n obj:" PROG "\n}\n", &n,
			  NULL));
	EXPECT(suppresses("mod:*/libc.so.6\nmod:*/libstdc++.so*\n", &n, NULL));
	/* memcheck's malloc replacement as the first frame: dwleak's allocator frames */
	EXPECT(suppresses("{\n o\n Memcheck:Leak\n obj:*/vgpreload_memcheck-amd64-linux.so\n"
			  " fun:_ZN9SuppLeaks8new_leakEv\n}\n",
			  &n, NULL));
	EXPECT(!suppresses("{\n o\n Memcheck:Leak\n obj:*/libfoo.so\n fun:_ZN9SuppLeaks8new_leakEv\n}\n", &n, NULL));
	/* src:FILE[:LINE] on the base name */
	EXPECT(suppresses("{\n s\n Memcheck:Leak\n fun:_Znam\n src:supp_leaks.cpp:30\n src:supp_leaks.cpp\n}\n", &n,
			  NULL));
	EXPECT(suppresses("{\n s\n Memcheck:Leak\n ...\n src:*_leaks.c??:30\n}\n", &n, NULL));
	EXPECT(!suppresses("{\n s\n Memcheck:Leak\n ...\n src:supp_leaks.cpp:31\n}\n", &n, NULL), "the wrong line");
	EXPECT(!suppresses("{\n s\n Memcheck:Leak\n ...\n src:testdata/supp_leaks.cpp\n}\n", &n, NULL),
	       "src: is the base name");
	EXPECT(!suppresses("{\n s\n Memcheck:Leak\n src:*\n}\n", &n, NULL), "malloc has no source here");
	/* "..." anywhere, also first and last */
	EXPECT(suppresses("{\n w\n Memcheck:Leak\n ...\n fun:main\n ...\n}\n", &m, NULL));
	EXPECT(suppresses("...\nfun:main\nfun:__libc_start_call_main\n", &m, NULL));
	EXPECT(!suppresses("...\nfun:main\nfun:_start\n", &m, NULL));
	EXPECT(suppresses("fun:malloc\n...\n...\nfun:_start\n", &n, NULL));
	EXPECT(!suppresses("fun:malloc\n...\nfun:_start\nfun:main\n", &n, NULL), "order kept");
	EXPECT(!suppresses("fun:main\n", &n, NULL), "a rule matches from the innermost frame");
}

static void test_leak_kinds(void)
{
	struct report_stack plain = stack_of(malloc_frames, N(malloc_frames), 24);
	struct report_stack def = with_kinds(plain, KIND(DEFINITELY_LOST));
	struct report_stack both = with_kinds(plain, KIND(DEFINITELY_LOST) | KIND(REACHABLE));
	struct report_stack after = with_kinds(plain, 0); /* every block allocated after the check */
	static const char reach[] = "{\n r\n Memcheck:Leak\n match-leak-kinds: reachable\n fun:malloc\n}\n";
	static const char defin[] = "{\n d\n Memcheck:Leak\n match-leak-kinds: definite\n fun:malloc\n}\n";
	static const char none[] = "{\n z\n Memcheck:Leak\n match-leak-kinds: none\n fun:malloc\n}\n";
	char text[512];
	struct suppressions s = { 0 };
	struct supp_rule *r;

	EXPECT(!suppresses(reach, &def, NULL), "a reachable rule leaves lost blocks");
	EXPECT(suppresses(defin, &def, NULL));
	EXPECT(!suppresses(reach, &both, NULL), "a stack with lost and reachable blocks stays");
	EXPECT(!suppresses(defin, &both, NULL));
	EXPECT(suppresses("{\n b\n Memcheck:Leak\n match-leak-kinds: definite,reachable\n fun:malloc\n}\n", &both,
			  NULL));
	EXPECT(suppresses("fun:malloc\n", &both, NULL), "dwleak's format: every kind");
	EXPECT(suppresses(reach, &plain, NULL), "no leak check: the rule applies to the whole stack");
	EXPECT(suppresses(reach, &after, NULL), "no block has a kind");
	EXPECT(!suppresses(none, &plain, NULL) && !suppresses(none, &def, NULL), "match-leak-kinds: none");
	EXPECT(suppresses("{\n a\n Memcheck:Leak\n match-leak-kinds: all\n fun:malloc\n}\n", &both, NULL));

	/* two rules together cover both kinds, as memcheck's two loss records
	 * would be; the first that covers some is credited */
	snprintf(text, sizeof(text), "%s%s%s", none, reach, defin);
	parse_ok(&s, text);
	r = suppressions_match(&s, &both);
	EXPECT(r && !strcmp(r->name, "r (t.supp:7)") && r->stacks == 1 && r->bytes == 24 && r->allocations == 1,
	       "credited %s", r ? r->name : "none");
	EXPECT(s.rules[2].stacks == 0 && s.rules[0].stacks == 0, "one rule credited per stack");
	r = suppressions_match(&s, &def);
	EXPECT(r == &s.rules[2], "the definite rule for a definite stack");
	EXPECT(!suppressions_match(&s, &(struct report_stack){ 0 }), "no frames, no match");
	suppressions_free(&s);
}

/* TEXT must fail to parse with exactly the message WANT. */
static void parse_fails(const char *text, const char *want)
{
	struct suppressions s = { 0 };
	char *err = NULL;
	int ret = suppressions_parse(&s, text, "bad.supp", &err);

	EXPECT(ret == -EINVAL && err && !strcmp(err, want), "got %d '%s'\n  want '%s'\n  for:\n%s", ret,
	       err ? err : "(none)", want, text);
	free(err);
	suppressions_free(&s);
}

static void test_malformed(void)
{
	parse_fails("{\n name\n Memcheck:Leak\n fun:malloc\n", "bad.supp:1: '{' opens a memcheck suppression that no '}' closes");
	parse_fails("fun:a\n\n{\n name\n Memcheck:Cond\n fun:strlen\n",
		    "bad.supp:3: '{' opens a memcheck suppression that no '}' closes");
	parse_fails("{\n", "bad.supp:1: '{' opens a memcheck suppression that no '}' closes");
	parse_fails("{\n name\n", "bad.supp:1: '{' opens a memcheck suppression that no '}' closes");
	parse_fails("{\n}\n", "bad.supp:2: '}' right after '{': a memcheck suppression's first line is its name");
	parse_fails("{\n name\n}\n",
		    "bad.supp:3: '}' is not the TOOL:KIND line (Memcheck:Leak) that follows the name of the memcheck "
		    "suppression opened at line 1");
	parse_fails("{\n name\n Leak\n fun:malloc\n}\n",
		    "bad.supp:3: 'Leak' is not the TOOL:KIND line (Memcheck:Leak) that follows the name of the memcheck "
		    "suppression opened at line 1");
	parse_fails("{\n name\n Memcheck:leak\n fun:malloc\n}\n",
		    "bad.supp:3: 'Memcheck:leak': memcheck's kind for leaks is spelled Leak");
	parse_fails("{\n name\n Memcheck:Leak\n fun:malloc\n function:main\n}\n",
		    "bad.supp:5: 'function:main' is not a frame line of a memcheck suppression (fun:GLOB, obj:GLOB, "
		    "src:FILE[:LINE] or ...)");
	parse_fails("{\n name\n Memcheck:Leak\n fun:malloc\n mod:*/libc.so*\n}\n",
		    "bad.supp:5: 'mod:*/libc.so*' is not a frame line of a memcheck suppression (fun:GLOB, obj:GLOB, "
		    "src:FILE[:LINE] or ...)");
	parse_fails("{\n name\n Memcheck:Leak\n fun:malloc\n match-leak-kinds: all\n}\n",
		    "bad.supp:5: 'match-leak-kinds: all' is not a frame line of a memcheck suppression (fun:GLOB, "
		    "obj:GLOB, src:FILE[:LINE] or ...)");
	parse_fails("{\n name\n Memcheck:Leak\n match-leak-kinds: definitely\n fun:malloc\n}\n",
		    "bad.supp:4: 'match-leak-kinds: definitely': match-leak-kinds takes definite, indirect, possible and "
		    "reachable, separated by commas, or all, or none");
	parse_fails("{\n name\n Memcheck:Leak\n match-leak-kinds:\n fun:malloc\n}\n",
		    "bad.supp:4: 'match-leak-kinds:': match-leak-kinds takes definite, indirect, possible and "
		    "reachable, separated by commas, or all, or none");
	parse_fails("{\n name\n Memcheck:Leak\n match-leak-kinds: definite,,reachable\n fun:malloc\n}\n",
		    "bad.supp:4: 'match-leak-kinds: definite,,reachable': match-leak-kinds takes definite, indirect, "
		    "possible and reachable, separated by commas, or all, or none");
	parse_fails("{\n name\n Memcheck:Leak\n match-leak-kinds: all,definite\n fun:malloc\n}\n",
		    "bad.supp:4: 'match-leak-kinds: all,definite': match-leak-kinds takes definite, indirect, "
		    "possible and reachable, separated by commas, or all, or none");
	parse_fails("{\n name\n Memcheck:Leak\n}\n",
		    "bad.supp:4: the memcheck suppression opened at line 1 has no frame line (fun:, obj:, src: or ...)");
	parse_fails("{\n name\n Memcheck:Leak\n match-leak-kinds: reachable\n}\n",
		    "bad.supp:5: the memcheck suppression opened at line 1 has no frame line (fun:, obj:, src: or ...)");
	parse_fails("{\n name\n Memcheck:Leak\n ...\n ...\n}\n",
		    "bad.supp:6: the memcheck suppression opened at line 1 has only '...' frame lines: it would "
		    "suppress every stack");
	parse_fails("{\n name\n Memcheck:Leak\n src:a.c:x\n}\n",
		    "bad.supp:4: 'src:a.c:x': the line after src:FILE: is not a line number");
	parse_fails("{\n name\n Memcheck:Leak\n src:a.c:0\n}\n",
		    "bad.supp:4: 'src:a.c:0': the line after src:FILE: is not a line number");
	parse_fails("{\n name\n Memcheck:Leak\n src:a.c:99999999999\n}\n",
		    "bad.supp:4: 'src:a.c:99999999999': the line after src:FILE: is not a line number");
	parse_fails("{\n one\n Memcheck:Leak\n fun:malloc\n{\n two\n Memcheck:Leak\n fun:calloc\n}\n",
		    "bad.supp:5: '{' inside the memcheck suppression opened at line 1: its '}' is missing");
	parse_fails("{\n one\n Helgrind:Race\n fun:f\n{\n two\n Memcheck:Leak\n fun:calloc\n}\n",
		    "bad.supp:5: '{' inside the memcheck suppression opened at line 1: its '}' is missing");
	parse_fails("fun:malloc\n}\n", "bad.supp:2: '}' closes no memcheck suppression (none was opened with '{')");
	parse_fails("{\n a\n Memcheck:Leak\n fun:malloc\n}\n}\n",
		    "bad.supp:6: '}' closes no memcheck suppression (none was opened with '{')");
	/* dwleak's format as before */
	parse_fails("fun:malloc\nobj:*/libc.so.6\n",
		    "bad.supp:2: 'obj:*/libc.so.6' is not a frame pattern (fun:GLOB, mod:GLOB or ...)");
	parse_fails("fun:\n", "bad.supp:1: 'fun:' is not a frame pattern (fun:GLOB, mod:GLOB or ...)");
	parse_fails("{ name\n", "bad.supp:1: '{ name' is not a frame pattern (fun:GLOB, mod:GLOB or ...)");

	/* the rules before the error are kept (the caller gives up anyway) */
	{
		struct suppressions s = { 0 };
		char *err = NULL;

		EXPECT(suppressions_parse(&s, "fun:a\n\n{\n n\n Memcheck:Leak\n fun:b\n}\n{\n", "x", &err) == -EINVAL);
		EXPECT(s.n == 2, "%zu rules before the error", s.n);
		free(err);
		suppressions_free(&s);
	}
}

/* valgrind's own suppressions load, every Leak one with it (where valgrind
 * is installed; CI installs it). */
static void test_valgrind_files(void)
{
	static const char *const paths[] = {
		"/usr/lib/x86_64-linux-gnu/valgrind/default.supp",
		"/usr/libexec/valgrind/default.supp",
		"/usr/lib/valgrind/default.supp",
		"/usr/lib/valgrind/debian.supp",
	};
	int loaded = 0;

	for (size_t i = 0; i < N(paths); i++) {
		struct suppressions s = { 0 };
		char *err = NULL;
		size_t leaks = 0;

		if (access(paths[i], R_OK))
			continue;
		EXPECT(suppressions_load(&s, paths[i], &err) == 0, "%s: %s", paths[i], err ? err : "");
		for (size_t k = 0; k < s.n; k++)
			leaks += s.rules[k].memcheck;
		printf("%s: %zu Memcheck:Leak rules, %zu others skipped\n", paths[i], leaks, s.skipped);
		EXPECT(leaks == s.n && (strstr(paths[i], "debian") || (s.skipped > 100 && leaks > 0)),
		       "%s: %zu rules, %zu skipped", paths[i], s.n, s.skipped);
		loaded++;
		free(err);
		suppressions_free(&s);
	}
	if (!loaded)
		printf("no valgrind suppressions file here: not checked\n");
}

/* Inputs a user may give: every truncation of a mixed file, lines cut
 * anywhere, random bytes; none may crash or read out of bounds (ASan),
 * and long rules with many "..." must match in no time. */
static void test_hostile(void)
{
	static const char mixed[] =
		"# c\nfun:malloc\n...\nfun:main\n\n{\n n\n Memcheck:Leak\n match-leak-kinds: definite,reachable\n"
		" fun:_Znam\n src:a.c:3\n obj:*\n ...\n}\n{\n h\n Helgrind:Race\n fun:x\n}\nmod:*\n";
	struct report_stack n = stack_of(new_frames, N(new_frames), 40);
	uint64_t seed = 0x5eed5u;
	char buf[256], *big;
	size_t i, k;
	clock_t t0;

	for (i = 0; i <= sizeof(mixed) - 1; i++) {
		struct suppressions s = { 0 };
		char *err = NULL;

		memcpy(buf, mixed, i);
		buf[i] = 0;
		if (suppressions_parse(&s, buf, "cut", &err) == 0)
			suppressions_match(&s, &n);
		free(err);
		suppressions_free(&s);
	}
	for (i = 0; i < 2000; i++) {
		static const char alphabet[] = "{}\n #.:*?[]\\funobjsrcmod:Memcheck:Leakmatch-leak-kinds:,definite";
		struct suppressions s = { 0 };
		char *err = NULL;
		size_t len = check_xorshift64(&seed) % (sizeof(buf) - 1);

		for (k = 0; k < len; k++)
			buf[k] = alphabet[check_xorshift64(&seed) % (sizeof(alphabet) - 1)];
		buf[len] = 0;
		if (suppressions_parse(&s, buf, "rand", &err) == 0)
			suppressions_match(&s, &n);
		free(err);
		suppressions_free(&s);
	}

	/* 100000 patterns: "...", then fun:x-that-never-matches, in both
	 * formats; and a 1 MB glob of '*' and '?' */
	big = malloc(2u << 20);
	CHECK(big);
	for (int memcheck = 0; memcheck < 2; memcheck++) {
		struct suppressions s = { 0 };
		char *err = NULL;
		size_t at = 0;

		if (memcheck)
			at += (size_t)sprintf(big, "{\n many\n Memcheck:Leak\n fun:malloc\n");
		for (k = 0; k < 50000; k++)
			at += (size_t)sprintf(big + at, "...\nfun:%s\n", k + 1 < 50000 ? "*" : "nowhere");
		if (memcheck)
			at += (size_t)sprintf(big + at, "}\n");
		t0 = clock();
		CHECK(suppressions_parse(&s, big, "big", &err) == 0, "%s", err ? err : "");
		EXPECT(!suppressions_match(&s, &n), "no stack matches");
		EXPECT(clock() - t0 < 20 * CLOCKS_PER_SEC, "100000 patterns took %.1f s",
		       (double)(clock() - t0) / CLOCKS_PER_SEC);
		free(err);
		suppressions_free(&s);
	}
	{
		struct suppressions s = { 0 };
		char *err = NULL;
		size_t at = (size_t)sprintf(big, "{\n stars\n Memcheck:Leak\n fun:");

		for (k = 0; k < (1u << 20); k++)
			big[at++] = k % 2 ? '*' : '?';
		strcpy(big + at, "x\n}\n");
		t0 = clock();
		CHECK(suppressions_parse(&s, big, "stars", &err) == 0, "%s", err ? err : "");
		EXPECT(!suppressions_match(&s, &n));
		EXPECT(clock() - t0 < 20 * CLOCKS_PER_SEC, "a 1 MB glob took %.1f s",
		       (double)(clock() - t0) / CLOCKS_PER_SEC);
		free(err);
		suppressions_free(&s);
	}
	free(big);
}

int main(void)
{
	test_mixed_file();
	test_function_names();
	test_objects_sources_wildcards();
	test_leak_kinds();
	test_malformed();
	test_valgrind_files();
	test_hostile();
	if (check_status())
		return 1;
	printf("test_suppress: ok\n");
	return 0;
}
