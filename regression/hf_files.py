#!/usr/bin/python3
"""hf_files.py -- the other side of triad's weights in and out, written from
the formats' definitions and not from triad's code (regression/hf_io.sh):

  make FAMILY DIR DECK_JSON [--shards 2] [--dtypes]
        a Hugging Face folder (config.json, model.safetensors or shards with
        model.safetensors.index.json) of random weights for FAMILY
        (llama: LlamaForCausalLM; gpt2: GPT2LMHeadModel, Conv1D weights
        [in, out], names with the "transformer." prefix; mixtral:
        MixtralForCausalLM; qwen2_moe: Qwen2MoeForCausalLM); --dtypes stores
        some tensors in BF16 and F16 (their values exact in the format);
  llmc FILE DECK_JSON [--bf16]   an llm.c GPT-2 checkpoint (header magic
        20240326, version 3, padded vocabulary) of random weights; --bf16:
        version 5, every tensor bf16 (train_gpt2.py's write_bf16: rounded to
        nearest even, the bits little-endian);
  check SRC CKPT DECK_JSON
        triad's checkpoint CKPT holds exactly the weights of SRC (a folder
        made above, a folder triad exported, or an llm.c file), mapped as
        docs/formats.md says; prints the first difference and exits 1;
  corrupt KIND DIR      damage a folder (corrupt's docstring lists the KINDs:
        the safetensors container, config.json's types, the sharded index);
  config DIR KEY=JSON ...   set config.json's KEY to the JSON value;
  add DIR NAME SHAPE_JSON   append a tensor of zeros (F32) to model.safetensors;
  copy DIR SRC NAME     append tensor SRC's copy as NAME (a tied head's writer);
  poke DIR NAME ROW COL VALUE   set one element of an F32 2-D tensor of
        model.safetensors (a folder of another model, or one weight that a
        format cannot hold).

DECK_JSON: {"L":..., "C":..., "NH":..., "NKV":..., "F":..., "V":..., "T":...,
"eps":..., "theta":..., "tied": true|false}, optionally "rope_scaling": an
object written into config.json as it is (and an exported folder's must
equal it; absent: null or no key); a mixture of experts adds
"E" (experts), "K" (per token), "Fe" (an expert's width), and for
qwen2_moe "Fs" (the shared expert's width), "norm_topk" (true|false) and
optionally "Ld", the leading blocks with a dense MLP of width F
(mlp_only_layers = [0 .. Ld-1]; triad's h.L/fc_w and fcproj_w there).

The mixtures of experts as transformers defines them (modeling_mixtral.py,
modeling_qwen2_moe.py): Mixtral's block_sparse_moe.gate [E, C] is the
router, expert X's w1 (gate_proj) and w3 (up_proj) are [Fe, C], w2
(down_proj) [C, Fe]; Qwen2-MoE's mlp.gate is the router, mlp.experts.X.
{gate,up,down}_proj the experts, mlp.shared_expert.{gate,up,down}_proj the
shared expert of shared_expert_intermediate_size, mlp.shared_expert_gate
[1, C] its gate, and its attention has q, k and v biases.  Triad's
checkpoint keeps the router as h.L/router_w, each expert as
h.L/expert.X/fc_w (gate rows, then up rows) and fcproj_w (down), the
shared expert as h.L/fc_w and fcproj_w, its gate as h.L/shared_gate_w, the
q, k and v biases as h.L/qkv_b (q, then k, then v).
"""
import json
import os
import struct
import sys

import h5py
import numpy as np


def bf16_bits(x):
    """float32 -> bf16 bit patterns, round to nearest even."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def save_safetensors(path, tensors):
    """tensors: [(name, array, dtype)] with dtype F32, F16 or BF16."""
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a, dt in tensors:
        if dt == "F32":
            b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        elif dt == "F16":
            b = np.ascontiguousarray(a, dtype="<f2").tobytes()
        else:
            b = bf16_bits(a).astype("<u2").tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b0, b1 = t["data_offsets"]
        raw = data[8 + n + b0:8 + n + b1]
        if t["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif t["dtype"] == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif t["dtype"] == "BF16":
            a = bf16_value(np.frombuffer(raw, dtype="<u2"))
        else:
            raise SystemExit("%s: tensor %s has dtype %s" % (path, name, t["dtype"]))
        out[name] = a.reshape(t["shape"])
    return out


def hf_tensors(family, k, rng):
    """{name: array} of a model of shape k, as Hugging Face stores it."""
    L, C, NH, F, V, T = k["L"], k["C"], k["NH"], k["F"], k["V"], k["T"]
    KV = k["NKV"] * C // NH
    r = lambda *s: (rng.standard_normal(s) * 0.05).astype(np.float32)
    t = {}
    if family in ("mixtral", "qwen2_moe"):
        E, Fe, Fs = k["E"], k["Fe"], k.get("Fs", 0)
        t["model.embed_tokens.weight"] = r(V, C)
        for l in range(L):
            p = "model.layers.%d." % l
            t[p + "input_layernorm.weight"] = 1 + r(C)
            for x, rows in (("q", C), ("k", KV), ("v", KV)):
                t[p + "self_attn.%s_proj.weight" % x] = r(rows, C)
                if family == "qwen2_moe":
                    t[p + "self_attn.%s_proj.bias" % x] = r(rows)
            t[p + "self_attn.o_proj.weight"] = r(C, C)
            t[p + "post_attention_layernorm.weight"] = 1 + r(C)
            if family == "mixtral":
                m = p + "block_sparse_moe."
                t[m + "gate.weight"] = r(E, C)
                for x in range(E):
                    t[m + "experts.%d.w1.weight" % x] = r(Fe, C)
                    t[m + "experts.%d.w2.weight" % x] = r(C, Fe)
                    t[m + "experts.%d.w3.weight" % x] = r(Fe, C)
            elif l < k.get("Ld", 0):  # a dense block (mlp_only_layers): Qwen2MoeMLP of intermediate_size
                m = p + "mlp."
                t[m + "gate_proj.weight"] = r(F, C)
                t[m + "up_proj.weight"] = r(F, C)
                t[m + "down_proj.weight"] = r(C, F)
            else:
                m = p + "mlp."
                t[m + "gate.weight"] = r(E, C)
                for x in range(E):
                    t[m + "experts.%d.gate_proj.weight" % x] = r(Fe, C)
                    t[m + "experts.%d.up_proj.weight" % x] = r(Fe, C)
                    t[m + "experts.%d.down_proj.weight" % x] = r(C, Fe)
                t[m + "shared_expert.gate_proj.weight"] = r(Fs, C)
                t[m + "shared_expert.up_proj.weight"] = r(Fs, C)
                t[m + "shared_expert.down_proj.weight"] = r(C, Fs)
                t[m + "shared_expert_gate.weight"] = r(1, C)
        t["model.norm.weight"] = 1 + r(C)
        if not k["tied"]:
            t["lm_head.weight"] = r(V, C)
        return t
    if family == "llama":
        t["model.embed_tokens.weight"] = r(V, C)
        for l in range(L):
            p = "model.layers.%d." % l
            t[p + "input_layernorm.weight"] = 1 + r(C)
            t[p + "self_attn.q_proj.weight"] = r(C, C)
            t[p + "self_attn.k_proj.weight"] = r(KV, C)
            t[p + "self_attn.v_proj.weight"] = r(KV, C)
            t[p + "self_attn.o_proj.weight"] = r(C, C)
            t[p + "post_attention_layernorm.weight"] = 1 + r(C)
            t[p + "mlp.gate_proj.weight"] = r(F, C)
            t[p + "mlp.up_proj.weight"] = r(F, C)
            t[p + "mlp.down_proj.weight"] = r(C, F)
        t["model.norm.weight"] = 1 + r(C)
        if not k["tied"]:
            t["lm_head.weight"] = r(V, C)
        return t
    t["transformer.wte.weight"] = r(V, C)
    t["transformer.wpe.weight"] = r(T + 8, C)  # more positions than the deck's seq_len
    for l in range(L):
        p = "transformer.h.%d." % l
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = 1 + r(C), r(C)
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = r(C, 3 * C), r(3 * C)  # Conv1D: [in, out]
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = r(C, C), r(C)
        t[p + "attn.bias"] = np.tril(np.ones((T + 8, T + 8), dtype=np.float32))  # the mask buffer, not a weight
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = 1 + r(C), r(C)
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = r(C, F), r(F)
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = r(F, C), r(C)
    t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = 1 + r(C), r(C)
    return t


def config(family, k):
    attention = {"hidden_size": k["C"], "num_attention_heads": k["NH"], "num_hidden_layers": k["L"],
                 "num_key_value_heads": k["NKV"], "vocab_size": k["V"], "rms_norm_eps": k["eps"],
                 "rope_theta": k["theta"], "tie_word_embeddings": k["tied"], "max_position_embeddings": 4096,
                 "hidden_act": "silu", "torch_dtype": "float32"}
    if family == "mixtral":
        return dict(attention, architectures=["MixtralForCausalLM"], model_type="mixtral",
                    intermediate_size=k["Fe"], num_local_experts=k["E"], num_experts_per_tok=k["K"],
                    sliding_window=None, router_aux_loss_coef=0.02, output_router_logits=False)
    if family == "qwen2_moe":
        return dict(attention, architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe",
                    # (the dense width: unused when every block is sparse)
                    intermediate_size=k["F"] if k.get("Ld", 0) else 5 * k["Fe"],
                    moe_intermediate_size=k["Fe"], shared_expert_intermediate_size=k["Fs"], num_experts=k["E"],
                    num_experts_per_tok=k["K"], norm_topk_prob=k["norm_topk"], decoder_sparse_step=1,
                    mlp_only_layers=list(range(k.get("Ld", 0)))[::-1], use_sliding_window=False, sliding_window=4, max_window_layers=k["L"],
                    router_aux_loss_coef=0.001, output_router_logits=False)
    if family == "llama":
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": k["C"],
                "intermediate_size": k["F"], "num_attention_heads": k["NH"], "num_hidden_layers": k["L"],
                "num_key_value_heads": k["NKV"], "vocab_size": k["V"], "rms_norm_eps": k["eps"],
                "rope_theta": k["theta"], "tie_word_embeddings": k["tied"], "max_position_embeddings": 4096,
                "hidden_act": "silu", "torch_dtype": "float32"}
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": k["C"], "n_head": k["NH"],
            "n_layer": k["L"], "n_positions": k["T"] + 8, "n_ctx": k["T"] + 8, "vocab_size": k["V"],
            "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}


def with_rope_scaling(family, cfg, k):
    """config.json with DECK_JSON's "rope_scaling" object as it is (llama families)."""
    if family != "gpt2" and "rope_scaling" in k:
        cfg["rope_scaling"] = k["rope_scaling"]
    return cfg


def make(family, d, k, shards, dtypes):
    os.makedirs(d, exist_ok=True)
    t = hf_tensors(family, k, np.random.default_rng(5))
    names = list(t)
    items = []
    for i, n in enumerate(names):
        dt = "F32"
        if dtypes and t[n].ndim == 2 and i % 3 == 1:
            dt = "BF16"
        elif dtypes and t[n].ndim == 2 and i % 3 == 2:
            dt = "F16"
        items.append((n, t[n], dt))
    if shards == 1:
        save_safetensors(os.path.join(d, "model.safetensors"), items)
    else:
        per = (len(items) + shards - 1) // shards
        wmap = {}
        for s in range(shards):
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            save_safetensors(os.path.join(d, fn), items[s * per:(s + 1) * per])
            wmap.update({n: fn for n, _, _ in items[s * per:(s + 1) * per]})
        json.dump({"metadata": {}, "weight_map": wmap}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    json.dump(with_rope_scaling(family, config(family, k), k), open(os.path.join(d, "config.json"), "w"), indent=1)


def llmc(path, k, bf16=False):
    L, C, NH, V, T = k["L"], k["C"], k["NH"], k["V"], k["T"]
    Vp = (V + 127) // 128 * 128
    rng = np.random.default_rng(9)
    r = lambda *s: (rng.standard_normal(s) * 0.05).astype(np.float32)
    wte = r(Vp, C)
    wte[V:] = 0
    parts = [wte, r(T + 8, C), 1 + r(L, C), r(L, C), r(L, 3 * C, C), r(L, 3 * C), r(L, C, C), r(L, C),
             1 + r(L, C), r(L, C), r(L, 4 * C, C), r(L, 4 * C), r(L, C, 4 * C), r(L, C), 1 + r(C), r(C)]
    header = np.zeros(256, dtype="<i4")
    header[:8] = [20240326, 5 if bf16 else 3, T + 8, V, L, NH, C, Vp]
    with open(path, "wb") as f:
        f.write(header.tobytes() + b"".join((bf16_bits(p).astype("<u2") if bf16 else p.astype("<f4")).tobytes()
                                            for p in parts))


def expected(src, k):
    """{triad dataset: array} of the weights in src."""
    L, C, F, V, T = k["L"], k["C"], k["F"], k["V"], k["T"]
    e = {}
    if os.path.isfile(src):  # llm.c
        with open(src, "rb") as f:
            h = np.frombuffer(f.read(1024), dtype="<i4")
            flat = np.frombuffer(f.read(), dtype="<f4" if h[1] == 3 else "<u2")
        if h[1] == 5:  # bf16: the values exactly, as float32
            flat = bf16_value(flat)
        maxT, Vp = h[2], h[7]
        shapes = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1_w", (L, C)), ("ln1_b", (L, C)),
                  ("qkv_w", (L, 3 * C, C)), ("qkv_b", (L, 3 * C)), ("attproj_w", (L, C, C)), ("attproj_b", (L, C)),
                  ("ln2_w", (L, C)), ("ln2_b", (L, C)), ("fc_w", (L, 4 * C, C)), ("fc_b", (L, 4 * C)),
                  ("fcproj_w", (L, C, 4 * C)), ("fcproj_b", (L, C)), ("lnf_w", (C,)), ("lnf_b", (C,))]
        at = 0
        for name, s in shapes:
            n = int(np.prod(s))
            a = flat[at:at + n].reshape(s)
            at += n
            if name in ("wte",):
                e[name] = a[:V]
            elif name == "wpe":
                e[name] = a[:T]
            elif name in ("lnf_w", "lnf_b"):
                e[name] = a
            else:
                for l in range(L):
                    e["h.%d/%s" % (l, name)] = a[l]
        return e
    t = Used()
    for fn in sorted(os.listdir(src)):
        if fn.endswith(".safetensors"):
            t.update(load_safetensors(os.path.join(src, fn)))
    cfg = json.load(open(os.path.join(src, "config.json")))
    e = expected_hf(t, cfg, k)
    unread = sorted(n for n in set(t) - t.used if not n.endswith("attn.bias") or cfg["model_type"] != "gpt2")
    if unread:
        raise SystemExit("the folder holds tensors the format does not map: %s" % unread[:5])
    return e


def expected_hf(t, cfg, k):
    """{triad dataset: array} of a Hugging Face folder's tensors t."""
    L, T = k["L"], k["T"]
    e = {}
    if cfg["model_type"] in ("mixtral", "qwen2_moe"):
        mixtral = cfg["model_type"] == "mixtral"
        E = cfg["num_local_experts"] if mixtral else cfg["num_experts"]
        e["wte"] = t["model.embed_tokens.weight"]
        for l in range(L):
            p, h = "model.layers.%d." % l, "h.%d/" % l
            e[h + "ln1_w"] = t[p + "input_layernorm.weight"]
            e[h + "qkv_w"] = np.concatenate([t[p + "self_attn.%s_proj.weight" % x] for x in "qkv"])
            if not mixtral:
                e[h + "qkv_b"] = np.concatenate([t[p + "self_attn.%s_proj.bias" % x] for x in "qkv"])
            e[h + "attproj_w"] = t[p + "self_attn.o_proj.weight"]
            e[h + "ln2_w"] = t[p + "post_attention_layernorm.weight"]
            m = p + ("block_sparse_moe." if mixtral else "mlp.")
            if not mixtral and l in cfg.get("mlp_only_layers", []):  # a dense block
                e[h + "fc_w"] = np.concatenate([t[m + "gate_proj.weight"], t[m + "up_proj.weight"]])
                e[h + "fcproj_w"] = t[m + "down_proj.weight"]
                continue
            e[h + "router_w"] = t[m + "gate.weight"]
            for x in range(E):
                ex = m + "experts.%d." % x
                gate, up, down = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
                e[h + "expert.%d/fc_w" % x] = np.concatenate([t[ex + gate + ".weight"], t[ex + up + ".weight"]])
                e[h + "expert.%d/fcproj_w" % x] = t[ex + down + ".weight"]
            if not mixtral:
                e[h + "fc_w"] = np.concatenate([t[m + "shared_expert.gate_proj.weight"],
                                                t[m + "shared_expert.up_proj.weight"]])
                e[h + "fcproj_w"] = t[m + "shared_expert.down_proj.weight"]
                e[h + "shared_gate_w"] = t[m + "shared_expert_gate.weight"]
        e["lnf_w"] = t["model.norm.weight"]
        if "lm_head.weight" in t:
            e["lm_head"] = t["lm_head.weight"]
        return e
    if cfg["model_type"] == "llama":
        e["wte"] = t["model.embed_tokens.weight"]
        for l in range(L):
            p = "model.layers.%d." % l
            e["h.%d/ln1_w" % l] = t[p + "input_layernorm.weight"]
            e["h.%d/qkv_w" % l] = np.concatenate([t[p + "self_attn.%s_proj.weight" % x] for x in "qkv"])
            e["h.%d/attproj_w" % l] = t[p + "self_attn.o_proj.weight"]
            e["h.%d/ln2_w" % l] = t[p + "post_attention_layernorm.weight"]
            e["h.%d/fc_w" % l] = np.concatenate([t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"]])
            e["h.%d/fcproj_w" % l] = t[p + "mlp.down_proj.weight"]
        e["lnf_w"] = t["model.norm.weight"]
        if "lm_head.weight" in t:
            e["lm_head"] = t["lm_head.weight"]
        return e
    g = lambda n: t["transformer." + n] if "transformer." + n in t else t[n]
    e["wte"], e["wpe"] = g("wte.weight"), g("wpe.weight")[:T]
    for l in range(L):
        p = "h.%d." % l
        e["h.%d/ln1_w" % l], e["h.%d/ln1_b" % l] = g(p + "ln_1.weight"), g(p + "ln_1.bias")
        e["h.%d/qkv_w" % l], e["h.%d/qkv_b" % l] = g(p + "attn.c_attn.weight").T, g(p + "attn.c_attn.bias")
        e["h.%d/attproj_w" % l], e["h.%d/attproj_b" % l] = g(p + "attn.c_proj.weight").T, g(p + "attn.c_proj.bias")
        e["h.%d/ln2_w" % l], e["h.%d/ln2_b" % l] = g(p + "ln_2.weight"), g(p + "ln_2.bias")
        e["h.%d/fc_w" % l], e["h.%d/fc_b" % l] = g(p + "mlp.c_fc.weight").T, g(p + "mlp.c_fc.bias")
        e["h.%d/fcproj_w" % l], e["h.%d/fcproj_b" % l] = g(p + "mlp.c_proj.weight").T, g(p + "mlp.c_proj.bias")
    e["lnf_w"], e["lnf_b"] = g("ln_f.weight"), g("ln_f.bias")
    return e


class Used(dict):
    """The folder's tensors, remembering which were read."""
    def __init__(self, *a):
        dict.__init__(self, *a)
        self.used = set()

    def __getitem__(self, n):
        if n not in self:
            raise SystemExit("the folder has no tensor %s" % n)
        self.used.add(n)
        return dict.__getitem__(self, n)

    def __contains__(self, n):
        self.used.add(n)
        return dict.__contains__(self, n)


def config_keys(cfg, k):
    """config.json's keys against the deck's (a folder triad exported)."""
    want = {"num_hidden_layers": k["L"], "hidden_size": k["C"], "num_attention_heads": k["NH"],
            "num_key_value_heads": k["NKV"], "vocab_size": k["V"], "tie_word_embeddings": k["tied"]}
    if cfg["model_type"] == "llama":
        want.update(intermediate_size=k["F"])
    elif cfg["model_type"] == "mixtral":
        want.update(architectures=["MixtralForCausalLM"], intermediate_size=k["Fe"], num_local_experts=k["E"],
                    num_experts_per_tok=k["K"])
    elif cfg["model_type"] == "qwen2_moe":
        want.update(architectures=["Qwen2MoeForCausalLM"], moe_intermediate_size=k["Fe"],
                    shared_expert_intermediate_size=k["Fs"], num_experts=k["E"], num_experts_per_tok=k["K"],
                    norm_topk_prob=k["norm_topk"], decoder_sparse_step=1)
        if sorted(cfg.get("mlp_only_layers", [])) != list(range(k.get("Ld", 0))):
            return "config.json: mlp_only_layers is %r, the deck's first %d" % (cfg.get("mlp_only_layers"), k.get("Ld", 0))
        if k.get("Ld", 0):
            want.update(intermediate_size=k["F"])
        if cfg.get("qkv_bias", True) is not True or cfg.get("use_sliding_window", False):
            return "qkv_bias must be true and use_sliding_window false"
    else:
        return None
    for key, v in want.items():
        if cfg.get(key) != v:
            return "config.json: %s is %r, the deck's %r" % (key, cfg.get(key), v)
    if cfg.get("rope_scaling") != k.get("rope_scaling"):
        return "config.json: rope_scaling is %r, the deck's %r" % (cfg.get("rope_scaling"), k.get("rope_scaling"))
    if abs(cfg.get("rms_norm_eps", 0) - k["eps"]) > 1e-6 * k["eps"] or cfg.get("rope_theta") != k["theta"]:
        return "config.json: rms_norm_eps %r, rope_theta %r" % (cfg.get("rms_norm_eps"), cfg.get("rope_theta"))
    return None


def check(src, ckpt, k):
    e = expected(src, k)
    if os.path.isdir(src):
        bad = config_keys(json.load(open(os.path.join(src, "config.json"))), k)
        if bad:
            print(bad)
            return 1
    with h5py.File(ckpt, "r") as f:
        m = f["model"]
        have = []
        m.visit(lambda n: have.append(n) if isinstance(m[n], h5py.Dataset) else None)
        if sorted(have) != sorted(e):
            print("the checkpoint's tensors %s differ from the source's %s" % (sorted(set(have) ^ set(e)), src))
            return 1
        for n in sorted(e):
            a = np.asarray(m[n][...], dtype=np.float32).reshape(np.shape(e[n]))
            if not np.array_equal(a, e[n]):
                i = np.argmax(a != e[n])
                print("%s differs: element %d is %r in the checkpoint, %r in %s" % (n, i, a.flat[i], e[n].flat[i], src))
                return 1
    print("%d tensors equal bit for bit" % len(e))
    return 0


def st_parts(path):
    """A safetensors file as (header dict in file order, data bytes)."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def st_write(path, text, data, length=None):
    """Header text (bytes, padded with spaces to 8), data; length: the stored header length."""
    text += b" " * (-len(text) % 8 or 8)
    open(path, "wb").write(struct.pack("<Q", len(text) if length is None else length(len(text))) + text + data)


def members(header):
    return [x for x in header if x != "__metadata__"]


def corrupt(kind, d):
    """Damage a folder as KIND says (each a way a real file goes wrong)."""
    path = os.path.join(d, "model.safetensors")
    cfg_path = os.path.join(d, "config.json")
    if kind.startswith("config_"):  # config.json with one key of the wrong type
        cfg = json.load(open(cfg_path))
        if kind == "config_real_layers":
            cfg["num_hidden_layers"] = cfg["num_hidden_layers"] + 0.000001
        elif kind == "config_string_theta":
            cfg["rope_theta"] = str(int(cfg["rope_theta"]))
        elif kind == "config_string_tied":
            cfg["tie_word_embeddings"] = "yes"
        elif kind == "config_no_eps":
            del cfg["rms_norm_eps"]
        text = json.dumps(cfg, indent=2).encode()
        if kind == "config_nul":
            text = text[:20] + b"\0" + text[20:]
        open(cfg_path, "wb").write(text)
        return 0
    if kind.startswith("index_"):  # the index of a sharded folder
        ipath = os.path.join(d, "model.safetensors.index.json")
        idx = json.load(open(ipath))
        wm = idx["weight_map"]
        first = sorted(wm)[0]
        if kind == "index_number":
            wm[first] = 3
        elif kind == "index_slash":
            wm[first] = "../" + wm[first]
        elif kind == "index_missing":
            wm["model.layers.0.mlp.extra.weight"] = wm[first]
        elif kind == "index_unmapped":
            del wm[first]
        elif kind == "index_dup":  # a tensor named twice in weight_map
            text = json.dumps(idx)
            entry = json.dumps(first) + ": " + json.dumps(wm[first])
            open(ipath, "w").write(text.replace('"weight_map": {', '"weight_map": {' + entry + ", ", 1))
            return 0
        elif kind == "index_big":
            open(ipath, "ab").truncate(65 << 20)  # sparse: 65 MiB
            return 0
        json.dump(idx, open(ipath, "w"))
        return 0
    if kind == "directory":
        os.remove(path)
        os.mkdir(path)
        return 0
    header, data = st_parts(path)
    order = sorted(members(header), key=lambda x: header[x]["data_offsets"])
    name = order[0]
    text = lambda: json.dumps(header).encode()
    if kind == "header":  # a length past the file
        st_write(path, text(), data, lambda n: 2 * (n + len(data)))
    elif kind == "short_header":  # the length one byte short: every tensor a byte off
        st_write(path, text(), data, lambda n: n - 1)
    elif kind == "offsets":  # past the data
        header[name]["data_offsets"] = [x + (1 << 20) for x in header[name]["data_offsets"]]
        st_write(path, text(), data)
    elif kind == "plus1":  # the first tensor moved by a byte: a hole before it
        header[name]["data_offsets"] = [x + 1 for x in header[name]["data_offsets"]]
        st_write(path, text(), data)
    elif kind == "overlap":  # the second tensor starts 4 bytes early
        header[order[1]]["data_offsets"] = [x - 4 for x in header[order[1]]["data_offsets"]]
        st_write(path, text(), data)
    elif kind == "trailing":
        st_write(path, text(), data + b"\0" * 16)
    elif kind == "dtype":  # a consistent I64 tensor where a weight belongs
        b0, b1 = header[name]["data_offsets"]
        header[name]["dtype"], header[name]["shape"] = "I64", [(b1 - b0) // 8]
        st_write(path, text(), data)
    elif kind == "shape":  # a 2-D tensor's dimensions swapped: a valid file of another model
        name = next(x for x in order if len(header[x]["shape"]) == 2 and header[x]["shape"][0] != header[x]["shape"][1])
        header[name]["shape"].reverse()
        st_write(path, text(), data)
    elif kind == "rank3":  # the final norm as [C, 1, 1]
        name = next(x for x in order if x.endswith("norm.weight") or x.endswith("ln_f.weight"))
        header[name]["shape"] = header[name]["shape"] + [1, 1]
        st_write(path, text(), data)
    elif kind == "overflow":  # a shape whose element count overflows 64 bits
        header[name]["shape"] = [1 << 32, 1 << 32, 16]
        st_write(path, text(), data)
    elif kind == "duplicate":  # the first tensor named twice (Python keeps the last, triad must refuse)
        body = b",".join(json.dumps(k).encode() + b":" + json.dumps(header[k]).encode() for k in header)
        st_write(path, b"{" + body + b"," + json.dumps(name).encode() + b":" + json.dumps(header[name]).encode()
                 + b"}", data)
    elif kind == "metadata":
        header["__metadata__"] = {"format": "pt", "step": 7}
        st_write(path, text(), data)
    elif kind == "utf8":  # a byte that is not UTF-8 in the header
        header["__metadata__"] = {"format": "pt", "note": "XX"}
        st_write(path, text().replace(b"XX", b"\xff\xfe"), data)
    elif kind in ("nan", "inf"):  # one weight not finite: element 37 of an F32 2-D tensor
        name = next(x for x in order if header[x]["dtype"] == "F32" and len(header[x]["shape"]) == 2)
        b0 = header[name]["data_offsets"][0] + 37 * 4
        bad = struct.pack("<f", float("nan") if kind == "nan" else float("-inf"))
        st_write(path, text(), data[:b0] + bad + data[b0 + 4:])
        print(name)
    else:
        raise SystemExit("corrupt: no kind " + kind)
    return 0


def edit_config(d, pairs):
    path = os.path.join(d, "config.json")
    cfg = json.load(open(path))
    for p in pairs:
        k, v = p.split("=", 1)
        cfg[k] = json.loads(v)
    json.dump(cfg, open(path, "w"), indent=1)
    return 0


def add_tensor(d, name, shape):
    path = os.path.join(d, "model.safetensors")
    header, data = st_parts(path)
    b = np.zeros(shape, dtype="<f4").tobytes()
    header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [len(data), len(data) + len(b)]}
    st_write(path, json.dumps(header).encode(), data + b)
    return 0


def copy_tensor(d, src, name):
    path = os.path.join(d, "model.safetensors")
    header, data = st_parts(path)
    t = header[src]
    b = data[t["data_offsets"][0]:t["data_offsets"][1]]
    header[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [len(data), len(data) + len(b)]}
    st_write(path, json.dumps(header).encode(), data + b)
    return 0


def poke(d, name, row, col, value):
    path = os.path.join(d, "model.safetensors")
    header, data = st_parts(path)
    t = header[name]
    if t["dtype"] != "F32" or len(t["shape"]) != 2:
        raise SystemExit("poke: %s is %s %s, not a 2-D F32 tensor" % (name, t["dtype"], t["shape"]))
    at = t["data_offsets"][0] + 4 * (row * t["shape"][1] + col)
    st_write(path, json.dumps(header).encode(), data[:at] + struct.pack("<f", value) + data[at + 4:])
    return 0


def main(a):
    if a[1] == "make":
        make(a[2], a[3], json.loads(a[4]), int(a[a.index("--shards") + 1]) if "--shards" in a else 1, "--dtypes" in a)
        return 0
    if a[1] == "llmc":
        llmc(a[2], json.loads(a[3]), "--bf16" in a)
        return 0
    if a[1] == "check":
        return check(a[2], a[3], json.loads(a[4]))
    if a[1] == "corrupt":
        return corrupt(a[2], a[3])
    if a[1] == "config":
        return edit_config(a[2], a[3:])
    if a[1] == "add":
        return add_tensor(a[2], a[3], json.loads(a[4]))
    if a[1] == "copy":
        return copy_tensor(a[2], a[3], a[4])
    if a[1] == "poke":
        return poke(a[2], a[3], int(a[4]), int(a[5]), float(a[6]))
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
