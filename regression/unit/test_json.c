/* test_json.c -- the JSON reader (src/base/json.c): values, escapes and
 * numbers as RFC 8259 defines them, and malformed texts refused with their
 * line and column. */
#include <string.h>

#include "json.h"
#include "tap.h"

static void test_values(void)
{
    const char *text = "{\n \"a\": [1, -2.5e3, 0.125, true, false, null],\n \"s\": \"q\\\"\\\\\\/\\n\\u00e9\\ud83d\\ude00\",\n"
                       " \"o\": {\"x\": {}}, \"a\": 7 }";
    char err[256];
    struct json *v = json_parse(text, strlen(text), err, sizeof err);
    const struct json *a = v ? &v->item[0] : NULL, *s = json_get(v, "s");
    long long seven = 0;
    tap_ok(v && v->kind == JSON_OBJECT && v->n == 4 && a->kind == JSON_ARRAY && a->n == 6 &&
               a->item[0].number == 1 && a->item[1].number == -2500 && a->item[2].number == 0.125 &&
               a->item[3].kind == JSON_TRUE && a->item[4].kind == JSON_FALSE && a->item[5].kind == JSON_NULL,
           "an object of an array of numbers and literals");
    tap_ok(s && s->kind == JSON_STRING && strcmp(s->string, "q\"\\/\n\xc3\xa9\xf0\x9f\x98\x80") == 0,
           "string escapes, \\u00e9 and a surrogate pair as UTF-8");
    tap_ok(json_int(v, "a", &seven) == 0 && seven == 7, "a repeated key: the last one counts");
    tap_ok(json_get(json_get(v, "o"), "x") && json_get(v, "missing") == NULL, "members found by name, or NULL");
    json_free(v);
}

static void test_errors(void)
{
    static const struct { const char *text, *what; } bad[] = {
        {"{\"a\": 1,}", "line 1, column 9: expected a member name"},
        {"[1, 2", "expected ',' or ']'"},
        {"{\"a\" 1}", "expected ':' after the member name \"a\""},
        {"\"abc", "a string is not closed"},
        {"\"a\\x\"", "unknown escape '\\x'"},
        {"\"\\ud83d\"", "a high surrogate"},
        {"[01]", "expected ',' or ']'"},
        {"[1.]", "'1' does not start a value"},
        {"{}\n  x", "line 2, column 3: text after the end of the value"},
        {"", "the text ends where a value should be"},
        {"\"tab\there\"", "a control character"},
        {"\"\\u0000\"", "\\u0000 inside a string"},
        {"\"\\udc00\"", "a low surrogate \\uDC00 without its high half"},
        {"\"\xc0\xaf\"", "column 2: a byte 0xc0 that is not well-formed UTF-8"},      /* overlong '/' */
        {"\"a\x80\"", "column 3: a byte 0x80 that is not well-formed UTF-8"},       /* a lone continuation */
        {"\"\xed\xa0\x80\"", "a byte 0xed that is not well-formed UTF-8"},      /* a surrogate, encoded */
        {"\"\xf4\x90\x80\x80\"", "a byte 0xf4 that is not well-formed UTF-8"}, /* past U+10FFFF */
        {"\"\xe2\x82\"", "a byte 0xe2 that is not well-formed UTF-8"},           /* cut short */
        {"[\x01]", "0x01 does not start a value"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct json *v = json_parse(bad[i].text, strlen(bad[i].text), err, sizeof err);
        tap_ok(!v && strstr(err, bad[i].what), "malformed %zu refused: %s", i + 1, v ? "(parsed!)" : err);
        json_free(v);
    }
    /* a NUL byte outside a string: the message names it instead of ending at it */
    struct json *nul = json_parse("[1, \0]", 6, err, sizeof err);
    tap_ok(!nul && strstr(err, "column 5: 0x00 does not start a value"), "a NUL byte named in the message: %s", err);
    json_free(nul);
    const char *utf8 = "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"";
    struct json *u = json_parse(utf8, strlen(utf8), err, sizeof err);
    tap_ok(u && strcmp(u->string, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") == 0, "2-, 3- and 4-byte UTF-8 kept as written");
    json_free(u);
    const char *dup = "{\"a\": 1, \"b\": 2, \"a\": 3}", *nodup = "{\"a\": 1, \"b\": {\"a\": 2}}";
    struct json *d1 = json_parse(dup, strlen(dup), err, sizeof err), *d2 = json_parse(nodup, strlen(nodup), err, sizeof err);
    const char *k1 = json_duplicate_key(d1), *k2 = json_duplicate_key(d2);
    tap_ok(k1 && strcmp(k1, "a") == 0 && !k2, "json_duplicate_key names a repeated member, none where there is none");
    json_free(d1);
    json_free(d2);
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    struct json *v = json_parse(deep, sizeof deep, err, sizeof err);
    tap_ok(!v && strstr(err, "nested more than 64 levels"), "100 nested arrays refused (bounded depth): %s", err);
    json_free(v);
}

int main(void)
{
    test_values();
    test_errors();
    return tap_done();
}
