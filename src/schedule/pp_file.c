/* pp_file.c -- a pipeline schedule read from a file (pp_file.h). */
#include "pp_file.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct reader {
    const char *path;
    int line;
    char *err;
    size_t errlen;
};

static int bad(const struct reader *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const struct reader *R, const char *fmt, ...)
{
    int n = snprintf(R->err, R->errlen, "%s:%d: ", R->path, R->line);
    if (n >= 0 && (size_t)n < R->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(R->err + n, R->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    text_printable(R->err); /* (the file's bytes quoted) */
    return -1;
}

/* The decimal number at *p (p advanced past it), or -1 when none is there
 * or it has more than 9 digits. */
static long number(const char **p)
{
    const char *s = *p;
    long v = 0;
    while (isdigit((unsigned char)**p) && *p - s < 10) v = 10 * v + (*(*p)++ - '0');
    return *p == s || *p - s > 9 ? -1 : v;
}

/* The compute written at *p up to end ("F3", "B12c1", "W3") into a, p
 * advanced past it.  0, or -1 with the reason. */
static int compute(const struct reader *R, const char **p, const char *end, int v, int m, struct pp_action *a)
{
    const char *s = *p;
    int len = (int)(end - s);
    *a = (struct pp_action){*s == 'F' ? PP_FWD : *s == 'W' ? PP_WGT : PP_BWD, 0, 0, -1};
    if (*s != 'F' && *s != 'B' && *s != 'W')
        return bad(R, "'%.*s' is no compute: write F<micro-batch>, B<micro-batch> or W<micro-batch> (with "
                   "c<chunk> when virtual_stages > 1), e.g. F0, B3c1 or W3c1", len, s);
    ++*p;
    const char *digits = *p;
    long mb = number(p), chunk = 0;
    if (mb < 0)
        return bad(R, isdigit((unsigned char)*digits) ? "'%.*s': the micro-batch number after '%c' has more than 9 "
                                                        "digits" : "'%.*s': no micro-batch number after '%c'",
                   len, s, *s);
    if (**p == 'c') {
        digits = ++*p;
        if ((chunk = number(p)) < 0)
            return bad(R, isdigit((unsigned char)*digits) ? "'%.*s': the chunk number after 'c' has more than 9 digits"
                                                          : "'%.*s': no chunk number after 'c'", len, s);
    } else if (v > 1) {
        return bad(R, "'%.*s' names no chunk: with virtual_stages = %d write %c%ldc0 to %c%ldc%d", len, s, v, *s, mb,
                   *s, mb, v - 1);
    }
    if (*p != end) return bad(R, "'%.*s': unexpected '%c' after %.*s", len, s, **p, (int)(*p - s), s);
    if (mb >= m)
        return bad(R, "'%.*s': micro-batch %ld, but a step has %d per replica (0 to %d)", len, s, mb, m, m - 1);
    if (chunk >= v)
        return bad(R, "'%.*s': chunk %ld, but virtual_stages = %d (chunks 0 to %d)", len, s, chunk, v, v - 1);
    a->mb = (int)mb;
    a->chunk = (int)chunk;
    return 0;
}

/* Append a to rank r's list (group g). */
static void push(struct pp_file *f, int *cap, int r, const struct pp_action *a, int g)
{
    int **group = f->group;
    if (f->n[r] == cap[r]) {
        cap[r] = cap[r] ? 2 * cap[r] : 64;
        struct pp_action *na = realloc(f->act[r], (size_t)cap[r] * sizeof *na);
        int *ng = realloc(group[r], (size_t)cap[r] * sizeof *ng);
        if (!na || !ng) {
            fprintf(stderr, "error: out of memory reading a pipeline schedule\n");
            exit(1);
        }
        f->act[r] = na;
        group[r] = ng;
    }
    group[r][f->n[r]] = g;
    f->act[r][f->n[r]++] = *a;
}

/* One line, comment cut: "rank R: computes".  Blank lines are skipped. */
static int parse_line(const struct reader *R, char *text, int v, int m, struct pp_file *f, int *cap, int *line_of)
{
    char *hash = strchr(text, '#');
    if (hash) *hash = 0;
    text[strcspn(text, "\r\n")] = 0; /* (the line's end: not quoted into a message) */
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) return 0;
    if (strncmp(p, "rank", 4) != 0 || !isspace((unsigned char)p[4]))
        return bad(R, "a line starts with 'rank R:' (R the pipeline rank, 0 to %d), not '%.12s'", f->pp - 1, p);
    p += 4;
    while (isspace((unsigned char)*p)) p++;
    long r = number(&p);
    while (isspace((unsigned char)*p)) p++;
    if (r < 0 || *p != ':') return bad(R, "'rank' must be followed by the rank's number and ':'");
    if (r >= f->pp) return bad(R, "rank %ld, but pp = %d (ranks 0 to %d)", r, f->pp, f->pp - 1);
    if (line_of[r]) return bad(R, "rank %ld has a line already (line %d)", r, line_of[r]);
    line_of[r] = R->line;
    p++;
    for (int g = 0;; g++) { /* one word: computes joined by '+' */
        while (isspace((unsigned char)*p)) p++;
        if (!*p) return 0;
        const char *word_end = p;
        while (*word_end && !isspace((unsigned char)*word_end)) word_end++;
        while (p < word_end) {
            const char *end = memchr(p, '+', (size_t)(word_end - p));
            if (!end) end = word_end;
            struct pp_action a;
            if (compute(R, &p, end, v, m, &a) != 0) return -1;
            push(f, cap, (int)r, &a, g);
            if (p < word_end) p++; /* the '+' */
            if (p == word_end && end != word_end) return bad(R, "a group ends with '+'");
        }
    }
}

/* A compute as the file writes it: "B3", or "B3c1" with chunks. */
static const char *named(char *buf, size_t len, char c, int mb, int chunk, int v)
{
    if (v > 1) snprintf(buf, len, "%c%dc%d", c, mb, chunk);
    else snprintf(buf, len, "%c%d", c, mb);
    return buf;
}

static char kind_letter(enum pp_kind k) { return k == PP_FWD ? 'F' : k == PP_WGT ? 'W' : 'B'; }

/* Each chunk's forwards and backwards in micro-batch order, each backward
 * after its forward, each W after its backward and once, all of them
 * there: 0, or -1 with the first breach.  next[chunk][F, B]: the
 * micro-batch due next; wseen[mb v + chunk]: its W read. */
static int check_order(const struct reader *R, const struct pp_file *f, int r, int v, int *next, unsigned char *wseen)
{
    for (int i = 0; i < f->n[r]; i++) {
        const struct pp_action *a = &f->act[r][i];
        char c = kind_letter(a->kind), me[32], other[32];
        named(me, sizeof me, c, a->mb, a->chunk, v);
        if (a->kind == PP_WGT) {
            unsigned char *seen = &wseen[a->mb * v + a->chunk];
            if (a->mb >= next[2 * a->chunk + 1])
                return bad(R, "rank %d: %s comes before %s: a weight gradient needs its backward (the input "
                           "gradient) first", r, me, named(other, sizeof other, 'B', a->mb, a->chunk, v));
            if (*seen) return bad(R, "rank %d: %s appears twice", r, me);
            *seen = 1;
            continue;
        }
        int b = a->kind == PP_BWD, *due = &next[2 * a->chunk + b];
        if (b && a->mb >= next[2 * a->chunk])
            return bad(R, "rank %d: %s comes before %s: a backward needs its forward first", r, me,
                       named(other, sizeof other, 'F', a->mb, a->chunk, v));
        if (a->mb < *due) return bad(R, "rank %d: %s appears twice", r, me);
        if (a->mb > *due)
            return bad(R, "rank %d: %s comes before %s: each chunk's %s run in micro-batch order, so that the "
                       "gradients add up as in every other schedule", r, me,
                       named(other, sizeof other, c, *due, a->chunk, v), b ? "backwards" : "forwards");
        ++*due;
    }
    return 0;
}

/* Each chunk's weight gradients (a backward without a W after it, the
 * fused one; or a W) in micro-batch order: every parameter's gradient then
 * adds the micro-batches up in the order of every other schedule, and the
 * numbers are pp = 1's bits.  wnext[chunk]: the micro-batch due next. */
static int check_wgrad_order(const struct reader *R, const struct pp_file *f, int r, int v, int *wnext)
{
    unsigned char *split = malloc((size_t)f->n[r] + 1);
    if (!split) return bad(R, "out of memory");
    pp_split_marks(f->act[r], f->n[r], split);
    int rc = 0;
    for (int i = 0; i < f->n[r] && rc == 0; i++) {
        const struct pp_action *a = &f->act[r][i];
        if (a->kind == PP_FWD || (a->kind == PP_BWD && split[i])) continue;
        int *due = &wnext[a->chunk];
        char me[32], w[32], b[32];
        named(me, sizeof me, kind_letter(a->kind), a->mb, a->chunk, v);
        if (a->mb != *due)
            rc = bad(R, "rank %d: %s%s adds the weight gradient of micro-batch %d before that of micro-batch %d "
                     "(%s, or %s without a W after it): each chunk's weight gradients add up in micro-batch order, "
                     "so that they are the same bits as every other schedule's and pp = 1's", r, me,
                     a->kind == PP_BWD ? " (no W follows it: the fused backward)" : "", a->mb, *due,
                     named(w, sizeof w, 'W', *due, a->chunk, v), named(b, sizeof b, 'B', *due, a->chunk, v));
        ++*due;
    }
    free(split);
    return rc;
}

/* Rank r's line: the order (above), then every forward and backward there. */
static int check_rank(const struct reader *R, const struct pp_file *f, int r, int v, int m)
{
    int *next = calloc(3 * (size_t)v, sizeof *next); /* [chunk][F, B], then [chunk] the weight gradient due */
    unsigned char *wseen = calloc((size_t)m * (size_t)v, 1);
    int rc = next && wseen ? check_order(R, f, r, v, next, wseen) : bad(R, "out of memory");
    if (rc == 0) rc = check_wgrad_order(R, f, r, v, next + 2 * v);
    for (int k = 0; k < 2 * v && rc == 0; k++) {
        char me[32];
        if (next[k] < m)
            rc = bad(R, "rank %d never runs %s: every rank forwards and backwards each of the %d micro-batches once in "
                     "each of its %d chunk(s)", r, named(me, sizeof me, k % 2 ? 'B' : 'F', next[k], k / 2, v), m, v);
    }
    free(next);
    free(wseen);
    return rc;
}

void pp_file_free(struct pp_file *f)
{
    for (int r = 0; f->act && r < f->pp; r++) free(f->act[r]);
    for (int r = 0; f->group && r < f->pp; r++) free(f->group[r]);
    free(f->act);
    free(f->group);
    free(f->n);
    memset(f, 0, sizeof *f);
}

int pp_file_read(const char *path, int pp, int v, int m, struct pp_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    struct reader R = {path, 0, err, errlen};
    FILE *in = fopen(path, "r");
    if (!in)
        return snprintf(err, errlen, "parallel.schedule_file = '%s': cannot read it (%s)", path, strerror(errno)), -1;
    f->pp = pp;
    f->n = calloc((size_t)pp, sizeof *f->n);
    f->act = calloc((size_t)pp, sizeof *f->act);
    f->group = calloc((size_t)pp, sizeof *f->group);
    int *cap = calloc((size_t)pp, sizeof *cap), *line_of = calloc((size_t)pp, sizeof *line_of);
    int rc = f->n && f->act && f->group && cap && line_of ? 0 : bad(&R, "out of memory");
    char *text = NULL;
    size_t len = 0;
    while (rc == 0 && getline(&text, &len, in) >= 0) {
        R.line++;
        rc = parse_line(&R, text, v, m, f, cap, line_of);
    }
    fclose(in);
    free(text);
    for (int r = 0; rc == 0 && r < pp; r++) {
        if (!line_of[r]) {
            snprintf(err, errlen, "%s: rank %d has no line: every rank 0 to %d needs one", path, r, pp - 1);
            rc = -1;
        }
        R.line = line_of[r];
        if (rc == 0) rc = check_rank(&R, f, r, v, m);
    }
    free(cap);
    free(line_of);
    if (rc) pp_file_free(f);
    return rc;
}
