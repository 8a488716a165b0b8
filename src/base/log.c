/* log.c -- rank-0 printing, fatal errors, checked allocation. */
#define _DEFAULT_SOURCE /* madvise */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "exit_status.h"
#include "utf8.h"

/* Who is talking, for messages: set once at start-up.  One of the few
 * pieces of process-wide state; docs/design.md (§3) lists them all. */
static int g_rank = 0;

void log_set_rank(int rank) { g_rank = rank; }

int log_rank(void) { return g_rank; }

void log_info(const char *fmt, ...)
{
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* "<prefix><message>\n" and "  hint: <hint>\n" (where there is one) on
 * stderr in one write: a launcher that forwards stdout and stderr apart
 * (mpirun) cannot put a piece of the other between its parts. */
static void write_message(const char *prefix, const char *hint, const char *fmt, va_list ap)
{
    enum { MESSAGE = 8192, HINT = 4096 }; /* (each cut to its own room: a long message keeps its hint) */
    char line[MESSAGE + HINT + 16];
    int n = snprintf(line, MESSAGE, "%s", prefix);
    if (n >= 0 && n < MESSAGE) n += vsnprintf(line + n, (size_t)(MESSAGE - n), fmt, ap);
    if (n < 0) n = 0;
    if (n >= MESSAGE) n = MESSAGE - 1;
    n += snprintf(line + n, sizeof line - (size_t)n, "\n");
    if (hint && *hint) snprintf(line + n, sizeof line - (size_t)n, "  hint: %.*s\n", HINT, hint);
    fputs(line, stderr);
    fflush(stderr);
}

void log_warn(const char *fmt, ...)
{
    char prefix[48];
    snprintf(prefix, sizeof prefix, "[rank %d] warning: ", g_rank);
    va_list ap;
    va_start(ap, fmt);
    write_message(prefix, NULL, fmt, ap);
    va_end(ap);
}

int mpi_live(void)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    return inited && !finalized;
}

/* "<prefix><message>" and the hint line on stderr, after what stdout holds. */
static void print_error(const char *prefix, const char *hint, const char *fmt, va_list ap)
{
    fflush(stdout);
    write_message(prefix, hint, fmt, ap);
}

void die_at(const char *file, int line, const char *hint, const char *fmt, ...)
{
    char prefix[512];
    snprintf(prefix, sizeof prefix, "[rank %d] error at %s:%d: ", g_rank, file, line);
    va_list ap;
    va_start(ap, fmt);
    print_error(prefix, hint, fmt, ap);
    va_end(ap);
    if (mpi_live()) MPI_Abort(MPI_COMM_WORLD, EXIT_ERROR);
    exit(EXIT_ERROR);
}

void die_all(const char *hint, const char *fmt, ...)
{
    if (g_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        print_error("error: ", hint, fmt, ap);
        va_end(ap);
    }
    /* the launcher may kill the job at the first exit: let rank 0 finish
     * printing (and every rank learns whether one ends through MPI_Abort) */
    exit_aborts_agree();
    exit_all(EXIT_ERROR);
}

static int g_abort;                           /* exit_by_abort was called */
static void (*_Atomic g_abrupt)(void);        /* exit_abruptly's */

void exit_by_abort(void) { g_abort = 1; }

int exit_aborts(void) { return g_abort; }

void exit_aborts_agree(void)
{
    if (!mpi_live()) return;
    int any = 0;
    MPI_Allreduce(&g_abort, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    g_abort = any;
}

void exit_abruptly(void (*fn)(void)) { g_abrupt = fn; }

void exit_abruptly_run(void)
{
    void (*fn)(void) = atomic_exchange(&g_abrupt, NULL);
    if (fn) fn();
}

void exit_all(int status)
{
    fflush(stdout);
    fflush(stderr);
    if (g_abort && mpi_live()) {
        exit_abruptly_run();
        /* one rank's MPI_Abort ends them all: not before each is done, nor
         * later than 10 s for a rank that never comes (an exit of its own) */
        MPI_Request done;
        int flag = 0;
        if (MPI_Ibarrier(MPI_COMM_WORLD, &done) == MPI_SUCCESS)
            for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 10;) {
                MPI_Test(&done, &flag, MPI_STATUS_IGNORE);
                if (!flag) nanosleep(&(struct timespec){0, 1000000}, NULL);
            }
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    if (mpi_live()) MPI_Finalize();
    exit(status);
}

void mpi_fail(const char *file, int line, const char *call, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    die_at(file, line, "an MPI call failed: check the launcher, the network and that all ranks run the same binary",
           "%s failed: %s", call, msg);
}

void *xmalloc_at(const char *file, int line, size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die_at(file, line, "reduce the model or micro-batch size, or use more ranks (`triad plan` tells what fits)",
               "out of memory allocating %zu bytes", n);
    return p;
}

void *xcalloc_at(const char *file, int line, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        die_at(file, line, "reduce the model or micro-batch size, or use more ranks",
               "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

/* Blocks from HUGE_MIN up (the model's state, its activations) start on a
 * 2 MiB boundary and ask for transparent huge pages (which a kernel in THP
 * mode "madvise" gives only on request; in "always" they come anyway;
 * advice only, ignored where it cannot): the products' packing and the
 * optimizer stream through gigabytes a step, and 4 KiB pages made the TLB
 * miss every 64 lines (docs/performance.md, "The packing's row order, huge
 * pages"). */
enum { HUGE_PAGE = 2 << 20, HUGE_MIN = 4 * HUGE_PAGE };

void *alloc_aligned(size_t n)
{
    void *p = NULL;
    if (n > SIZE_MAX - 63) return NULL;
    size_t rounded = (n + 63) / 64 * 64;
    if (posix_memalign(&p, rounded >= HUGE_MIN ? HUGE_PAGE : 64, rounded ? rounded : 64) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (rounded >= HUGE_MIN) (void)madvise(p, rounded / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);
#endif
    memset(p, 0, rounded);
    return p;
}

void *xalloc_aligned_at(const char *file, int line, size_t n)
{
    void *p = alloc_aligned(n);
    if (!p)
        die_at(file, line, "reduce the model or micro-batch size, or use more ranks",
               "out of memory allocating %zu bytes", n);
    return p;
}

void text_printable(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        int len = utf8_length((const unsigned char *)s + i, n - i);
        if (len == 0 || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) { /* (a byte no terminal shows) */
            s[i++] = '?';
            continue;
        }
        if (len == 2 && utf8_code_point((const unsigned char *)s + i, 2) < 0xA0) /* (C1: U+0080 .. U+009F) */
            s[i] = s[i + 1] = '?';
        i += (size_t)len;
    }
}

int(errorf)(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    text_printable(err);
    return -1;
}

int(mpi_agree_error)(MPI_Comm comm, int failed, char *msg, size_t len)
{
    int rank, size, first;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &size));
    int mine = failed ? rank : size;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
    if (first == size) return 0;
    char buf[4096] = {0};
    if (rank == first) snprintf(buf, sizeof buf, "%s", msg);
    MPI_CHECK(MPI_Bcast(buf, (int)sizeof buf, MPI_CHAR, first, comm));
    snprintf(msg, len, "%s", buf);
    return -1;
}

void(die_all_if)(MPI_Comm comm, int failed, const char *msg, const char *hint)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", msg);
    if (mpi_agree_error(comm, failed, buf, sizeof buf) != 0) die_all(hint, "%s", buf);
}

double wtime(void) { return MPI_Wtime(); }
