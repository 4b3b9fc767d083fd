/* Unit tests for the JSON parser: values of every type, exact integers,
 * escapes and surrogate pairs, and malformed documents rejected at the
 * right line and column. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json.h"

/* Parses TEXT (LEN bytes, or strlen when LEN is 0); NULL on error. */
static struct json_value *parse_ok(const char *text, size_t len)
{
	struct json_value *v;
	struct json_error err;
	int ret = json_parse(text, len ? len : strlen(text), &v, &err);

	EXPECT(ret == 0, "%s: rejected at %u:%u: %s", text, err.line, err.column, err.message);
	return ret ? NULL : v;
}

/* TEXT must be rejected at LINE:COLUMN with a message containing WORD. */
static void parse_bad(const char *text, size_t len, unsigned int line, unsigned int column,
		      const char *word)
{
	struct json_value *v = (struct json_value *)1;
	struct json_error err = { 0 };
	int ret = json_parse(text, len ? len : strlen(text), &v, &err);

	EXPECT(ret == -EINVAL, "'%s': accepted (ret %d)", text, ret);
	EXPECT(v == NULL, "'%s': *out not NULL on failure", text);
	if (ret != -EINVAL)
		return;
	EXPECT(err.line == line && err.column == column, "'%s': error at %u:%u, want %u:%u (%s)",
	       text, err.line, err.column, line, column, err.message);
	EXPECT(strstr(err.message, word) != NULL, "'%s': message '%s' lacks '%s'", text,
	       err.message, word);
}

static void test_scalars(void)
{
	struct json_value *v;
	uint64_t u;
	int64_t i;
	double d;

	v = parse_ok(" null ", 0);
	EXPECT(v && v->type == JSON_NULL, "null");
	json_free(v);
	v = parse_ok("true", 0);
	EXPECT(v && v->type == JSON_BOOL && v->boolean, "true");
	json_free(v);
	v = parse_ok("\tfalse\r\n", 0);
	EXPECT(v && v->type == JSON_BOOL && !v->boolean, "false");
	json_free(v);

	/* integers stay exact at both ends of int64 and uint64 */
	v = parse_ok("18446744073709551615", 0);
	EXPECT(v && v->type == JSON_UINT && v->u == UINT64_MAX, "UINT64_MAX");
	EXPECT(v && json_to_u64(v, &u) == 0 && u == UINT64_MAX, "json_to_u64(UINT64_MAX)");
	EXPECT(v && json_to_i64(v, &i) == -ERANGE, "json_to_i64(UINT64_MAX) out of range");
	json_free(v);
	v = parse_ok("9223372036854775807", 0);
	EXPECT(v && v->type == JSON_INT && v->i == INT64_MAX, "INT64_MAX");
	json_free(v);
	v = parse_ok("-9223372036854775808", 0);
	EXPECT(v && v->type == JSON_INT && v->i == INT64_MIN, "INT64_MIN");
	EXPECT(v && json_to_u64(v, &u) == -ERANGE, "json_to_u64(negative)");
	json_free(v);
	v = parse_ok("9007199254740993", 0); /* 2^53 + 1: not a double */
	EXPECT(v && v->type == JSON_INT && v->i == 9007199254740993LL, "2^53+1 exact");
	json_free(v);
	v = parse_ok("-0", 0);
	EXPECT(v && v->type == JSON_INT && v->i == 0, "-0");
	json_free(v);

	/* integers past uint64, fractions and exponents are doubles */
	v = parse_ok("18446744073709551616", 0);
	EXPECT(v && v->type == JSON_REAL && v->real == 18446744073709551616.0, "2^64 as double");
	json_free(v);
	v = parse_ok("-9223372036854775809", 0);
	EXPECT(v && v->type == JSON_REAL, "below INT64_MIN as double");
	json_free(v);
	v = parse_ok("5.02", 0);
	EXPECT(v && v->type == JSON_REAL && v->real == 5.02, "5.02");
	EXPECT(v && json_to_u64(v, &u) == -ERANGE, "json_to_u64(5.02)");
	json_free(v);
	v = parse_ok("-1.5E+3", 0);
	EXPECT(v && json_to_double(v, &d) == 0 && d == -1500.0, "-1.5E+3");
	json_free(v);
	v = parse_ok("1e-400", 0); /* underflows to 0: still a finite number */
	EXPECT(v && v->type == JSON_REAL && v->real == 0.0, "1e-400");
	json_free(v);
	v = parse_ok("\"x\"", 0);
	EXPECT(v && json_to_double(v, &d) == -EINVAL, "json_to_double(string)");
	json_free(v);
}

static void test_strings(void)
{
	struct json_value *v;

	v = parse_ok("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", 0);
	EXPECT(v && v->type == JSON_STRING && strcmp(v->string.s, "a\"b\\c/d\b\f\n\r\t") == 0,
	       "simple escapes");
	json_free(v);

	/* \u escapes to UTF-8: 1, 2 and 3 bytes, a surrogate pair to 4 */
	v = parse_ok("\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00\"", 0);
	EXPECT(v && strcmp(v->string.s, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") == 0,
	       "\\u escapes: got '%s'", v ? v->string.s : "");
	EXPECT(v && v->string.len == 10, "\\u escapes length");
	json_free(v);

	/* raw UTF-8 passes through; \u0000 is kept, counted in LEN */
	v = parse_ok("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"", 0);
	EXPECT(v && strcmp(v->string.s, "caf\xc3\xa9 \xf0\x9f\x98\x80") == 0, "raw UTF-8");
	json_free(v);
	v = parse_ok("\"a\\u0000b\"", 0);
	EXPECT(v && v->string.len == 3 && v->string.s[1] == '\0' && v->string.s[2] == 'b',
	       "\\u0000 inside a string");
	json_free(v);
	v = parse_ok("\"\"", 0);
	EXPECT(v && v->string.len == 0 && v->string.s && !v->string.s[0], "empty string");
	json_free(v);
}

static void test_containers(void)
{
	const char *doc =
		"{\n"
		"  \"dwleak_report\": 1,\n"
		"  \"stacks\": [ {\"bytes\": 480, \"frames\": []}, {} ],\n"
		"  \"nested\": [[[]]], \"empty\": {},\n"
		"  \"k\\u00e9y\": null\n"
		"}\n";
	const struct json_value *s, *n;
	struct json_value *v = parse_ok(doc, 0);
	uint64_t u;

	if (!v)
		return;
	EXPECT(v->type == JSON_OBJECT && v->object.n == 5, "object of 5 members");
	EXPECT(v->object.n == 5 && strcmp(v->object.members[4].key, "k\xc3\xa9y") == 0,
	       "escaped key");
	s = json_get(v, "stacks");
	EXPECT(s && s->type == JSON_ARRAY && s->array.n == 2, "stacks array");
	EXPECT(s && s->line == 3 && s->column == 13, "stacks at 3:13, got %u:%u",
	       s ? s->line : 0, s ? s->column : 0);
	n = s && s->array.n ? json_get(s->array.items[0], "bytes") : NULL;
	EXPECT(n && json_to_u64(n, &u) == 0 && u == 480, "stacks[0].bytes");
	EXPECT(json_get(v, "missing") == NULL, "missing key");
	EXPECT(json_get(s, "bytes") == NULL, "json_get on an array");
	EXPECT(json_get(NULL, "x") == NULL, "json_get(NULL)");
	n = json_get(v, "nested");
	EXPECT(n && n->array.n == 1 && n->array.items[0]->array.items[0]->type == JSON_ARRAY,
	       "nested arrays");
	json_free(v);
	json_free(NULL);
}

static void test_depth(void)
{
	char deep[2 * (JSON_MAX_DEPTH + 1) + 1];
	struct json_value *v;
	size_t i;

	/* exactly JSON_MAX_DEPTH levels parse, one more does not */
	for (i = 0; i < JSON_MAX_DEPTH; i++) {
		deep[i] = '[';
		deep[JSON_MAX_DEPTH + i] = ']';
	}
	deep[2 * JSON_MAX_DEPTH] = '\0';
	v = parse_ok(deep, 0);
	json_free(v);
	for (i = 0; i <= JSON_MAX_DEPTH; i++) {
		deep[i] = '[';
		deep[JSON_MAX_DEPTH + 1 + i] = ']';
	}
	deep[2 * (JSON_MAX_DEPTH + 1)] = '\0';
	parse_bad(deep, 0, 1, JSON_MAX_DEPTH + 1, "nested deeper");
}

static void test_malformed(void)
{
	/* where the error is reported: line and column of the offending byte */
	parse_bad("", 0, 1, 1, "end of input");
	parse_bad("   \n  ", 0, 2, 3, "end of input");
	parse_bad("{\"a\": 1", 0, 1, 8, "end of input");
	parse_bad("{\n  \"stacks\": [\n    {\"bytes\": 4", 0, 3, 16, "end of input");
	parse_bad("[1, 2,]", 0, 1, 7, "trailing ','");
	parse_bad("{\"a\": 1,}", 0, 1, 9, "trailing ','");
	parse_bad("[1 2]", 0, 1, 4, "',' or ']'");
	parse_bad("{\"a\" 1}", 0, 1, 6, "':'");
	parse_bad("{a: 1}", 0, 1, 2, "string key");
	parse_bad("{\"a\": 1, \"a\": 2}", 0, 1, 15, "duplicate key \"a\"");
	parse_bad("[1] x", 0, 1, 5, "end of input after the value");
	parse_bad("nul", 0, 1, 1, "a value");
	parse_bad("True", 0, 1, 1, "a value");
	parse_bad("'a'", 0, 1, 1, "a value");
	parse_bad("\xef\xbb\xbf{}", 0, 1, 1, "byte 0xef");

	/* numbers */
	parse_bad("01", 0, 1, 2, "leading zeros");
	parse_bad("-", 0, 1, 2, "digit");
	parse_bad("1.", 0, 1, 3, "digit after '.'");
	parse_bad(".5", 0, 1, 1, "a value");
	parse_bad("1e", 0, 1, 3, "exponent");
	parse_bad("+1", 0, 1, 1, "a value");
	parse_bad("1e999", 0, 1, 1, "out of range");
	parse_bad("[NaN]", 0, 1, 2, "a value");
	parse_bad("0x10", 0, 1, 2, "end of input after");

	/* strings: control bytes, bad escapes, bad UTF-8, lone surrogates */
	parse_bad("\"abc", 0, 1, 5, "missing '\"'");
	parse_bad("\"a\tb\"", 0, 1, 3, "control character");
	parse_bad("\"a\nb\"", 0, 1, 3, "control character");
	parse_bad("\"\\x\"", 0, 1, 3, "after '\\'");
	parse_bad("\"\\u12g4\"", 0, 1, 6, "hex digits");
	parse_bad("\"\\ud83d\"", 0, 1, 8, "not followed by a low");
	parse_bad("\"\\ud83d\\u0041\"", 0, 1, 14, "not a low surrogate");
	parse_bad("\"\\ude00\"", 0, 1, 8, "lone low surrogate");
	parse_bad("\"\xc3\"", 0, 1, 2, "invalid UTF-8");
	parse_bad("\"\xc0\xaf\"", 0, 1, 2, "invalid UTF-8");	      /* overlong '/' */
	parse_bad("\"\xed\xa0\x80\"", 0, 1, 2, "invalid UTF-8");      /* a surrogate */
	parse_bad("\"\xf4\x90\x80\x80\"", 0, 1, 2, "invalid UTF-8"); /* past U+10FFFF */
	parse_bad("\"\xff\"", 0, 1, 2, "invalid UTF-8");
	/* columns count characters: the error after "é" is at column 4 */
	parse_bad("\"\xc3\xa9\" x", 0, 1, 5, "end of input after");
	/* a NUL byte is not whitespace */
	parse_bad("{}\0", 3, 1, 3, "byte 0x00");
}

int main(void)
{
	test_scalars();
	test_strings();
	test_containers();
	test_depth();
	test_malformed();
	if (check_status())
		return 1;
	printf("test_json: all checks passed\n");
	return 0;
}
