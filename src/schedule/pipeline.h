/* pipeline.h -- pipeline schedules as data, the simulator that proves them,
 * and the time x rank picture (pure code, no MPI; docs/pipeline.md).
 *
 * Terms.  pp ranks (stages) r = 0 .. pp-1, v model chunks per rank, m
 * micro-batches per step and DP replica.  The layers are cut into S = pp*v pieces; chunk c
 * of rank r holds virtual stage s = c*pp + r, so activations flow
 * r -> r+1 and from rank pp-1 back to rank 0 one chunk up (Megatron's
 * interleaved layout; v = 1 is the plain pipeline).  zbv alone places its
 * two chunks in a V: chunk 0 of rank r is stage r, chunk 1 is stage
 * 2pp-1-r (rank 0 holds the first and the last stage; at rank pp-1 the
 * activations turn from chunk 0 to chunk 1 of the same rank, a message
 * from the rank to itself).  pp_virtual_stage and pp_stage_place say
 * where each stage is.
 *
 * Zero-bubble schedules (zb-h1, zb-h2, zbv; Qi et al., ICLR 2024) split a
 * backward into B, the input gradient, which the stage before waits for,
 * and W, the weight gradient, which nothing waits for and which fills the
 * bubbles.  In a list, a BWD followed later by the WGT of the same (mb,
 * chunk) is B alone; a BWD without WGT is the fused backward.
 *
 * A schedule is, for each rank, an ordered list of actions.  Compute actions
 * (FWD, BWD, WGT) are separated by "phases": the run of communication actions
 * between two computes.  The executor contract (proved by pp_simulate under
 * both send models below):
 *   1. post the MPI_Irecv of every RECV in a phase, in list order, no later
 *      than entering the phase (earlier is allowed: look-ahead only helps);
 *   2. issue the MPI_Isend of every SEND in the phase, in list order;
 *   3. wait for the phase's receives before the next compute;  its sends may
 *      be waited at the end of the phase or any time later (before the send
 *      buffer is reused, at the latest at the end of the step).
 * Within a phase the waits may come in any order (one MPI_Waitall is fine).
 * The generated lists are deadlock-free with buffered sends and with
 * rendezvous sends (a send completes only once its receive is posted); they
 * are NOT with one blocking MPI_Ssend/MPI_Recv at a time in list order
 * (PP_SEND_BLOCKING shows the deadlock).  Matching is FIFO per (sender,
 * receiver, direction): tag = PP_TAG_ACT or PP_TAG_GRAD is enough; the
 * simulator checks that the k-th send on each channel carries the
 * micro-batch and chunk the k-th receive expects. */
#ifndef TRIAD_PIPELINE_H
#define TRIAD_PIPELINE_H

#include <stddef.h>
#include <stdio.h>

#include "pp_action.h"

enum pp_schedule {
    PP_SCHED_NONE = -1,
    PP_GPIPE = 0,
    PP_1F1B,
    PP_INTERLEAVED,
    PP_FILE, /* pp_file.h */
    PP_ZBH1, /* zero bubble, 1F1B's memory: 1F1B's order of F and B, W deferred (docs/pipeline.md) */
    PP_ZBH2, /* zero bubble with 2pp-1 activation sets: a deeper warm-up, W deferred further */
    PP_ZBV   /* zero bubble on two chunks a rank in a V (pp_virtual_stage) */
};

/* Where the chunks sit: the loop (s = chunk*pp + rank) of every schedule
 * but zbv, or zbv's V. */
enum pp_layout { PP_LAYOUT_LOOP = 0, PP_LAYOUT_V };

enum pp_send_model {
    PP_SEND_BUFFERED,   /* a send completes when issued (eager/buffered MPI, or sends waited at step end) */
    PP_SEND_RENDEZVOUS, /* a send completes only once its receive is posted; each phase waits for its sends */
    PP_SEND_BLOCKING    /* what the contract forbids, for contrast: one action at a time, MPI_Ssend and
                         * MPI_Recv in list order; deadlocks (the classic failure of fixed blocking orders) */
};

struct pp_sim_opts {
    int t_fwd, t_bwd;        /* integer time of one chunk's forward and backward (> 0); a split backward
                              * (B, the input gradient) takes t_bwd */
    enum pp_send_model send; /* communication itself takes no time */
    int lookahead;           /* entering a phase also posts the receives of the next `lookahead` phases */
    enum pp_layout layout;   /* where each chunk sits (PP_LAYOUT_V for zbv's lists; pp_schedule_layout) */
    int t_wgt;               /* time of one chunk's weight gradient W (>= 1 when a list holds W); a fused
                              * backward takes t_bwd + t_wgt (0, as the positional {t_fwd, t_bwd, send,
                              * lookahead} leaves it: the fused backward takes t_bwd) */
    const int *rank_t;       /* NULL, or [pp][3]: rank r's own forward, B and W times (>= 1), in place of
                              * t_fwd, t_bwd and t_wgt (stages that differ: the head, the embedding) */
};

/* One compute action placed in time, for the picture. */
struct pp_slot {
    enum pp_kind kind; /* PP_FWD, PP_BWD or PP_WGT */
    int split;         /* PP_BWD: 1 for B alone (its W comes later), 0 for the fused backward */
    int mb, chunk;
    long start, end;
};

struct pp_sim {
    int pp, v, m;
    enum pp_schedule sched; /* PP_SCHED_NONE when the lists were not built by pp_schedule_build */
    struct pp_sim_opts opts;
    long makespan;    /* time at which the last rank finishes */
    long *busy;       /* [pp] compute time of each rank (its idle time: pp_idle) */
    int *peak;        /* [pp] most (mb, chunk) pairs holding activations at once: from the forward to the
                       * fused backward, or to the W (the activations are kept until the weight gradient) */
    int *wpeak;       /* [pp] most (mb, chunk) pairs with B done and W pending at once */
    int *nslot;       /* [pp] compute actions of each rank */
    struct pp_slot **slot; /* [pp][nslot[r]] in list order */
};

/* A schedule's name ("1f1b", "zb-h1"), an action kind's ("FWD"); "?" for none. */
const char *pp_schedule_name(enum pp_schedule s);
const char *pp_kind_name(enum pp_kind k);

/* The layout of schedule s: PP_LAYOUT_V for zbv, else PP_LAYOUT_LOOP. */
enum pp_layout pp_schedule_layout(enum pp_schedule s);

/* The virtual stage of `chunk` on `rank` (0 .. 2pp-1 for zbv, 0 .. v*pp-1
 * otherwise): chunk*pp + rank, or for zbv rank (chunk 0) and 2pp-1-rank
 * (chunk 1).  pp_stage_place is its inverse. */
int pp_virtual_stage(enum pp_schedule s, int pp, int rank, int chunk);
void pp_stage_place(enum pp_schedule s, int pp, int stage, int *rank, int *chunk);

/* The most computes of each kind (forwards: virtual_stages * micro-batches)
 * a rank's list holds: a step of more micro-batches is refused, as its lists
 * (several actions a compute, int counts) would outgrow memory and int. */
#define PP_MAX_COMPUTES (1 << 20)

/* 0 if schedule s can run pp ranks, v chunks and m micro-batches; else -1
 * with the reason and the fix in err.  file: parallel.schedule_file, read
 * for s = PP_FILE (NULL otherwise): checked line by line (pp_file.h).
 * The lists of a file and of the zero-bubble schedules are then proved by
 * the simulator as the executor runs them (rendezvous sends, look-ahead
 * 1); gpipe, 1f1b and interleaved are proved by test_pipeline. */
int pp_schedule_check(enum pp_schedule s, const char *file, int pp, int v, int m, char *err, size_t errlen);

/* Rank `rank`'s action list: *out (malloc'ed, caller frees) of *n actions.
 * Returns 0, or -1 with err filled (same reasons as pp_schedule_check). */
int pp_schedule_build(enum pp_schedule s, const char *file, int pp, int v, int m, int rank, struct pp_action **out,
                      int *n, char *err, size_t errlen);

/* Predicted peak of in-flight (mb, chunk) pairs on `rank` (the number of
 * activation sets it must hold, each from its forward to its fused
 * backward or its W): gpipe m; 1f1b min(pp-rank, m); interleaved
 * min(2(pp-rank-1) + (v-1)pp + 1, v*m); a file's and the zero-bubble
 * schedules' counted along the list, which test_pipeline proves to be
 *   zb-h1  min(pp, m) on every rank (1F1B's rank 0; up to B: 1F1B's pp-rank)
 *   zb-h2  2pp-1 for m >= 2pp-1 (fewer micro-batches: zb-h1's lists, peak)
 *   zbv    min(2pp, 2m, m+rank+1) pairs of half a stage: at most pp stages'
 *          worth (1F1B's rank 0), 2pp on every rank for m >= 2pp-1. */
int pp_peak_bound(enum pp_schedule s, const char *file, int pp, int v, int m, int rank);

/* The most (mb, chunk) pairs on `rank` with B done and W pending at once
 * (0 for a schedule without W; a file's and the zero-bubble schedules'
 * counted along the list, which test_pipeline proves to be zb-h1's
 * min(rank+1, m), zb-h2's and zbv's 2 rank + 1 for m >= 2pp-1). */
int pp_wpeak_bound(enum pp_schedule s, const char *file, int pp, int v, int m, int rank);

/* Along rank `rank`'s built list a of n actions: the most (mb, chunk) pairs
 * holding activations at once (forward +1, fused backward -1, split
 * backward 0, W -1), the most W's pending at once, and the activation
 * receive buffers pp_recv_bound counts (each -1: out of memory). */
int pp_list_peak(const struct pp_action *a, int n);
int pp_list_wpeak(const struct pp_action *a, int n);
int pp_list_recv_bound(const struct pp_action *a, int n);

/* phase_end[i] for a list of n actions: one past the run of communication
 * actions starting at i (i itself for a compute).  The executor's phases
 * are these runs. */
void pp_phase_ends(const struct pp_action *a, int n, int *phase_end);

/* The most activation receives `rank` has posted at once (the executor
 * posts a phase's receives and the next phase's: the buffers they land in),
 * for the schedule and for its forwards alone (evaluation), whichever is
 * more. */
int pp_recv_bound(enum pp_schedule s, const char *file, int pp, int v, int m, int rank);

/* The forwards of a list alone (evaluation: no backward, no W), in place;
 * returns their count. */
int pp_forward_only(struct pp_action *a, int n);

/* Run the pp lists against each other under opts (opts->layout: where the
 * chunks sit).  Proves, or returns -1 with the first violation in err:
 * every action well formed (kind, mb, chunk, the peer that holds the stage
 * before or after); messages match FIFO per channel (sender, receiver,
 * direction) with the right (mb, chunk); each (mb, chunk) forwarded and
 * backwarded exactly once, backward after forward, after its inputs
 * arrived, every required send and receive present exactly once; each W
 * at most once and after its own B; each chunk's weight gradients (a fused
 * backward, or a W) in micro-batch order, as the gradients must add up to
 * be the same bits as pp = 1's; no deadlock under opts->send.  Lists
 * without a backward are an evaluation (pp_forward_only): each (mb, chunk)
 * forwarded once with its messages.  On success fills *out (free with
 * pp_sim_free); out->sched is PP_SCHED_NONE. */
int pp_simulate(int pp, int v, int m, struct pp_action *const *lists, const int *n, const struct pp_sim_opts *opts,
                struct pp_sim *out, char *err, size_t errlen);

/* Build every rank's list for schedule s and simulate them. */
int pp_simulate_schedule(enum pp_schedule s, const char *file, int pp, int v, int m, const struct pp_sim_opts *opts,
                         struct pp_sim *out, char *err, size_t errlen);

void pp_sim_free(struct pp_sim *sim);

/* Rank r's idle time: makespan - busy[r]. */
long pp_idle(const struct pp_sim *sim, int r);

/* Bubble fraction measured: total idle / (pp * makespan); its exact
 * rational form in *num / *den when non-NULL. */
double pp_bubble(const struct pp_sim *sim, long *num, long *den);

/* The analytic bubble fraction (p-1) / (v*m + p-1) (v = 1 for gpipe, 1f1b). */
double pp_bubble_formula(int pp, int v, int m, long *num, long *den);

/* The bubble a run of schedule s expects, as `triad schedule` draws it:
 * (p-1)/(v*m+p-1) for gpipe, 1f1b and interleaved; for a file and the
 * zero-bubble schedules the simulated one (F = B = W = 1 time unit, a
 * fused backward 2; rendezvous sends).  *formula: 1 for the first (NULL
 * allowed).  0 (and *num = 0) when the lists do not build. */
double pp_bubble_predicted(enum pp_schedule s, const char *file, int pp, int v, int m, long *num, long *den,
                           int *formula);

/* The zero-bubble schedules' (p-1) / (3 v m + p-1) (v = 2 for zbv): with
 * F, B and W of equal time the last rank starts pp-1 units late and has
 * 3vm units of work, so no schedule has less.  0 with it in *num / *den
 * where schedule s reaches it exactly (t_fwd = t_bwd = t_wgt; zb-h1 and
 * zb-h2 with m >= pp, zbv with m >= 2pp-1: test_pipeline), else -1. */
int pp_zb_bubble_formula(enum pp_schedule s, int pp, int m, const struct pp_sim_opts *o, long *num, long *den);

/* The picture: one row per rank, one column per time unit (F3 = forward of
 * micro-batch 3, B3 its backward, W3 its weight gradient, F3c1 with the
 * chunk when v > 1, '.' idle), wrapped every `width` characters (<= 0:
 * 100), then the bubble fraction measured and (gpipe, 1f1b, interleaved;
 * the zero-bubble schedules where the paper's is exact) by formula, the
 * peak in flight per rank and, for lists with W, the peak of pending W's. */
void pp_print_table(FILE *f, const struct pp_sim *sim, int width);

#endif
