/* test_flight.c -- the hang watchdog's thread (flight.c) ends when
 * flight_stop asks, not when its half-second nap between looks runs out:
 * a run's end joins it, and every run ended up to half a second late. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "flight.h"
#include "tap.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    char dir[4096];
    tap_tmp_template(dir, sizeof dir, "test_flight");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    enum { TRIES = 5 };
    double stop[TRIES];
    for (int i = 0; i < TRIES; i++) {
        flight_start(dir, 0, 1, 600.0); /* the watchdog starts with a nap of 0.5 s */
        nanosleep(&(struct timespec){0, 20000000}, NULL);
        double t0 = now_s();
        flight_stop();
        stop[i] = now_s() - t0;
    }
    qsort(stop, TRIES, sizeof stop[0], by_value);
    /* (the median: one slow wake-up on a loaded machine is not the nap) */
    tap_ok(stop[TRIES / 2] < 0.25, "flight_stop wakes the watchdog from its nap: median %.4f s over %d stops (its "
           "nap: 0.5 s)", stop[TRIES / 2], TRIES);
    flight_stop(); /* (stopped already: nothing to do) */
    tap_ok(1, "flight_stop on a stopped watchdog returns");
    rmdir(dir);
    return tap_done();
}
