/* pipeline.c -- pipeline schedules as data: each rank's list of actions,
 * where the stages sit, what the lists hold (pure code, no MPI; the
 * contract is in pipeline.h and docs/pipeline.md; pp_zb.c: the zero-bubble
 * orders; pp_sim.c: the simulator and the picture). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_internal.h"
#include "pp_file.h"

/* The schedules' names in messages: the words of parallel.schedule
 * (config/params.def, where '-' is written '_'; test_deck checks that they
 * agree). */
static const char *const sched_names[] = {"gpipe", "1f1b", "interleaved", "file", "zb-h1", "zb-h2", "zbv"};
static const char *const kind_names[] = {"RECV_ACT", "FWD", "SEND_ACT", "RECV_GRAD", "BWD", "SEND_GRAD", "WGT"};

int(pp_fail)(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#define COUNT(a) ((int)(sizeof(a) / sizeof(a)[0]))
_Static_assert(COUNT(sched_names) == PP_ZBV + 1, "a name for each enum pp_schedule");
_Static_assert(COUNT(kind_names) == PP_WGT + 1, "a name for each enum pp_kind");

static int known_schedule(enum pp_schedule s) { return s >= 0 && s < COUNT(sched_names); }

const char *pp_schedule_name(enum pp_schedule s) { return known_schedule(s) ? sched_names[s] : "?"; }

const char *pp_kind_name(enum pp_kind k) { return k >= 0 && k < COUNT(kind_names) ? kind_names[k] : "?"; }

static int is_zb(enum pp_schedule s) { return s == PP_ZBH1 || s == PP_ZBH2 || s == PP_ZBV; }

/* ------------------------------------------------------------ layout */

enum pp_layout pp_schedule_layout(enum pp_schedule s) { return s == PP_ZBV ? PP_LAYOUT_V : PP_LAYOUT_LOOP; }

/* The V (v = 2): chunk 0 of rank r is stage r, chunk 1 stage 2pp-1-r, so
 * rank 0 holds the first and the last stage (ZB-V; the embedding and the
 * head share a rank) and every rank the same share of the layers. */
int pp_stage_of(enum pp_layout layout, int pp, int rank, int chunk)
{
    if (layout == PP_LAYOUT_V) return chunk ? 2 * pp - 1 - rank : rank;
    return chunk * pp + rank;
}

void pp_place_of(enum pp_layout layout, int pp, int stage, int *rank, int *chunk)
{
    if (layout == PP_LAYOUT_V) {
        *chunk = stage >= pp;
        *rank = *chunk ? 2 * pp - 1 - stage : stage;
    } else {
        *chunk = stage / pp;
        *rank = stage % pp;
    }
}

int pp_virtual_stage(enum pp_schedule s, int pp, int rank, int chunk)
{
    return pp_stage_of(pp_schedule_layout(s), pp, rank, chunk);
}

void pp_stage_place(enum pp_schedule s, int pp, int stage, int *rank, int *chunk)
{
    pp_place_of(pp_schedule_layout(s), pp, stage, rank, chunk);
}

/* ------------------------------------------------------------ generation */

/* What pp_schedule_check says before the lists exist. */
static int check_shape(enum pp_schedule s, const char *file, int pp, int v, int m, char *err, size_t errlen)
{
    if (!known_schedule(s)) return pp_fail(err, errlen, "no pipeline schedule %d", (int)s);
    if (pp < 1 || v < 1 || m < 1)
        return pp_fail(err, errlen, "pp = %d, virtual_stages = %d and micro-batches = %d must all be at least 1", pp, v,
                    m);
    if ((int64_t)v * m > PP_MAX_COMPUTES)
        return pp_fail(err, errlen, "virtual_stages * micro-batches per replica = %d * %d = %" PRId64 " forwards on "
                       "each rank, more than the %d a step's schedule holds; use fewer, larger micro-batches", v, m,
                       (int64_t)v * m, PP_MAX_COMPUTES);
    if (s == PP_FILE && (!file || !file[0]))
        return pp_fail(err, errlen, "schedule = 'file' needs parallel.schedule_file, the file of each rank's computes");
    if (s == PP_ZBV && v != 2)
        return pp_fail(err, errlen,
                       "schedule = 'zbv' runs two chunks on each rank, in a V: it needs virtual_stages = 2, not %d",
                       v);
    if (s == PP_ZBV && pp < 2)
        return pp_fail(err, errlen, "schedule = 'zbv' needs pp >= 2 (its V folds 2pp stages onto the ranks); on "
                                    "one rank use schedule = '1f1b'");
    if (v > 1 && s != PP_INTERLEAVED && s != PP_FILE && s != PP_ZBV)
        return pp_fail(err, errlen,
                       "virtual_stages = %d needs schedule = 'interleaved' (or 'zbv' for 2, or 'file'), not '%s'", v,
                       pp_schedule_name(s));
    if (v > 1 && pp < 2)
        return pp_fail(err, errlen, "virtual_stages = %d needs pp >= 2 (there is nothing to interleave on one stage)",
                    v);
    if (v > 1 && s != PP_ZBV && m % pp) {
        char use[64];
        int lo = m / pp * pp;
        snprintf(use, sizeof use, lo ? "%d or %d" : "%d", lo ? lo : pp, lo + pp);
        return pp_fail(err, errlen,
                    "the interleaved schedule needs the micro-batches per replica (%d) to be a multiple of pp = %d "
                    "(micro-batches go round the ranks in groups of pp, as in Megatron); use %s "
                    "(batch_size = dp * micro_batch_size * that), or schedule = '1f1b'",
                    m, pp, use);
    }
    return 0;
}

/* Every rank's list, in l[r] (n[r] actions); free with free_all. */
static int build_all(enum pp_schedule s, const char *file, int pp, int v, int m, struct pp_action ***l, int **n,
                     char *err, size_t errlen)
{
    *l = calloc((size_t)pp, sizeof **l);
    *n = calloc((size_t)pp, sizeof **n);
    int rc = *l && *n ? 0 : pp_fail(err, errlen, "out of memory");
    for (int r = 0; rc == 0 && r < pp; r++) rc = pp_schedule_build(s, file, pp, v, m, r, &(*l)[r], &(*n)[r], err, errlen);
    return rc;
}

static void free_all(int pp, struct pp_action **l, int *n)
{
    for (int r = 0; l && r < pp; r++) free(l[r]);
    free(l), free(n);
}

int pp_schedule_check(enum pp_schedule s, const char *file, int pp, int v, int m, char *err, size_t errlen)
{
    if (check_shape(s, file, pp, v, m, err, errlen)) return -1;
    if (s != PP_FILE && !is_zb(s)) return 0; /* (gpipe, 1f1b, interleaved are proved by test_pipeline) */
    /* a schedule from a file, and the zero-bubble ones, are proved here,
     * before launch, as the executor runs them (pipeline_exec.c):
     * rendezvous sends, each phase waiting for its own, and the next
     * phase's receives posted on entering one */
    struct pp_action **l;
    int *n, rc = build_all(s, file, pp, v, m, &l, &n, err, errlen);
    struct pp_sim sim;
    struct pp_sim_opts o = {.t_fwd = 1, .t_bwd = 1, .send = PP_SEND_RENDEZVOUS, .lookahead = 1,
                            .layout = pp_schedule_layout(s), .t_wgt = 1};
    char why[1024];
    if (rc == 0 && pp_simulate(pp, v, m, l, n, &o, &sim, why, sizeof why) != 0)
        rc = s == PP_FILE ? pp_fail(err, errlen, "%s: the simulator refuses it: %s", file, why)
                          : pp_fail(err, errlen, "schedule = '%s' on pp = %d with %d micro-batches: the simulator "
                                                 "refuses its lists (a bug in pp_zb.c: please report it; use "
                                                 "schedule = '1f1b' meanwhile): %s",
                                    pp_schedule_name(s), pp, m, why);
    else if (rc == 0) pp_sim_free(&sim);
    free_all(pp, l, n);
    return rc;
}

static int imin(int a, int b) { return a < b ? a : b; }

/* Forwards in flight before the first backward (the warm-up). */
static int warmup(enum pp_schedule s, int pp, int v, int m, int rank)
{
    if (s == PP_GPIPE) return m;
    if (s == PP_INTERLEAVED && v > 1) return imin(2 * (pp - rank - 1) + (v - 1) * pp, v * m);
    return imin(pp - rank - 1, m);
}

/* Along list a: the most activation sets held at once (forward +1, fused
 * backward -1, W -1: they are kept until the weight gradient) and the most
 * W's pending (split backward +1, W -1).  -1: out of memory. */
static int list_peaks(const struct pp_action *a, int n, int *peak, int *wpeak)
{
    unsigned char *split = malloc((size_t)(n ? n : 1));
    if (!split) return -1;
    pp_split_marks(a, n, split);
    int live = 0, pend = 0;
    *peak = *wpeak = 0;
    for (int i = 0; i < n; i++) {
        if (a[i].kind == PP_FWD) live++;
        else if (a[i].kind == PP_BWD && split[i]) pend++;
        else if (a[i].kind == PP_BWD) live--;
        else if (a[i].kind == PP_WGT) live--, pend--;
        if (live > *peak) *peak = live;
        if (pend > *wpeak) *wpeak = pend;
    }
    free(split);
    return 0;
}

int pp_list_peak(const struct pp_action *a, int n)
{
    int peak, wpeak;
    return list_peaks(a, n, &peak, &wpeak) ? -1 : peak;
}

int pp_list_wpeak(const struct pp_action *a, int n)
{
    int peak, wpeak;
    return list_peaks(a, n, &peak, &wpeak) ? -1 : wpeak;
}

/* Both peaks counted along rank `rank`'s list (0 when it does not build). */
static void built_peaks(enum pp_schedule s, const char *file, int pp, int v, int m, int rank, int *peak, int *wpeak)
{
    struct pp_action *a;
    int n;
    char err[512];
    *peak = *wpeak = 0;
    if (pp_schedule_build(s, file, pp, v, m, rank, &a, &n, err, sizeof err) != 0) return;
    if (list_peaks(a, n, peak, wpeak)) *peak = *wpeak = 0;
    free(a);
}

int pp_peak_bound(enum pp_schedule s, const char *file, int pp, int v, int m, int rank)
{
    int peak, wpeak;
    if (s == PP_FILE || is_zb(s)) {
        built_peaks(s, file, pp, v, m, rank, &peak, &wpeak);
        return peak;
    }
    return s == PP_GPIPE ? m : imin(warmup(s, pp, v, m, rank) + 1, v * m);
}

int pp_wpeak_bound(enum pp_schedule s, const char *file, int pp, int v, int m, int rank)
{
    int peak, wpeak;
    if (s != PP_FILE && !is_zb(s)) return 0;
    built_peaks(s, file, pp, v, m, rank, &peak, &wpeak);
    return wpeak;
}

void pp_phase_ends(const struct pp_action *a, int n, int *phase_end)
{
    for (int i = n - 1; i >= 0; i--)
        phase_end[i] = pp_is_compute(a[i].kind) ? i : i + 1 < n && phase_end[i + 1] > i + 1 ? phase_end[i + 1] : i + 1;
}

int pp_forward_only(struct pp_action *a, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (a[i].kind == PP_RECV_ACT || a[i].kind == PP_FWD || a[i].kind == PP_SEND_ACT) a[k++] = a[i];
    return k;
}

static int recv_acts(const struct pp_action *a, int from, int to)
{
    int k = 0;
    for (int i = from; i < to; i++) k += a[i].kind == PP_RECV_ACT;
    return k;
}

/* One past the run of communication actions from i. */
static int run_end(const struct pp_action *a, int n, int i)
{
    while (i < n && !pp_is_compute(a[i].kind)) i++;
    return i;
}

/* The most activation receives posted at once over list a: at each phase,
 * its own and the next phase's. */
static int posted_bound(const struct pp_action *a, int n)
{
    int most = 0;
    for (int i = 0; i < n;) {
        if (pp_is_compute(a[i].kind)) {
            i++;
            continue;
        }
        int end = run_end(a, n, i), nxt = end;
        while (nxt < n && pp_is_compute(a[nxt].kind)) nxt++;
        int k = recv_acts(a, i, end) + recv_acts(a, nxt, run_end(a, n, nxt));
        if (k > most) most = k;
        i = end;
    }
    return most;
}

int pp_list_recv_bound(const struct pp_action *a, int n)
{
    struct pp_action *fwd = malloc(sizeof *fwd * (size_t)(n ? n : 1));
    if (!fwd) return -1;
    memcpy(fwd, a, sizeof *fwd * (size_t)n);
    int full = posted_bound(a, n), f = posted_bound(fwd, pp_forward_only(fwd, n));
    free(fwd);
    return full > f ? full : f;
}

int pp_recv_bound(enum pp_schedule s, const char *file, int pp, int v, int m, int rank)
{
    struct pp_action *a;
    int n;
    char err[512];
    if (pp < 2 || pp_schedule_build(s, file, pp, v, m, rank, &a, &n, err, sizeof err) != 0) return 0;
    int bound = pp_list_recv_bound(a, n);
    free(a);
    return bound;
}

/* The k-th forward (bwd = 0) or backward (bwd = 1) of a rank.  v = 1: micro-
 * batch k.  Interleaved: micro-batches in groups of pp, each group through
 * every chunk (forward chunk 0 first, backward the last chunk first). */
static struct pp_action kth(int pp, int v, int k, int bwd)
{
    struct pp_action a = {bwd ? PP_BWD : PP_FWD, k, 0, -1};
    if (v > 1) {
        int g = k % (pp * v);
        a.chunk = bwd ? v - 1 - g / pp : g / pp;
        a.mb = k / (pp * v) * pp + k % pp;
    }
    return a;
}

/* Where the lists are written: the layout, pp, v and the rank. */
struct place {
    enum pp_layout layout;
    int pp, v, rank;
};

/* The rank that holds virtual stage s. */
static int rank_of(const struct place *P, int s)
{
    int r, c;
    pp_place_of(P->layout, P->pp, s, &r, &c);
    return r;
}

/* Put the computes a[0..k) on the list as one group: the receives they need,
 * the computes back to back, then the sends they make.  A phase (the actions
 * between two computes) thus holds the sends of one group, then the receives
 * of the next.  A W needs and sends nothing. */
static int emit(struct pp_action *o, int n, const struct pp_action *a, int k, const struct place *P)
{
    int last = P->pp * P->v - 1;
    for (int i = 0; i < k; i++) {
        int s = pp_stage_of(P->layout, P->pp, P->rank, a[i].chunk);
        if (a[i].kind == PP_FWD && s > 0)
            o[n++] = (struct pp_action){PP_RECV_ACT, a[i].mb, a[i].chunk, rank_of(P, s - 1)};
        if (a[i].kind == PP_BWD && s < last)
            o[n++] = (struct pp_action){PP_RECV_GRAD, a[i].mb, a[i].chunk, rank_of(P, s + 1)};
    }
    for (int i = 0; i < k; i++) o[n++] = a[i];
    for (int i = 0; i < k; i++) {
        int s = pp_stage_of(P->layout, P->pp, P->rank, a[i].chunk);
        if (a[i].kind == PP_FWD && s < last)
            o[n++] = (struct pp_action){PP_SEND_ACT, a[i].mb, a[i].chunk, rank_of(P, s + 1)};
        if (a[i].kind == PP_BWD && s > 0)
            o[n++] = (struct pp_action){PP_SEND_GRAD, a[i].mb, a[i].chunk, rank_of(P, s - 1)};
    }
    return n;
}

/* Rank `rank`'s list of a schedule from a file: its groups of computes. */
static int build_from_file(const char *file, int pp, int v, int m, int rank, struct pp_action **out, int *n,
                           char *err, size_t errlen)
{
    struct pp_file f;
    if (pp_file_read(file, pp, v, m, &f, err, errlen)) return -1;
    int total = f.n[rank], k = 0;
    struct place P = {PP_LAYOUT_LOOP, pp, v, rank};
    struct pp_action *o = malloc(sizeof *o * 3 * (size_t)(total ? total : 1));
    for (int i = 0, j; o && i < total; i = j) {
        for (j = i + 1; j < total && f.group[rank][j] == f.group[rank][i]; j++) continue;
        k = emit(o, k, f.act[rank] + i, j - i, &P);
    }
    pp_file_free(&f);
    if (!o) return pp_fail(err, errlen, "out of memory for %d pipeline actions", 3 * total);
    *out = o;
    *n = k;
    return 0;
}

/* ------------------------------------------------------------ zero bubble */

/* The zero-bubble schedules defer what nobody waits for (W), and their
 * warm-ups run further ahead than 1F1B's, so an activation or a gradient
 * is often ready long before its receiver takes it.  With the send right
 * after its compute and the receive right before its compute, the
 * executor (rendezvous sends, each phase waiting for its own) would stand
 * in the sender's phase until the receiver posts the receive, and
 * deadlock.  So each message moves to where both ends meet in the timing
 * of F = B = W = 1 with buffered sends:
 *   - an activation's send goes into the last phase of the sender that
 *     starts no later than the receiver's forward (the output stays in its
 *     slot until the backward anyway);
 *   - a gradient's receive goes into the first phase of the receiver that
 *     ends no earlier than the sender's backward (it lands in the slot its
 *     forward holds), and its send stays right after the backward, so no
 *     input gradient outlives its W.
 * In that timing every receive is posted by the time its send is issued,
 * so rendezvous sends run the same timeline step for step: no deadlock,
 * the same makespan (proved again by the simulator in pp_schedule_check,
 * and by test_pipeline under every send model). */

/* Every rank's computes (c[r], nc[r]) and the plain lists (l[r], n[r]),
 * each send right after its compute; the plain lists timed in sim, and
 * when each stage's forward of (mb) starts and its backward ends. */
struct zb_all {
    int pp, m;
    struct pp_action **c, **l;
    int *nc, *n;
    struct pp_sim sim;
    long *fwd_start, *bwd_end; /* [stage * m + mb] */
};

static void zb_free(struct zb_all *Z)
{
    for (int r = 0; r < Z->pp; r++) {
        if (Z->c) free(Z->c[r]);
        if (Z->l) free(Z->l[r]);
    }
    free(Z->c), free(Z->l), free(Z->nc), free(Z->n), free(Z->fwd_start), free(Z->bwd_end);
    pp_sim_free(&Z->sim);
}

/* fwd_start and bwd_end from the timed slots. */
static int zb_index(struct zb_all *Z, enum pp_layout layout, int v)
{
    size_t len = (size_t)Z->pp * (size_t)v * (size_t)Z->m;
    Z->fwd_start = calloc(len, sizeof *Z->fwd_start), Z->bwd_end = calloc(len, sizeof *Z->bwd_end);
    if (!Z->fwd_start || !Z->bwd_end) return -1;
    for (int r = 0; r < Z->pp; r++)
        for (int i = 0; i < Z->sim.nslot[r]; i++) {
            const struct pp_slot *x = &Z->sim.slot[r][i];
            size_t q = (size_t)pp_stage_of(layout, Z->pp, r, x->chunk) * (size_t)Z->m + (size_t)x->mb;
            if (x->kind == PP_FWD) Z->fwd_start[q] = x->start;
            if (x->kind == PP_BWD) Z->bwd_end[q] = x->end;
        }
    return 0;
}

static int zb_timed(enum pp_schedule s, int pp, int v, int m, struct zb_all *Z, char *err, size_t errlen)
{
    memset(Z, 0, sizeof *Z);
    Z->pp = pp, Z->m = m;
    Z->c = calloc((size_t)pp, sizeof *Z->c), Z->l = calloc((size_t)pp, sizeof *Z->l);
    Z->nc = calloc((size_t)pp, sizeof *Z->nc), Z->n = calloc((size_t)pp, sizeof *Z->n);
    if (!Z->c || !Z->l || !Z->nc || !Z->n) return pp_fail(err, errlen, "out of memory for the pipeline lists");
    for (int r = 0; r < pp; r++) {
        struct place P = {pp_schedule_layout(s), pp, v, r};
        Z->c[r] = malloc(sizeof **Z->c * 3 * (size_t)v * (size_t)m);
        Z->l[r] = malloc(sizeof **Z->l * 7 * (size_t)v * (size_t)m);
        if (!Z->c[r] || !Z->l[r] || (Z->nc[r] = pp_zb_order(s, pp, m, r, Z->c[r])) < 0)
            return pp_fail(err, errlen, "out of memory for the pipeline lists");
        for (int i = 0; i < Z->nc[r]; i++) Z->n[r] = emit(Z->l[r], Z->n[r], Z->c[r] + i, 1, &P);
    }
    struct pp_sim_opts o = {1, 1, PP_SEND_BUFFERED, 0, pp_schedule_layout(s), 1, NULL};
    char why[512];
    if (pp_simulate(pp, v, m, Z->l, Z->n, &o, &Z->sim, why, sizeof why))
        return pp_fail(err, errlen, "schedule = '%s' on pp = %d with %d micro-batches: its order does not run "
                                    "(a bug in pp_zb.c: please report it): %s",
                       pp_schedule_name(s), pp, m, why);
    return zb_index(Z, o.layout, v) ? pp_fail(err, errlen, "out of memory for the pipeline lists") : 0;
}

/* The messages of rank P->rank not yet on its list: activation sends
 * waiting for their phase (due: the receiver's forward starts), gradient
 * receives (due: the sender's backward ends), in the order of their
 * computes (so each channel's in the order of its messages). */
struct waiting {
    struct pp_action *a;
    long *due;
    int n, head; /* receives: a[head ..) are not on the list yet */
};

/* Put on the list the activation sends whose phase is the one before
 * compute j (t: the timed computes; j = nc: the phase after the last):
 * the phase after compute j would start after their receiver's forward. */
static int flush_sends(struct pp_action *o, int n, struct waiting *w, const struct pp_slot *t, int j, int nc)
{
    int kept = 0;
    for (int q = 0; q < w->n; q++)
        if (j == nc || t[j].end > w->due[q]) o[n++] = w->a[q];
        else w->a[kept] = w->a[q], w->due[kept++] = w->due[q];
    w->n = kept;
    return n;
}

/* The gradient receives whose phase is the one before compute j: their
 * data is there when compute j starts (a backward starts after its own,
 * so none is left behind).  Their senders' backwards end in the order of
 * the receiving backwards on each channel; across channels a receive due
 * later may hold back one due earlier, which only posts it later. */
static int flush_recvs(struct pp_action *o, int n, struct waiting *w, const struct pp_slot *t, int j)
{
    while (w->head < w->n && w->due[w->head] <= t[j].start) o[n++] = w->a[w->head++];
    return n;
}

/* Rank P->rank's list with its messages placed as above: before each
 * compute, the sends due (activations waiting, then the gradients of the
 * compute before), then the receives (activation of this forward,
 * gradients that are there). */
static int emit_placed(struct pp_action *o, const struct zb_all *Z, const struct place *P, struct waiting *sends,
                       struct waiting *recvs)
{
    int r = P->rank, nc = Z->nc[r], n = 0, last = P->pp * P->v - 1;
    const struct pp_action *c = Z->c[r];
    const struct pp_slot *t = Z->sim.slot[r];
    for (int j = 0; j < nc; j++) /* the gradient receives, due when their sender's backward ends */
        if (c[j].kind == PP_BWD) {
            int s = pp_stage_of(P->layout, P->pp, r, c[j].chunk);
            if (s == last) continue;
            recvs->a[recvs->n] = (struct pp_action){PP_RECV_GRAD, c[j].mb, c[j].chunk, rank_of(P, s + 1)};
            recvs->due[recvs->n++] = Z->bwd_end[(size_t)(s + 1) * (size_t)Z->m + (size_t)c[j].mb];
        }
    for (int j = 0; j <= nc; j++) {
        n = flush_sends(o, n, sends, t, j, nc);
        if (j > 0 && c[j - 1].kind == PP_BWD) { /* its gradient, sent at once */
            int s = pp_stage_of(P->layout, P->pp, r, c[j - 1].chunk);
            if (s > 0) o[n++] = (struct pp_action){PP_SEND_GRAD, c[j - 1].mb, c[j - 1].chunk, rank_of(P, s - 1)};
        }
        if (j == nc) break;
        int s = pp_stage_of(P->layout, P->pp, r, c[j].chunk);
        if (c[j].kind == PP_FWD && s > 0)
            o[n++] = (struct pp_action){PP_RECV_ACT, c[j].mb, c[j].chunk, rank_of(P, s - 1)};
        n = flush_recvs(o, n, recvs, t, j);
        o[n++] = c[j];
        if (c[j].kind == PP_FWD && s < last) {
            sends->a[sends->n] = (struct pp_action){PP_SEND_ACT, c[j].mb, c[j].chunk, rank_of(P, s + 1)};
            sends->due[sends->n++] = Z->fwd_start[(size_t)(s + 1) * (size_t)Z->m + (size_t)c[j].mb];
        }
    }
    return n;
}

/* The timing of the schedule built last: every rank's list needs all of
 * it, and the callers build rank after rank (plan, the bounds, the
 * simulator, the tests), so it is kept for the next call (one schedule:
 * build the lists from one thread). */
static struct {
    enum pp_schedule s;
    int pp, v, m, valid;
    struct zb_all Z;
} last_zb;

static int zb_timing(enum pp_schedule s, int pp, int v, int m, char *err, size_t errlen)
{
    if (last_zb.valid && last_zb.s == s && last_zb.pp == pp && last_zb.v == v && last_zb.m == m) return 0;
    if (last_zb.valid) zb_free(&last_zb.Z);
    last_zb.valid = 0;
    if (zb_timed(s, pp, v, m, &last_zb.Z, err, errlen)) {
        zb_free(&last_zb.Z);
        return -1;
    }
    last_zb.s = s, last_zb.pp = pp, last_zb.v = v, last_zb.m = m, last_zb.valid = 1;
    return 0;
}

/* Rank `rank`'s list of a zero-bubble schedule: its computes (pp_zb.c),
 * each on its own, its messages placed as above. */
static int build_zb(enum pp_schedule s, int pp, int v, int m, int rank, struct pp_action **out, int *n, char *err,
                    size_t errlen)
{
    struct place P = {pp_schedule_layout(s), pp, v, rank};
    size_t len = 7 * (size_t)v * (size_t)m, k = (size_t)v * (size_t)m;
    int rc = zb_timing(s, pp, v, m, err, errlen);
    struct pp_action *o = rc ? NULL : malloc(sizeof *o * (len + 2 * k));
    long *due = rc ? NULL : malloc(sizeof *due * 2 * k);
    struct waiting sends = {o + len, due, 0, 0}, recvs = {o + len + k, due + k, 0, 0};
    if (rc == 0 && (!o || !due)) rc = pp_fail(err, errlen, "out of memory for %zu pipeline actions", len);
    if (rc == 0) *n = emit_placed(o, &last_zb.Z, &P, &sends, &recvs);
    free(due);
    if (rc) free(o);
    else *out = o;
    return rc;
}

int pp_schedule_build(enum pp_schedule s, const char *file, int pp, int v, int m, int rank, struct pp_action **out,
                      int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (check_shape(s, file, pp, v, m, err, errlen)) return -1;
    if (rank < 0 || rank >= pp) return pp_fail(err, errlen, "rank %d is not a stage of a %d-stage pipeline", rank, pp);
    if (s == PP_FILE) return build_from_file(file, pp, v, m, rank, out, n, err, errlen);
    if (is_zb(s)) return build_zb(s, pp, v, m, rank, out, n, err, errlen);
    int total = v * m, w = warmup(s, pp, v, m, rank), k = 0;
    struct place P = {PP_LAYOUT_LOOP, pp, v, rank};
    struct pp_action *o = malloc(sizeof *o * 6 * (size_t)total);
    if (!o) return pp_fail(err, errlen, "out of memory for %d pipeline actions", 6 * total);
    /* Interleaved runs each steady forward and backward as one group (as
     * Megatron does): its phases then pair up across ranks, which rendezvous
     * sends need.  1F1B pairs up with single computes already. */
    int pair = s == PP_INTERLEAVED && v > 1;
    for (int i = 0; i < w; i++) k = emit(o, k, (struct pp_action[]){kth(pp, v, i, 0)}, 1, &P); /* warm-up */
    for (int i = 0; i < total - w; i++) {                                                        /* steady */
        struct pp_action fb[2] = {kth(pp, v, w + i, 0), kth(pp, v, i, 1)};
        if (pair) k = emit(o, k, fb, 2, &P);
        else k = emit(o, emit(o, k, fb, 1, &P), fb + 1, 1, &P);
    }
    for (int i = total - w; i < total; i++) /* cool-down */
        k = emit(o, k, (struct pp_action[]){kth(pp, v, i, 1)}, 1, &P);
    *out = o;
    *n = k;
    return 0;
}

int pp_simulate_schedule(enum pp_schedule s, const char *file, int pp, int v, int m, const struct pp_sim_opts *opts,
                         struct pp_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (check_shape(s, file, pp, v, m, err, errlen)) return -1;
    struct pp_action **l;
    struct pp_sim_opts o = *opts;
    o.layout = pp_schedule_layout(s); /* (the lists are written for it) */
    int *n, rc = build_all(s, file, pp, v, m, &l, &n, err, errlen);
    if (rc == 0) rc = pp_simulate(pp, v, m, l, n, &o, out, err, errlen);
    if (rc == 0) out->sched = s;
    free_all(pp, l, n);
    return rc;
}

