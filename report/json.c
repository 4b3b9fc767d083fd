/* A strict JSON parser: one recursive-descent pass over the bytes that builds
 * the tree and tracks line and column, so a rejected document says where. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define CONTAINER_MIN 4	/* first capacity of an array or object; doubles */
#define STRING_MIN 16	/* first capacity of a string buffer; doubles */

/*
 * The parse position.  P is the next byte, END one past the last; LINE and
 * COLUMN are P's position (a UTF-8 continuation byte does not start a new
 * column).  ERR receives the first failure; NULL when the caller does not
 * want it.
 */
struct parser {
	const unsigned char *p, *end;
	unsigned int line, column;
	struct json_error *err;
};

static int parse_value(struct parser *ps, unsigned int depth, struct json_value **out);

/* Records a syntax error at the current position; returns -EINVAL. */
static int __attribute__((format(printf, 2, 3))) fail(struct parser *ps, const char *fmt, ...)
{
	va_list ap;

	if (ps->err) {
		ps->err->line = ps->line;
		ps->err->column = ps->column;
		va_start(ap, fmt);
		vsnprintf(ps->err->message, sizeof(ps->err->message), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static void advance(struct parser *ps)
{
	if (*ps->p == '\n') {
		ps->line++;
		ps->column = 1;
	} else if ((*ps->p & 0xc0) != 0x80) {
		ps->column++;
	}
	ps->p++;
}

static void skip_space(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		advance(ps);
}

/* Fails on the byte at P, naming it (or the end of input) for the user. */
static int fail_unexpected(struct parser *ps, const char *expected)
{
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end of input, expected %s", expected);
	if (*ps->p >= 0x20 && *ps->p < 0x7f)
		return fail(ps, "unexpected '%c', expected %s", *ps->p, expected);
	return fail(ps, "unexpected byte 0x%02x, expected %s", *ps->p, expected);
}

static struct json_value *value_new(struct parser *ps, enum json_type type)
{
	struct json_value *v = calloc(1, sizeof(*v));

	if (v) {
		v->type = type;
		v->line = ps->line;
		v->column = ps->column;
	}
	return v;
}

void json_free(struct json_value *v)
{
	size_t i;

	if (!v)
		return;
	switch (v->type) {
	case JSON_STRING:
		free(v->string.s);
		break;
	case JSON_ARRAY:
		for (i = 0; i < v->array.n; i++)
			json_free(v->array.items[i]);
		free(v->array.items);
		break;
	case JSON_OBJECT:
		for (i = 0; i < v->object.n; i++) {
			free(v->object.members[i].key);
			json_free(v->object.members[i].value);
		}
		free(v->object.members);
		break;
	default:
		break;
	}
	free(v);
}

/* ---- Strings ---- */

/* A growing byte buffer for one string. */
struct strbuf {
	char *s;
	size_t len, cap;
};

static int strbuf_put(struct strbuf *b, const void *bytes, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : STRING_MIN;
		char *s;

		while (b->len + n + 1 > cap)
			cap *= 2;
		s = realloc(b->s, cap);
		if (!s)
			return -ENOMEM;
		b->s = s;
		b->cap = cap;
	}
	memcpy(b->s + b->len, bytes, n);
	b->len += n;
	b->s[b->len] = '\0';
	return 0;
}

/* Appends code point CP (a Unicode scalar value) as UTF-8. */
static int strbuf_put_cp(struct strbuf *b, uint32_t cp)
{
	unsigned char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xc0 | cp >> 6);
		u[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xe0 | cp >> 12);
		u[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		u[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (unsigned char)(0xf0 | cp >> 18);
		u[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
		u[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		u[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return strbuf_put(b, u, n);
}

/* Length of the valid UTF-8 sequence of a non-ASCII character at S (before
 * END), or 0: overlong forms, surrogates and code points past U+10FFFF are
 * invalid (RFC 3629). */
static size_t utf8_seq(const unsigned char *s, const unsigned char *end)
{
	uint32_t cp;
	size_t len, i;

	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if ((size_t)(end - s) < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

/* Reads the 4 hex digits of a \u escape at P into *OUT. */
static int parse_hex4(struct parser *ps, uint32_t *out)
{
	int i;

	*out = 0;
	for (i = 0; i < 4; i++) {
		unsigned char c = ps->p < ps->end ? *ps->p : 0;
		uint32_t d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return fail_unexpected(ps, "4 hex digits after \\u");
		*out = *out << 4 | d;
		advance(ps);
	}
	return 0;
}

/* The code point of a \u escape whose backslash is at P, joining a
 * surrogate pair into one; lone surrogates are rejected. */
static int parse_unicode_escape(struct parser *ps, uint32_t *cp)
{
	uint32_t lo;
	int err;

	advance(ps); /* '\\' */
	advance(ps); /* 'u' */
	err = parse_hex4(ps, cp);
	if (err)
		return err;
	if (*cp >= 0xdc00 && *cp <= 0xdfff)
		return fail(ps, "lone low surrogate \\u%04x", (unsigned int)*cp);
	if (*cp < 0xd800 || *cp > 0xdbff)
		return 0;
	if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
		return fail(ps, "high surrogate \\u%04x not followed by a low one", (unsigned int)*cp);
	advance(ps);
	advance(ps);
	err = parse_hex4(ps, &lo);
	if (err)
		return err;
	if (lo < 0xdc00 || lo > 0xdfff)
		return fail(ps, "high surrogate \\u%04x followed by \\u%04x, not a low surrogate",
			    (unsigned int)*cp, (unsigned int)lo);
	*cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
	return 0;
}

/* Parses the string whose opening quote is at P into B (always set, even
 * when empty). */
static int parse_string_into(struct parser *ps, struct strbuf *b)
{
	int err = strbuf_put(b, "", 0);

	if (err)
		return err;
	advance(ps); /* '"' */
	for (;;) {
		const unsigned char *run = ps->p;
		uint32_t cp;
		size_t len;

		/* plain ASCII in one copy */
		while (ps->p < ps->end && *ps->p >= 0x20 && *ps->p < 0x80 && *ps->p != '"' &&
		       *ps->p != '\\')
			ps->p++;
		ps->column += (unsigned int)(ps->p - run);
		err = strbuf_put(b, run, (size_t)(ps->p - run));
		if (err)
			return err;
		if (ps->p >= ps->end)
			return fail(ps, "unexpected end of input in a string (missing '\"')");
		if (*ps->p == '"') {
			advance(ps);
			return 0;
		}
		if (*ps->p < 0x20)
			return fail(ps, "control character 0x%02x in a string (must be escaped)",
				    *ps->p);
		if (*ps->p >= 0x80) {
			len = utf8_seq(ps->p, ps->end);
			if (!len)
				return fail(ps, "invalid UTF-8 byte 0x%02x in a string", *ps->p);
			err = strbuf_put(b, ps->p, len);
			if (err)
				return err;
			while (len--)
				advance(ps);
			continue;
		}
		/* a backslash */
		if (ps->end - ps->p < 2) {
			advance(ps);
			return fail_unexpected(ps, "an escape character");
		}
		switch (ps->p[1]) {
		case '"': cp = '"'; break;
		case '\\': cp = '\\'; break;
		case '/': cp = '/'; break;
		case 'b': cp = '\b'; break;
		case 'f': cp = '\f'; break;
		case 'n': cp = '\n'; break;
		case 'r': cp = '\r'; break;
		case 't': cp = '\t'; break;
		case 'u':
			err = parse_unicode_escape(ps, &cp);
			if (err)
				return err;
			err = strbuf_put_cp(b, cp);
			if (err)
				return err;
			continue;
		default:
			advance(ps);
			return fail_unexpected(ps, "one of \"\\/bfnrtu after '\\'");
		}
		advance(ps);
		advance(ps);
		err = strbuf_put_cp(b, cp);
		if (err)
			return err;
	}
}

static int parse_string(struct parser *ps, struct json_value **out)
{
	struct json_value *v = value_new(ps, JSON_STRING);
	struct strbuf b = { 0 };
	int err;

	if (!v)
		return -ENOMEM;
	err = parse_string_into(ps, &b);
	if (err) {
		free(b.s);
		free(v);
		return err;
	}
	v->string.s = b.s;
	v->string.len = b.len;
	*out = v;
	return 0;
}

/* ---- Numbers and literals ---- */

static bool at_digit(const struct parser *ps)
{
	return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9';
}

/* Consumes one or more digits; fails naming WHERE when there is none. */
static int parse_digits(struct parser *ps, const char *where)
{
	if (!at_digit(ps))
		return fail_unexpected(ps, where);
	while (at_digit(ps))
		advance(ps);
	return 0;
}

/* Integer magnitude of the digits in [S, E), or false when over UINT64_MAX. */
static bool digits_value(const unsigned char *s, const unsigned char *e, uint64_t *out)
{
	uint64_t v = 0;

	for (; s < e; s++) {
		unsigned int d = *s - '0';

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static int parse_number(struct parser *ps, struct json_value **out)
{
	struct json_value *v = value_new(ps, JSON_REAL);
	const unsigned char *start = ps->p, *digits;
	bool negative = false, integral = true;
	uint64_t mag;
	char *text, *end;
	int err;

	if (!v)
		return -ENOMEM;
	if (*ps->p == '-') {
		negative = true;
		advance(ps);
	}
	digits = ps->p;
	if (ps->p < ps->end && *ps->p == '0') {
		advance(ps);
		if (at_digit(ps)) {
			err = fail(ps, "leading zeros are not allowed in numbers");
			goto fail;
		}
	} else if ((err = parse_digits(ps, "a digit")) != 0) {
		goto fail;
	}
	if (ps->p < ps->end && *ps->p == '.') {
		integral = false;
		advance(ps);
		if ((err = parse_digits(ps, "a digit after '.'")) != 0)
			goto fail;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		integral = false;
		advance(ps);
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			advance(ps);
		if ((err = parse_digits(ps, "a digit in the exponent")) != 0)
			goto fail;
	}

	if (integral && digits_value(digits, ps->p, &mag)) {
		if (!negative && mag <= INT64_MAX) {
			v->type = JSON_INT;
			v->i = (int64_t)mag;
		} else if (!negative) {
			v->type = JSON_UINT;
			v->u = mag;
		} else if (mag <= (uint64_t)INT64_MAX + 1) {
			v->type = JSON_INT;
			v->i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
		}
	}
	if (v->type == JSON_REAL) {
		/* The grammar above is a subset of strtod's (C locale: dwleak
		 * never calls setlocale), so strtod reads exactly this span. */
		text = strndup((const char *)start, (size_t)(ps->p - start));
		if (!text) {
			err = -ENOMEM;
			goto fail;
		}
		v->real = strtod(text, &end);
		err = *end || !isfinite(v->real) ? -ERANGE : 0;
		free(text);
		if (err) {
			ps->line = v->line;
			ps->column = v->column;
			err = fail(ps, "number out of range");
			goto fail;
		}
	}
	*out = v;
	return 0;
fail:
	free(v);
	return err;
}

static int parse_literal(struct parser *ps, struct json_value **out)
{
	static const struct {
		const char *word;
		enum json_type type;
		bool boolean;
	} literals[] = {
		{ "true", JSON_BOOL, true },
		{ "false", JSON_BOOL, false },
		{ "null", JSON_NULL, false },
	};
	size_t i, len;

	for (i = 0; i < sizeof(literals) / sizeof(literals[0]); i++) {
		struct json_value *v;

		len = strlen(literals[i].word);
		if ((size_t)(ps->end - ps->p) < len || memcmp(ps->p, literals[i].word, len) != 0)
			continue;
		v = value_new(ps, literals[i].type);
		if (!v)
			return -ENOMEM;
		v->boolean = literals[i].boolean;
		ps->p += len;
		ps->column += (unsigned int)len;
		*out = v;
		return 0;
	}
	return fail_unexpected(ps, "a value");
}

/* ---- Arrays and objects ---- */

/* Makes room for one more element in *V (N used, *CAP allocated, SIZE each). */
static int grow(void **v, size_t n, size_t *cap, size_t size)
{
	void *g;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : CONTAINER_MIN;
	g = realloc(*v, c * size);
	if (!g)
		return -ENOMEM;
	*v = g;
	*cap = c;
	return 0;
}

/* Consumes the opening bracket at P and, when the container is empty, its
 * CLOSE; 1 when it did (no items follow), else 0. */
static int container_open(struct parser *ps, unsigned char close)
{
	advance(ps); /* '[' or '{' */
	skip_space(ps);
	if (ps->p < ps->end && *ps->p == close) {
		advance(ps);
		return 1;
	}
	return 0;
}

/* After an item: consumes ',' (0: another item follows) or CLOSE (1: the
 * container ends); fails naming EXPECTED on anything else. */
static int container_next(struct parser *ps, unsigned char close, const char *expected)
{
	skip_space(ps);
	if (ps->p < ps->end && *ps->p == ',') {
		advance(ps);
		return 0;
	}
	if (ps->p < ps->end && *ps->p == close) {
		advance(ps);
		return 1;
	}
	return fail_unexpected(ps, expected);
}

static int parse_array(struct parser *ps, unsigned int depth, struct json_value **out)
{
	struct json_value *v = value_new(ps, JSON_ARRAY), *item;
	size_t cap = 0;
	int err, end;

	if (!v)
		return -ENOMEM;
	for (end = container_open(ps, ']'); !end;) {
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == ']') {
			err = fail(ps, "trailing ',' before ']'");
			goto fail;
		}
		err = grow((void **)&v->array.items, v->array.n, &cap, sizeof(*v->array.items));
		if (err)
			goto fail;
		err = parse_value(ps, depth + 1, &item);
		if (err)
			goto fail;
		v->array.items[v->array.n++] = item;
		end = container_next(ps, ']', "',' or ']' in an array");
		if (end < 0) {
			err = end;
			goto fail;
		}
	}
	*out = v;
	return 0;
fail:
	json_free(v);
	return err;
}

static int member_cmp(const void *a, const void *b)
{
	const struct json_member *x = *(const struct json_member *const *)a;
	const struct json_member *y = *(const struct json_member *const *)b;
	size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
	int c = memcmp(x->key, y->key, n);

	if (c)
		return c;
	if (x->key_len != y->key_len)
		return x->key_len < y->key_len ? -1 : 1;
	return x < y ? -1 : x > y; /* document order among equal keys */
}

/* Fails when two members of V share a key, at the later one's value.
 * Sorting a list of pointers keeps this O(n log n) for big objects. */
static int check_duplicates(struct parser *ps, const struct json_value *v)
{
	const struct json_member **sorted;
	size_t i;
	int err = 0;

	if (v->object.n < 2)
		return 0;
	sorted = malloc(v->object.n * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	for (i = 0; i < v->object.n; i++)
		sorted[i] = &v->object.members[i];
	qsort(sorted, v->object.n, sizeof(*sorted), member_cmp);
	for (i = 1; i < v->object.n && !err; i++) {
		const struct json_member *a = sorted[i - 1], *b = sorted[i];

		if (a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0) {
			ps->line = b->value->line;
			ps->column = b->value->column;
			err = fail(ps, "duplicate key \"%.40s\"", b->key);
		}
	}
	free(sorted);
	return err;
}

static int parse_object(struct parser *ps, unsigned int depth, struct json_value **out)
{
	struct json_value *v = value_new(ps, JSON_OBJECT), *item;
	struct json_member *m;
	struct strbuf key;
	size_t cap = 0;
	int err, end;

	if (!v)
		return -ENOMEM;
	for (end = container_open(ps, '}'); !end;) {
		skip_space(ps);
		if (ps->p >= ps->end || *ps->p != '"') {
			err = ps->p < ps->end && *ps->p == '}' ? fail(ps, "trailing ',' before '}'")
							       : fail_unexpected(ps, "a string key");
			goto fail;
		}
		err = grow((void **)&v->object.members, v->object.n, &cap, sizeof(*v->object.members));
		if (err)
			goto fail;
		memset(&key, 0, sizeof(key));
		err = parse_string_into(ps, &key);
		if (err) {
			free(key.s);
			goto fail;
		}
		m = &v->object.members[v->object.n++];
		m->key = key.s;
		m->key_len = key.len;
		m->value = NULL;
		skip_space(ps);
		if (ps->p >= ps->end || *ps->p != ':') {
			err = fail_unexpected(ps, "':' after a key");
			goto fail;
		}
		advance(ps);
		err = parse_value(ps, depth + 1, &item);
		if (err)
			goto fail;
		m->value = item;
		end = container_next(ps, '}', "',' or '}' in an object");
		if (end < 0) {
			err = end;
			goto fail;
		}
	}
	err = check_duplicates(ps, v);
	if (err)
		goto fail;
	*out = v;
	return 0;
fail:
	json_free(v);
	return err;
}

static int parse_value(struct parser *ps, unsigned int depth, struct json_value **out)
{
	*out = NULL;
	skip_space(ps);
	if (ps->p >= ps->end)
		return fail_unexpected(ps, "a value");
	switch (*ps->p) {
	case '{':
	case '[':
		if (depth >= JSON_MAX_DEPTH)
			return fail(ps, "nested deeper than %d arrays and objects", JSON_MAX_DEPTH);
		return *ps->p == '{' ? parse_object(ps, depth, out) : parse_array(ps, depth, out);
	case '"':
		return parse_string(ps, out);
	case '-':
	case '0' ... '9':
		return parse_number(ps, out);
	default:
		return parse_literal(ps, out);
	}
}

int json_parse(const char *text, size_t len, struct json_value **out, struct json_error *err)
{
	struct parser ps = {
		.p = (const unsigned char *)text,
		.end = (const unsigned char *)text + len,
		.line = 1,
		.column = 1,
		.err = err,
	};
	struct json_value *v;
	int ret;

	*out = NULL;
	ret = parse_value(&ps, 0, &v);
	if (ret)
		return ret;
	skip_space(&ps);
	if (ps.p < ps.end) {
		json_free(v);
		return fail_unexpected(&ps, "the end of input after the value");
	}
	*out = v;
	return 0;
}

/* ---- Access ---- */

const struct json_value *json_get(const struct json_value *obj, const char *key)
{
	size_t i, len;

	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	len = strlen(key);
	for (i = 0; i < obj->object.n; i++)
		if (obj->object.members[i].key_len == len &&
		    memcmp(obj->object.members[i].key, key, len) == 0)
			return obj->object.members[i].value;
	return NULL;
}

const char *json_type_name(enum json_type type)
{
	switch (type) {
	case JSON_NULL: return "null";
	case JSON_BOOL: return "a boolean";
	case JSON_INT:
	case JSON_UINT:
	case JSON_REAL: return "a number";
	case JSON_STRING: return "a string";
	case JSON_ARRAY: return "an array";
	case JSON_OBJECT: return "an object";
	}
	return "a value";
}

/* Whether V is a number: the accessors below fail with -EINVAL on any
 * other value, before they look at its range. */
static bool is_number(const struct json_value *v)
{
	return v && (v->type == JSON_INT || v->type == JSON_UINT || v->type == JSON_REAL);
}

int json_to_u64(const struct json_value *v, uint64_t *out)
{
	if (!is_number(v))
		return -EINVAL;
	if (v->type == JSON_UINT) {
		*out = v->u;
		return 0;
	}
	if (v->type != JSON_INT || v->i < 0)
		return -ERANGE;
	*out = (uint64_t)v->i;
	return 0;
}

int json_to_i64(const struct json_value *v, int64_t *out)
{
	if (!is_number(v))
		return -EINVAL;
	if (v->type != JSON_INT)
		return -ERANGE;
	*out = v->i;
	return 0;
}

int json_to_double(const struct json_value *v, double *out)
{
	if (!is_number(v))
		return -EINVAL;
	if (v->type == JSON_INT)
		*out = (double)v->i;
	else if (v->type == JSON_UINT)
		*out = (double)v->u;
	else
		*out = v->real;
	return 0;
}
