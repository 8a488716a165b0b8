/* test_json.c -- the JSON reader (src/json.c): values, escapes and
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
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct json *v = json_parse(bad[i].text, strlen(bad[i].text), err, sizeof err);
        tap_ok(!v && strstr(err, bad[i].what), "malformed %zu refused: %s", i + 1, v ? "(parsed!)" : err);
        json_free(v);
    }
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
