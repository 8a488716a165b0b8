/* config_suggest.c -- what the deck reader says about a name it does not
 * know: the nearest key, group or choice (edit distance), the lists. */
#include "config.h"

#include <ctype.h>
#include <string.h>

#include "config_internal.h"

/* Optimal-string-alignment distance (Levenshtein plus adjacent swaps),
 * case-insensitive, on the first 63 bytes. */
static int edit_distance(const char *a, const char *b)
{
    enum { M = 64 };
    int d[M][M];
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > M - 1) la = M - 1;
    if (lb > M - 1) lb = M - 1;
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++) {
        for (int j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                cb == tolower((unsigned char)a[i - 2]) && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* Is `name` close enough to `typed` to suggest it?  A third of the typed
 * length in edits (at least 1, at most 3), or a prefix of 3+ letters. */
static int is_near(const char *typed, const char *name, int dist)
{
    int len = (int)strlen(typed), lim = len / 3;
    if (lim < 1) lim = 1;
    if (lim > 3) lim = 3;
    if (dist <= lim) return 1;
    return len >= 3 && strncmp(name, typed, (size_t)len) == 0;
}

/* The key nearest to `name` in `group` (NULL: in any group), or NULL. */
const struct key_info *config_nearest_key(const char *group, const char *name)
{
    const struct key_info *best = NULL;
    int bestd = 1 << 30;
    for (int i = 0; i < config_nkeys; i++) {
        if (group && strcmp(config_keys[i].group, group) != 0) continue;
        int dist = edit_distance(name, config_keys[i].name);
        if (dist < bestd && is_near(name, config_keys[i].name, dist)) {
            best = &config_keys[i];
            bestd = dist;
        }
    }
    return best;
}

const char *config_nearest_choice(const char *choices, const char *typed, char *buf, size_t n)
{
    int bestd = 1 << 30;
    const char *best = NULL;
    for (const char *c = choices; *c;) {
        size_t len = strcspn(c, "|");
        config_word(buf, n, c, len);
        int dist = edit_distance(typed, buf);
        if (dist < bestd && is_near(typed, buf, dist)) {
            bestd = dist;
            best = c;
        }
        c += len + (c[len] == '|');
    }
    if (!best) return NULL;
    config_word(buf, n, best, strcspn(best, "|"));
    return buf;
}

/* ------------------------------------------------------------ name errors */

int config_unknown_group(struct deck_error *err, const char *name, int line, int col)
{
    char list[256] = "";
    int best = -1, bestd = 1 << 30;
    for (int g = 0; g < config_ngroups; g++) {
        int dist = edit_distance(name, config_groups[g].name);
        if (dist < bestd && is_near(name, config_groups[g].name, dist)) best = g, bestd = dist;
        config_append(list, sizeof list, "%s&%s", g ? ", " : "", config_groups[g].name);
    }
    deck_error_set(err, line, col, "unknown group &%.*s", SHOW, name);
    if (best >= 0) return deck_error_hint(err, "did you mean &%s? (the groups are %s)", config_groups[best].name, list);
    return deck_error_hint(err, "the groups are %s", list);
}

static void list_keys(char *buf, size_t n, const char *group)
{
    buf[0] = '\0';
    for (int i = 0; i < config_nkeys; i++)
        if (strcmp(config_keys[i].group, group) == 0) config_append(buf, n, "%s%s", buf[0] ? ", " : "", config_keys[i].name);
}

/* A key that &group lacks: say where it belongs, or the nearest name. */
int config_unknown_key(struct deck_error *err, const char *group, const char *key, int line, int col)
{
    char owners[128] = "", list[512];
    const char *first = NULL;
    int n = 0, total = 0;
    for (int i = 0; i < config_nkeys; i++) total += strcmp(config_keys[i].name, key) == 0;
    for (int i = 0; i < config_nkeys; i++) { /* "&a", "&a and &b", "&a, &b and &c" */
        if (strcmp(config_keys[i].name, key) != 0) continue;
        n++;
        config_append(owners, sizeof owners, "%s&%s", n == 1 ? "" : n == total ? " and " : ", ", config_keys[i].group);
        if (!first) first = config_keys[i].group;
    }
    if (first) {
        deck_error_set(err, line, col, "'%s' belongs to %s, not &%s", key, owners, group);
        return deck_error_hint(err, "move it into %s: &%s %s = ... /", total > 1 ? "the group it sets" : owners, first,
                               key);
    }
    deck_error_set(err, line, col, "unknown key '%.*s' in &%s", SHOW, key, group);
    const struct key_info *k = config_nearest_key(group, key);
    if (k) return deck_error_hint(err, "did you mean '%s'?", k->name);
    k = config_nearest_key(NULL, key);
    if (k) return deck_error_hint(err, "did you mean '%s'? (it belongs to &%s)", k->name, k->group);
    list_keys(list, sizeof list, group);
    return deck_error_hint(err, "the keys of &%s are: %s", group, list);
}
