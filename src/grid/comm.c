/* comm.c -- collectives with accounting.  Counts longer than INT_MAX are cut
 * into pieces, so any tensor can be reduced. */
#include "comm.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "flight.h"
#include "log.h"
#include "trace.h"

static MPI_Comm comm_of(const struct comm *c, enum comm_group g)
{
    const struct grid *gr = c->grid;
    switch (g) {
    case CG_WORLD: return gr->world_comm;
    case CG_TP: return gr->tp_comm;
    case CG_DP: return gr->dp_comm;
    case CG_PP: return gr->pp_comm;
    case CG_EMBED: return gr->embed_comm;
    case CG_CP: return gr->cp_comm;
    case CG_EP: return gr->ep_comm;
    case CG_EDP: return gr->edp_comm;
    default: break;
    }
    die("unknown communicator %d", (int)g);
}

void comm_init(struct comm *c, const struct grid *g)
{
    memset(c, 0, sizeof *c);
    c->grid = g;
    c->k = &cpu_device;
}

/* Give back every staging buffer (with the table that made them). */
static void release_buffers(struct comm *c)
{
    for (int i = 0; i < c->npool; i++) c->k->host_release(c->pool[i].p);
    if (c->stage) c->k->host_release(c->stage);
    free(c->pool);
    c->pool = NULL;
    c->npool = 0;
    c->stage = NULL;
    c->stage_n = 0;
}

void comm_use_device(struct comm *c, const struct device *k)
{
    release_buffers(c);
    c->k = k;
    c->staged = device_staged(k);
}

void comm_free(struct comm *c)
{
    release_buffers(c); /* (no request is pending after a finished step) */
    free(c->pend);
    c->pend = NULL;
    c->npend = c->cap = 0;
}

/* ------------------------------------------------------------- staging */

/* A host buffer of n floats for a blocking call (reused). */
static float *stage(struct comm *c, size_t n)
{
    if (n > c->stage_n) {
        if (c->stage) c->k->host_release(c->stage);
        c->stage = c->k->host_alloc(n * sizeof(float));
        c->stage_n = n;
    }
    return c->stage;
}

/* Model memory MPI is about to read or write itself (not staged): on a
 * device, the kernels queued so far must have finished with it. */
static void device_ready(const struct comm *c)
{
    if (c->k->on_device && !c->staged) c->k->sync();
}

/* What MPI is given for n floats of model memory at buf (at: where in the
 * stage, copied in when `in`); and the result copied back out. */
static float *mpi_view(struct comm *c, const float *buf, size_t n, size_t at, int in)
{
    if (!c->staged) return (float *)buf;
    float *h = c->stage + at;
    if (in) c->k->to_host(h, buf, n * sizeof(float));
    return h;
}

static void mpi_done(struct comm *c, float *buf, const float *h, size_t n)
{
    if (c->staged) c->k->to_device(buf, h, n * sizeof(float));
}

/* A free pool buffer of at least n floats (the smallest that fits), or a new one. */
static int pool_take(struct comm *c, size_t n)
{
    int best = -1;
    for (int i = 0; i < c->npool; i++)
        if (!c->pool[i].busy && c->pool[i].n >= n && (best < 0 || c->pool[i].n < c->pool[best].n)) best = i;
    if (best < 0) {
        struct comm_hostbuf *grown = realloc(c->pool, (size_t)(c->npool + 1) * sizeof *c->pool);
        if (!grown) die("out of memory for %d staging buffers", c->npool + 1);
        c->pool = grown;
        best = c->npool++;
        c->pool[best] = (struct comm_hostbuf){c->k->host_alloc((n ? n : 1) * sizeof(float)), n ? n : 1, 0};
    }
    c->pool[best].busy = 1;
    return best;
}

/* A non-blocking call's host buffer, finished in comm_wait: n floats, the
 * first copy_in of them copied from src. */
static float *stage_pending(struct comm *c, const float *src, float *dev, size_t n, size_t copy_in)
{
    if (c->npend == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        struct comm_staged *grown = realloc(c->pend, (size_t)c->cap * sizeof *c->pend);
        if (!grown) die("out of memory for %d staged requests", c->cap);
        c->pend = grown;
    }
    int b = pool_take(c, n);
    float *h = c->pool[b].p;
    if (copy_in) c->k->to_host(h, src, copy_in * sizeof(float));
    c->pend[c->npend] = (struct comm_staged){MPI_REQUEST_NULL, b, dev, n, 0};
    return h;
}

static void pending_started(struct comm *c, MPI_Request req) { c->pend[c->npend++].req = req; }

void comm_step_begin(struct comm *c)
{
    for (int g = 0; g < CG_COUNT; g++)
        for (int o = 0; o < CO_COUNT; o++) {
            c->total.bytes[g][o] += c->step.bytes[g][o];
            c->total.seconds[g][o] += c->step.seconds[g][o];
            c->total.calls[g][o] += c->step.calls[g][o];
        }
    memset(&c->step, 0, sizeof c->step);
}

void comm_totals(const struct comm *c, struct comm_counts *out)
{
    *out = c->total;
    for (int g = 0; g < CG_COUNT; g++)
        for (int o = 0; o < CO_COUNT; o++) {
            out->bytes[g][o] += c->step.bytes[g][o];
            out->seconds[g][o] += c->step.seconds[g][o];
            out->calls[g][o] += c->step.calls[g][o];
        }
}

static void account(struct comm *c, enum comm_group g, enum comm_op op, size_t bytes, double t0)
{
    double t1 = wtime();
    c->step.bytes[g][op] += (double)bytes;
    c->step.seconds[g][op] += t1 - t0;
    c->step.calls[g][op] += 1;
    trace_comm(c->trace, g, op, (double)bytes, t0, t1);
}

static void allreduce(struct comm *c, enum comm_group g, void *buf, size_t n, size_t elsize,
                      MPI_Datatype type, MPI_Op op, int host)
{
    MPI_Comm mc = comm_of(c, g);
    double t0 = wtime();
    flight_begin(g, CO_ALLREDUCE, -1, (double)(n * elsize));
    char *p = buf;
    if (type == MPI_FLOAT && !host) device_ready(c); /* the f32 calls take model memory */
    int model = type == MPI_FLOAT && !host && c->staged; /* model memory on a device MPI cannot read */
    if (model) stage(c, n), p = (char *)mpi_view(c, buf, n, 0, 1);
    for (size_t done = 0; done < n;) {
        size_t cnt = n - done < (size_t)INT_MAX ? n - done : (size_t)INT_MAX;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p + done * elsize, (int)cnt, type, op, mc));
        done += cnt;
    }
    if (model) mpi_done(c, buf, (const float *)p, n);
    flight_end();
    account(c, g, CO_ALLREDUCE, n * elsize, t0);
}

void comm_allreduce_sum_f32(struct comm *c, enum comm_group g, float *buf, size_t n)
{
    allreduce(c, g, buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM, 0);
}

void comm_allreduce_sum_host_f32(struct comm *c, enum comm_group g, float *buf, size_t n)
{
    allreduce(c, g, buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM, 1);
}

void comm_allreduce_sum_f64(struct comm *c, enum comm_group g, double *buf, size_t n)
{
    allreduce(c, g, buf, n, sizeof *buf, MPI_DOUBLE, MPI_SUM, 1);
}

void comm_allreduce_max_f32(struct comm *c, enum comm_group g, float *buf, size_t n)
{
    allreduce(c, g, buf, n, sizeof *buf, MPI_FLOAT, MPI_MAX, 0);
}

void comm_allreduce_max_int(struct comm *c, enum comm_group g, int *buf, size_t n)
{
    allreduce(c, g, buf, n, sizeof *buf, MPI_INT, MPI_MAX, 1);
}

static int group_size(const struct comm *c, enum comm_group g)
{
    int n;
    MPI_CHECK(MPI_Comm_size(comm_of(c, g), &n));
    return n;
}

void comm_allgather_f32(struct comm *c, enum comm_group g, float *full, const float *part, size_t n)
{
    if (n > (size_t)INT_MAX) die("all-gather of %zu elements per rank exceeds MPI's int count", n);
    double t0 = wtime();
    size_t all = n * (size_t)group_size(c, g);
    flight_begin(g, CO_ALLGATHER, -1, (double)(all * sizeof(float)));
    if (c->staged) stage(c, all + (part ? n : 0));
    device_ready(c);
    float *f = mpi_view(c, full, all, 0, !part); /* in place: this rank's part is read from full */
    const void *send = part ? (const void *)mpi_view(c, part, n, all, 1) : MPI_IN_PLACE;
    MPI_CHECK(MPI_Allgather(send, part ? (int)n : 0, part ? MPI_FLOAT : MPI_DATATYPE_NULL, f, (int)n, MPI_FLOAT,
                            comm_of(c, g)));
    mpi_done(c, full, f, all);
    flight_end();
    account(c, g, CO_ALLGATHER, all * sizeof(float), t0);
}

void comm_alltoall_int(struct comm *c, enum comm_group g, const int *send, int *recv, int n)
{
    double t0 = wtime();
    size_t bytes = (size_t)n * (size_t)group_size(c, g) * sizeof(int);
    flight_begin(g, CO_ALLTOALL, -1, (double)bytes);
    MPI_CHECK(MPI_Alltoall(send, n, MPI_INT, recv, n, MPI_INT, comm_of(c, g)));
    flight_end();
    account(c, g, CO_ALLTOALL, bytes, t0);
}

/* The floats an all-to-all's send and receive buffers span; the bytes it sends. */
static void alltoallv_extent(const struct comm *c, enum comm_group g, const int *sendcounts, const int *sdispls,
                             const int *recvcounts, const int *rdispls, size_t *ns, size_t *nr, size_t *sent)
{
    *ns = *nr = *sent = 0;
    for (int j = 0, size = group_size(c, g); j < size; j++) {
        size_t s = (size_t)sdispls[j] + (size_t)sendcounts[j], r = (size_t)rdispls[j] + (size_t)recvcounts[j];
        *ns = s > *ns ? s : *ns;
        *nr = r > *nr ? r : *nr;
        *sent += (size_t)sendcounts[j] * sizeof(float);
    }
}

void comm_alltoallv_f32(struct comm *c, enum comm_group g, const float *send, const int *sendcounts,
                        const int *sdispls, float *recv, const int *recvcounts, const int *rdispls)
{
    size_t ns, nr, sent;
    alltoallv_extent(c, g, sendcounts, sdispls, recvcounts, rdispls, &ns, &nr, &sent);
    double t0 = wtime();
    flight_begin(g, CO_ALLTOALL, -1, (double)sent);
    device_ready(c);
    if (c->staged) stage(c, ns + nr);
    const float *s = mpi_view(c, send, ns, 0, 1);
    float *r = mpi_view(c, recv, nr, ns, 0);
    MPI_CHECK(MPI_Alltoallv(s, sendcounts, sdispls, MPI_FLOAT, r, recvcounts, rdispls, MPI_FLOAT, comm_of(c, g)));
    mpi_done(c, recv, r, nr);
    flight_end();
    account(c, g, CO_ALLTOALL, sent, t0);
}

void comm_ialltoallv_f32(struct comm *c, enum comm_group g, const float *send, const int *sendcounts,
                         const int *sdispls, float *recv, const int *recvcounts, const int *rdispls,
                         MPI_Request *req)
{
    size_t ns, nr, sent;
    alltoallv_extent(c, g, sendcounts, sdispls, recvcounts, rdispls, &ns, &nr, &sent);
    if (c->staged) { /* one host buffer: the rows to send, then the rows received (copied out in comm_wait) */
        float *h = stage_pending(c, send, recv, ns + nr, ns);
        c->pend[c->npend].n = nr, c->pend[c->npend].at = ns;
        MPI_CHECK(MPI_Ialltoallv(h, sendcounts, sdispls, MPI_FLOAT, h + ns, recvcounts, rdispls, MPI_FLOAT,
                                 comm_of(c, g), req));
        pending_started(c, *req);
    } else {
        device_ready(c);
        MPI_CHECK(MPI_Ialltoallv(send, sendcounts, sdispls, MPI_FLOAT, recv, recvcounts, rdispls, MPI_FLOAT,
                                 comm_of(c, g), req));
    }
    account(c, g, CO_ALLTOALL, sent, wtime());
}

/* An all-gather of host memory: n values of elsize bytes a rank. */
static void allgather_host(struct comm *c, enum comm_group g, void *all, const void *mine, size_t n, size_t elsize,
                           MPI_Datatype type)
{
    if (n > (size_t)INT_MAX) die("all-gather of %zu elements per rank exceeds MPI's int count", n);
    double t0 = wtime();
    size_t total = n * (size_t)group_size(c, g);
    flight_begin(g, CO_ALLGATHER, -1, (double)(total * elsize));
    MPI_CHECK(MPI_Allgather(mine, (int)n, type, all, (int)n, type, comm_of(c, g)));
    flight_end();
    account(c, g, CO_ALLGATHER, total * elsize, t0);
}

void comm_allgather_u64(struct comm *c, enum comm_group g, uint64_t *all, const uint64_t *mine, size_t n)
{
    allgather_host(c, g, all, mine, n, sizeof *all, MPI_UINT64_T);
}

void comm_allgather_f64(struct comm *c, enum comm_group g, double *all, const double *mine, size_t n)
{
    allgather_host(c, g, all, mine, n, sizeof *all, MPI_DOUBLE);
}

void comm_reduce_scatter_f32(struct comm *c, enum comm_group g, float *part, const float *full, size_t n)
{
    if (n > (size_t)INT_MAX) die("reduce-scatter of %zu elements per rank exceeds MPI's int count", n);
    double t0 = wtime();
    size_t all = n * (size_t)group_size(c, g);
    flight_begin(g, CO_REDUCE_SCATTER, -1, (double)(all * sizeof(float)));
    if (c->staged) stage(c, all + n);
    device_ready(c);
    float *f = mpi_view(c, full, all, 0, 1), *pt = mpi_view(c, part, n, all, 0);
    MPI_CHECK(MPI_Reduce_scatter_block(f, pt, (int)n, MPI_FLOAT, MPI_SUM, comm_of(c, g)));
    mpi_done(c, part, pt, n);
    flight_end();
    account(c, g, CO_REDUCE_SCATTER, all * sizeof(float), t0);
}

void comm_reduce_scatter_sliced(struct comm *c, enum comm_group g, float *part, const float *full, size_t n,
                                size_t piece, float *pack)
{
    if (n <= piece) {
        comm_reduce_scatter_f32(c, g, part, full, n);
        return;
    }
    int size = group_size(c, g);
    for (size_t t = 0; t < n; t += piece) {
        size_t len = n - t < piece ? n - t : piece;
        for (int q = 0; q < size; q++) c->k->copy(pack + (size_t)q * len, full + (size_t)q * n + t, len * sizeof(float));
        comm_reduce_scatter_f32(c, g, part + t, pack, len);
    }
}

void comm_allgather_sliced(struct comm *c, enum comm_group g, float *full, size_t n, size_t piece, float *pack)
{
    if (n <= piece) {
        comm_allgather_f32(c, g, full, NULL, n);
        return;
    }
    int size = group_size(c, g), me;
    MPI_CHECK(MPI_Comm_rank(comm_of(c, g), &me));
    for (size_t t = 0; t < n; t += piece) {
        size_t len = n - t < piece ? n - t : piece;
        comm_allgather_f32(c, g, pack, full + (size_t)me * n + t, len);
        for (int q = 0; q < size; q++)
            if (q != me) c->k->copy(full + (size_t)q * n + t, pack + (size_t)q * len, len * sizeof(float));
    }
}

void comm_iallgatherv_f32(struct comm *c, enum comm_group g, float *buf, const int *counts, const int *displs,
                          MPI_Request *req)
{
    size_t n = 0;
    for (int i = 0, size = group_size(c, g); i < size; i++)
        if ((size_t)displs[i] + (size_t)counts[i] > n) n = (size_t)displs[i] + (size_t)counts[i];
    if (c->staged) { /* on a host copy of the whole buffer, copied back in comm_wait */
        float *h = stage_pending(c, buf, buf, n, n);
        MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h, counts, displs, MPI_FLOAT, comm_of(c, g), req));
        pending_started(c, *req);
    } else {
        device_ready(c);
        MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, comm_of(c, g),
                                  req));
    }
    account(c, g, CO_ALLGATHER, n * sizeof(float), wtime());
}

void comm_allgatherv_f32(struct comm *c, enum comm_group g, float *buf, const int *counts, const int *displs)
{
    MPI_Request req;
    comm_iallgatherv_f32(c, g, buf, counts, displs, &req);
    comm_wait(c, g, CO_ALLGATHER, 1, &req);
}

/* Runs sent and received at ring step s, and the part of either in chunk k. */
static int ring_out(const struct comm_ring *r) { return ((r->me - r->step - 1) % r->size + r->size) % r->size; }
static int ring_in(const struct comm_ring *r) { return ((r->me - r->step - 2) % r->size + r->size) % r->size; }
static size_t ring_part(const struct comm_ring *r, int run, size_t *at)
{
    size_t n = (size_t)r->counts[run], lo = (size_t)r->chunk * r->piece;
    *at = (size_t)r->displs[run] + lo;
    return lo < n ? (n - lo < r->piece ? n - lo : r->piece) : 0;
}

/* Post chunk r->chunk of step r->step: send of the outgoing run, receive of the incoming one into recv. */
static void ring_post(struct comm *c, struct comm_ring *r)
{
    int p = r->size;
    size_t at_out, at_in, out = ring_part(r, ring_out(r), &at_out), in = ring_part(r, ring_in(r), &at_in);
    MPI_Comm mc = comm_of(c, r->g);
    if (!c->staged) device_ready(c); /* (the previous chunk's sum is computed before MPI reads it) */
    MPI_CHECK(MPI_Irecv(r->recv, (int)in, MPI_FLOAT, (r->me + p - 1) % p, r->tag, mc, &r->req[0]));
    MPI_CHECK(MPI_Isend(r->buf + at_out, (int)out, MPI_FLOAT, (r->me + 1) % p, r->tag, mc, &r->req[1]));
}

void comm_ring_start(struct comm *c, struct comm_ring *r, enum comm_group g, float *buf, const int *counts,
                     const int *displs, float *recv, size_t piece, int tag)
{
    memset(r, 0, sizeof *r);
    r->g = g;
    r->counts = counts;
    r->displs = displs;
    r->tag = tag;
    r->piece = piece > 0 ? piece : 1;
    if (r->piece > (size_t)INT_MAX) r->piece = (size_t)INT_MAX;
    r->size = group_size(c, g);
    MPI_CHECK(MPI_Comm_rank(comm_of(c, g), &r->me));
    size_t most = 0;
    for (int i = 0; i < r->size; i++) {
        if ((size_t)displs[i] + (size_t)counts[i] > r->n) r->n = (size_t)displs[i] + (size_t)counts[i];
        if ((size_t)counts[i] > most) most = (size_t)counts[i];
    }
    r->chunks = most == 0 ? 1 : (int)((most + r->piece - 1) / r->piece); /* every step, on every rank alike */
    r->buf = buf;
    r->recv = recv;
    if (c->staged) { /* the ring runs on host copies; the result goes back when done */
        r->dev = buf;
        r->hbuf = pool_take(c, r->n);
        r->hrecv = pool_take(c, r->piece);
        r->buf = c->pool[r->hbuf].p;
        r->recv = c->pool[r->hrecv].p;
        c->k->to_host(r->buf, buf, r->n * sizeof(float));
    }
    r->active = r->size > 1;
    if (r->active) ring_post(c, r);
    account(c, g, CO_REDUCE_SCATTER, r->n * sizeof(float), wtime());
}

int comm_ring_progress(struct comm *c, struct comm_ring *r, int block)
{
    while (r->active) {
        int done = 1;
        size_t at, cnt = ring_part(r, ring_in(r), &at);
        if (block) {
            double t0 = wtime();
            flight_begin(r->g, CO_REDUCE_SCATTER, (r->me + r->size - 1) % r->size, (double)cnt * sizeof(float));
            MPI_CHECK(MPI_Waitall(2, r->req, MPI_STATUSES_IGNORE));
            flight_end();
            c->step.seconds[r->g][CO_REDUCE_SCATTER] += wtime() - t0;
        } else {
            MPI_CHECK(MPI_Testall(2, r->req, &done, MPI_STATUSES_IGNORE));
        }
        if (!done) return 0;
        float *dst = r->buf + at;
        if (c->staged) /* host copies: summed here */
            for (size_t i = 0; i < cnt; i++) dst[i] += r->recv[i];
        else c->k->residual_forward(PREC_FP32, dst, dst, r->recv, cnt);
        if (++r->chunk == r->chunks) r->chunk = 0, r->step++;
        if (r->step < r->size - 1) ring_post(c, r);
        else r->active = 0;
    }
    if (c->staged && r->dev) { /* this rank's run back to the model buffer, the host buffers to the pool */
        c->k->to_device(r->dev + r->displs[r->me], r->buf + r->displs[r->me],
                        (size_t)r->counts[r->me] * sizeof(float));
        c->pool[r->hbuf].busy = c->pool[r->hrecv].busy = 0;
        r->dev = NULL;
    }
    return 1;
}

void comm_iallreduce_sum_f32(struct comm *c, enum comm_group g, float *buf, size_t n, MPI_Request *req)
{
    if (c->staged) die("a non-blocking all-reduce of model memory that MPI cannot read (staged)");
    if (n > (size_t)INT_MAX) die("a non-blocking all-reduce of %zu elements exceeds MPI's int count", n);
    device_ready(c);
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, comm_of(c, g), req));
    account(c, g, CO_ALLREDUCE, n * sizeof(float), wtime());
}

void comm_progress(struct comm *c, int n, MPI_Request *reqs)
{
    int done;
    if (c->staged || n <= 0) return;
    MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
}

static int p2p_count(size_t n)
{
    if (n > (size_t)INT_MAX) die("a point-to-point message of %zu elements exceeds MPI's int count", n);
    return (int)n;
}

static void note_p2p(struct comm *c, MPI_Request req, int peer, int tag, size_t bytes)
{
    c->p2p[c->np2p++ % COMM_P2P_NOTES] = (struct comm_p2p){req, peer, tag, bytes};
}

/* Tell the flight recorder which of the posted messages a wait is for. */
static void flight_messages(const struct comm *c, int n, const MPI_Request *reqs)
{
    unsigned known = c->np2p < COMM_P2P_NOTES ? c->np2p : COMM_P2P_NOTES;
    for (int i = 0; i < n; i++)
        for (unsigned j = 0; j < known && reqs[i] != MPI_REQUEST_NULL; j++) {
            const struct comm_p2p *q = &c->p2p[(c->np2p - 1 - j) % COMM_P2P_NOTES]; /* the newest first: */
            if (q->req == reqs[i]) {                                                  /* handles are reused */
                flight_message(q->peer, q->tag, (double)q->bytes);
                break;
            }
        }
}

void comm_isend_f32(struct comm *c, enum comm_group g, const float *buf, size_t n, int peer, int tag,
                    MPI_Request *req)
{
    if (c->staged) {
        float *h = stage_pending(c, buf, NULL, n, n);
        MPI_CHECK(MPI_Isend(h, p2p_count(n), MPI_FLOAT, peer, tag, comm_of(c, g), req));
        pending_started(c, *req);
    } else {
        device_ready(c);
        MPI_CHECK(MPI_Isend(buf, p2p_count(n), MPI_FLOAT, peer, tag, comm_of(c, g), req));
    }
    note_p2p(c, *req, peer, tag, n * sizeof(float));
    account(c, g, CO_SEND, n * sizeof(float), wtime()); /* the time: in comm_wait */
}

void comm_irecv_f32(struct comm *c, enum comm_group g, float *buf, size_t n, int peer, int tag, MPI_Request *req)
{
    if (c->staged) {
        float *h = stage_pending(c, NULL, buf, n, 0);
        MPI_CHECK(MPI_Irecv(h, p2p_count(n), MPI_FLOAT, peer, tag, comm_of(c, g), req));
        pending_started(c, *req);
    } else {
        device_ready(c);
        MPI_CHECK(MPI_Irecv(buf, p2p_count(n), MPI_FLOAT, peer, tag, comm_of(c, g), req));
    }
    note_p2p(c, *req, peer, tag, n * sizeof(float));
    account(c, g, CO_RECV, n * sizeof(float), wtime()); /* the time: in comm_wait */
}

/* Finish the staged calls among reqs (before they are waited for: the
 * handles become MPI_REQUEST_NULL) once they are complete. */
static int staged_of(const struct comm *c, MPI_Request r)
{
    for (int i = 0; i < c->npend; i++)
        if (c->pend[i].req == r) return i;
    return -1;
}

static void finish_staged(struct comm *c, const int *which, int n)
{
    for (int i = 0; i < n; i++) {
        if (which[i] < 0) continue;
        struct comm_staged *s = &c->pend[which[i]];
        if (s->dev) c->k->to_device(s->dev, c->pool[s->buf].p + s->at, s->n * sizeof(float));
        c->pool[s->buf].busy = 0;
        s->buf = -1;
    }
    int kept = 0; /* drop the finished entries */
    for (int i = 0; i < c->npend; i++)
        if (c->pend[i].buf >= 0) c->pend[kept++] = c->pend[i];
    c->npend = kept;
}

double comm_wait(struct comm *c, enum comm_group g, enum comm_op op, int n, MPI_Request *reqs)
{
    if (n == 0) return 0; /* (nothing to wait for: no call for the flight recorder, the trace or the counters) */
    double t0 = wtime();
    flight_begin(g, op, -1, 0);
    if (op == CO_SEND || op == CO_RECV) flight_messages(c, n, reqs);
    int *which = NULL;
    if (c->npend) {
        which = xmalloc((size_t)n * sizeof *which);
        for (int i = 0; i < n; i++) which[i] = staged_of(c, reqs[i]);
    }
    MPI_CHECK(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
    if (which) finish_staged(c, which, n), free(which);
    double t1 = wtime(), dt = t1 - t0;
    c->step.seconds[g][op] += dt;
    flight_end();
    trace_comm(c->trace, g, op, 0, t0, t1); /* the wait (its bytes are counted where the call began) */
    return dt;
}

void comm_print_summary(const struct comm *c, FILE *f)
{
    enum { NV = CG_COUNT * CO_COUNT };
    double bytes[NV], secs[NV], calls[NV], smin[NV], smax[NV], ssum[NV], bsum[NV], csum[NV];
    struct comm_counts t;
    comm_totals(c, &t);
    for (int g = 0; g < CG_COUNT; g++)
        for (int o = 0; o < CO_COUNT; o++) {
            int i = g * CO_COUNT + o;
            bytes[i] = t.bytes[g][o];
            secs[i] = t.seconds[g][o];
            calls[i] = (double)t.calls[g][o];
        }
    MPI_Comm w = c->grid->world_comm;
    MPI_CHECK(MPI_Reduce(secs, smin, NV, MPI_DOUBLE, MPI_MIN, 0, w));
    MPI_CHECK(MPI_Reduce(secs, smax, NV, MPI_DOUBLE, MPI_MAX, 0, w));
    MPI_CHECK(MPI_Reduce(secs, ssum, NV, MPI_DOUBLE, MPI_SUM, 0, w));
    MPI_CHECK(MPI_Reduce(bytes, bsum, NV, MPI_DOUBLE, MPI_SUM, 0, w));
    MPI_CHECK(MPI_Reduce(calls, csum, NV, MPI_DOUBLE, MPI_SUM, 0, w));
    if (c->grid->rank != 0) return;
    int n = c->grid->world;
    fprintf(f, "communication (per rank; time min / avg / max over %d ranks):\n", n);
    fprintf(f, "  %-6s %-15s %10s %12s %10s %10s %10s\n", "comm", "operation", "calls", "MiB", "min s",
            "avg s", "max s");
    int any = 0;
    for (int i = 0; i < NV; i++) {
        if (csum[i] == 0) continue;
        any = 1;
        fprintf(f, "  %-6s %-15s %10.0f %12.2f %10.3f %10.3f %10.3f\n",
                comm_group_name((enum comm_group)(i / CO_COUNT)), comm_op_name((enum comm_op)(i % CO_COUNT)),
                csum[i] / n, bsum[i] / n / (1024.0 * 1024.0), smin[i], ssum[i] / n, smax[i]);
    }
    if (!any) fprintf(f, "  (none)\n");
}
