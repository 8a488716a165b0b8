/* config_internal.h -- what config.c (the registry, reading) shares with
 * config_check.c (the cross-checks), config_suggest.c (the nearest names)
 * and config_doc.c (echo, documentation). */
#ifndef TRIAD_CONFIG_INTERNAL_H
#define TRIAD_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* printf at the end of buf. */
void config_append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void config_error_reset(struct deck_error *err, const char *file);
#define SHOW 60 /* longest user text quoted back in a message */

/* The shortest %g form of x that reads back as x. */
void config_fmt_real(char *buf, size_t n, double x);
/* The upper bound of an integer key in params.def. */
int64_t config_key_max(const char *group, const char *name);
/* The default of a numeric key in params.def. */
double config_key_default(const char *group, const char *name);

/* The registry: every key of params.def, and its groups, in deck order. */
enum key_type { KEY_INT, KEY_REAL, KEY_BOOL, KEY_STR, KEY_ENUM };

struct key_info {
    const char *group, *name, *doc;
    enum key_type type;
    size_t offset; /* of the field in struct config */
    size_t id_offset; /* ENUM: of its enum field (the index of the word in choices) */
    int64_t imin, imax, idef;
    double rmin, rmax, rdef;
    const char *sdef, *choices; /* choices: "a|b|c" */
};

struct group_info {
    const char *name, *doc;
};
extern const struct key_info config_keys[];
extern const int config_nkeys;
extern const struct group_info config_groups[];
extern const int config_ngroups;

/* A key's value in cfg as a deck writes it; an ENUM word of len bytes as
 * decks write it (the identifier's '_' as '-': 'zb-h1'); "a, b, c" from
 * "a|b|c", each item so written and wrapped in open and close. */
void config_fmt_value(char *buf, size_t n, const struct config *cfg, const struct key_info *k);
void config_word(char *buf, size_t n, const char *word, size_t len);
void config_fmt_choices(char *buf, size_t n, const char *choices, const char *open, const char *close);

/* config_suggest.c: an unknown group or key described in err, with the
 * nearest name or the list (return -1); the nearest key (in group, or in
 * any group when group is NULL) or choice to a misspelt one, or NULL. */
int config_unknown_group(struct deck_error *err, const char *name, int line, int col);
int config_unknown_key(struct deck_error *err, const char *group, const char *key, int line, int col);
const struct key_info *config_nearest_key(const char *group, const char *name);
const char *config_nearest_choice(const char *choices, const char *typed, char *buf, size_t n);

#endif
