#!/usr/bin/python3
"""sample_torch.py -- which tokens `triad sample` may draw, and how often,
checked against Hugging Face's sampling written out here (transformers'
generation logits processors, from their documented semantics: there is
no `transformers` package), for regression/sample.sh.

    sample_torch.py CKPT PROMPT TEMPERATURE:TOP_K:TOP_P:OUT ...

CKPT is a byte-level llama checkpoint (regression/llama_torch.py's model
computes its logits); each OUT is what `triad sample` printed for a prompt
file of N lines, each PROMPT, with sample.max_new_tokens = 1, no tokenizer
and those settings: N records of PROMPT, the drawn byte and a newline.  The reference's
distribution of the next token after PROMPT:

  * TemperatureLogitsWarper: scores / temperature;
  * TopKLogitsWarper (top_k > 0): the scores below the k-th largest
    (k = min(top_k, vocabulary)) set to -inf: every score tied with the
    k-th stays;
  * TopPLogitsWarper (top_p < 1): the softmax of what is left, sorted
    ascending and summed; the tokens whose sum from the bottom is <=
    1 - top_p set to -inf, the most likely one always kept;
  * softmax, then a multinomial draw.

Every drawn token must be one the reference allows, and each token's
count within 5 standard deviations (plus 3) of N p; and the cumulative
probabilities that decide top_p must lie at least 1e-3 from it (so that
no rounding decides the allowed set).  Prints the allowed tokens with
their probabilities and counts, a line per OUT; exits 1 on a mismatch.
"""
import math
import sys

import h5py
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from llama_torch import Llama, deck_values  # noqa: E402


def warped(scores, temperature, top_k, top_p):
    """The probabilities Hugging Face's sampling draws from (float32, as its processors run)."""
    s = scores.float() / temperature
    if top_k > 0:
        k = min(top_k, s.shape[-1])
        kth = torch.topk(s, k).values[-1]
        s = s.masked_fill(s < kth, -math.inf)
    if top_p < 1.0:
        sorted_s, idx = torch.sort(s, descending=False)
        cum = sorted_s.softmax(-1).cumsum(-1)
        remove = cum <= (1 - top_p)
        remove[-1] = False  # min_tokens_to_keep = 1
        s = s.masked_fill(remove.scatter(0, idx, remove), -math.inf)
    return torch.softmax(s.double(), -1)


def check(logits, prompt, temperature, top_k, top_p, out):
    """The mismatches of OUT against the reference (printed)."""
    p = warped(logits, temperature, top_k, top_p)
    if top_p < 1.0:  # the renormalised mass before each kept id, and before the first left out
        q = torch.sort(warped(logits, temperature, top_k, 1.0), descending=True).values
        before = torch.cumsum(q, 0) - q
        kept = int((p > 0).sum())
        margin = min(abs(float(before[i]) - top_p) for i in range(1, min(kept + 1, len(q))) if float(q[i]) > 0) \
            if kept > 1 or float(q[1]) > 0 else 1.0
        if margin < 1e-3:
            print("%s: top_p = %g lies %.2e from a cumulative probability: too close to call" % (out, top_p, margin))
            return 1
    data = open(out, "rb").read()
    rec = len(prompt) + 2
    if len(data) % rec:
        print("%s: %d bytes, not records of %d" % (out, len(data), rec))
        return 1
    n = len(data) // rec
    counts = [0] * 256
    for r in range(n):
        line = data[r * rec:(r + 1) * rec]
        if line[:len(prompt)] != prompt or line[-1:] != b"\n":
            print("%s: record %d is not the prompt, a byte and a newline: %r" % (out, r, line))
            return 1
        counts[line[len(prompt)]] += 1
    bad, lines = 0, []
    for t in sorted(range(256), key=lambda t: -float(p[t])):
        e = n * float(p[t])
        if counts[t] == 0 and e == 0:
            continue
        sd = math.sqrt(e * (1 - float(p[t])))
        wrong = (e == 0 and counts[t] > 0) or abs(counts[t] - e) > 5 * sd + 3
        bad += wrong
        lines.append("%s%d %.4f %d/%.0f" % ("BAD " if wrong else "", t, float(p[t]), counts[t], e))
    print("temperature %g top_k %d top_p %g: %d draws, %d ids allowed, %d mismatched (id p drawn/expected: %s)"
          % (temperature, top_k, top_p, n, int((p > 0).sum()), bad, ", ".join(lines[:12])))
    return bad


def main(argv):
    ckpt, prompt = argv[1], argv[2].encode()
    with h5py.File(ckpt, "r") as f:
        deck = f.attrs["deck"]
        cfg = deck_values(deck.decode() if isinstance(deck, bytes) else str(deck))
        model = Llama(f, cfg)
    with torch.no_grad():
        logits = model(torch.tensor([list(prompt)]))[0, -1, :256]
    bad = 0
    for run in argv[3:]:
        t, k, top_p, out = run.split(":", 3)
        bad += check(logits, prompt, float(t), int(k), float(top_p), out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
