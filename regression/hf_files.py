#!/usr/bin/python3
"""hf_files.py -- the other side of triad's weights in and out, written from
the formats' definitions and not from triad's code (regression/hf_io.sh):

  make FAMILY DIR DECK_JSON [--shards 2] [--dtypes]
        a Hugging Face folder (config.json, model.safetensors or shards with
        model.safetensors.index.json) of random weights for FAMILY
        (llama: LlamaForCausalLM; gpt2: GPT2LMHeadModel, Conv1D weights
        [in, out], names with the "transformer." prefix); --dtypes stores
        some tensors in BF16 and F16 (their values exact in the format);
  llmc FILE DECK_JSON   an llm.c GPT-2 checkpoint (header magic 20240326,
        version 3, padded vocabulary) of random weights;
  check SRC CKPT DECK_JSON
        triad's checkpoint CKPT holds exactly the weights of SRC (a folder
        made above, a folder triad exported, or an llm.c file), mapped as
        docs/formats.md says; prints the first difference and exits 1;
  corrupt KIND DIR      damage a folder's model.safetensors: KIND is header
        (a length past the file), offsets (past the data), dtype (I64) or
        shape (a wrong dimension).

DECK_JSON: {"L":..., "C":..., "NH":..., "NKV":..., "F":..., "V":..., "T":...,
"eps":..., "theta":..., "tied": true|false}.
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
    if family == "llama":
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": k["C"],
                "intermediate_size": k["F"], "num_attention_heads": k["NH"], "num_hidden_layers": k["L"],
                "num_key_value_heads": k["NKV"], "vocab_size": k["V"], "rms_norm_eps": k["eps"],
                "rope_theta": k["theta"], "tie_word_embeddings": k["tied"], "max_position_embeddings": 4096,
                "hidden_act": "silu", "torch_dtype": "float32"}
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": k["C"], "n_head": k["NH"],
            "n_layer": k["L"], "n_positions": k["T"] + 8, "n_ctx": k["T"] + 8, "vocab_size": k["V"],
            "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}


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
    json.dump(config(family, k), open(os.path.join(d, "config.json"), "w"), indent=1)


def llmc(path, k):
    L, C, NH, V, T = k["L"], k["C"], k["NH"], k["V"], k["T"]
    Vp = (V + 127) // 128 * 128
    rng = np.random.default_rng(9)
    r = lambda *s: (rng.standard_normal(s) * 0.05).astype(np.float32)
    wte = r(Vp, C)
    wte[V:] = 0
    parts = [wte, r(T + 8, C), 1 + r(L, C), r(L, C), r(L, 3 * C, C), r(L, 3 * C), r(L, C, C), r(L, C),
             1 + r(L, C), r(L, C), r(L, 4 * C, C), r(L, 4 * C), r(L, C, 4 * C), r(L, C), 1 + r(C), r(C)]
    header = np.zeros(256, dtype="<i4")
    header[:8] = [20240326, 3, T + 8, V, L, NH, C, Vp]
    with open(path, "wb") as f:
        f.write(header.tobytes() + b"".join(p.astype("<f4").tobytes() for p in parts))


def expected(src, k):
    """{triad dataset: array} of the weights in src."""
    L, C, F, V, T = k["L"], k["C"], k["F"], k["V"], k["T"]
    e = {}
    if os.path.isfile(src):  # llm.c
        with open(src, "rb") as f:
            h = np.frombuffer(f.read(1024), dtype="<i4")
            flat = np.frombuffer(f.read(), dtype="<f4")
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
    t = {}
    for fn in sorted(os.listdir(src)):
        if fn.endswith(".safetensors"):
            t.update(load_safetensors(os.path.join(src, fn)))
    cfg = json.load(open(os.path.join(src, "config.json")))
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


def check(src, ckpt, k):
    e = expected(src, k)
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


def corrupt(kind, d):
    path = os.path.join(d, "model.safetensors")
    data = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    name = next(x for x in header if x != "__metadata__")
    if kind == "header":
        data[:8] = struct.pack("<Q", len(data) * 2)
        open(path, "wb").write(data)
        return 0
    if kind == "offsets":
        header[name]["data_offsets"][1] += 1 << 20
        header[name]["data_offsets"][0] += 1 << 20
    elif kind == "dtype":
        header[name]["dtype"] = "I64"
    elif kind == "shape":  # a 2-D tensor's dimensions swapped: a valid file of another model
        name = next(x for x in header if x != "__metadata__" and len(header[x]["shape"]) == 2
                    and header[x]["shape"][0] != header[x]["shape"][1])
        header[name]["shape"].reverse()
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data[8 + n:])
    return 0


def main(a):
    if a[1] == "make":
        make(a[2], a[3], json.loads(a[4]), int(a[a.index("--shards") + 1]) if "--shards" in a else 1, "--dtypes" in a)
        return 0
    if a[1] == "llmc":
        llmc(a[2], json.loads(a[3]))
        return 0
    if a[1] == "check":
        return check(a[2], a[3], json.loads(a[4]))
    if a[1] == "corrupt":
        return corrupt(a[2], a[3])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
