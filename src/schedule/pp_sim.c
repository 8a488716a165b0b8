/* pp_sim.c -- the simulator that runs every rank's list against the others
 * and proves the executor contract (pipeline.h, docs/pipeline.md "The
 * simulator"), the bubble, and the time x rank picture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_internal.h"

/* What has happened to (mb, chunk) on a rank.  WGRAD: its weight gradient
 * is in (a fused backward, or its W). */
enum { GOT_ACT = 1, DID_FWD = 2, SENT_ACT = 4, GOT_GRAD = 8, DID_BWD = 16, SENT_GRAD = 32, WGRAD = 64 };

/* A channel is (sender, receiver, direction), as MPI matches messages: FIFO
 * per source and tag on the receiver.  Each sender has six, for the
 * receivers itself, the next rank and the previous rank (one and the same
 * when pp = 2) and the two directions: chan_index.  Message k of a channel
 * is the k-th send and matches the k-th receive. */
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
    struct chan *ch;                /* [6 pp] */
    int **seq, **chan;              /* [pp][n[r]] each communication action's message number and channel */
    unsigned char **split;          /* [pp][n[r]] pp_split_marks of each list */
    unsigned char **st;             /* [pp][m v] */
    int **wnext;                    /* [pp][v] the micro-batch whose weight gradient each chunk adds next */
    int *pc, *entered, *live, *pend; /* [pp] position, phase entered, activation sets held, W's pending */
    long *clock;                    /* [pp] */
    int *queue, head, len;          /* [pp] ranks that may be able to move (a ring) */
    unsigned char *queued;          /* [pp] */
};

static void wake(struct sim *S, int r)
{
    if (S->queued[r]) return;
    S->queued[r] = 1;
    S->queue[(S->head + S->len++) % S->pp] = r;
}

static int is_send(enum pp_kind k) { return k == PP_SEND_ACT || k == PP_SEND_GRAD; }

/* The channel from src to dst (itself or a neighbour) in one direction. */
static int chan_index(int pp, int src, int dst, int grad)
{
    int slot = dst == src ? 0 : dst == (src + 1) % pp ? 1 : 2;
    return 6 * src + 2 * slot + grad;
}

/* Channel of a communication action on rank r (its peer checked). */
static int chan_of(const struct sim *S, const struct pp_action *a, int r)
{
    int grad = a->kind == PP_SEND_GRAD || a->kind == PP_RECV_GRAD;
    return is_send(a->kind) ? chan_index(S->pp, r, a->peer, grad) : chan_index(S->pp, a->peer, r, grad);
}

static int describe(char *buf, size_t len, const struct pp_action *a)
{
    if (pp_is_compute(a->kind))
        return snprintf(buf, len, "%s mb %d chunk %d", pp_kind_name(a->kind), a->mb, a->chunk);
    return snprintf(buf, len, "%s mb %d chunk %d %s rank %d", pp_kind_name(a->kind), a->mb, a->chunk,
                    is_send(a->kind) ? "to" : "from", a->peer);
}

/* "rank r action i (FWD mb 3 chunk 0): why" */
static int bad_action(char *err, size_t errlen, int r, int i, const struct pp_action *a, const char *why)
{
    char d[96];
    describe(d, sizeof d, a);
    return pp_fail(err, errlen, "rank %d action %d (%s): %s", r, i, d, why);
}

/* A channel's arrays, once it carries a message (most of the six a rank
 * has do not). */
static int chan_alloc(struct chan *c, int cap)
{
    size_t n = (size_t)cap;
    c->smb = malloc(n * sizeof(int)), c->sc = malloc(n * sizeof(int));
    c->rmb = malloc(n * sizeof(int)), c->rc = malloc(n * sizeof(int));
    c->issued = malloc(n * sizeof(long)), c->posted = malloc(n * sizeof(long));
    if (!c->smb || !c->sc || !c->rmb || !c->rc || !c->issued || !c->posted) return -1;
    for (int k = 0; k < cap; k++) c->issued[k] = c->posted[k] = -1;
    return 0;
}

/* One communication action well formed (its stage has the message, its
 * peer holds the stage before or after), numbered on its channel. */
static int number_one(struct sim *S, int r, int i, char *err, size_t errlen)
{
    const struct pp_action *a = &S->l[r][i];
    int pp = S->pp, last = pp * S->v - 1, s = pp_stage_of(S->o.layout, pp, r, a->chunk);
    int toward_next = a->kind == PP_SEND_ACT || a->kind == PP_RECV_GRAD, peer, pc;
    int needs = a->kind == PP_RECV_ACT || a->kind == PP_SEND_GRAD ? s > 0 : s < last;
    char why[128];
    if (!needs) {
        snprintf(why, sizeof why, "virtual stage %d has no such message", s);
        return bad_action(err, errlen, r, i, a, why);
    }
    pp_place_of(S->o.layout, pp, toward_next ? s + 1 : s - 1, &peer, &pc);
    if (a->peer != peer) {
        snprintf(why, sizeof why, "the peer of virtual stage %d is rank %d (it holds stage %d)", s, peer,
                 toward_next ? s + 1 : s - 1);
        return bad_action(err, errlen, r, i, a, why);
    }
    S->chan[r][i] = chan_of(S, a, r);
    struct chan *c = &S->ch[S->chan[r][i]];
    int *cnt = is_send(a->kind) ? &c->nsend : &c->nrecv;
    if (!c->smb && chan_alloc(c, S->cap)) return pp_fail(err, errlen, "out of memory in the pipeline simulator");
    if (*cnt == S->cap) return bad_action(err, errlen, r, i, a, "more than m*v messages on its channel");
    S->seq[r][i] = *cnt;
    (is_send(a->kind) ? c->smb : c->rmb)[*cnt] = a->mb;
    (is_send(a->kind) ? c->sc : c->rc)[*cnt] = a->chunk;
    (*cnt)++;
    return 0;
}

/* Channel q's sends and receives equal in number and naming the same
 * (mb, chunk) in the same order. */
static int match_channel(const struct sim *S, int q, char *err, size_t errlen)
{
    const struct chan *c = &S->ch[q];
    int pp = S->pp, src = q / 6, slot = q % 6 / 2, grad = q % 2;
    int dst = slot == 0 ? src : slot == 1 ? (src + 1) % pp : (src + pp - 1) % pp;
    const char *what = grad ? "gradient" : "activation";
    if (c->nsend != c->nrecv)
        return pp_fail(err, errlen, "rank %d sends %d %s messages to rank %d, which receives %d", src, c->nsend,
                       what, dst, c->nrecv);
    for (int k = 0; k < c->nsend; k++) {
        int rr, rc, s = pp_stage_of(S->o.layout, pp, src, c->sc[k]) + (grad ? -1 : 1); /* the receiver's stage */
        pp_place_of(S->o.layout, pp, s, &rr, &rc);
        if (c->rmb[k] != c->smb[k] || c->rc[k] != rc || rr != dst)
            return pp_fail(err, errlen,
                           "%s message %d from rank %d to rank %d: sent as mb %d chunk %d, received as mb %d "
                           "chunk %d (sends and receives on a channel must come in the same order)",
                           what, k, src, dst, c->smb[k], c->sc[k], c->rmb[k], c->rc[k]);
    }
    return 0;
}

/* Each action well formed, numbered on its channel; then the channels matched. */
static int number_messages(struct sim *S, char *err, size_t errlen)
{
    for (int r = 0; r < S->pp; r++)
        for (int i = 0; i < S->n[r]; i++) {
            const struct pp_action *a = &S->l[r][i];
            if (a->kind < PP_RECV_ACT || a->kind > PP_WGT || a->mb < 0 || a->mb >= S->m || a->chunk < 0 ||
                a->chunk >= S->v)
                return bad_action(err, errlen, r, i, a, "kind, micro-batch or chunk out of range");
            if (a->kind == PP_WGT && S->o.t_wgt < 1)
                return bad_action(err, errlen, r, i, a,
                                  "the lists hold weight gradients (W): simulate them with t_wgt >= 1");
            if (!pp_is_compute(a->kind) && number_one(S, r, i, err, errlen)) return -1;
        }
    for (int q = 0; q < 6 * S->pp; q++)
        if (match_channel(S, q, err, errlen)) return -1;
    return 0;
}

/* End of the phase (run of communication actions) that starts at i; the
 * blocking model takes one action at a time. */
static int phase_end(const struct sim *S, int r, int i)
{
    if (S->o.send == PP_SEND_BLOCKING) return i + 1;
    while (i < S->n[r] && !pp_is_compute(S->l[r][i].kind)) i++;
    return i;
}

/* Look-ahead: post the receives of the `lookahead` phases after index e. */
static void post_ahead(struct sim *S, int r, int e)
{
    const struct pp_action *l = S->l[r];
    for (int k = 0; k < S->o.lookahead && S->o.send != PP_SEND_BLOCKING; k++) {
        while (e < S->n[r] && pp_is_compute(l[e].kind)) e++;
        if (e >= S->n[r]) return;
        for (int f = phase_end(S, r, e); e < f; e++) {
            long *posted = &S->ch[S->chan[r][e]].posted[S->seq[r][e]];
            if (!is_send(l[e].kind) && *posted < 0) *posted = S->clock[r];
        }
    }
}

/* A weight gradient (fused backward or W) of (mb, chunk) on rank r: the
 * chunk's next in micro-batch order?  Each parameter's gradient then adds
 * the micro-batches up in the order of every schedule and of pp = 1. */
static int wgrad_in_order(struct sim *S, int r, int i, char *err, size_t errlen)
{
    const struct pp_action *a = &S->l[r][i];
    int *next = &S->wnext[r][a->chunk];
    char why[200];
    if (a->mb == *next) {
        ++*next;
        return 0;
    }
    snprintf(why, sizeof why,
             "the weight gradient of micro-batch %d before that of micro-batch %d: each chunk's weight gradients "
             "(fused backwards or W's) must come in micro-batch order, to add up to pp = 1's bits",
             a->mb, *next);
    return bad_action(err, errlen, r, i, a, why);
}

/* Checks that a compute or send may happen now on rank r, then records it. */
static int apply(struct sim *S, int r, int i, char *err, size_t errlen)
{
    const struct pp_action *a = &S->l[r][i];
    unsigned char *st = &S->st[r][a->mb * S->v + a->chunk];
    int s = pp_stage_of(S->o.layout, S->pp, r, a->chunk), last = S->pp * S->v - 1, need = 0, bad = 0, bit = 0;
    switch (a->kind) {
    case PP_RECV_ACT: bit = GOT_ACT; break;
    case PP_RECV_GRAD: bit = GOT_GRAD; break;
    case PP_FWD: bit = DID_FWD, need = s > 0 ? GOT_ACT : 0; break;
    case PP_SEND_ACT: bit = SENT_ACT, need = DID_FWD; break;
    case PP_BWD: bit = DID_BWD, need = DID_FWD | (s < last ? GOT_GRAD : 0); break;
    case PP_SEND_GRAD: bit = SENT_GRAD, need = DID_BWD; break;
    case PP_WGT: bit = WGRAD, need = DID_BWD; break;
    }
    bad = (*st & bit) ? bit : need & ~*st;
    if (bad)
        return bad_action(err, errlen, r, i, a,
                          bad == bit                           ? "done twice"
                          : bad & DID_FWD && a->kind != PP_FWD ? "before its forward"
                          : bad & GOT_ACT                      ? "before its input activation arrived"
                          : bad & GOT_GRAD                     ? "before its output gradient arrived"
                                                               : "before its backward");
    int fused = a->kind == PP_BWD && !S->split[r][i];
    if ((fused || a->kind == PP_WGT) && wgrad_in_order(S, r, i, err, errlen)) return -1;
    *st |= (unsigned char)(bit | (fused ? WGRAD : 0));
    return 0;
}

/* Run the compute at i on rank r: its time, the slot of the picture, the
 * activation sets held and the W's pending. */
static void compute(struct sim *S, struct pp_sim *out, int r, int i)
{
    const struct pp_action *a = &S->l[r][i];
    int split = a->kind == PP_BWD && S->split[r][i];
    const int *rt = S->o.rank_t ? S->o.rank_t + 3 * r : NULL; /* (this rank's own times) */
    int tf = rt ? rt[0] : S->o.t_fwd, tb = rt ? rt[1] : S->o.t_bwd, tw = rt ? rt[2] : S->o.t_wgt;
    int t = a->kind == PP_FWD ? tf : a->kind == PP_WGT ? tw : tb + (split ? 0 : tw);
    out->slot[r][out->nslot[r]++] = (struct pp_slot){a->kind, split, a->mb, a->chunk, S->clock[r], S->clock[r] + t};
    S->clock[r] += t;
    out->busy[r] += t;
    S->live[r] += a->kind == PP_FWD ? 1 : split ? 0 : -1;
    S->pend[r] += split ? 1 : a->kind == PP_WGT ? -1 : 0;
    if (S->live[r] > out->peak[r]) out->peak[r] = S->live[r];
    if (S->pend[r] > out->wpeak[r]) out->wpeak[r] = S->pend[r];
}

/* Try to move rank r on.  Returns 1 if it moved, 0 if blocked or done, -1 on error. */
static int step(struct sim *S, struct pp_sim *out, int r, char *err, size_t errlen)
{
    const struct pp_action *l = S->l[r];
    int i = S->pc[r];
    if (i >= S->n[r]) return 0;
    if (pp_is_compute(l[i].kind)) {
        if (apply(S, r, i, err, errlen)) return -1;
        compute(S, out, r, i);
        S->pc[r]++;
        return 1;
    }
    int e = phase_end(S, r, i);
    if (!S->entered[r]) { /* post the receives (unless posted ahead), issue the sends */
        for (int j = i; j < e; j++) {
            struct chan *c = &S->ch[S->chan[r][j]];
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
        struct chan *c = &S->ch[S->chan[r][j]];
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
            const struct chan *c = &S->ch[S->chan[r][j]];
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
    for (int q = 0; S->ch && q < 6 * S->pp; q++) {
        struct chan *c = &S->ch[q];
        free(c->smb), free(c->sc), free(c->rmb), free(c->rc), free(c->issued), free(c->posted);
    }
    for (int r = 0; r < S->pp; r++) {
        if (S->seq) free(S->seq[r]);
        if (S->chan) free(S->chan[r]);
        if (S->split) free(S->split[r]);
        if (S->st) free(S->st[r]);
        if (S->wnext) free(S->wnext[r]);
    }
    free(S->ch), free(S->seq), free(S->chan), free(S->split), free(S->st), free(S->wnext);
    free(S->pc), free(S->entered), free(S->live), free(S->pend), free(S->clock);
    free(S->queue), free(S->queued);
}

void pp_sim_free(struct pp_sim *sim)
{
    for (int r = 0; sim->slot && r < sim->pp; r++) free(sim->slot[r]);
    free(sim->busy), free(sim->peak), free(sim->wpeak), free(sim->nslot), free(sim->slot);
    memset(sim, 0, sizeof *sim);
}

static int sim_alloc(struct sim *S, struct pp_sim *out)
{
    size_t pp = (size_t)S->pp;
    S->ch = calloc(6 * pp, sizeof *S->ch);
    S->seq = calloc(pp, sizeof *S->seq), S->chan = calloc(pp, sizeof *S->chan);
    S->split = calloc(pp, sizeof *S->split);
    S->st = calloc(pp, sizeof *S->st), S->wnext = calloc(pp, sizeof *S->wnext);
    S->pc = calloc(pp, sizeof(int)), S->entered = calloc(pp, sizeof(int));
    S->live = calloc(pp, sizeof(int)), S->pend = calloc(pp, sizeof(int)), S->clock = calloc(pp, sizeof(long));
    S->queue = calloc(pp, sizeof(int)), S->queued = calloc(pp, 1);
    out->busy = calloc(pp, sizeof(long)), out->peak = calloc(pp, sizeof(int)), out->wpeak = calloc(pp, sizeof(int));
    out->nslot = calloc(pp, sizeof(int));
    out->slot = calloc(pp, sizeof *out->slot);
    if (!S->ch || !S->seq || !S->chan || !S->split || !S->st || !S->wnext || !S->pc || !S->entered || !S->live || !S->pend ||
        !S->clock || !S->queue || !S->queued || !out->busy || !out->peak || !out->wpeak || !out->nslot || !out->slot)
        return -1;
    for (int r = 0; r < S->pp; r++) {
        S->seq[r] = calloc((size_t)S->n[r] + 1, sizeof(int));
        S->chan[r] = calloc((size_t)S->n[r] + 1, sizeof(int));
        S->split[r] = calloc((size_t)S->n[r] + 1, 1);
        S->st[r] = calloc((size_t)S->m * (size_t)S->v, 1);
        S->wnext[r] = calloc((size_t)S->v, sizeof(int));
        out->slot[r] = calloc((size_t)S->n[r] + 1, sizeof **out->slot);
        if (!S->seq[r] || !S->chan[r] || !S->split[r] || !S->st[r] || !S->wnext[r] || !out->slot[r]) return -1;
        pp_split_marks(S->l[r], S->n[r], S->split[r]);
    }
    return 0;
}

/* Lists without a backward or a W are an evaluation (pp_forward_only). */
static int forward_only(const struct sim *S)
{
    for (int r = 0; r < S->pp; r++)
        for (int i = 0; i < S->n[r]; i++)
            if (S->l[r][i].kind == PP_BWD || S->l[r][i].kind == PP_WGT) return 0;
    return 1;
}

/* Everything that must have happened once the lists ran to the end: the
 * forwards and their messages, and for a training step the backwards and
 * their messages and the weight gradients. */
static int check_complete(const struct sim *S, char *err, size_t errlen)
{
    int last = S->pp * S->v - 1, eval = forward_only(S);
    for (int r = 0; r < S->pp; r++)
        for (int q = 0; q < S->m * S->v; q++) {
            int mb = q / S->v, c = q % S->v, s = pp_stage_of(S->o.layout, S->pp, r, c);
            int want = DID_FWD | (s > 0 ? GOT_ACT : 0) | (s < last ? SENT_ACT : 0);
            if (!eval) want |= DID_BWD | WGRAD | (s > 0 ? SENT_GRAD : 0) | (s < last ? GOT_GRAD : 0);
            int miss = want & ~S->st[r][q];
            if (miss)
                return pp_fail(err, errlen, "rank %d never does %s of mb %d chunk %d", r,
                               pp_kind_name(miss & DID_FWD    ? PP_FWD
                                            : miss & DID_BWD  ? PP_BWD
                                            : miss & GOT_ACT  ? PP_RECV_ACT
                                            : miss & SENT_ACT ? PP_SEND_ACT
                                            : miss & GOT_GRAD ? PP_RECV_GRAD
                                            : miss & WGRAD    ? PP_WGT
                                                              : PP_SEND_GRAD),
                               mb, c);
        }
    return 0;
}

int pp_simulate(int pp, int v, int m, struct pp_action *const *lists, const int *n, const struct pp_sim_opts *opts,
                struct pp_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (pp < 1 || v < 1 || m < 1) return pp_fail(err, errlen, "pp, v and m must be at least 1");
    if (opts->t_fwd < 1 || opts->t_bwd < 1 || opts->t_wgt < 0 || opts->lookahead < 0 ||
        opts->send < PP_SEND_BUFFERED || opts->send > PP_SEND_BLOCKING ||
        (opts->layout != PP_LAYOUT_LOOP && opts->layout != PP_LAYOUT_V) || (opts->layout == PP_LAYOUT_V && v != 2))
        return pp_fail(err, errlen,
                       "bad simulator options (t_fwd, t_bwd >= 1, t_wgt >= 0, look-ahead >= 0, a send model, a "
                       "layout: the V with v = 2)");
    for (int i = 0; opts->rank_t && i < 3 * pp; i++)
        if (opts->rank_t[i] < 1) return pp_fail(err, errlen, "bad simulator options (each rank's times >= 1)");
    struct sim S = {.pp = pp, .v = v, .m = m, .cap = m * v, .l = lists, .n = n, .o = *opts};
    *out = (struct pp_sim){.pp = pp, .v = v, .m = m, .sched = PP_SCHED_NONE, .opts = *opts};
    out->opts.rank_t = NULL; /* (the caller's array: not kept) */
    int rc = sim_alloc(&S, out) ? pp_fail(err, errlen, "out of memory in the pipeline simulator")
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

int pp_zb_bubble_formula(enum pp_schedule s, int pp, int m, const struct pp_sim_opts *o, long *num, long *den)
{
    int v = s == PP_ZBV ? 2 : 1, from = s == PP_ZBV ? 2 * pp - 1 : pp;
    if ((s != PP_ZBH1 && s != PP_ZBH2 && s != PP_ZBV) || m < from || o->t_fwd != o->t_bwd || o->t_fwd != o->t_wgt)
        return -1;
    *num = pp - 1;
    *den = 3L * v * m + pp - 1;
    return 0;
}

static long gcd(long a, long b) { return b ? gcd(b, a % b) : a; }

double pp_bubble_predicted(enum pp_schedule s, const char *file, int pp, int v, int m, long *num, long *den,
                           int *formula)
{
    int f = s == PP_GPIPE || s == PP_1F1B || s == PP_INTERLEAVED;
    if (formula) *formula = f;
    if (f) return pp_bubble_formula(pp, v, m, num, den);
    struct pp_sim_opts o = {.t_fwd = 1, .t_bwd = 1, .send = PP_SEND_RENDEZVOUS, .lookahead = 1, .t_wgt = 1};
    struct pp_sim sim;
    long n = 0, d = 1;
    double b = 0;
    if (pp_simulate_schedule(s, file, pp, v, m, &o, &sim, NULL, 0) == 0) {
        b = pp_bubble(&sim, &n, &d);
        long g = gcd(n, d) ? gcd(n, d) : 1;
        n /= g, d /= g;
        pp_sim_free(&sim);
    }
    if (num) *num = n;
    if (den) *den = d;
    return b;
}

static int label(char *buf, size_t len, const struct pp_slot *s, int v)
{
    char k = s->kind == PP_FWD ? 'F' : s->kind == PP_WGT ? 'W' : 'B';
    if (v > 1) return snprintf(buf, len, "%c%dc%d", k, s->mb, s->chunk);
    return snprintf(buf, len, "%c%d", k, s->mb);
}

/* The rows of time t0 .. t1, each column cw wide after a label lw wide. */
static void print_block(FILE *f, const struct pp_sim *sim, long t0, long t1, int lw, int cw)
{
    char buf[32];
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

/* Does any rank split a backward into B and W? */
static int has_w(const struct pp_sim *sim)
{
    for (int r = 0; r < sim->pp; r++)
        for (int i = 0; i < sim->nslot[r]; i++)
            if (sim->slot[r][i].kind == PP_WGT) return 1;
    return 0;
}

/* The schedule and the times: forward and backward for lists without W
 * (a fused backward takes t_bwd + t_wgt), forward, B and W with. */
static void print_header(FILE *f, const struct pp_sim *sim)
{
    const struct pp_sim_opts *o = &sim->opts;
    fprintf(f, "%s: pp = %d, virtual_stages = %d, micro-batches = %d; ",
            sim->sched == PP_SCHED_NONE ? "pipeline" : pp_schedule_name(sim->sched), sim->pp, sim->v, sim->m);
    if (!has_w(sim)) fprintf(f, "forward %d, backward %d time units\n", o->t_fwd, o->t_bwd + o->t_wgt);
    else
        fprintf(f, "forward %d, input gradient B %d, weight gradient W %d time units (a fused backward %d)\n",
                o->t_fwd, o->t_bwd, o->t_wgt, o->t_bwd + o->t_wgt);
}

/* Under the picture: the bubble measured, by formula where there is one,
 * the peaks. */
static void print_figures(FILE *f, const struct pp_sim *sim)
{
    long num, den, fn, fd;
    double b = pp_bubble(sim, &num, &den);
    long g = gcd(num, den) ? gcd(num, den) : 1;
    fprintf(f, "bubble fraction %ld/%ld = %.4f: idle %ld of %ld rank-time units\n", num / g, den / g, b, num, den);
    if (sim->sched == PP_GPIPE || sim->sched == PP_1F1B || sim->sched == PP_INTERLEAVED) {
        double fb = pp_bubble_formula(sim->pp, sim->v, sim->m, &fn, &fd);
        fprintf(f, "by formula (p-1)/(v*m+p-1) = %ld/%ld = %.4f\n", fn, fd, fb);
    } else if (pp_zb_bubble_formula(sim->sched, sim->pp, sim->m, &sim->opts, &fn, &fd) == 0) {
        fprintf(f, "by formula (p-1)/(3*%s+p-1), the least any schedule can have = %ld/%ld = %.4f\n",
                sim->sched == PP_ZBV ? "2m" : "m", fn, fd, (double)fn / (double)fd);
    }
    int w = 0;
    fprintf(f, "peak in flight (mb, chunk) per rank:");
    for (int r = 0; r < sim->pp; r++) fprintf(f, " %d", sim->peak[r]), w |= sim->wpeak[r];
    fputc('\n', f);
    if (!w) return;
    fprintf(f, "peak of pending weight gradients (W) per rank:");
    for (int r = 0; r < sim->pp; r++) fprintf(f, " %d", sim->wpeak[r]);
    fputc('\n', f);
}

void pp_print_table(FILE *f, const struct pp_sim *sim, int width)
{
    char buf[32];
    int cw = snprintf(buf, sizeof buf, "%ld", sim->makespan > 0 ? sim->makespan - 1 : 0);
    int lw = snprintf(buf, sizeof buf, "rank %d ", sim->pp - 1);
    if (lw < 8) lw = 8;
    struct pp_slot big = {PP_FWD, 0, sim->m - 1, sim->v - 1, 0, 0};
    int lab = label(buf, sizeof buf, &big, sim->v);
    cw = (lab > cw ? lab : cw) + 1;
    int per = ((width > 0 ? width : 100) - lw) / cw;
    if (per < 1) per = 1;
    print_header(f, sim);
    for (long t0 = 0; t0 < sim->makespan; t0 += per)
        print_block(f, sim, t0, t0 + per < sim->makespan ? t0 + per : sim->makespan, lw, cw);
    print_figures(f, sim);
}
