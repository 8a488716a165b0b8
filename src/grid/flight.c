/* flight.c -- the hang watchdog and its flight recorder (flight.h). */
#include "flight.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_kind.h"
#include "exit_status.h"
#include "pipeline.h"

struct call {
    double t0, t1;
    int group, op, peer;
    double bytes;
    int nmsg;                                   /* a wait: the messages waited for */
    int msg_peer[FLIGHT_PEERS], msg_tag[FLIGHT_PEERS];
};

/* The main thread writes, the watchdog reads: plain stores of small values,
 * read only when something has stood still for seconds. */
static struct {
    volatile int64_t step;
    volatile double step_t0;      /* when the step began (0: not training) */
    volatile int kind, mb, chunk; /* the pipeline action */
    volatile int in_call;
    struct call now;              /* the call in progress */
    struct call ring[FLIGHT_RING];
    volatile unsigned long done;  /* calls finished */
    char dir[4096];
    int rank, world;
    double timeout;
    pthread_t thread;
    volatile int running;
} fl;


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void flight_step(int64_t step)
{
    fl.step = step;
    fl.step_t0 = now_s();
}

void flight_progress(void)
{
    if (fl.step_t0 > 0) fl.step_t0 = now_s();
}

void flight_action(int kind, int mb, int chunk) { fl.kind = kind, fl.mb = mb, fl.chunk = chunk; }

void flight_begin(int group, int op, int peer, double bytes)
{
    fl.now = (struct call){now_s(), 0, group, op, peer, bytes, 0, {0}, {0}};
    fl.in_call = 1;
}

void flight_message(int peer, int tag, double bytes)
{
    fl.now.bytes += bytes;
    if (fl.now.nmsg == FLIGHT_PEERS) return;
    fl.now.msg_peer[fl.now.nmsg] = peer;
    fl.now.msg_tag[fl.now.nmsg++] = tag;
}

void flight_end(void)
{
    fl.now.t1 = now_s();
    fl.ring[fl.done % FLIGHT_RING] = fl.now;
    fl.done++;
    fl.in_call = 0;
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
static void write_report(const char *why, double t)
{
    char path[4200], tmp[4300], what[256];
    snprintf(path, sizeof path, "%s/hang.rank%05d.txt", fl.dir, fl.rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "rank %d: %s\n", fl.rank, why);
    fprintf(f, "step %lld, pipeline action %s of micro-batch %d, chunk %d\n", (long long)fl.step + 1,
            fl.kind >= 0 ? pp_kind_name((enum pp_kind)fl.kind) : "-", fl.mb, fl.chunk);
    if (fl.in_call) {
        describe_call(what, sizeof what, &fl.now);
        fprintf(f, "blocked in: %s, for %.1f s\n", what, t - fl.now.t0);
    } else {
        fprintf(f, "blocked in: no communication call (computing, or outside triad's calls)\n");
    }
    unsigned long n = fl.done < FLIGHT_RING ? fl.done : FLIGHT_RING;
    fprintf(f, "the last %lu communication calls it finished (oldest first):\n", n);
    for (unsigned long i = fl.done - n; i < fl.done; i++) {
        const struct call *c = &fl.ring[i % FLIGHT_RING];
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

/* The lowest reporting rank prints every rank's report, or that it wrote none. */
static void summarise(void)
{
    for (int r = 0; r < fl.rank; r++)
        if (report_exists(r)) return; /* a lower rank does it */
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
}

static void *watch(void *arg)
{
    (void)arg;
    while (fl.running) {
        struct timespec half = {0, 500000000};
        nanosleep(&half, NULL);
        double t = now_s(), step_t0 = fl.step_t0;
        char why[160] = "";
        if (fl.in_call && t - fl.now.t0 > fl.timeout)
            snprintf(why, sizeof why, "waited %.1f s in one communication call", t - fl.now.t0);
        else if (step_t0 > 0 && t - step_t0 > fl.timeout)
            snprintf(why, sizeof why, "step %lld has not finished in %.1f s", (long long)fl.step + 1, t - step_t0);
        if (!why[0]) continue;
        write_report(why, t);
        fprintf(stderr, "rank %d: hang: %s; report in %s/hang.rank%05d.txt\n", fl.rank, why, fl.dir, fl.rank);
        double grace = fl.timeout < 10 ? fl.timeout : 10; /* the other ranks' reports */
        for (double w = 0; w < grace; w += 0.25) {
            int all = 1;
            for (int r = 0; r < fl.world && all; r++) all = report_exists(r);
            if (all) break;
            struct timespec q = {0, 250000000};
            nanosleep(&q, NULL);
        }
        summarise();
        fflush(stderr);
        _exit(EXIT_HANG);
    }
    return NULL;
}

void flight_start(const char *run_dir, int rank, int world, double timeout)
{
    memset((void *)&fl, 0, sizeof fl);
    fl.kind = -1;
    snprintf(fl.dir, sizeof fl.dir, "%s", run_dir);
    fl.rank = rank, fl.world = world, fl.timeout = timeout;
    if (timeout <= 0) return;
    char path[4200]; /* an earlier run's reports would look like this one's */
    snprintf(path, sizeof path, "%s/hang.rank%05d.txt", run_dir, rank);
    unlink(path);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the signals stay the main thread's */
    fl.running = 1;
    if (pthread_create(&fl.thread, NULL, watch, NULL) != 0) fl.running = 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void flight_stop(void)
{
    if (!fl.running) return;
    fl.running = 0;
    pthread_join(fl.thread, NULL);
}
