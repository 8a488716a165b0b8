/* model_acts.c -- activations: what a slot keeps of each layer for the
 * backward (fp32, or packed in 16 bits under bf16/fp16, LayerNorm
 * statistics always fp32), the shared one-layer scratch, and the slots of
 * the micro-batches in flight. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "model_internal.h"

float *model_carve(float **cursor, size_t n)
{
    float *p = *cursor;
    *cursor += (n + 15) / 16 * 16; /* keep every tensor 64-byte aligned */
    return p;
}

/* The fields of one layer's activations, `layers` of them per field; stat
 * marks the statistics (the norms', attention's log-sum-exp), which stay
 * fp32 whatever the precision. */
enum { LAYER_FIELDS = 12 };
struct act_field { float **p; size_t n; int stat; };
static void layer_fields(struct act_field *t, struct layer_acts *la, const struct model_dims *d, int B,
                         size_t layers)
{
    size_t N = (size_t)B * d->Tl, C = (size_t)d->C, Cl = C / (size_t)d->tp, S = d->sp ? N / (size_t)d->tp : N;
    size_t NHl = (size_t)model_q_heads(d), n = layers, M = d->llama ? 0 : S;
    struct act_field f[LAYER_FIELDS] = {
        {&la->ln1, n * N * C, 0}, {&la->ln1_mean, n * M, 1}, {&la->ln1_rstd, n * S, 1},
        {&la->qkv, n * N * (size_t)model_qkv_cols(d), 0}, {&la->atty, n * N * Cl, 0},
        {&la->lse, n * B * NHl * (size_t)d->Tl, 1}, {&la->residual2, n * S * C, 0},
        {&la->ln2, n * N * C, 0}, {&la->ln2_mean, n * M, 1}, {&la->ln2_rstd, n * S, 1},
        {&la->fch, n * N * (size_t)model_fc_cols(d), 0}, {&la->fch_gelu, n * N * (size_t)model_hidden_cols(d), 0},
    };
    memcpy(t, f, sizeof f);
}

/* Lay out one layer's activations, `layers` of them per field, from mem
 * (NULL: just count).  Returns the floats used. */
static size_t layer_layout(struct layer_acts *la, float *mem, const struct model_dims *d, int B, size_t layers)
{
    struct act_field t[LAYER_FIELDS];
    layer_fields(t, la, d, B, layers);
    size_t total = 0;
    for (int i = 0; i < LAYER_FIELDS; i++) {
        *t[i].p = mem && t[i].n ? mem + total : NULL;
        total += (t[i].n + 15) / 16 * 16;
    }
    return total;
}

/* bf16/fp16: a stored layer is kept packed in 16-bit elements (the
 * statistics as the two halves of their fp32 bits): its size in uint16. */
static size_t packed_layer_u16(const struct model_dims *d, int B)
{
    struct layer_acts probe;
    struct act_field t[LAYER_FIELDS];
    layer_fields(t, &probe, d, B, 1);
    size_t total = 0;
    for (int i = 0; i < LAYER_FIELDS; i++) total += ((t[i].stat ? 2 : 1) * t[i].n + 31) / 32 * 32;
    return total;
}

/* Store one layer's activations (la, computed in fp32 containers holding
 * values of the format) into dst, or load them back: exact both ways. */
static void pack_layer(const struct model *m, uint16_t *dst, struct layer_acts *la)
{
    struct act_field t[LAYER_FIELDS];
    layer_fields(t, la, &m->d, m->B, 1);
    for (int i = 0; i < LAYER_FIELDS; i++) {
        if (t[i].stat) m->k->copy(dst, *t[i].p, t[i].n * sizeof(float));
        else if (t[i].n) m->k->lp_pack(m->d.prec, dst, *t[i].p, t[i].n);
        dst += ((t[i].stat ? 2 : 1) * t[i].n + 31) / 32 * 32;
    }
}

static void unpack_layer(const struct model *m, struct layer_acts *la, const uint16_t *src)
{
    struct act_field t[LAYER_FIELDS];
    layer_fields(t, la, &m->d, m->B, 1);
    for (int i = 0; i < LAYER_FIELDS; i++) {
        if (t[i].stat) m->k->copy(*t[i].p, src, t[i].n * sizeof(float));
        else if (t[i].n) m->k->lp_unpack(m->d.prec, *t[i].p, src, t[i].n);
        src += ((t[i].stat ? 2 : 1) * t[i].n + 31) / 32 * 32;
    }
}

/* Are the stored layers' activations kept packed (bf16/fp16, unless
 * train.pack_activations = .false.: fp32 containers, as fp32 keeps them)? */
static int packed(const struct model_dims *d) { return d->pack_acts; }

/* One micro-batch's activations for one chunk (head buffers only where the
 * head lives), carved from mem (NULL: just count). */
static size_t slot_layout(struct chunk_acts *a, float *mem, const struct model_dims *d, int B)
{
    size_t N = (size_t)B * d->Tl, C = (size_t)d->C, Lc = (size_t)d->Lc, tp = (size_t)d->tp;
    size_t S = d->sp ? N / tp : N, H = model_has_head(d) ? 1 : 0, M = d->llama ? 0 : S;
    struct { float **p; size_t n; } t[] = {
        {(float **)&a->inputs, N}, {(float **)&a->targets, N},
        {&a->input, S * C}, {&a->dout, S * C}, {&a->residual3, Lc * S * C},
        {&a->lnf, H * N * C}, {&a->lnf_mean, H * M}, {&a->lnf_rstd, H * S},
        {&a->logits, H * N * (size_t)d->Vp / tp}, {&a->ce_max, H * N}, {&a->ce_sums, H * 2 * N},
        {&a->losses, H * N},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (mem) *t[i].p = t[i].n ? mem + total : NULL; /* int32 and float are both 4 bytes */
        total += (t[i].n + 15) / 16 * 16;
    }
    /* the layers not recomputed in full keep everything (attention only its
     * log-sum-exp: nothing for selective recomputation to redo); in bf16/fp16
     * packed in 16 bits */
    size_t kept = Lc - (size_t)d->Lr;
    if (packed(d)) {
        memset(&a->stored, 0, sizeof a->stored);
        size_t u16 = kept * packed_layer_u16(d, B);
        a->packed = mem && u16 ? (uint16_t *)(mem + total) : NULL;
        total += (u16 / 2 + 15) / 16 * 16;
    } else {
        a->packed = NULL;
        total += layer_layout(&a->stored, mem ? mem + total : NULL, d, B, kept);
    }
    a->mb = -1;
    return total;
}

static size_t scratch_layout(struct scratch *s, float *mem, const struct model_dims *d, int B)
{
    size_t N = (size_t)B * d->Tl, C = (size_t)d->C, Cl = C / (size_t)d->tp, S = d->sp ? N / (size_t)d->tp : N;
    size_t E = (size_t)d->E, K = (size_t)d->K, Kx = (size_t)model_moe_rows(d);
    struct cp_dims cd = model_cp_dims(d, B);
    struct { float **p; size_t n; } t[] = {
        {&s->full, N * C}, {&s->part, S * C}, {&s->dresidual, S * C}, {&s->dfull, N * C},
        {&s->dln_full, N * C}, {&s->dln_part, S * C}, {&s->datty, N * Cl}, {&s->dqkv, N * (size_t)model_qkv_cols(d)},
        {&s->dfch, N * (size_t)model_fc_cols(d)}, {&s->dfch_gelu, N * (size_t)model_hidden_cols(d)},
        {&s->cp, cp_scratch_floats(&cd)},
        {&s->moe_x, N * Kx * C}, {&s->moe_y, N * Kx * C}, {&s->moe_logits, N * E}, {&s->moe_gate, E ? N : 0},
        {&s->moe_wslot, N * K}, {&s->moe_wrow, N * Kx}, {&s->moe_dot, E ? N * Kx + N : 0},
        {(float **)&s->moe_row, N * K}, {(float **)&s->moe_token, N * K}, /* (int32 in float-sized places) */
        {&s->moe_send, d->ep > 1 ? N * K * C : 0}, {&s->moe_wsend, d->ep > 1 ? N * K : 0},
        {&s->moe_dwl, d->ep > 1 ? N * K : 0},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (mem) *t[i].p = t[i].n ? mem + total : NULL;
        total += (t[i].n + 15) / 16 * 16;
    }
    /* one layer's worth for the recomputed ones (full) and the packed ones (bf16/fp16) */
    if (d->recompute == RECOMPUTE_FULL || packed(d)) total += layer_layout(&s->layer, mem ? mem + total : NULL, d, B, 1);
    else memset(&s->layer, 0, sizeof s->layer);
    return total;
}

/* ------------------------------------------------ pending weight gradients */

/* One layer's struct layer_wgrad from mem (NULL: just count); the inputs
 * only for a layer recomputed in full.  Returns the floats used. */
static size_t layer_wgrad_layout(struct layer_wgrad *w, float *mem, const struct model_dims *d, int B,
                                 int recomputed)
{
    size_t N = (size_t)B * d->Tl, C = (size_t)d->C, Cl = C / (size_t)d->tp, S = d->sp ? N / (size_t)d->tp : N;
    size_t M = d->llama ? 0 : S, r = recomputed ? 1 : 0;
    memset(w, 0, sizeof *w);
    struct { float **p; size_t n; } t[] = {
        {&w->dfcproj, N * C}, {&w->dfch, N * (size_t)model_fc_cols(d)}, {&w->dln2, S * C},
        {&w->dattproj, N * C}, {&w->dqkv, N * (size_t)model_qkv_cols(d)}, {&w->dln1, S * C},
        {&w->in.ln1, r * N * C}, {&w->in.ln1_mean, r * M}, {&w->in.ln1_rstd, r * S}, {&w->in.atty, r * N * Cl},
        {&w->in.residual2, r * S * C}, {&w->in.ln2, r * N * C}, {&w->in.ln2_mean, r * M},
        {&w->in.ln2_rstd, r * S}, {&w->in.fch_gelu, r * N * (size_t)model_hidden_cols(d)},
        {&w->moe_logits, N * (size_t)d->E}, {&w->moe_gate, d->E && d->F && d->shared_gate ? N : 0},
        {&w->moe_dlogits, N * (size_t)d->E}, {&w->moe_dgate, d->E && d->F && d->shared_gate ? N : 0},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        *t[i].p = mem && t[i].n ? mem + total : NULL;
        total += (t[i].n + 15) / 16 * 16;
    }
    return total;
}

/* The chunk's layers (the first Lr recomputed), then the head's and the
 * embedding's output gradients where this rank has them. */
static size_t wslot_layout(struct chunk_wgrad *w, float *mem, const struct model_dims *d, int B)
{
    struct layer_wgrad probe;
    size_t N = (size_t)B * d->Tl, SC = (d->sp ? N / (size_t)d->tp : N) * (size_t)d->C, Lr = (size_t)d->Lr;
    size_t total = Lr * layer_wgrad_layout(&probe, NULL, d, B, 1) +
                   ((size_t)d->Lc - Lr) * layer_wgrad_layout(&probe, NULL, d, B, 0);
    w->mem = mem;
    w->dlnf = mem && model_has_head(d) ? mem + total : NULL;
    total += model_has_head(d) ? (SC + 15) / 16 * 16 : 0;
    w->demb = mem && model_has_embedding(d) ? mem + total : NULL;
    total += model_has_embedding(d) ? (SC + 15) / 16 * 16 : 0;
    w->mb = -1;
    return total;
}

void model_layer_wgrad(const struct model *m, const struct chunk_wgrad *w, int i, struct layer_wgrad *lw)
{
    struct layer_wgrad probe;
    const struct model_dims *d = &m->d;
    size_t big = layer_wgrad_layout(&probe, NULL, d, m->B, 1), small = layer_wgrad_layout(&probe, NULL, d, m->B, 0);
    size_t at = i < d->Lr ? (size_t)i * big : (size_t)d->Lr * big + (size_t)(i - d->Lr) * small;
    layer_wgrad_layout(lw, w->mem + at, d, m->B, i < d->Lr);
}

size_t model_wslot_floats(const struct model_dims *d, int B)
{
    struct chunk_wgrad probe;
    return wslot_layout(&probe, NULL, d, B);
}

struct chunk_wgrad *model_wslot(struct model *m, int mb, int chunk)
{
    struct chunk_wgrad *free_slot = NULL;
    for (int i = 0; i < m->nwslots; i++) {
        if (m->wslot[i].mb == mb && m->wslot[i].chunk == chunk) return &m->wslot[i];
        if (m->wslot[i].mb < 0 && !free_slot) free_slot = &m->wslot[i];
    }
    if (!free_slot)
        die("no free weight-gradient buffer for micro-batch %d, chunk %d (%d pending): the schedule defers more "
            "weight gradients than planned", mb, chunk, m->nwslots);
    free_slot->mb = mb;
    free_slot->chunk = chunk;
    return free_slot;
}

struct chunk_wgrad *model_wslot_kept(struct model *m, int mb, int chunk)
{
    for (int i = 0; i < m->nwslots; i++)
        if (m->wslot[i].mb == mb && m->wslot[i].chunk == chunk) return &m->wslot[i];
    die("the weight gradient of micro-batch %d, chunk %d has no B before it on this rank (a schedule the simulator "
        "should have refused)", mb, chunk);
}

void model_wslot_release(struct chunk_wgrad *w) { w->mb = -1; }

/* ------------------------------------------------------------ the buffers */

size_t model_slot_floats(const struct model_dims *d, int B)
{
    struct chunk_acts probe;
    return slot_layout(&probe, NULL, d, B);
}

size_t model_scratch_floats(const struct model_dims *d, int B)
{
    struct scratch probe;
    return scratch_layout(&probe, NULL, d, B);
}

size_t model_recv_floats(const struct model_dims *d, int B)
{
    return ((size_t)B * d->Tl / (d->sp ? (size_t)d->tp : 1) * d->C + 15) / 16 * 16;
}

void model_acts_alloc(struct model *m, struct model_buffers nb)
{
    size_t per = model_slot_floats(&m->d, m->B), scr = model_scratch_floats(&m->d, m->B);
    size_t rcv = model_recv_floats(&m->d, m->B), wper = model_wslot_floats(&m->d, m->B);
    size_t slots = per * (size_t)nb.slots, wslots = wper * (size_t)nb.wslots;
    size_t total = slots + wslots + scr + rcv * (size_t)nb.recv;
    float *mem = m->k->alloc(total * sizeof(float));
    m->nslots = nb.slots;
    m->slot = xcalloc((size_t)nb.slots, sizeof *m->slot);
    for (int i = 0; i < nb.slots; i++) slot_layout(&m->slot[i], mem + per * (size_t)i, &m->d, m->B);
    m->nwslots = nb.wslots;
    m->wslot = xcalloc((size_t)(nb.wslots ? nb.wslots : 1), sizeof *m->wslot);
    for (int i = 0; i < nb.wslots; i++) wslot_layout(&m->wslot[i], mem + slots + wper * (size_t)i, &m->d, m->B);
    scratch_layout(&m->scr, mem + slots + wslots, &m->d, m->B);
    m->nrecv = nb.recv;
    m->recv = nb.recv ? mem + slots + wslots + scr : NULL;
    m->act_bytes = total * sizeof(float);
}

struct chunk_acts *model_slot(struct model *m, int mb, int chunk)
{
    struct chunk_acts *free_slot = NULL;
    for (int i = 0; i < m->nslots; i++) {
        if (m->slot[i].mb == mb && m->slot[i].chunk == chunk) return &m->slot[i];
        if (m->slot[i].mb < 0 && !free_slot) free_slot = &m->slot[i];
    }
    if (!free_slot)
        die("no free activation slot for micro-batch %d, chunk %d (%d in flight): the schedule holds more "
            "micro-batches than planned", mb, chunk, m->nslots);
    free_slot->mb = mb;
    free_slot->chunk = chunk;
    return free_slot;
}

void model_slot_release(struct chunk_acts *a) { a->mb = -1; }

/* Where layer i of slot a's chunk keeps its activations: the shared
 * one-layer scratch if it is recomputed in full, else its place among the
 * slot's stored layers. */
void model_layer_acts(const struct model *m, const struct chunk_acts *a, int i, struct layer_acts *la)
{
    const struct model_dims *d = &m->d;
    if (i < d->Lr || packed(d)) { /* recomputed, or (un)packed through the scratch */
        *la = m->scr.layer;
        return;
    }
    size_t at = (size_t)(i - d->Lr), N = (size_t)m->N, S = (size_t)m->Ns, C = (size_t)d->C;
    size_t Cl = C / (size_t)d->tp, lse = (size_t)m->B * (size_t)model_q_heads(d) * d->Tl;
    size_t M = d->llama ? 0 : S;
    const struct layer_acts *st = &a->stored;
    la->ln1 = st->ln1 + at * N * C;
    la->ln1_mean = d->llama ? NULL : st->ln1_mean + at * M;
    la->ln1_rstd = st->ln1_rstd + at * S;
    la->qkv = st->qkv + at * N * (size_t)model_qkv_cols(d);
    la->atty = st->atty + at * N * Cl;
    la->lse = st->lse + at * lse;
    la->residual2 = st->residual2 + at * S * C;
    la->ln2 = st->ln2 + at * N * C;
    la->ln2_mean = d->llama ? NULL : st->ln2_mean + at * M;
    la->ln2_rstd = st->ln2_rstd + at * S;
    la->fch = st->fch + at * N * (size_t)model_fc_cols(d);
    la->fch_gelu = st->fch_gelu + at * N * (size_t)model_hidden_cols(d);
}

static uint16_t *packed_at(const struct model *m, const struct chunk_acts *a, int i)
{
    return a->packed + (size_t)(i - m->d.Lr) * packed_layer_u16(&m->d, m->B);
}

void model_pack_pending(struct model *m)
{
    if (!m->scr_pending) return;
    struct layer_acts la = m->scr.layer;
    pack_layer(m, packed_at(m, m->scr_pending, m->scr_pending_layer), &la);
    m->scr_pending = NULL;
}

void model_pack_layer(struct model *m, struct chunk_acts *a, int i)
{
    const struct model_dims *d = &m->d;
    if (!packed(d) || i < d->Lr) return; /* (a recomputation stores nothing: i < Lr) */
    model_pack_pending(m);
    m->scr_pending = a;
    m->scr_pending_layer = i;
}

void model_unpack_layer(struct model *m, struct chunk_acts *a, int i, int keep_packed)
{
    const struct model_dims *d = &m->d;
    if (!packed(d) || i < d->Lr) return;
    if (m->scr_pending == a && m->scr_pending_layer == i) { /* the scratch holds it */
        if (keep_packed) model_pack_pending(m);
        m->scr_pending = NULL;
        return;
    }
    model_pack_pending(m);
    struct layer_acts la = m->scr.layer;
    unpack_layer(m, &la, packed_at(m, a, i));
}
