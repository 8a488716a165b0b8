/* team.h -- work shared by a team of OpenMP threads whose cores may not all
 * be as fast (a neighbour on one of them, cores of two kinds).
 *
 * The work is cut into nb blocks, and each of the team's nt threads owns an
 * equal range of them, as a static split would give it.  A thread runs the
 * front of its own range, then takes the back of the others' ranges: a
 * quiet team normally runs exactly the static split (each block's data
 * stays in its thread's caches), and a thread slowed down hands its last
 * blocks to the others instead of holding them all up at the end.  Work in
 * steps (a product's K blocks) runs every block once per step; a block's
 * step waits only for the same block's previous one (no barrier), so a
 * block's steps run in order whichever threads run them.  Which thread runs
 * a block never changes what it computes: the caller's results are the same
 * bits.
 *
 *     struct team tm;
 *     if (team_init(&tm, nb, nt, steps)) {
 *     #pragma omp parallel num_threads(nt)
 *         for (int step = 0; step < steps; step++)
 *             for (int v = 0, b; (b = team_take(&tm, omp_get_thread_num(), step, &v)) >= 0;)
 *                 run block b's step, then team_done(&tm, b, step);
 *     } else: a static split
 *
 * team_done is needed only where steps follow one another (steps > 1). */
#ifndef TRIAD_TEAM_H
#define TRIAD_TEAM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct team {
    int nt, nb;              /* ranges (the threads asked for: a smaller team takes over the rest), blocks */
    _Atomic uint64_t *range; /* [step * nt + r]: range r's blocks left at a step, [front, end): end << 32 | front */
    _Atomic int *done;       /* [nb]: the steps each block has finished */
};

/* A team of nt threads (the region's num_threads) over nb blocks and
 * `steps` steps, its counters set in the calling thread's room (kept for
 * the thread's life; one team at a time per calling thread); 0 where there
 * is no room for them (split statically instead). */
int team_init(struct team *t, int nb, int nt, long steps);

/* Thread `thread`'s next block at a step, once the block's previous step
 * is done: the front of its own range, then (*v, 0 at the step's start:
 * the ranges visited) the back of the others' (the blocks their owners
 * reach last, which a thief taking them at every step ran the step before
 * itself); -1 when every range is given out. */
int team_take(const struct team *t, int thread, int step, int *v);

/* Block b has finished step `step` (what it wrote visible to the thread
 * that runs its next step). */
static inline void team_done(const struct team *t, int b, int step)
{
    atomic_store_explicit(&t->done[b], step + 1, memory_order_release);
}

/* Blocks [0, nb) of an operation each of whose blocks computes the same
 * whichever thread runs it (an element-wise or row-wise kernel's share):
 * fn(ctx, b) for each, by a team of team_threads() (without room for the
 * counters: a static split), or with one thread or block in order on the
 * calling thread, with no OpenMP construct.  team_blocks_of cuts n items
 * into such blocks of whole grains, per_thread to a thread (its block size
 * in *per).  team_threads: the OpenMP threads outside every parallel
 * region, 1 inside any, even a region of one thread (whose team's counters
 * a team inside it would overwrite: the calling thread's room is one). */
void team_for(int nb, void (*fn)(void *ctx, int b), void *ctx);
int team_blocks_of(size_t n, size_t grain, int per_thread, size_t *per);
int team_threads(void);

/* Tests only (NULL in a run): called as team_take gives out a block, with
 * the thread, the block, and whether the block is of the thread's own
 * range (0: taken over from another). */
extern void (*team_hook)(int thread, int block, int own);

#endif
