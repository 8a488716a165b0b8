/* cp.c -- ring attention over the context-parallel ranks (cp.h). */
#include "cp.h"

#include <mpi.h>

#include "device.h"
#include "ops.h"

enum { TAG_KV_FWD = 1, TAG_KV_BWD = 2, TAG_DKV = 3 };

/* A block of keys and values: (B, Tl, 2 * kv heads * HS), the k heads then the v heads of each row. */
static size_t kv_floats(const struct cp_dims *d) { return (size_t)d->B * (size_t)d->Tl * 2 * (size_t)d->NKV * (size_t)d->HS; }

size_t cp_scratch_floats(const struct cp_dims *d)
{
    /* two blocks in flight, two partial gradients being sent, one received */
    return d->size > 1 ? 5 * ((kv_floats(d) + 15) / 16 * 16) : 0;
}

struct ring {
    int me, P, next, prev, c;           /* cp rank and size, neighbours, rows per chunk */
    int B, Tl, NH, NKV, HS, W, KW;      /* sizes; W: qkv columns, KW: a kv row */
    size_t n;                           /* floats of one block */
    float *kv[2], *dl[2], *din;
};

static struct ring ring_of(const struct cp_dims *d, float *buf)
{
    struct ring r = {.me = d->rank, .P = d->size, .c = d->Tl / 2, .B = d->B, .Tl = d->Tl, .NH = d->NH, .NKV = d->NKV,
                     .HS = d->HS};
    r.next = (r.me + 1) % r.P;
    r.prev = (r.me + r.P - 1) % r.P;
    r.W = (r.NH + 2 * r.NKV) * r.HS;
    r.KW = 2 * r.NKV * r.HS;
    r.n = kv_floats(d);
    size_t stride = (r.n + 15) / 16 * 16;
    r.kv[0] = buf;
    r.kv[1] = buf + stride;
    r.dl[0] = buf + 2 * stride;
    r.dl[1] = buf + 3 * stride;
    r.din = buf + 4 * stride;
    return r;
}

/* The chunk pairs of step s, when this rank holds the block of rank
 * src = me - s: (query rows, key rows, causal) with query chunk A = rows
 * [0, c) (chunk me), B = [c, 2c) (chunk 2P-1-me), and the block's key chunks
 * src (rows [0, c)) and 2P-1-src (rows [c, 2c)).  A query chunk sees a key
 * chunk of lower index whole, its own causally, a higher one not at all. */
struct pair { int q0, k0, causal; };
static int pairs_of(const struct ring *r, int src, struct pair p[3])
{
    int c = r->c;
    if (src == r->me) {
        p[0] = (struct pair){0, 0, 1}; /* A on A */
        p[1] = (struct pair){c, 0, 0}; /* B on A */
        p[2] = (struct pair){c, c, 1}; /* B on B */
        return 3;
    }
    if (src < r->me) {
        p[0] = (struct pair){0, 0, 0}; /* A on chunk src */
        p[1] = (struct pair){c, 0, 0}; /* B on chunk src */
        return 2;
    }
    p[0] = (struct pair){c, 0, 0}; /* B on chunk src */
    p[1] = (struct pair){c, c, 0}; /* B on chunk 2P-1-src */
    return 2;
}

void cp_attention_forward(const struct cp_dims *d, const struct device *k, struct comm *c, struct cp_time *t,
                          float *buf, float *out, float *lse, const float *qkv)
{
    struct ring r = ring_of(d, buf);
    size_t rows = (size_t)r.B * r.Tl;
    k->copy_cols(d->prec, r.kv[0], r.KW, qkv + (size_t)r.NH * r.HS, r.W, rows, r.KW, 0);
    for (int s = 0; s < r.P; s++) {
        float *cur = r.kv[s & 1], *nxt = r.kv[(s + 1) & 1];
        MPI_Request req[2];
        int nreq = 0;
        double t0 = MPI_Wtime();
        if (s + 1 < r.P) { /* the next block comes while this one is computed */
            comm_irecv_f32(c, CG_CP, nxt, r.n, r.prev, TAG_KV_FWD, &req[nreq++]);
            comm_isend_f32(c, CG_CP, cur, r.n, r.next, TAG_KV_FWD, &req[nreq++]);
        }
        int src = (r.me - s + r.P) % r.P;
        struct pair p[3];
        int np = pairs_of(&r, src, p);
        for (int i = 0; i < np; i++) {
            /* a query chunk's first pair starts its softmax: A's is step 0's first, B's step 0's second */
            int first = s == 0 && i < 2;
            k->attention_forward(d->prec, out, lse, qkv, cur, r.KW, r.B, r.Tl, p[i].q0, p[i].k0, r.c, r.NH, r.NKV,
                                 r.HS, (p[i].causal ? ATT_CAUSAL : 0) | (first ? 0 : ATT_MERGE));
        }
        if (nreq) {
            t->hidden_s += MPI_Wtime() - t0;
            t->wait_s += comm_wait(c, CG_CP, CO_RECV, 1, &req[0]) + comm_wait(c, CG_CP, CO_SEND, 1, &req[1]);
        }
    }
}

void cp_attention_backward(const struct cp_dims *d, const struct device *k, struct comm *c, struct cp_time *t,
                           float *buf, float *dqkv, const float *dout, const float *out, const float *qkv,
                           const float *lse)
{
    struct ring r = ring_of(d, buf);
    size_t rows = (size_t)r.B * r.Tl;
    k->zero(dqkv, rows * (size_t)r.W * sizeof(float));
    k->copy_cols(d->prec, r.kv[0], r.KW, qkv + (size_t)r.NH * r.HS, r.W, rows, r.KW, 0);
    MPI_Request dsend[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL}, drecv = MPI_REQUEST_NULL;
    for (int s = 0; s < r.P; s++) {
        float *cur = r.kv[s & 1], *nxt = r.kv[(s + 1) & 1], *dl = r.dl[s & 1];
        MPI_Request req[2];
        int nreq = 0;
        double t0 = MPI_Wtime(), w = 0;
        if (s + 1 < r.P) {
            comm_irecv_f32(c, CG_CP, nxt, r.n, r.prev, TAG_KV_BWD, &req[nreq++]);
            comm_isend_f32(c, CG_CP, cur, r.n, r.next, TAG_KV_BWD, &req[nreq++]);
        }
        if (dsend[s & 1] != MPI_REQUEST_NULL) w += comm_wait(c, CG_CP, CO_SEND, 1, &dsend[s & 1]); /* dl is free */
        k->zero(dl, r.n * sizeof(float));
        int src = (r.me - s + r.P) % r.P;
        struct pair p[3];
        int np = pairs_of(&r, src, p);
        for (int i = 0; i < np; i++)
            k->attention_backward(d->prec, dqkv, dl, dout, out, qkv, cur, r.KW, lse, r.B, r.Tl, p[i].q0, p[i].k0,
                                  r.c, r.NH, r.NKV, r.HS, (p[i].causal ? ATT_CAUSAL : 0) | ATT_ACCUM);
        /* the block's gradients so far, from the ranks it visited before, join this rank's share */
        if (s > 0) {
            w += comm_wait(c, CG_CP, CO_RECV, 1, &drecv);
            k->copy_cols(d->prec, dl, r.KW, r.din, r.KW, rows, r.KW, 1);
        }
        /* on to the next rank; after the last step that is the block's owner */
        comm_isend_f32(c, CG_CP, dl, r.n, r.next, TAG_DKV, &dsend[s & 1]);
        comm_irecv_f32(c, CG_CP, r.din, r.n, r.prev, TAG_DKV, &drecv);
        if (nreq) w += comm_wait(c, CG_CP, CO_RECV, 1, &req[0]) + comm_wait(c, CG_CP, CO_SEND, 1, &req[1]);
        t->hidden_s += MPI_Wtime() - t0 - w; /* (messages are in flight throughout a step of the backward) */
        t->wait_s += w;
    }
    t->wait_s += comm_wait(c, CG_CP, CO_RECV, 1, &drecv); /* this rank's own keys and values, their gradients complete */
    k->copy_cols(d->prec, dqkv + (size_t)r.NH * r.HS, r.W, r.din, r.KW, rows, r.KW, 0);
    for (int b = 0; b < 2; b++)
        if (dsend[b] != MPI_REQUEST_NULL) t->wait_s += comm_wait(c, CG_CP, CO_SEND, 1, &dsend[b]);
}
