/* plan_advice.c -- what to change when a run does not fit: single changes
 * to the deck, each re-planned, and a chain of them when none fits alone. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "model.h"
#include "plan_internal.h"

/* ------------------------------------------------------------ suggestions */

/* Change one key of c as a deck would ("train.recompute='full'"): an ENUM's word and its enum together. */
static void set(struct config *c, const char *assignment)
{
    struct deck_error e;
    if (config_override(c, assignment, &e) != 0) die("the planner's change %s: %s", assignment, e.what);
}

int plan_validate(const struct config *cfg, int world, struct deck_error *err)
{
    struct config c = *cfg;
    set(&c, "train.device='cpu'"); /* the plan's arithmetic is the same on any device */
    return config_validate(&c, world, err);
}

struct change {
    struct config cfg;
    int world;
    char what[160];
    size_t peak;
};

/* Re-plan c; 0 if it is a valid deck that lowers the peak below `than`. */
static int replan(struct change *c, size_t than)
{
    struct deck_error err;
    struct plan q;
    char e[256];
    if (plan_validate(&c->cfg, c->world, &err) != 0) return -1;
    if (plan_compute(&q, &c->cfg, c->world, 0, e, sizeof e) != 0) return -1;
    c->peak = q.peak;
    plan_free(&q);
    return c->peak < than ? 0 : -1;
}

/* The single changes worth trying on cfg (world ranks). */
static int candidates(struct change *out, int max, const struct config *cfg, int world)
{
    int n = 0, dp = shape_dp(cfg, world), B = shape_micro_batch(cfg, world);
    int shards = dp * (int)cfg->parallel.cp; /* ZeRO's: the dp x cp ranks holding replicas */
    int64_t tp = cfg->parallel.tp, pp = cfg->parallel.pp, cp = cfg->parallel.cp;
#define ADD(...)                                                                  \
    do {                                                                          \
        if (n < max) {                                                            \
            out[n].cfg = *cfg;                                                    \
            out[n].cfg.parallel.dp = dp;                                          \
            out[n].world = world;                                                 \
            snprintf(out[n].what, sizeof out[n].what, __VA_ARGS__);               \
            n++;                                                                  \
        }                                                                         \
    } while (0)
#define LAST (&out[n - 1].cfg)
    for (int nb = B / 2; nb >= 1; nb = nb > 1 ? 1 : 0) {
        ADD("micro_batch_size %d -> %d", B, nb);
        LAST->train.micro_batch_size = nb;
        if (nb == 1) break;
    }
    if (cfg->train.recompute_id != TRAIN_RECOMPUTE_full || cfg->train.recompute_layers > 0) {
        ADD("recompute '%.16s' -> 'full'%s", cfg->train.recompute, cfg->train.recompute_layers ? " (all layers)" : "");
        set(LAST, "train.recompute='full'");
        LAST->train.recompute_layers = 0;
    }
    if (tp > 1 && !cfg->parallel.sequence_parallel) {
        ADD("sequence_parallel .false. -> .true.");
        LAST->parallel.sequence_parallel = 1;
    }
    if (cfg->parallel.schedule_id != PARALLEL_SCHEDULE_1f1b && cfg->parallel.virtual_stages == 1) {
        ADD("schedule '%.16s' -> '1f1b'", cfg->parallel.schedule);
        set(LAST, "parallel.schedule='1f1b'");
        set(LAST, "parallel.schedule_file=''"); /* (a file's schedule is read with 'file' only) */
    }
    const char *over = cfg->parallel.cp > 1 ? "dp x cp" : "dp";
    if (shards > 1 && cfg->parallel.zero_stage == 0) {
        ADD("zero_stage 0 -> 1 (optimizer state sharded over %s = %d)", over, shards);
        LAST->parallel.zero_stage = 1;
    }
    if (shards > 1 && cfg->parallel.zero_stage < 2) {
        ADD("zero_stage %lld -> 2 (optimizer state and gradients sharded over %s = %d)",
            (long long)cfg->parallel.zero_stage, over, shards);
        LAST->parallel.zero_stage = 2;
    }
    if (shards > 1 && cfg->parallel.zero_stage < 3) {
        ADD("zero_stage %lld -> 3 (parameters, gradients and optimizer state sharded over %s = %d)",
            (long long)cfg->parallel.zero_stage, over, shards);
        LAST->parallel.zero_stage = 3;
    }
    if (cfg->train.precision_id == TRAIN_PRECISION_fp32) { /* halves the activations kept for backward */
        ADD("precision 'fp32' -> 'bf16'");
        set(LAST, "train.precision='bf16'");
    }
    if (dp % 2 == 0) {
        ADD("pp %lld -> %lld, dp %d -> %d (same %d ranks)", (long long)pp, (long long)pp * 2, dp, dp / 2, world);
        LAST->parallel.pp = pp * 2;
        LAST->parallel.dp = dp / 2;
        ADD("tp %lld -> %lld, dp %d -> %d (same %d ranks)", (long long)tp, (long long)tp * 2, dp, dp / 2, world);
        LAST->parallel.tp = tp * 2;
        LAST->parallel.dp = dp / 2;
        /* long sequences: each rank half the positions (the activations, logits and tokens halve) */
        ADD("cp %lld -> %lld, dp %d -> %d (same %d ranks)", (long long)cp, (long long)cp * 2, dp, dp / 2, world);
        LAST->parallel.cp = cp * 2;
        LAST->parallel.dp = dp / 2;
    }
    ADD("pp %lld -> %lld (%d -> %d ranks)", (long long)pp, (long long)pp * 2, world, world * 2);
    LAST->parallel.pp = pp * 2;
    out[n - 1].world = world * 2;
    ADD("tp %lld -> %lld (%d -> %d ranks)", (long long)tp, (long long)tp * 2, world, world * 2);
    LAST->parallel.tp = tp * 2;
    out[n - 1].world = world * 2;
    ADD("cp %lld -> %lld (%d -> %d ranks)", (long long)cp, (long long)cp * 2, world, world * 2);
    LAST->parallel.cp = cp * 2;
    out[n - 1].world = world * 2;
#undef ADD
#undef LAST
    return n;
}

static int by_peak(const void *a, const void *b)
{
    size_t x = ((const struct change *)a)->peak, y = ((const struct change *)b)->peak;
    return x < y ? -1 : x > y;
}

enum { MAX_CHANGES = 16 };

static void print_zero3(FILE *f, const struct plan *p, const struct config *cfg, double avail);

void plan_print_advice(FILE *f, const struct plan *p, const struct config *cfg, double avail)
{
    struct change *c = xcalloc(MAX_CHANGES, sizeof *c);
    int n = candidates(c, MAX_CHANGES, cfg, p->shape.world), k = 0;
    for (int i = 0; i < n; i++)
        if (replan(&c[i], p->peak) == 0) c[k++] = c[i];
    qsort(c, (size_t)k, sizeof *c, by_peak);
    if (k == 0) {
        fprintf(f, "\nno single change to the deck lowers the peak\n");
        free(c);
        return;
    }
    char h[32];
    fprintf(f, "\nsuggestions (each deck re-planned; lowest peak first):\n");
    for (int i = 0; i < k; i++) {
        plan_human(h, sizeof h, (double)c[i].peak);
        fprintf(f, "  %-58s %10s%s\n", c[i].what, h, avail <= 0 ? "" : c[i].peak <= avail ? "  fits" : "");
    }
    /* nothing fits alone: apply the best change, re-plan, repeat */
    if (avail > 0 && c[0].peak > avail) {
        struct change cur = c[0];
        char chain[640];
        snprintf(chain, sizeof chain, "%s", c[0].what);
        for (int step = 0; step < 4 && cur.peak > avail; step++) {
            struct change *d = xcalloc(MAX_CHANGES, sizeof *d);
            int m = candidates(d, MAX_CHANGES, &cur.cfg, cur.world), best = -1;
            for (int i = 0; i < m; i++)
                if (replan(&d[i], cur.peak) == 0 && (best < 0 || d[i].peak < d[best].peak)) best = i;
            if (best >= 0) {
                snprintf(chain + strlen(chain), sizeof chain - strlen(chain), " + %s", d[best].what);
                cur = d[best];
            }
            free(d);
            if (best < 0) break;
        }
        plan_human(h, sizeof h, (double)cur.peak);
        fprintf(f, "  together: %s: %s%s\n", chain, h, cur.peak <= avail ? "  fits" : "  (still does not fit)");
    }
    free(c);
    print_zero3(f, p, cfg, avail);
}

/* The grids of the same ranks with ZeRO-3: each power of two of the stages
 * traded for data-parallel replicas, as the deck and with full recomputation. */
static void print_zero3(FILE *f, const struct plan *p, const struct config *cfg, double avail)
{
    int world = p->shape.world, dp = p->shape.dp, pp = p->shape.pp, header = 0;
    for (int k = 1; k <= pp; k *= 2) { /* pipeline stages traded for data-parallel replicas */
        if (pp % k != 0 || dp * k * p->shape.cp < 2 || (k == 1 && cfg->parallel.zero_stage == 3)) continue;
        for (int full = 0; full < 2; full++) {
            struct change c = {.cfg = *cfg, .world = world};
            c.cfg.parallel.tp = p->shape.tp;
            c.cfg.parallel.pp = pp / k;
            c.cfg.parallel.dp = dp * k;
            c.cfg.parallel.zero_stage = 3;
            if (full) set(&c.cfg, "train.recompute='full'"), c.cfg.train.recompute_layers = 0;
            if (replan(&c, (size_t)-1) != 0) continue; /* (not a valid deck: layers or the batch do not divide) */
            if (!header++) fprintf(f, "\nZeRO-3 on the same %d ranks (each deck re-planned):\n", world);
            char what[96], h[32], cp[24] = "";
            if (p->shape.cp > 1) snprintf(cp, sizeof cp, " x cp %d", p->shape.cp);
            snprintf(what, sizeof what, "tp %d%s x dp %d x pp %d, zero_stage 3%s", p->shape.tp, cp, dp * k, pp / k,
                     full ? ", recompute 'full'" : "");
            plan_human(h, sizeof h, (double)c.peak);
            fprintf(f, "  %-58s %10s%s\n", what, h, avail <= 0 ? "" : c.peak <= avail ? "  fits" : "");
        }
    }
}

