/* Typed access to the fields of a parsed JSON report (json_fields.h): the
 * getters, the messages that name a wrong field by its path and place, and
 * the notes of fields this reader does not know. */
#define _GNU_SOURCE /* asprintf, vasprintf */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_fields.h"

void *store_calloc(struct report_json_store *st, size_t n, size_t size)
{
	void **g = realloc(st->blocks, (st->nblocks + 1) * sizeof(*g));
	void *p;

	if (!g)
		return NULL;
	st->blocks = g;
	p = calloc(n, size);
	if (p)
		st->blocks[st->nblocks++] = p;
	return p;
}

int __attribute__((format(printf, 4, 5)))
report_json_error_set(struct report_json *rj, unsigned int line, unsigned int column, const char *fmt, ...)
{
	va_list ap;
	int len;

	free(rj->error.message);
	va_start(ap, fmt);
	len = vasprintf(&rj->error.message, fmt, ap);
	va_end(ap);
	if (len < 0) {
		rj->error.message = NULL;
		return -ENOMEM;
	}
	rj->error.line = line;
	rj->error.column = column;
	return -EINVAL;
}

/* Writes W and FIELD as a path: "stacks[3].frames[2].line", "totals.stacks". */
static void where_put(FILE *f, const struct where *w, const char *field)
{
	const char *sep = "";

	if (w->stack >= 0) {
		fprintf(f, "stacks[%ld]", w->stack);
		sep = ".";
	}
	if (w->list && w->frame >= 0)
		fprintf(f, "%s%s[%ld]", sep, w->list, w->frame);
	else if (w->list)
		fprintf(f, "%s%s", sep, w->list);
	if (w->list)
		sep = ".";
	if (field[0])
		fprintf(f, "%s%s", sep, field);
}

int field_error(struct report_json *rj, const struct json_value *v, const struct where *w,
		const char *field, const char *want)
{
	char *path = NULL;
	size_t len;
	FILE *m = open_memstream(&path, &len);
	int err;

	if (!m)
		return -ENOMEM;
	where_put(m, w, field);
	if (fclose(m) != 0) {
		free(path);
		return -ENOMEM;
	}
	err = report_json_error_set(rj, v->line, v->column, "%s: expected %s, not %s", path, want,
			json_type_name(v->type));
	free(path);
	return err;
}

void field_unknown_note(struct report_json *rj, const struct json_value *obj, const char *prefix,
			const char *const *known)
{
	struct report_json_store *st = rj->store;
	size_t i, j;

	for (i = 0; obj && i < obj->object.n; i++) {
		const char *key = obj->object.members[i].key;
		const char *const *k;
		char *name, **g;
		bool seen = false;

		for (k = known; *k && strcmp(*k, key) != 0; k++)
			;
		if (*k)
			continue;
		if (asprintf(&name, "%s%s", prefix, key) < 0)
			return;
		for (j = 0; j < st->nunknown && !seen; j++)
			seen = strcmp(st->unknown[j], name) == 0;
		g = seen ? NULL : realloc(st->unknown, (st->nunknown + 1) * sizeof(*g));
		if (!g) {
			free(name);
			continue;
		}
		st->unknown = g;
		st->unknown[st->nunknown++] = name;
		rj->unknown_fields = (const char *const *)st->unknown;
		rj->nunknown_fields = st->nunknown;
	}
}

int field_typed(struct report_json *rj, const struct json_value *obj, const char *key,
		const struct where *w, enum json_type type, bool nullable, const char *want,
		const struct json_value **out)
{
	const struct json_value *v = json_get(obj, key);

	*out = NULL;
	if (!v || (nullable && v->type == JSON_NULL))
		return 0;
	if (v->type != type)
		return field_error(rj, v, w, key, want);
	*out = v;
	return 0;
}

int field_str(struct report_json *rj, const struct json_value *obj, const char *key,
	      const struct where *w, const char **out)
{
	const struct json_value *v;
	int err = field_typed(rj, obj, key, w, JSON_STRING, true, "a string or null", &v);

	*out = v ? v->string.s : NULL;
	return err;
}

int field_u64(struct report_json *rj, const struct json_value *obj, const char *key,
	      const struct where *w, uint64_t *out)
{
	const struct json_value *v = json_get(obj, key);

	if (!v)
		return 0;
	if (json_to_u64(v, out) != 0)
		return field_error(rj, v, w, key, "an integer from 0 to 2^64-1");
	return 0;
}

int field_int(struct report_json *rj, const struct json_value *obj, const char *key,
	      const struct where *w, int64_t min, int64_t max, int64_t if_null, int64_t *out)
{
	const struct json_value *v = json_get(obj, key);

	*out = if_null;
	if (!v || v->type == JSON_NULL)
		return 0;
	if (json_to_i64(v, out) != 0 || *out < min || *out > max)
		return field_error(rj, v, w, key, "an integer in range, or null");
	return 0;
}

int field_real(struct report_json *rj, const struct json_value *obj, const char *key,
	       const struct where *w, double *out)
{
	const struct json_value *v = json_get(obj, key);

	*out = NAN;
	if (!v || v->type == JSON_NULL)
		return 0;
	if (json_to_double(v, out) != 0)
		return field_error(rj, v, w, key, "a number or null");
	return 0;
}

int field_bool(struct report_json *rj, const struct json_value *obj, const char *key,
	       const struct where *w, bool *out)
{
	const struct json_value *v;
	int err = field_typed(rj, obj, key, w, JSON_BOOL, false, "true or false", &v);

	*out = v && v->boolean;
	return err;
}

int field_hex(struct report_json *rj, const struct json_value *obj, const char *key,
	      const struct where *w, uint64_t *out)
{
	static const char want[] = "an address string like \"0x1a2b\"";
	const struct json_value *v;
	const char *s;
	size_t i;
	int err;

	*out = 0;
	err = field_typed(rj, obj, key, w, JSON_STRING, false, want, &v);
	if (err || !v)
		return err;
	s = v->string.s;
	if (strncmp(s, "0x", 2) != 0 || !s[2] || strlen(s + 2) > 16 || strlen(s) != v->string.len)
		goto bad;
	for (i = 2; s[i]; i++) {
		char c = s[i];
		unsigned int d;

		if (c >= '0' && c <= '9')
			d = (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned int)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned int)(c - 'A' + 10);
		else
			goto bad;
		*out = *out << 4 | d;
	}
	return 0;
bad:
	return field_error(rj, v, w, key, want);
}

int field_array(struct report_json *rj, const struct json_value *obj, const char *key,
		const struct where *w, const struct json_value **out)
{
	return field_typed(rj, obj, key, w, JSON_ARRAY, false, "an array", out);
}

int field_object(struct report_json *rj, const struct json_value *obj, const char *key,
		 const struct where *w, const struct json_value **out)
{
	return field_typed(rj, obj, key, w, JSON_OBJECT, false, "an object", out);
}

