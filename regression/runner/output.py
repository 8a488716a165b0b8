"""Reading a run's outputs: the per-step metrics and allocated memory of
metrics.h5, the final norms of the checkpoint written at the last step, the
deck triad echoes, and the tail of the run's log."""

import glob
import os
import re

import h5py
import numpy as np

from .quantities import STEP_QUANTITIES, CaseError


def read_output(run_dir, want_final):
    """{'steps', q for per-step columns, 'allocated', 'deck', 'final': {q: {name: norm}}};
    want_final: a missing checkpoint of the last step is an error."""
    out = read_metrics(os.path.join(run_dir, "metrics.h5"))
    out["final"] = {}        # filled from the last step's checkpoint, where there is one
    ckpts = []
    for p in glob.glob(os.path.join(run_dir, "ckpt_*.h5")):
        m = re.match(r"ckpt_(\d+)\.h5$", os.path.basename(p))
        if m:
            ckpts.append((int(m.group(1)), p))
    last = int(out["steps"][-1]) if len(out["steps"]) else 0
    if not ckpts or max(ckpts)[0] != last:
        if want_final:
            raise CaseError("no checkpoint of the last step %d in %s (set io.save_final = .true.)"
                            % (last, run_dir))
        return out
    out["final"] = read_final(max(ckpts)[1])
    return out


def read_metrics(path):
    """metrics.h5: the per-step columns, rank 0's allocated bytes, the echoed deck."""
    out = {}
    with h5py.File(path, "r") as f:
        out["steps"] = np.asarray(f["metrics/step"][...], dtype=np.int64)
        for q in STEP_QUANTITIES:
            if "metrics/" + q in f:
                out[q] = np.asarray(f["metrics/" + q][...], dtype=np.float64)
        if "memory/allocated" in f:
            d = f["memory/allocated"]
            cols = d.attrs["columns"]
            cols = (cols.decode() if isinstance(cols, bytes) else str(cols)).split()
            out["allocated"] = dict(zip(cols, (int(x) for x in d[0])))
        deck = f.attrs.get("deck", b"")
        out["deck"] = deck.decode() if isinstance(deck, bytes) else str(deck)
    return out


def norm64(dset):
    a = np.asarray(dset[...], dtype=np.float64)
    return float(np.sqrt(np.sum(a * a)))


def read_final(path):
    """A checkpoint -> {'param_norm': {tensor: norm}, 'optim_norm': {state: norm}}."""
    with h5py.File(path, "r") as f:
        params = {}

        def visit(name, obj):
            if not isinstance(obj, h5py.Dataset):
                return
            if name.endswith("qkv_b"):
                # q, k and v thirds apart: softmax is invariant to the key bias, whose
                # gradient is rounding noise that AdamW turns into steps of up to lr.
                b = np.asarray(obj[...], dtype=np.float64).reshape(3, -1)
                for part, row in zip("qkv", b):
                    params["%s.%s" % (name, part)] = float(np.sqrt(np.sum(row * row)))
            else:
                params[name] = norm64(obj)
        f["model"].visititems(visit)
        optim = []
        if "optim" in f:
            for g in sorted(f["optim"]):
                sq = []
                f["optim"][g].visititems(lambda n, o: sq.append(norm64(o) ** 2) if isinstance(o, h5py.Dataset) else None)
                optim.append((g, float(np.sqrt(sum(sq)))))
    return {"param_norm": params, "optim_norm": dict(optim)}


def parse_deck(text):
    """The effective deck echoed by triad -> {'group.key': 'value'}"""
    keys, group = {}, None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("&"):
            group = s[1:].strip().lower()
        elif s == "/":
            group = None
        elif group and "=" in s:
            k, _, v = s.partition("=")
            keys["%s.%s" % (group, k.strip().lower())] = v.strip()
    return keys


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except (OSError, TypeError):
        return ""


def log_tail(res, n=25):
    """The last n lines of a case's log, headed by where the whole log is."""
    try:
        with open(res["log"], encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except (OSError, KeyError):
        return []
    return ["(output, last %d lines; all in %s)" % (min(n, len(lines)), res["log"])] + lines[-n:]
