/* alloc_sweep.h -- a piece of work with each of its allocations refused in
 * turn (the unit programs test_tok_alloc, test_read_alloc, test_hf_alloc).
 *
 * The program that includes this (in one file) holds its own malloc,
 * calloc, realloc and free, and posix_memalign, aligned_alloc and memalign
 * (counted only when the program's own code calls them: OpenMP makes its
 * teams with them and aborts where one fails): glibc lets a program
 * replace them, for the C library's own calls too, and the replacements
 * here go to __libc_malloc and the rest underneath.  The test's own text
 * (sweep_printf) is not counted.  alloc_sweep runs the work once with every
 * allocation granted (the reference), then once for each allocation k =
 * 1, 2, ... of that same work with the k-th refused (NULL, errno ENOMEM),
 * until a run makes fewer than k.  Each run must either give exactly the
 * reference's outcome (a failure the code may absorb, such as a cache
 * that does without), or fail with a message that says memory ran out;
 * and nothing it allocated may be left when it is done (the blocks are
 * kept in a hash set while the work runs).  A crash fails the program.
 * The work runs once before all of this, so that what a process makes
 * once and keeps (OpenMP's threads) is neither counted nor refused, and
 * OpenMP's dynamic thread counts are turned off (a team of another size
 * would be allocated anew).  Only the sweeping thread's allocations are
 * counted, refused and kept: the work's own must come from it.  Beside the
 * blocks, a run must leave no file descriptor open; a block is filled with
 * a pattern when allocated by malloc or realloc's growth, and when freed,
 * so that a read of memory never written or already freed shows as a
 * different outcome.  (Under AddressSanitizer, which replaces the
 * allocator itself, the sweeps skip.) */
#ifndef TRIAD_ALLOC_SWEEP_H
#define TRIAD_ALLOC_SWEEP_H

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

/* What one run gives: its results as text (malloc'ed), or NULL and why. */
struct sweep_outcome {
    char *text;
    char err[1024];
};
typedef void (*sweep_work)(void *ctx, struct sweep_outcome *o);

/* printf to the end of an outcome's text; -1 out of memory (err said). */
static int sweep_printf(struct sweep_outcome *o, size_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
#define ALLOC_SWEEP_WORKS 1
#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------ the allocator */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);

/* Allocations counted while armed (on the sweeping thread): the one
 * numbered fail_at refused (0: none); fired once it has been. */
static long sweep_counted, sweep_fail_at;
static int sweep_fired;
/* armed: the work is running; paused: the test's own allocations
 * (sweep_printf).  Volatile, and set between compiler barriers: the
 * compiler takes malloc for the C library's, which reads none of this
 * file's variables, and would otherwise drop or move a store made only
 * for the allocator to see. */
static volatile int sweep_armed, sweep_paused;
#define SWEEP_BARRIER() __asm__ volatile("" ::: "memory")
static pthread_t sweep_thread;

/* With sweep_own_code set, only the allocations the program's own code
 * makes (called from its text: triad's, linked in) are counted, refused
 * and kept, not those of the libraries it calls (Open MPI, whose own
 * failures abort it; the C library's, for a strdup or an fopen). */
static int sweep_own_code;
extern char __executable_start[], etext[];

/* Armed, on the sweeping thread, for an allocation called from `caller`. */
/* Armed, on the sweeping thread (a block of the set may be freed by any code). */
static int sweep_on(void) { return sweep_armed && !sweep_paused && pthread_equal(pthread_self(), sweep_thread); }
static int sweep_in_text(const void *caller)
{
    return (const char *)caller >= __executable_start && (const char *)caller < etext;
}
static int sweep_mine_from(const void *caller) { return sweep_on() && (!sweep_own_code || sweep_in_text(caller)); }
#define sweep_mine() sweep_mine_from(__builtin_return_address(0))

/* The blocks allocated while armed and not yet freed: open addressing on
 * a fixed table (nothing allocated inside the allocator); a freed slot is
 * SWEEP_TOMB. */
#define SWEEP_SLOTS (1u << 16)
#define SWEEP_TOMB ((void *)1)
static void *sweep_live[SWEEP_SLOTS];
static long sweep_nlive, sweep_lost; /* lost: blocks a full table could not hold */

static size_t sweep_slot(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 48); }

static void sweep_add(void *p)
{
    if (!p) return;
    for (size_t j = sweep_slot(p), k = 0; k < SWEEP_SLOTS; k++, j = (j + 1) & (SWEEP_SLOTS - 1))
        if (!sweep_live[j] || sweep_live[j] == SWEEP_TOMB) {
            sweep_live[j] = p, sweep_nlive++;
            return;
        }
    sweep_lost++;
}

/* p taken out of the set: 1 if it was there. */
static int sweep_del(void *p)
{
    if (!p || !sweep_nlive) return 0;
    for (size_t j = sweep_slot(p), k = 0; k < SWEEP_SLOTS && sweep_live[j]; k++, j = (j + 1) & (SWEEP_SLOTS - 1))
        if (sweep_live[j] == p) {
            sweep_live[j] = SWEEP_TOMB, sweep_nlive--;
            return 1;
        }
    return 0;
}

/* 1 when this allocation (the sweeping thread's) is the one to refuse. */
static int sweep_refuse(void)
{
    if (++sweep_counted != sweep_fail_at) return 0;
    sweep_fired = 1;
    errno = ENOMEM;
    return 1;
}

#define SWEEP_NEW 0xBE  /* a block's bytes before they are written */
#define SWEEP_FREED 0xA5 /* and after it is freed */

void *malloc(size_t n)
{
    if (!sweep_mine()) return __libc_malloc(n);
    if (sweep_refuse()) return NULL;
    void *p = __libc_malloc(n);
    if (p) memset(p, SWEEP_NEW, n), sweep_add(p);
    return p;
}

void *calloc(size_t n, size_t size)
{
    if (!sweep_mine()) return __libc_calloc(n, size);
    if (sweep_refuse()) return NULL;
    void *p = __libc_calloc(n, size);
    sweep_add(p);
    return p;
}

void *realloc(void *p, size_t n)
{
    /* (realloc(p, 0) frees p in glibc: a free, not an allocation to refuse) */
    if (!sweep_mine() || (p && !n)) { /* (a tracked block stays tracked, moved or not) */
        int tracked = sweep_on() && sweep_del(p);
        void *q = __libc_realloc(p, n);
        if (tracked && n) sweep_add(q ? q : p);
        return q;
    }
    if (sweep_refuse()) return NULL; /* (p kept, as an exhausted heap keeps it) */
    size_t old = p ? malloc_usable_size(p) : 0;
    int tracked = sweep_del(p);
    void *q = __libc_realloc(p, n);
    if (!q) {
        if (tracked) sweep_add(p);
        return NULL;
    }
    if (n > old) memset((char *)q + old, SWEEP_NEW, n - old);
    sweep_add(q);
    return q;
}

/* The aligned allocations (the program's own only, whatever sweep_own_code:
 * OpenMP makes its teams with them, and aborts where one fails). */
static void *sweep_aligned(const void *caller, size_t align, size_t n)
{
    int mine = sweep_on() && sweep_in_text(caller);
    if (mine && sweep_refuse()) return NULL;
    void *p = __libc_memalign(align, n);
    if (p && mine) memset(p, SWEEP_NEW, n), sweep_add(p);
    return p;
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (!align || align % sizeof(void *) || (align & (align - 1))) return EINVAL;
    int e = errno;
    void *p = sweep_aligned(__builtin_return_address(0), align, n);
    errno = e; /* (posix_memalign leaves errno alone) */
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n) { return sweep_aligned(__builtin_return_address(0), align, n); }
void *memalign(size_t align, size_t n) { return sweep_aligned(__builtin_return_address(0), align, n); }

void free(void *p)
{
    if (sweep_on() && sweep_del(p)) memset(p, SWEEP_FREED, malloc_usable_size(p));
    __libc_free(p);
}

/* Open file descriptors of the process (outside the armed window: the
 * directory's reading allocates). */
static int sweep_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* Descriptors a run left open (the last run's). */
static int sweep_fds_left;

/* One run of the work with allocation fail_at refused (0: none). */
static void sweep_run(sweep_work work, void *ctx, long fail_at, struct sweep_outcome *o)
{
    memset(sweep_live, 0, sizeof sweep_live);
    sweep_nlive = sweep_lost = 0;
    sweep_counted = 0, sweep_fail_at = fail_at, sweep_fired = 0;
    o->text = NULL;
    o->err[0] = 0;
    int fds = sweep_fds();
    sweep_thread = pthread_self();
    sweep_armed = 1;
    SWEEP_BARRIER();
    work(ctx, o);
    SWEEP_BARRIER();
    sweep_armed = 0;
    sweep_fds_left = sweep_fds() - fds;
}

/* A message that says memory ran out: triad's own, or the C library's
 * strerror(ENOMEM) where a call such as fopen failed for want of it. */
static int sweep_says_memory(const char *err)
{
    return strstr(err, "out of memory") || strstr(err, strerror(ENOMEM));
}

/* The sweep of one piece of work (two TAP tests: the reference run, the
 * sweep); up to three diagnostics of each kind of failure. */
__attribute__((unused)) static void alloc_sweep(const char *name, sweep_work work, void *ctx)
{
    struct sweep_outcome ref;
#ifdef _OPENMP
    omp_set_dynamic(0);
#endif
    sweep_run(work, ctx, 0, &ref); /* (a first run: what the process makes once and keeps, such as OpenMP's threads) */
    free(ref.text);
    sweep_run(work, ctx, 0, &ref);
    long total = sweep_counted, left = sweep_nlive; /* (the outcome's text is the test's: not counted) */
    if (!tap_ok(ref.text && total > 0 && left == 0 && !sweep_lost && !sweep_fds_left,
                "%s: the reference run (%ld allocations, %ld blocks and %d descriptors left)", name, total, left,
                sweep_fds_left)) {
        tap_diag("%s", ref.err);
        free(ref.text);
        return;
    }
    long k, absorbed = 0, refused = 0, wrong = 0, silent = 0, leaked = 0;
    for (k = 1;; k++) {
        struct sweep_outcome o;
        sweep_run(work, ctx, k, &o);
        if (!sweep_fired) { /* every allocation granted: the sweep is over */
            free(o.text);
            break;
        }
        if ((sweep_nlive || sweep_lost || sweep_fds_left) && leaked++ < 3)
            tap_diag("%s: allocation %ld refused (%s): %ld block(s) and %d descriptor(s) left", name, k,
                     o.text ? "the run went on" : o.err, sweep_nlive, sweep_fds_left);
        if (o.text) {
            absorbed++;
            if (strcmp(o.text, ref.text) != 0 && wrong++ < 3)
                tap_diag("%s: allocation %ld refused: the run went on and gave\n#   %s\n# not\n#   %s", name, k, o.text,
                         ref.text);
            free(o.text);
        } else {
            refused++;
            if (!sweep_says_memory(o.err) && silent++ < 3)
                tap_diag("%s: allocation %ld refused: the error does not say memory ran out: '%s'", name, k, o.err);
        }
    }
    free(ref.text);
    if (k - 1 != total) tap_diag("%s: the sweep ended at allocation %ld of the reference's %ld", name, k - 1, total);
    tap_ok(k > 1 && k - 1 == total && wrong == 0 && silent == 0 && leaked == 0,
           "%s: each of its %ld allocations refused in turn: %ld runs failed saying memory ran out, %ld went on to "
           "the reference's results; %ld went on to other results, %ld failed saying something else, %ld left "
           "blocks or descriptors", name, k - 1, refused, absorbed - wrong, wrong, silent, leaked);
}
#else
#define ALLOC_SWEEP_WORKS 0
__attribute__((unused)) static int sweep_own_code; /* (set by programs that sweep their own code only) */
__attribute__((unused)) static void alloc_sweep(const char *name, sweep_work work, void *ctx)
{
    (void)work, (void)ctx;
    char why[300];
    snprintf(why, sizeof why, "%s: not glibc, or under AddressSanitizer (the sweep replaces malloc over glibc's "
             "__libc_malloc)", name);
    tap_skip(why);
}
#endif

static int sweep_printf(struct sweep_outcome *o, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) return snprintf(o->err, sizeof o->err, "(the test) vsnprintf failed"), -1;
#if ALLOC_SWEEP_WORKS
    int paused = sweep_paused;
    sweep_paused = 1; /* (the test's own text: not the work's) */
    SWEEP_BARRIER();
#endif
    char *t = realloc(o->text, *n + (size_t)len + 1);
#if ALLOC_SWEEP_WORKS
    SWEEP_BARRIER();
    sweep_paused = paused;
#endif
    if (!t) return snprintf(o->err, sizeof o->err, "(the test) out of memory"), -1;
    va_start(ap, fmt);
    vsnprintf(t + *n, (size_t)len + 1, fmt, ap);
    va_end(ap);
    *n += (size_t)len;
    o->text = t;
    return 0;
}

#endif
