/* config_check.c -- the cross-checks of a whole deck: what needs several
 * keys or the world size (divisibility, the grid, the batch, sizes, the
 * pipeline schedule, features not available yet).  Each error says what is
 * wrong and the fix, with concrete numbers. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_internal.h"
#include "device.h"

#include "build_config.h"
#include "cuda_sizes.h"
#include "pipeline.h"
#include "shape.h"

/* ------------------------------------------------------------ cross-checks */

/* "768 or 780": the multiples of m nearest to x that lie in [1, max]
 * ("" if none does). */
static const char *near_multiples(char *buf, size_t n, int64_t x, int64_t m, int64_t max)
{
    int64_t lo = x / m * m, hi = lo + m;
    buf[0] = '\0';
    if (lo > 0) config_append(buf, n, "%" PRId64, lo);
    if (hi <= max) config_append(buf, n, "%s%" PRId64, buf[0] ? " or " : "", hi);
    return buf;
}

/* "11 or 14": the divisors of x nearest to d, below and above, that are
 * at most max. */
static const char *near_divisors(char *buf, size_t n, int64_t x, int64_t d, int64_t max)
{
    int64_t lo = 0, hi = 0;
    for (int64_t i = 1; i <= x / i; i++) {
        if (x % i) continue;
        int64_t pair[2] = { i, x / i };
        for (int j = 0; j < 2; j++) {
            if (pair[j] < d && pair[j] > lo) lo = pair[j];
            if (pair[j] > d && pair[j] <= max && (hi == 0 || pair[j] < hi)) hi = pair[j];
        }
    }
    buf[0] = '\0';
    if (lo) config_append(buf, n, "%" PRId64, lo);
    if (hi) config_append(buf, n, "%s%" PRId64, buf[0] ? " or " : "", hi);
    return buf;
}

/* The hint "use A = x or y, or B = z (why)" from the parts that have values. */
static int suggest(struct deck_error *err, const char *a, const char *av, const char *b, const char *bv,
                   const char *why)
{
    char h[512] = "";
    if (av[0]) config_append(h, sizeof h, "use %s = %s", a, av);
    if (b && bv[0]) config_append(h, sizeof h, "%s %s = %s", h[0] ? ", or" : "use", b, bv);
    if (!h[0]) config_append(h, sizeof h, "change %s%s%s", a, b ? " or " : "", b ? b : "");
    if (why) config_append(h, sizeof h, " %s", why);
    return deck_error_hint(err, "%s", h);
}


/* The largest divisor of x that is <= cap (>= 1). */
static int64_t divisor_at_most(int64_t x, int64_t cap)
{
    int64_t best = 1;
    for (int64_t i = 1; i <= x / i; i++) {
        if (x % i) continue;
        if (i <= cap && i > best) best = i;
        if (x / i <= cap && x / i > best) best = x / i;
    }
    return best;
}

/* What this build cannot do. */
static int not_yet(struct deck_error *err, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int not_yet(struct deck_error *err, const char *fix, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    deck_error_set(err, 0, 0, "%s is not available in this build yet", what);
    return deck_error_hint(err, "%s", fix);
}

void config_resolve(struct config *cfg)
{
    struct model_family f;
    shape_family(&f, cfg);
    cfg->model.tie_embeddings = f.tied;
}

/* model.rope_scaling and the four keys of its llama3 remap: llama's alone,
 * and the keys only with the remap that reads them. */
static int check_rope_scaling(const struct config *cfg, struct deck_error *err)
{
    int llama3 = cfg->model.rope_scaling_id == MODEL_ROPE_SCALING_llama3;
    double low = cfg->model.rope_low_freq_factor, high = cfg->model.rope_high_freq_factor;
    if (llama3 && cfg->model.arch_id != MODEL_ARCH_llama) {
        deck_error_set(err, 0, 0, "rope_scaling = 'llama3' with arch = 'gpt2': gpt2 has learned positions, no rotary "
                                  "embedding to scale");
        return deck_error_hint(err, "remove rope_scaling, or set arch = 'llama'");
    }
    static const char *const keys[] = {"rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
                                       "rope_original_max_positions"};
    const double here[] = {cfg->model.rope_factor, low, high, (double)cfg->model.rope_original_max_positions};
    for (int i = 0; !llama3 && i < 4; i++)
        if (here[i] != config_key_default("model", keys[i])) {
            deck_error_set(err, 0, 0, "%s = %g without rope_scaling = 'llama3': it sets the llama3 remap of the "
                                      "rotary frequencies, which is off (rope_scaling = '%s')", keys[i], here[i],
                           cfg->model.rope_scaling);
            return deck_error_hint(err, "set rope_scaling = 'llama3' (arch = 'llama'), or remove %s", keys[i]);
        }
    if (!llama3) return 0;
    if (low <= 0) {
        deck_error_set(err, 0, 0, "rope_low_freq_factor = %g: it must be above 0 (wavelengths above "
                                  "rope_original_max_positions / it are divided by rope_factor)", low);
        return deck_error_hint(err, "set rope_low_freq_factor > 0 (Llama 3.1 and 3.2: 1)");
    }
    if (high <= low) {
        deck_error_set(err, 0, 0, "rope_high_freq_factor = %g is not above rope_low_freq_factor = %g: the wavelengths "
                                  "kept must be shorter than those divided by rope_factor", high, low);
        return deck_error_hint(err, "set rope_high_freq_factor > rope_low_freq_factor (Llama 3.1 and 3.2: 4 and 1)");
    }
    return 0;
}

static int check_model(const struct config *cfg, struct deck_error *err)
{
    int64_t C = cfg->model.d_model, NH = cfg->model.n_head, NKV = cfg->model.n_kv_head;
    int llama = cfg->model.arch_id == MODEL_ARCH_llama;
    char m[64], d[64];
    if (C % NH) {
        deck_error_set(err, 0, 0, "d_model = %" PRId64 " is not divisible by n_head = %" PRId64, C, NH);
        return suggest(err, "d_model", near_multiples(m, sizeof m, C, NH, config_key_max("model", "d_model")),
                       "n_head", near_divisors(d, sizeof d, C, NH, config_key_max("model", "n_head")),
                       "(each head gets d_model / n_head channels)");
    }
    if (!llama && NKV && NKV != NH) {
        deck_error_set(err, 0, 0, "n_kv_head = %" PRId64 " with arch = 'gpt2': grouped-query attention is the llama "
                                   "family's (gpt2 has n_head = %" PRId64 " key/value heads)", NKV, NH);
        return deck_error_hint(err, "set arch = 'llama', or n_kv_head = 0");
    }
    if (NKV && NH % NKV) {
        deck_error_set(err, 0, 0, "n_head = %" PRId64 " is not divisible by n_kv_head = %" PRId64
                                   " (each key/value head serves a whole group of query heads)", NH, NKV);
        return suggest(err, "n_kv_head", near_divisors(d, sizeof d, NH, NKV, NH), "n_head",
                       near_multiples(m, sizeof m, NH, NKV, config_key_max("model", "n_head")), NULL);
    }
    if (llama && (C / NH) % 2) {
        deck_error_set(err, 0, 0, "the head size d_model / n_head = %" PRId64 " / %" PRId64 " = %" PRId64
                                   " is odd: the rotary embedding turns pairs of channels", C, NH, C / NH);
        return deck_error_hint(err, "choose d_model and n_head with an even quotient");
    }
    if (!llama && cfg->model.qkv_bias) {
        deck_error_set(err, 0, 0, "qkv_bias = .true. with arch = 'gpt2': gpt2 has its biases always (qkv_bias adds "
                                  "llama's q, k and v biases)");
        return deck_error_hint(err, "remove qkv_bias, or set arch = 'llama'");
    }
    if (!llama && cfg->model.norm_eps != 1e-5) {
        deck_error_set(err, 0, 0, "norm_eps = %g with arch = 'gpt2': GPT-2's LayerNorm epsilon is 1e-5 here "
                                   "(norm_eps sets llama's RMSNorm)", cfg->model.norm_eps);
        return deck_error_hint(err, "remove norm_eps, or set arch = 'llama'");
    }
    return check_rope_scaling(cfg, err);
}

/* A mixture of experts (model.n_expert): its keys together, and what it
 * does not run with yet (docs/moe.md). */
static int check_moe(const struct config *cfg, struct deck_error *err)
{
    int64_t E = cfg->model.n_expert, K = cfg->model.n_expert_active;
    int64_t ep = cfg->parallel.ep;
    if (E == 0 && ep > 1) {
        deck_error_set(err, 0, 0, "ep = %" PRId64 " without experts (n_expert = 0): expert parallelism splits a "
                                  "mixture's experts", ep);
        return deck_error_hint(err, "set ep = 1, or n_expert > 0");
    }
    if (E == 0) {
        if (cfg->model.n_shared_expert) {
            deck_error_set(err, 0, 0, "n_shared_expert = %" PRId64 " without routed experts (n_expert = 0)",
                           cfg->model.n_shared_expert);
            return deck_error_hint(err, "set n_expert > 0 for a mixture of experts, or n_shared_expert = 0 (a dense MLP "
                                        "is ffn_hidden wide)");
        }
        if (cfg->model.moe_dense_layers) {
            deck_error_set(err, 0, 0, "moe_dense_layers = %" PRId64 " without experts (n_expert = 0): every block "
                                      "of a dense model is dense", cfg->model.moe_dense_layers);
            return deck_error_hint(err, "set moe_dense_layers = 0, or n_expert > 0");
        }
        return 0;
    }
    if (cfg->model.moe_dense_layers >= cfg->model.n_layer) {
        deck_error_set(err, 0, 0, "moe_dense_layers = %" PRId64 " leaves no MoE block of n_layer = %" PRId64,
                       cfg->model.moe_dense_layers, cfg->model.n_layer);
        return deck_error_hint(err, "set moe_dense_layers < %" PRId64 ", or n_expert = 0 for a dense model",
                               cfg->model.n_layer);
    }
    if (cfg->model.arch_id != MODEL_ARCH_llama) {
        deck_error_set(err, 0, 0, "n_expert = %" PRId64 " with arch = 'gpt2': the experts are SwiGLU MLPs of the llama "
                                  "family", E);
        return deck_error_hint(err, "set arch = 'llama', or n_expert = 0");
    }
    if (K > E) {
        deck_error_set(err, 0, 0, "n_expert_active = %" PRId64 " is above n_expert = %" PRId64
                                  " (each token chooses k distinct experts)", K, E);
        return deck_error_hint(err, "set n_expert_active <= %" PRId64, E);
    }
    if (E % ep) {
        char a[64];
        deck_error_set(err, 0, 0, "n_expert = %" PRId64 " is not divisible by ep = %" PRId64 " (each expert-parallel "
                                  "rank holds the same number of experts)", E, ep);
        return suggest(err, "ep", near_divisors(a, sizeof a, E, ep, config_key_max("parallel", "ep")), NULL, NULL,
                       NULL);
    }
    return 0;
}

/* Keys that only make sense together, then what this build cannot do yet. */
static int check_features(const struct config *cfg, struct deck_error *err)
{
    int64_t tp = cfg->parallel.tp, pp = cfg->parallel.pp, vs = cfg->parallel.virtual_stages;
    if (cfg->parallel.sequence_parallel && tp < 2) {
        deck_error_set(err, 0, 0, "sequence_parallel = .true. needs tensor parallelism (tp > 1), but tp = %" PRId64, tp);
        return deck_error_hint(err, "set sequence_parallel = .false.");
    }
    int from_file = cfg->parallel.schedule_id == PARALLEL_SCHEDULE_file;
    int zbv = cfg->parallel.schedule_id == PARALLEL_SCHEDULE_zbv;
    if (zbv && (vs != 2 || pp < 2)) {
        deck_error_set(err, 0, 0, "schedule = 'zbv' runs two chunks on each of pp >= 2 ranks, in a V (stages r and "
                                  "2pp-1-r on rank r), but virtual_stages = %" PRId64 " and pp = %" PRId64, vs, pp);
        return deck_error_hint(err, pp < 2 ? "set pp >= 2 and virtual_stages = 2, or schedule = '1f1b'"
                                           : "set virtual_stages = 2 (n_layer divisible by 2 * pp), or schedule = "
                                             "'zb-h1' with virtual_stages = 1");
    }
    if (vs > 1 && cfg->parallel.schedule_id != PARALLEL_SCHEDULE_interleaved && !from_file && !zbv) {
        deck_error_set(err, 0, 0, "virtual_stages = %" PRId64 " needs schedule = 'interleaved', but schedule = '%s'", vs,
                 cfg->parallel.schedule);
        return deck_error_hint(err, "set schedule = 'interleaved' (or 'zbv' for 2 chunks, or 'file'), or "
                                    "virtual_stages = 1");
    }
    if (from_file != (cfg->parallel.schedule_file[0] != 0)) {
        deck_error_set(err, 0, 0, from_file ? "schedule = 'file' but no schedule_file names the file"
                                            : "schedule_file = '%s' is set, but schedule = '%s' (the file is read only "
                                              "with schedule = 'file')",
                       cfg->parallel.schedule_file, cfg->parallel.schedule);
        return deck_error_hint(err, from_file ? "set schedule_file to the file of each rank's computes (docs/pipeline.md)"
                                              : "set schedule = 'file', or remove schedule_file");
    }
    if (vs > 1 && pp < 2) {
        deck_error_set(err, 0, 0, "virtual_stages = %" PRId64 " needs pipeline parallelism (pp > 1), but pp = %" PRId64,
                 vs, pp);
        return deck_error_hint(err, "set virtual_stages = 1");
    }
    if (cfg->train.precision_id == TRAIN_PRECISION_fp16 && cfg->train.loss_scale_min > cfg->train.loss_scale) {
        deck_error_set(err, 0, 0, "loss_scale_min = %g is above the initial loss_scale = %g", cfg->train.loss_scale_min,
                        cfg->train.loss_scale);
        return deck_error_hint(err, "set loss_scale_min <= loss_scale");
    }
    if (cfg->train.recompute_layers > 0 && cfg->train.recompute_id != TRAIN_RECOMPUTE_full) {
        deck_error_set(err, 0, 0, "recompute_layers = %" PRId64 " chooses the layers that recompute = 'full' "
                                  "recomputes, but recompute = '%s' (so none would be)", cfg->train.recompute_layers,
                       cfg->train.recompute);
        return deck_error_hint(err, "set recompute = 'full', or remove recompute_layers");
    }
    int64_t HS = cfg->model.d_model / cfg->model.n_head;
    if (cfg->train.device_id == TRAIN_DEVICE_cuda && HS > CUDA_ATT_HS_MAX) {
        deck_error_set(err, 0, 0, "the head size d_model / n_head = %" PRId64 " is above %d, the largest the CUDA "
                                   "backend's fused attention takes", HS, CUDA_ATT_HS_MAX);
        return deck_error_hint(err, "use more heads (n_head >= d_model / %d), or device = 'cpu'", CUDA_ATT_HS_MAX);
    }
    if (cfg->diag.stage_through_host && cfg->train.device_id == TRAIN_DEVICE_cuda) {
        deck_error_set(err, 0, 0, "diag.stage_through_host is for device = 'cpu'; device = 'cuda' stages by itself "
                                   "where the MPI is not CUDA-aware");
        return deck_error_hint(err, "set diag.stage_through_host = .false.");
    }
    if (cfg->train.tf32 && cfg->train.device_id != TRAIN_DEVICE_cuda) {
        deck_error_set(err, 0, 0, "train.tf32 = .true. is for device = 'cuda' (TF32 is a GPU tensor-core format)");
        return deck_error_hint(err, "set tf32 = .false., or device = 'cuda'");
    }
    if (cfg->train.tf32 && cfg->train.precision_id != TRAIN_PRECISION_fp32) {
        deck_error_set(err, 0, 0, "train.tf32 = .true. is for precision = 'fp32'; a %s run multiplies on %s tensor cores "
                                   "already", cfg->train.precision, cfg->train.precision);
        return deck_error_hint(err, "set tf32 = .false.");
    }
    if (cfg->io.async_checkpoint && cfg->io.checkpoint_every == 0) {
        deck_error_set(err, 0, 0, "io.async_checkpoint = .true. writes the checkpoints of io.checkpoint_every in the "
                                   "background, but checkpoint_every = 0 (only the final checkpoint, which is written "
                                   "at once)");
        return deck_error_hint(err, "set checkpoint_every = N (steps), or async_checkpoint = .false.");
    }
    if (cfg->diag.hang_timeout > 0 && cfg->diag.hang_timeout < 1) {
        deck_error_set(err, 0, 0, "diag.hang_timeout = %g s is below the watchdog's resolution: it looks every 0.5 s, "
                                   "and any step or communication call longer than the timeout counts as a hang, so a "
                                   "healthy run would be ended", cfg->diag.hang_timeout);
        return deck_error_hint(err, "set hang_timeout >= 1 (seconds: a few times the longest step), or 0 to turn the "
                                    "watchdog off");
    }
    if (cfg->diag.slow_checkpoint > 0 && !cfg->io.async_checkpoint) {
        deck_error_set(err, 0, 0, "diag.slow_checkpoint = %g stretches background checkpoints, but "
                                   "io.async_checkpoint = .false.", cfg->diag.slow_checkpoint);
        return deck_error_hint(err, "set io.async_checkpoint = .true., or diag.slow_checkpoint = 0");
    }
    if (!device_built(cfg->train.device_id == TRAIN_DEVICE_cuda))
        return not_yet(err, "set device = 'cpu', or rebuild with ./configure --with-cuda (docs/cuda.md)",
                       "the CUDA backend (device = 'cuda')");
    return 0;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t r = a % b;
        a = b, b = r;
    }
    return a;
}

/* Heads across tensor ranks, layers across pipeline chunks. */
static int check_split(const struct config *cfg, struct deck_error *err)
{
    int64_t NH = cfg->model.n_head, L = cfg->model.n_layer, tp = cfg->parallel.tp;
    int64_t pp = cfg->parallel.pp, vs = cfg->parallel.virtual_stages, chunks = pp * vs;
    char a[64], b[64];
    struct model_family f;
    shape_family(&f, cfg);
    /* a tp suggested divides every width tp splits, not only the one refused (else its own refusal follows) */
    int64_t widths = gcd64(NH, f.NKV);
    if (!f.E || f.Ld) widths = gcd64(widths, f.F);
    if (f.Fe) widths = gcd64(widths, f.Fe);
    if (f.Fs) widths = gcd64(widths, f.Fs);
    const int64_t tp_max = config_key_max("parallel", "tp");
    if (NH % tp) {
        deck_error_set(err, 0, 0, "n_head = %" PRId64 " is not divisible by tp = %" PRId64
                 " (heads are split across tensor-parallel ranks)", NH, tp);
        return suggest(err, "tp", near_divisors(a, sizeof a, widths, tp, tp_max), "n_head",
                       near_multiples(b, sizeof b, NH, tp, config_key_max("model", "n_head")), NULL);
    }
    if (f.NKV % tp) {
        deck_error_set(err, 0, 0, "n_kv_head = %" PRId64 " is not divisible by tp = %" PRId64
                                   " (each tensor-parallel rank holds whole key/value heads)", f.NKV, tp);
        return suggest(err, "tp", near_divisors(a, sizeof a, widths, tp, tp_max),
                       "n_kv_head", near_multiples(b, sizeof b, f.NKV, tp, NH), NULL);
    }
    if ((!f.E || f.Ld) && f.F % tp) { /* (a mixture's experts are checked below) */
        deck_error_set(err, 0, 0, "the MLP hidden width %" PRId64 " (ffn_hidden%s) is not divisible by tp = %" PRId64,
                       f.F, cfg->model.ffn_hidden ? "" : ", the family's", tp);
        return suggest(err, "ffn_hidden", near_multiples(a, sizeof a, f.F, tp, config_key_max("model", "ffn_hidden")),
                       "tp", near_divisors(b, sizeof b, widths, tp, tp_max), NULL);
    }
    if ((f.Fe % tp) || (f.Fs % tp)) {
        int64_t w = f.Fe % tp ? f.Fe : f.Fs;
        deck_error_set(err, 0, 0, "the %s hidden width %" PRId64 " is not divisible by tp = %" PRId64
                                  " (each tensor-parallel rank holds a block of every expert)",
                       f.Fe % tp ? "experts'" : "shared experts'", w, tp);
        return suggest(err, "moe_ffn_hidden", near_multiples(a, sizeof a, f.Fe, tp,
                                                             config_key_max("model", "moe_ffn_hidden")),
                       "tp", near_divisors(b, sizeof b, widths, tp, tp_max), NULL);
    }
    int64_t T = cfg->model.seq_len;
    if (cfg->parallel.sequence_parallel && T % tp) {
        deck_error_set(err, 0, 0, "seq_len = %" PRId64 " is not divisible by tp = %" PRId64
                 " (sequence parallelism splits every sequence across the tensor-parallel ranks)", T, tp);
        return suggest(err, "seq_len", near_multiples(a, sizeof a, T, tp, config_key_max("model", "seq_len")), "tp",
                       near_divisors(b, sizeof b, gcd64(widths, T), tp, tp_max), NULL);
    }
    int64_t cp = cfg->parallel.cp;
    if (cp > 1 && T % (2 * cp)) {
        deck_error_set(err, 0, 0, "seq_len = %" PRId64 " is not divisible by 2 * cp = %" PRId64
                       " (context parallelism cuts every sequence into 2 * cp equal chunks, two per rank)", T, 2 * cp);
        return suggest(err, "seq_len", near_multiples(a, sizeof a, T, 2 * cp, config_key_max("model", "seq_len")),
                       NULL, NULL, NULL);
    }
    if (cp > 1 && cfg->parallel.sequence_parallel && (T / cp) % tp) {
        deck_error_set(err, 0, 0, "seq_len / cp = %" PRId64 " / %" PRId64 " = %" PRId64 " is not divisible by tp = %"
                       PRId64 " (sequence parallelism splits each rank's positions across the tensor-parallel ranks)",
                       T, cp, T / cp, tp);
        return suggest(err, "seq_len", near_multiples(a, sizeof a, T, 2 * cp * tp, config_key_max("model", "seq_len")),
                       NULL, NULL, NULL);
    }
    if (L % chunks) {
        deck_error_set(err, 0, 0, "n_layer = %" PRId64 " is not divisible by pp * virtual_stages = %" PRId64 " * %" PRId64
                 " = %" PRId64 " (every model chunk gets the same number of layers)", L, pp, vs, chunks);
        return suggest(err, "n_layer", near_multiples(a, sizeof a, L, chunks, config_key_max("model", "n_layer")),
                       "pp * virtual_stages", near_divisors(b, sizeof b, L, chunks, INT64_MAX), NULL);
    }
    return 0;
}

/* world = tp * cp * dp * pp */
static int check_world(const struct config *cfg, int world, struct deck_error *err)
{
    int64_t tp = cfg->parallel.tp, cp = cfg->parallel.cp, pp = cfg->parallel.pp, dp = cfg->parallel.dp;
    int64_t tp_pp = tp * cp * pp;
    char m[64], grid[96];
    if (cp > 1) snprintf(grid, sizeof grid, "tp * cp * pp = %" PRId64 " * %" PRId64 " * %" PRId64, tp, cp, pp);
    else snprintf(grid, sizeof grid, "tp * pp = %" PRId64 " * %" PRId64, tp, pp);
    int64_t ranks = mul64(tp_pp, dp > 0 ? dp : 1); /* (-1: over 2^63) */
    if (ranks < 0 || ranks > INT32_MAX) { /* MPI counts ranks in an int: such a grid is never launched */
        char count[32] = "more than 2^63";
        if (ranks > 0) snprintf(count, sizeof count, "%" PRId64, ranks);
        deck_error_set(err, 0, 0, "%s, times dp = %" PRId64 "%s: %s ranks, more than the 2147483647 that an MPI job "
                       "can have", grid, dp > 0 ? dp : 1, dp > 0 ? "" : " (0 counted as 1)", count);
        return deck_error_hint(err, "reduce %s", dp > 0 ? "dp (or tp, cp, pp)" : "tp, cp or pp");
    }
    if (world <= 0) return 0;
    if (dp > 0 && tp_pp * dp != world) {
        int64_t want = tp_pp * dp;
        if (cp > 1)
            deck_error_set(err, 0, 0, "tp * cp * dp * pp = %" PRId64 " * %" PRId64 " * %" PRId64 " * %" PRId64
                           " = %" PRId64 ", but %d ranks were launched", tp, cp, dp, pp, want, world);
        else
            deck_error_set(err, 0, 0, "tp * dp * pp = %" PRId64 " * %" PRId64 " * %" PRId64 " = %" PRId64
                           ", but %d ranks were launched", tp, dp, pp, want, world);
        if (world % tp_pp == 0)
            return deck_error_hint(err, "set dp = %" PRId64 " (or dp = 0 to derive it), or launch %" PRId64
                            " ranks (mpirun -n %" PRId64 ")", world / tp_pp, want, want);
        return deck_error_hint(err, "launch %" PRId64 " ranks (mpirun -n %" PRId64 ")", want, want);
    }
    if (world % tp_pp) {
        deck_error_set(err, 0, 0, "%d ranks cannot be split into replicas of %s = %" PRId64 " ranks", world, grid,
                       tp_pp);
        return deck_error_hint(err, "launch a multiple of %" PRId64 " ranks (mpirun -n %s)", tp_pp,
                        near_multiples(m, sizeof m, world, tp_pp, INT32_MAX));
    }
    int64_t ep = cfg->parallel.ep, dpcp = (dp > 0 ? dp : world / tp_pp) * cp;
    if (dpcp % ep) {
        deck_error_set(err, 0, 0, "ep = %" PRId64 " does not divide dp * cp = %" PRId64 " (the experts are shared by "
                                  "groups of ep of the data-parallel ranks)", ep, dpcp);
        return deck_error_hint(err, "set ep to a divisor of %" PRId64 " (%s), or launch a multiple of %" PRId64
                                    " ranks", dpcp, near_divisors(m, sizeof m, dpcp, ep, dpcp), tp_pp * ep);
    }
    return 0;
}

/* The testing aids that name a world rank name one of this run's. */
static int check_diag_ranks(const struct config *cfg, int world, struct deck_error *err)
{
    const struct { const char *key; int64_t rank; int on; } aid[] = {
        { "inject_rank", cfg->diag.inject_rank, cfg->diag.inject_overflow_step > 0 },
        { "slow_rank", cfg->diag.slow_rank, cfg->diag.slow_rank >= 0 },
        { "corrupt_rank", cfg->diag.corrupt_rank, cfg->diag.corrupt_rank >= 0 },
    };
    for (size_t i = 0; world > 0 && i < sizeof aid / sizeof aid[0]; i++)
        if (aid[i].on && aid[i].rank >= world) {
            deck_error_set(err, 0, 0, "diag.%s = %" PRId64 " is not a rank of this run's %d (0 ... %d), so the testing "
                                      "aid would never act", aid[i].key, aid[i].rank, world, world - 1);
            return deck_error_hint(err, "set diag.%s to a rank below %d", aid[i].key, world);
        }
    return 0;
}

/* batch_size = dp * micro_batch_size * (micro-batches per replica) */
static int check_batch(const struct config *cfg, int world, struct deck_error *err)
{
    int64_t G = cfg->train.batch_size, mb = cfg->train.micro_batch_size, dp = shape_dp(cfg, world);
    int64_t gmax = config_key_max("train", "batch_size");
    char a[64], b[64] = "", why[96] = "";
    if (dp == 0 && mb > 0 && G % mb) { /* world unknown: dp * mb | G needs mb | G */
        deck_error_set(err, 0, 0, "batch_size = %" PRId64 " is not divisible by micro_batch_size = %" PRId64, G, mb);
        return suggest(err, "batch_size", near_multiples(a, sizeof a, G, mb, gmax), "micro_batch_size",
                       near_divisors(b, sizeof b, G, mb, gmax), NULL);
    }
    if (dp == 0) return 0;
    if (mb == 0 && G % dp) {
        deck_error_set(err, 0, 0, "batch_size = %" PRId64 " is not divisible by dp = %" PRId64
                 " (micro_batch_size = 0 means batch_size / dp)", G, dp);
        snprintf(why, sizeof why, "(a multiple of dp = %" PRId64 ")", dp);
        return suggest(err, "batch_size", near_multiples(a, sizeof a, G, dp, gmax), NULL, NULL, why);
    }
    if (mb > 0 && G % (dp * mb)) {
        deck_error_set(err, 0, 0, "batch_size = %" PRId64 " is not divisible by dp * micro_batch_size = %" PRId64
                 " * %" PRId64 " = %" PRId64, G, dp, mb, dp * mb);
        if (G % dp == 0 && near_divisors(b, sizeof b, G / dp, mb, gmax)[0])
            snprintf(why, sizeof why, "(a divisor of batch_size / dp = %" PRId64 ")", G / dp);
        return suggest(err, "batch_size", near_multiples(a, sizeof a, G, dp * mb, gmax), "micro_batch_size", b,
                       why[0] ? why : NULL);
    }
    return 0;
}

/* The hint for a micro-batch whose tensors exceed 32-bit indices when
 * per_seq elements come per sequence. */
static int micro_batch_hint(const struct config *cfg, int world, int64_t per_seq, const char *fix,
                            struct deck_error *err)
{
    int64_t max_b = INT32_MAX / per_seq, dp = shape_dp(cfg, world), G = cfg->train.batch_size;
    if (max_b < 1) return deck_error_hint(err, "%s: even one sequence is too large", fix);
    if (dp > 0 && G % dp == 0)
        return deck_error_hint(err, "set micro_batch_size = %" PRId64 " (the largest divisor of batch_size / dp = %" PRId64
                        " that fits; gradient accumulation keeps batch_size)", divisor_at_most(G / dp, max_b), G / dp);
    return deck_error_hint(err, "set micro_batch_size to %" PRId64 " or less (gradient accumulation keeps batch_size)",
                    max_b);
}

/* Sizes: the parameter count in 64 bits, and every per-rank tensor in 32-bit
 * int indices (the kernels take int dimensions, backend.h).  With the
 * micro-batch unknown (world unknown, dp = micro_batch_size = 0) only the
 * weights are checked. */
static int check_sizes(const struct config *cfg, int world, struct deck_error *err)
{
    int64_t B = shape_micro_batch(cfg, world), C = cfg->model.d_model;
    int64_t T = cfg->model.seq_len / cfg->parallel.cp; /* this rank's positions of each sequence */
    int64_t L = cfg->model.n_layer, tp = cfg->parallel.tp, V = cfg->model.vocab_size;
    int64_t Vp = shape_padded_vocab(V, tp), params = shape_params(cfg, Vp);
    struct model_family f;
    shape_family(&f, cfg);
    int64_t FC = (f.llama ? 2 : 1) * f.F; /* the MLP's first product: llama's gate and up */
    if (params < 0) {
        deck_error_set(err, 0, 0, "the model has more than 2^63 parameters (n_layer = %" PRId64 ", d_model = %" PRId64 ")",
                 L, C);
        return deck_error_hint(err, "reduce n_layer or d_model");
    }
    /* a mixture's MoE block, per token: the shared experts' gate and up, then those of the routed rows a rank's
     * experts take (k; under expert parallelism the tokens of the ep ranks, at most min(k, n_expert / ep) each) */
    int64_t ep = cfg->parallel.ep, rows = ep > 1 ? ep * (f.K < f.E / ep ? f.K : f.E / ep) : f.K;
    int64_t moe_fc = mul64(2, add64(f.Fs, mul64(rows, f.Fe)));
    const char *seq = "reduce seq_len or the MLP width (ffn_hidden, or d_model where ffn_hidden = 0)";
    const char *mlp_w = "reduce d_model or the MLP width (ffn_hidden)", *vocab = "reduce d_model or vocab_size";
    const char *logits = "reduce seq_len or vocab_size";
    const char *moe_seq = "reduce seq_len, moe_ffn_hidden, n_shared_expert or n_expert_active";
    const char *moe_cols = "reduce moe_ffn_hidden, n_shared_expert or n_expert_active";
    const char *moe_w = "reduce moe_ffn_hidden, n_shared_expert or d_model";
    const struct { const char *what; int64_t n; int per_seq; const char *fix; } t[] = {
        { "the MLP activations (micro-batch * seq_len / cp * MLP width / tp)", mul64(T, FC / tp), 1, seq },
        { "the logits (micro-batch * seq_len / cp * padded vocab_size / tp)", mul64(T, Vp / tp), 1, logits },
        { "the token embedding (padded vocab_size / tp * d_model)", mul64(Vp / tp, C), 0, vocab },
        { "the MLP weight (MLP width / tp * d_model)", mul64(FC / tp, C), 0, mlp_w },
        /* a mixture of experts (all 0 for a dense model) */
        { "the MoE activations (micro-batch * seq_len / cp * 2 * (n_shared_expert + the routed experts per token) * "
          "moe_ffn_hidden / tp)", moe_fc < 0 ? -1 : mul64(T, moe_fc / tp), 1, moe_seq },
        { "the MoE block's columns per token before the tp split (2 * (n_shared_expert + the routed experts per "
          "token) * moe_ffn_hidden)", moe_fc, 0, moe_cols },
        { "an expert's weight (2 * moe_ffn_hidden / tp * d_model)", mul64(2 * f.Fe / tp, C), 0, moe_w },
        { "the shared experts' weight (2 * n_shared_expert * moe_ffn_hidden / tp * d_model)",
          mul64(mul64(2, f.Fs) / tp, C), 0, moe_w },
    };
    /* the weights first: no micro-batch helps when they do not fit */
    for (int per_seq = 0; per_seq < 2; per_seq++)
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            if (t[i].per_seq != per_seq) continue;
            int64_t n = per_seq ? mul64(B, t[i].n) : t[i].n;
            if (n >= 0 && n <= INT32_MAX) continue;
            char count[32] = "over 2^63";
            if (n > 0) snprintf(count, sizeof count, "%" PRId64, n);
            if (!per_seq) {
                deck_error_set(err, 0, 0, "%s has %s elements per rank, more than the 2147483647 that the kernels' "
                               "32-bit indices reach", t[i].what, count);
                return deck_error_hint(err, "%s", t[i].fix);
            }
            deck_error_set(err, 0, 0, "a micro-batch of %" PRId64 " sequences is too large: %s would hold %s elements, "
                           "more than the 2147483647 that the kernels' 32-bit indices reach", B, t[i].what, count);
            return t[i].n < 0 ? deck_error_hint(err, "%s", t[i].fix)
                              : micro_batch_hint(cfg, world, t[i].n, t[i].fix, err);
        }
    return 0;
}

static int check_train(const struct config *cfg, struct deck_error *err)
{
    char lr[32], min_lr[32], tenth[32];
    int64_t steps = cfg->train.steps, warm = cfg->train.warmup_steps;
    if (cfg->train.lr_schedule_id == TRAIN_LR_SCHEDULE_cosine && cfg->train.min_lr > cfg->train.lr) {
        config_fmt_real(lr, sizeof lr, cfg->train.lr);
        config_fmt_real(min_lr, sizeof min_lr, cfg->train.min_lr);
        snprintf(tenth, sizeof tenth, "%.3g", cfg->train.lr / 10);
        deck_error_set(err, 0, 0, "min_lr = %s is larger than lr = %s (the cosine decays from lr to min_lr)", min_lr, lr);
        return deck_error_hint(err, "set min_lr <= %s, e.g. min_lr = %s (lr / 10)", lr, tenth);
    }
    if (steps > 0 && warm > steps) {
        deck_error_set(err, 0, 0, "warmup_steps = %" PRId64 " is larger than steps = %" PRId64, warm, steps);
        return deck_error_hint(err, "set warmup_steps <= %" PRId64 " (e.g. %" PRId64 ", a tenth of steps), or steps >= %" PRId64,
                        steps, steps / 10, warm);
    }
    return 0;
}

static int check_data(const struct config *cfg, struct deck_error *err)
{
    const char *kind = cfg->data.kind;
    enum data_kind id = cfg->data.kind_id;
    if (id == DATA_KIND_synthetic && cfg->data.path[0]) {
        deck_error_set(err, 0, 0, "path = '%.*s' is set, but kind = 'synthetic' reads no file", SHOW, cfg->data.path);
        return deck_error_hint(err, "set kind = 'text' (a text file) or kind = 'tokens' (token shards) in &data to "
                             "train on it, or remove path");
    }
    if (id != DATA_KIND_synthetic && !cfg->data.path[0]) {
        deck_error_set(err, 0, 0, "kind = '%s' needs a file, but path is empty", kind);
        return deck_error_hint(err, "%s", id == DATA_KIND_text
                                       ? "set path = 'input.txt' in &data (any text file; its bytes are the tokens)"
                                       : "set path = 'data/train_*.bin' in &data (llm.c token shards)");
    }
    if (id == DATA_KIND_text && cfg->model.vocab_size < 256) {
        deck_error_set(err, 0, 0, "kind = 'text' reads bytes (256 token ids), but vocab_size = %" PRId64,
                 cfg->model.vocab_size);
        return deck_error_hint(err, "set vocab_size = 256 in &model");
    }
    if (cfg->data.val_path[0] && id == DATA_KIND_synthetic) {
        deck_error_set(err, 0, 0, "val_path = '%.*s' is set, but kind = 'synthetic' reads no file", SHOW,
                       cfg->data.val_path);
        return deck_error_hint(err, "use kind = 'text' or 'tokens' for held-out data, or remove val_path");
    }
    if (cfg->train.eval_every > 0 && !cfg->data.val_path[0]) {
        deck_error_set(err, 0, 0, "eval_every = %" PRId64 " needs held-out data, but data.val_path is empty",
                       cfg->train.eval_every);
        return deck_error_hint(err, "set val_path in &data (the same kind of file as path), or eval_every = 0");
    }
    if (cfg->data.val_path[0] && cfg->train.eval_every == 0) {
        deck_error_set(err, 0, 0, "data.val_path = '%.*s' is set, but train.eval_every = 0 never reads it", SHOW,
                       cfg->data.val_path);
        return deck_error_hint(err, "set eval_every in &train (e.g. 100), or remove val_path");
    }
    if (cfg->train.mc_eval_every > 0 && !cfg->eval.tasks[0]) {
        deck_error_set(err, 0, 0, "mc_eval_every = %" PRId64 " needs multiple-choice tasks, but eval.tasks is empty",
                       cfg->train.mc_eval_every);
        return deck_error_hint(err, "set tasks in &eval (llm.c eval files or JSON Lines), or mc_eval_every = 0");
    }
    return 0;
}

/* Where the run writes: a directory, so never an empty name. */
static int check_io(const struct config *cfg, struct deck_error *err)
{
    if (!cfg->io.run_dir[0]) {
        deck_error_set(err, 0, 0, "run_dir = '' in &io: the run needs a directory for its checkpoints and metrics");
        return deck_error_hint(err, "set run_dir = 'run' (the default) or another directory in &io");
    }
    return 0;
}

/* The pipeline schedule can run this many micro-batches (interleaving needs
 * a multiple of pp). */
static int check_schedule(const struct config *cfg, int world, struct deck_error *err)
{
    struct run_shape s;
    run_shape_init(&s, cfg, world, 0);
    if (s.n_micro <= 0) return 0;
    int m = s.n_micro;
    char why[512];
    if (pp_schedule_check(s.sched, s.schedule_file, s.pp, s.v, m, why, sizeof why) == 0) return 0;
    if (s.sched == PP_FILE && (int64_t)s.v * m <= PP_MAX_COMPUTES) { /* (too many computes: not the file's fault) */
        deck_error_set(err, 0, 0, "schedule_file (pp = %d, virtual_stages = %d, %d micro-batches per replica): %s", s.pp,
                       s.v, m, why);
        return deck_error_hint(err, "correct the file (docs/pipeline.md, \"A schedule from a file\"); `triad schedule` "
                                    "with schedule = '1f1b', 'interleaved' or 'zb-h1' draws one to start from");
    }
    deck_error_set(err, 0, 0, "schedule = '%s' cannot run %d micro-batches per replica on pp = %" PRId64 ": %s",
             cfg->parallel.schedule, m, cfg->parallel.pp, why);
    return deck_error_hint(err, "change batch_size or micro_batch_size (micro-batches per replica = batch_size / "
                         "(dp * micro_batch_size)), or the schedule");
}

/* One key a deck sets (not to its default) that nothing reads with the
 * keys beside it: the error names it, why, and the fix. */
struct unread {
    const char *group, *key;
    double here;
    int logical;      /* a BOOL: shown as .true./.false. */
    const char *why;  /* "without experts (n_expert = 0): ..." */
    const char *fix;  /* the other way out than removing it */
};

static int unread_error(const struct unread *u, size_t n, struct deck_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (u[i].here == config_key_default(u[i].group, u[i].key)) continue;
        char v[32];
        if (u[i].logical) snprintf(v, sizeof v, "%s", u[i].here != 0 ? ".true." : ".false.");
        else config_fmt_real(v, sizeof v, u[i].here);
        deck_error_set(err, 0, 0, "%s.%s = %s %s, so nothing reads it", u[i].group, u[i].key, v, u[i].why);
        return deck_error_hint(err, "remove %s, or %s", u[i].key, u[i].fix);
    }
    return 0;
}

int config_check_unread(const struct config *cfg, struct deck_error *err)
{
    config_error_reset(err, "");
    if (cfg->model.arch_id != MODEL_ARCH_llama) {
        const struct unread u[] = {{"model", "rope_theta", cfg->model.rope_theta, 0,
                                    "with arch = 'gpt2' (learned positions, no rotary embedding)", "set arch = 'llama'"}};
        if (unread_error(u, 1, err)) return -1;
    }
    if (cfg->model.n_expert == 0) {
        const char *why = "without experts (n_expert = 0: a dense MLP)", *fix = "set n_expert > 0";
        const struct unread u[] = {
            {"model", "n_expert_active", (double)cfg->model.n_expert_active, 0, why, fix},
            {"model", "moe_ffn_hidden", (double)cfg->model.moe_ffn_hidden, 0, why, fix},
            {"model", "moe_norm_topk", (double)cfg->model.moe_norm_topk, 1, why, fix},
            {"model", "moe_shared_gate", (double)cfg->model.moe_shared_gate, 1, why, fix},
            {"train", "moe_aux_loss", cfg->train.moe_aux_loss, 0, why, fix},
            {"train", "moe_z_loss", cfg->train.moe_z_loss, 0, why, fix},
            {"train", "moe_capacity", cfg->train.moe_capacity, 0, why, fix},
        };
        if (cfg->model.moe_router_id != 0) { /* (an enum: its default is the first choice) */
            deck_error_set(err, 0, 0, "model.moe_router = '%s' %s, so nothing reads it", cfg->model.moe_router, why);
            return deck_error_hint(err, "remove moe_router, or %s", fix);
        }
        if (unread_error(u, sizeof u / sizeof u[0], err)) return -1;
    } else if (cfg->model.n_shared_expert == 0) {
        const struct unread u[] = {{"model", "moe_shared_gate", (double)cfg->model.moe_shared_gate, 1,
                                    "without shared experts (n_shared_expert = 0)", "set n_shared_expert > 0"}};
        if (unread_error(u, 1, err)) return -1;
    }
    if (cfg->train.precision_id != TRAIN_PRECISION_fp16) {
        char why[96];
        snprintf(why, sizeof why, "with precision = '%.8s' (the loss scale is fp16's alone)", cfg->train.precision);
        const char *fix = "set precision = 'fp16'";
        const struct unread u[] = {
            {"train", "loss_scale", cfg->train.loss_scale, 0, why, fix},
            {"train", "loss_scale_growth", cfg->train.loss_scale_growth, 0, why, fix},
            {"train", "loss_scale_window", (double)cfg->train.loss_scale_window, 0, why, fix},
            {"train", "loss_scale_backoff", cfg->train.loss_scale_backoff, 0, why, fix},
            {"train", "loss_scale_hysteresis", (double)cfg->train.loss_scale_hysteresis, 0, why, fix},
            {"train", "loss_scale_min", cfg->train.loss_scale_min, 0, why, fix},
        };
        if (unread_error(u, sizeof u / sizeof u[0], err)) return -1;
    }
    if (cfg->train.precision_id == TRAIN_PRECISION_fp32 && cfg->train.pack_activations == 1) {
        deck_error_set(err, 0, 0, "train.pack_activations = .true. with precision = 'fp32': only bf16 and fp16 "
                                  "activations pack into 16 bits, so nothing reads it");
        return deck_error_hint(err, "remove pack_activations, or set precision = 'bf16' or 'fp16'");
    }
    if (cfg->train.lr_schedule_id == TRAIN_LR_SCHEDULE_constant) {
        const struct unread u[] = {{"train", "min_lr", cfg->train.min_lr, 0, "with lr_schedule = 'constant' (the rate is lr "
                                    "after the warm-up)", "set lr_schedule = 'cosine'"}};
        if (unread_error(u, 1, err)) return -1;
    }
    if (cfg->data.kind_id == DATA_KIND_synthetic && cfg->data.shuffle) {
        deck_error_set(err, 0, 0, "data.shuffle = .true. with kind = 'synthetic': the task draws its sequences, "
                                  "there are no windows to shuffle, so nothing reads it");
        return deck_error_hint(err, "remove shuffle, or read text or tokens (data.kind)");
    }
    return 0;
}

int config_validate(const struct config *cfg, int world, struct deck_error *err)
{
    config_error_reset(err, "");
    if (check_model(cfg, err) || check_moe(cfg, err) || check_features(cfg, err) || check_split(cfg, err) ||
        check_world(cfg, world, err) || check_diag_ranks(cfg, world, err) || check_batch(cfg, world, err) ||
        check_sizes(cfg, world, err) || check_train(cfg, err) || check_data(cfg, err) || check_io(cfg, err) ||
        check_schedule(cfg, world, err))
        return -1;
    return 0;
}

