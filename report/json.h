/* A small strict JSON parser (RFC 8259) into a tree of values, for reading
 * dwleak's own JSON reports back (`dwleak symbolize`) without a dependency. */
#ifndef DWLEAK_JSON_H
#define DWLEAK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deepest nesting of arrays and objects accepted: the parser recurses once
 * per level, and dwleak's reports nest 5 deep. */
#define JSON_MAX_DEPTH 128

/*
 * The kind of a value.  A number without fraction or exponent is JSON_INT
 * when it fits int64_t, else JSON_UINT when it fits uint64_t, so integers
 * are kept exact; every other number is JSON_REAL (a finite double).
 */
enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_INT,
	JSON_UINT,
	JSON_REAL,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

struct json_value;

/* One member of an object; keys are unique within an object. */
struct json_member {
	char *key;		  /* UTF-8, NUL-terminated (may hold an earlier \u0000) */
	size_t key_len;		  /* bytes, without the terminating NUL */
	struct json_value *value;
};

/*
 * A parsed value.  Exactly the union member named by TYPE is meaningful.
 * Strings are valid UTF-8 (escapes decoded, surrogate pairs joined) with a
 * terminating NUL; LEN counts the bytes before it, so a string that held
 * \u0000 has strlen(s) < len.  Members keep the document's order.
 * LINE/COLUMN (1-based; columns count characters) say where the value
 * starts, for error messages about its content.
 */
struct json_value {
	enum json_type type;
	unsigned int line, column;
	union {
		bool boolean;
		int64_t i;
		uint64_t u;
		double real;
		struct {
			char *s;
			size_t len;
		} string;
		struct {
			struct json_value **items;
			size_t n;
		} array;
		struct {
			struct json_member *members;
			size_t n;
		} object;
	};
};

/* Where and why a document was rejected.  MESSAGE is NUL-terminated. */
struct json_error {
	unsigned int line, column; /* 1-based; columns count characters */
	char message[96];
};

/*
 * Parses the LEN bytes at TEXT (no terminating NUL needed) as one JSON
 * document: a value with only whitespace around it.  Stores the tree at
 * *OUT, owned by the caller and freed with json_free().
 * Returns 0; -EINVAL when TEXT is not strict JSON (invalid UTF-8, lone
 * surrogate escapes, duplicate keys, numbers out of double's range and
 * nesting beyond JSON_MAX_DEPTH included), with *ERR filled in when ERR is
 * not NULL; or -ENOMEM.  *OUT is NULL on failure.
 */
int json_parse(const char *text, size_t len, struct json_value **out, struct json_error *err);

/* Frees V and everything under it.  NULL is ok. */
void json_free(struct json_value *v);

/* The value of member KEY of object OBJ; NULL when OBJ is NULL, not an
 * object, or has no such member.  Borrowed from OBJ. */
const struct json_value *json_get(const struct json_value *obj, const char *key);

/* The name of TYPE for messages: "null", "a boolean", "a number", ... */
const char *json_type_name(enum json_type type);

/*
 * Number accessors: store V's value at *OUT and return 0, or return
 * -EINVAL when V is NULL or not a number and -ERANGE when the number is
 * not representable (a fraction or out of range for the integer ones).
 */
int json_to_u64(const struct json_value *v, uint64_t *out);
int json_to_i64(const struct json_value *v, int64_t *out);
int json_to_double(const struct json_value *v, double *out);

#endif
