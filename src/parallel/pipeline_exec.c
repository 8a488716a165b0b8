/* pipeline_exec.c -- the pipeline executor.
 *
 * Walks this rank's action list (pipeline.c).  Communication comes in
 * phases, the runs of send/receive actions between two computes.  On
 * entering a phase the executor posts the MPI_Irecv of that phase and of the
 * next one (look-ahead, so a neighbour's send finds its receive and the
 * transfer overlaps our compute), issues the phase's MPI_Isend, then waits
 * for the phase's receives and sends.  An activation arrives in a receive
 * buffer of its size (the model's recv) and moves into its micro-batch's
 * slot when its phase ends, after the slots sent from are freed: a slot is
 * held only by micro-batches between their forward and their backward (a
 * split backward: its W, and its gradient sent; its B keeps what W needs in
 * one of the model's pending weight gradients).  pipeline.c's simulator proves this
 * order deadlock-free for every pp, even if a send completes only once its
 * receive is posted; no blocking send/recv pair is ever issued in a fixed
 * order.  Matching is FIFO per (peer, direction): one tag per direction. */
#include "pipeline_exec.h"

#include <stdlib.h>
#include <string.h>

#include "flight.h"
#include "log.h"

enum { MAX_POSTED = 8 }; /* receives in flight: <= 2 per phase, this phase and the next */

struct posted {
    int action;          /* index of the RECV action */
    int buf;             /* an activation's: the receive buffer it lands in (else -1: into its slot) */
    MPI_Request req;
};

/* What has happened to a (mb, chunk) of a split backward this step: its
 * slot is free once both have. */
enum { EX_SPLIT = 1, EX_WGT_DONE = 2, EX_GRAD_SENT = 4 };

struct model_buffers pp_exec_init(struct pp_exec *x, enum pp_schedule s, const char *file, const struct grid *g,
                                  int v, int m)
{
    memset(x, 0, sizeof *x);
    x->sched = s;
    x->m = m;
    x->v = v;
    char err[512], why[600] = "";
    int rc = pp_schedule_build(s, file, g->pp, v, m, g->pp_rank, &x->actions, &x->n, err, sizeof err);
    if (rc) snprintf(why, sizeof why, "pipeline schedule: %s", err);
    die_all_if(g->world_comm, rc != 0, why, "see docs/pipeline.md for what each schedule allows");
    x->phase_end = xmalloc((size_t)(x->n ? x->n : 1) * sizeof *x->phase_end);
    pp_phase_ends(x->actions, x->n, x->phase_end);
    x->nrecv = g->pp < 2 ? 0 : pp_list_recv_bound(x->actions, x->n); /* (the list read once: pp_recv_bound's) */
    if (x->nrecv < 0) die("out of memory for the pipeline's receive bound");
    x->recv_busy = xcalloc((size_t)(x->nrecv ? x->nrecv : 1), sizeof *x->recv_busy);
    x->split = xcalloc((size_t)(x->n ? x->n : 1), 1);
    pp_split_marks(x->actions, x->n, x->split);
    x->state = xcalloc((size_t)m * (size_t)v, 1);
    /* (the list's own counts: pp_peak_bound's and pp_wpeak_bound's for the schedule) */
    return (struct model_buffers){pp_list_peak(x->actions, x->n), x->nrecv, pp_list_wpeak(x->actions, x->n)};
}

struct model_buffers pp_exec_init_forward(struct pp_exec *x, enum pp_schedule s, const char *file,
                                          const struct grid *g, int v, int m)
{
    struct model_buffers nb = pp_exec_init(x, s, file, g, v, m);
    x->n = pp_forward_only(x->actions, x->n);
    pp_phase_ends(x->actions, x->n, x->phase_end);
    memset(x->split, 0, (size_t)(x->n ? x->n : 1));
    x->forward_only = 1;
    nb.wslots = 0;
    return nb;
}

void pp_exec_free(struct pp_exec *x)
{
    free(x->actions);
    free(x->phase_end);
    free(x->recv_busy);
    free(x->split);
    free(x->state);
    memset(x, 0, sizeof *x);
}

static int is_recv(enum pp_kind k) { return k == PP_RECV_ACT || k == PP_RECV_GRAD; }
static int is_send(enum pp_kind k) { return k == PP_SEND_ACT || k == PP_SEND_GRAD; }

/* The chunk's output: the last block's residual stream. */
static float *chunk_output(const struct model *m, struct chunk_acts *a)
{
    size_t SC = (size_t)m->Ns * m->d.C;
    return m->d.Lc > 0 ? a->residual3 + (size_t)(m->d.Lc - 1) * SC : a->input;
}

/* Post the receives of the phase starting at i that are not posted yet. */
static void post_receives(struct pp_exec *x, int i, struct model *m, struct comm *c, struct posted *p, int *np,
                          int *next_recv)
{
    int end = x->phase_end[i];
    size_t count = (size_t)m->Ns * m->d.C;
    for (int j = i; j < end; j++) {
        const struct pp_action *a = &x->actions[j];
        if (!is_recv(a->kind) || j < *next_recv) continue;
        if (*np == MAX_POSTED) die("more than %d pipeline receives in flight", MAX_POSTED);
        float *buf;
        p[*np].buf = -1;
        if (a->kind == PP_RECV_ACT) { /* its slot is taken when the phase that receives it ends */
            int b = 0;
            while (b < x->nrecv && x->recv_busy[b]) b++;
            if (b == x->nrecv || b >= m->nrecv) die("more than %d pipeline activation receives in flight", x->nrecv);
            x->recv_busy[b] = 1;
            p[*np].buf = b;
            buf = m->recv + (size_t)b * model_recv_floats(&m->d, m->B);
        } else {
            buf = model_slot(m, a->mb, a->chunk)->dout; /* (its forward holds the slot) */
        }
        int tag = a->kind == PP_RECV_ACT ? PP_TAG_ACT : PP_TAG_GRAD;
        p[*np].action = j;
        comm_irecv_f32(c, CG_PP, buf, count, a->peer, tag, &p[*np].req);
        (*np)++;
        *next_recv = j + 1;
    }
}

/* One communication phase [i, end): receives (this and the next phase's)
 * posted, sends issued, then everything of this phase waited for. */
static void run_phase(struct pp_exec *x, int i, struct model *m, struct comm *c, struct posted *p, int *np,
                      int *next_recv, struct timers *t)
{
    int end = x->phase_end[i];
    post_receives(x, i, m, c, p, np, next_recv);
    int nxt = end; /* the next phase: after the compute that follows */
    while (nxt < x->n && !is_recv(x->actions[nxt].kind) && !is_send(x->actions[nxt].kind)) nxt++;
    if (nxt < x->n) post_receives(x, nxt, m, c, p, np, next_recv);

    MPI_Request sreq[4], rreq[MAX_POSTED];
    struct chunk_acts *sent[4];
    int ns = 0, nr = 0;
    size_t count = (size_t)m->Ns * m->d.C;
    double t0 = MPI_Wtime();
    for (int j = i; j < end; j++) {
        const struct pp_action *a = &x->actions[j];
        if (!is_send(a->kind)) continue;
        if (ns == 4) die("more than 4 pipeline sends in one phase");
        struct chunk_acts *s = model_slot(m, a->mb, a->chunk);
        const float *buf = a->kind == PP_SEND_ACT ? chunk_output(m, s) : s->dout;
        int tag = a->kind == PP_SEND_ACT ? PP_TAG_ACT : PP_TAG_GRAD;
        /* its backward is done (or, forward only, its output is the next stage's): free it once sent; a
         * split backward's once its W is done too */
        unsigned char *st = &x->state[a->mb * x->v + a->chunk];
        if (a->kind == PP_SEND_GRAD) *st |= EX_GRAD_SENT;
        int done = a->kind == PP_SEND_GRAD && (!(*st & EX_SPLIT) || (*st & EX_WGT_DONE));
        sent[ns] = done || x->forward_only ? s : NULL;
        comm_isend_f32(c, CG_PP, buf, count, a->peer, tag, &sreq[ns]);
        ns++;
    }
    /* wait for this phase's receives (posted earlier or just now), then its
     * sends; free the slots sent from, then move the activations received
     * into theirs */
    int kept = 0;
    struct posted got[MAX_POSTED];
    for (int q = 0; q < *np; q++) {
        if (p[q].action >= end) p[kept++] = p[q];
        else got[nr] = p[q], rreq[nr++] = p[q].req;
    }
    *np = kept;
    double t1 = MPI_Wtime();
    comm_wait(c, CG_PP, CO_RECV, nr, rreq);
    comm_wait(c, CG_PP, CO_SEND, ns, sreq);
    for (int q = 0; q < ns; q++)
        if (sent[q]) model_slot_release(sent[q]);
    for (int q = 0; q < nr; q++) {
        if (got[q].buf < 0) continue;
        const struct pp_action *a = &x->actions[got[q].action];
        m->k->copy(model_slot(m, a->mb, a->chunk)->input, m->recv + (size_t)got[q].buf * model_recv_floats(&m->d, m->B),
                   count * sizeof(float));
        x->recv_busy[got[q].buf] = 0;
    }
    double t2 = MPI_Wtime();
    t->total[T_PP_WAIT] += t2 - t1;
    if (ns) trace_add(x->trace, TR_SEND, -1, -1, t0, t1);
    trace_add(x->trace, TR_RECV_WAIT, -1, -1, t1, t2);
}

double pp_exec_step(struct pp_exec *x, struct model *m, struct comm *c, const struct data_source *data,
                    uint64_t start, int64_t global_batch, float dloss, struct timers *t)
{
    const struct grid *g = c->grid;
    const struct model_dims *d = &m->d;
    int ends = model_has_embedding(d) || model_has_head(d); /* these need the tokens */
    struct posted p[MAX_POSTED];
    int np = 0, next_recv = 0;
    double loss = 0;
    for (int i = 0; i < x->n;) {
        const struct pp_action *a = &x->actions[i];
        if (a->kind != PP_FWD && a->kind != PP_BWD && a->kind != PP_WGT) {
            run_phase(x, i, m, c, p, &np, &next_recv, t);
            i = x->phase_end[i];
            continue;
        }
        struct chunk_acts *s = model_slot(m, a->mb, a->chunk);
        int first = a->chunk == 0 && model_has_embedding(d); /* the first virtual stage: sends no gradient */
        flight_action(a->kind, a->mb, a->chunk);
        double t0 = MPI_Wtime();
        if (a->kind == PP_FWD) {
            if (ends) {
                timer_start(t, T_DATA);
                uint64_t sample = data_first_sample(start, global_batch, g->dp, g->dp_rank, m->B, a->mb);
                int32_t *tok = (int32_t *)m->host; /* host memory: the slot's may be the device's */
                size_t BT = (size_t)m->B * d->T; /* whole sequences: under cp the model picks its rows */
                data_batch(data, sample, m->B, tok, tok + BT);
                model_set_tokens(m, s, tok, tok + BT);
                timer_stop(t, T_DATA);
            }
            timer_start(t, T_FORWARD);
            loss += model_chunk_forward(m, c, s);
            timer_stop(t, T_FORWARD);
            if (x->forward_only && a->chunk == d->v - 1 && model_has_head(d)) { /* the loss is in */
                if (x->token_losses) model_token_losses(m, s, x->token_losses + (size_t)a->mb * m->B * d->T);
                model_slot_release(s);
            }
        } else if (a->kind == PP_BWD && x->split[i]) { /* B: the input gradients; the slot waits for W */
            x->state[a->mb * d->v + a->chunk] |= EX_SPLIT;
            timer_start(t, T_BACKWARD);
            model_chunk_backward_input(m, c, s, model_wslot(m, a->mb, a->chunk), dloss);
            timer_stop(t, T_BACKWARD);
            if (!first) m->k->copy(s->dout, m->scr.dresidual, (size_t)m->Ns * d->C * sizeof(float));
        } else { /* a fused backward, or a split one's W: the parameter gradients */
            int last = a->mb == x->m - 1, wgt = a->kind == PP_WGT; /* last: the chunk's gradients become final */
            unsigned char *st = &x->state[a->mb * d->v + a->chunk];
            if (last && x->dp) dp_arm(x->dp);
            timer_start(t, wgt ? T_WGRAD : T_BACKWARD);
            if (wgt) {
                struct chunk_wgrad *w = model_wslot_kept(m, a->mb, a->chunk);
                model_chunk_backward_weight(m, c, s, w);
                model_wslot_release(w);
                *st |= EX_WGT_DONE;
            } else {
                model_chunk_backward(m, c, s, dloss);
            }
            timer_stop(t, wgt ? T_WGRAD : T_BACKWARD);
            if (last && x->dp) dp_disarm(x->dp);
            if (first || (wgt && (*st & EX_GRAD_SENT))) model_slot_release(s); /* nothing (more) to send */
            else if (!wgt) m->k->copy(s->dout, m->scr.dresidual, (size_t)m->Ns * d->C * sizeof(float));
        }
        trace_add(x->trace, a->kind == PP_FWD ? TR_FORWARD : a->kind == PP_WGT ? TR_WGRAD : TR_BACKWARD, a->mb,
                  a->chunk, t0, MPI_Wtime());
        i++;
    }
    if (np) die("pipeline step ended with %d receives outstanding", np);
    memset(x->state, 0, (size_t)x->m * (size_t)d->v);
    return loss;
}
