/* team.c -- work shared by a team of OpenMP threads (team.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* sched_yield */
#endif
#include "team.h"

#include <omp.h>
#include <sched.h>
#include <stdlib.h>

void (*team_hook)(int thread, int block, int own);

/* The calling thread's room for a team's counters, kept for its life. */
static _Thread_local void *tl_room;
static _Thread_local size_t tl_room_bytes;

int team_init(struct team *t, int nb, int nt, long steps)
{
    if (nb < 1 || nt < 1 || steps < 1) return 0;
    size_t ranges = (size_t)steps * (size_t)nt, bytes = ranges * sizeof(uint64_t) + (size_t)nb * sizeof(int);
    if (bytes > tl_room_bytes) {
        void *p = malloc(bytes);
        if (!p) return 0;
        free(tl_room);
        tl_room = p;
        tl_room_bytes = bytes;
    }
    *t = (struct team){nt, nb, tl_room, (_Atomic int *)((_Atomic uint64_t *)tl_room + ranges)};
    for (size_t i = 0; i < ranges; i++) {
        uint64_t r = i % (size_t)nt, front = (uint64_t)nb * r / (uint64_t)nt;
        atomic_init(&t->range[i], ((uint64_t)nb * (r + 1) / (uint64_t)nt) << 32 | front);
    }
    for (int b = 0; b < nb; b++) atomic_init(&t->done[b], 0);
    return 1;
}

/* The spin-th wait of a spinning thread: a hint to the core (x86 PAUSE:
 * its sibling, or the power it saves), and every 1024 the processor given
 * up, for the thread it waits for where there are more threads than cores. */
static inline void cpu_relax(int spin)
{
    if (spin % 1024 == 1023) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else __builtin_ia32_pause();
#endif
}

int team_take(const struct team *t, int thread, int step, int *v)
{
    for (; *v < t->nt; ++*v) {
        _Atomic uint64_t *rg = &t->range[(long)step * t->nt + (thread + *v) % t->nt];
        uint64_t cur = atomic_load_explicit(rg, memory_order_relaxed);
        int b = -1;
        while ((uint32_t)cur < (uint32_t)(cur >> 32)) {
            uint64_t taken = *v == 0 ? cur + 1 : cur - ((uint64_t)1 << 32);
            if (atomic_compare_exchange_weak_explicit(rg, &cur, taken, memory_order_relaxed, memory_order_relaxed)) {
                b = *v == 0 ? (int)(uint32_t)cur : (int)(cur >> 32) - 1;
                break;
            }
        }
        if (b < 0) continue;
        if (team_hook) team_hook(thread, b, *v == 0);
        for (int spin = 0; atomic_load_explicit(&t->done[b], memory_order_acquire) < step; spin++) cpu_relax(spin);
        return b;
    }
    return -1;
}

int team_threads(void) { return omp_get_level() > 0 ? 1 : omp_get_max_threads(); }

void team_for(int nb, void (*fn)(void *ctx, int b), void *ctx)
{
    int nt = team_threads();
    if (nt > nb) nt = nb;
    struct team tm;
    if (nt <= 1) {
        for (int b = 0; b < nb; b++) fn(ctx, b);
        return;
    }
    if (team_init(&tm, nb, nt, 1)) {
#pragma omp parallel num_threads(nt)
        for (int v = 0, t = omp_get_thread_num(), b; (b = team_take(&tm, t, 0, &v)) >= 0;) fn(ctx, b);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(nt) /* (no room for the counters) */
    for (int b = 0; b < nb; b++) fn(ctx, b);
}

int team_blocks_of(size_t n, size_t grain, int per_thread, size_t *per)
{
    size_t nt = (size_t)team_threads(), blocks = nt * (size_t)per_thread;
    size_t grains = (n + grain - 1) / grain;
    *per = (grains + blocks - 1) / blocks * grain;
    if (*per == 0) *per = grain;
    return (int)((n + *per - 1) / *per);
}
