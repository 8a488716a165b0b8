/* log.h -- rank-0 printing, fatal errors, and checks that name rank, file and line. */
#ifndef TRIAD_LOG_H
#define TRIAD_LOG_H

#include <mpi.h>
#include <stddef.h>

void log_set_rank(int rank);
int log_rank(void);

/* printf to stdout on rank 0 only (flushed). */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* printf to stderr on every rank, prefixed "[rank r] warning: ". */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A failure only this rank saw: print "[rank r] error at file:line: msg",
 * an optional "  hint: ..." line, and abort the whole job with status 1. */
void die_at(const char *file, int line, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
#define die(...) die_at(__FILE__, __LINE__, NULL, __VA_ARGS__)

/* A failure every rank sees alike (bad input): rank 0 prints "error: msg" and
 * the hint once; all ranks finalize MPI and exit with status 1.  Must be
 * called by every rank of MPI_COMM_WORLD. */
void die_all(const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Is MPI running (initialised, not yet finalised)?  The commands one
 * process answers start it only under a launcher (main.c). */
int mpi_live(void);

/* From now on the exits end the job through MPI_Abort with their status
 * instead of MPI_Finalize: for an HDF5 file left open because closing it
 * would hang or crash (HDF5 1.10: a collective close of a file whose
 * writes failed, the ranks leaving its metadata flush at different points;
 * metrics.h5 after a failed write), which MPI_Finalize would close too.
 * Every rank, or rank 0 alone (metrics.h5): the exits agree
 * (exit_aborts_agree). */
void exit_by_abort(void);
/* Was exit_by_abort called (on this rank)? */
int exit_aborts(void);
/* Every rank learns whether one called exit_by_abort.  Collective (a
 * barrier too). */
void exit_aborts_agree(void);
/* What must not outlive the process where it ends without exit handlers:
 * the exits' MPI_Abort, the hang watchdog's _exit (flight.c) and a guarded
 * mapping's SIGBUS (mapguard.c).  fn must be async-signal-safe (unlink,
 * stores): the run directory's lock (train_start.c).  One at a time;
 * exit_abruptly_run calls it, once. */
void exit_abruptly(void (*fn)(void));
void exit_abruptly_run(void);

/* Finalize MPI (if running) and exit with status on every rank.  Collective. */
void exit_all(int status) __attribute__((noreturn));

/* Checked calls. */
#define MPI_CHECK(call)                                                        \
    do {                                                                       \
        int mpi_rc_ = (call);                                                  \
        if (mpi_rc_ != MPI_SUCCESS) mpi_fail(__FILE__, __LINE__, #call, mpi_rc_); \
    } while (0)
void mpi_fail(const char *file, int line, const char *call, int rc) __attribute__((noreturn));

void *xmalloc_at(const char *file, int line, size_t n);
void *xcalloc_at(const char *file, int line, size_t n, size_t size);
#define xmalloc(n) xmalloc_at(__FILE__, __LINE__, (n))
#define xcalloc(n, s) xcalloc_at(__FILE__, __LINE__, (n), (s))
/* 64-byte aligned, zeroed; from 8 MiB up 2 MiB aligned, on transparent huge pages
 * where the kernel gives them.  alloc_aligned: NULL where memory ran out. */
void *alloc_aligned(size_t n);
void *xalloc_aligned_at(const char *file, int line, size_t n);
#define xalloc_aligned(n) xalloc_aligned_at(__FILE__, __LINE__, (n))

/* Format a message into err[0..errlen) and return -1, for
 * `return errorf(err, errlen, ...)`. */
int errorf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Control characters in a message (a NUL cannot be: the text ends there;
 * C1's, U+0080 to U+009F, as well) and bytes that start no UTF-8 sequence
 * made '?', tab and newline kept: what a damaged file puts into an error
 * message cannot move the terminal's cursor or hide the rest.  Every
 * message builder of the readers applies it (errorf, deck_error_set, ...). */
void text_printable(char *s);

/* Did any rank of comm fail?  Returns 0 if none did; otherwise -1 on every
 * rank, with msg replaced by the message of the lowest failing rank.
 * Collective. */
int mpi_agree_error(MPI_Comm comm, int failed, char *msg, size_t len);

/* Did any rank of comm fail?  If one did, every rank ends as die_all does,
 * with the lowest failing rank's msg and the hint.  Collective. */
void die_all_if(MPI_Comm comm, int failed, const char *msg, const char *hint);

#ifdef __clang_analyzer__
/* For the static analyzer (tools/analyze.sh), which does not look inside a
 * function of another file: errorf is -1, a rank that failed gets -1 from
 * mpi_agree_error and does not come back from die_all_if.  (The functions
 * are defined with their names in parentheses, which these do not expand.) */
#define errorf(...) (errorf(__VA_ARGS__), -1)
#define mpi_agree_error(comm, failed, msg, len) \
    ((failed) ? (mpi_agree_error((comm), 1, (msg), (len)), -1) : mpi_agree_error((comm), 0, (msg), (len)))
#define die_all_if(comm, failed, msg, hint) \
    ((failed) ? die_all((hint), "%s", (msg)) : die_all_if((comm), 0, (msg), (hint)))
#endif

/* Seconds since an arbitrary origin (MPI_Wtime). */
double wtime(void);

#endif
