/* flight.c -- the hang watchdog and its flight recorder (flight.h). */
#include "flight.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_kind.h"
#include "exit_status.h"
#include "log.h"
#include "pipeline.h"

struct call {
    double t0, t1;
    int group, op, peer;
    double bytes;
    int nmsg;                                   /* a wait: the messages waited for */
    int msg_peer[FLIGHT_PEERS], msg_tag[FLIGHT_PEERS];
};

/* What the watchdog reports of the calls: the one in progress, the last
 * FLIGHT_RING finished. */
struct record {
    int in_call;
    struct call now;
    struct call ring[FLIGHT_RING];
    unsigned long done; /* calls finished */
};

/* The main thread writes, the watchdog thread reads.  The step, its start
 * and the pipeline action are atomics, each read on its own (relaxed; the
 * step's start released after the step).  The record is plain memory under
 * a sequence count (a seqlock): seq is odd while the main thread writes it;
 * the watchdog keeps a copy only if seq was even and unchanged around it,
 * so a copy that overlapped a write is never used.  Nothing the main
 * thread calls while it trains takes a lock or makes a system call (only
 * flight_start and flight_stop do). */
static struct {
    _Atomic int64_t step;
    _Atomic double step_t0;       /* when the step began (0: not training) */
    _Atomic int kind, mb, chunk;  /* the pipeline action */
    _Atomic(const char *) within; /* flight_within's */
    atomic_ulong seq;
    struct record rec;
    char dir[4096];               /* these four: set before the thread starts */
    int rank, world;
    double timeout;
    pthread_t thread;
    atomic_bool running;
    pthread_mutex_t nap_mu;       /* the watchdog's nap, which flight_stop ends */
    pthread_cond_t nap_cv;
    clockid_t nap_clock;          /* nap_cv's clock: monotonic where the system offers it */
} fl = {.nap_mu = PTHREAD_MUTEX_INITIALIZER};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The main thread around its writes of fl.rec. */
static void write_open(void)
{
    atomic_store_explicit(&fl.seq, atomic_load_explicit(&fl.seq, memory_order_relaxed) + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static void write_close(void)
{
    atomic_store_explicit(&fl.seq, atomic_load_explicit(&fl.seq, memory_order_relaxed) + 1, memory_order_release);
}

/* The watchdog's copy of the record; 0 if the main thread was writing it. */
static int record_copy(struct record *r)
{
    unsigned long s = atomic_load_explicit(&fl.seq, memory_order_acquire);
    if (s & 1) return 0;
    memcpy(r, &fl.rec, sizeof *r);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&fl.seq, memory_order_relaxed) == s;
}

void flight_step(int64_t step)
{
    atomic_store_explicit(&fl.step, step, memory_order_relaxed);
    atomic_store_explicit(&fl.step_t0, now_s(), memory_order_release);
}

void flight_progress(void)
{
    if (atomic_load_explicit(&fl.step_t0, memory_order_relaxed) > 0)
        atomic_store_explicit(&fl.step_t0, now_s(), memory_order_relaxed);
}

void flight_action(int kind, int mb, int chunk)
{
    atomic_store_explicit(&fl.kind, kind, memory_order_relaxed);
    atomic_store_explicit(&fl.mb, mb, memory_order_relaxed);
    atomic_store_explicit(&fl.chunk, chunk, memory_order_relaxed);
}

void flight_within(const char *what) { atomic_store_explicit(&fl.within, what, memory_order_relaxed); }

void flight_begin(int group, int op, int peer, double bytes)
{
    write_open();
    fl.rec.now = (struct call){now_s(), 0, group, op, peer, bytes, 0, {0}, {0}};
    fl.rec.in_call = 1;
    write_close();
}

void flight_message(int peer, int tag, double bytes)
{
    struct call *c = &fl.rec.now;
    write_open();
    c->bytes += bytes;
    if (c->nmsg < FLIGHT_PEERS) {
        c->msg_peer[c->nmsg] = peer;
        c->msg_tag[c->nmsg++] = tag;
    }
    write_close();
}

void flight_end(void)
{
    write_open();
    fl.rec.now.t1 = now_s();
    fl.rec.ring[fl.rec.done % FLIGHT_RING] = fl.rec.now;
    fl.rec.done++;
    fl.rec.in_call = 0;
    write_close();
}

static void describe_call(char *buf, size_t n, const struct call *c)
{
    int len = snprintf(buf, n, "%s %s%s", comm_group_name((enum comm_group)c->group), comm_op_name((enum comm_op)c->op),
                       c->op == CO_SEND || c->op == CO_RECV ? " wait" : "");
    if (c->peer >= 0 && len >= 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, " (peer %d)", c->peer);
    for (int i = 0; i < c->nmsg; i++) { /* the ranks are the communicator's */
        size_t at = strlen(buf);
        snprintf(buf + at, n - at, "%s peer %d tag %d", i ? "," : ":", c->msg_peer[i], c->msg_tag[i]);
    }
    if (c->bytes > 0 && len >= 0) {
        size_t at = strlen(buf);
        snprintf(buf + at, n - at, ", %.0f bytes", c->bytes);
    }
}

/* This rank's report: where it stands and the calls before. */
static void write_report(const char *why, double t, const struct record *r)
{
    char path[4200], tmp[4300], what[256];
    const char *within;
    snprintf(path, sizeof path, "%s/hang.rank%05d.txt", fl.dir, fl.rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "rank %d: %s\n", fl.rank, why);
    int kind = atomic_load_explicit(&fl.kind, memory_order_relaxed);
    fprintf(f, "step %lld, pipeline action %s of micro-batch %d, chunk %d\n",
            (long long)atomic_load_explicit(&fl.step, memory_order_relaxed) + 1,
            kind >= 0 ? pp_kind_name((enum pp_kind)kind) : "-", atomic_load_explicit(&fl.mb, memory_order_relaxed),
            atomic_load_explicit(&fl.chunk, memory_order_relaxed));
    if (r->in_call) {
        describe_call(what, sizeof what, &r->now);
        fprintf(f, "blocked in: %s, for %.1f s\n", what, t - r->now.t0);
    } else if ((within = atomic_load_explicit(&fl.within, memory_order_relaxed)) != NULL) {
        fprintf(f, "blocked in: %s\n", within);
    } else {
        fprintf(f, "blocked in: no communication call (computing, or outside triad's calls)\n");
    }
    unsigned long n = r->done < FLIGHT_RING ? r->done : FLIGHT_RING;
    fprintf(f, "the last %lu communication calls it finished (oldest first):\n", n);
    for (unsigned long i = r->done - n; i < r->done; i++) {
        const struct call *c = &r->ring[i % FLIGHT_RING];
        describe_call(what, sizeof what, c);
        fprintf(f, "  %s, %.3f s, ended %.1f s ago\n", what, c->t1 - c->t0, t - c->t1);
    }
    fclose(f);
    rename(tmp, path);
}

static int report_exists(int r)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/hang.rank%05d.txt", fl.dir, r);
    return access(path, F_OK) == 0;
}

/* The file the summarising rank leaves once it has printed the summary. */
static void summary_path(char *path, size_t n) { snprintf(path, n, "%s/hang.summary", fl.dir); }

/* The lowest reporting rank prints every rank's report, or that it wrote
 * none, and returns 1; any other rank returns 0. */
static int summarise(void)
{
    for (int r = 0; r < fl.rank; r++)
        if (report_exists(r)) return 0; /* a lower rank does it */
    fprintf(stderr, "error: the job hung (diag.hang_timeout = %g s); every rank's state:\n", fl.timeout);
    char silent[1024] = "";
    for (int r = 0; r < fl.world; r++) {
        char path[4200], line[512];
        snprintf(path, sizeof path, "%s/hang.rank%05d.txt", fl.dir, r);
        FILE *f = fopen(path, "r");
        if (!f) {
            size_t at = strlen(silent);
            snprintf(silent + at, sizeof silent - at, "%s%d", at ? ", " : "", r);
            fprintf(stderr, "  rank %d: no report: it stopped making progress (frozen or dead)\n", r);
            continue;
        }
        for (int k = 0; k < 3 && fgets(line, sizeof line, f); k++) fprintf(stderr, "  %s", line);
        fclose(f);
    }
    if (silent[0]) fprintf(stderr, "  the rank(s) that stopped making progress: %s\n", silent);
    fprintf(stderr, "  hint: each rank's last communication calls are in %s/hang.rank*.txt; the job ends with "
            "status %d\n", fl.dir, EXIT_HANG);
    return 1;
}

/* The summary printed: said to the other ranks (summary_path), or waited
 * for, at most `grace` seconds.  A rank that exits makes the launcher end
 * the job, and Open MPI first sends SIGCONT to every rank: a frozen rank
 * would then write its report and no longer be counted as the one that
 * stopped, had the summary not been made yet. */
static void summary_done(int mine, double grace)
{
    char path[4200];
    summary_path(path, sizeof path);
    if (mine) {
        FILE *f = fopen(path, "w");
        if (f) fclose(f);
        return;
    }
    for (double w = 0; w < grace && access(path, F_OK) != 0; w += 0.1) {
        struct timespec q = {0, 100000000};
        nanosleep(&q, NULL);
    }
}

/* The watchdog's half a second between looks, cut short by flight_stop
 * (a run would otherwise end up to half a second late, joining it):
 * whether the watch goes on. */
static int nap(void)
{
    struct timespec until;
    clock_gettime(fl.nap_clock, &until);
    until.tv_nsec += 500000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&fl.nap_mu);
    int rc = 0; /* (0 again after a spurious wake-up: the nap goes on) */
    while (atomic_load_explicit(&fl.running, memory_order_relaxed) && rc == 0)
        rc = pthread_cond_timedwait(&fl.nap_cv, &fl.nap_mu, &until);
    pthread_mutex_unlock(&fl.nap_mu);
    if (rc != 0 && rc != ETIMEDOUT) /* (the wait itself failed: the nap is slept, not spun) */
        nanosleep(&(struct timespec){0, 500000000L}, NULL);
    return atomic_load_explicit(&fl.running, memory_order_relaxed);
}

static void *watch(void *arg)
{
    (void)arg;
    static struct record rec; /* (this thread's only) */
    while (nap()) {
        if (!record_copy(&rec)) continue; /* the main thread wrote it meanwhile: it is moving */
        double t = now_s(), step_t0 = atomic_load_explicit(&fl.step_t0, memory_order_acquire);
        int64_t step = atomic_load_explicit(&fl.step, memory_order_relaxed);
        char why[160] = "";
        if (rec.in_call && t - rec.now.t0 > fl.timeout)
            snprintf(why, sizeof why, "waited %.1f s in one communication call", t - rec.now.t0);
        else if (step_t0 > 0 && t - step_t0 > fl.timeout)
            snprintf(why, sizeof why, "step %lld has not finished in %.1f s", (long long)step + 1, t - step_t0);
        if (!why[0]) continue;
        write_report(why, t, &rec);
        exit_abruptly_run(); /* (first: a launcher may kill this rank once another has exited) */
        fprintf(stderr, "rank %d: hang: %s; report in %s/hang.rank%05d.txt\n", fl.rank, why, fl.dir, fl.rank);
        double grace = fl.timeout < 10 ? fl.timeout : 10; /* the other ranks' reports */
        for (double w = 0; w < grace; w += 0.25) {
            int all = 1;
            for (int r = 0; r < fl.world && all; r++) all = report_exists(r);
            if (all) break;
            struct timespec q = {0, 250000000};
            nanosleep(&q, NULL);
        }
        int mine = summarise();
        fflush(stderr);
        summary_done(mine, grace);
        _exit(EXIT_HANG);
    }
    return NULL;
}


void flight_start(const char *run_dir, int rank, int world, double timeout)
{
    flight_stop(); /* (a watchdog still running from an earlier start) */
    atomic_store_explicit(&fl.step, 0, memory_order_relaxed);
    atomic_store_explicit(&fl.step_t0, 0.0, memory_order_relaxed);
    flight_action(-1, 0, 0);
    flight_within(NULL);
    atomic_store_explicit(&fl.seq, 0, memory_order_relaxed);
    memset(&fl.rec, 0, sizeof fl.rec);
    snprintf(fl.dir, sizeof fl.dir, "%s", run_dir);
    fl.rank = rank, fl.world = world, fl.timeout = timeout;
    if (timeout <= 0) return;
    char path[4200]; /* an earlier run's reports would look like this one's */
    snprintf(path, sizeof path, "%s/hang.rank%05d.txt", run_dir, rank);
    unlink(path);
    if (rank == 0) {
        summary_path(path, sizeof path);
        unlink(path);
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the signals stay the main thread's */
    pthread_condattr_t ca;
    int made = 0;
    fl.nap_clock = CLOCK_REALTIME; /* (a condition variable's default) */
    if (pthread_condattr_init(&ca) == 0) {
        if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0) fl.nap_clock = CLOCK_MONOTONIC;
        made = pthread_cond_init(&fl.nap_cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    atomic_store_explicit(&fl.running, made, memory_order_relaxed); /* (no condition variable: no watchdog) */
    if (made && pthread_create(&fl.thread, NULL, watch, NULL) != 0) {
        atomic_store_explicit(&fl.running, 0, memory_order_relaxed);
        pthread_cond_destroy(&fl.nap_cv);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void flight_stop(void)
{
    if (!atomic_load_explicit(&fl.running, memory_order_relaxed)) return;
    pthread_mutex_lock(&fl.nap_mu);
    atomic_store_explicit(&fl.running, 0, memory_order_relaxed);
    pthread_cond_signal(&fl.nap_cv);
    pthread_mutex_unlock(&fl.nap_mu);
    pthread_join(fl.thread, NULL);
    pthread_cond_destroy(&fl.nap_cv);
}
