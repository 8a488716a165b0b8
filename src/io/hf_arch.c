/* hf_arch.c -- the Hugging Face architectures triad reads and writes
 * (hf.h): each one's model_type and class, the names and layouts of its
 * tensors, its config.json checked against the deck's &model (io.init_from)
 * and written (`triad export`), and which one expresses a model.  Whatever
 * differs between GPT2LMHeadModel, LlamaForCausalLM, MixtralForCausalLM and
 * Qwen2MoeForCausalLM lives here; docs/formats.md has the tables. */
#include "hf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"
#include "log.h"

static const struct {
    const char *model_type, *class;
} arch_names[HF_NARCH] = {
    [HF_GPT2] = {"gpt2", "GPT2LMHeadModel"},
    [HF_LLAMA] = {"llama", "LlamaForCausalLM"},
    [HF_MIXTRAL] = {"mixtral", "MixtralForCausalLM"},
    [HF_QWEN2_MOE] = {"qwen2_moe", "Qwen2MoeForCausalLM"},
};

const char *hf_model_type(enum hf_arch a) { return arch_names[a].model_type; }
const char *hf_class(enum hf_arch a) { return arch_names[a].class; }

static int is_moe(enum hf_arch a) { return a == HF_MIXTRAL || a == HF_QWEN2_MOE; }

/* ------------------------------------------------------------ tensor names */

int hf_tensors(enum hf_arch a, const struct hf_tensor **t)
{
    static const struct hf_tensor llama[] = {
        {"model.embed_tokens.weight", P_WTE, -1, 0},
        {"model.layers.%d.input_layernorm.weight", P_LN1W, -1, 0},
        {"model.layers.%d.self_attn.q_proj.weight", P_QKVW, 0, 0},
        {"model.layers.%d.self_attn.k_proj.weight", P_QKVW, 1, 0},
        {"model.layers.%d.self_attn.v_proj.weight", P_QKVW, 2, 0},
        {"model.layers.%d.self_attn.o_proj.weight", P_ATTPROJW, -1, 0},
        {"model.layers.%d.post_attention_layernorm.weight", P_LN2W, -1, 0},
        {"model.layers.%d.mlp.gate_proj.weight", P_FCW, 0, 0},
        {"model.layers.%d.mlp.up_proj.weight", P_FCW, 1, 0},
        {"model.layers.%d.mlp.down_proj.weight", P_FCPROJW, -1, 0},
        {"model.norm.weight", P_LNFW, -1, 0},
        {"lm_head.weight", P_LMHEAD, -1, 0},
    };
    static const struct hf_tensor gpt2[] = {
        {"wte.weight", P_WTE, -1, 0},                  {"wpe.weight", P_WPE, -1, 0},
        {"h.%d.ln_1.weight", P_LN1W, -1, 0},           {"h.%d.ln_1.bias", P_LN1B, -1, 0},
        {"h.%d.attn.c_attn.weight", P_QKVW, -1, 1},    {"h.%d.attn.c_attn.bias", P_QKVB, -1, 0},
        {"h.%d.attn.c_proj.weight", P_ATTPROJW, -1, 1}, {"h.%d.attn.c_proj.bias", P_ATTPROJB, -1, 0},
        {"h.%d.ln_2.weight", P_LN2W, -1, 0},           {"h.%d.ln_2.bias", P_LN2B, -1, 0},
        {"h.%d.mlp.c_fc.weight", P_FCW, -1, 1},        {"h.%d.mlp.c_fc.bias", P_FCB, -1, 0},
        {"h.%d.mlp.c_proj.weight", P_FCPROJW, -1, 1},  {"h.%d.mlp.c_proj.bias", P_FCPROJB, -1, 0},
        {"ln_f.weight", P_LNFW, -1, 0},                {"ln_f.bias", P_LNFB, -1, 0},
        {"lm_head.weight", P_LMHEAD, -1, 0},
    };
    /* the router is block_sparse_moe.gate [E, C]; expert X's w1 (gate) and
     * w3 (up) are the rows of its fc_w, w2 (down) its fcproj_w */
    static const struct hf_tensor mixtral[] = {
        {"model.embed_tokens.weight", P_WTE, -1, 0},
        {"model.layers.%d.input_layernorm.weight", P_LN1W, -1, 0},
        {"model.layers.%d.self_attn.q_proj.weight", P_QKVW, 0, 0},
        {"model.layers.%d.self_attn.k_proj.weight", P_QKVW, 1, 0},
        {"model.layers.%d.self_attn.v_proj.weight", P_QKVW, 2, 0},
        {"model.layers.%d.self_attn.o_proj.weight", P_ATTPROJW, -1, 0},
        {"model.layers.%d.post_attention_layernorm.weight", P_LN2W, -1, 0},
        {"model.layers.%d.block_sparse_moe.gate.weight", P_ROUTERW, -1, 0},
        {"model.layers.%d.block_sparse_moe.experts.%d.w1.weight", P_EXPFCW, 0, 0},
        {"model.layers.%d.block_sparse_moe.experts.%d.w3.weight", P_EXPFCW, 1, 0},
        {"model.layers.%d.block_sparse_moe.experts.%d.w2.weight", P_EXPPROJW, -1, 0},
        {"model.norm.weight", P_LNFW, -1, 0},
        {"lm_head.weight", P_LMHEAD, -1, 0},
    };
    /* Qwen2's attention adds q, k and v biases (the row parts of qkv_b);
     * the shared expert is triad's fc_w (gate, up) and fcproj_w (down), its
     * gate shared_expert_gate [1, C] */
    static const struct hf_tensor qwen2_moe[] = {
        {"model.embed_tokens.weight", P_WTE, -1, 0},
        {"model.layers.%d.input_layernorm.weight", P_LN1W, -1, 0},
        {"model.layers.%d.self_attn.q_proj.weight", P_QKVW, 0, 0},
        {"model.layers.%d.self_attn.q_proj.bias", P_QKVB, 0, 0},
        {"model.layers.%d.self_attn.k_proj.weight", P_QKVW, 1, 0},
        {"model.layers.%d.self_attn.k_proj.bias", P_QKVB, 1, 0},
        {"model.layers.%d.self_attn.v_proj.weight", P_QKVW, 2, 0},
        {"model.layers.%d.self_attn.v_proj.bias", P_QKVB, 2, 0},
        {"model.layers.%d.self_attn.o_proj.weight", P_ATTPROJW, -1, 0},
        {"model.layers.%d.post_attention_layernorm.weight", P_LN2W, -1, 0},
        {"model.layers.%d.mlp.gate_proj.weight", P_DFCW, 0, 0}, /* (the dense blocks of mlp_only_layers) */
        {"model.layers.%d.mlp.up_proj.weight", P_DFCW, 1, 0},
        {"model.layers.%d.mlp.down_proj.weight", P_DFCPROJW, -1, 0},
        {"model.layers.%d.mlp.gate.weight", P_ROUTERW, -1, 0},
        {"model.layers.%d.mlp.experts.%d.gate_proj.weight", P_EXPFCW, 0, 0},
        {"model.layers.%d.mlp.experts.%d.up_proj.weight", P_EXPFCW, 1, 0},
        {"model.layers.%d.mlp.experts.%d.down_proj.weight", P_EXPPROJW, -1, 0},
        {"model.layers.%d.mlp.shared_expert.gate_proj.weight", P_FCW, 0, 0},
        {"model.layers.%d.mlp.shared_expert.up_proj.weight", P_FCW, 1, 0},
        {"model.layers.%d.mlp.shared_expert.down_proj.weight", P_FCPROJW, -1, 0},
        {"model.layers.%d.mlp.shared_expert_gate.weight", P_SHGATEW, -1, 0},
        {"model.norm.weight", P_LNFW, -1, 0},
        {"lm_head.weight", P_LMHEAD, -1, 0},
    };
#define TABLE(x) (*t = x, (int)(sizeof x / sizeof x[0]))
    switch (a) {
    case HF_GPT2: return TABLE(gpt2);
    case HF_MIXTRAL: return TABLE(mixtral);
    case HF_QWEN2_MOE: return TABLE(qwen2_moe);
    default: return TABLE(llama);
    }
#undef TABLE
}

/* ------------------------------------------------------------ which architecture */

/* "; "-separated clauses appended to list (of size len). */
static void add(char *list, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *list, size_t len, const char *fmt, ...)
{
    size_t at = strlen(list);
    if (at + 3 >= len) return;
    if (at) at += (size_t)snprintf(list + at, len - at, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(list + at, len - at, fmt, ap);
    va_end(ap);
}

int hf_arch_of(const struct model_dims *d, char *err, size_t errlen)
{
    if (!d->llama) return HF_GPT2;
    if (!d->E) {
        if (d->qkv_bias)
            return errorf(err, errlen, "the model is a dense llama with q, k and v biases (model.qkv_bias): "
                          "LlamaForCausalLM has none (its attention_bias adds o_proj's too), and no other Hugging "
                          "Face architecture triad writes is dense: nothing written");
        return HF_LLAMA;
    }
    char why[1024] = "";
    if (d->sigmoid_router)
        add(why, sizeof why, "a sigmoid router (moe_router = 'sigmoid'): Mixtral's and Qwen2-MoE's are a softmax "
            "over the experts");
    if (d->F && !d->shared_gate)
        add(why, sizeof why, "ungated shared experts (moe_shared_gate = .false.): Qwen2-MoE scales its shared "
            "expert by sigmoid(x . shared_expert_gate)");
    if (d->F && !d->qkv_bias)
        add(why, sizeof why, "shared experts without q, k and v biases (qkv_bias = .false.): Qwen2-MoE's attention "
            "has them, and Mixtral has no shared expert");
    if (!d->F && d->qkv_bias)
        add(why, sizeof why, "q, k and v biases without shared experts (n_shared_expert = 0): Mixtral has no biases, "
            "and Qwen2-MoE has a shared expert");
    if (!d->F && !d->norm_topk)
        add(why, sizeof why, "top-k weights not renormalised (moe_norm_topk = .false.) without shared experts: "
            "Mixtral renormalises them always");
    if (!d->F && d->Ld)
        add(why, sizeof why, "leading dense blocks (moe_dense_layers = %d) without shared experts: Mixtral has "
            "experts in every block, and Qwen2-MoE has a shared expert", d->Ld);
    if (why[0])
        return errorf(err, errlen, "no Hugging Face architecture expresses this mixture of experts: %s. triad "
                      "writes MixtralForCausalLM (softmax router, top-k renormalised, no shared expert, no biases) "
                      "and Qwen2MoeForCausalLM (softmax router, one gated shared expert, q, k and v biases): "
                      "nothing written", why);
    return d->F ? HF_QWEN2_MOE : HF_MIXTRAL;
}

/* ------------------------------------------------------------ config.json against the deck */

/* One key of config.json against the deck: its kind, and whether the file
 * has it or its default stands in. */
enum key_kind { KEY_INT, KEY_REAL, KEY_BOOL };
struct key_check {
    const char *deck, *file; /* the deck's key, config.json's */
    enum key_kind kind;
    double here;
    int present;             /* config.json has it (else the default, if any, stands) */
    int has_default;
    double there;
};

/* The value of k in cfg by its kind; null counts as absent (Hugging Face's
 * None: the default).  -1 with the reason for a value of the wrong type. */
static int key_value(struct key_check *k, const struct json *cfg, const char *path, char *err, size_t errlen)
{
    static const char *const what[] = {"an integer", "a number", "true or false"};
    static const char *const kinds[] = {"null", "false", "true", "a number", "a string", "an array", "an object"};
    const struct json *v = json_get(cfg, k->file);
    k->present = v && v->kind != JSON_NULL;
    if (!k->present) return 0;
    int ok = k->kind == KEY_BOOL ? v->kind == JSON_TRUE || v->kind == JSON_FALSE : v->kind == JSON_NUMBER;
    if (ok && k->kind == KEY_INT) ok = v->number == floor(v->number) && fabs(v->number) <= 2147483647.0;
    if (!ok) {
        if (v->kind == JSON_NUMBER) {
            char num[32];
            for (int digits = 1; digits <= 17; digits++) /* the shortest that reads back */
                if (snprintf(num, sizeof num, "%.*g", digits, v->number), strtod(num, NULL) == v->number) break;
            return errorf(err, errlen, "%s: \"%s\" is %s; it must be %s", path, k->file, num, what[k->kind]);
        }
        return errorf(err, errlen, "%s: \"%s\" is %s%s%.40s%s; it must be %s", path, k->file, kinds[v->kind],
                      v->kind == JSON_STRING ? " \"" : "", v->kind == JSON_STRING ? v->string : "",
                      v->kind == JSON_STRING ? "\"" : "", what[k->kind]);
    }
    k->there = k->kind == KEY_BOOL ? v->kind == JSON_TRUE : v->number;
    return 0;
}

/* An optional key of one kind (absent or null: 0 and *present = 0). */
static int opt_key(const struct json *cfg, const char *key, enum key_kind kind, double *out, int *present,
                   const char *path, char *err, size_t errlen)
{
    struct key_check k = {.deck = key, .file = key, .kind = kind};
    if (key_value(&k, cfg, path, err, errlen) != 0) return -1;
    *present = k.present;
    *out = k.present ? k.there : 0;
    return 0;
}

/* An optional string key: its text, or NULL when absent or null; another
 * type is an error. */
static int opt_string(const struct json *cfg, const char *key, const char *example, const char **out,
                      const char *path, char *err, size_t errlen)
{
    const struct json *v = json_get(cfg, key);
    *out = NULL;
    if (!v || v->kind == JSON_NULL) return 0;
    if (v->kind != JSON_STRING)
        return errorf(err, errlen, "%s: \"%s\" is not a string; it must be a name such as \"%s\"", path, key, example);
    *out = v->string;
    return 0;
}

/* Does config.json's value of k agree with the deck's?  Integers and
 * switches exactly; reals (eps, theta) to 1e-6 relative, as a file writes
 * them with fewer digits. */
static int key_agrees(const struct key_check *k, double there)
{
    return k->kind == KEY_REAL ? fabs(k->here - there) <= fabs(k->here) * 1e-6 : k->here == there;
}

/* A value as the deck writes it (in_deck) or as config.json does. */
static const char *shown(char *buf, size_t len, enum key_kind kind, double x, int in_deck)
{
    if (kind == KEY_BOOL) snprintf(buf, len, "%s", in_deck ? (x ? ".true." : ".false.") : (x ? "true" : "false"));
    else snprintf(buf, len, "%g", x);
    return buf;
}

/* config.json's key as the deck's value to set: the integer, or the key. */
static const char *to_set(char *buf, size_t len, const struct json *cfg, const char *key)
{
    const struct json *v = json_get(cfg, key);
    if (v && v->kind == JSON_NUMBER && v->number == floor(v->number) && fabs(v->number) < 1e9)
        snprintf(buf, len, "%.0f", v->number);
    else snprintf(buf, len, "config.json's %s", key);
    return buf;
}

/* A mixture-of-experts folder for a dense deck: the keys to set. */
static int dense_deck(enum hf_arch a, const struct json *cfg, const char *path, char *err, size_t errlen)
{
    int mixtral = a == HF_MIXTRAL;
    char e[64], k[64], f[64], s[160] = "";
    to_set(e, sizeof e, cfg, mixtral ? "num_local_experts" : "num_experts");
    to_set(k, sizeof k, cfg, "num_experts_per_tok");
    to_set(f, sizeof f, cfg, mixtral ? "intermediate_size" : "moe_intermediate_size");
    if (!mixtral) {
        const struct json *fs = json_get(cfg, "shared_expert_intermediate_size"),
                          *fe = json_get(cfg, "moe_intermediate_size"), *b = json_get(cfg, "qkv_bias");
        if (fs && fe && fs->kind == JSON_NUMBER && fe->kind == JSON_NUMBER && fe->number > 0 &&
            fmod(fs->number, fe->number) == 0 && fs->number / fe->number < 1e6)
            snprintf(s, sizeof s, ", n_shared_expert = %.0f", fs->number / fe->number);
        else snprintf(s, sizeof s, ", n_shared_expert = shared_expert_intermediate_size / moe_intermediate_size");
        if (!b || b->kind != JSON_FALSE) snprintf(s + strlen(s), sizeof s - strlen(s), ", qkv_bias = .true.");
    }
    return errorf(err, errlen, "%s describes a %s, a mixture of experts, but the deck's &model is dense (n_expert = "
                  "0): set n_expert = %s, n_expert_active = %s, moe_ffn_hidden = %s%s", path, hf_class(a), e, k, f, s);
}

/* The deck's family, its experts and the switches the architecture fixes
 * (no config.json key says them). */
static int check_kind(const struct model_dims *d, enum hf_arch a, const struct json *cfg, const char *path, char *err,
                      size_t errlen)
{
    if (a == HF_LLAMA && d->E)
        return errorf(err, errlen, "%s: model_type 'llama' is a dense model (one MLP in every block), but the deck has "
                      "n_expert = %d: set n_expert = 0 (and ffn_hidden = config.json's intermediate_size)", path, d->E);
    if (is_moe(a) && !d->E) return dense_deck(a, cfg, path, err, errlen);
    char set[1024] = "";
    if (a == HF_LLAMA && d->qkv_bias)
        add(set, sizeof set, "qkv_bias = .false. (LlamaForCausalLM has no q, k and v biases: its attention_bias adds "
            "o_proj's too)");
    if (is_moe(a) && d->sigmoid_router)
        add(set, sizeof set, "moe_router = 'softmax' (its router is a softmax over the experts)");
    if (a == HF_MIXTRAL && d->F) add(set, sizeof set, "n_shared_expert = 0 (Mixtral has no shared expert)");
    if (a == HF_MIXTRAL && !d->norm_topk)
        add(set, sizeof set, "moe_norm_topk = .true. (Mixtral renormalises the top-k weights always)");
    if (a == HF_MIXTRAL && d->qkv_bias) add(set, sizeof set, "qkv_bias = .false. (Mixtral has no biases)");
    if (a == HF_MIXTRAL && d->Ld) add(set, sizeof set, "moe_dense_layers = 0 (Mixtral has experts in every block)");
    if (a == HF_QWEN2_MOE && d->F && !d->shared_gate)
        add(set, sizeof set, "moe_shared_gate = .true. (Qwen2-MoE scales its shared expert by "
            "sigmoid(x . shared_expert_gate))");
    if (set[0])
        return errorf(err, errlen, "%s describes a %s (model_type '%s'), which the deck's &model is not: set %s", path,
                      hf_class(a), hf_model_type(a), set);
    return 0;
}

/* k[*n] = the key described; its index returned. */
static int key_add(struct key_check *k, int *n, const char *deck, const char *file, enum key_kind kind, double here,
                   int has_default, double def)
{
    k[*n] = (struct key_check){deck, file, kind, here, 0, has_default, def};
    return (*n)++;
}

/* The keys of config.json that describe the deck's &model, each compared;
 * every differing one listed. */
static int check_keys(const struct model_dims *d, enum hf_arch a, const struct json *cfg, const char *path, char *err,
                      size_t errlen)
{
    struct key_check k[20];
    int n = 0, heads = -1, kv = -1, width = -1, inner = -1, fe = -1, fs = -1;
#define KEY(...) key_add(k, &n, __VA_ARGS__)
    if (a == HF_GPT2) {
        KEY("n_layer", "n_layer", KEY_INT, d->L, 0, 0);
        heads = KEY("n_head", "n_head", KEY_INT, d->NH, 0, 0);
        width = KEY("d_model", "n_embd", KEY_INT, d->C, 0, 0);
        KEY("vocab_size", "vocab_size", KEY_INT, d->V, 0, 0);
        inner = KEY("ffn_hidden", "n_inner", KEY_INT, d->F, 0, 0); /* (default: 4 n_embd, below) */
        KEY("tie_embeddings", "tie_word_embeddings", KEY_BOOL, d->tied, 1, 1.0);
    } else {
        KEY("n_layer", "num_hidden_layers", KEY_INT, d->L, 0, 0);
        heads = KEY("n_head", "num_attention_heads", KEY_INT, d->NH, 0, 0);
        kv = KEY("n_kv_head", "num_key_value_heads", KEY_INT, d->NKV, 0, 0); /* (its default below) */
        KEY("d_model", "hidden_size", KEY_INT, d->C, 0, 0);
        if (a == HF_LLAMA) KEY("ffn_hidden", "intermediate_size", KEY_INT, d->F, 0, 0);
        KEY("vocab_size", "vocab_size", KEY_INT, d->V, 0, 0);
        /* the defaults of each architecture's configuration class */
        KEY("norm_eps", "rms_norm_eps", KEY_REAL, d->eps, 1, a == HF_MIXTRAL ? 1e-5 : 1e-6);
        KEY("rope_theta", "rope_theta", KEY_REAL, d->rope_theta, 1, a == HF_MIXTRAL ? 1e6 : 10000.0);
        KEY("tie_embeddings", "tie_word_embeddings", KEY_BOOL, d->tied, 1, 0.0);
    }
    if (a == HF_MIXTRAL) {
        KEY("n_expert", "num_local_experts", KEY_INT, d->E, 0, 0);
        KEY("n_expert_active", "num_experts_per_tok", KEY_INT, d->K, 0, 0);
        KEY("moe_ffn_hidden", "intermediate_size", KEY_INT, d->Fe, 0, 0);
    }
    if (a == HF_QWEN2_MOE) {
        KEY("n_expert", "num_experts", KEY_INT, d->E, 0, 0);
        KEY("n_expert_active", "num_experts_per_tok", KEY_INT, d->K, 0, 0);
        fe = KEY("moe_ffn_hidden", "moe_intermediate_size", KEY_INT, d->Fe, 0, 0);
        fs = KEY("n_shared_expert", "shared_expert_intermediate_size", KEY_INT, d->F / d->Fe, 0, 0);
        KEY("moe_norm_topk", "norm_topk_prob", KEY_BOOL, d->norm_topk, 1, 0.0);
        KEY("qkv_bias", "qkv_bias", KEY_BOOL, d->qkv_bias, 1, 1.0);
        if (d->Ld) KEY("ffn_hidden", "intermediate_size", KEY_INT, d->Fd, 0, 0); /* (the dense blocks' width) */
    }
#undef KEY
    for (int i = 0; i < n; i++)
        if (key_value(&k[i], cfg, path, err, errlen) != 0) return -1;
    /* defaults that are other keys: kv heads = heads (Mixtral's and
     * Qwen2-MoE's classes: 8 and 16 when absent, the heads when null), gpt2's MLP 4 C */
    if (kv >= 0 && !k[kv].present) {
        if (is_moe(a) && !json_get(cfg, "num_key_value_heads"))
            k[kv].has_default = 1, k[kv].there = a == HF_MIXTRAL ? 8 : 16;
        else if (k[heads].present) k[kv].has_default = 1, k[kv].there = k[heads].there;
    }
    if (a == HF_GPT2 && k[width].present && !k[inner].present)
        k[inner].has_default = 1, k[inner].there = 4 * k[width].there;
    /* Qwen2-MoE's shared expert is shared_expert_intermediate_size wide, triad's n_shared_expert x moe_ffn_hidden */
    if (fs >= 0 && k[fs].present) {
        double s = k[fs].there, w = k[fe].there;
        if (k[fe].present && w > 0 && fmod(s, w) != 0)
            return errorf(err, errlen, "%s: shared_expert_intermediate_size = %g is not a multiple of "
                          "moe_intermediate_size = %g: triad's shared experts are n_shared_expert x moe_ffn_hidden "
                          "wide, which cannot hold this model", path, s, w);
        if (k[fe].present && w > 0)
            k[fs].there = s / w, k[fs].file = "shared_expert_intermediate_size / moe_intermediate_size";
        else /* (no expert width to divide by: the widths compared) */
            k[fs].deck = "n_shared_expert x moe_ffn_hidden", k[fs].here = d->F;
    }
    char list[2048] = "", a1[32], a2[32];
    for (int i = 0; i < n; i++) {
        const struct key_check *c = &k[i];
        if ((c->present || c->has_default) && key_agrees(c, c->there)) continue;
        shown(a1, sizeof a1, c->kind, c->here, 1);
        shown(a2, sizeof a2, c->kind, c->there, 0);
        if (c->present)
            add(list, sizeof list, "%s = %s in the deck, %s = %s in config.json", c->deck, a1, c->file, a2);
        else if (c->has_default)
            add(list, sizeof list, "%s = %s in the deck, but config.json has no %s (its default is %s)", c->deck, a1,
                c->file, a2);
        else
            add(list, sizeof list, "%s = %s in the deck, no %s in config.json", c->deck, a1, c->file);
    }
    if (list[0])
        return errorf(err, errlen, "%s describes another model: %s; set the deck's &model as config.json's", path,
                      list);
    return 0;
}

/* The attention each position sees: a sliding window shorter than seq_len
 * is not triad's (Mixtral: sliding_window; Qwen2-MoE: use_sliding_window
 * with sliding_window, and layer_types). */
static int check_window(const struct model_dims *d, enum hf_arch a, const struct json *cfg, const char *path,
                        char *err, size_t errlen)
{
    double x = 0, on = a == HF_MIXTRAL;
    int has = 0, has_on = 0;
    if (a == HF_QWEN2_MOE && opt_key(cfg, "use_sliding_window", KEY_BOOL, &on, &has_on, path, err, errlen) != 0)
        return -1;
    if (opt_key(cfg, "sliding_window", KEY_INT, &x, &has, path, err, errlen) != 0) return -1;
    if (a == HF_QWEN2_MOE && !has) x = 4096, has = 1; /* (Qwen2MoeConfig's default) */
    if (on && has && x < d->T)
        return errorf(err, errlen, "%s: sliding_window = %g%s: each position sees only the %g before it, fewer "
                      "than the deck's seq_len = %d; triad's attention sees every earlier position", path, x,
                      a == HF_QWEN2_MOE ? " with use_sliding_window = true" : "", x, d->T);
    const struct json *lt = json_get(cfg, "layer_types");
    if (a != HF_QWEN2_MOE || !lt || lt->kind == JSON_NULL) return 0;
    for (int i = 0; lt->kind == JSON_ARRAY && i < lt->n; i++)
        if (lt->item[i].kind != JSON_STRING || strcmp(lt->item[i].string, "full_attention") != 0)
            return errorf(err, errlen, "%s: layer_types[%d] is not \"full_attention\"; triad's attention sees every "
                          "earlier position in every layer", path, i);
    if (lt->kind != JSON_ARRAY) return errorf(err, errlen, "%s: \"layer_types\" is not an array", path);
    return 0;
}

/* Qwen2-MoE's mlp_only_layers, the blocks with a dense MLP: triad's are
 * the first moe_dense_layers, so the list must name exactly those (in any
 * order). */
static int check_dense_layers(const struct model_dims *d, const struct json *mo, const char *path, char *err,
                              size_t errlen)
{
    if (mo && mo->kind != JSON_NULL && mo->kind != JSON_ARRAY)
        return errorf(err, errlen, "%s: \"mlp_only_layers\" is not an array of layers", path);
    int n = mo && mo->kind == JSON_ARRAY ? mo->n : 0, most = -1;
    char seen[4096] = {0};
    for (int i = 0; i < n; i++) {
        const struct json *x = &mo->item[i];
        if (x->kind != JSON_NUMBER || x->number != floor(x->number) || x->number < 0 || x->number >= d->L)
            return errorf(err, errlen, "%s: mlp_only_layers[%d] is not a layer of the %d (0 .. %d)", path, i, d->L,
                          d->L - 1);
        int l = (int)x->number;
        if (l < (int)sizeof seen && seen[l]++)
            return errorf(err, errlen, "%s: mlp_only_layers names layer %d twice", path, l);
        most = l > most ? l : most;
    }
    if (most + 1 != n)
        return errorf(err, errlen, "%s: mlp_only_layers names %d dense block(s) that are not the first ones (layer "
                      "%d is among them); triad's dense blocks are the leading moe_dense_layers", path, n, most);
    if (n != d->Ld)
        return errorf(err, errlen, "%s: mlp_only_layers makes the first %d block(s) dense, but the deck has "
                      "moe_dense_layers = %d: set moe_dense_layers = %d", path, n, d->Ld, n);
    return 0;
}

/* config.json's rope_scaling against the deck's: absent, null or rope_type
 * 'default' is none; 'llama3' (or the older key "type") with its four
 * values as the deck's rope_factor, rope_low_freq_factor,
 * rope_high_freq_factor and rope_original_max_positions; any other type is
 * not triad's. */
static int check_rope_scaling(const struct model_dims *d, const struct json *rs, const char *path, char *err,
                              size_t errlen)
{
    const char *type = "default";
    if (rs && rs->kind != JSON_NULL) {
        const struct json *t = rs->kind == JSON_OBJECT ? json_get(rs, "rope_type") : NULL;
        if (rs->kind == JSON_OBJECT && (!t || t->kind == JSON_NULL)) t = json_get(rs, "type");
        if (!t || t->kind != JSON_STRING)
            return errorf(err, errlen, "%s: rope_scaling is %s; it must be null or an object with a string "
                          "\"rope_type\"", path, rs->kind != JSON_OBJECT ? "not an object" : t ? "an object whose "
                          "\"rope_type\" is not a string" : "an object without \"rope_type\"");
        type = t->string;
    }
    int llama3 = strcmp(type, "llama3") == 0;
    if (!llama3 && strcmp(type, "default") != 0)
        return errorf(err, errlen, "%s: rope_scaling's rope_type is '%.40s'; triad's rotary embedding is unscaled "
                      "(rope_scaling null, or rope_type 'default') or Llama 3's remap (rope_type 'llama3', the deck's "
                      "rope_scaling = 'llama3')", path, type);
    if (!llama3 && !d->rope.llama3) return 0;
    if (!llama3)
        return errorf(err, errlen, "%s describes another model: rope_scaling = 'llama3' in the deck, %s in config.json "
                      "(unscaled rotary frequencies); set the deck's &model as config.json's (rope_scaling = 'none')",
                      path, rs && rs->kind != JSON_NULL ? "rope_type 'default'" : "no rope_scaling");
    char where[1100];
    snprintf(where, sizeof where, "%.1000s (rope_scaling)", path);
    struct key_check k[] = {
        {"rope_factor", "factor", KEY_REAL, d->rope.factor, 0, 0, 0},
        {"rope_low_freq_factor", "low_freq_factor", KEY_REAL, d->rope.low_freq_factor, 0, 0, 0},
        {"rope_high_freq_factor", "high_freq_factor", KEY_REAL, d->rope.high_freq_factor, 0, 0, 0},
        {"rope_original_max_positions", "original_max_position_embeddings", KEY_INT, d->rope.original_max, 0, 0, 0},
    };
    char list[1024] = "", set[512] = "", a1[32], a2[32];
    for (int i = 0; i < 4; i++) {
        if (key_value(&k[i], rs, where, err, errlen) != 0) return -1;
        if (!k[i].present)
            return errorf(err, errlen, "%s: rope_scaling of rope_type 'llama3' has no \"%s\" (Hugging Face requires "
                          "factor, low_freq_factor, high_freq_factor and original_max_position_embeddings)", path,
                          k[i].file);
        shown(a2, sizeof a2, k[i].kind, k[i].there, 0);
        snprintf(set + strlen(set), sizeof set - strlen(set), ", %s = %s", k[i].deck, a2);
        if (d->rope.llama3 && !key_agrees(&k[i], k[i].there))
            add(list, sizeof list, "%s = %s in the deck, rope_scaling.%s = %s in config.json", k[i].deck,
                shown(a1, sizeof a1, k[i].kind, k[i].here, 1), k[i].file, a2);
    }
    if (!d->rope.llama3)
        return errorf(err, errlen, "%s describes another model: rope_scaling = 'none' in the deck, rope_type 'llama3' "
                      "in config.json; set the deck's &model as config.json's: rope_scaling = 'llama3'%s", path, set);
    if (list[0])
        return errorf(err, errlen, "%s describes another model: %s; set the deck's &model as config.json's", path,
                      list);
    return 0;
}

/* What the deck has no key for and triad's blocks do not do: rotary
 * angles scaled other than by llama3's remap, biases beyond q, k and v,
 * another head width, an activation other than SiLU, rotary angles on part
 * of each head, dense layers among Qwen2-MoE's sparse ones, a sliding
 * window. */
static int check_llama_rest(const struct model_dims *d, enum hf_arch a, const struct json *cfg, const char *path,
                            char *err, size_t errlen)
{
    if (check_rope_scaling(d, json_get(cfg, "rope_scaling"), path, err, errlen) != 0) return -1;
    static const char *const biases[] = {"attention_bias", "mlp_bias"};
    double x;
    int has;
    for (int i = 0; i < 2; i++) {
        if (opt_key(cfg, biases[i], KEY_BOOL, &x, &has, path, err, errlen) != 0) return -1;
        if (has && x)
            return errorf(err, errlen, "%s: %s is true; triad's llama blocks have no such biases", path, biases[i]);
    }
    if (opt_key(cfg, "head_dim", KEY_INT, &x, &has, path, err, errlen) != 0) return -1;
    if (has && x != d->HS) return errorf(err, errlen, "%s: head_dim = %g, but d_model / n_head = %d", path, x, d->HS);
    const char *act;
    if (opt_string(cfg, "hidden_act", "silu", &act, path, err, errlen) != 0) return -1;
    if (act && strcmp(act, "silu") != 0 && strcmp(act, "swish") != 0) /* (transformers' ACT2FN: both nn.SiLU) */
        return errorf(err, errlen, "%s: hidden_act = \"%.60s\": triad's llama MLP computes SiLU (SwiGLU: "
                      "down(silu(gate x) * up x)), so this is a model triad cannot train; it reads folders with "
                      "hidden_act \"silu\" (or absent)", path, act);
    if (opt_key(cfg, "partial_rotary_factor", KEY_REAL, &x, &has, path, err, errlen) != 0) return -1;
    if (has && x != 1)
        return errorf(err, errlen, "%s: partial_rotary_factor = %g: the model rotates only that fraction of each "
                      "head's dimensions, and triad's rotary embedding rotates all of them, so this is a model "
                      "triad cannot train; it reads folders with partial_rotary_factor 1 (or absent)", path, x);
    if (a == HF_QWEN2_MOE) {
        if (opt_key(cfg, "decoder_sparse_step", KEY_INT, &x, &has, path, err, errlen) != 0) return -1;
        if (has && x != 1)
            return errorf(err, errlen, "%s: decoder_sparse_step = %g: only every %g-th block has experts; triad's "
                          "mixture of experts has them in every block (decoder_sparse_step = 1)", path, x, x);
        if (check_dense_layers(d, json_get(cfg, "mlp_only_layers"), path, err, errlen) != 0) return -1;
    }
    return is_moe(a) ? check_window(d, a, cfg, path, err, errlen) : 0;
}

/* What GPT2LMHeadModel computes that the deck has no key for: its
 * positions, the GELU (triad's is the tanh approximation, transformers'
 * "gelu_new" and "gelu_pytorch_tanh"), the LayerNorm epsilon (fixed at
 * 1e-5, as the deck's check for arch = 'gpt2' says) and the attention's
 * scale (1/sqrt(head size) in every layer). */
static int check_gpt2_rest(const struct model_dims *d, const struct json *cfg, const char *path, char *err,
                           size_t errlen)
{
    double x;
    int has;
    if (opt_key(cfg, "n_positions", KEY_INT, &x, &has, path, err, errlen) != 0) return -1;
    if (!has || x < d->T)
        return errorf(err, errlen, "%s: n_positions = %g%s, fewer than the deck's seq_len = %d positions", path, x,
                      has ? "" : " (absent)", d->T);
    const char *act;
    if (opt_string(cfg, "activation_function", "gelu_new", &act, path, err, errlen) != 0) return -1;
    if (act && strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0)
        return errorf(err, errlen, "%s: activation_function = \"%.60s\": triad's GPT-2 MLP computes the tanh "
                      "approximation of GELU (transformers' \"gelu_new\", the same as \"gelu_pytorch_tanh\"), so this "
                      "is a model triad cannot train; it reads folders with one of those two (or the key absent)",
                      path, act);
    if (opt_key(cfg, "layer_norm_epsilon", KEY_REAL, &x, &has, path, err, errlen) != 0) return -1;
    if (has && fabs(x - 1e-5) > 1e-5 * 1e-6)
        return errorf(err, errlen, "%s: layer_norm_epsilon = %g: triad's GPT-2 LayerNorm epsilon is 1e-5, fixed "
                      "(model.norm_eps sets only llama's RMSNorm), so this is a model triad cannot train as it is; "
                      "it reads folders with layer_norm_epsilon 1e-5 (or absent)", path, x);
    if (opt_key(cfg, "scale_attn_weights", KEY_BOOL, &x, &has, path, err, errlen) != 0) return -1;
    if (has && !x)
        return errorf(err, errlen, "%s: scale_attn_weights = false: the model's attention scores are not divided by "
                      "sqrt(head size), and triad's always are, so this is a model triad cannot train; it reads "
                      "folders with scale_attn_weights true (or absent)", path);
    if (opt_key(cfg, "scale_attn_by_inverse_layer_idx", KEY_BOOL, &x, &has, path, err, errlen) != 0) return -1;
    if (has && x)
        return errorf(err, errlen, "%s: scale_attn_by_inverse_layer_idx = true: the model divides layer l's "
                      "attention scores by l + 1 as well, and triad does not, so this is a model triad cannot train; "
                      "it reads folders with scale_attn_by_inverse_layer_idx false (or absent)", path);
    return 0;
}

/* architectures, where present, names the causal language model of the
 * model_type (case aside: old conversions wrote "LLaMAForCausalLM"): a
 * sequence classifier, a question-answering head or a bare encoder of the
 * same family holds other weights for another task. */
static int check_class(enum hf_arch a, const struct json *cfg, const char *path, char *err, size_t errlen)
{
    const struct json *v = json_get(cfg, "architectures");
    if (!v || v->kind == JSON_NULL) return 0;
    if (v->kind != JSON_ARRAY)
        return errorf(err, errlen, "%s: \"architectures\" is not an array of class names; it must be one such "
                      "as [\"%s\"] (or absent)", path, hf_class(a));
    for (int i = 0; i < v->n; i++) {
        const struct json *c = &v->item[i];
        if (c->kind != JSON_STRING)
            return errorf(err, errlen, "%s: architectures[%d] is not a string; it must be a class name such as "
                          "\"%s\"", path, i, hf_class(a));
        if (strcasecmp(c->string, hf_class(a)) != 0)
            return errorf(err, errlen, "%s: architectures[%d] = \"%.80s\": triad trains causal language models, and "
                          "reads model_type '%s' as %s; this folder holds another class of model (another head, "
                          "another task), not one triad can train: use a %s folder", path, i, c->string,
                          hf_model_type(a), hf_class(a), hf_class(a));
    }
    return 0;
}

/* A tensor of architecture a's folders that is no parameter: GPT-2's
 * causal-mask buffers h.L.attn.bias and h.L.attn.masked_bias (with or
 * without "transformer."), older llama-family files' rotary
 * *.rotary_emb.inv_freq.  Every other tensor must be one the model reads. */
int hf_is_buffer(enum hf_arch a, const char *name)
{
    if (a != HF_GPT2) {
        static const char suffix[] = ".rotary_emb.inv_freq";
        size_t n = strlen(name), k = sizeof suffix - 1;
        return n > k && strcmp(name + n - k, suffix) == 0;
    }
    if (strncmp(name, "transformer.", 12) == 0) name += 12;
    if (strncmp(name, "h.", 2) != 0) return 0;
    const char *p = name + 2;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return strcmp(p, ".attn.bias") == 0 || strcmp(p, ".attn.masked_bias") == 0;
}

int hf_check_config(const struct model_dims *d, const struct json *cfg, const char *path, enum hf_arch *arch,
                    char *err, size_t errlen)
{
    const struct json *mt = json_get(cfg, "model_type");
    if (!mt || mt->kind != JSON_STRING)
        return errorf(err, errlen, "%s: \"model_type\" is %s; it must be the string \"llama\", \"gpt2\", \"mixtral\" "
                      "or \"qwen2_moe\"", path, mt ? "not a string" : "missing");
    int a = 0;
    while (a < HF_NARCH && strcmp(mt->string, arch_names[a].model_type) != 0) a++;
    if (a == HF_NARCH)
        return errorf(err, errlen, "%s: model_type '%.60s'; triad reads 'llama' (LlamaForCausalLM), 'gpt2' "
                      "(GPT2LMHeadModel), 'mixtral' (MixtralForCausalLM) and 'qwen2_moe' (Qwen2MoeForCausalLM)", path,
                      mt->string);
    if ((a == HF_GPT2) == d->llama)
        return errorf(err, errlen, "%s: model_type '%.60s', but the deck's arch = '%s' (triad reads model_type 'gpt2' "
                      "as arch = 'gpt2', and 'llama', 'mixtral' and 'qwen2_moe' as arch = 'llama')", path, mt->string,
                      d->llama ? "llama" : "gpt2");
    *arch = (enum hf_arch)a;
    if (check_class(*arch, cfg, path, err, errlen) != 0 || check_kind(d, *arch, cfg, path, err, errlen) != 0 ||
        check_keys(d, *arch, cfg, path, err, errlen) != 0)
        return -1;
    return *arch == HF_GPT2 ? check_gpt2_rest(d, cfg, path, err, errlen)
                            : check_llama_rest(d, *arch, cfg, path, err, errlen);
}

/* ------------------------------------------------------------ config.json written */

/* A real as JSON: the shortest of %.15g / %.17g that reads back exactly. */
static void fmt_real(char *buf, size_t n, double x)
{
    snprintf(buf, n, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, n, "%.17g", x);
}

void hf_print_config(FILE *fp, const struct model_dims *d, enum hf_arch a, enum st_dtype dtype)
{
    const char *torch_dtype = dtype == ST_BF16 ? "bfloat16" : dtype == ST_F16 ? "float16" : "float32";
    const char *tied = d->tied ? "true" : "false";
    char eps[32], theta[32], aux[32];
    for (int digits = 6; digits <= 9; digits++) { /* the float epsilon as the deck wrote it */
        snprintf(eps, sizeof eps, "%.*g", digits, (double)d->eps);
        if ((float)strtod(eps, NULL) == d->eps) break;
    }
    fmt_real(theta, sizeof theta, d->rope_theta);
    /* rope_scaling: null, or Llama 3's remap as Meta's Llama 3.1 and 3.2 files write it; Mixtral's file has
     * the key only for the remap */
    char rope[512] = "null", f1[32], f2[32], f3[32];
    if (d->rope.llama3) {
        fmt_real(f1, sizeof f1, d->rope.factor);
        fmt_real(f2, sizeof f2, d->rope.low_freq_factor);
        fmt_real(f3, sizeof f3, d->rope.high_freq_factor);
        snprintf(rope, sizeof rope, "{\"rope_type\": \"llama3\", \"factor\": %s, \"low_freq_factor\": %s, "
                 "\"high_freq_factor\": %s, \"original_max_position_embeddings\": %.0f}", f1, f2, f3,
                 d->rope.original_max);
    }
    char mixtral_rope[560] = "";
    if (d->rope.llama3) snprintf(mixtral_rope, sizeof mixtral_rope, "  \"rope_scaling\": %s,\n", rope);
    fmt_real(aux, sizeof aux, d->aux_coef);
    char dense[4096] = "";
    for (int l = 0; l < d->Ld && strlen(dense) + 16 < sizeof dense; l++)
        snprintf(dense + strlen(dense), sizeof dense - strlen(dense), "%s%d", l ? ", " : "", l);
    switch (a) {
    case HF_GPT2:
        fprintf(fp, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
                "  \"n_embd\": %d,\n  \"n_head\": %d,\n  \"n_layer\": %d,\n  \"n_inner\": %d,\n"
                "  \"n_positions\": %d,\n  \"n_ctx\": %d,\n  \"vocab_size\": %d,\n"
                "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n"
                "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"\n}\n",
                d->C, d->NH, d->L, d->F, d->T, d->T, d->V, tied, torch_dtype);
        return;
    case HF_LLAMA:
        fprintf(fp, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
                "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_attention_heads\": %d,\n"
                "  \"num_hidden_layers\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
                "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %s,\n"
                "  \"rope_theta\": %s,\n  \"rope_scaling\": %s,\n  \"hidden_act\": \"silu\",\n"
                "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"tie_word_embeddings\": %s,\n"
                "  \"torch_dtype\": \"%s\"\n}\n",
                d->C, d->F, d->NH, d->L, d->NKV, d->HS, d->V, d->T, eps, theta, rope, tied, torch_dtype);
        return;
    case HF_MIXTRAL:
        fprintf(fp, "{\n  \"architectures\": [\"MixtralForCausalLM\"],\n  \"model_type\": \"mixtral\",\n"
                "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_attention_heads\": %d,\n"
                "  \"num_hidden_layers\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
                "  \"num_local_experts\": %d,\n  \"num_experts_per_tok\": %d,\n"
                "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %s,\n"
                "  \"rope_theta\": %s,\n%s  \"sliding_window\": null,\n  \"hidden_act\": \"silu\",\n"
                "  \"router_aux_loss_coef\": %s,\n  \"output_router_logits\": false,\n"
                "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"\n}\n",
                d->C, d->Fe, d->NH, d->L, d->NKV, d->HS, d->E, d->K, d->V, d->T, eps, theta, mixtral_rope, aux, tied,
                torch_dtype);
        return;
    default: /* Qwen2-MoE: intermediate_size, the dense blocks' width (with every block sparse unused, written as
              * the shared expert's); mlp_only_layers, the first moe_dense_layers */
        fprintf(fp, "{\n  \"architectures\": [\"Qwen2MoeForCausalLM\"],\n  \"model_type\": \"qwen2_moe\",\n"
                "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_attention_heads\": %d,\n"
                "  \"num_hidden_layers\": %d,\n  \"num_key_value_heads\": %d,\n"
                "  \"num_experts\": %d,\n  \"num_experts_per_tok\": %d,\n  \"moe_intermediate_size\": %d,\n"
                "  \"shared_expert_intermediate_size\": %d,\n  \"norm_topk_prob\": %s,\n"
                "  \"decoder_sparse_step\": 1,\n  \"mlp_only_layers\": [%s],\n  \"qkv_bias\": true,\n"
                "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %s,\n"
                "  \"rope_theta\": %s,\n  \"rope_scaling\": %s,\n  \"use_sliding_window\": false,\n"
                "  \"hidden_act\": \"silu\",\n  \"router_aux_loss_coef\": %s,\n  \"output_router_logits\": false,\n"
                "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"\n}\n",
                d->C, d->Ld ? d->Fd : d->F, d->NH, d->L, d->NKV, d->E, d->K, d->Fe, d->F,
                d->norm_topk ? "true" : "false", dense, d->V, d->T, eps, theta, rope, aux, tied, torch_dtype);
        return;
    }
}
