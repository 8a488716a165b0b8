/* pp_zb.c -- the zero-bubble schedules' orders of computes (Qi, Wan, Huang
 * and Lin, "Zero Bubble Pipeline Parallelism", ICLR 2024; docs/pipeline.md).
 *
 * A backward splits into B, the input gradient, which the stage before
 * waits for, and W, the weight gradient, which nobody waits for: deferring
 * W fills the bubbles that B's early start leaves.  With F = B = W = 1 time
 * unit, the last rank starts pp-1 units late and has 3vm units of work, so
 * no schedule ends before 3vm + pp-1: zb-h1 (m >= pp), zb-h2 and zbv
 * (m >= 2pp-1) end exactly then (test_pipeline). */
#include "pipeline_internal.h"

#include <stdlib.h>

/* A list of computes being written. */
struct order {
    struct pp_action *a;
    int n;
};

static void put(struct order *o, enum pp_kind k, int mb, int chunk)
{
    o->a[o->n++] = (struct pp_action){k, mb, chunk, -1};
}

/* After B number nb, the W's due once more than `defer` are pending. */
static void w_due(struct order *o, int nb, int *nw, int defer, int chunk)
{
    while (nb - *nw > defer) put(o, PP_WGT, (*nw)++, chunk);
}

/* zb-h1: 1F1B's order of F and B (warm-up min(pp-r-1, m) forwards), each
 * B followed by the W of the micro-batch r before it: rank r defers r W's.
 * B then reaches rank 0 as early as in 1F1B with B alone, and the W's fill
 * the time 1F1B waits for a fused backward.  In flight: 1F1B's pp-r
 * activation sets up to B, plus r pending W's: pp on every rank (min(pp, m)),
 * 1F1B's peak on rank 0. */
static void zb_h1(struct order *o, int pp, int m, int r)
{
    int w = r < pp - 1 ? pp - r - 1 : 0, nf = 0, nb = 0, nw = 0;
    if (w > m) w = m;
    while (nf < w) put(o, PP_FWD, nf++, 0);
    while (nb < m) {
        if (nf < m) put(o, PP_FWD, nf++, 0);
        put(o, PP_BWD, nb++, 0);
        w_due(o, nb, &nw, r, 0);
    }
    w_due(o, nb, &nw, 0, 0);
}

/* zb-h2: a warm-up of 2(pp-r)-1 forwards fills the time until the first B
 * comes back (1F1B's bubble before it); then B, the W deferred by 2r, F.
 * In flight: 2pp-1 on every rank.  Fewer than 2pp-1 micro-batches do not
 * fill that warm-up: zb-h1's order (with m >= pp the least makespan there
 * too, tested). */
static void zb_h2(struct order *o, int pp, int m, int r)
{
    if (m < 2 * pp - 1) {
        zb_h1(o, pp, m, r);
        return;
    }
    int nf = 0, nb = 0, nw = 0;
    while (nf < 2 * (pp - r) - 1) put(o, PP_FWD, nf++, 0);
    while (nb < m) {
        put(o, PP_BWD, nb++, 0);
        w_due(o, nb, &nw, 2 * r, 0);
        if (nf < m) put(o, PP_FWD, nf++, 0);
    }
    w_due(o, nb, &nw, 0, 0);
}

/* zbv's order on rank r for n >= 2pp-1 micro-batches (the paper's ZB-V, as
 * PyTorch's ScheduleZBVZeroBubble writes it): forwards of chunk 0 until
 * the V's other arm comes back, then each chunk-1 forward with its B and
 * W, a steady F B W of chunk 0 then chunk 1, and a cool-down that defers
 * the W's of chunk 1 to the end. */
static void zbv_n(struct order *o, int pp, int n, int r)
{
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    for (int i = 0; i < 2 * (pp - r) - 1; i++) put(o, PP_FWD, f0++, 0);
    for (int i = 0; i < r; i++) put(o, PP_FWD, f1++, 1), put(o, PP_FWD, f0++, 0);
    for (int i = 0; i < pp - r; i++, b1++) put(o, PP_FWD, f1++, 1), put(o, PP_BWD, b1, 1), put(o, PP_WGT, b1, 1);
    while (f1 < f0 || f0 < n) {
        if (f0 < n) put(o, PP_FWD, f0++, 0);
        put(o, PP_BWD, b0, 0), put(o, PP_WGT, b0, 0), b0++;
        put(o, PP_FWD, f1++, 1), put(o, PP_BWD, b1, 1), put(o, PP_WGT, b1, 1), b1++;
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < r; i++) put(o, PP_BWD, b0++, 0), put(o, PP_BWD, b1++, 1);
    for (int i = 0; i < pp - r; i++) put(o, PP_BWD, b0++, 0), put(o, PP_WGT, w0++, 0);
    while (w1 < b1) put(o, PP_WGT, w1++, 1);
    while (w0 < b0) put(o, PP_WGT, w0++, 0);
}

/* At the V's turn (rank pp-1) chunk 0 sends its activation to chunk 1 of
 * the same rank, and chunk 1 its gradient to chunk 0: a message from the
 * rank to itself.  Each F of chunk 0 moves to just before the F of chunk 1
 * of its micro-batch, each B of chunk 0 to just after the B of chunk 1, so
 * the message's send and receive share one phase (the critical path runs
 * that way anyway: the makespan stays or shrinks, and the forward moving
 * later keeps the peak at 2pp; tested). */
static void turn_adjacent(struct order *o, const struct pp_action *a, int n)
{
    for (int i = 0; i < n; i++) {
        struct pp_action x = a[i];
        if (x.chunk == 0 && (x.kind == PP_FWD || x.kind == PP_BWD)) continue;
        if (x.kind == PP_FWD) put(o, PP_FWD, x.mb, 0);
        o->a[o->n++] = x;
        if (x.kind == PP_BWD) put(o, PP_BWD, x.mb, 0);
    }
}

/* zbv: the order for max(m, 2pp-1) micro-batches with those past m left
 * out (what PyTorch does with fewer), the turn made adjacent.  -1: out of
 * memory. */
static int zbv(struct order *o, int pp, int m, int r)
{
    int n = m > 2 * pp - 1 ? m : 2 * pp - 1, k = 0;
    struct order all = {malloc(sizeof *all.a * 6 * (size_t)n), 0};
    if (!all.a) return -1;
    zbv_n(&all, pp, n, r);
    for (int i = 0; i < all.n; i++)
        if (all.a[i].mb < m) all.a[k++] = all.a[i];
    if (r == pp - 1) turn_adjacent(o, all.a, k);
    else
        for (int i = 0; i < k; i++) o->a[o->n++] = all.a[i];
    free(all.a);
    return 0;
}

int pp_zb_order(enum pp_schedule s, int pp, int m, int rank, struct pp_action *out)
{
    struct order o = {out, 0};
    if (s == PP_ZBH1) zb_h1(&o, pp, m, rank);
    else if (s == PP_ZBH2) zb_h2(&o, pp, m, rank);
    else if (s == PP_ZBV && zbv(&o, pp, m, rank)) return -1;
    return o.n;
}
