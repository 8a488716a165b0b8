#!/usr/bin/python3
"""pytorch_peer.py -- the PyTorch peer of triad's training step, for speed.

--arch gpt2 (default): the same GPT-2 as triad (docs/design.md, docs/precision.md): token + learned position embedding,
L pre-LN blocks (LayerNorm eps 1e-5 -> causal self-attention with fused qkv,
scale 1/sqrt(HS) -> residual; LayerNorm -> Linear(C,4C) -> GELU(tanh) ->
Linear(4C,C) -> residual), final LayerNorm, LM head tied to wte, mean
cross-entropy, no dropout.  Init normal(0, 0.02), the two residual projections
normal(0, 0.02/sqrt(2L)), biases 0.  AdamW as triad's defaults (lr 6e-4,
betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights only), warm-up +
cosine schedule, global-norm clipping at 1.0.  It trains on random tokens:
only the time matters here.

--arch llama: the LLaMA block of triad's model.arch = 'llama' (RMSNorm eps
1e-5, rotary embedding of theta 10000 on q and k, --kv-heads key/value heads
shared by the query heads, SwiGLU of --ffn hidden units, no biases, untied
head), trained the same way.  (Its numerics against triad:
regression/llama_torch.py.)

Threads: OMP_WAIT_POLICY=PASSIVE is set before torch is imported (unless the
caller set it), because OpenMP threads that spin between parallel regions
made PyTorch 2x slower on the 2-core reference machine (ENVIRONMENT.md);
torch.set_num_threads(--threads) fixes the intra-op pool and one inter-op
thread keeps a second pool from competing for the cores.

Prints one line after the warm-up steps, with the median of the timed steps:
  pytorch: L=4 C=256 NH=4 T=256 B=8 V=4096 threads=2 tokens/s=... ms/step=...

Usage (Debian's python3-torch, PyTorch 1.13, CPU):
  /usr/bin/python3 bench/pytorch_peer.py --layers 4 --d-model 256 --heads 4 \\
      --seq-len 256 --batch 8 --vocab 4096 --steps 10 --threads 2
"""
import argparse
import math
import os
import statistics
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=4, help="transformer blocks (L)")
    p.add_argument("--d-model", type=int, default=256, help="embedding width (C)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (NH)")
    p.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2", help="block family")
    p.add_argument("--kv-heads", type=int, default=0, help="llama: key/value heads (0: --heads)")
    p.add_argument("--ffn", type=int, default=0, help="llama: SwiGLU hidden width (0: 8C/3 up to 256s)")
    p.add_argument("--seq-len", type=int, default=256, help="sequence length (T)")
    p.add_argument("--batch", type=int, default=8, help="sequences per step (B)")
    p.add_argument("--vocab", type=int, default=4096, help="vocabulary size (V)")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed steps first (the first few are slow: allocator, page faults)")
    p.add_argument("--threads", type=int, default=2, help="intra-op threads")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--foreach", action="store_true",
                   help="AdamW(foreach=True): multi-tensor update (PyTorch 1.13's CPU default is off)")
    a = p.parse_args(argv)
    if a.d_model % a.heads:
        p.error(f"--heads {a.heads} must divide --d-model {a.d_model}")
    if min(a.layers, a.d_model, a.heads, a.seq_len, a.batch, a.vocab, a.steps, a.threads) < 1:
        p.error("every size, --steps and --threads must be at least 1")
    return a


args = parse_args(sys.argv[1:])
# Must happen before torch (and its OpenMP runtime) is loaded.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.qkv = nn.Linear(C, 3 * C)          # rows q, k, v; heads contiguous
        self.attproj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)

    def attention(self, x, mask):
        B, T, C = x.shape
        HS = C // self.NH
        q, k, v = self.qkv(x).split(C, dim=2)                      # (B, T, C) each
        q = q.view(B, T, self.NH, HS).transpose(1, 2)               # (B, NH, T, HS)
        k = k.view(B, T, self.NH, HS).transpose(1, 2)
        v = v.view(B, T, self.NH, HS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))     # (B, NH, T, T)
        att = att.masked_fill(mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)    # (B, T, C)
        return self.attproj(y)

    def forward(self, x, mask):
        x = x + self.attention(self.ln1(x), mask)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L, C, NH, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C, eps=1e-5)
        # True above the diagonal: the future a position may not attend to.
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif ".ln" in name or name.startswith("lnf"):
                nn.init.ones_(p)
            elif name.endswith("attproj.weight") or name.endswith("fcproj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))               # (B, T, C)
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.lnf(x) @ self.wte.weight.t()                  # (B, T, V), tied head
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


class LlamaBlock(nn.Module):
    def __init__(self, C, NH, NKV, F_):
        super().__init__()
        self.NH, self.NKV, self.HS = NH, NKV, C // NH
        self.n1 = nn.Parameter(torch.ones(C))
        self.qkv = nn.Linear(C, (NH + 2 * NKV) * self.HS, bias=False)  # rows q, k, v
        self.o = nn.Linear(C, C, bias=False)
        self.n2 = nn.Parameter(torch.ones(C))
        self.gate_up = nn.Linear(C, 2 * F_, bias=False)
        self.down = nn.Linear(F_, C, bias=False)

    @staticmethod
    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))

    @staticmethod
    def rope(x, cos, sin):
        h = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * sin

    def forward(self, x, mask, cos, sin):
        B, T, C = x.shape
        G = self.NH // self.NKV
        q, k, v = self.qkv(self.rms(x, self.n1)).split([C, self.NKV * self.HS, self.NKV * self.HS], dim=2)
        q = self.rope(q.view(B, T, self.NH, self.HS).transpose(1, 2), cos, sin)
        k = self.rope(k.view(B, T, self.NKV, self.HS).transpose(1, 2), cos, sin)
        v = v.view(B, T, self.NKV, self.HS).transpose(1, 2)
        k = k.repeat_interleave(G, dim=1)
        v = v.repeat_interleave(G, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.HS))
        att = att.masked_fill(mask[:T, :T], float("-inf")).softmax(dim=-1)
        x = x + self.o((att @ v).transpose(1, 2).contiguous().view(B, T, C))
        g, u = self.gate_up(self.rms(x, self.n2)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Llama(nn.Module):
    def __init__(self, L, C, NH, NKV, F_, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(LlamaBlock(C, NH, NKV, F_) for _ in range(L))
        self.norm = nn.Parameter(torch.ones(C))
        self.head = nn.Linear(C, V, bias=False)
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))
        HS = C // NH
        inv = 1.0 / (10000.0 ** (torch.arange(0, HS, 2).float() / HS))
        emb = torch.outer(torch.arange(T).float(), inv).repeat(1, 2)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx)
        for blk in self.blocks:
            x = blk(x, self.mask, self.cos[:T], self.sin[:T])
        logits = self.head(LlamaBlock.rms(x, self.norm))
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


def lr_at(step, total, lr=6e-4, min_lr=6e-5, warmup=0):
    """triad's schedule: linear warm-up, then cosine from lr to min_lr."""
    if warmup and step < warmup:
        return lr * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * min(1.0, frac)))


def main():
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already fixed by an earlier parallel call
    torch.manual_seed(args.seed)
    L, C, NH, T, B, V = args.layers, args.d_model, args.heads, args.seq_len, args.batch, args.vocab
    if args.arch == "llama":
        NKV = args.kv_heads or NH
        F_ = args.ffn or (8 * C // 3 + 255) // 256 * 256
        model = Llama(L, C, NH, NKV, F_, T, V)
    else:
        model = GPT2(L, C, NH, T, V)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, foreach=args.foreach or None)
    gen = torch.Generator().manual_seed(args.seed)
    total = args.warmup + args.steps
    times = []
    for step in range(total):
        idx = torch.randint(V, (B, T), generator=gen)
        targets = torch.randint(V, (B, T), generator=gen)
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total)
        loss = model(idx, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        float(loss)  # the step is done when its loss is known
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    nparam = sum(p.numel() for p in model.parameters())
    print(f"pytorch {args.arch}: L={L} C={C} NH={NH} T={T} B={B} V={V} threads={args.threads} "
          f"params={nparam} tokens/s={B * T / (ms / 1e3):.0f} ms/step={ms:.1f} "
          f"(torch {torch.__version__}, median of {len(times)} steps)")


if __name__ == "__main__":
    main()
