/* pipeline.c -- pipeline schedules as data, their simulator and picture
 * (pure code, no MPI; the contract is in pipeline.h and docs/pipeline.md). */
#include "pipeline.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_file.h"

/* The schedules' names in messages: the words of parallel.schedule
 * (config/params.def; test_deck checks that they agree). */
static const char *const sched_names[] = {"gpipe", "1f1b", "interleaved", "file"};
static const char *const kind_names[] = {"RECV_ACT", "FWD", "SEND_ACT", "RECV_GRAD", "BWD", "SEND_GRAD"};

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
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
_Static_assert(COUNT(sched_names) == PP_FILE + 1, "a name for each enum pp_schedule");
_Static_assert(COUNT(kind_names) == PP_SEND_GRAD + 1, "a name for each enum pp_kind");

static int known_schedule(enum pp_schedule s) { return s >= 0 && s < COUNT(sched_names); }

const char *pp_schedule_name(enum pp_schedule s) { return known_schedule(s) ? sched_names[s] : "?"; }

const char *pp_kind_name(enum pp_kind k) { return k >= 0 && k < COUNT(kind_names) ? kind_names[k] : "?"; }

static int is_compute(enum pp_kind k) { return k == PP_FWD || k == PP_BWD; }

/* ------------------------------------------------------------ generation */

/* What pp_schedule_check says before the lists exist. */
static int check_shape(enum pp_schedule s, const char *file, int pp, int v, int m, char *err, size_t errlen)
{
    if (!known_schedule(s)) return fail(err, errlen, "no pipeline schedule %d", (int)s);
    if (pp < 1 || v < 1 || m < 1)
        return fail(err, errlen, "pp = %d, virtual_stages = %d and micro-batches = %d must all be at least 1", pp, v,
                    m);
    if (s == PP_FILE && (!file || !file[0]))
        return fail(err, errlen, "schedule = 'file' needs parallel.schedule_file, the file of each rank's computes");
    if (v > 1 && s != PP_INTERLEAVED && s != PP_FILE)
        return fail(err, errlen, "virtual_stages = %d needs schedule = 'interleaved' (or 'file'), not '%s'", v,
                    pp_schedule_name(s));
    if (v > 1 && pp < 2)
        return fail(err, errlen, "virtual_stages = %d needs pp >= 2 (there is nothing to interleave on one stage)",
                    v);
    if (v > 1 && m % pp) {
        char use[64];
        int lo = m / pp * pp;
        snprintf(use, sizeof use, lo ? "%d or %d" : "%d", lo ? lo : pp, lo + pp);
        return fail(err, errlen,
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
    int rc = *l && *n ? 0 : fail(err, errlen, "out of memory");
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
    if (s != PP_FILE) return 0; /* (the generated ones are proved by test_pipeline) */
    /* a schedule from a file is proved here, before launch, as the executor
     * runs it (pipeline_exec.c): rendezvous sends, each phase waiting for
     * its own, and the next phase's receives posted on entering one */
    struct pp_action **l;
    int *n, rc = build_all(s, file, pp, v, m, &l, &n, err, errlen);
    struct pp_sim sim;
    struct pp_sim_opts o = {.t_fwd = 1, .t_bwd = 2, .send = PP_SEND_RENDEZVOUS, .lookahead = 1};
    char why[1024];
    if (rc == 0 && pp_simulate(pp, v, m, l, n, &o, &sim, why, sizeof why) != 0)
        rc = fail(err, errlen, "%s: the simulator refuses it: %s", file, why);
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

void pp_split_marks(const struct pp_action *a, int n, unsigned char *split)
{
    for (int i = 0; i < n; i++) {
        split[i] = 0;
        for (int j = i + 1; a[i].kind == PP_BWD && j < n && !split[i]; j++)
            split[i] = a[j].kind == PP_WGT && a[j].mb == a[i].mb && a[j].chunk == a[i].chunk;
    }
}

int pp_list_peak(const struct pp_action *a, int n)
{
    unsigned char *split = malloc((size_t)(n ? n : 1));
    if (!split) return -1;
    pp_split_marks(a, n, split);
    int live = 0, most = 0;
    for (int i = 0; i < n; i++) {
        live += a[i].kind == PP_FWD ? 1 : (a[i].kind == PP_BWD && !split[i]) || a[i].kind == PP_WGT ? -1 : 0;
        if (live > most) most = live;
    }
    free(split);
    return most;
}

int pp_wpeak_bound(enum pp_schedule s, const char *file, int pp, int v, int m, int rank)
{
    struct pp_action *a;
    int n, peak = 0;
    char err[512];
    if (pp_schedule_build(s, file, pp, v, m, rank, &a, &n, err, sizeof err) == 0) peak = pp_list_wpeak(a, n), free(a);
    return peak;
}

int pp_list_wpeak(const struct pp_action *a, int n)
{
    int live = 0, most = 0;
    for (int i = 0; i < n; i++) {
        live += a[i].kind == PP_WGT ? -1 : 0;
        for (int j = i + 1; a[i].kind == PP_BWD && j < n; j++)
            if (a[j].kind == PP_WGT && a[j].mb == a[i].mb && a[j].chunk == a[i].chunk) {
                live++;
                break;
            }
        if (live > most) most = live;
    }
    return most;
}

int pp_peak_bound(enum pp_schedule s, const char *file, int pp, int v, int m, int rank)
{
    if (s == PP_FILE) {
        struct pp_action *a;
        int n, peak = 0;
        char err[512];
        if (pp_schedule_build(s, file, pp, v, m, rank, &a, &n, err, sizeof err) == 0) peak = pp_list_peak(a, n), free(a);
        return peak;
    }
    return s == PP_GPIPE ? m : imin(warmup(s, pp, v, m, rank) + 1, v * m);
}

void pp_phase_ends(const struct pp_action *a, int n, int *phase_end)
{
    for (int i = n - 1; i >= 0; i--)
        phase_end[i] = is_compute(a[i].kind) ? i : i + 1 < n && phase_end[i + 1] > i + 1 ? phase_end[i + 1] : i + 1;
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
    while (i < n && !is_compute(a[i].kind)) i++;
    return i;
}

/* The most activation receives posted at once over list a: at each phase,
 * its own and the next phase's. */
static int posted_bound(const struct pp_action *a, int n)
{
    int most = 0;
    for (int i = 0; i < n;) {
        if (is_compute(a[i].kind)) {
            i++;
            continue;
        }
        int end = run_end(a, n, i), nxt = end;
        while (nxt < n && is_compute(a[nxt].kind)) nxt++;
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

/* Put the computes a[0..k) on the list as one group: the receives they need,
 * the computes back to back, then the sends they make.  A phase (the actions
 * between two computes) thus holds the sends of one group, then the receives
 * of the next. */
static int emit(struct pp_action *o, int n, const struct pp_action *a, int k, int pp, int v, int rank)
{
    int last = pp * v - 1, prev = (rank + pp - 1) % pp, next = (rank + 1) % pp;
    for (int i = 0; i < k; i++) {
        int s = a[i].chunk * pp + rank;
        if (a[i].kind == PP_FWD && s > 0) o[n++] = (struct pp_action){PP_RECV_ACT, a[i].mb, a[i].chunk, prev};
        if (a[i].kind == PP_BWD && s < last) o[n++] = (struct pp_action){PP_RECV_GRAD, a[i].mb, a[i].chunk, next};
    }
    for (int i = 0; i < k; i++) o[n++] = a[i];
    for (int i = 0; i < k; i++) {
        int s = a[i].chunk * pp + rank;
        if (a[i].kind == PP_FWD && s < last) o[n++] = (struct pp_action){PP_SEND_ACT, a[i].mb, a[i].chunk, next};
        if (a[i].kind == PP_BWD && s > 0) o[n++] = (struct pp_action){PP_SEND_GRAD, a[i].mb, a[i].chunk, prev};
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
    struct pp_action *o = malloc(sizeof *o * 3 * (size_t)(total ? total : 1));
    for (int i = 0, j; o && i < total; i = j) {
        for (j = i + 1; j < total && f.group[rank][j] == f.group[rank][i]; j++) continue;
        k = emit(o, k, f.act[rank] + i, j - i, pp, v, rank);
    }
    pp_file_free(&f);
    if (!o) return fail(err, errlen, "out of memory for %d pipeline actions", 3 * total);
    *out = o;
    *n = k;
    return 0;
}

int pp_schedule_build(enum pp_schedule s, const char *file, int pp, int v, int m, int rank, struct pp_action **out,
                      int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (check_shape(s, file, pp, v, m, err, errlen)) return -1;
    if (rank < 0 || rank >= pp) return fail(err, errlen, "rank %d is not a stage of a %d-stage pipeline", rank, pp);
    if (s == PP_FILE) return build_from_file(file, pp, v, m, rank, out, n, err, errlen);
    int total = v * m, w = warmup(s, pp, v, m, rank), k = 0;
    struct pp_action *o = malloc(sizeof *o * 6 * (size_t)total);
    if (!o) return fail(err, errlen, "out of memory for %d pipeline actions", 6 * total);
    /* Interleaved runs each steady forward and backward as one group (as
     * Megatron does): its phases then pair up across ranks, which rendezvous
     * sends need.  1F1B pairs up with single computes already. */
    int pair = s == PP_INTERLEAVED && v > 1;
    for (int i = 0; i < w; i++) k = emit(o, k, (struct pp_action[]){kth(pp, v, i, 0)}, 1, pp, v, rank); /* warm-up */
    for (int i = 0; i < total - w; i++) {                                                                 /* steady */
        struct pp_action fb[2] = {kth(pp, v, w + i, 0), kth(pp, v, i, 1)};
        if (pair) k = emit(o, k, fb, 2, pp, v, rank);
        else k = emit(o, emit(o, k, fb, 1, pp, v, rank), fb + 1, 1, pp, v, rank);
    }
    for (int i = total - w; i < total; i++) /* cool-down */
        k = emit(o, k, (struct pp_action[]){kth(pp, v, i, 1)}, 1, pp, v, rank);
    *out = o;
    *n = k;
    return 0;
}

/* ------------------------------------------------------------ simulation */

/* What has happened to (mb, chunk) on a rank. */
enum { GOT_ACT = 1, DID_FWD = 2, SENT_ACT = 4, GOT_GRAD = 8, DID_BWD = 16, SENT_GRAD = 32 };

/* A channel is (sender, direction): ACT goes to sender+1, GRAD to sender-1.
 * Message k of a channel is the k-th send and matches the k-th receive. */
struct chan {
    int nsend, nrecv;
    int *smb, *sc, *rmb, *rc; /* [cap] (mb, chunk) as sender and receiver name them */
    long *issued, *posted;    /* [cap] time of Isend / Irecv, -1 until then */
};

struct sim {
    int pp, v, m, cap;
    struct pp_action *const *l;
    const int *n;
    struct pp_sim_opts o;
    struct chan *ch;          /* [2 pp] */
    int **seq;                /* [pp][n[r]] message number of each communication action */
    unsigned char **st;       /* [pp][m v] */
    int *pc, *entered, *live; /* [pp] position, phase entered, in-flight now */
    long *clock;              /* [pp] */
    int *queue, head, len;    /* [pp] ranks that may be able to move (a ring) */
    unsigned char *queued;    /* [pp] */
};

static void wake(struct sim *S, int r)
{
    if (S->queued[r]) return;
    S->queued[r] = 1;
    S->queue[(S->head + S->len++) % S->pp] = r;
}

static int is_send(enum pp_kind k) { return k == PP_SEND_ACT || k == PP_SEND_GRAD; }

/* Channel of a communication action on rank r. */
static int chan_of(const struct pp_action *a, int r)
{
    int grad = a->kind == PP_SEND_GRAD || a->kind == PP_RECV_GRAD;
    return 2 * (is_send(a->kind) ? r : a->peer) + grad;
}

static int describe(char *buf, size_t len, const struct pp_action *a)
{
    if (is_compute(a->kind)) return snprintf(buf, len, "%s mb %d chunk %d", pp_kind_name(a->kind), a->mb, a->chunk);
    return snprintf(buf, len, "%s mb %d chunk %d %s rank %d", pp_kind_name(a->kind), a->mb, a->chunk,
                    is_send(a->kind) ? "to" : "from", a->peer);
}

/* "rank r action i (FWD mb 3 chunk 0): why" */
static int bad_action(char *err, size_t errlen, int r, int i, const struct pp_action *a, const char *why)
{
    char d[96];
    describe(d, sizeof d, a);
    return fail(err, errlen, "rank %d action %d (%s): %s", r, i, d, why);
}

/* Each action well formed, numbered on its channel; then the channels matched. */
static int number_messages(struct sim *S, char *err, size_t errlen)
{
    int pp = S->pp, last = pp * S->v - 1;
    char why[96];
    for (int r = 0; r < pp; r++)
        for (int i = 0; i < S->n[r]; i++) {
            const struct pp_action *a = &S->l[r][i];
            if (a->kind < PP_RECV_ACT || a->kind > PP_SEND_GRAD || a->mb < 0 || a->mb >= S->m || a->chunk < 0 ||
                a->chunk >= S->v)
                return bad_action(err, errlen, r, i, a, "kind, micro-batch or chunk out of range");
            if (is_compute(a->kind)) continue;
            int s = a->chunk * pp + r, toward_next = a->kind == PP_SEND_ACT || a->kind == PP_RECV_GRAD;
            int needs = a->kind == PP_RECV_ACT || a->kind == PP_SEND_GRAD ? s > 0 : s < last;
            int peer = toward_next ? (r + 1) % pp : (r + pp - 1) % pp;
            if (!needs) {
                snprintf(why, sizeof why, "virtual stage %d has no such message", s);
                return bad_action(err, errlen, r, i, a, why);
            }
            if (a->peer != peer) {
                snprintf(why, sizeof why, "the peer of virtual stage %d is rank %d", s, peer);
                return bad_action(err, errlen, r, i, a, why);
            }
            struct chan *c = &S->ch[chan_of(a, r)];
            int *cnt = is_send(a->kind) ? &c->nsend : &c->nrecv;
            if (*cnt == S->cap) return bad_action(err, errlen, r, i, a, "more than m*v messages on its channel");
            S->seq[r][i] = *cnt;
            (is_send(a->kind) ? c->smb : c->rmb)[*cnt] = a->mb;
            (is_send(a->kind) ? c->sc : c->rc)[*cnt] = a->chunk;
            (*cnt)++;
        }
    for (int q = 0; q < 2 * pp; q++) {
        struct chan *c = &S->ch[q];
        int src = q / 2, grad = q % 2, dst = grad ? (src + pp - 1) % pp : (src + 1) % pp;
        const char *what = grad ? "gradient" : "activation";
        if (c->nsend != c->nrecv)
            return fail(err, errlen, "rank %d sends %d %s messages to rank %d, which receives %d", src, c->nsend,
                        what, dst, c->nrecv);
        for (int k = 0; k < c->nsend; k++) {
            int s = c->sc[k] * pp + src + (grad ? -1 : 1); /* the receiver's virtual stage */
            if (c->rmb[k] != c->smb[k] || c->rc[k] != s / pp || s % pp != dst)
                return fail(err, errlen,
                            "%s message %d from rank %d to rank %d: sent as mb %d chunk %d, received as mb %d "
                            "chunk %d (sends and receives on a channel must come in the same order)",
                            what, k, src, dst, c->smb[k], c->sc[k], c->rmb[k], c->rc[k]);
        }
    }
    return 0;
}

/* End of the phase (run of communication actions) that starts at i; the
 * blocking model takes one action at a time. */
static int phase_end(const struct sim *S, int r, int i)
{
    if (S->o.send == PP_SEND_BLOCKING) return i + 1;
    while (i < S->n[r] && !is_compute(S->l[r][i].kind)) i++;
    return i;
}

/* Look-ahead: post the receives of the `lookahead` phases after index e. */
static void post_ahead(struct sim *S, int r, int e)
{
    const struct pp_action *l = S->l[r];
    for (int k = 0; k < S->o.lookahead && S->o.send != PP_SEND_BLOCKING; k++) {
        while (e < S->n[r] && is_compute(l[e].kind)) e++;
        if (e >= S->n[r]) return;
        for (int f = phase_end(S, r, e); e < f; e++) {
            long *posted = &S->ch[chan_of(&l[e], r)].posted[S->seq[r][e]];
            if (!is_send(l[e].kind) && *posted < 0) *posted = S->clock[r];
        }
    }
}

/* Checks that a compute or send may happen now on rank r, then records it. */
static int apply(struct sim *S, int r, int i, char *err, size_t errlen)
{
    const struct pp_action *a = &S->l[r][i];
    unsigned char *st = &S->st[r][a->mb * S->v + a->chunk];
    int s = a->chunk * S->pp + r, last = S->pp * S->v - 1, need = 0, bad = 0, bit = 0;
    switch (a->kind) {
    case PP_RECV_ACT: bit = GOT_ACT; break;
    case PP_RECV_GRAD: bit = GOT_GRAD; break;
    case PP_FWD: bit = DID_FWD, need = s > 0 ? GOT_ACT : 0; break;
    case PP_SEND_ACT: bit = SENT_ACT, need = DID_FWD; break;
    case PP_BWD: bit = DID_BWD, need = DID_FWD | (s < last ? GOT_GRAD : 0); break;
    case PP_SEND_GRAD: bit = SENT_GRAD, need = DID_BWD; break;
    }
    bad = (*st & bit) ? bit : need & ~*st;
    if (bad)
        return bad_action(err, errlen, r, i, a,
                          bad == bit                           ? "done twice"
                          : bad & DID_FWD && a->kind != PP_FWD ? "before its forward"
                          : bad & GOT_ACT                      ? "before its input activation arrived"
                          : bad & GOT_GRAD                     ? "before its output gradient arrived"
                                                               : "before its backward");
    *st |= (unsigned char)bit;
    return 0;
}

/* Try to move rank r on.  Returns 1 if it moved, 0 if blocked or done, -1 on error. */
static int step(struct sim *S, struct pp_sim *out, int r, char *err, size_t errlen)
{
    const struct pp_action *l = S->l[r];
    int i = S->pc[r];
    if (i >= S->n[r]) return 0;
    if (is_compute(l[i].kind)) {
        if (apply(S, r, i, err, errlen)) return -1;
        int fwd = l[i].kind == PP_FWD, t = fwd ? S->o.t_fwd : S->o.t_bwd;
        out->slot[r][out->nslot[r]++] = (struct pp_slot){l[i].kind, l[i].mb, l[i].chunk, S->clock[r],
                                                         S->clock[r] + t};
        S->clock[r] += t;
        out->busy[r] += t;
        S->live[r] += fwd ? 1 : -1;
        if (S->live[r] > out->peak[r]) out->peak[r] = S->live[r];
        S->pc[r]++;
        return 1;
    }
    int e = phase_end(S, r, i);
    if (!S->entered[r]) { /* post the receives (unless posted ahead), issue the sends */
        for (int j = i; j < e; j++) {
            struct chan *c = &S->ch[chan_of(&l[j], r)];
            if (is_send(l[j].kind) && apply(S, r, j, err, errlen)) return -1;
            long *t = &(is_send(l[j].kind) ? c->issued : c->posted)[S->seq[r][j]];
            if (*t < 0) *t = S->clock[r];
        }
        post_ahead(S, r, e);
        S->entered[r] = 1;
        wake(S, (r + 1) % S->pp), wake(S, (r + S->pp - 1) % S->pp); /* whom this may unblock */
    }
    long t = S->clock[r];
    for (int j = i; j < e; j++) { /* wait: receives need their send, rendezvous sends their receive */
        if (is_send(l[j].kind) && S->o.send == PP_SEND_BUFFERED) continue;
        struct chan *c = &S->ch[chan_of(&l[j], r)];
        long tj = (is_send(l[j].kind) ? c->posted : c->issued)[S->seq[r][j]];
        if (tj < 0) return 0;
        if (tj > t) t = tj;
    }
    for (int j = i; j < e; j++)
        if (!is_send(l[j].kind) && apply(S, r, j, err, errlen)) return -1;
    S->clock[r] = t;
    S->pc[r] = e;
    S->entered[r] = 0;
    return 1;
}

/* Nobody can move: say what each unfinished rank waits for. */
static int deadlock(const struct sim *S, char *err, size_t errlen)
{
    static const char *const model[] = {"buffered", "rendezvous", "blocking rendezvous"};
    if (!err || !errlen) return -1;
    size_t k = (size_t)snprintf(err, errlen, "deadlock with %s sends:", model[S->o.send]);
    for (int r = 0; r < S->pp && k < errlen; r++) {
        int i = S->pc[r], e = phase_end(S, r, i);
        for (int j = i; j < e && k < errlen; j++) {
            const struct chan *c = &S->ch[chan_of(&S->l[r][j], r)];
            int snd = is_send(S->l[r][j].kind);
            if ((snd ? c->posted : c->issued)[S->seq[r][j]] >= 0 || (snd && S->o.send == PP_SEND_BUFFERED)) continue;
            char d[96];
            describe(d, sizeof d, &S->l[r][j]);
            k += (size_t)snprintf(err + k, errlen - k, " rank %d waits at action %d (%s);", r, j, d);
            break;
        }
    }
    return -1;
}

static void sim_release(struct sim *S)
{
    for (int q = 0; S->ch && q < 2 * S->pp; q++) {
        struct chan *c = &S->ch[q];
        free(c->smb), free(c->sc), free(c->rmb), free(c->rc), free(c->issued), free(c->posted);
    }
    for (int r = 0; r < S->pp; r++) {
        if (S->seq) free(S->seq[r]);
        if (S->st) free(S->st[r]);
    }
    free(S->ch), free(S->seq), free(S->st), free(S->pc), free(S->entered), free(S->live), free(S->clock);
    free(S->queue), free(S->queued);
}

void pp_sim_free(struct pp_sim *sim)
{
    for (int r = 0; sim->slot && r < sim->pp; r++) free(sim->slot[r]);
    free(sim->busy), free(sim->peak), free(sim->nslot), free(sim->slot);
    memset(sim, 0, sizeof *sim);
}

static int sim_alloc(struct sim *S, struct pp_sim *out)
{
    int pp = S->pp;
    S->ch = calloc(2 * (size_t)pp, sizeof *S->ch);
    S->seq = calloc((size_t)pp, sizeof *S->seq);
    S->st = calloc((size_t)pp, sizeof *S->st);
    S->pc = calloc((size_t)pp, sizeof(int)), S->entered = calloc((size_t)pp, sizeof(int));
    S->live = calloc((size_t)pp, sizeof(int)), S->clock = calloc((size_t)pp, sizeof(long));
    S->queue = calloc((size_t)pp, sizeof(int)), S->queued = calloc((size_t)pp, 1);
    out->busy = calloc((size_t)pp, sizeof(long)), out->peak = calloc((size_t)pp, sizeof(int));
    out->nslot = calloc((size_t)pp, sizeof(int));
    out->slot = calloc((size_t)pp, sizeof *out->slot);
    if (!S->ch || !S->seq || !S->st || !S->pc || !S->entered || !S->live || !S->clock || !S->queue || !S->queued ||
        !out->busy || !out->peak || !out->nslot || !out->slot)
        return -1;
    for (int q = 0; q < 2 * pp; q++) {
        struct chan *c = &S->ch[q];
        size_t cap = (size_t)S->cap;
        c->smb = malloc(cap * sizeof(int)), c->sc = malloc(cap * sizeof(int));
        c->rmb = malloc(cap * sizeof(int)), c->rc = malloc(cap * sizeof(int));
        c->issued = malloc(cap * sizeof(long)), c->posted = malloc(cap * sizeof(long));
        if (!c->smb || !c->sc || !c->rmb || !c->rc || !c->issued || !c->posted) return -1;
        for (int k = 0; k < S->cap; k++) c->issued[k] = c->posted[k] = -1;
    }
    for (int r = 0; r < pp; r++) {
        S->seq[r] = calloc((size_t)S->n[r] + 1, sizeof(int));
        S->st[r] = calloc((size_t)S->m * (size_t)S->v, 1);
        out->slot[r] = calloc((size_t)S->n[r] + 1, sizeof **out->slot);
        if (!S->seq[r] || !S->st[r] || !out->slot[r]) return -1;
    }
    return 0;
}

/* Everything that must have happened once the lists ran to the end. */
static int check_complete(const struct sim *S, char *err, size_t errlen)
{
    int last = S->pp * S->v - 1;
    for (int r = 0; r < S->pp; r++)
        for (int q = 0; q < S->m * S->v; q++) {
            int mb = q / S->v, c = q % S->v, s = c * S->pp + r;
            int want = DID_FWD | DID_BWD | (s > 0 ? GOT_ACT | SENT_GRAD : 0) | (s < last ? SENT_ACT | GOT_GRAD : 0);
            int miss = want & ~S->st[r][q];
            if (miss)
                return fail(err, errlen, "rank %d never does %s of mb %d chunk %d", r,
                            pp_kind_name(miss & DID_FWD     ? PP_FWD
                                         : miss & DID_BWD   ? PP_BWD
                                         : miss & GOT_ACT   ? PP_RECV_ACT
                                         : miss & SENT_ACT  ? PP_SEND_ACT
                                         : miss & GOT_GRAD  ? PP_RECV_GRAD
                                                            : PP_SEND_GRAD),
                            mb, c);
        }
    return 0;
}

int pp_simulate(int pp, int v, int m, struct pp_action *const *lists, const int *n, const struct pp_sim_opts *opts,
                struct pp_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (pp < 1 || v < 1 || m < 1) return fail(err, errlen, "pp, v and m must be at least 1");
    if (opts->t_fwd < 1 || opts->t_bwd < 1 || opts->lookahead < 0 || opts->send < PP_SEND_BUFFERED ||
        opts->send > PP_SEND_BLOCKING)
        return fail(err, errlen, "bad simulator options (times >= 1, look-ahead >= 0, a send model)");
    struct sim S = {.pp = pp, .v = v, .m = m, .cap = m * v, .l = lists, .n = n, .o = *opts};
    *out = (struct pp_sim){.pp = pp, .v = v, .m = m, .sched = PP_SCHED_NONE, .opts = *opts};
    int rc = sim_alloc(&S, out) ? fail(err, errlen, "out of memory in the pipeline simulator")
                                : number_messages(&S, err, errlen);
    for (int r = 0; rc == 0 && r < pp; r++) wake(&S, r);
    while (rc == 0 && S.len > 0) { /* run a rank as far as it goes; entering a phase wakes its neighbours */
        int r = S.queue[S.head], k;
        S.head = (S.head + 1) % pp, S.len--, S.queued[r] = 0;
        while ((k = step(&S, out, r, err, errlen)) == 1) continue;
        if (k < 0) rc = -1;
    }
    for (int r = 0; rc == 0 && r < pp; r++)
        if (S.pc[r] < n[r]) rc = deadlock(&S, err, errlen);
    if (rc == 0) rc = check_complete(&S, err, errlen);
    for (int r = 0; rc == 0 && r < pp; r++)
        if (S.clock[r] > out->makespan) out->makespan = S.clock[r];
    sim_release(&S);
    if (rc) pp_sim_free(out);
    return rc;
}

int pp_simulate_schedule(enum pp_schedule s, const char *file, int pp, int v, int m, const struct pp_sim_opts *opts,
                         struct pp_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (check_shape(s, file, pp, v, m, err, errlen)) return -1;
    struct pp_action **l;
    int *n, rc = build_all(s, file, pp, v, m, &l, &n, err, errlen);
    if (rc == 0) rc = pp_simulate(pp, v, m, l, n, opts, out, err, errlen);
    if (rc == 0) out->sched = s;
    free_all(pp, l, n);
    return rc;
}

/* ------------------------------------------------------------ bubble, picture */

long pp_idle(const struct pp_sim *sim, int r) { return sim->makespan - sim->busy[r]; }

double pp_bubble(const struct pp_sim *sim, long *num, long *den)
{
    long idle = 0, total = (long)sim->pp * sim->makespan;
    for (int r = 0; r < sim->pp; r++) idle += pp_idle(sim, r);
    if (num) *num = idle;
    if (den) *den = total;
    return total ? (double)idle / (double)total : 0.0;
}

double pp_bubble_formula(int pp, int v, int m, long *num, long *den)
{
    if (num) *num = pp - 1;
    if (den) *den = (long)v * m + pp - 1;
    return (double)(pp - 1) / (double)((long)v * m + pp - 1);
}

static long gcd(long a, long b) { return b ? gcd(b, a % b) : a; }

static int label(char *buf, size_t len, const struct pp_slot *s, int v)
{
    if (v > 1) return snprintf(buf, len, "%c%dc%d", s->kind == PP_FWD ? 'F' : 'B', s->mb, s->chunk);
    return snprintf(buf, len, "%c%d", s->kind == PP_FWD ? 'F' : 'B', s->mb);
}

void pp_print_table(FILE *f, const struct pp_sim *sim, int width)
{
    char buf[32];
    int cw = snprintf(buf, sizeof buf, "%ld", sim->makespan > 0 ? sim->makespan - 1 : 0);
    int lw = snprintf(buf, sizeof buf, "rank %d ", sim->pp - 1);
    if (lw < 8) lw = 8;
    struct pp_slot big = {PP_FWD, sim->m - 1, sim->v - 1, 0, 0};
    int lab = label(buf, sizeof buf, &big, sim->v);
    cw = (lab > cw ? lab : cw) + 1;
    int per = ((width > 0 ? width : 100) - lw) / cw;
    if (per < 1) per = 1;
    fprintf(f, "%s: pp = %d, virtual_stages = %d, micro-batches = %d; forward %d, backward %d time units\n",
            sim->sched == PP_SCHED_NONE ? "pipeline" : pp_schedule_name(sim->sched), sim->pp, sim->v, sim->m,
            sim->opts.t_fwd, sim->opts.t_bwd);
    for (long t0 = 0; t0 < sim->makespan; t0 += per) {
        long t1 = t0 + per < sim->makespan ? t0 + per : sim->makespan;
        fprintf(f, "%s%-*s", t0 ? "\n" : "", lw, "time");
        for (long t = t0; t < t1; t++) fprintf(f, "%-*ld", t + 1 < t1 ? cw : 0, t);
        fputc('\n', f);
        for (int r = 0; r < sim->pp; r++) {
            int i = 0;
            snprintf(buf, sizeof buf, "rank %d", r);
            fprintf(f, "%-*s", lw, buf);
            for (long t = t0; t < t1; t++) {
                while (i < sim->nslot[r] && sim->slot[r][i].end <= t) i++;
                const struct pp_slot *s = i < sim->nslot[r] && sim->slot[r][i].start <= t ? &sim->slot[r][i] : NULL;
                if (s) label(buf, sizeof buf, s, sim->v);
                fprintf(f, "%-*s", t + 1 < t1 ? cw : 0, s ? buf : ".");
            }
            fputc('\n', f);
        }
    }
    long num, den, fn, fd;
    double b = pp_bubble(sim, &num, &den), fb = pp_bubble_formula(sim->pp, sim->v, sim->m, &fn, &fd);
    long g = gcd(num, den) ? gcd(num, den) : 1;
    fprintf(f, "bubble fraction %ld/%ld = %.4f: idle %ld of %ld rank-time units\n", num / g, den / g, b, num, den);
    if (sim->sched != PP_FILE) fprintf(f, "by formula (p-1)/(v*m+p-1) = %ld/%ld = %.4f\n", fn, fd, fb);
    fprintf(f, "peak in flight (mb, chunk) per rank:");
    for (int r = 0; r < sim->pp; r++) fprintf(f, " %d", sim->peak[r]);
    fputc('\n', f);
}
