/* json.h -- a small JSON reader (RFC 8259) for the files triad reads from
 * other tools: Hugging Face's config.json, a safetensors header, a sharded
 * model's index.  The whole text is parsed into a tree of values; a syntax
 * error names its line and column.  Numbers are doubles (integers up to 2^53
 * are exact: safetensors offsets stay far below), strings are well-formed
 * UTF-8 (anything else is refused) with their escapes resolved. */
#ifndef TRIAD_JSON_H
#define TRIAD_JSON_H

#include <stddef.h>

enum json_kind { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
    enum json_kind kind;
    double number;
    char *string;          /* JSON_STRING: the text (NUL-terminated; an embedded \u0000 is refused) */
    int n;                 /* JSON_ARRAY, JSON_OBJECT: elements */
    struct json *item;     /* their values */
    char **key;            /* JSON_OBJECT: their names */
};

/* How a message of json_parse's begins when memory ran out. */
#define JSON_NOMEM "out of memory"

/* Parse text[0..len); NULL with a message in err on failure: "line L, column
 * C: ..." on a malformed text, JSON_NOMEM " parsing N MB (N bytes) of JSON"
 * when memory ran out.  json_free releases a tree. */
struct json *json_parse(const char *text, size_t len, char *err, size_t errlen);
void json_free(struct json *v);
/* json_parse for the formats whose text is one object (config.json, a
 * tokenizer, a safetensors header, a JSON Lines document): NULL with "not a
 * JSON object (...)" or the out-of-memory message in err. */
struct json *json_parse_object(const char *text, size_t len, char *err, size_t errlen);
/* The object in the file at path, read whole (file_read_all, file.h: max
 * and what its bound and name): 0 with *out; file_read_all's errno value
 * (ENOENT: there is no such file), or -1 where its text is not one object;
 * the reason in err, "PATH: ...". */
int json_read_file(const char *path, size_t max, const char *what, struct json **out, char *err, size_t errlen);

/* The member called key of an object (the last if repeated), or NULL. */
const struct json *json_get(const struct json *obj, const char *key);
/* The first member name that an object repeats (Python's and Rust's readers
 * keep the last, triad's json_get too), or NULL: for formats where a repeat
 * is an error. */
const char *json_duplicate_key(const struct json *obj);
/* The number at key as an integer: 0 if it is one (whole, within +-2^53), -1 if
 * absent or not. */
int json_int(const struct json *obj, const char *key, long long *out);

#endif
