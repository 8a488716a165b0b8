#!/usr/bin/python3
"""llama_torch.py -- an independent PyTorch implementation of Hugging Face's
LlamaForCausalLM (transformers' modeling_llama, written out here: there is
no `transformers` package) and of the training run triad makes of it, for
regression/llama_pytorch.sh.

    llama_torch.py RUN_DIR CKPT_0 CORPUS
    llama_torch.py --greedy CKPT PROMPT N     the prompt's bytes and N greedy tokens
                                              after them (full forwards, no cache)

RUN_DIR is a finished triad run (its metrics.h5 holds the deck it ran and
the per-step losses); CKPT_0 the checkpoint of the same deck with
train.steps = 0 (the initial weights); CORPUS the text file of
data.kind = 'text' (bytes are the tokens) read without shuffling.  The
reference trains as many steps as the run has rows and prints one line per
step, `step triad reference rel_err`, then `worst REL` and exits 0.  When
the run evaluated (train.eval_every, its /eval in metrics.h5) the reference
computes the same held-out loss after those steps, the first
train.eval_batches global batches of data.val_path in order, and prints
`eval step triad reference rel_err` lines; `worst` covers them too.

The semantics, as Hugging Face defines them (not as triad computes them):
  * embedding lookup; no position table;
  * per layer: h = x + o_proj(attn(rms(x))), x = h + down(silu(gate(rms(h))) * up(rms(h)));
  * RMSNorm: w * (x * rsqrt(mean(x^2) + eps));
  * rotary embedding on q and k: inv_freq = 1 / theta^(arange(0, HS, 2) / HS),
    emb = cat(t * inv_freq, t * inv_freq), q * cos(emb) + rotate_half(q) * sin(emb);
  * rope_type 'llama3' (model.rope_scaling = 'llama3'; Llama 3.1 and 3.2), each
    inv_freq f remapped by its wavelength w = 2 pi / f: w < original_max /
    high_freq_factor keeps f, w > original_max / low_freq_factor gives
    f / factor, and between them s = (original_max / w - low_freq_factor) /
    (high_freq_factor - low_freq_factor) gives (1 - s) f / factor + s f; the
    attention scaling stays 1 (the bands are counted in `self.bands`);
  * grouped-query attention: kv head g serves query heads g*G .. g*G+G-1
    (repeat_kv), causal softmax(q k^T / sqrt(HS)) v;
  * final RMSNorm, untied lm_head (or wte when tied), mean cross-entropy.
Training: torch.optim.AdamW (decay on the 2-D weights only), the gradient
clipped to grad_clip by its global norm (clip_grad_norm_), linear warm-up
then cosine decay to min_lr over the run's steps, as docs/input.md states.
triad's tensors map to Hugging Face's as docs/formats.md says: qkv_w rows are
q_proj, k_proj, v_proj stacked; fc_w rows gate_proj then up_proj; fcproj_w is
down_proj; attproj_w o_proj; ln1_w / ln2_w / lnf_w the input, post-attention
and final norms.
"""
import math
import sys

import h5py
import numpy as np
import torch


def deck_values(text):
    """The effective deck echoed by triad -> {'group.key': 'value'}"""
    out, group = {}, None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("&"):
            group = s[1:].strip()
        elif s == "/":
            group = None
        elif group and "=" in s:
            k, v = s.split("=", 1)
            out[group + "." + k.strip()] = v.strip().strip("'")
    return out


def logical(v):
    return v.lower() in (".true.", "t", "true")


class Llama(torch.nn.Module):
    def __init__(self, ck, cfg):
        super().__init__()
        self.L, self.NH = int(cfg["model.n_layer"]), int(cfg["model.n_head"])
        self.C = int(cfg["model.d_model"])
        self.HS = self.C // self.NH
        self.NKV = int(cfg["model.n_kv_head"]) or self.NH
        self.eps = float(cfg["model.norm_eps"])
        self.theta = float(cfg["model.rope_theta"])
        self.scaling = cfg.get("model.rope_scaling", "none")
        if self.scaling not in ("none", "llama3"):
            raise SystemExit("llama_torch.py: no rope_scaling %r" % self.scaling)
        self.rope = {k: float(cfg.get("model.rope_" + k, 0)) for k in
                     ("factor", "low_freq_factor", "high_freq_factor", "original_max_positions")}
        self.bands = None
        self.tied = logical(cfg["model.tie_embeddings"])
        P = lambda name: torch.nn.Parameter(torch.tensor(np.asarray(ck["model/" + name][...], dtype=np.float32)))
        self.embed = P("wte")
        self.layers = torch.nn.ModuleList()
        q, kv = self.NH * self.HS, self.NKV * self.HS
        for l in range(self.L):
            m = torch.nn.Module()
            qkv = np.asarray(ck["model/h.%d/qkv_w" % l][...], dtype=np.float32)
            fc = np.asarray(ck["model/h.%d/fc_w" % l][...], dtype=np.float32)
            F = fc.shape[0] // 2
            m.input_norm = P("h.%d/ln1_w" % l)
            m.q_proj = torch.nn.Parameter(torch.tensor(qkv[:q]))
            m.k_proj = torch.nn.Parameter(torch.tensor(qkv[q:q + kv]))
            m.v_proj = torch.nn.Parameter(torch.tensor(qkv[q + kv:]))
            m.o_proj = P("h.%d/attproj_w" % l)
            m.post_norm = P("h.%d/ln2_w" % l)
            m.gate_proj = torch.nn.Parameter(torch.tensor(fc[:F]))
            m.up_proj = torch.nn.Parameter(torch.tensor(fc[F:]))
            m.down_proj = P("h.%d/fcproj_w" % l)
            self.layers.append(m)
        self.norm = P("lnf_w")
        self.lm_head = None if self.tied else P("lm_head")

    def rms(self, x, w):
        var = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(var + self.eps))

    @staticmethod
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def inv_freq(self):
        f = 1.0 / (self.theta ** (torch.arange(0, self.HS, 2, dtype=torch.int64).float() / self.HS))
        if self.scaling == "none":
            return f
        r = self.rope
        short_w = r["original_max_positions"] / r["high_freq_factor"]  # shorter wavelengths: kept
        long_w = r["original_max_positions"] / r["low_freq_factor"]  # longer ones: slowed by factor
        out, bands = [], {"kept": 0, "smoothed": 0, "divided": 0}
        for x in f.tolist():
            w = 2 * math.pi / x
            if w < short_w:
                bands["kept"] += 1
                out.append(x)
            elif w > long_w:
                bands["divided"] += 1
                out.append(x / r["factor"])
            else:
                bands["smoothed"] += 1
                s = (r["original_max_positions"] / w - r["low_freq_factor"]) / (r["high_freq_factor"] - r["low_freq_factor"])
                out.append((1 - s) * x / r["factor"] + s * x)
        self.bands = bands
        return torch.tensor(out, dtype=torch.float32)

    def forward(self, idx):
        B, T = idx.shape
        x = self.embed[idx]
        inv_freq = self.inv_freq()
        freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((T, T), float("-inf")).triu(1)
        G = self.NH // self.NKV
        for m in self.layers:
            h = self.rms(x, m.input_norm)
            q = (h @ m.q_proj.T).view(B, T, self.NH, self.HS).transpose(1, 2)
            k = (h @ m.k_proj.T).view(B, T, self.NKV, self.HS).transpose(1, 2)
            v = (h @ m.v_proj.T).view(B, T, self.NKV, self.HS).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k = k[:, :, None].expand(B, self.NKV, G, T, self.HS).reshape(B, self.NH, T, self.HS)  # repeat_kv
            v = v[:, :, None].expand(B, self.NKV, G, T, self.HS).reshape(B, self.NH, T, self.HS)
            att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(self.HS) + mask, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, self.C)
            x = x + y @ m.o_proj.T
            h = self.rms(x, m.post_norm)
            g = h @ m.gate_proj.T
            x = x + (torch.nn.functional.silu(g) * (h @ m.up_proj.T)) @ m.down_proj.T
        x = self.rms(x, self.norm)
        return x @ (self.embed if self.tied else self.lm_head).T


def greedy(ckpt, prompt, n):
    with h5py.File(ckpt, "r") as f:
        deck = f.attrs["deck"]
        cfg = deck_values(deck.decode() if isinstance(deck, bytes) else str(deck))
        model = Llama(f, cfg)
    ids = list(prompt.encode())
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids]))[0, -1, : int(cfg["model.vocab_size"])]
            ids.append(int(torch.argmax(logits)))
    sys.stdout.buffer.write(bytes(ids) + b"\n")
    return 0


def main(argv):
    if argv[1] == "--greedy":
        return greedy(argv[2], argv[3], int(argv[4]))
    run_dir, ckpt0, corpus = argv[1:4]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with h5py.File(run_dir + "/metrics.h5", "r") as f:
        deck = f.attrs["deck"]
        cfg = deck_values(deck.decode() if isinstance(deck, bytes) else str(deck))
        triad_loss = np.asarray(f["metrics/loss"][...], dtype=np.float64)
        evals = {}
        if "eval" in f:
            evals = dict(zip((int(x) for x in f["eval/step"][...]), (float(x) for x in f["eval/loss"][...])))
    with h5py.File(ckpt0, "r") as ck:
        model = Llama(ck, cfg)
    V, T = int(cfg["model.vocab_size"]), int(cfg["model.seq_len"])
    Bg, steps = int(cfg["train.batch_size"]), len(triad_loss)
    tokens = np.frombuffer(open(corpus, "rb").read(), dtype=np.uint8).astype(np.int64)
    W = (len(tokens) - 1) // T  # windows of T+1 tokens starting at w*T, in order (no shuffle)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() != 2]
    lr, min_lr, warm = float(cfg["train.lr"]), float(cfg["train.min_lr"]), int(cfg["train.warmup_steps"])
    total = int(cfg["train.steps"])
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": float(cfg["train.weight_decay"])},
                             {"params": other, "weight_decay": 0.0}], lr=lr,
                            betas=(float(cfg["train.beta1"]), float(cfg["train.beta2"])), eps=float(cfg["train.eps"]))
    worst = 0.0
    model.inv_freq()
    if model.bands:
        print("rope llama3: kept %(kept)d smoothed %(smoothed)d divided %(divided)d" % model.bands)
    for s in range(steps):
        lr_s = lr * (s + 1) / warm if s < warm else \
            min_lr + 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warm) / max(1, total - warm - 1)))) * (lr - min_lr)
        for g in opt.param_groups:
            g["lr"] = lr_s
        win = [((s * Bg + b) % W) * T for b in range(Bg)]
        seq = torch.tensor(np.stack([tokens[w:w + T + 1] for w in win]))
        logits = model(seq[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), seq[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(cfg["train.grad_clip"]))
        opt.step()
        ref = float(loss)
        e = abs(triad_loss[s] - ref) / abs(ref)
        worst = max(worst, e)
        print("%3d %.9e %.9e %.2e" % (s + 1, triad_loss[s], ref, e))
        if s + 1 in evals:
            val = np.frombuffer(open(cfg["data.val_path"], "rb").read(), dtype=np.uint8).astype(np.int64)
            nb = int(cfg["train.eval_batches"]) or ((len(val) - 1) // T) // Bg
            with torch.no_grad():
                seq = torch.tensor(np.stack([val[w * T:w * T + T + 1] for w in range(nb * Bg)]))
                ref = float(torch.nn.functional.cross_entropy(model(seq[:, :-1]).reshape(-1, V), seq[:, 1:].reshape(-1)))
            e = abs(evals[s + 1] - ref) / abs(ref)
            worst = max(worst, e)
            print("eval %3d %.9e %.9e %.2e" % (s + 1, evals[s + 1], ref, e))
    print("worst %.3e" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
