/* slow_thread.h -- team.h's hook for the unit tests: thread 1 of a team
 * slow (a busy wait before each block of its own range), the blocks the
 * others take over from a range not theirs counted. */
#ifndef TRIAD_SLOW_THREAD_H
#define TRIAD_SLOW_THREAD_H

#include <omp.h>
#include <stdatomic.h>

#include "team.h"

static _Atomic int slow_taken_over; /* blocks run by a thread other than their range's owner */
static double slow_wait_s = 0.005;  /* thread 1's wait before each block of its own */

static void slow_thread_1(int thread, int block, int own)
{
    (void)block;
    if (!own) atomic_fetch_add(&slow_taken_over, 1);
    if (thread == 1 && own)
        for (double t0 = omp_get_wtime(); omp_get_wtime() - t0 < slow_wait_s;) {
        }
}

#endif
