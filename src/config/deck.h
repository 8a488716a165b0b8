/* deck.h -- the Fortran-namelist reader: text -> (group, key, values, line, col).
 *
 * Pure syntax: this layer knows nothing about which groups or keys exist or
 * what type they have (config.c decides that from params.def).  It accepts
 *
 *   &group key = value, key2 = v1, v2  key3 = 3*0.5 /     ! comment
 *
 * with case-insensitive names (stored lower case), several groups per text,
 * `&end` as an alternative terminator ($name and $end alike), '...' and
 * "..." strings (a doubled quote stands for one quote),
 * .true./.false./.t./.f./T/F, integers, reals
 * with e or d exponents, value lists separated by commas or blanks, `r*c`
 * repeats, and values continued over several lines.  Every token keeps its
 * 1-based line and column. */
#ifndef TRIAD_DECK_H
#define TRIAD_DECK_H

#include <stdint.h>

enum deck_kind {
    DECK_INT,  /* 12, -3                                  -> i (and r) */
    DECK_REAL, /* 0.5, 6e-4, 1.5d-3, 1.                   -> r */
    DECK_BOOL, /* .true. .false. .t. .f. T F              -> i = 1 or 0 */
    DECK_STR,  /* 'text' or "text", quotes removed        -> s */
    DECK_WORD  /* an unquoted word such as cosine or a.txt -> s (the caller
                * decides whether that is an error: strings need quotes) */
};

struct deck_value {
    enum deck_kind kind;
    int64_t i;
    double r;
    int big;   /* DECK_INT beyond 64 bits: i is clamped, r holds the value */
    char *s;   /* DECK_STR / DECK_WORD; NULL otherwise */
    char *raw; /* the value as written (for a repeat r*c: the c part) */
    int line, col;
};

struct deck_entry {
    int group;   /* index into deck.groups */
    char *key;   /* lower case */
    int line, col; /* of the key */
    int nvalues; /* >= 1 */
    struct deck_value *values;
};

/* One `&name ... /` block; its entries are entries[first .. first+count). */
struct deck_group {
    char *name; /* lower case, without the '&' */
    int line, col; /* of the '&' */
    int first, count;
};

struct deck {
    int ngroups, nentries;
    struct deck_group *groups;
    struct deck_entry *entries;
};

/* One diagnosed problem in a deck or an override (the parser's, and the
 * configuration's: config.h). */
struct deck_error {
    char file[512];  /* deck path, or "command line": set by the reader (config.c) */
    int line, col;   /* 1-based; 0 when not applicable */
    char what[1024]; /* what is wrong */
    char hint[1024]; /* how to fix it ("" if none) */
};

/* Describe an error (line/col 0 when not applicable); clears the hint and
 * leaves the file as it is. */
void deck_error_set(struct deck_error *err, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Set the hint of the error just described; returns -1 so callers can
 * `return deck_error_hint(...)`. */
int deck_error_hint(struct deck_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#ifdef __clang_analyzer__
#define deck_error_hint(...) (deck_error_hint(__VA_ARGS__), -1) /* (log.h's errorf) */
#endif

/* Parse a whole namelist text.  Returns 0, or -1 with *err filled (and *d
 * empty).  deck_free releases what a successful parse allocated. */
int deck_parse(struct deck *d, const char *text, struct deck_error *err);
void deck_free(struct deck *d);

/* Parse a bare value list (the right-hand side of a command-line override):
 * the same value syntax, no groups, keys or '/'.  On success *values holds
 * *n >= 0 values; free them with deck_values_free. */
int deck_parse_values(const char *text, struct deck_value **values, int *n,
                      struct deck_error *err);
void deck_values_free(struct deck_value *values, int n);

/* "an integer", "a real", "a logical", "a string", "an unquoted word". */
const char *deck_kind_name(enum deck_kind kind);

#endif
