/* diag.c -- consistency checks across replicas and tensor-parallel ranks. */
#include "diag.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "log.h"

struct rank_info {
    int rank, tp, cp, dp, pp;
    int64_t seed, data_seed;
    double grad_norm; /* of this rank's share of the last step's gradients */
    uint64_t hash;    /* of all its parameters */
};

/* Which tensors a group holds alike: all, the replicated ones (tp), all
 * but the experts (dp under expert parallelism), the experts (their
 * replicas' group). */
enum { SAME_ALL, SAME_REPLICATED, SAME_DENSE, SAME_EXPERTS };

static int compared(int id, int which)
{
    switch (which) {
    case SAME_REPLICATED: return param_table[id].shard == SHARD_NONE;
    case SAME_DENSE: return !param_table[id].expert;
    case SAME_EXPERTS: return param_table[id].expert;
    default: return 1;
    }
}

/* First tensor of `which` whose hash differs inside comm; returns its id
 * and the group ranks that differ, or -1. */
static int first_mismatch(const uint64_t *mine, struct comm *c, enum comm_group group, int n, int which,
                          int *bad_rank)
{
    uint64_t *all = xmalloc((size_t)n * NUM_PARAMS * sizeof *all);
    comm_allgather_u64(c, group, all, mine, NUM_PARAMS);
    int found = -1;
    for (int id = 0; id < NUM_PARAMS && found < 0; id++) {
        if (!compared(id, which)) continue;
        for (int r = 1; r < n; r++)
            if (all[(size_t)r * NUM_PARAMS + id] != all[id]) {
                found = id;
                *bad_rank = r;
                break;
            }
    }
    free(all);
    return found;
}

static void print_table(const struct rank_info *info, int world)
{
    fprintf(stderr, "  %5s %3s %3s %3s %3s %20s %20s %16s %18s\n", "rank", "tp", "cp", "dp", "pp", "train.seed",
            "data.seed", "local grad norm", "parameter hash");
    for (int r = 0; r < world; r++)
        fprintf(stderr, "  %5d %3d %3d %3d %3d %20lld %20lld %16.9e   %016llx\n", info[r].rank, info[r].tp,
                info[r].cp, info[r].dp, info[r].pp, (long long)info[r].seed, (long long)info[r].data_seed,
                info[r].grad_norm, (unsigned long long)info[r].hash);
}

void diag_check_consistency(const struct model *m, struct comm *c, const struct config *cfg, int64_t step,
                            double grad_ss)
{
    const struct grid *g = c->grid;
    uint64_t h[NUM_PARAMS];
    size_t most = 1; /* the largest tensor this rank holds whole (ZeRO-3: the layers' are sharded, not replicas) */
    for (int id = 0; id < NUM_PARAMS; id++)
        if (m->param[id] && m->size[id] > most) most = m->size[id];
    float *host = m->k->on_device ? xalloc_aligned(most * sizeof(float)) : NULL;
    for (int id = 0; id < NUM_PARAMS; id++) {
        size_t n = m->param[id] ? m->size[id] : 0;
        if (host && n) m->k->to_host(host, m->param[id], n * sizeof(float));
        h[id] = fnv1a(FNV1A_INIT, host && n ? host : m->param[id], n * sizeof(float));
    }
    free(host);
    int dp_bad = -1, tp_bad = -1, ep = g->ep > 1, ref = 0; /* ref: the dp x cp rank the group compares with */
    int dp_id = g->dpcp > 1 ? first_mismatch(h, c, CG_DP, g->dpcp, ep ? SAME_DENSE : SAME_ALL, &dp_bad) : -1;
    if (dp_id < 0 && ep && g->edp > 1) { /* the experts over their replicas: edp rank r is dpcp rank r ep + ep_rank */
        dp_id = first_mismatch(h, c, CG_EDP, g->edp, SAME_EXPERTS, &dp_bad);
        if (dp_id >= 0) dp_bad = dp_bad * g->ep + g->ep_rank, ref = g->ep_rank; /* (edp rank 0's) */
    }
    int tp_id = g->tp > 1 ? first_mismatch(h, c, CG_TP, g->tp, SAME_REPLICATED, &tp_bad) : -1;
    int bad = dp_id >= 0 || tp_id >= 0, any;
    MPI_CHECK(MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, g->world_comm));
    if (!any) {
        log_info("consistency at step %lld: %d data-parallel replica(s) bitwise identical, replicated tensors "
                 "agree across %d tp rank(s)\n", (long long)step, g->dpcp, g->tp);
        return;
    }

    struct rank_info me = {g->rank, g->tp_rank, g->cp_rank, g->dp_rank, g->pp_rank, cfg->train.seed, cfg->data.seed,
                           sqrt(grad_ss), fnv1a(FNV1A_INIT, h, sizeof h)};
    struct rank_info *all = g->rank == 0 ? xmalloc((size_t)g->world * sizeof *all) : NULL;
    MPI_CHECK(MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, g->world_comm));
    /* the lowest world rank that saw a mismatch describes it */
    char msg[1024] = "";
    if (dp_id >= 0)
        snprintf(msg, sizeof msg, "data-parallel replicas diverged at step %lld: tensor %s%s on world rank %d "
                 "(%s rank %d of its group) differs from %s rank %d (world rank %d)", (long long)step,
                 param_table[dp_id].expert ? "expert " : "", param_table[dp_id].name,
                 grid_rank_of(g, g->tp_rank, dp_bad % g->cp, dp_bad / g->cp, g->pp_rank),
                 g->cp > 1 ? "dp x cp" : "dp", dp_bad, g->cp > 1 ? "dp x cp" : "dp", ref,
                 grid_rank_of(g, g->tp_rank, ref % g->cp, ref / g->cp, g->pp_rank));
    else if (tp_id >= 0)
        snprintf(msg, sizeof msg, "replicated tensor %s disagrees across tensor-parallel ranks at step %lld: "
                 "world rank %d (tp rank %d) differs from tp rank 0 (world rank %d)", param_table[tp_id].name,
                 (long long)step, grid_rank_of(g, tp_bad, g->cp_rank, g->dp_rank, g->pp_rank), tp_bad,
                 grid_rank_of(g, 0, g->cp_rank, g->dp_rank, g->pp_rank));
    mpi_agree_error(g->world_comm, bad, msg, sizeof msg);
    if (g->rank == 0) {
        fprintf(stderr, "error: %s\n", msg);
        print_table(all, g->world);
        fprintf(stderr, "  hint: replicas must apply identical updates: run the same binary and libraries on "
                        "every node, keep the MPI reduction deterministic, and check for hardware faults on the "
                        "named rank (rerun with diag.check_every = 1 to find the first bad step)\n");
    }
    free(all);
    exit_all(1);
}

/* The grid's least key and the name the rank holding it gives (keys are
 * LONG_MAX where a rank has none); returns 0 if no rank has one. */
static int grid_first(const struct grid *g, long key, const char *mine, char *name, size_t len)
{
    struct { long key; int rank; } in = {key, g->rank}, out;
    MPI_CHECK(MPI_Allreduce(&in, &out, 1, MPI_LONG_INT, MPI_MINLOC, g->world_comm));
    if (out.key == LONG_MAX) return 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", mine);
    MPI_CHECK(MPI_Bcast(buf, sizeof buf, MPI_CHAR, out.rank, g->world_comm));
    snprintf(name, len, "%s (world rank %d)", buf, out.rank);
    return 1;
}

void diag_report_nonfinite(const struct model *m, const struct grid *g, int64_t first, int64_t last)
{
    char pname[64] = "", out[96] = "", par[96] = "";
    int has_p = model_first_nonfinite_param(m, pname, sizeof pname);
    /* parameters in forward order: this rank's first global layer decides */
    long pkey = has_p ? (long)model_global_layer(&m->d, 0) : LONG_MAX;
    if (has_p && (model_has_embedding(&m->d) && (strcmp(pname, "wte") == 0 || strcmp(pname, "wpe") == 0))) pkey = -1;
    int found_out = grid_first(g, m->bad_order, m->bad_name, out, sizeof out);
    int found_par = grid_first(g, pkey, pname, par, sizeof par);
    die_all("lower train.lr, raise train.warmup_steps or keep train.grad_clip on; with fp16 try bf16 (fp32's range); "
            "the checkpoints in io.run_dir are intact: restart from one before the trouble",
            "the loss was not finite for %lld steps in a row (steps %lld-%lld). First non-finite forward output: %s. "
            "Non-finite parameter: %s", (long long)(last - first + 1), (long long)first, (long long)last,
            found_out ? out : last > first ? "none seen (the inputs or the loss itself)"
                                            : "not watched (diag.nonfinite_steps = 1)",
            found_par ? par : "none (all parameters are finite)");
}

/* The parameter diag.inject_tensor names (its id, layer and expert, -1 where
 * none), or the run ends with the names it takes.  Collective. */
static int inject_target(const struct model *m, const char *name, int *layer_out, int *expert_out)
{
    int layer = -1, expert = -1, id = -1, n = 0;
    const char *base = name;
    if (sscanf(name, "h.%d/%n", &layer, &n) == 1 && n > 0) base = name + n;
    if (layer >= 0 && sscanf(base, "expert.%d/%n", &expert, &n) == 1 && n > 0) base += n;
    for (int i = 0; i < NUM_PARAMS; i++)
        if (strcmp(param_table[i].name, base) == 0 && (layer >= 0) == param_table[i].per_layer &&
            (expert >= 0) == param_table[i].expert && param_present(&m->d, (enum param_id)i) &&
            param_slice_exists(&m->d, (enum param_id)i, expert >= 0 ? layer * m->d.E + expert : layer))
            id = i; /* (fc_w: a mixture's shared experts', or its leading dense layers' MLP) */
    if (id < 0 || layer >= m->d.L || expert >= m->d.E)
        die_all("name a parameter as checkpoints do: wte, wpe, lnf_w, lnf_b, h.<layer>/<name> with layer < "
                "n_layer (ln1_w, qkv_w, attproj_w, fc_w, fcproj_w, ...), or h.<layer>/expert.<e>/fc_w or fcproj_w",
                "diag.inject_tensor = '%s' names no parameter of this model", name);
    *layer_out = layer;
    *expert_out = expert;
    return id;
}

void diag_check_inject(const struct model *m, const char *name)
{
    int layer, expert;
    inject_target(m, name, &layer, &expert);
}

void diag_inject_nan(struct model *m, const char *name)
{
    int layer, expert, id = inject_target(m, name, &layer, &expert);
    int g = expert >= 0 ? layer * m->d.E + expert : layer; /* (its logical slice) */
    int j = layer >= 0 ? param_slice_local(&m->d, (enum param_id)id, g) : 0;
    float *x = j >= 0 ? model_element(m, (enum param_id)id, j, 0) : NULL, nan = NAN;
    if (!x) return; /* another rank holds it (ZeRO-3: its first element) */
    m->k->to_device(x, &nan, sizeof nan);
    m->param_version++; /* (ZeRO-3: a gathered copy no longer holds it) */
    log_warn("diag.inject_nan_step: set an element of %s to NaN", name);
}

void diag_corrupt(struct model *m)
{
    float x, *p = model_element(m, P_LN1W, 0, 0);
    if (!p) return; /* (ZeRO-3: in another rank's shard) */
    m->k->to_host(&x, p, sizeof x);
    x += 1e-3f;
    m->k->to_device(p, &x, sizeof x);
    m->param_version++;
    log_warn("diag.corrupt_rank: perturbed ln1_w[0] of layer %d on this rank", model_global_layer(&m->d, 0));
}
