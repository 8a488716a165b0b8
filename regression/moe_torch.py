#!/usr/bin/python3
"""moe_torch.py -- an independent PyTorch implementation of Hugging Face's
mixture-of-experts llamas, MixtralForCausalLM and Qwen2MoeForCausalLM
(transformers' modeling_mixtral and modeling_qwen2_moe, written out here:
there is no `transformers` package), and of the training run triad makes of
them, for regression/moe_pytorch.sh.  Self-contained: what it shares with
the dense reference, regression/llama_torch.py, is copied, not imported.

    moe_torch.py RUN_DIR CKPT_0 CORPUS
    moe_torch.py --greedy CKPT PROMPT N       the prompt's bytes and N greedy tokens
                                              after them (full forwards, no cache)

RUN_DIR is a finished triad run (its metrics.h5 holds the deck it ran and
the per-step losses); CKPT_0 the checkpoint of the same deck with
train.steps = 0 (the initial weights); CORPUS the text file of
data.kind = 'text' (bytes are the tokens) read without shuffling.  The
reference trains as many steps as the run has rows and prints one line per
step, `step triad reference rel_err`; when the run evaluated
(train.eval_every, its /eval in metrics.h5) the reference computes the same
held-out loss after those steps, the first train.eval_batches global
batches of data.val_path in order, and prints `eval step triad reference
rel_err` lines.  Then one line `aux step triad A rel_err` per step, A the step's
load-balancing loss (the mean over its micro-batches of the mean over the
layers, unscaled by train.moe_aux_loss) beside triad's metrics/moe_aux_loss,
and last `worst REL` (over the step, eval and aux lines); it exits 0.

The model, as Hugging Face defines it (not as triad computes it):
  * embedding lookup; no position table;
  * per layer: h = x + o_proj(attn(rms(x))), x = h + moe(rms(h));
  * RMSNorm: w * (x * rsqrt(mean(x^2) + eps));
  * rotary embedding on q and k: inv_freq = 1 / theta^(arange(0, HS, 2) / HS),
    emb = cat(t * inv_freq, t * inv_freq), q * cos(emb) + rotate_half(q) * sin(emb);
  * grouped-query attention: kv head g serves query heads g*G .. g*G+G-1
    (repeat_kv), causal softmax(q k^T / sqrt(HS)) v;
  * the MoE MLP on the N = B*T tokens x of a micro-batch (row-major, sequence
    by sequence), every layer:
      - router logits x @ gate^T (fp32); p = softmax(logits) (model.moe_router
        = 'softmax', Mixtral, Qwen2-MoE) or sigmoid(logits) ('sigmoid');
      - top-k (model.n_expert_active) of p per token, slot s = 0..k-1 in
        descending p, ties to the lower expert; weights w_s = the chosen p,
        divided by their sum when model.moe_norm_topk (Mixtral always,
        Qwen2-MoE's norm_topk_prob);
      - train.moe_capacity cf > 0: cap = ceil(cf * N * k / E) slots per
        expert, granted in token order, then slot order; a slot past its
        expert's cap is dropped (contributes nothing; the kept weights are
        not renormalised again).  cf = 0: dropless (as Hugging Face);
      - expert e: down_e(silu(gate_e(x)) * up_e(x)); out = sum over the kept
        slots of w_s * expert_{i_s}(x);
      - model.n_shared_expert > 0 (Qwen2-MoE's shared_expert, hidden width
        n_shared_expert * moe_ffn_hidden): out += g * down(silu(gate(x)) * up(x)),
        g = sigmoid(x @ shared_expert_gate^T) with model.moe_shared_gate, else 1;
    except the first model.moe_dense_layers layers (Qwen2-MoE's
    mlp_only_layers, DeepSeek's first_k_dense_replace), whose MLP is the
    dense llama's down(silu(gate(x)) * up(x)) of hidden width ffn_hidden;
  * final RMSNorm, untied lm_head (or wte when tied), cross-entropy.
The auxiliary losses, per MoE layer l and micro-batch (their means below
are over the MoE layers):
  * load balancing (Hugging Face's load_balancing_loss_func, per layer rather
    than over all layers concatenated): aux_l = E * sum_i (c_i / N) * P_i,
    c_i the number of the N*k slots choosing expert i before capacity drops
    (a count, no gradient), P_i the mean over tokens of p_i (softmax) or of
    p_i / sum_j p_j (sigmoid);
  * router z-loss: z_l = mean over tokens of logsumexp(logits)^2.
Training: the global batch of train.batch_size sequences is cut, in order,
into micro-batches of train.micro_batch_size (0: batch_size / dp), each
routed on its own.  The objective is the cross-entropy averaged over the
whole global batch plus the mean over micro-batches of
moe_aux_loss * mean_l(aux_l) + moe_z_loss * mean_l(z_l); the reported loss
(what is compared) is the cross-entropy alone.  torch.optim.AdamW (decay on
the 2-D weights only, which includes the router, the experts and the shared
expert), the gradient clipped to grad_clip by its global norm
(clip_grad_norm_), linear warm-up then cosine decay to min_lr over the run's
steps (or constant lr, train.lr_schedule), as docs/input.md states.  The
held-out loss is the mean cross-entropy of the eval batches, forward only,
in the same micro-batches.
triad's tensors map to Hugging Face's like this: qkv_w rows are q_proj,
k_proj, v_proj stacked; attproj_w o_proj; ln1_w / ln2_w / lnf_w the input,
post-attention and final norms; router_w [E, C] the router (Mixtral's
block_sparse_moe.gate, Qwen's mlp.gate); h.<l>/expert.<e>/fc_w [2*Fe, C]
expert e's gate_proj (Mixtral w1) then its up_proj (w3), and
h.<l>/expert.<e>/fcproj_w [C, Fe] its down_proj (w2); with model.qkv_bias
qkv_b [C + 2 KV] the q, k and v biases (Qwen2); with a shared expert fc_w [2*Fs, C] its gate_proj then
up_proj, fcproj_w [C, Fs] its down_proj, shared_gate_w [1, C] Qwen's
shared_expert_gate.  A deck without model.n_expert (or 0) is the dense
llama: fc_w / fcproj_w are then the MLP, as they are of a leading dense
layer's (h.<l>/fc_w [2*F, C], h.<l>/fcproj_w [C, F], F = ffn_hidden).
"""
import math
import sys

import h5py
import numpy as np
import torch

F = torch.nn.functional


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


def real(v):
    """A deck real: Fortran's 3.0d-3 as well as 3.0e-3."""
    return float(v.lower().replace("d", "e"))


# Keys a run made before triad had mixtures of experts does not echo (their
# defaults in src/config/params.def; n_expert = 0 is the dense llama).
DEFAULTS = {"model.n_expert": "0", "model.n_expert_active": "2", "model.moe_ffn_hidden": "0", "model.moe_dense_layers": "0",
            "model.n_shared_expert": "0", "model.moe_router": "softmax", "model.moe_norm_topk": ".true.",
            "model.moe_shared_gate": ".true.", "train.moe_aux_loss": "0.01", "train.moe_z_loss": "0",
            "train.moe_capacity": "0", "train.micro_batch_size": "0", "train.lr_schedule": "cosine",
            "model.tie_embeddings": ".false.", "parallel.dp": "0"}


def swiglu(x, gate, up, down):
    """Hugging Face's LlamaMLP / MixtralBlockSparseTop2MLP: down(silu(gate(x)) * up(x))"""
    return (F.silu(x @ gate.T) * (x @ up.T)) @ down.T


class MoeLlama(torch.nn.Module):
    def __init__(self, ck, cfg):
        super().__init__()
        self.L, self.NH = int(cfg["model.n_layer"]), int(cfg["model.n_head"])
        self.C = int(cfg["model.d_model"])
        self.HS = self.C // self.NH
        self.NKV = int(cfg["model.n_kv_head"]) or self.NH
        self.eps = real(cfg["model.norm_eps"])
        self.theta = real(cfg["model.rope_theta"])
        self.tied = logical(cfg["model.tie_embeddings"])
        self.E = int(cfg["model.n_expert"])
        self.k = int(cfg["model.n_expert_active"])
        self.router = cfg["model.moe_router"]
        self.norm_topk = logical(cfg["model.moe_norm_topk"])
        self.shared_gate = logical(cfg["model.moe_shared_gate"])
        self.ns = int(cfg["model.n_shared_expert"])
        self.cf = real(cfg["train.moe_capacity"])
        self.Ld = int(cfg["model.moe_dense_layers"]) if self.E else 0
        assert self.router in ("softmax", "sigmoid"), "model.moe_router = '%s'" % self.router
        assert self.E == 0 or 1 <= self.k <= self.E, "n_expert_active = %d of n_expert = %d" % (self.k, self.E)
        arr = lambda name: np.asarray(ck["model/" + name][...], dtype=np.float32)
        T = lambda a: torch.nn.Parameter(torch.tensor(a))
        P = lambda name: T(arr(name))
        self.embed = P("wte")
        self.layers = torch.nn.ModuleList()
        q, kv, C = self.NH * self.HS, self.NKV * self.HS, self.C
        for l in range(self.L):
            m = torch.nn.Module()
            hl = "h.%d/" % l
            qkv = arr(hl + "qkv_w")
            m.input_norm = P(hl + "ln1_w")
            m.q_proj = T(qkv[:q])
            m.k_proj = T(qkv[q:q + kv])
            m.v_proj = T(qkv[q + kv:])
            m.qkv_bias = ("model/" + hl + "qkv_b") in ck  # (Qwen2's q, k and v biases)
            if m.qkv_bias:
                b = arr(hl + "qkv_b")
                m.q_bias, m.k_bias, m.v_bias = T(b[:q]), T(b[q:q + kv]), T(b[q + kv:])
            m.o_proj = P(hl + "attproj_w")
            m.post_norm = P(hl + "ln2_w")
            m.sparse = self.E and l >= self.Ld
            if m.sparse:
                m.gate = P(hl + "router_w")
                assert m.gate.shape == (self.E, C), "router_w %s" % (tuple(m.gate.shape),)
                fc0 = arr(hl + "expert.0/fc_w")
                Fe = fc0.shape[0] // 2
                want = int(cfg["model.moe_ffn_hidden"]) or int(cfg.get("model.ffn_hidden", "0"))
                assert want in (0, Fe), "expert.0/fc_w %s, moe_ffn_hidden %d" % (fc0.shape, want)
                m.experts = torch.nn.ModuleList()
                for e in range(self.E):
                    fc, proj = arr(hl + "expert.%d/fc_w" % e), arr(hl + "expert.%d/fcproj_w" % e)
                    assert fc.shape == (2 * Fe, C) and proj.shape == (C, Fe)
                    ex = torch.nn.Module()
                    ex.gate_proj = T(fc[:Fe])
                    ex.up_proj = T(fc[Fe:])
                    ex.down_proj = T(proj)
                    m.experts.append(ex)
            if self.ns or not m.sparse:  # the shared expert, or the dense MLP
                fc = arr(hl + "fc_w")
                Fs = fc.shape[0] // 2
                if not m.sparse and cfg.get("model.ffn_hidden", "0") != "0":
                    assert Fs == int(cfg["model.ffn_hidden"]), "h.%d/fc_w %s, ffn_hidden %s" % (l, fc.shape, cfg["model.ffn_hidden"])
                if m.sparse:
                    assert Fs == self.ns * Fe, "fc_w %s for n_shared_expert %d x %d" % (fc.shape, self.ns, Fe)
                m.gate_proj = T(fc[:Fs])
                m.up_proj = T(fc[Fs:])
                m.down_proj = P(hl + "fcproj_w")
                if m.sparse and self.shared_gate:
                    m.shared_expert_gate = P(hl + "shared_gate_w")
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

    def route(self, logits):
        """Router logits (N, E) -> probabilities p (N, E), the top-k's
        weights w and experts idx (N, k) in descending p (ties: lower
        expert first), and keep (N, k): the slots within capacity."""
        N = logits.shape[0]
        p = torch.softmax(logits, dim=-1) if self.router == "softmax" else torch.sigmoid(logits)
        w, idx = torch.sort(p, dim=-1, descending=True, stable=True)
        w, idx = w[:, :self.k], idx[:, :self.k]
        if self.norm_topk:
            w = w / w.sum(-1, keepdim=True)
        keep = torch.ones_like(idx, dtype=torch.bool)
        if self.cf > 0:
            cap = math.ceil(self.cf * N * self.k / self.E)
            # slots in token order, then slot order, are idx's row-major
            # order: a slot's rank among its expert's is a running count
            onehot = F.one_hot(idx.reshape(-1), self.E)
            rank = (onehot.cumsum(0) * onehot).sum(-1).view(N, self.k)  # 1-based
            keep = rank <= cap
        return p, w, idx, keep

    def moe(self, m, x):
        """The MoE MLP on x (N, C) -> out (N, C), aux_l, z_l."""
        N = x.shape[0]
        logits = x @ m.gate.T
        p, w, idx, keep = self.route(logits)
        out = torch.zeros_like(x)
        for e, ex in enumerate(m.experts):  # as Mixtral's loop: gather, expert, scatter-add
            t, s = torch.nonzero((idx == e) & keep, as_tuple=True)
            if len(t):
                y = swiglu(x[t], ex.gate_proj, ex.up_proj, ex.down_proj)
                out = out.index_add(0, t, y * w[t, s, None])
        if self.ns:
            y = swiglu(x, m.gate_proj, m.up_proj, m.down_proj)
            out = out + (torch.sigmoid(x @ m.shared_expert_gate.T) * y if self.shared_gate else y)
        r = p if self.router == "softmax" else p / p.sum(-1, keepdim=True)
        c = torch.bincount(idx.reshape(-1), minlength=self.E).to(x.dtype)  # before drops
        aux = self.E * ((c / N) * r.mean(0)).sum()
        z = torch.logsumexp(logits, dim=-1).pow(2).mean()
        return out, aux, z

    def forward(self, idx):
        """Token ids (B, T) of one micro-batch -> logits (B, T, V), and the
        means over the layers of aux_l and z_l (0 for the dense llama)."""
        B, T = idx.shape
        x = self.embed[idx]
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.HS, 2, dtype=torch.int64).to(x.dtype) / self.HS))
        freqs = torch.outer(torch.arange(T, dtype=x.dtype), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((T, T), float("-inf"), dtype=x.dtype).triu(1)
        G = self.NH // self.NKV
        aux, z = x.new_zeros(()), x.new_zeros(())
        for m in self.layers:
            h = self.rms(x, m.input_norm)
            q, k, v = h @ m.q_proj.T, h @ m.k_proj.T, h @ m.v_proj.T
            if m.qkv_bias:
                q, k, v = q + m.q_bias, k + m.k_bias, v + m.v_bias
            q = q.view(B, T, self.NH, self.HS).transpose(1, 2)
            k = k.view(B, T, self.NKV, self.HS).transpose(1, 2)
            v = v.view(B, T, self.NKV, self.HS).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k = k[:, :, None].expand(B, self.NKV, G, T, self.HS).reshape(B, self.NH, T, self.HS)  # repeat_kv
            v = v[:, :, None].expand(B, self.NKV, G, T, self.HS).reshape(B, self.NH, T, self.HS)
            att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(self.HS) + mask, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, self.C)
            x = x + y @ m.o_proj.T
            h = self.rms(x, m.post_norm).reshape(B * T, self.C)
            if m.sparse:
                y, a, zl = self.moe(m, h)
                aux, z = aux + a / (self.L - self.Ld), z + zl / (self.L - self.Ld)
            else:
                y = swiglu(h, m.gate_proj, m.up_proj, m.down_proj)
            x = x + y.view(B, T, self.C)
        x = self.rms(x, self.norm)
        return x @ (self.embed if self.tied else self.lm_head).T, aux, z


def greedy(ckpt, prompt, n):
    """The prompt's bytes and n greedy tokens after them (full forwards, no
    cache); generation routes every token (no capacity), as triad sample does."""
    with h5py.File(ckpt, "r") as f:
        deck = f.attrs["deck"]
        cfg = dict(DEFAULTS, **deck_values(deck.decode() if isinstance(deck, bytes) else str(deck)))
        cfg["train.moe_capacity"] = "0"
        model = MoeLlama(f, cfg)
    ids = list(prompt.encode())
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids]))[0][0, -1, : int(cfg["model.vocab_size"])]
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
        cfg = dict(DEFAULTS, **deck_values(deck.decode() if isinstance(deck, bytes) else str(deck)))
        triad_loss = np.asarray(f["metrics/loss"][...], dtype=np.float64)
        triad_aux = np.asarray(f["metrics/moe_aux_loss"][...], dtype=np.float64) if "metrics/moe_aux_loss" in f \
            else None
        evals = {}
        if "eval" in f:
            evals = dict(zip((int(x) for x in f["eval/step"][...]), (float(x) for x in f["eval/loss"][...])))
    with h5py.File(ckpt0, "r") as ck:
        model = MoeLlama(ck, cfg)
        dp = int(cfg["parallel.dp"]) or int(ck.attrs.get("dp", 1))  # the deck echoes dp = 0 when derived
    V, T = int(cfg["model.vocab_size"]), int(cfg["model.seq_len"])
    Bg, steps = int(cfg["train.batch_size"]), len(triad_loss)
    mb = int(cfg["train.micro_batch_size"]) or Bg // dp
    assert Bg % mb == 0, "batch_size %d, micro-batches of %d" % (Bg, mb)
    a_coef, z_coef = real(cfg["train.moe_aux_loss"]), real(cfg["train.moe_z_loss"])
    tokens = np.frombuffer(open(corpus, "rb").read(), dtype=np.uint8).astype(np.int64)
    W = (len(tokens) - 1) // T  # windows of T+1 tokens starting at w*T, in order (no shuffle)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() != 2]
    lr, min_lr, warm = real(cfg["train.lr"]), real(cfg["train.min_lr"]), int(cfg["train.warmup_steps"])
    total = int(cfg["train.steps"])
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": real(cfg["train.weight_decay"])},
                             {"params": other, "weight_decay": 0.0}], lr=lr,
                            betas=(real(cfg["train.beta1"]), real(cfg["train.beta2"])), eps=real(cfg["train.eps"]))
    worst, aux_lines = 0.0, []
    for s in range(steps):
        if s < warm:
            lr_s = lr * (s + 1) / warm
        elif cfg["train.lr_schedule"] == "constant":
            lr_s = lr
        else:
            lr_s = min_lr + 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warm) / max(1, total - warm - 1)))) * (lr - min_lr)
        for g in opt.param_groups:
            g["lr"] = lr_s
        win = [((s * Bg + b) % W) * T for b in range(Bg)]
        seq = torch.tensor(np.stack([tokens[w:w + T + 1] for w in win]))
        # each micro-batch's forward on its own (routing, capacity, aux);
        # equal micro-batches: the batch's mean cross-entropy is the mean of theirs
        n_micro = Bg // mb
        opt.zero_grad()
        ce_sum = aux_sum = 0.0
        for j in range(0, Bg, mb):
            logits, aux, z = model(seq[j:j + mb, :-1])
            ce = F.cross_entropy(logits.reshape(-1, V), seq[j:j + mb, 1:].reshape(-1))
            ((ce + a_coef * aux + z_coef * z) / n_micro).backward()
            ce_sum, aux_sum = ce_sum + float(ce), aux_sum + float(aux)
        torch.nn.utils.clip_grad_norm_(model.parameters(), real(cfg["train.grad_clip"]))
        opt.step()
        ref = ce_sum / n_micro
        ref_aux = aux_sum / n_micro
        if triad_aux is not None and model.E:  # triad's metrics/moe_aux_loss, compared like the loss
            e = abs(triad_aux[s] - ref_aux) / abs(ref_aux)
            worst = max(worst, e)
            aux_lines.append("aux %3d %.9e %.9e %.2e" % (s + 1, triad_aux[s], ref_aux, e))
        else:
            aux_lines.append("aux %3d %.9e" % (s + 1, ref_aux))
        e = abs(triad_loss[s] - ref) / abs(ref)
        worst = max(worst, e)
        print("%3d %.9e %.9e %.2e" % (s + 1, triad_loss[s], ref, e))
        if s + 1 in evals:
            val = np.frombuffer(open(cfg["data.val_path"], "rb").read(), dtype=np.uint8).astype(np.int64)
            nb = int(cfg["train.eval_batches"]) or ((len(val) - 1) // T) // Bg
            seq = torch.tensor(np.stack([val[w * T:w * T + T + 1] for w in range(nb * Bg)]))
            with torch.no_grad():
                ces = [float(F.cross_entropy(model(seq[j:j + mb, :-1])[0].reshape(-1, V), seq[j:j + mb, 1:].reshape(-1)))
                       for j in range(0, nb * Bg, mb)]
            ref = sum(ces) / len(ces)
            e = abs(evals[s + 1] - ref) / abs(ref)
            worst = max(worst, e)
            print("eval %3d %.9e %.9e %.2e" % (s + 1, evals[s + 1], ref, e))
    print("\n".join(aux_lines))
    print("worst %.3e" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
