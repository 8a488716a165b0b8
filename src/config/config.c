/* config.c -- struct config from params.def (the struct itself is
 * config.h's): defaults, typed assignment from a deck (deck.c parses the
 * syntax) or from command-line overrides.  The echo of the effective deck
 * and the Markdown reference are config_doc.c's, the cross-checks of the
 * whole deck config_check.c's.
 *
 * Everything walks one table, config_keys[], generated from params.def. */
#include "config.h"
#include "config_internal.h"
#include "deck.h"
#include "file.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>


#define GROUP(g, doc)
#define END_GROUP(g)
#define INT(g, k, def, lo, hi, doc_)                                                         \
    { .group = #g, .name = #k, .doc = doc_, .type = KEY_INT,                                 \
      .offset = offsetof(struct config, g.k), .imin = lo, .imax = hi, .idef = def },
#define REAL(g, k, def, lo, hi, doc_)                                                        \
    { .group = #g, .name = #k, .doc = doc_, .type = KEY_REAL,                                \
      .offset = offsetof(struct config, g.k), .rmin = lo, .rmax = hi, .rdef = def },
#define BOOL(g, k, def, doc_)                                                                \
    { .group = #g, .name = #k, .doc = doc_, .type = KEY_BOOL,                                \
      .offset = offsetof(struct config, g.k), .idef = def },
#define STR(g, k, def, doc_)                                                                 \
    { .group = #g, .name = #k, .doc = doc_, .type = KEY_STR,                                 \
      .offset = offsetof(struct config, g.k), .sdef = def },
/* an ENUM's words as "a|b|c" (the list below makes "|a|b|c": the first '|' is skipped) */
#define CHOICE_WORD(P, word) "|" #word
#define ENUM(g, k, def, choices_, doc_)                                                      \
    { .group = #g, .name = #k, .doc = doc_, .type = KEY_ENUM,                                \
      .offset = offsetof(struct config, g.k), .id_offset = offsetof(struct config, g.k##_id), \
      .sdef = def, .choices = choices_(CHOICE_WORD, ~) + 1 },
const struct key_info config_keys[] = {
#include "params.def"
};

#define GROUP(g, doc_) { .name = #g, .doc = doc_ },
#define END_GROUP(g)
#define INT(g, k, def, lo, hi, doc)
#define REAL(g, k, def, lo, hi, doc)
#define BOOL(g, k, def, doc)
#define STR(g, k, def, doc)
#define ENUM(g, k, def, choices, doc)
const struct group_info config_groups[] = {
#include "params.def"
};

const int config_nkeys = sizeof config_keys / sizeof config_keys[0];
const int config_ngroups = sizeof config_groups / sizeof config_groups[0];

/* ------------------------------------------------------------ small helpers */

static int64_t *int_field(struct config *cfg, const struct key_info *k)
{
    return (int64_t *)((char *)cfg + k->offset);
}
static double *real_field(struct config *cfg, const struct key_info *k)
{
    return (double *)((char *)cfg + k->offset);
}
static int *bool_field(struct config *cfg, const struct key_info *k)
{
    return (int *)((char *)cfg + k->offset);
}
static char *str_field(struct config *cfg, const struct key_info *k)
{
    return (char *)cfg + k->offset;
}
static const void *cfield(const struct config *cfg, const struct key_info *k)
{
    return (const char *)cfg + k->offset;
}

void config_append(char *buf, size_t n, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;
    if (used + 1 >= n) return;
    va_start(ap, fmt);
    vsnprintf(buf + used, n - used, fmt, ap);
    va_end(ap);
    text_printable(buf + used); /* (a value quoted: a control character or a stray byte shown as '?') */
}

int config_is(const char *v, const char *word)
{
    for (; *v && *word; v++, word++)
        if (tolower((unsigned char)*v) != tolower((unsigned char)*word)) return 0;
    return *v == *word;
}

/* The shortest %g spelling of x that reads back as x (10, not 1e+01). */
void config_fmt_real(char *buf, size_t n, double x)
{
    char cand[40];
    buf[0] = '\0';
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(cand, sizeof cand, "%.*g", prec, x);
        if (strtod(cand, NULL) == x && (!buf[0] || strlen(cand) < strlen(buf))) snprintf(buf, n, "%s", cand);
    }
    if (!buf[0]) snprintf(buf, n, "%.17g", x);
}

/* The same, always spelled as a real (0.5, 25.0, 1e-08). */
static void fmt_real(char *buf, size_t n, double x)
{
    config_fmt_real(buf, n, x);
    if (!strpbrk(buf, ".eEn")) config_append(buf, n, ".0");
}

/* 'text' with quotes doubled, as a namelist string. */
static void fmt_string(char *buf, size_t n, const char *s)
{
    size_t j = 0;
    if (n < 3) return;
    buf[j++] = '\'';
    for (; *s && j + 3 < n; s++) {
        if (*s == '\'') buf[j++] = '\'';
        buf[j++] = *s;
    }
    buf[j++] = '\'';
    buf[j] = '\0';
}

/* The value of key k in cfg, as it is written in a deck. */
void config_fmt_value(char *buf, size_t n, const struct config *cfg, const struct key_info *k)
{
    const void *p = cfield(cfg, k);
    switch (k->type) {
    case KEY_INT: snprintf(buf, n, "%" PRId64, *(const int64_t *)p); break;
    case KEY_REAL: fmt_real(buf, n, *(const double *)p); break;
    case KEY_BOOL: snprintf(buf, n, "%s", *(const int *)p ? ".true." : ".false."); break;
    case KEY_STR:
    case KEY_ENUM: fmt_string(buf, n, p); break;
    }
}

/* An ENUM word of len bytes as decks, docs and messages spell it: its C
 * identifier's '_' is '-' (params.def: zb_h1 is 'zb-h1'). */
void config_word(char *buf, size_t n, const char *word, size_t len)
{
    size_t i = 0;
    for (; i < len && i + 1 < n; i++) buf[i] = word[i] == '_' ? '-' : word[i];
    if (n) buf[i] = '\0';
}

/* "a, b, c" from "a|b|c", each item wrapped in `open` and `close`. */
void config_fmt_choices(char *buf, size_t n, const char *choices, const char *open, const char *close)
{
    char w[CONFIG_STRLEN];
    buf[0] = '\0';
    for (const char *c = choices; *c;) {
        size_t len = strcspn(c, "|");
        config_word(w, sizeof w, c, len);
        config_append(buf, n, "%s%s%s%s", c == choices ? "" : ", ", open, w, close);
        c += len + (c[len] == '|');
    }
}

/* ------------------------------------------------------------ lookup */

static int find_group(const char *name)
{
    for (int g = 0; g < config_ngroups; g++)
        if (strcmp(config_groups[g].name, name) == 0) return g;
    return -1;
}

static const struct key_info *find_key(const char *group, const char *name)
{
    for (int i = 0; i < config_nkeys; i++)
        if (strcmp(config_keys[i].group, group) == 0 && strcmp(config_keys[i].name, name) == 0) return &config_keys[i];
    return NULL;
}

/* ------------------------------------------------------------ typed assignment */

/* "2.5 (a real)" */
static void fmt_got(char *buf, size_t n, const struct deck_value *v)
{
    snprintf(buf, n, "%.*s (%s)", SHOW, v->raw, deck_kind_name(v->kind));
}

static int type_error(struct deck_error *err, const struct key_info *k, const struct deck_value *v)
{
    char got[128], def[64], list[256];
    struct config d;
    config_defaults(&d);
    config_fmt_value(def, sizeof def, &d, k);
    fmt_got(got, sizeof got, v);
    switch (k->type) {
    case KEY_INT:
        deck_error_set(err, v->line, v->col, "%s expects an integer, got %s", k->name, got);
        if (v->kind == DECK_REAL && v->r >= -9e18 && v->r <= 9e18 && v->r == (double)(int64_t)v->r)
            return deck_error_hint(err, "write %s = %" PRId64 " (integers have no '.' or exponent)", k->name,
                            (int64_t)v->r);
        return deck_error_hint(err, "write %s = <an integer from %" PRId64 " to %" PRId64 ">, e.g. the default %s",
                        k->name, k->imin, k->imax, def);
    case KEY_REAL:
        deck_error_set(err, v->line, v->col, "%s expects a real number, got %s", k->name, got);
        return deck_error_hint(err, "write %s = <a number>, e.g. the default %s (exponents: 6e-4 or 6d-4)", k->name, def);
    case KEY_BOOL:
        deck_error_set(err, v->line, v->col, "%s expects a logical, got %s", k->name, got);
        return deck_error_hint(err, "write %s = .true. or %s = .false. (T and F work too)", k->name, k->name);
    case KEY_STR:
    case KEY_ENUM:
        deck_error_set(err, v->line, v->col, "%s expects a quoted string, got %s", k->name, got);
        if (k->type == KEY_ENUM) {
            config_fmt_choices(list, sizeof list, k->choices, "'", "'");
            if (v->kind == DECK_WORD) return deck_error_hint(err, "write %s = '%.*s' (one of %s)", k->name, SHOW, v->raw, list);
            return deck_error_hint(err, "write %s = %s (one of %s)", k->name, def, list);
        }
        return deck_error_hint(err, "write %s = '%.*s'", k->name, SHOW, v->raw);
    }
    return -1;
}

static int assign_int(struct config *cfg, const struct key_info *k, const struct deck_value *v,
                      struct deck_error *err)
{
    if (v->kind != DECK_INT) return type_error(err, k, v);
    if (v->big) {
        deck_error_set(err, v->line, v->col, "%s = %.*s does not fit in 64 bits", k->name, SHOW, v->raw);
        return deck_error_hint(err, "use %" PRId64 " <= %s <= %" PRId64 " (%s: %s)", k->imin, k->name, k->imax,
                               k->name, k->doc);
    }
    if (v->i < k->imin || v->i > k->imax) {
        deck_error_set(err, v->line, v->col, "%s = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]", k->name,
                 v->i, k->imin, k->imax);
        return deck_error_hint(err, "use %" PRId64 " <= %s <= %" PRId64 " (%s: %s)", k->imin, k->name, k->imax, k->name,
                        k->doc);
    }
    *int_field(cfg, k) = v->i;
    return 0;
}

static int assign_real(struct config *cfg, const struct key_info *k, const struct deck_value *v,
                       struct deck_error *err)
{
    char x[32], lo[32], hi[32];
    if (v->kind != DECK_INT && v->kind != DECK_REAL) return type_error(err, k, v);
    if (v->r < k->rmin || v->r > k->rmax) {
        config_fmt_real(x, sizeof x, v->r);
        config_fmt_real(lo, sizeof lo, k->rmin);
        config_fmt_real(hi, sizeof hi, k->rmax);
        deck_error_set(err, v->line, v->col, "%s = %s is out of range [%s, %s]", k->name, x, lo, hi);
        return deck_error_hint(err, "use %s <= %s <= %s (%s: %s)", lo, k->name, hi, k->name, k->doc);
    }
    *real_field(cfg, k) = v->r;
    return 0;
}

static int assign_bool(struct config *cfg, const struct key_info *k, const struct deck_value *v,
                       struct deck_error *err)
{
    if (v->kind != DECK_BOOL) return type_error(err, k, v);
    *bool_field(cfg, k) = (int)v->i;
    return 0;
}

/* An ENUM word's characters alike: in any case, and '-' as '_' (the C
 * identifier of 'zb-h1' is zb_h1). */
static int word_equal_n(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int x = a[i] == '-' ? '_' : tolower((unsigned char)a[i]), y = b[i] == '-' ? '_' : tolower((unsigned char)b[i]);
        if (x != y) return 0;
    }
    return 1;
}

/* The index of word (len bytes, any case, '-' or '_') in choices "a|b|c", or -1. */
static int choice_index(const char *choices, const char *word, size_t len)
{
    int i = 0;
    for (const char *c = choices; *c; i++) {
        size_t n = strcspn(c, "|");
        if (n == len && word_equal_n(c, word, n)) return i;
        c += n + (c[n] == '|');
    }
    return -1;
}

/* Set ENUM key k to its choice i: the word as decks spell it (config_word), and its enum. */
static void set_choice(struct config *cfg, const struct key_info *k, int i)
{
    const char *c = k->choices;
    for (int j = 0; j < i; j++) c += strcspn(c, "|") + 1;
    config_word(str_field(cfg, k), CONFIG_STRLEN, c, strcspn(c, "|"));
    _Static_assert(sizeof(enum train_device) == sizeof(int), "an ENUM key's enum is stored as an int");
    *(int *)((char *)cfg + k->id_offset) = i;
}

/* STR, or ENUM (stored in the table's spelling). */
static int assign_str(struct config *cfg, const struct key_info *k, const struct deck_value *v,
                      struct deck_error *err)
{
    char list[256], near[64];
    if (v->kind != DECK_STR) return type_error(err, k, v);
    size_t len = strlen(v->s);
    if (len >= CONFIG_STRLEN) {
        deck_error_set(err, v->line, v->col, "%s is %zu bytes long, more than the %d allowed", k->name, len,
                 CONFIG_STRLEN - 1);
        return deck_error_hint(err, "use a shorter value (for a path: a symbolic link or a relative path)");
    }
    if (strpbrk(v->s, "\n\r")) { /* (a CR too: the deck it is echoed into would refuse it as a line end) */
        deck_error_set(err, v->line, v->col, "%s contains a line break (%s)", k->name,
                       strchr(v->s, '\n') ? "a line feed" : "a carriage return");
        return deck_error_hint(err, "remove the line break from the value");
    }
    if (k->type == KEY_STR) {
        memcpy(str_field(cfg, k), v->s, len + 1);
        return 0;
    }
    int i = choice_index(k->choices, v->s, len);
    if (i >= 0) {
        set_choice(cfg, k, i);
        return 0;
    }
    config_fmt_choices(list, sizeof list, k->choices, "'", "'");
    deck_error_set(err, v->line, v->col, "%s = '%.*s' is not one of %s", k->name, SHOW, v->s, list);
    if (config_nearest_choice(k->choices, v->s, near, sizeof near))
        return deck_error_hint(err, "did you mean %s = '%s'?", k->name, near);
    return deck_error_hint(err, "choose one of %s (%s: %s)", list, k->name, k->doc);
}

/* All keys are scalars: exactly one value. */
static int assign(struct config *cfg, const struct key_info *k, const struct deck_value *v, int n,
                  struct deck_error *err)
{
    if (n > 1) {
        deck_error_set(err, v[1].line, v[1].col, "%s takes a single value, but %d are given", k->name, n);
        return deck_error_hint(err, "keep one value: %s = %.*s", k->name, SHOW, v[0].raw);
    }
    switch (k->type) {
    case KEY_INT: return assign_int(cfg, k, v, err);
    case KEY_REAL: return assign_real(cfg, k, v, err);
    case KEY_BOOL: return assign_bool(cfg, k, v, err);
    case KEY_STR:
    case KEY_ENUM: return assign_str(cfg, k, v, err);
    }
    return -1;
}

void config_defaults(struct config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < config_nkeys; i++) {
        const struct key_info *k = &config_keys[i];
        switch (k->type) {
        case KEY_INT: *int_field(cfg, k) = k->idef; break;
        case KEY_REAL: *real_field(cfg, k) = k->rdef; break;
        case KEY_BOOL: *bool_field(cfg, k) = (int)k->idef; break;
        case KEY_STR: snprintf(str_field(cfg, k), CONFIG_STRLEN, "%s", k->sdef); break;
        case KEY_ENUM: {
            int c = choice_index(k->choices, k->sdef, strlen(k->sdef));
            if (c < 0) /* a params.def whose default is not a choice */
                die("params.def: the default '%s' of %s.%s is not one of %s", k->sdef, k->group, k->name, k->choices);
            set_choice(cfg, k, c);
            break;
        }
        }
    }
}

/* ------------------------------------------------------------ reading */

/* Apply every entry of d; first[i] is the line where config_keys[i] was set. */
static int apply_group(struct config *cfg, const struct deck *d, const struct deck_group *g, int *first,
                       struct deck_error *err)
{
    for (int e = g->first; e < g->first + g->count; e++) {
        const struct deck_entry *en = &d->entries[e];
        const struct key_info *k = find_key(g->name, en->key);
        if (!k) return config_unknown_key(err, g->name, en->key, en->line, en->col);
        int *seen = &first[k - config_keys];
        if (*seen) {
            deck_error_set(err, en->line, en->col, "duplicate key '%s' (first set at line %d)", en->key, *seen);
            return deck_error_hint(err, "remove one of the two settings of %s", en->key);
        }
        *seen = en->line;
        if (assign(cfg, k, en->values, en->nvalues, err)) return -1;
    }
    return 0;
}

static int apply_deck(struct config *cfg, const struct deck *d, struct deck_error *err)
{
    int first[sizeof config_keys / sizeof config_keys[0]] = { 0 };
    for (int gi = 0; gi < d->ngroups; gi++) {
        const struct deck_group *g = &d->groups[gi];
        if (find_group(g->name) < 0) return config_unknown_group(err, g->name, g->line, g->col);
        /* A Fortran program's read(nml=...) takes the first &name and never
         * sees a second one: merging them would read another deck. */
        for (int gj = 0; gj < gi; gj++) {
            if (strcmp(d->groups[gj].name, g->name) == 0) {
                deck_error_set(err, g->line, g->col, "&%s is given twice (first at line %d)", g->name,
                               d->groups[gj].line);
                return deck_error_hint(err, "merge the two into one &%s group (a Fortran program reads only the "
                                            "first)", g->name);
            }
        }
        if (apply_group(cfg, d, g, first, err)) return -1;
    }
    return 0;
}

void config_error_reset(struct deck_error *err, const char *file)
{
    memset(err, 0, sizeof *err);
    snprintf(err->file, sizeof err->file, "%s", file ? file : "deck");
}

int config_read_string(struct config *cfg, const char *text, const char *name, struct deck_error *err)
{
    struct deck d;
    config_error_reset(err, name);
    if (deck_parse(&d, text, err)) return -1;
    struct config tmp = *cfg; /* cfg changes only if the whole deck is good */
    int rc = apply_deck(&tmp, &d, err);
    deck_free(&d);
    if (rc == 0) *cfg = tmp;
    return rc;
}

/* Decks are a few KiB: anything larger is not one (and /dev/zero never ends). */
#define DECK_MAX_BYTES (1 << 20)

/* Line and column (from 1) of text[at], for an error found while reading. */
static void line_col(const char *text, size_t at, int *line, int *col)
{
    *line = 1, *col = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n' || (text[i] == '\r' && text[i + 1] != '\n')) (*line)++, *col = 1;
        else if (text[i] != '\r') (*col)++;
    }
}

/* The first lone CR in text (old Mac editors), or NULL; one that ends the
 * text hides nothing.  Fortran reads no line end there, so a '!' comment
 * before it would run on over the next lines: such a deck is refused. */
static const char *lone_cr(const char *text)
{
    for (const char *r = text; *r; r++)
        if (*r == '\r' && r[1] != '\n' && r[1] != '\0') return r;
    return NULL;
}

/* CR LF ends a line like LF: make it LF, in place. */
static void unify_line_ends(char *text)
{
    char *w = text;
    for (const char *r = text; *r; r++)
        if (*r != '\r') *w++ = *r;
    *w = '\0';
}

static char *slurp(const char *path, struct deck_error *err)
{
    char *buf, why[256];
    size_t n;
    int e = file_read_all(path, DECK_MAX_BYTES, "a deck", &buf, &n, why, sizeof why);
    if (e) {
        deck_error_set(err, 0, 0, "%s", why);
        if (e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG || e == ELOOP)
            deck_error_hint(err, "check the file name; a relative path is taken from the directory the job starts in");
        else if (e == EISDIR || e == EFBIG)
            deck_error_hint(err, "give the namelist text file (*.nml); decks are a few KiB");
        else if (e == ETIMEDOUT)
            deck_error_hint(err, "start the pipe's writer before triad, or write the deck to a file first");
        else if (e != ENOMEM)
            deck_error_hint(err, "check that the file is readable");
        return NULL;
    }
    const char *nul = memchr(buf, '\0', n);
    if (nul) {
        int line, col;
        line_col(buf, (size_t)(nul - buf), &line, &col);
        deck_error_set(err, line, col, "the deck contains a NUL byte: it is not a text file");
        deck_error_hint(err, "give the namelist text file (*.nml)");
        free(buf);
        return NULL;
    }
    const char *cr = lone_cr(buf);
    if (cr) {
        int line, col;
        line_col(buf, (size_t)(cr - buf), &line, &col);
        deck_error_set(err, line, col, "a carriage return without a line feed (an old Mac line end): Fortran does "
                                       "not end a line there, so a '!' comment would run on past it");
        deck_error_hint(err, "save the deck with LF (Unix) or CR LF (Windows) line ends, e.g. tr '\\r' '\\n' < "
                             "deck.nml > fixed.nml");
        free(buf);
        return NULL;
    }
    unify_line_ends(buf);
    return buf;
}

int config_read_file(struct config *cfg, const char *path, struct deck_error *err)
{
    config_error_reset(err, path);
    char *text = slurp(path, err);
    if (!text) return -1;
    int rc = config_read_string(cfg, text, path, err);
    free(text);
    return rc;
}

/* ------------------------------------------------------------ overrides */

/* "n_layer=3" without a group: name the group(s) that have the key. */
static int override_without_group(struct deck_error *err, const char *arg, const char *key)
{
    const struct key_info *k = NULL;
    for (int i = 0; i < config_nkeys && !k; i++)
        if (strcmp(config_keys[i].name, key) == 0) k = &config_keys[i];
    if (!k) k = config_nearest_key(NULL, key);
    deck_error_set(err, 1, 1, "override '%.*s' does not name a group", SHOW, arg);
    if (k) return deck_error_hint(err, "write group.key=value, e.g. %s.%s%s", k->group, k->name, strchr(arg, '='));
    return deck_error_hint(err, "write group.key=value, e.g. train.steps=100");
}

/* The values of an override for key k, whose text starts at column col.
 * A string key takes the text literally unless it starts with a quote: the
 * shell has already eaten the quotes a user would type. */
static int override_values(const struct key_info *k, const char *text, int col, struct deck_value **v,
                           int *n, struct deck_error *err)
{
    if ((k->type == KEY_STR || k->type == KEY_ENUM) && text[0] != '\'' && text[0] != '"') {
        *v = calloc(1, sizeof **v);
        char *s = strdup(text), *raw = strdup(text);
        if (!*v || !s || !raw) {
            free(*v), free(s), free(raw);
            deck_error_set(err, 1, col, "out of memory");
            return deck_error_hint(err, "use a shorter value");
        }
        **v = (struct deck_value){ .kind = DECK_STR, .s = s, .raw = raw, .line = 1, .col = col };
        *n = 1;
        return 0;
    }
    if (deck_parse_values(text, v, n, err)) {
        if (err->col) err->col += col - 1;
        return -1;
    }
    for (int i = 0; i < *n; i++) (*v)[i].col += col - 1;
    return 0;
}

/* p[0..len) lower-cased, without surrounding blanks. */
static void copy_name(char *dst, size_t n, const char *p, int len)
{
    while (len > 0 && isspace((unsigned char)*p)) p++, len--;
    while (len > 0 && isspace((unsigned char)p[len - 1])) len--;
    snprintf(dst, n, "%.*s", len, p);
    for (char *c = dst; *c; c++) *c = (char)tolower((unsigned char)*c);
}

/* group.key=value (the key's part; errors point into the argument). */
static int override_apply(struct config *cfg, const char *arg, const char *eq, struct deck_error *err)
{
    char group[64], key[64];
    const char *dot = memchr(arg, '.', (size_t)(eq - arg));
    int glen = dot ? (int)(dot - arg) : 0, klen = (int)(eq - arg) - glen - (dot != NULL);
    copy_name(key, sizeof key, dot ? dot + 1 : arg, klen);
    if (!dot) return override_without_group(err, arg, key);
    copy_name(group, sizeof group, arg, glen);
    if (find_group(group) < 0) return config_unknown_group(err, group, 1, 1);
    const struct key_info *k = find_key(group, key);
    if (!k) return config_unknown_key(err, group, key, 1, glen + 2);
    struct deck_value *v;
    int n, col = (int)(eq - arg) + 2;
    if (override_values(k, eq + 1, col, &v, &n, err)) return -1;
    int rc = n == 0 ? -1 : assign(cfg, k, v, n, err);
    if (n == 0) {
        deck_error_set(err, 1, col, "missing value for %s.%s", k->group, k->name);
        deck_error_hint(err, "write %s.%s=value", k->group, k->name);
    }
    deck_values_free(v, n);
    return rc;
}

void config_override_name(const char *arg, char *name, size_t n)
{
    const char *eq = strchr(arg, '=');
    int len = eq ? (int)(eq - arg) : (int)strlen(arg);
    const char *dot = memchr(arg, '.', (size_t)len);
    char group[CONFIG_STRLEN] = "", key[CONFIG_STRLEN];
    if (dot) copy_name(group, sizeof group, arg, (int)(dot - arg));
    copy_name(key, sizeof key, dot ? dot + 1 : arg, dot ? len - (int)(dot - arg) - 1 : len);
    snprintf(name, n, "%s%s%s", group, dot ? "." : "", key);
}

int config_override_given(int n, char *const *overrides, const char *key)
{
    char name[2 * CONFIG_STRLEN + 2];
    for (int i = 0; i < n; i++) {
        config_override_name(overrides[i], name, sizeof name);
        if (!strcmp(name, key)) return 1;
    }
    return 0;
}

int config_override(struct config *cfg, const char *arg, struct deck_error *err)
{
    config_error_reset(err, "command line");
    const char *eq = strchr(arg, '=');
    int rc;
    if (!eq) {
        deck_error_set(err, 1, 1, "override '%.*s' has no '='", SHOW, arg);
        rc = deck_error_hint(err, "write group.key=value, e.g. train.steps=100");
    } else {
        struct config tmp = *cfg;
        rc = override_apply(&tmp, arg, eq, err);
        if (rc == 0) *cfg = tmp;
    }
    /* a bare value that itself starts with a quote ('Tis ...) reads as an unclosed string */
    if (rc && eq && (eq[1] == '\'' || eq[1] == '"') && !strncmp(err->what, "unterminated string", 19)) {
        char q = eq[1], o = q == '\'' ? '"' : '\'', quoted[2 * CONFIG_STRLEN + 3];
        /* inside the other quotes where it holds none of them, else inside its own, each doubled */
        char with = strchr(eq + 1, o) ? q : o;
        size_t k = 0;
        quoted[k++] = with;
        for (const char *c = eq + 1; *c && k + 3 < sizeof quoted; c++) {
            if (*c == with) quoted[k++] = with;
            quoted[k++] = *c;
        }
        quoted[k++] = with;
        quoted[k] = '\0';
        if (strlen(eq + 1) < CONFIG_STRLEN && k + (size_t)(eq - arg) + 96 < sizeof err->hint) /* (whole, or none) */
            deck_error_hint(err, "close the string with %c; a value that itself starts with %c is written %.*s=%s", q,
                            q, (int)(eq - arg), arg, quoted);
        else
            deck_error_hint(err, "close the string with %c; a value that itself starts with %c goes inside %c quotes "
                            "(where it holds none; else inside %c quotes, each %c in it doubled)", q, q, o, q, q);
    }
    if (rc) config_append(err->what, sizeof err->what, " (in the override '%.*s')", SHOW, arg);
    return rc;
}

/* ------------------------------------------------------------ lookup for the checks */

int64_t config_key_max(const char *group, const char *name)
{
    const struct key_info *k = find_key(group, name);
    return k ? k->imax : INT64_MAX;
}

double config_key_default(const char *group, const char *name)
{
    const struct key_info *k = find_key(group, name);
    return !k ? 0 : k->type == KEY_REAL ? k->rdef : (double)k->idef;
}

/* ------------------------------------------------------------ output */

void config_error_print(FILE *f, const struct deck_error *err)
{
    /* one write: a launcher that forwards stdout and stderr apart puts nothing between the lines */
    char at[600] = "", text[sizeof at + sizeof err->what + sizeof err->hint + 32];
    if (err->file[0] && err->line <= 0) snprintf(at, sizeof at, "%s: ", err->file);
    else if (err->file[0] && err->col <= 0) snprintf(at, sizeof at, "%s:%d: ", err->file, err->line);
    else if (err->file[0]) snprintf(at, sizeof at, "%s:%d:%d: ", err->file, err->line, err->col);
    snprintf(text, sizeof text, "%serror: %s\n%s%s%s", at, err->what, err->hint[0] ? "  hint: " : "", err->hint,
             err->hint[0] ? "\n" : "");
    fputs(text, f);
    fflush(f);
}
