#!/usr/bin/python3
"""mc_torch.py -- the independent side of regression/eval_tasks.sh: an llm.c
eval file written as llm.c's dev/data scripts write one, and multiple-choice
examples scored in PyTorch the way llm.c's dev/data/hellaswag.py and
lm-evaluation-harness score them, with the model of regression/llama_torch.py
(Hugging Face's LlamaForCausalLM written out) on a checkpoint's weights.

    mc_torch.py write EXAMPLES.json OUT.bin
        the llm.c eval file of the examples: 256 int32 of header (magic
        20240522, version 1, the examples, the longest example's bytes), then
        each example a stream of uint16: 65535, its bytes, its index, the
        label, the number of choices, the context's length and ids, each
        choice's length and ids (dev/data/data_common.py's layout)
    mc_torch.py text2ids TASK.jsonl [DOC_ID]
        a JSON Lines task as examples of ids: each text's UTF-8 bytes (a
        byte-level model), the context after DOC_ID where one is given
    mc_torch.py texts TASK.jsonl DIR
        the texts a tokenizer encodes for each example, split as
        lm-evaluation-harness splits them: DIR/tEEE_00.txt the context without
        its trailing whitespace, DIR/tEEE_KK.txt (KK >= 1) the context followed
        by choice K - 1 (the whole text)
    mc_torch.py join TASK.jsonl IDS DOC_ID
        examples of ids from IDS, the ids of those texts a line each in their
        order: the context after DOC_ID, a choice the whole text's ids after
        the context's
    mc_torch.py check CKPT SCORES TASK EXAMPLES.json ACC ACC_NORM [TASK EXAMPLES.json ACC ACC_NORM ...]
        scores every choice of each task and compares with the task's lines
        of triad eval's eval.scores file (SCORES) and its acc and acc_norm:
        prints `TASK: worst REL` over the log-probabilities and the
        reference's acc and acc_norm; exits 0 when every log-probability is
        within 1e-5 relative and the accuracies are equal, else 1

EXAMPLES.json: [{"ctx": [ids], "endings": [[ids], ...], "label": k}, ...].
A choice's log-probability: the sum, over its tokens, of log softmax of the
logits at the position before each (the context's last position predicts
its first token); acc takes the choice of the largest sum, acc_norm of the
largest sum over its length: for a JSON Lines task ("chars" in the example)
lm-evaluation-harness's len(choice), the choice's characters without its
leading whitespace (the delimiter the harness puts before it), else the
mean over its tokens (llm.c's avg_loss for its eval files); the first wins
a tie.
"""
import json
import math
import os
import struct
import sys


def write(examples, out):
    stream, longest = [], 0
    for idx, ex in enumerate(examples):
        s = [2**16 - 1, 0, idx, ex["label"], len(ex["endings"]), len(ex["ctx"])] + list(ex["ctx"])
        for end in ex["endings"]:
            s += [len(end)] + list(end)
        s[1] = 2 * len(s)  # <EXAMPLE_BYTES>: the whole example's, its delimiter included
        longest = max(longest, s[1])
        stream += s
    header = [20240522, 1, len(examples), longest] + [0] * 252
    with open(out, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(stream), *stream))
    return 0


def text2ids(path, doc):
    out = []
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            continue
        j = json.loads(line)
        # lm-evaluation-harness's split: the context's trailing whitespace starts every choice
        c = j["context"].rstrip()
        space = j["context"][len(c):]
        ctx = ([doc] if doc is not None else []) + list(c.encode())
        out.append({"ctx": ctx, "endings": [list((space + x).encode()) for x in j["choices"]], "label": j["label"],
                    "chars": [chars(x) for x in j["choices"]]})
    json.dump(out, sys.stdout)
    return 0


def chars(choice):
    """lm-evaluation-harness's acc_norm divisor, len(choice): its characters, the delimiter (leading whitespace) not
    counted (the harness scores ' ' + choice and divides by len(choice))"""
    return len(choice.lstrip())


def examples_of(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def texts(path, out):
    for i, j in enumerate(examples_of(path)):
        c = j["context"]
        for k, t in enumerate([c.rstrip()] + [c + x for x in j["choices"]]):
            open("%s/t%03d_%02d.txt" % (out, i, k), "w", encoding="utf-8").write(t)
    return 0


def join(path, ids_path, doc):
    ids = [[int(x) for x in line.split()] for line in open(ids_path)]
    out = []
    for j in examples_of(path):
        n = len(j["choices"])
        ctx, ends = ids[0], [w[len(ids[0]):] for w in ids[1:1 + n]]
        del ids[:1 + n]
        out.append({"ctx": [doc] + ctx, "endings": ends, "label": j["label"], "chars": [chars(x) for x in j["choices"]]})
    json.dump(out, sys.stdout)
    return 0


def score(model, examples, triad):
    """(worst relative difference, acc, acc_norm) of the examples against triad's {(example, choice): line}"""
    import numpy as np
    import torch

    worst, right, right_norm, flips = 0.0, 0, 0, 0
    for e, ex in enumerate(examples):
        sums, means, per_token = [], [], []
        for c, end in enumerate(ex["endings"]):
            seq = torch.tensor([ex["ctx"] + end])
            logits = model(seq[:, :-1])[0]
            loss = torch.nn.functional.cross_entropy(logits, seq[0, 1:], reduction="none")
            lp = -float(loss[len(ex["ctx"]) - 1:].double().sum())
            sums.append(lp)
            per_token.append(lp / len(end))
            if "chars" in ex:  # (a choice of whitespace alone: ll / 0 = -inf, as numpy divides)
                means.append(lp / ex["chars"][c] if ex["chars"][c] else -math.inf)
            else:
                means.append(lp / len(end))
            label, n, got = triad.pop((e, c), (None, None, None))
            if got is None or label != ex["label"] or n != len(end):
                raise SystemExit("example %d choice %d: triad's line is missing or differs (%s %s)" % (e, c, label, n))
            worst = max(worst, abs(got - lp) / abs(lp))
        right += int(np.argmax(sums)) == ex["label"]
        right_norm += int(np.argmax(means)) == ex["label"]
        flips += int(np.argmax(means)) != int(np.argmax(per_token))
    if triad:
        raise SystemExit("triad scored choices the reference has not: %s" % sorted(triad)[:4])
    return worst, right / len(examples), right_norm / len(examples), flips


def check(ckpt, scores, groups):
    """(torch, h5py and the model imported here alone: writing a file needs none of them)"""
    import h5py
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from llama_torch import Llama, deck_values  # the one independent model of the suite
    torch.set_num_threads(1)
    with h5py.File(ckpt, "r") as f:
        deck = f.attrs["deck"]
        cfg = deck_values(deck.decode() if isinstance(deck, bytes) else str(deck))
        model = Llama(f, cfg)
    lines = [line.rstrip("\n").split("\t") for line in open(scores) if not line.startswith("#")]
    good = True
    for k in range(0, len(groups), 4):
        name, examples, acc, acc_norm = groups[k], json.load(open(groups[k + 1])), groups[k + 2], groups[k + 3]
        triad = {(int(e), int(c)): (int(label), int(n), float(lp)) for task, e, c, label, n, lp in lines if task == name}
        with torch.no_grad():
            worst, ref_acc, ref_norm, flips = score(model, examples, triad)
        same = abs(ref_acc - float(acc)) < 5e-7 and abs(ref_norm - float(acc_norm)) < 5e-7
        print("%s: worst %.3e, acc %.6f acc_norm %.6f (triad %s %s); %d example(s) where the mean per token would "
              "choose another" % (name, worst, ref_acc, ref_norm, acc, acc_norm, flips))
        good = good and worst <= 1e-5 and same
    return 0 if good else 1


def main(argv):
    if argv[1] == "write":
        return write(json.load(open(argv[2])), argv[3])
    if argv[1] == "text2ids":
        return text2ids(argv[2], int(argv[3]) if len(argv) > 3 else None)
    if argv[1] == "texts":
        return texts(argv[2], argv[3])
    if argv[1] == "join":
        return join(argv[2], argv[3], int(argv[4]))
    if argv[1] == "check":
        return check(argv[2], argv[3], argv[4:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
