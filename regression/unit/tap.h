/* tap.h -- a minimal TAP producer for the unit programs (automake tap-driver). */
#ifndef TRIAD_TAP_H
#define TRIAD_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n = 0, tap_failed = 0;

static inline int tap_ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (!cond) tap_failed++;
    return cond;
}

static inline void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static inline void tap_skip(const char *why)
{
    printf("ok %d # SKIP %s\n", ++tap_n, why);
}

/* Print the plan at the end and return the exit status. */
static inline int tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

/* n zeroed bytes, or the test stops with status 2 (out of memory). */
static inline void *tap_alloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "test: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* The template of a scratch file or directory for mkstemp / mkdtemp:
 * "<dir>/<name>_XXXXXX" with dir $TMPDIR, or /tmp where that is unset or
 * empty.  (A template cut short by len has no XXXXXX: mkstemp refuses it.) */
static inline void tap_tmp_template(char *out, size_t len, const char *name)
{
    const char *dir = getenv("TMPDIR");
    snprintf(out, len, "%s/%s_XXXXXX", dir && dir[0] ? dir : "/tmp", name);
}

/* Largest |a-b| / max(|b|, floor) over n elements (floor avoids dividing by 0). */
static inline double tap_max_relerr(const double *a, const double *b, size_t n, double floor_)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double den = fabs(b[i]) > floor_ ? fabs(b[i]) : floor_;
        double e = fabs(a[i] - b[i]) / den;
        if (isnan(e)) return INFINITY; /* a NaN is a failure, whatever follows */
        if (e > worst) worst = e;
    }
    return worst;
}

#endif
